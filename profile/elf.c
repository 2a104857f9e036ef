/* elf.c: what one ELF file says about its functions.
 *
 * Function bounds come, in order of trust, from .symtab, .dynsym, the PLT
 * (entries named after the .dynsym symbol their GOT slot is relocated
 * with), and .eh_frame FDEs, which survive strip: a stripped function is
 * still one FDE, named sub_<addr> by the symbolizer. Addresses here are
 * link-time virtual addresses; the symbolizer adds each mapping's bias.
 */
#include "profile/internal.h"

#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

/* A function while the table is being built: names are offsets into the
 * string buffer, which may still move. */
struct fn_tmp {
	uint64_t start, end;
	size_t name;		/* offset + 1 into strings, 0 = none */
	enum prof_bounds bounds;
	int prio;		/* lower wins among functions at one address */
};

struct builder {
	struct prof_elf *e;
	struct fn_tmp *fns;
	size_t n, cap;
};

static size_t intern(struct prof_elf *e, const char *s, const char *suffix)
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
		  enum prof_bounds bounds, int prio)
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
	size_t lo = 0, hi = b->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (b->fns[mid].start <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, back = 0; i > 0 && back < 8; i--, back++) {
		struct fn_tmp *f = &b->fns[i - 1];
		if (v >= f->start && (v < f->end || (f->end == f->start && v == f->start)))
			return f;
	}
	return NULL;
}

/* ------------------------------------------------------------ symbols */

static int load_symbols(struct builder *b, Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, bool dyn)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	if (!d)
		return 0;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym))
			break;
		int type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
		    sym.st_value == 0)
			continue;
		const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		/* among aliases prefer .symtab, then the name with the fewest
		 * leading underscores (getpid over __getpid), then binding */
		int bind = GELF_ST_BIND(sym.st_info), under = 0;
		while (name[under] == '_' && under < 3)
			under++;
		int prio = (dyn ? 100 : 0) + under * 10 +
			   (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2);
		size_t off = intern(b->e, name, NULL);
		if (!off || add_fn(b, sym.st_value, sym.st_value + sym.st_size, off,
				   dyn ? PROF_BOUNDS_DYNSYM : PROF_BOUNDS_SYMTAB, prio) < 0)
			return -ENOMEM;
		if (dyn)
			b->e->ndynsym++;
		else
			b->e->nsymtab++;
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
				if (name) {
					size_t off = intern(b->e, name, "@plt");
					if (!off || add_fn(b, sh.sh_addr + o, sh.sh_addr + o + ent, off,
							   PROF_BOUNDS_DYNSYM, 200) < 0) {
						free(slots);
						return -ENOMEM;
					}
					b->e->nplt++;
				}
				break;
			}
		}
	}
	free(slots);
	return 0;
}

/* ------------------------------------------------------------ .eh_frame */

struct rd {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t rd_n(struct rd *r, size_t n)
{
	uint64_t v = 0;

	if ((size_t)(r->end - r->p) < n) {
		r->bad = true;
		r->p = r->end;
		return 0;
	}
	memcpy(&v, r->p, n);	/* little endian */
	r->p += n;
	return v;
}

static uint64_t rd_uleb(struct rd *r)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (r->p < r->end) {
		uint8_t byte = *r->p++;
		if (shift < 64)
			v |= (uint64_t)(byte & 0x7f) << shift;
		shift += 7;
		if (!(byte & 0x80))
			return v;
	}
	r->bad = true;
	return v;
}

static int64_t rd_sleb(struct rd *r)
{
	int64_t v = 0;
	unsigned shift = 0;
	uint8_t byte = 0;

	while (r->p < r->end) {
		byte = *r->p++;
		if (shift < 64)
			v |= (int64_t)((uint64_t)(byte & 0x7f) << shift);
		shift += 7;
		if (!(byte & 0x80)) {
			if (shift < 64 && (byte & 0x40))
				v |= -(int64_t)((uint64_t)1 << shift);
			return v;
		}
	}
	r->bad = true;
	return v;
}

