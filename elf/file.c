/* file.c: what one ELF file (and its separate debug file) says about its
 * functions and names.
 *
 * Function bounds come, in order of trust, from .symtab, .dynsym, the PLT
 * (entries named after the .dynsym symbol their GOT slot is relocated
 * with), and .eh_frame FDEs, which survive strip: a stripped function is
 * still one FDE, named sub_<addr> by the symbolizer. Addresses here are
 * link-time virtual addresses; the symbolizer adds each mapping's bias.
 */
#include "elf/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* A function while the table is being built: names are offsets into the
 * string buffer, which may still move. */
struct fn_tmp {
	uint64_t start, end;
	size_t name;		/* offset + 1 into strings, 0 = none */
	enum elf_bounds bounds;
	int prio;		/* lower wins among functions at one address */
};

/* A named symbol while the table is being built. */
struct sym_tmp {
	size_t name;		/* offset + 1 into strings */
	uint64_t value, size;
	enum elf_sym_kind kind;
	bool local, dynamic;
	uint64_t got;		/* ELF_SYM_PLT's slot */
};

struct builder {
	struct elf_file *e;
	struct fn_tmp *fns;
	size_t n, cap;
	struct sym_tmp *syms;
	size_t nsyms, csyms;
	bool names;		/* keep every symbol by name (elf_load_opts.names) */
};

static size_t intern(struct elf_file *e, const char *s, const char *suffix)
{
	size_t l1 = strlen(s), l2 = suffix ? strlen(suffix) : 0, need = l1 + l2 + 1;

	if (e->strings_len + need > e->strings_cap) {
		size_t nc = e->strings_cap ? e->strings_cap : 4096;
		while (nc < e->strings_len + need)
			nc *= 2;
		char *p = realloc(e->strings, nc);
		if (!p)
			return 0;
		e->strings = p;
		e->strings_cap = nc;
	}
	size_t off = e->strings_len;
	memcpy(e->strings + off, s, l1);
	if (l2)
		memcpy(e->strings + off + l1, suffix, l2);
	e->strings[off + l1 + l2] = 0;
	e->strings_len += need;
	return off + 1;
}

static int add_fn(struct builder *b, uint64_t start, uint64_t end, size_t name,
		  enum elf_bounds bounds, int prio)
{
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 1024;
		void *p = realloc(b->fns, nc * sizeof(*b->fns));
		if (!p)
			return -ENOMEM;
		b->fns = p;
		b->cap = nc;
	}
	b->fns[b->n++] = (struct fn_tmp){ start, end, name, bounds, prio };
	return 0;
}

static int cmp_fn(const void *a, const void *b)
{
	const struct fn_tmp *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->prio > y->prio) - (x->prio < y->prio);
}

/* Sorts, and keeps one function per start address (the most trusted; a
 * sized one over a zero-sized one). */
static void sort_unique(struct builder *b)
{
	size_t k = 0;

	if (b->n > 1)	/* qsort's array may not be NULL, even when empty */
		qsort(b->fns, b->n, sizeof(*b->fns), cmp_fn);
	for (size_t i = 0; i < b->n; i++) {
		if (k && b->fns[k - 1].start == b->fns[i].start) {
			struct fn_tmp *keep = &b->fns[k - 1];
			if (keep->end == keep->start && b->fns[i].end > keep->end)
				keep->end = b->fns[i].end;
			continue;
		}
		b->fns[k++] = b->fns[i];
	}
	b->n = k;
}

/* The kept function whose range holds v (binary search on the builder). */
static struct fn_tmp *tmp_find(struct builder *b, uint64_t v)
{
	size_t lo = UTIL_UPPER_BOUND(b->fns, b->n, start, v);

	for (size_t i = lo, back = 0; i > 0 && back < 8; i--, back++) {
		struct fn_tmp *f = &b->fns[i - 1];
		if (v >= f->start && (v < f->end || (f->end == f->start && v == f->start)))
			return f;
	}
	return NULL;
}

/* ------------------------------------------------------------ symbols */

