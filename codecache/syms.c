/* Names to addresses in a target: the function to replace or measure, and
 * what replacement code needs from the target (its libc's functions and
 * data).
 *
 * Modules are the files mapped executable in /proc/PID/maps, read through
 * /proc/PID/map_files (so deleted files and other mount namespaces work);
 * the executable is searched first (it may hold copies of library data,
 * e.g. environ), then the others. .symtab before .dynsym; only the default
 * version of a versioned symbol. An IFUNC (memcpy, strlen...) names its
 * resolver, not an implementation: padrone resolves it in its own copy of
 * the same library file (same device and inode, same CPU) and carries the
 * offset over; a target with a different copy is refused for that symbol.
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct module {
	char *path;
	uint64_t bias;		/* runtime = st_value + bias */
	dev_t dev;
	ino_t ino;
	int fd;
	Elf *elf;
	bool exe;
};

struct cc_syms {
	pid_t pid;
	size_t n;
	struct module *m;
	char errmsg[512];
};

/* Load bias: where file offset 0 is mapped minus the vaddr it was linked at. */
static int open_module(struct module *md, pid_t pid, const struct attach_map *first)
{
	char path[96];
	struct stat st;
	size_t n;

	snprintf(path, sizeof path, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, first->start,
		 first->end);
	md->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (md->fd < 0) {
		snprintf(path, sizeof path, "/proc/%d/root", pid);
		char *full = malloc(strlen(path) + strlen(md->path) + 1);
		if (!full)
			return -ENOMEM;
		strcpy(full, path);
		strcat(full, md->path);
		md->fd = open(full, O_RDONLY | O_CLOEXEC);
		free(full);
		if (md->fd < 0)
			return -errno;
	}
	if (fstat(md->fd, &st) == 0) {
		md->dev = st.st_dev;
		md->ino = st.st_ino;
	}
	md->elf = elf_begin(md->fd, ELF_C_READ, NULL);
	if (!md->elf || elf_kind(md->elf) != ELF_K_ELF || elf_getphdrnum(md->elf, &n) < 0)
		return -ENOEXEC;
	GElf_Ehdr eh;
	gelf_getehdr(md->elf, &eh);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(md->elf, (int)i, &ph) && ph.p_type == PT_LOAD) {
			uint64_t v = ph.p_vaddr - (ph.p_offset - first->offset);
			md->bias = eh.e_type == ET_EXEC ? 0 : first->start - (v & ~4095ULL);
			return 0;
		}
	}
	return -ENOEXEC;
}

int cc_syms__open(pid_t pid, struct cc_syms **out, struct cc_error *err)
{
	struct attach_maps *maps;
	char exe[4096] = "", link[64];
	int rc;

	*out = NULL;
	elf_version(EV_CURRENT);
	if ((rc = attach_maps__read(pid, &maps)) < 0)
		return cc__err(err, rc, "cannot read the maps of process %d: %s", pid, strerror(-rc));
	snprintf(link, sizeof link, "/proc/%d/exe", pid);
	ssize_t l = readlink(link, exe, sizeof exe - 1);
	exe[l > 0 ? l : 0] = '\0';
	struct cc_syms *s = calloc(1, sizeof *s);
	size_t nm = attach_maps__count(maps);
	if (!s || !(s->m = calloc(nm + 1, sizeof *s->m))) {
		free(s);
		attach_maps__free(maps);
		return cc__err(err, -ENOMEM, "out of memory");
	}
	s->pid = pid;
	for (size_t i = 0; i < nm; i++) {
		const struct attach_map *mp = attach_maps__at(maps, i);
		if (!(mp->prot & ATTACH_MAP_X) || mp->path[0] != '/')
			continue;
		bool seen = false;
		for (size_t k = 0; k < s->n && !seen; k++)
			seen = strcmp(s->m[k].path, mp->path) == 0;
		const struct attach_map *first = attach_maps__first_of(maps, mp->path);
		if (seen || !first)
			continue;
		struct module *md = &s->m[s->n];
		md->fd = -1;
		md->path = strdup(mp->path);
		md->exe = strcmp(mp->path, exe) == 0;
		if (!md->path || open_module(md, pid, first) < 0) {
			if (md->elf)
				elf_end(md->elf);
			if (md->fd >= 0)
				close(md->fd);
			free(md->path);
			memset(md, 0, sizeof *md);
			continue;	/* unreadable: its symbols are not found */
		}
		s->n++;
	}
	attach_maps__free(maps);
	/* the executable first */
	for (size_t k = 1; k < s->n; k++)
		if (s->m[k].exe) {
			struct module t = s->m[k];
			memmove(&s->m[1], &s->m[0], k * sizeof t);
			s->m[0] = t;
		}
	*out = s;
	return 0;
}

void cc_syms__free(struct cc_syms *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		elf_end(s->m[i].elf);
		close(s->m[i].fd);
		free(s->m[i].path);
	}
	free(s->m);
	free(s);
}

struct hit {
	const struct module *md;
	GElf_Sym sym;
	bool found;
};