/* A DW_EH_PE_* encoded pointer; here is its link-time address. */
static uint64_t rd_encoded(struct rd *r, uint8_t enc, uint64_t here)
{
	uint64_t v;

	switch (enc & 0x0f) {
	case 0x00: v = rd_n(r, 8); break;
	case 0x01: v = rd_uleb(r); break;
	case 0x02: v = rd_n(r, 2); break;
	case 0x03: v = rd_n(r, 4); break;
	case 0x04: v = rd_n(r, 8); break;
	case 0x09: v = (uint64_t)rd_sleb(r); break;
	case 0x0a: v = (uint64_t)(int64_t)(int16_t)rd_n(r, 2); break;
	case 0x0b: v = (uint64_t)(int64_t)(int32_t)rd_n(r, 4); break;
	case 0x0c: v = rd_n(r, 8); break;
	default: r->bad = true; return 0;
	}
	if ((enc & 0x70) == 0x10)	/* pcrel */
		v += here;
	return v;
}

/* The FDE pointer encoding of the CIE at data[off], or -1. */
static int cie_encoding(const uint8_t *data, size_t len, size_t off)
{
	struct rd r = { data + off, data + len, false };
	uint64_t length = rd_n(&r, 4);

	if (length == 0xffffffffu)
		length = rd_n(&r, 8);
	if (r.bad || length > (uint64_t)(r.end - r.p))
		return -1;
	r.end = r.p + length;
	if (rd_n(&r, 4) != 0)	/* CIE id */
		return -1;
	uint8_t version = (uint8_t)rd_n(&r, 1);
	const char *aug = (const char *)r.p;
	size_t auglen = strnlen(aug, (size_t)(r.end - r.p));
	r.p += auglen + 1;
	if (r.p > r.end)
		return -1;
	rd_uleb(&r);			/* code alignment */
	rd_sleb(&r);			/* data alignment */
	if (version == 1)
		rd_n(&r, 1);		/* return register */
	else
		rd_uleb(&r);
	if (aug[0] != 'z')
		return 0x00;		/* absptr */
	rd_uleb(&r);			/* augmentation data length */
	for (size_t i = 1; i < auglen && !r.bad; i++) {
		uint8_t enc;
		switch (aug[i]) {
		case 'R':
			return (int)rd_n(&r, 1);
		case 'P':
			enc = (uint8_t)rd_n(&r, 1);
			rd_encoded(&r, enc & 0x7f, 0);
			break;
		case 'L':
			rd_n(&r, 1);
			break;
		case 'S': case 'B':
			break;
		default:
			return -1;
		}
	}
	return r.bad ? -1 : 0x00;
}

int prof_eh_frame__each_fde(const uint8_t *data, size_t len, uint64_t sec_addr,
			    prof_fde_at_fn fn, void *arg)
{
	size_t pos = 0, cie_off = SIZE_MAX;
	int enc = -1, nfde = 0;

	while (pos + 4 <= len) {
		struct rd r = { data + pos, data + len, false };
		uint64_t length = rd_n(&r, 4);
		if (length == 0)
			break;		/* terminator */
		if (length == 0xffffffffu)
			length = rd_n(&r, 8);
		if (r.bad || length > (uint64_t)(r.end - r.p) || length < 4)
			return nfde ? nfde : -EINVAL;
		size_t body = (size_t)(r.p - data), next = body + (size_t)length;
		r.end = data + next;
		uint32_t id = (uint32_t)rd_n(&r, 4);
		if (id != 0) {
			/* an FDE: id is the distance back to its CIE */
			if (id > body) {
				pos = next;
				continue;
			}
			size_t co = body - id;
			if (co != cie_off) {
				cie_off = co;
				enc = cie_encoding(data, len, co);
			}
			if (enc < 0 || enc == 0xff) {
				pos = next;
				continue;
			}
			uint64_t here = sec_addr + (uint64_t)(r.p - data);
			uint64_t start = rd_encoded(&r, (uint8_t)enc, here);
			uint64_t range = rd_encoded(&r, (uint8_t)(enc & 0x0f), 0);
			if (!r.bad && range) {
				fn(start, start + range, sec_addr + pos, arg);
				nfde++;
			}
		}
		pos = next;
	}
	return nfde;
}