static int push_sym(struct builder *b, const struct sym_tmp *t)
{
	if (b->nsyms == b->csyms) {
		size_t nc = b->csyms ? b->csyms * 2 : 1024;
		void *p = realloc(b->syms, nc * sizeof(*b->syms));
		if (!p)
			return -ENOMEM;
		b->syms = p;
		b->csyms = nc;
	}
	b->syms[b->nsyms++] = *t;
	return 0;
}

static int add_sym(struct builder *b, size_t name, const GElf_Sym *sym, bool dyn)
{
	int type = GELF_ST_TYPE(sym->st_info);

	return push_sym(b, &(struct sym_tmp){
		name, sym->st_value, sym->st_size,
		type == STT_FUNC ? ELF_SYM_FUNC : type == STT_GNU_IFUNC ? ELF_SYM_IFUNC : ELF_SYM_DATA,
		GELF_ST_BIND(sym->st_info) == STB_LOCAL, dyn, 0 });
}

/* A symbol the resolver may name: defined, not a section, file or TLS
 * offset, and (in .dynsym) the default version, not a hidden older one. */
static bool nameable(const GElf_Sym *sym, Elf_Data *versyms, size_t i)
{
	int type = GELF_ST_TYPE(sym->st_info);
	GElf_Versym vs;

	if (sym->st_shndx == SHN_UNDEF || type == STT_SECTION || type == STT_FILE ||
	    type == STT_TLS || (sym->st_shndx == SHN_ABS && !sym->st_value))
		return false;
	return !(versyms && gelf_getversym(versyms, (int)i, &vs) && (vs & 0x8000));
}

static Elf_Data *versym_data(Elf *elf)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_GNU_versym)
			return elf_getdata(scn, NULL);
	return NULL;
}

static int load_symbols(struct builder *b, Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, bool dyn)
{
	Elf_Data *d = elf_getdata(scn, NULL), *versyms = dyn ? versym_data(elf) : NULL;
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	if (!d)
		return 0;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym))
			break;
		const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || !*name || !nameable(&sym, versyms, i))
			continue;
		int type = GELF_ST_TYPE(sym.st_info);
		bool fn = (type == STT_FUNC || type == STT_GNU_IFUNC) && sym.st_value;
		if (!fn && !b->names)
			continue;
		size_t off = intern(b->e, name, NULL);
		if (!off || (b->names && add_sym(b, off, &sym, dyn) < 0))
			return -ENOMEM;
		if (!fn)
			continue;
		/* among aliases prefer .symtab, then the name with the fewest
		 * leading underscores (getpid over __getpid), then binding */
		int bind = GELF_ST_BIND(sym.st_info), under = 0;
		while (name[under] == '_' && under < 3)
			under++;
		int prio = (dyn ? 100 : 0) + under * 10 +
			   (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2);
		if (add_fn(b, sym.st_value, sym.st_value + sym.st_size, off,
			   dyn ? ELF_BOUNDS_DYNSYM : ELF_BOUNDS_SYMTAB, prio) < 0)
			return -ENOMEM;
		if (dyn)
			b->e->ndynsym++;
		else
			b->e->nsymtab++;
	}
	return 0;
}

/* The symbol tables of elf (only .symtab: kind SHT_SYMTAB; both: 0). */
static int load_tables(struct builder *b, Elf *elf, unsigned only)
{
	Elf_Scn *scn = NULL;
	int r;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    (only && sh.sh_type != only))
			continue;
		if ((r = load_symbols(b, elf, scn, &sh, sh.sh_type == SHT_DYNSYM)) < 0)
			return r;
	}
	return 0;
}

/* ------------------------------------------------------------ PLT */

struct slot {
	uint64_t addr;
	const char *name;
};

