/* An ELF image as mapped in memory: what its program headers, dynamic
 * section and .eh_frame_hdr tell, read through the reader (so the same
 * code serves live processes and ELF files laid out at their addresses). */
#include "cfg/internal.h"
#include "elf/elf.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void cfg__module_fini(struct cfg_module *m)
{
	for (size_t i = 0; i < m->npool; i++)
		free(m->pool[i]);
	free(m->pool);
	free(m->syms);
	free(m->fdes);
	free(m->slots);
	free(m->entries);
	free(m->colds);
	free(m->path);
	memset(m, 0, sizeof(*m));
}

static char *pool_add(struct cfg_module *m, char *s)
{
	if (!s || cfg__grow(&m->pool, &m->cpool, m->npool + 1, sizeof(*m->pool)) < 0) {
		free(s);
		return NULL;
	}
	m->pool[m->npool++] = s;
	return s;
}

int cfg__module_add_sym(struct cfg_module *m, uint64_t addr, uint64_t size, const char *name)
{
	if (cfg__grow(&m->syms, &m->csyms, m->nsyms + 1, sizeof(*m->syms)) < 0)
		return -ENOMEM;
	m->syms[m->nsyms++] = (struct cfg_sym){ addr, size, name };
	return 0;
}

int cfg__module_add_slot(struct cfg_module *m, uint64_t slot, const char *name)
{
	if (cfg__grow(&m->slots, &m->cslots, m->nslots + 1, sizeof(*m->slots)) < 0)
		return -ENOMEM;
	m->slots[m->nslots++] = (struct cfg_slot){ slot, name };
	return 0;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct cfg_sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* prefer sized symbols, then shorter names (no version aliases) */
	if ((x->size != 0) != (y->size != 0))
		return x->size ? -1 : 1;
	return (int)strlen(x->name) - (int)strlen(y->name);
}

static int fde_cmp(const void *a, const void *b)
{
	const struct cfg_fde *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static int slot_cmp(const void *a, const void *b)
{
	const struct cfg_slot *x = a, *y = b;
	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

void cfg__module_sort(struct cfg_module *m)
{
	if (!m->nsyms)
		goto fdes;
	qsort(m->syms, m->nsyms, sizeof(*m->syms), sym_cmp);
	/* keep one symbol per address */
	size_t k = 0;
	for (size_t i = 0; i < m->nsyms; i++)
		if (k == 0 || m->syms[k - 1].addr != m->syms[i].addr)
			m->syms[k++] = m->syms[i];
	m->nsyms = k;
fdes:
	if (m->nfdes)
		qsort(m->fdes, m->nfdes, sizeof(*m->fdes), fde_cmp);
	if (m->nslots)
		qsort(m->slots, m->nslots, sizeof(*m->slots), slot_cmp);
}

const struct cfg_sym *cfg__module_sym_at(const struct cfg_module *m, uint64_t addr)
{
	/* first symbol above addr */
	size_t lo = UTIL_UPPER_BOUND(m->syms, m->nsyms, addr, addr);
	if (lo == 0)
		return NULL;
	const struct cfg_sym *s = &m->syms[lo - 1];
	if (s->addr == addr || addr < s->addr + s->size)
		return s;
	return NULL;
}

const struct cfg_fde *cfg__module_fde_at(const struct cfg_module *m, uint64_t addr)
{
	size_t lo = UTIL_UPPER_BOUND(m->fdes, m->nfdes, start, addr);
	if (lo == 0)
		return NULL;
	const struct cfg_fde *f = &m->fdes[lo - 1];
	return addr < f->end ? f : NULL;
}

const char *cfg__module_slot_name(const struct cfg_module *m, uint64_t slot)
{
	size_t lo = 0, hi = m->nslots;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->slots[mid].slot < slot)
			lo = mid + 1;
		else if (m->slots[mid].slot > slot)
			hi = mid;
		else
			return m->slots[mid].name;
	}
	return NULL;
}

/* ------------------------------------------------------------ reading */