struct fde_adapter {
	prof_fde_fn fn;
	void *arg;
};

static void without_address(uint64_t start, uint64_t end, uint64_t fde, void *arg)
{
	struct fde_adapter *a = arg;

	(void)fde;
	a->fn(start, end, a->arg);
}

int prof_eh_frame__parse(const uint8_t *data, size_t len, uint64_t sec_addr, prof_fde_fn fn,
			 void *arg)
{
	struct fde_adapter a = { fn, arg };

	return prof_eh_frame__each_fde(data, len, sec_addr, without_address, &a);
}

struct fde_ctx {
	struct builder *b;
	struct fn_tmp *fdes;
	size_t n, cap;
};

static void collect_fde(uint64_t start, uint64_t end, void *arg)
{
	struct fde_ctx *c = arg;

	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 1024;
		void *p = realloc(c->fdes, nc * sizeof(*c->fdes));
		if (!p)
			return;
		c->fdes = p;
		c->cap = nc;
	}
	c->fdes[c->n++] = (struct fn_tmp){ start, end, 0, PROF_BOUNDS_EH_FRAME, 300 };
}

/* Bytes of the file at link-time address v, up to the end of its segment. */
static const uint8_t *vaddr_bytes(Elf *elf, const struct prof_elf *e, uint64_t v, size_t *len)
{
	size_t flen;
	const uint8_t *raw = (const uint8_t *)elf_rawfile(elf, &flen);

	for (size_t i = 0; raw && i < e->nsegs; i++) {
		const struct prof_seg *s = &e->segs[i];
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
			prof_eh_frame__parse(d->d_buf, d->d_size, sh.sh_addr, collect_fde, &c);
		found = true;
	}
	if (!found && ehhdr) {
		size_t len;
		const uint8_t *h = vaddr_bytes(elf, b->e, ehhdr->p_vaddr, &len);
		if (h && len >= 8 && h[0] == 1) {
			struct rd r = { h + 4, h + len, false };
			uint64_t ptr = rd_encoded(&r, h[1], ehhdr->p_vaddr + 4);
			const uint8_t *f = r.bad ? NULL : vaddr_bytes(elf, b->e, ptr, &len);
			if (f)
				prof_eh_frame__parse(f, len, ptr, collect_fde, &c);
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
						 PROF_BOUNDS_EH_FRAME, 300) == 0)
			b->e->nfde++;
	free(c.fdes);
	return 0;
}

/* ------------------------------------------------------------ notes, segs */

static void load_build_id(struct prof_elf *e, Elf *elf, const GElf_Phdr *ph)
{
	Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph->p_offset, ph->p_filesz, ELF_T_NHDR);
	size_t off = 0, noff, doff;
	GElf_Nhdr nh;

	if (!d)
		return;
	while ((off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
		if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
		    memcmp((const char *)d->d_buf + noff, "GNU", 4) || nh.n_descsz > 20)
			continue;
		const uint8_t *id = (const uint8_t *)d->d_buf + doff;
		for (size_t i = 0; i < nh.n_descsz; i++)
			snprintf(e->build_id + 2 * i, 3, "%02x", id[i]);
		return;
	}
}

