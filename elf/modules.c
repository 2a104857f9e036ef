/* modules.c: a process's modules and the one resolver from a name to the
 * definitions of that name in them.
 *
 * Every command that takes a function's name (cfg, disas, loops, replace,
 * measure) and the linking of replacement code resolve here, so the same
 * name means the same function everywhere. A name defined at two addresses
 * (a static in two files, a static in the executable and a global in a
 * library) is refused with every candidate listed, never bound to one of
 * them silently; MODULE:NAME picks the module (by the base name of its
 * path: libc.so.6:strlen). A PLT stub is NAME@plt, as profile/ names it.
 */
#include "elf/internal.h"
#include "attach/attach.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

struct elf_modules {
	pid_t pid;
	struct elf_module *v;
	size_t n;
	uint64_t sig;		/* of the executable file mappings read */
};

/* What the executable file mappings are: a new one (dlopen), one gone or
 * another file at the same place changes it. FNV-1a over each mapping. */
static uint64_t maps_sig(const struct attach_maps *maps)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < attach_maps__count(maps); i++) {
		const struct attach_map *m = attach_maps__at(maps, i);
		if (!(m->prot & ATTACH_MAP_X) || m->path[0] != '/')
			continue;
		uint64_t v[4] = { m->start, m->end, m->offset, m->inode };
		const uint8_t *b = (const uint8_t *)v;
		for (size_t k = 0; k < sizeof v; k++)
			h = (h ^ b[k]) * 0x100000001b3ull;
	}
	return h;
}

bool elf_modules__current(const struct elf_modules *ms)
{
	struct attach_maps *maps;

	if (attach_maps__read(ms->pid, &maps) < 0)
		return false;
	bool same = maps_sig(maps) == ms->sig;
	attach_maps__free(maps);
	return same;
}

/* The mapping's path without the " (deleted)" a replaced file gets. */
static char *live_path(const char *path)
{
	const char *del = " (deleted)";
	size_t l = strlen(path), dl = strlen(del);

	if (l > dl && !strcmp(path + l - dl, del))
		l -= dl;
	return strndup(path, l);
}

static void module_fini(struct elf_module *m)
{
	elf_file__free((struct elf_file *)m->file);
	free((char *)m->path);
}

/* Loads the file mapped from first on (its lowest mapping), and its
 * extent over every mapping of the same file. */
static int module_init(struct elf_module *md, pid_t pid, const struct attach_maps *maps,
		       const struct attach_map *first, const char *exe)
{
	char root[32], why[256];
	struct elf_file *f = NULL;

	if (!(md->path = live_path(first->path)))
		return -ENOMEM;
	const char *slash = strrchr(md->path, '/');
	md->base_name = slash ? slash + 1 : md->path;
	md->dev = makedev(first->dev_major, first->dev_minor);
	md->ino = first->inode;
	md->exe = !strcmp(md->path, exe);
	md->lo = UINT64_MAX;
	for (size_t i = 0; i < attach_maps__count(maps); i++) {
		const struct attach_map *m = attach_maps__at(maps, i);
		if (m->inode != first->inode || strcmp(m->path, first->path))
			continue;
		md->lo = m->start < md->lo ? m->start : md->lo;
		md->hi = m->end > md->hi ? m->end : md->hi;
	}
	int fd = elf__open_mapped(pid, first);
	if (fd < 0)
		return 0;	/* unreadable: it names nothing */
	snprintf(root, sizeof root, "/proc/%d/root", (int)pid);
	struct elf_load_opts o = { .sz = sizeof o, .path = md->path, .root = root, .names = true };
	int rc = elf_file__load(fd, NULL, 0, &o, &f, why, sizeof why);
	close(fd);
	uint64_t v;
	if (rc < 0 || elf_file__offset_to_vaddr(f, first->offset, &v) < 0) {
		elf_file__free(f);
		return rc == -ENOMEM ? rc : 0;
	}
	md->bias = first->start - v;
	md->file = f;
	return 0;
}

/* The executable first, then the others in address order: the dynamic
 * linker's search order for the common case. */