static int cmp_slot(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

/* GOT slots relocated with a symbol (JUMP_SLOT, GLOB_DAT), sorted. */
static int collect_slots(Elf *elf, struct slot **out, size_t *nout)
{
	struct slot *v = NULL;
	size_t n = 0, cap = 0;
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
			continue;
		Elf_Scn *symscn = elf_getscn(elf, sh.sh_link);
		GElf_Shdr symsh;
		Elf_Data *rd = elf_getdata(scn, NULL), *sd;
		if (!rd || !symscn || !gelf_getshdr(symscn, &symsh) || !(sd = elf_getdata(symscn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Rela rela;
			GElf_Sym sym;
			if (!gelf_getrela(rd, (int)i, &rela))
				break;
			unsigned type = (unsigned)GELF_R_TYPE(rela.r_info);
			if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
				continue;
			if (!gelf_getsym(sd, (int)GELF_R_SYM(rela.r_info), &sym))
				continue;
			const char *name = elf_strptr(elf, symsh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			if (n == cap) {
				void *p = realloc(v, (cap = cap ? cap * 2 : 256) * sizeof(*v));
				if (!p) {
					free(v);
					return -ENOMEM;
				}
				v = p;
			}
			v[n++] = (struct slot){ rela.r_offset, name };
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_slot);
	*out = v;
	*nout = n;
	return 0;
}

static const char *slot_name(const struct slot *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid].addr == addr)
			return v[mid].name;
		if (v[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The PLT entry [start, end) that jumps through slot, named name@plt: a
 * function, and with opts.names a name the resolver takes (the one name a
 * stub has: profile/ and every command that takes a name agree). */
static int add_plt_entry(struct builder *b, uint64_t start, uint64_t end, uint64_t slot,
			 const char *name)
{
	size_t off = intern(b->e, name, "@plt");

	if (!off || add_fn(b, start, end, off, ELF_BOUNDS_DYNSYM, 200) < 0)
		return -ENOMEM;
	b->e->nplt++;
	if (!b->names)
		return 0;
	return push_sym(b, &(struct sym_tmp){ off, start, end - start, ELF_SYM_PLT, false, false,
					       slot });
}

/* Each entry of .plt/.plt.sec/.plt.got jumps through its GOT slot with
 * `jmp *disp32(%rip)` (ff 25), maybe after endbr64 and a bnd prefix; the
 * slot's relocation names the function. */
static int load_plt(struct builder *b, Elf *elf, size_t shstrndx)
{
	struct slot *slots = NULL;
	size_t nslots = 0;
	Elf_Scn *scn = NULL;
	int r = collect_slots(elf, &slots, &nslots);

	if (r < 0 || !nslots) {
		free(slots);
		return r;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *sn;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sn = elf_strptr(elf, shstrndx, sh.sh_name)) || strncmp(sn, ".plt", 4) ||
		    (sn[4] && strcmp(sn, ".plt.sec") && strcmp(sn, ".plt.got")))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		uint64_t ent = sh.sh_entsize >= 8 ? sh.sh_entsize : 16;
		if (!d || !d->d_buf || d->d_size < sh.sh_size)
			continue;
		const uint8_t *p = d->d_buf;
		for (uint64_t o = 0; o + ent <= sh.sh_size; o += ent) {
			for (uint64_t i = 0; i + 6 <= ent; i++) {
				if (p[o + i] != 0xff || p[o + i + 1] != 0x25)
					continue;
				int32_t disp;
				memcpy(&disp, p + o + i + 2, 4);
				uint64_t slot = sh.sh_addr + o + i + 6 + (uint64_t)(int64_t)disp;
				const char *name = slot_name(slots, nslots, slot);
				if (name && add_plt_entry(b, sh.sh_addr + o, sh.sh_addr + o + ent,
							  slot, name) < 0) {
					free(slots);
					return -ENOMEM;
				}
				break;
			}
		}
	}
	free(slots);
	return 0;
}

struct fde_ctx {
	struct builder *b;
	struct fn_tmp *fdes;
	size_t n, cap;
};

static void collect_fde(uint64_t start, uint64_t end, uint64_t fde, void *arg)
{
	struct fde_ctx *c = arg;

	(void)fde;

	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 1024;
		void *p = realloc(c->fdes, nc * sizeof(*c->fdes));
		if (!p)
			return;
		c->fdes = p;
		c->cap = nc;
	}
	c->fdes[c->n++] = (struct fn_tmp){ start, end, 0, ELF_BOUNDS_EH_FRAME, 300 };
}

/* Bytes of the file at link-time address v, up to the end of its segment. */
static const uint8_t *vaddr_bytes(Elf *elf, const struct elf_file *e, uint64_t v, size_t *len)
{
	size_t flen;
	const uint8_t *raw = (const uint8_t *)elf_rawfile(elf, &flen);

	for (size_t i = 0; raw && i < e->nsegs; i++) {
		const struct elf_seg *s = &e->segs[i];
		if (v >= s->vaddr && v < s->vaddr + s->filesz) {
			uint64_t off = s->offset + (v - s->vaddr);
			if (off >= flen)
				return NULL;
			*len = (size_t)(s->offset + s->filesz - off);
			if (off + *len > flen)
				*len = flen - (size_t)off;
			return raw + off;
		}
	}
	return NULL;
}

/* .eh_frame by section, or, with no section headers, through the
 * PT_GNU_EH_FRAME segment's eh_frame_ptr. */
static int load_eh_frame(struct builder *b, Elf *elf, size_t shstrndx, const GElf_Phdr *ehhdr)
{
	struct fde_ctx c = { .b = b };
	Elf_Scn *scn = NULL;
	bool found = false;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *sn;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(sn = elf_strptr(elf, shstrndx, sh.sh_name)) || strcmp(sn, ".eh_frame"))
			continue;
		Elf_Data *d = elf_rawdata(scn, NULL);
		if (d && d->d_buf)
			elf_eh_frame__each_fde(d->d_buf, d->d_size, sh.sh_addr, collect_fde, &c);
		found = true;
	}
	if (!found && ehhdr) {
		size_t len;
		const uint8_t *h = vaddr_bytes(elf, b->e, ehhdr->p_vaddr, &len);
		struct elf_eh_frame_hdr eh;
		if (h && elf_eh_frame_hdr__read(h, len, ehhdr->p_vaddr, &eh) == 0) {
			const uint8_t *f = vaddr_bytes(elf, b->e, eh.eh_frame, &len);
			if (f)
				elf_eh_frame__each_fde(f, len, eh.eh_frame, collect_fde, &c);
		}
	}
	/* an FDE names a function only where no symbol does; it also sizes a
	 * symbol that has no size */
	for (size_t i = 0; i < c.n; i++) {
		struct fn_tmp *f = tmp_find(b, c.fdes[i].start);
		if (f && f->start == c.fdes[i].start && f->end == f->start)
			f->end = c.fdes[i].end;
		else if (!f)
			c.fdes[i].prio = -1;	/* keep */
	}
	for (size_t i = 0; i < c.n; i++)
		if (c.fdes[i].prio < 0 && add_fn(b, c.fdes[i].start, c.fdes[i].end, 0,
						 ELF_BOUNDS_EH_FRAME, 300) == 0)
			b->e->nfde++;
	free(c.fdes);
	return 0;
}