static int load_segments(struct prof_elf *e, Elf *elf, GElf_Phdr *ehhdr, bool *has_eh)
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
			e->segs[e->nsegs++] = (struct prof_seg){ ph.p_vaddr, ph.p_offset, ph.p_filesz,
								  ph.p_memsz };
		else if (ph.p_type == PT_NOTE && !e->build_id[0])
			load_build_id(e, elf, &ph);
		else if (ph.p_type == PT_GNU_EH_FRAME) {
			*ehhdr = ph;
			*has_eh = true;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ API */

static int load(struct prof_elf *e, Elf *elf, char *why, size_t whylen)
{
	struct builder b = { .e = e };
	GElf_Ehdr eh;
	GElf_Phdr ehhdr;
	bool has_eh = false;
	size_t shstrndx = 0;
	int r;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		prof_fmt(why, whylen, "not an ELF file");
		return -ENOEXEC;
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		prof_fmt(why, whylen, "not an x86-64 ELF file");
		return -ENOEXEC;
	}
	e->dyn = eh.e_type == ET_DYN;
	r = load_segments(e, elf, &ehhdr, &has_eh);
	if (r < 0)
		goto out;
	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		shstrndx = 0;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM)) {
			r = load_symbols(&b, elf, scn, &sh, sh.sh_type == SHT_DYNSYM);
			if (r < 0)
				goto out;
		}
	}
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
		e->fns[i] = (struct prof_fn){ b.fns[i].start, b.fns[i].end,
					      b.fns[i].name ? e->strings + b.fns[i].name - 1 : NULL,
					      b.fns[i].bounds };
	e->nfns = b.n;
out:
	free(b.fns);
	if (r == -ENOMEM)
		prof_fmt(why, whylen, "out of memory");
	return r;
}

int prof_elf__load(int fd, const void *image, size_t len, struct prof_elf **out, char *why,
		   size_t whylen)
{
	struct prof_elf *e;
	Elf *elf;
	int r;

	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		prof_fmt(why, whylen, "libelf: %s", elf_errmsg(-1));
		return -EINVAL;
	}
	elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : elf_memory((char *)image, len);
	if (!elf) {
		prof_fmt(why, whylen, "libelf: %s", elf_errmsg(-1));
		return -ENOEXEC;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		elf_end(elf);
		prof_fmt(why, whylen, "out of memory");
		return -ENOMEM;
	}
	r = load(e, elf, why, whylen);
	elf_end(elf);
	if (r < 0) {
		prof_elf__free(e);
		return r;
	}
	*out = e;
	return 0;
}

void prof_elf__free(struct prof_elf *e)
{
	if (!e)
		return;
	free(e->fns);
	free(e->segs);
	free(e->strings);
	free(e);
}

static size_t upper(const struct prof_elf *e, uint64_t v)
{
	size_t lo = 0, hi = e->nfns;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (e->fns[mid].start <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct prof_fn *prof_elf__find(const struct prof_elf *e, uint64_t v)
{
	size_t i = upper(e, v);

	/* a few steps back cover a function that encloses smaller ones */
	for (size_t back = 0; i > 0 && back < 8; i--, back++)
		if (v >= e->fns[i - 1].start && v < e->fns[i - 1].end)
			return &e->fns[i - 1];
	return NULL;
}

const struct prof_fn *prof_elf__next(const struct prof_elf *e, uint64_t v)
{
	size_t i = upper(e, v);

	return i < e->nfns ? &e->fns[i] : NULL;
}

int prof_elf__offset_to_vaddr(const struct prof_elf *e, uint64_t off, uint64_t *v)
{
	for (size_t i = 0; i < e->nsegs; i++) {
		const struct prof_seg *s = &e->segs[i];
		if (off >= s->offset && off < s->offset + (s->memsz > s->filesz ? s->memsz : s->filesz)) {
			*v = s->vaddr + (off - s->offset);
			return 0;
		}
	}
	/* page-aligned mapping offsets may start just below a segment */
	for (size_t i = 0; i < e->nsegs; i++) {
		const struct prof_seg *s = &e->segs[i];
		if (off < s->offset && s->offset - off < 4096) {
			*v = s->vaddr - (s->offset - off);
			return 0;
		}
	}
	return -ENOENT;
}