static void exe_first(struct elf_modules *ms)
{
	for (size_t k = 1; k < ms->n; k++)
		if (ms->v[k].exe) {
			struct elf_module t = ms->v[k];
			memmove(&ms->v[1], &ms->v[0], k * sizeof t);
			ms->v[0] = t;
			return;
		}
}

int elf_modules__open(pid_t pid, struct elf_modules **out, char *why, size_t whylen)
{
	struct attach_maps *maps;
	char link[64], exe[4096] = "";
	int rc;

	*out = NULL;
	if ((rc = attach_maps__read(pid, &maps)) < 0) {
		elf__fmt(why, whylen, "cannot read the maps of process %d: %s", (int)pid,
			 strerror(-rc));
		return rc;
	}
	snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
	ssize_t l = readlink(link, exe, sizeof exe - 1);
	exe[l > 0 ? l : 0] = '\0';
	char *live_exe = live_path(exe);
	struct elf_modules *ms = calloc(1, sizeof *ms);
	size_t nm = attach_maps__count(maps);
	if (!live_exe || !ms || !(ms->v = calloc(nm + 1, sizeof *ms->v))) {
		rc = -ENOMEM;
		goto out;
	}
	ms->pid = pid;
	for (size_t i = 0; i < nm; i++) {
		const struct attach_map *m = attach_maps__at(maps, i);
		const struct attach_map *first = attach_maps__first_of(maps, m->path);
		if (!(m->prot & ATTACH_MAP_X) || m->path[0] != '/' || !first)
			continue;
		bool seen = false;
		for (size_t k = 0; k < ms->n && !seen; k++)
			seen = ms->v[k].ino == first->inode && ms->v[k].lo == first->start;
		if (seen)
			continue;
		if ((rc = module_init(&ms->v[ms->n++], pid, maps, first, live_exe)) < 0)
			goto out;
	}
	exe_first(ms);
	ms->sig = maps_sig(maps);
	*out = ms;
	rc = 0;
out:
	if (rc < 0) {
		elf__fmt(why, whylen, "out of memory");
		elf_modules__free(ms);
	}
	free(live_exe);
	attach_maps__free(maps);
	return rc;
}

void elf_modules__free(struct elf_modules *ms)
{
	if (!ms)
		return;
	for (size_t i = 0; i < ms->n; i++)
		module_fini(&ms->v[i]);
	free(ms->v);
	free(ms);
}

size_t elf_modules__count(const struct elf_modules *ms)
{
	return ms->n;
}

const struct elf_module *elf_modules__at(const struct elf_modules *ms, size_t i)
{
	return i < ms->n ? &ms->v[i] : NULL;
}

const struct elf_module *elf_modules__find(const struct elf_modules *ms, uint64_t a)
{
	for (size_t i = 0; i < ms->n; i++)
		if (a >= ms->v[i].lo && a < ms->v[i].hi)
			return &ms->v[i];
	return NULL;
}

const struct elf_sym *elf_module__plt_entry(const struct elf_module *m, uint64_t a)
{
	const struct elf_fn *fn = m->file ? elf_file__find(m->file, a - m->bias) : NULL;
	const struct elf_sym *s;
	size_t n;

	if (!fn || !fn->name || fn->start != a - m->bias)
		return NULL;
	s = elf_file__syms_named(m->file, fn->name, &n);
	for (size_t i = 0; s && i < n; i++)
		if (s[i].kind == ELF_SYM_PLT && s[i].value == fn->start)
			return &s[i];
	return NULL;
}

/* ------------------------------------------------------------ resolving */

#define MAX_DEFS 16

struct defs {
	struct elf_def v[MAX_DEFS];
	size_t n;		/* distinct addresses (may exceed MAX_DEFS) */
};

static void add_def(struct defs *d, const struct elf_module *m, const struct elf_sym *s)
{
	uint64_t a = s->value + m->bias;

	for (size_t i = 0; i < d->n && i < MAX_DEFS; i++)
		if (d->v[i].addr == a) {
			/* one function, two names in two tables: keep the global */
			if (d->v[i].sym->local && !s->local)
				d->v[i].sym = s;
			return;
		}
	if (d->n < MAX_DEFS)
		d->v[d->n] = (struct elf_def){ m, s, a };
	d->n++;
}

