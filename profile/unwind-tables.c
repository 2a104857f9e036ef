/* unwind-tables.c: the unwind tables of a target's modules, for the walker
 * (unwind.c): each module's own .eh_frame_hdr search table where it lies
 * in the target's memory, else one built from the .eh_frame of the very
 * file the module maps, served at an address no process can map; and the
 * module set kept in step with the target's maps. */
#include "profile/unwind.h"

#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* ------------------------------------------------------------ modules */

static void module_drop_tables(struct uw_module *m)
{
	free(m->table);
	m->table = NULL;
	m->table_bytes = 0;
	m->tried = false;
}

void prof__uw_module_free(struct uw_module *m)
{
	module_drop_tables(m);
	free(m->path);
}

static bool same_file(const struct uw_module *m, const struct attach_map *mp)
{
	return m->inode == mp->inode && m->dev_major == mp->dev_major &&
	       m->dev_minor == mp->dev_minor && !strcmp(m->path, mp->path);
}

static int fail(struct uw_module *m, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct uw_module *m, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->why, sizeof m->why, fmt, ap);
	va_end(ap);
	return m->info = err;
}

/* The module's own search table, in its memory. */
static int tables_from_hdr(struct prof_unwinder *u, struct uw_module *m, uint64_t hdr)
{
	uint8_t h[4 + 8 + 8];

	if (prof__uw_read_mem(u, hdr, h, sizeof h) < 0)
		return fail(m, -EFAULT, "its .eh_frame_hdr at 0x%" PRIx64 " is unreadable", hdr);
	struct elf_eh_frame_hdr eh;
	if (elf_eh_frame_hdr__read(h, sizeof h, hdr, &eh) < 0 || !eh.table)
		return fail(m, -ENOTSUP, "its .eh_frame_hdr at 0x%" PRIx64 " has no search table "
			    "libunwind can use", hdr);
	m->di = (unw_dyn_info_t){ .start_ip = m->lo, .end_ip = m->hi,
				  .format = UNW_INFO_FORMAT_REMOTE_TABLE };
	m->di.u.rti.segbase = hdr;
	m->di.u.rti.table_data = eh.table;
	m->di.u.rti.table_len = eh.count * 8 / sizeof(unw_word_t);
	return m->info = 0;
}

struct fde_list {
	int32_t *v;		/* start, fde pairs */
	size_t n, cap;
	uint64_t bias, segbase;
	bool overflow;
};

static void add_fde(uint64_t start, uint64_t end, uint64_t fde, void *arg)
{
	struct fde_list *l = arg;
	int64_t s = (int64_t)(start + l->bias - l->segbase), f = (int64_t)(fde + l->bias - l->segbase);

	(void)end;
	if (s < INT32_MIN || s > INT32_MAX || f < INT32_MIN || f > INT32_MAX) {
		l->overflow = true;
		return;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 512;
		int32_t *v = realloc(l->v, cap * 2 * sizeof *v);
		if (!v) {
			l->overflow = true;
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[2 * l->n] = (int32_t)s;
	l->v[2 * l->n + 1] = (int32_t)f;
	l->n++;
}

static int pair_cmp(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* The .eh_frame section of an ELF file: its link-time address and bytes. */
static Elf_Data *eh_frame_section(Elf *e, uint64_t *addr)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(e, &shstrndx) < 0)
		return NULL;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS &&
		    (name = elf_strptr(e, shstrndx, sh.sh_name)) && !strcmp(name, ".eh_frame")) {
			*addr = sh.sh_addr;
			return elf_rawdata(scn, NULL);
		}
	}
	return NULL;
}

/* No .eh_frame_hdr mapped: a table made from the .eh_frame of the file the
 * module maps (the FDEs are then read from the target as usual). */
static int tables_from_file(struct prof_unwinder *u, struct uw_module *m, uint64_t bias)
{
	int fd = elf__open_mapped(u->pid, &m->exec);
	struct stat st;

	if (fd < 0)
		return fail(m, fd, "it maps no .eh_frame_hdr, and its file cannot be opened: %s",
			    strerror(-fd));
	if (fstat(fd, &st) < 0 || st.st_ino != m->inode || major(st.st_dev) != m->dev_major ||
	    minor(st.st_dev) != m->dev_minor) {
		close(fd);
		return fail(m, -ESTALE, "it maps no .eh_frame_hdr, and the file at its path is no "
			    "longer the one it maps");
	}
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	uint64_t addr = 0;
	Elf_Data *d = e ? eh_frame_section(e, &addr) : NULL;
	struct fde_list l = { .bias = bias, .segbase = addr + bias };
	uint8_t first[16];
	int rc = 0;
	if (!d || !d->d_buf || d->d_size < sizeof first)
		rc = fail(m, -ENOENT, "it has no .eh_frame_hdr, and its file no .eh_frame");
	else if (prof__uw_read_mem(u, addr + bias, first, sizeof first) < 0 ||
		 memcmp(first, d->d_buf, sizeof first) != 0)
		rc = fail(m, -ESTALE, "its .eh_frame in memory differs from its file's");
	else if (elf_eh_frame__each_fde(d->d_buf, d->d_size, addr, add_fde, &l) <= 0 || l.overflow)
		rc = fail(m, -EINVAL, "its file's .eh_frame cannot be indexed");
	if (e)
		elf_end(e);
	close(fd);
	if (rc < 0) {
		free(l.v);
		return rc;
	}
	qsort(l.v, l.n, 2 * sizeof *l.v, pair_cmp);
	m->table = l.v;
	m->table_bytes = l.n * 2 * sizeof *l.v;
	m->di = (unw_dyn_info_t){ .start_ip = m->lo, .end_ip = m->hi,
				  .format = UNW_INFO_FORMAT_REMOTE_TABLE };
	m->di.u.rti.segbase = l.segbase;
	m->di.u.rti.table_data = m->synth;
	m->di.u.rti.table_len = m->table_bytes / sizeof(unw_word_t);
	return m->info = 0;
}