static int rd(struct cfg_reader *r, uint64_t addr, void *buf, size_t len)
{
	ssize_t n = cfg_reader__read(r, addr, buf, len);
	return n == (ssize_t)len ? 0 : -EFAULT;
}

static void *rd_alloc(struct cfg_reader *r, uint64_t addr, size_t len)
{
	if (len == 0 || len > (64u << 20))
		return NULL;
	void *p = malloc(len + 1);
	if (!p)
		return NULL;
	if (rd(r, addr, p, len) < 0) {
		free(p);
		return NULL;
	}
	((char *)p)[len] = '\0';
	return p;
}

/* DWARF's encodings over bytes read from memory: elf/'s cursor (its addr
 * is the runtime address of p). */
#define PE_OMIT 0xff

/* ------------------------------------------------------------ LSDA */

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The LSDA's header, then its call-site table: (start, length, landing
 * pad, action) entries, pads relative to LPStart (the FDE's start unless
 * the header says). */
int cfg__lsda_pads(struct cfg_reader *r, const struct cfg_fde *f, uint64_t **pads, size_t *n)
{
	*pads = NULL;
	*n = 0;
	if (!f->lsda)
		return 0;
	uint8_t h[64];
	ssize_t got = cfg_reader__read(r, f->lsda, h, sizeof(h));
	if (got < 4)
		return 0;
	struct elf_cursor c = { h, h + got, f->lsda, false };
	uint64_t lpstart = f->start;
	uint8_t enc = (uint8_t)elf_cursor__u(&c, 1);
	if (enc != PE_OMIT)
		lpstart = elf_cursor__ptr(&c, enc, 0);
	if ((uint8_t)elf_cursor__u(&c, 1) != PE_OMIT)	/* type table: catch clauses' types */
		elf_cursor__uleb(&c);
	uint8_t cs_enc = (uint8_t)elf_cursor__u(&c, 1);
	uint64_t cs_len = elf_cursor__uleb(&c);
	if (c.bad || cs_len == 0 || cs_len > (1u << 20) || (cs_enc & 0x70) != 0)
		return 0;
	uint64_t table = c.addr;
	uint8_t *t = rd_alloc(r, table, (size_t)cs_len);
	if (!t)
		return 0;
	struct elf_cursor e = { t, t + cs_len, table, false };
	size_t cap = 0;
	int err = 0;
	while (e.p < e.end && !e.bad && !err) {
		elf_cursor__ptr(&e, cs_enc, 0);	/* start */
		elf_cursor__ptr(&e, cs_enc, 0);	/* length */
		uint64_t lp = elf_cursor__ptr(&e, cs_enc, 0);
		elf_cursor__uleb(&e);		/* action */
		if (e.bad || !lp)
			continue;
		if (cfg__grow(pads, &cap, *n + 1, sizeof(**pads)) < 0)
			err = -ENOMEM;
		else
			(*pads)[(*n)++] = lpstart + lp;
	}
	free(t);
	if (err) {
		free(*pads);
		*pads = NULL;
		*n = 0;
		return err;
	}
	if (*n > 1)	/* qsort wants a non-null base even for 0 */
		qsort(*pads, *n, sizeof(**pads), u64_cmp);
	size_t k = 0;
	for (size_t i = 0; i < *n; i++)
		if (!k || (*pads)[k - 1] != (*pads)[i])
			(*pads)[k++] = (*pads)[i];
	*n = k;
	return 0;
}

/* Where .eh_frame ends: after the last FDE the header's table lists (a
 * CIE always comes before the FDEs that point back at it). 0 if unknown. */
static uint64_t eh_frame_end(struct cfg_reader *r, uint64_t hdr, const int32_t *t, uint64_t count)
{
	uint64_t last = 0;
	uint32_t len;

	for (uint64_t i = 0; i < count; i++)
		if (hdr + (uint64_t)(int64_t)t[2 * i + 1] > last)
			last = hdr + (uint64_t)(int64_t)t[2 * i + 1];
	if (!last || rd(r, last, &len, 4) < 0 || len == 0 || len == 0xffffffff)
		return 0;
	return last + 4 + len;
}