/* ------------------------------------------------------------ notes, segs */

static int load_segments(struct elf_file *e, Elf *elf, GElf_Phdr *ehhdr, bool *has_eh)
{
	size_t n;

	if (elf_getphdrnum(elf, &n) < 0)
		return -EINVAL;
	e->segs = calloc(n ? n : 1, sizeof(*e->segs));
	if (!e->segs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD)
			e->segs[e->nsegs++] = (struct elf_seg){ ph.p_vaddr, ph.p_offset, ph.p_filesz,
								ph.p_memsz, (ph.p_flags & PF_X) != 0 };
		else if (ph.p_type == PT_NOTE && !e->build_id[0])
			elf__build_id(elf, ph.p_offset, ph.p_filesz, e->build_id);
		else if (ph.p_type == PT_GNU_EH_FRAME) {
			*ehhdr = ph;
			*has_eh = true;
		}
	}
	return 0;
}

static int load_debug_symbols(struct builder *b, Elf *elf, const struct elf_load_opts *o)
{
	Elf *dbg = NULL;
	int fd = elf__find_debug(b->e, elf, o, &dbg), r;

	if (fd < 0)
		return 0;	/* none installed: the file's own tables serve */
	r = load_tables(b, dbg, SHT_SYMTAB);
	elf_end(dbg);
	close(fd);
	return r;
}

