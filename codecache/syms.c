/* Names to addresses in a target: the function to replace or measure, and
 * what replacement code needs from the target (its libc's functions and
 * data), both through elf/'s one resolver: a function as every command
 * names it, an undefined symbol of replacement code as the dynamic linker
 * binds it (the executable first: it may hold copies of library data, e.g.
 * environ), a name defined twice refused with its candidates. An IFUNC
 * (memcpy, strlen...) names its resolver, not an implementation: padrone resolves it in its own copy of
 * the same library file (same device and inode, same CPU) and carries the
 * offset over; a target with a different copy is refused for that symbol.
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"
#include "elf/elf.h"

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

struct cc_syms {
	pid_t pid;
	struct elf_modules *ms;
	bool owns_ms;
	char errmsg[1024];
};

static int syms_new(pid_t pid, struct elf_modules *ms, bool owns, struct cc_syms **out)
{
	struct cc_syms *s = calloc(1, sizeof *s);

	if (!s)
		return -ENOMEM;
	*s = (struct cc_syms){ .pid = pid, .ms = ms, .owns_ms = owns };
	*out = s;
	return 0;
}

int cc_syms__open(pid_t pid, struct cc_syms **out, struct cc_error *err)
{
	struct elf_modules *ms;
	char why[512];
	int rc;

	*out = NULL;
	if ((rc = elf_modules__open(pid, &ms, why, sizeof why)) < 0)
		return cc__err(err, rc, "%s", why);
	if (syms_new(pid, ms, true, out) < 0) {
		elf_modules__free(ms);
		return cc__err(err, -ENOMEM, "out of memory");
	}
	return 0;
}

int cc_syms__wrap(pid_t pid, struct elf_modules *ms, struct cc_syms **out, struct cc_error *err)
{
	*out = NULL;
	return syms_new(pid, ms, false, out) < 0 ? cc__err(err, -ENOMEM, "out of memory") : 0;
}

void cc_syms__free(struct cc_syms *s)
{
	if (!s)
		return;
	if (s->owns_ms)
		elf_modules__free(s->ms);
	free(s);
}

int cc_syms__func(struct cc_syms *s, const char *name, struct cc_func *fn, struct cc_error *err)
{
	struct elf_def d;
	int rc = elf_modules__resolve(s->ms, name, ELF_RESOLVE_USER, &d, s->errmsg,
				      sizeof s->errmsg);

	if (rc < 0)
		return cc__err(err, rc, "%s", s->errmsg);
	if (d.sym->kind == ELF_SYM_IFUNC)
		return cc__err(err, -ENOTSUP, "%s in %s is an IFUNC: name the implementation it "
			    "selects", d.sym->name, d.module->path);
	fn->addr = d.addr;
	fn->size = d.sym->size;
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
static int resolve_ifunc(const struct elf_module *md, const char *name, uint64_t *addr)
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
	struct elf_def d;
	int rc = elf_modules__resolve(s->ms, name, ELF_RESOLVE_LINK, &d, s->errmsg,
				      sizeof s->errmsg);

	if (rc == -ENOENT)
		s->errmsg[0] = '\0';
	if (rc < 0)
		return rc;
	s->errmsg[0] = '\0';
	if (d.sym->kind != ELF_SYM_IFUNC) {
		*addr = d.addr;
		return 0;
	}
	if (resolve_ifunc(d.module, name, addr) == 0)
		return 0;
	snprintf(s->errmsg, sizeof s->errmsg, "%s is an IFUNC in %s, and padrone has no copy of "
		 "that file to see which implementation it selects", name, d.module->path);
	return -ENOTSUP;
}

const char *cc_syms__errmsg(const struct cc_syms *s)
{
	return s->errmsg;
}