/* The FDEs of the .eh_frame that .eh_frame_hdr points at, read from the
 * reader in one piece and walked by elf/ (libdw). */
static void parse_eh_frame_hdr(struct cfg_reader *r, struct cfg_module *m, uint64_t hdr)
{
	uint8_t h[4 + 16];
	struct elf_eh_frame_hdr eh;
	if (rd(r, hdr, h, sizeof(h)) < 0 || elf_eh_frame_hdr__read(h, sizeof(h), hdr, &eh) < 0 ||
	    !eh.table || eh.count == 0 || eh.count > (1u << 22))
		return;
	uint64_t eh_frame = eh.eh_frame;
	int32_t *t = rd_alloc(r, eh.table, eh.count * 8);
	uint64_t end = t ? eh_frame_end(r, hdr, t, eh.count) : 0;
	free(t);
	if (end <= eh_frame)
		return;
	uint8_t *bytes = rd_alloc(r, eh_frame, end - eh_frame);
	struct elf_fde *f = NULL;
	size_t n = 0;
	if (bytes && elf_eh_frame__fdes(bytes, end - eh_frame, eh_frame, &f, &n) == 0 && n)
		m->fdes = calloc(n, sizeof(*m->fdes));
	for (size_t i = 0; m->fdes && i < n; i++)
		m->fdes[m->nfdes++] = (struct cfg_fde){ f[i].start, f[i].end, f[i].lsda, f[i].entry };
	free(f);
	free(bytes);
}

/* ------------------------------------------------------------ dynamic */

static uint64_t dyn_ptr(uint64_t v, uint64_t bias)
{
	/* ld.so relocates d_ptr entries in place; files and the vdso keep
	 * link-time values */
	return (bias && v < bias) ? v + bias : v;
}

/* How many dynamic symbols: DT_HASH's nchain or the end of DT_GNU_HASH's
 * chains; 0 when neither tells. DT_GNU_HASH covers only the symbols it
 * hashes (those from symoffset on): when it hashes none (an executable
 * that exports nothing), symoffset is no count at all, often 1 while its
 * imports sit above, so that case is 0 too and the relocations decide. */
static uint64_t dynsym_count(struct cfg_reader *r, uint64_t hash, uint64_t gnu_hash)
{
	uint32_t hh[4];
	if (hash && rd(r, hash, hh, 8) == 0)
		return hh[1];
	if (!gnu_hash || rd(r, gnu_hash, hh, 16) < 0)
		return 0;
	uint32_t nbuckets = hh[0], symoffset = hh[1], bloom = hh[2];
	if (nbuckets == 0 || nbuckets > (1u << 24) || bloom > (1u << 24))
		return 0;
	uint64_t buckets = gnu_hash + 16 + (uint64_t)bloom * 8;
	uint32_t *b = rd_alloc(r, buckets, (size_t)nbuckets * 4);
	if (!b)
		return 0;
	uint32_t last = 0;
	for (uint32_t i = 0; i < nbuckets; i++)
		if (b[i] > last)
			last = b[i];
	free(b);
	if (last < symoffset)	/* no bucket used: nothing hashed */
		return 0;
	uint64_t chain = buckets + (uint64_t)nbuckets * 4;
	for (uint32_t n = 0; n < (1u << 24); n++, last++) {
		uint32_t v;
		if (rd(r, chain + (uint64_t)(last - symoffset) * 4, &v, 4) < 0)
			return 0;
		if (v & 1)
			return (uint64_t)last + 1;
	}
	return 0;
}

/* The highest symbol index the PLT and dynamic relocations name. */
static uint64_t reloc_max_sym(struct cfg_reader *r, uint64_t jmprel, uint64_t pltrelsz,
			      uint64_t rela, uint64_t relasz)
{
	uint64_t maxsym = 0;
	uint64_t tabs[2][2] = { { jmprel, pltrelsz }, { rela, relasz } };
	for (int t = 0; t < 2; t++) {
		Elf64_Rela *v = rd_alloc(r, tabs[t][0], tabs[t][1]);
		for (uint64_t i = 0; v && i < tabs[t][1] / sizeof(*v); i++)
			if (ELF64_R_SYM(v[i].r_info) > maxsym)
				maxsym = ELF64_R_SYM(v[i].r_info);
		free(v);
	}
	return maxsym;
}