/* ------------------------------------------------------------ names */

static int cmp_sym(const void *a, const void *b, void *strings)
{
	const struct sym_tmp *x = a, *y = b;
	const char *str = strings;
	int c = strcmp(str + x->name - 1, str + y->name - 1);

	if (c)
		return c;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	/* one entry per name and value: .symtab's binding over .dynsym's,
	 * then global over local */
	if (x->local != y->local)
		return x->local ? 1 : -1;
	return (x->dynamic > y->dynamic) - (x->dynamic < y->dynamic);
}

/* Sorts the symbols by name, one per (name, value), a definition seen in
 * both tables marked dynamic. */
static int finish_syms(struct builder *b)
{
	struct elf_file *e = b->e;
	size_t k = 0;

	if (b->nsyms > 1)
		qsort_r(b->syms, b->nsyms, sizeof(*b->syms), cmp_sym, e->strings);
	e->syms = calloc(b->nsyms ? b->nsyms : 1, sizeof(*e->syms));
	if (!e->syms)
		return -ENOMEM;
	for (size_t i = 0; i < b->nsyms; i++) {
		const struct sym_tmp *t = &b->syms[i];
		const char *name = e->strings + t->name - 1;
		struct elf_sym *prev = k ? &e->syms[k - 1] : NULL;
		if (prev && prev->value == t->value && !strcmp(prev->name, name)) {
			prev->dynamic |= t->dynamic;
			if (prev->kind == ELF_SYM_DATA && t->kind != ELF_SYM_DATA)
				prev->kind = t->kind;
			continue;
		}
		e->syms[k++] = (struct elf_sym){ name, t->value, t->size, t->kind, t->local,
						 t->dynamic, t->got };
	}
	e->nsyms = k;
	return 0;
}

const struct elf_sym *elf_file__syms_named(const struct elf_file *e, const char *name, size_t *n)
{
	size_t lo = 0, hi = e->nsyms;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (strcmp(e->syms[mid].name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (*n = 0; lo + *n < e->nsyms && !strcmp(e->syms[lo + *n].name, name); (*n)++)
		;
	return *n ? &e->syms[lo] : NULL;
}

uint64_t elf_file__base(const struct elf_file *e)
{
	uint64_t lo = UINT64_MAX;

	for (size_t i = 0; i < e->nsegs; i++)
		if (e->segs[i].vaddr < lo)
			lo = e->segs[i].vaddr;
	return lo == UINT64_MAX ? 0 : lo & ~(uint64_t)4095;
}

/* ------------------------------------------------------------ API */

static int load(struct elf_file *e, Elf *elf, const struct elf_load_opts *o, char *why,
		size_t whylen)
{
	struct builder b = { .e = e, .names = o->names };
	const struct elf_load_opts *debug = o->no_debug_file ? NULL : o;
	GElf_Ehdr eh;
	GElf_Phdr ehhdr;
	bool has_eh = false;
	size_t shstrndx = 0;
	int r;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		elf__fmt(why, whylen, "not an ELF file");
		return -ENOEXEC;
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		elf__fmt(why, whylen, "not an x86-64 ELF file");
		return -ENOEXEC;
	}
	e->dyn = eh.e_type == ET_DYN;
	r = load_segments(e, elf, &ehhdr, &has_eh);
	if (r < 0)
		goto out;
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		shstrndx = 0;
	if ((r = load_tables(&b, elf, 0)) < 0)
		goto out;
	/* a stripped file's .symtab is in its separate debug file */
	if (!e->nsymtab && debug && (r = load_debug_symbols(&b, elf, debug)) < 0)
		goto out;
	r = load_plt(&b, elf, shstrndx);
	if (r < 0)
		goto out;
	sort_unique(&b);
	r = load_eh_frame(&b, elf, shstrndx, has_eh ? &ehhdr : NULL);
	if (r < 0)
		goto out;
	sort_unique(&b);
	/* a zero-sized symbol runs to the next function */
	for (size_t i = 0; i < b.n; i++)
		if (b.fns[i].end <= b.fns[i].start)
			b.fns[i].end = i + 1 < b.n ? b.fns[i + 1].start : b.fns[i].start + 1;
	e->fns = calloc(b.n ? b.n : 1, sizeof(*e->fns));
	if (!e->fns) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < b.n; i++)
		e->fns[i] = (struct elf_fn){ b.fns[i].start, b.fns[i].end,
					      b.fns[i].name ? e->strings + b.fns[i].name - 1 : NULL,
					      b.fns[i].bounds };
	e->nfns = b.n;
	r = finish_syms(&b);
out:
	free(b.fns);
	free(b.syms);
	if (r == -ENOMEM)
		elf__fmt(why, whylen, "out of memory");
	return r;
}