/* The module MODULE:NAME names; NULL (and *name untouched) when name has
 * no such prefix. A C++ name's "::" is no module. */
static const struct elf_module *module_prefix(const struct elf_modules *ms, const char **name)
{
	const char *colon = strchr(*name, ':');

	if (!colon || colon == *name || colon[1] == ':' || !colon[1])
		return NULL;
	size_t l = (size_t)(colon - *name);
	for (size_t i = 0; i < ms->n; i++) {
		const struct elf_module *m = &ms->v[i];
		if ((strlen(m->base_name) == l && !strncmp(m->base_name, *name, l)) ||
		    (strlen(m->path) == l && !strncmp(m->path, *name, l))) {
			*name = colon + 1;
			return m;
		}
	}
	return NULL;
}

static bool wanted(const struct elf_sym *s, enum elf_resolve_mode mode, bool globals)
{
	if (mode == ELF_RESOLVE_USER)
		return s->kind != ELF_SYM_DATA;
	if (s->kind == ELF_SYM_PLT)	/* a name for users: nothing links to it */
		return false;
	return globals ? !s->local : s->local;
}

static void collect(const struct elf_module *m, const char *name, enum elf_resolve_mode mode,
		    bool globals, struct defs *d)
{
	size_t n;
	const struct elf_sym *s = m->file ? elf_file__syms_named(m->file, name, &n) : NULL;

	for (size_t i = 0; s && i < n; i++)
		if (wanted(&s[i], mode, globals))
			add_def(d, m, &s[i]);
}

static void list_candidates(const struct defs *d, const char *name, enum elf_resolve_mode mode,
			    char *why, size_t whylen)
{
	size_t len;

	elf__fmt(why, whylen, "'%s' is ambiguous: %zu definitions (", name, d->n);
	for (size_t i = 0; i < d->n && i < MAX_DEFS && why && (len = strlen(why)) < whylen; i++)
		snprintf(why + len, whylen - len, "%s%s:%s at %#llx%s", i ? ", " : "",
			 d->v[i].module->base_name, name, (unsigned long long)d->v[i].addr,
			 d->v[i].sym->local ? " (static)" : "");
	if (why && (len = strlen(why)) < whylen)
		snprintf(why + len, whylen - len, "%s)%s", d->n > MAX_DEFS ? ", ..." : "",
			 mode == ELF_RESOLVE_USER ? "; give MODULE:NAME or the address" : "");
}

int elf_modules__resolve(const struct elf_modules *ms, const char *name,
			 enum elf_resolve_mode mode, struct elf_def *def, char *why,
			 size_t whylen)
{
	const char *full = name;
	const struct elf_module *only = module_prefix(ms, &name);
	struct defs d = { .n = 0 };

	/* linking: the first global in search order, as ld.so binds; only a
	 * name no module exports may be a static */
	for (int pass = 0; pass < (mode == ELF_RESOLVE_LINK ? 2 : 1) && !d.n; pass++)
		for (size_t i = 0; i < ms->n && !(mode == ELF_RESOLVE_LINK && !pass && d.n); i++)
			if (!only || only == &ms->v[i])
				collect(&ms->v[i], name, mode, pass == 0, &d);
	if (!d.n) {
		if (only)
			elf__fmt(why, whylen, "%s has no %s named %s", only->path,
				 mode == ELF_RESOLVE_USER ? "function" : "symbol", name);
		else
			elf__fmt(why, whylen, "process %d has no %s named %s", (int)ms->pid,
				 mode == ELF_RESOLVE_USER ? "function" : "symbol", full);
		return -ENOENT;
	}
	if (d.n > 1 && !(mode == ELF_RESOLVE_LINK && !d.v[0].sym->local)) {
		list_candidates(&d, full, mode, why, whylen);
		return -ENOTUNIQ;
	}
	*def = d.v[0];
	return 0;
}