static void add_relocs(struct cfg_reader *r, struct cfg_module *m, uint64_t rela, uint64_t size,
		       const Elf64_Sym *syms, uint64_t nsyms, const char *str, uint64_t strsz)
{
	if (!rela || !size || size > (64u << 20))
		return;
	Elf64_Rela *v = rd_alloc(r, rela, size);
	if (!v)
		return;
	for (uint64_t i = 0; i < size / sizeof(*v); i++) {
		uint32_t type = ELF64_R_TYPE(v[i].r_info), si = ELF64_R_SYM(v[i].r_info);
		if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
			continue;
		if (si == 0 || (nsyms && si >= nsyms) || syms[si].st_name >= strsz)
			continue;
		/* relocation entries are never relocated themselves */
		cfg__module_add_slot(m, v[i].r_offset + m->bias, str + syms[si].st_name);
	}
	free(v);
}

static void add_entry(struct cfg_module *m, uint64_t a)
{
	if (a && cfg__grow(&m->entries, &m->centries, m->nentries + 1, sizeof(*m->entries)) == 0)
		m->entries[m->nentries++] = a;
}

/* Functions the loader calls through DT_INIT_ARRAY and friends. A PIE file
 * holds zeros there, filled by R_X86_64_RELATIVE relocations; memory holds
 * the addresses. */
static void add_array_entries(struct cfg_reader *r, struct cfg_module *m, uint64_t arr,
			      uint64_t size, uint64_t rela, uint64_t relasz)
{
	if (!arr || !size || size > 65536)
		return;
	uint64_t *v = rd_alloc(r, arr, size);
	Elf64_Rela *rl = relasz && relasz < (64u << 20) ? rd_alloc(r, rela, relasz) : NULL;
	for (uint64_t i = 0; v && i < size / 8; i++) {
		uint64_t a = v[i] ? dyn_ptr(v[i], m->bias) : 0;
		for (uint64_t k = 0; !a && rl && k < relasz / sizeof(*rl); k++)
			if (ELF64_R_TYPE(rl[k].r_info) == R_X86_64_RELATIVE &&
			    rl[k].r_offset + m->bias == arr + 8 * i)
				a = (uint64_t)rl[k].r_addend + m->bias;
		if (a && a != UINT64_MAX)
			add_entry(m, a);
	}
	free(v);
	free(rl);
}