int elf_file__load(int fd, const void *image, size_t len, const struct elf_load_opts *opts,
		   struct elf_file **out, char *why, size_t whylen)
{
	struct elf_load_opts o = { .sz = sizeof o };
	struct elf_file *e;
	Elf *elf;
	int r;

	*out = NULL;
	if (!UTIL_OPTS_COPY(&o, opts)) {
		elf__fmt(why, whylen, UTIL_OPTS_UNKNOWN);
		return -EINVAL;
	}
	if (elf_version(EV_CURRENT) == EV_NONE) {
		elf__fmt(why, whylen, "libelf: %s", elf_errmsg(-1));
		return -EINVAL;
	}
	elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : elf_memory((char *)image, len);
	if (!elf) {
		elf__fmt(why, whylen, "libelf: %s", elf_errmsg(-1));
		return -ENOEXEC;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		elf_end(elf);
		elf__fmt(why, whylen, "out of memory");
		return -ENOMEM;
	}
	if (fd < 0)
		o.no_debug_file = true;	/* memory (the vdso) has no path */
	r = load(e, elf, &o, why, whylen);
	elf_end(elf);
	if (r < 0) {
		elf_file__free(e);
		return r;
	}
	*out = e;
	return 0;
}

void elf_file__free(struct elf_file *e)
{
	if (!e)
		return;
	free(e->fns);
	free(e->syms);
	free(e->segs);
	free(e->strings);
	free(e);
}

static size_t upper(const struct elf_file *e, uint64_t v)
{
	size_t lo = UTIL_UPPER_BOUND(e->fns, e->nfns, start, v);

	return lo;
}

const struct elf_fn *elf_file__find(const struct elf_file *e, uint64_t v)
{
	size_t i = upper(e, v);

	/* a few steps back cover a function that encloses smaller ones */
	for (size_t back = 0; i > 0 && back < 8; i--, back++)
		if (v >= e->fns[i - 1].start && v < e->fns[i - 1].end)
			return &e->fns[i - 1];
	return NULL;
}

const struct elf_fn *elf_file__next(const struct elf_file *e, uint64_t v)
{
	size_t i = upper(e, v);

	return i < e->nfns ? &e->fns[i] : NULL;
}

int elf_file__offset_to_vaddr(const struct elf_file *e, uint64_t off, uint64_t *v)
{
	for (size_t i = 0; i < e->nsegs; i++) {
		const struct elf_seg *s = &e->segs[i];
		if (off >= s->offset && off < s->offset + (s->memsz > s->filesz ? s->memsz : s->filesz)) {
			*v = s->vaddr + (off - s->offset);
			return 0;
		}
	}
	/* page-aligned mapping offsets may start just below a segment */
	for (size_t i = 0; i < e->nsegs; i++) {
		const struct elf_seg *s = &e->segs[i];
		if (off < s->offset && s->offset - off < 4096) {
			*v = s->vaddr - (s->offset - off);
			return 0;
		}
	}
	return -ENOENT;
}