/* The module's tables, found the first time they are needed. */
int prof__uw_module_tables(struct prof_unwinder *u, struct uw_module *m)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];

	if (m->tried)
		return m->info;
	m->tried = true;
	if (prof__uw_read_mem(u, m->base, &eh, sizeof eh) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof *ph ||
	    !eh.e_phnum || eh.e_phnum > 64 ||
	    prof__uw_read_mem(u, m->base + eh.e_phoff, ph, eh.e_phnum * sizeof *ph) < 0)
		return fail(m, -ENOEXEC, "no ELF header is mapped at 0x%" PRIx64, m->base);
	uint64_t lowest = UINT64_MAX, hdr = 0;
	for (unsigned i = 0; i < eh.e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < lowest)
			lowest = ph[i].p_vaddr;
		else if (ph[i].p_type == PT_GNU_EH_FRAME)
			hdr = ph[i].p_vaddr;
	if (lowest == UINT64_MAX)
		return fail(m, -ENOEXEC, "its ELF header at 0x%" PRIx64 " has no PT_LOAD", m->base);
	uint64_t bias = eh.e_type == ET_EXEC ? 0 : m->base - (lowest & ~(uint64_t)(PAGE - 1));
	return hdr ? tables_from_hdr(u, m, hdr + bias) : tables_from_file(u, m, bias);
}

static struct uw_module *module_add(struct prof_unwinder *u, const struct attach_map *first)
{
	if (u->nmods == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 32;
		struct uw_module *v = realloc(u->mods, cap * sizeof *v);
		if (!v)
			return NULL;
		u->mods = v;
		u->cap = cap;
	}
	struct uw_module *m = &u->mods[u->nmods];
	*m = (struct uw_module){ .base = first->start, .lo = UINT64_MAX, .inode = first->inode,
				 .dev_major = first->dev_major, .dev_minor = first->dev_minor,
				 .path = strdup(first->path), .synth = u->next_synth };
	if (!m->path)
		return NULL;
	u->next_synth += SYNTH_SPAN;
	u->nmods++;
	return m;
}

/* The modules of the current maps (kept with their tables when a module
 * is still mapped where it was). */
int prof__uw_modules_update(struct prof_unwinder *u)
{
	for (size_t i = 0; i < u->nmods; i++)
		u->mods[i].live = false;
	for (size_t i = 0; i < attach_maps__count(u->maps); i++) {
		const struct attach_map *mp = attach_maps__at(u->maps, i);
		if (!(mp->prot & ATTACH_MAP_X) || (mp->path[0] != '/' && strcmp(mp->path, "[vdso]")))
			continue;
		const struct attach_map *first = attach_maps__first_of(u->maps, mp->path);
		if (!first || first->offset != 0)
			continue;
		struct uw_module *m = NULL;
		for (size_t k = 0; k < u->nmods && !m; k++)
			if (u->mods[k].base == first->start && same_file(&u->mods[k], first))
				m = &u->mods[k];
		if (!m && !(m = module_add(u, first)))
			return -ENOMEM;
		if (!m->live) {
			m->live = true;
			m->new_lo = UINT64_MAX;
			m->new_hi = 0;
		}
		if (mp->start < m->new_lo) {
			m->new_lo = mp->start;
			m->exec = *mp;
		}
		if (mp->end > m->new_hi)
			m->new_hi = mp->end;
	}
	size_t kept = 0;
	for (size_t i = 0; i < u->nmods; i++)
		if (u->mods[i].live)
			u->mods[kept++] = u->mods[i];
		else
			prof__uw_module_free(&u->mods[i]);
	u->nmods = kept;
	for (size_t i = 0; i < u->nmods; i++) {
		struct uw_module *m = &u->mods[i];
		m->exec.path = m->path;
		if (m->new_lo != m->lo || m->new_hi != m->hi)
			module_drop_tables(m);	/* its code moved: look again */
		m->lo = m->new_lo;
		m->hi = m->new_hi;
	}
	return 0;
}

struct uw_module *prof__uw_module_at(struct prof_unwinder *u, uint64_t pc)
{
	for (size_t i = 0; i < u->nmods; i++)
		if (pc >= u->mods[i].lo && pc < u->mods[i].hi)
			return &u->mods[i];
	return NULL;
}

int prof__uw_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			    int need_unwind_info, void *arg)
{
	struct walk *w = arg;
	struct uw_module *m = prof__uw_module_at(w->u, ip);

	if (!m || prof__uw_module_tables(w->u, m) < 0)
		return -UNW_ENOINFO;
	return _Ux86_64_dwarf_search_unwind_table(as, ip, &m->di, pi, need_unwind_info, arg);
}