static void parse_dynamic(struct cfg_reader *r, struct cfg_module *m, uint64_t dyn, uint64_t size)
{
	Elf64_Dyn *d = rd_alloc(r, dyn, size);
	if (!d)
		return;
	uint64_t symtab = 0, strtab = 0, strsz = 0, jmprel = 0, pltrelsz = 0, rela = 0,
		 relasz = 0, hash = 0, gnu_hash = 0;
	uint64_t arr[3] = { 0 }, arrsz[3] = { 0 };
	for (size_t i = 0; i < size / sizeof(*d) && d[i].d_tag != DT_NULL; i++) {
		uint64_t v = d[i].d_un.d_val;
		switch (d[i].d_tag) {
		case DT_INIT: add_entry(m, dyn_ptr(v, m->bias)); break;
		case DT_FINI: add_entry(m, dyn_ptr(v, m->bias)); break;
		case DT_INIT_ARRAY: arr[0] = dyn_ptr(v, m->bias); break;
		case DT_INIT_ARRAYSZ: arrsz[0] = v; break;
		case DT_FINI_ARRAY: arr[1] = dyn_ptr(v, m->bias); break;
		case DT_FINI_ARRAYSZ: arrsz[1] = v; break;
		case DT_PREINIT_ARRAY: arr[2] = dyn_ptr(v, m->bias); break;
		case DT_PREINIT_ARRAYSZ: arrsz[2] = v; break;
		case DT_SYMTAB: symtab = dyn_ptr(v, m->bias); break;
		case DT_STRTAB: strtab = dyn_ptr(v, m->bias); break;
		case DT_STRSZ: strsz = v; break;
		case DT_JMPREL: jmprel = dyn_ptr(v, m->bias); break;
		case DT_PLTRELSZ: pltrelsz = v; break;
		case DT_RELA: rela = dyn_ptr(v, m->bias); break;
		case DT_RELASZ: relasz = v; break;
		case DT_HASH: hash = dyn_ptr(v, m->bias); break;
		case DT_GNU_HASH: gnu_hash = dyn_ptr(v, m->bias); break;
		}
	}
	free(d);
	for (int k = 0; k < 3; k++)
		add_array_entries(r, m, arr[k], arrsz[k], rela, relasz);
	if (!symtab || !strtab || !strsz || strsz > (64u << 20))
		return;
	char *str = pool_add(m, rd_alloc(r, strtab, strsz));
	if (!str)
		return;
	uint64_t nsyms = dynsym_count(r, hash, gnu_hash);
	if (nsyms > (1u << 22))
		nsyms = 0;
	Elf64_Sym *syms = NULL;
	if (nsyms)
		syms = rd_alloc(r, symtab, nsyms * sizeof(*syms));
	if (!syms) {
		/* no count: read as far as the relocations need */
		uint64_t maxsym = reloc_max_sym(r, jmprel, pltrelsz, rela, relasz);
		nsyms = 0;
		if (maxsym && maxsym < (1u << 22))
			syms = rd_alloc(r, symtab, (maxsym + 1) * sizeof(*syms));
		if (!syms)
			return;
		nsyms = maxsym + 1;
	} else {
		for (uint64_t i = 1; i < nsyms; i++) {
			const Elf64_Sym *s = &syms[i];
			if (ELF64_ST_TYPE(s->st_info) != STT_FUNC &&
			    ELF64_ST_TYPE(s->st_info) != STT_GNU_IFUNC)
				continue;
			if (s->st_shndx == SHN_UNDEF || !s->st_value || s->st_name >= strsz)
				continue;
			cfg__module_add_sym(m, s->st_value + m->bias, s->st_size, str + s->st_name);
		}
	}
	add_relocs(r, m, jmprel, pltrelsz, syms, nsyms, str, strsz);
	add_relocs(r, m, rela, relasz, syms, nsyms, str, strsz);
	free(syms);
}

int cfg__module_parse_memory(struct cfg_reader *r, struct cfg_module *m, uint64_t base)
{
	Elf64_Ehdr eh;
	if (rd(r, base, &eh, sizeof(eh)) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 256)
		return cfg__reader_err(r, -ENOEXEC, "no x86-64 ELF header at %#lx",
				      (unsigned long)base);
	Elf64_Phdr ph[256];
	if (rd(r, base + eh.e_phoff, ph, eh.e_phnum * sizeof(*ph)) < 0)
		return cfg__reader_err(r, -EFAULT, "unreadable program headers at %#lx",
				      (unsigned long)(base + eh.e_phoff));
	uint64_t lowest = UINT64_MAX;
	for (int i = 0; i < eh.e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < lowest)
			lowest = ph[i].p_vaddr;
	if (lowest == UINT64_MAX)
		return cfg__reader_err(r, -ENOEXEC, "no PT_LOAD at %#lx", (unsigned long)base);
	m->bias = eh.e_type == ET_EXEC ? 0 : base - (lowest & ~(uint64_t)4095);
	if (eh.e_entry)
		add_entry(m, eh.e_entry + m->bias);
	for (int i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type == PT_DYNAMIC)
			parse_dynamic(r, m, ph[i].p_vaddr + m->bias, ph[i].p_memsz);
		else if (ph[i].p_type == PT_GNU_EH_FRAME)
			parse_eh_frame_hdr(r, m, ph[i].p_vaddr + m->bias);
	}
	return 0;
}