/* The defined symbol `name` of one table (wanted types), the default
 * version only; a global one wins over a local one. */
static bool find_in(const struct module *md, unsigned table, const char *name, bool funcs_only,
		    GElf_Sym *out)
{
	Elf_Scn *scn = cc__find_section(md->elf, table);
	Elf_Scn *vscn = table == SHT_DYNSYM ? cc__find_section(md->elf, SHT_GNU_versym) : NULL;
	Elf_Data *vd = vscn ? elf_getdata(vscn, NULL) : NULL;
	GElf_Shdr sh;
	bool found = false;

	if (!scn || !gelf_getshdr(scn, &sh) || !sh.sh_entsize)
		return false;
	Elf_Data *d = elf_getdata(scn, NULL);
	for (size_t i = 1; d && i < sh.sh_size / sh.sh_entsize; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
			continue;
		unsigned t = GELF_ST_TYPE(sym.st_info);
		if (funcs_only ? t != STT_FUNC && t != STT_GNU_IFUNC
			       : t == STT_SECTION || t == STT_FILE || t == STT_TLS)
			continue;
		const char *n = elf_strptr(md->elf, sh.sh_link, sym.st_name);
		if (!n || strcmp(n, name) != 0)
			continue;
		GElf_Versym vs;
		if (vd && gelf_getversym(vd, (int)i, &vs) && (vs & 0x8000))
			continue;	/* a hidden, older version */
		if (!found || (GELF_ST_BIND(out->st_info) == STB_LOCAL &&
			       GELF_ST_BIND(sym.st_info) != STB_LOCAL)) {
			*out = sym;
			found = true;
		}
	}
	return found;
}

static struct hit lookup(const struct cc_syms *s, const char *name, bool funcs_only)
{
	struct hit h = { 0 };

	for (size_t i = 0; i < s->n && !h.found; i++)
		for (unsigned t = 0; t < 2 && !h.found; t++)
			if (find_in(&s->m[i], t ? SHT_DYNSYM : SHT_SYMTAB, name, funcs_only, &h.sym)) {
				h.md = &s->m[i];
				h.found = true;
			}
	return h;
}

int cc_syms__func(struct cc_syms *s, const char *name, struct cc_func *fn, struct cc_error *err)
{
	struct hit h = lookup(s, name, true);

	if (!h.found)
		return cc__err(err, -ENOENT, "process %d has no function named %s", s->pid, name);
	if (GELF_ST_TYPE(h.sym.st_info) == STT_GNU_IFUNC)
		return cc__err(err, -ENOTSUP, "%s in %s is an IFUNC: name the implementation it "
			    "selects", name, h.md->path);
	fn->addr = h.sym.st_value + h.md->bias;
	fn->size = h.sym.st_size;
	fn->name = name;
	return 0;
}

/* dl_iterate_phdr: padrone's own copy of a file with this dev/inode. */
struct own {
	dev_t dev;
	ino_t ino;
	char path[4096];
	bool found;
};

static int find_own(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct own *o = arg;
	struct stat st;

	(void)size;
	if (info->dlpi_name[0] && stat(info->dlpi_name, &st) == 0 && st.st_dev == o->dev &&
	    st.st_ino == o->ino) {
		snprintf(o->path, sizeof o->path, "%s", info->dlpi_name);
		o->found = true;
		return 1;
	}
	return 0;
}

/* What an IFUNC selects here, carried over to the same file in the target. */
static int resolve_ifunc(const struct module *md, const char *name, uint64_t *addr)
{
	struct own o = { .dev = md->dev, .ino = md->ino };
	Dl_info info;

	dl_iterate_phdr(find_own, &o);
	if (!o.found)
		return -ENOENT;
	void *h = dlopen(o.path, RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return -ENOENT;
	void *p = dlsym(h, name);
	int ok = p && dladdr(p, &info) && info.dli_fname && strcmp(info.dli_fname, o.path) == 0;
	struct link_map *lm = NULL;
	if (ok && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm)
		*addr = (uint64_t)p - lm->l_addr + md->bias;
	else
		ok = 0;
	dlclose(h);
	return ok ? 0 : -ENOENT;
}

int cc_syms__resolve(void *arg, const char *name, uint64_t *addr)
{
	struct cc_syms *s = arg;
	struct hit h = lookup(s, name, false);

	s->errmsg[0] = '\0';
	if (!h.found)
		return -ENOENT;
	if (GELF_ST_TYPE(h.sym.st_info) != STT_GNU_IFUNC) {
		*addr = h.sym.st_value + h.md->bias;
		return 0;
	}
	if (resolve_ifunc(h.md, name, addr) == 0)
		return 0;
	snprintf(s->errmsg, sizeof s->errmsg, "%s is an IFUNC in %s, and padrone has no copy of "
		 "that file to see which implementation it selects", name, h.md->path);
	return -ENOTSUP;
}

const char *cc_syms__errmsg(const struct cc_syms *s)
{
	return s->errmsg;
}
