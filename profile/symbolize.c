/* symbolize.c: naming runtime addresses of one process.
 *
 * Mappings come from attach_maps (/proc/PID/maps). Each mapped file is
 * opened and read by elf/ (through /proc/PID/map_files/<range>, so deleted
 * files and files inside another mount namespace still open; with its
 * separate debug file when one is installed), loaded once, cached by
 * device and inode, and shared by build-id.
 * The vdso is read from the target's memory. Kernel addresses are named
 * from /proc/kallsyms. Addresses no ELF symbol covers (JIT code in
 * anonymous memory) are looked up in the perf map file the JIT writes.
 */
#include "profile/internal.h"

#include "attach/attach.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#define ARENA_BLOCK 65536
#define REFRESH_NS 50000000ull	/* re-read maps at most every 50 ms on a miss */
/* look at the perf map file at most once a second on a miss: re-indexing a
 * big one costs more than re-reading the maps */
#define PERFMAP_RECHECK_NS 1000000000ull

struct module {
	uint64_t dev, ino;
	char *path;		/* as in the maps; "[vdso]" for the vdso */
	const char *name;	/* interned path */
	const char *build_id;	/* interned */
	struct elf_file *elf;	/* NULL when it could not be loaded */
	bool owns_elf;
};

struct arena_block {
	struct arena_block *next;
	size_t used;
	char data[ARENA_BLOCK];
};

struct ksym {
	uint64_t addr;
	const char *name;
	const char *module;
};

struct prof_symbolizer {
	pid_t pid;
	struct attach_maps *maps;
	uint64_t maps_ns;
	char errmsg[512];
	struct module *mods;
	size_t nmods, modcap;
	struct arena_block *arena;
	/* interned strings, by content */
	const char **set;
	size_t setn, setcap;
	struct ksym *ks;
	size_t nks;
	bool ks_tried;
	struct prof_unwinder *uw;	/* for backtraces of uw_target */
	struct attach_target *uw_target;
	pid_t uw_pid;
	struct attach_map *noted;	/* mappings a sampler saw made */
	size_t nnoted;
	/* the perf map file: who may own it, what was read */
	pid_t nspid;
	uid_t uids[4];
	size_t nuids;
	struct prof_perfmap jit;
	uint64_t jit_ns;		/* last looked at; 0 = look again */
	const char *jit_module;		/* interned "[perf-N.map]" */
	char jit_path[128];
	int jit_err;
	bool gone;		/* prof_symbolizer__gone: the maps stay as read */
};

/* ------------------------------------------------------------ strings */

static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 0x100000001b3ull;
	return h;
}

static const char *arena_copy(struct prof_symbolizer *s, const char *str, size_t len)
{
	struct arena_block *b = s->arena;

	if (len + 1 > ARENA_BLOCK)
		return NULL;
	if (!b || b->used + len + 1 > ARENA_BLOCK) {
		b = malloc(sizeof(*b));
		if (!b)
			return NULL;
		b->next = s->arena;
		b->used = 0;
		s->arena = b;
	}
	char *p = b->data + b->used;
	memcpy(p, str, len);
	p[len] = 0;
	b->used += len + 1;
	return p;
}

static const char *intern(struct prof_symbolizer *s, const char *str)
{
	if ((s->setn + 1) * 2 > s->setcap) {
		size_t nc = s->setcap ? s->setcap * 2 : 1024;
		const char **ns = calloc(nc, sizeof(*ns));
		if (!ns)
			return "[out of memory]";
		for (size_t i = 0; i < s->setcap; i++)
			if (s->set[i]) {
				size_t j = str_hash(s->set[i]) & (nc - 1);
				while (ns[j])
					j = (j + 1) & (nc - 1);
				ns[j] = s->set[i];
			}
		free(s->set);
		s->set = ns;
		s->setcap = nc;
	}
	size_t j = str_hash(str) & (s->setcap - 1);
	for (; s->set[j]; j = (j + 1) & (s->setcap - 1))
		if (!strcmp(s->set[j], str))
			return s->set[j];
	const char *p = arena_copy(s, str, strlen(str));
	if (!p)
		return "[out of memory]";
	s->set[j] = p;
	s->setn++;
	return p;
}

const char *prof_symbolizer__intern(struct prof_symbolizer *s, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return intern(s, buf);
}

/* ------------------------------------------------------------ life */

int prof_symbolizer__new(pid_t pid, struct prof_symbolizer **out, struct prof_error *err)
{
	struct prof_symbolizer *s = calloc(1, sizeof(*s));
	int r;

	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	if (!s) {
		prof__seterr(err, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	s->pid = pid;
	r = attach_maps__read(pid, &s->maps);
	if (r < 0) {
		prof__seterr(err, r, r == -ENOENT || r == -ESRCH ? "no such process: %d" :
			    "cannot read the maps of process %d: %s", pid, strerror(-r));
		free(s);
		return r;
	}
	s->maps_ns = util_now_ns();
	prof_perfmap__init(&s->jit);
	s->jit_err = -ENOENT;
	/* now, while /proc/PID/status exists: the file may be read after the
	 * target is gone (then no uid but root's is trusted) */
	if (prof_perfmap__ids(pid, &s->nspid, s->uids) == 0)
		s->nuids = 4;
	*out = s;
	return 0;
}

void prof_symbolizer__free(struct prof_symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nmods; i++) {
		if (s->mods[i].owns_elf)
			elf_file__free(s->mods[i].elf);
		free(s->mods[i].path);
	}
	while (s->arena) {
		struct arena_block *b = s->arena;
		s->arena = b->next;
		free(b);
	}
	prof_unwinder__free(s->uw);
	attach_maps__free(s->maps);
	prof_perfmap__fini(&s->jit);
	free(s->mods);
	free(s->set);
	free(s->ks);
	free(s->noted);
	free(s);
}

int prof_symbolizer__note_mmaps(struct prof_symbolizer *s, const struct prof_mmap *m, size_t n)
{
	struct attach_map *v = realloc(s->noted, (s->nnoted + n) * sizeof(*v));

	if (!v) {
		snprintf(s->errmsg, sizeof(s->errmsg), "out of memory");
		return -ENOMEM;
	}
	s->noted = v;
	for (size_t i = 0; i < n; i++)
		v[s->nnoted++] = (struct attach_map){
			.start = m[i].start, .end = m[i].end, .offset = m[i].pgoff,
			.prot = ATTACH_MAP_R | ATTACH_MAP_X, .dev_major = m[i].maj,
			.dev_minor = m[i].min, .inode = m[i].ino, .path = intern(s, m[i].path),
		};
	return 0;
}

const char *prof_symbolizer__errmsg(const struct prof_symbolizer *s)
{
	return s->errmsg;
}

void prof_symbolizer__gone(struct prof_symbolizer *s)
{
	s->gone = true;
}

int prof_symbolizer__refresh(struct prof_symbolizer *s)
{
	struct attach_maps *m;

	if (s->gone) {
		snprintf(s->errmsg, sizeof(s->errmsg), "process %d has exited or exec'd: its maps "
			 "are the last ones read", s->pid);
		return -ESRCH;
	}
	int r = attach_maps__read(s->pid, &m);

	if (r < 0) {
		snprintf(s->errmsg, sizeof(s->errmsg), "cannot read the maps of process %d: %s",
			 s->pid, strerror(-r));
		return r;
	}
	attach_maps__free(s->maps);
	s->maps = m;
	s->maps_ns = util_now_ns();
	s->jit_ns = 0;
	return 0;
}

static const struct attach_map *find_map(struct prof_symbolizer *s, uint64_t addr);

ssize_t prof_symbolizer__read(struct prof_symbolizer *s, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
	if (s->gone)	/* whatever lives at that pid now is another program */
		return -ESRCH;
	ssize_t n = process_vm_readv(s->pid, &l, 1, &r, 1, 0);

	if (n >= 0)
		return n;
	/* /proc/PID/mem reads what process_vm_readv refuses (e.g. PROT_NONE),
	 * but only what is mapped: it would grow the stack down to an address
	 * below it (a garbage return address in a call chain) */
	if (!find_map(s, addr) || !(len = attach_mapped_len(s->pid, addr, len)))
		return -EFAULT;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", s->pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, buf, len, (off_t)addr);
	int e = errno;
	close(fd);
	return n < 0 ? -e : n;
}

/* ------------------------------------------------------------ modules */

static struct elf_file *load_vdso(struct prof_symbolizer *s, const struct attach_map *m,
				  char *why, size_t whylen)
{
	size_t len = (size_t)(m->end - m->start);
	uint8_t *img = malloc(len);
	struct elf_file *e = NULL;

	if (!img)
		return NULL;
	if (prof_symbolizer__read(s, m->start, img, len) == (ssize_t)len)
		elf_file__load(-1, img, len, NULL, &e, why, whylen);
	free(img);	/* prof_elf copies what it keeps */
	return e;
}

static struct module *module_for(struct prof_symbolizer *s, const struct attach_map *m)
{
	bool vdso = !strcmp(m->path, "[vdso]");
	uint64_t dev = ((uint64_t)m->dev_major << 32) | m->dev_minor;

	if (m->path[0] != '/' && !vdso)
		return NULL;	/* anonymous, heap, stack: no file to read */
	for (size_t i = 0; i < s->nmods; i++) {
		struct module *mod = &s->mods[i];
		if (vdso ? !strcmp(mod->path, "[vdso]") :
		    (mod->dev == dev && mod->ino == m->inode && !strcmp(mod->path, m->path)))
			return mod;
	}
	if (s->nmods == s->modcap) {
		size_t nc = s->modcap ? s->modcap * 2 : 32;
		void *p = realloc(s->mods, nc * sizeof(*s->mods));
		if (!p)
			return NULL;
		s->mods = p;
		s->modcap = nc;
	}
	struct module *mod = &s->mods[s->nmods];
	char why[256] = "";
	memset(mod, 0, sizeof(*mod));
	mod->path = strdup(m->path);
	if (!mod->path)
		return NULL;
	mod->dev = dev;
	mod->ino = m->inode;
	mod->name = intern(s, m->path);
	if (vdso) {
		mod->elf = load_vdso(s, m, why, sizeof(why));
	} else {
		int fd = elf__open_mapped(s->pid, m);
		char root[32];
		snprintf(root, sizeof root, "/proc/%d/root", (int)s->pid);
		struct elf_load_opts lo = { .sz = sizeof lo, .path = m->path, .root = root };
		if (fd >= 0) {
			elf_file__load(fd, NULL, 0, &lo, &mod->elf, why, sizeof(why));
			close(fd);
		}
	}
	mod->owns_elf = mod->elf != NULL;
	mod->build_id = intern(s, mod->elf ? mod->elf->build_id : "");
	/* the same file under another path (a hard link, a container's copy) */
	for (size_t i = 0; mod->elf && mod->build_id[0] && i < s->nmods; i++)
		if (s->mods[i].build_id == mod->build_id && s->mods[i].elf) {
			elf_file__free(mod->elf);
			mod->elf = s->mods[i].elf;
			mod->owns_elf = false;
			break;
		}
	s->nmods++;
	return mod;
}

static const char *base_name(const char *path)
{
	const char *p = strrchr(path, '/');
	return p ? p + 1 : path;
}

/* ------------------------------------------------------------ kernel */

static int cmp_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

static void load_kallsyms(struct prof_symbolizer *s)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512];
	size_t cap = 0;

	s->ks_tried = true;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a;
		char type, name[256], mod[128] = "";
		if (sscanf(line, "%llx %c %255s [%127[^]]]", &a, &type, name, mod) < 3)
			continue;
		if (!a || (type != 't' && type != 'T' && type != 'w' && type != 'W'))
			continue;
		if (s->nks == cap) {
			void *p = realloc(s->ks, (cap = cap ? cap * 2 : 65536) * sizeof(*s->ks));
			if (!p)
				break;
			s->ks = p;
		}
		s->ks[s->nks++] = (struct ksym){ a, intern(s, name),
						 mod[0] ? prof_symbolizer__intern(s, "[%s]", mod) :
							  intern(s, "[kernel.kallsyms]") };
	}
	fclose(f);
	qsort(s->ks, s->nks, sizeof(*s->ks), cmp_ksym);
}

static int lookup_kernel(struct prof_symbolizer *s, uint64_t addr, struct prof_sym *sym)
{
	if (!s->ks_tried)
		load_kallsyms(s);
	size_t lo = UTIL_UPPER_BOUND(s->ks, s->nks, addr, addr);
	sym->module = intern(s, "[kernel.kallsyms]");
	sym->build_id = "";
	if (lo == 0) {
		/* kallsyms hidden (kptr_restrict) or an address outside it */
		sym->name = intern(s, "[kernel]");
		sym->start = addr;
		sym->end = addr + 1;
		sym->bounds = PROF_BOUNDS_NONE;
		return -ENOENT;
	}
	const struct ksym *k = &s->ks[lo - 1];
	sym->name = k->name;
	sym->module = k->module;
	sym->start = k->addr;
	sym->end = lo < s->nks ? s->ks[lo].addr : addr + 1;
	sym->bounds = PROF_BOUNDS_SYMTAB;
	return 0;
}

/* ------------------------------------------------------------ lookup */

static const struct attach_map *find_map(struct prof_symbolizer *s, uint64_t addr)
{
	const struct attach_map *m = attach_maps__find(s->maps, addr);

	if (!m && util_now_ns() - s->maps_ns > REFRESH_NS && prof_symbolizer__refresh(s) == 0)
		m = attach_maps__find(s->maps, addr);
	/* code unmapped since it was sampled: the latest mapping noted */
	for (size_t i = s->nnoted; !m && i > 0; i--)
		if (addr >= s->noted[i - 1].start && addr < s->noted[i - 1].end)
			m = &s->noted[i - 1];
	return m;
}

/* ------------------------------------------------------------ perf map */

/* Reads the perf map file if it is new or has grown since last time. */
static void perfmap_check(struct prof_symbolizer *s)
{
	uint64_t now = util_now_ns();
	char path[sizeof(s->jit_path)];

	if (s->jit_ns && now - s->jit_ns < PERFMAP_RECHECK_NS)
		return;
	s->jit_ns = now;
	int fd = prof_perfmap__open(s->pid, s->nspid, s->uids, s->nuids, path, sizeof(path));
	if (fd < 0) {
		s->jit_err = fd;	/* keep what an earlier read found */
		return;
	}
	s->jit_err = prof_perfmap__update(&s->jit, fd);
	close(fd);
	if (strcmp(path, s->jit_path)) {
		snprintf(s->jit_path, sizeof(s->jit_path), "%s", path);
		s->jit_module = prof_symbolizer__intern(s, "[%s]", base_name(path));
	}
}

static int lookup_perfmap(struct prof_symbolizer *s, uint64_t addr, struct prof_sym *sym)
{
	perfmap_check(s);
	const struct prof_perfmap_ent *e = prof_perfmap__find(&s->jit, addr);
	if (!e)
		return -ENOENT;
	sym->name = intern(s, prof_perfmap__name(&s->jit, e));
	sym->module = s->jit_module;
	sym->build_id = "";
	sym->start = e->start;
	sym->end = e->end;
	sym->bounds = PROF_BOUNDS_PERFMAP;
	return 0;
}

void prof_symbolizer__perfmap_stats(const struct prof_symbolizer *s,
				    struct prof_perfmap_stats *st)
{
	memset(st, 0, sizeof(*st));
	snprintf(st->path, sizeof(st->path), "%s", s->jit_path);
	st->entries = s->jit.n;
	st->malformed = s->jit.malformed;
	st->dropped = s->jit.dropped;
	st->err = s->jit_err;
}

int prof_symbolizer__perfmap_find(struct prof_symbolizer *s, const char *name, uint64_t *start,
				  uint64_t *end)
{
	perfmap_check(s);
	for (size_t i = s->jit.n; i > 0; i--) {
		const struct prof_perfmap_ent *e = &s->jit.ents[i - 1];
		if (strcmp(prof_perfmap__name(&s->jit, e), name) ||
		    prof_perfmap__find(&s->jit, e->start) != e)
			continue;
		*start = e->start;
		*end = e->end;
		return 0;
	}
	return -ENOENT;
}

/* ------------------------------------------------------------ names */

/* elf/'s bounds are the first of profile's. */
static enum prof_bounds prof_bounds_of(enum elf_bounds b)
{
	switch (b) {
	case ELF_BOUNDS_SYMTAB: return PROF_BOUNDS_SYMTAB;
	case ELF_BOUNDS_DYNSYM: return PROF_BOUNDS_DYNSYM;
	case ELF_BOUNDS_EH_FRAME: return PROF_BOUNDS_EH_FRAME;
	case ELF_BOUNDS_NONE: break;
	}
	return PROF_BOUNDS_NONE;
}

/* Names addr from the ELF file mapped at m; else "module+0xoff". */
static int lookup_mapped(struct prof_symbolizer *s, const struct attach_map *m, uint64_t addr,
			 struct prof_sym *sym)
{
	struct module *mod = module_for(s, m);
	uint64_t fo = addr - m->start + m->offset, v = 0;
	sym->module = mod ? mod->name : intern(s, m->path[0] ? m->path : "[anon]");
	sym->build_id = mod ? mod->build_id : "";
	if (mod && mod->elf && elf_file__offset_to_vaddr(mod->elf, fo, &v) == 0) {
		const struct elf_fn *fn = elf_file__find(mod->elf, v);
		uint64_t bias = addr - v;
		if (fn) {
			sym->start = fn->start + bias;
			sym->end = fn->end + bias;
			sym->bounds = prof_bounds_of(fn->bounds);
			sym->name = fn->name ? intern(s, fn->name) :
				prof_symbolizer__intern(s, "sub_%llx", (unsigned long long)sym->start);
			return 0;
		}
		uint64_t base = elf_file__base(mod->elf);
		sym->name = prof_symbolizer__intern(s, "%s+0x%llx", base_name(sym->module),
						    (unsigned long long)(v - base));
	} else {
		const struct attach_map *first = m->path[0] ? attach_maps__first_of(s->maps, m->path) : NULL;
		uint64_t off = first ? addr - first->start : addr - m->start;
		sym->name = prof_symbolizer__intern(s, "%s+0x%llx",
						    m->path[0] ? base_name(m->path) : "[anon]",
						    (unsigned long long)off);
	}
	sym->start = addr;
	sym->end = addr + 1;
	sym->bounds = PROF_BOUNDS_NONE;
	return -ENOENT;
}

int prof_symbolizer__lookup(struct prof_symbolizer *s, uint64_t addr, struct prof_sym *sym)
{
	memset(sym, 0, sizeof(*sym));
	sym->addr = addr;
	sym->build_id = "";
	if (addr >= PROF_KERNEL_START)
		return lookup_kernel(s, addr, sym);
	const struct attach_map *m = find_map(s, addr);
	if (m && lookup_mapped(s, m, addr, sym) == 0)
		return 0;
	/* JIT code has no ELF file to name it (and a JIT may have freed it
	 * already): its own perf map, as perf report does */
	if (lookup_perfmap(s, addr, sym) == 0)
		return 0;
	if (m)
		return -ENOENT;	/* "module+0xoff", from lookup_mapped */
	sym->name = intern(s, "[unknown]");
	sym->module = intern(s, "[unknown]");
	sym->start = addr;
	sym->end = addr + 1;
	return -ENOENT;
}

int prof_symbolizer__mapping(struct prof_symbolizer *s, uint64_t addr, uint64_t *start,
			     uint64_t *end, const char **module)
{
	const struct attach_map *m = find_map(s, addr);

	if (!m)
		return -ENOENT;
	*start = m->start;
	*end = m->end;
	if (module)
		*module = intern(s, m->path[0] ? m->path : "[anon]");
	return 0;
}

uint64_t prof_symbolizer__limit(struct prof_symbolizer *s, uint64_t addr)
{
	const struct attach_map *m = find_map(s, addr);

	if (!m)
		return 0;
	struct module *mod = module_for(s, m);
	uint64_t v;
	if (mod && mod->elf &&
	    elf_file__offset_to_vaddr(mod->elf, addr - m->start + m->offset, &v) == 0) {
		const struct elf_fn *next = elf_file__next(mod->elf, v);
		if (next && next->start + (addr - v) < m->end)
			return next->start + (addr - v);
	}
	return m->end;
}

/* ------------------------------------------------------------ backtrace */

struct bt_ctx {
	struct prof_unwinder *u;
	pid_t tid;
	struct prof_walk_frame *walked;
	size_t max, n;
	struct prof_walk_stop *stop;
	int err;
};

/* With the world stopped. */
static int bt_walk(struct attach_target *t, void *arg)
{
	struct bt_ctx *c = arg;

	(void)t;
	if ((c->err = prof_unwinder__sync(c->u)) < 0)
		return c->err;
	c->n = prof_unwinder__walk(c->u, c->tid, c->walked, c->max, c->stop);
	return 0;
}

int prof_symbolizer__backtrace(struct prof_symbolizer *s, struct attach_target *t, pid_t tid,
			       struct prof_frame *frames, size_t max, struct prof_walk_stop *stop)
{
	struct prof_walk_stop st;
	struct bt_ctx c = { .tid = tid ? tid : attach_target__pid(t), .max = max,
			    .stop = stop ? stop : &st };
	struct prof_error err;
	int r;

	if (!max)
		return 0;
	if (s->uw && (s->uw_target != t || s->uw_pid != attach_target__pid(t))) {
		prof_unwinder__free(s->uw);
		s->uw = NULL;
	}
	if (!s->uw && (r = prof_unwinder__new(t, &s->uw, &err)) < 0) {
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", err.msg);
		return r;
	}
	s->uw_target = t;
	s->uw_pid = attach_target__pid(t);
	c.u = s->uw;
	if (!(c.walked = calloc(max, sizeof(*c.walked)))) {
		snprintf(s->errmsg, sizeof(s->errmsg), "out of memory");
		return -ENOMEM;
	}
	r = attach_target__stop(t);
	if (r < 0) {
		free(c.walked);
		snprintf(s->errmsg, sizeof(s->errmsg), "cannot stop the target: %s",
			 attach_target__errmsg(t));
		return r;
	}
	r = attach_target__call(t, bt_walk, &c);
	int rr = attach_target__resume(t);
	if (r == 0 && !c.n)
		r = -ESRCH;	/* its registers could not be read: gone? */
	if (r < 0) {
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", c.err ? strerror(-c.err) : c.stop->msg);
		free(c.walked);
		return r;
	}
	if (rr < 0) {
		free(c.walked);
		snprintf(s->errmsg, sizeof(s->errmsg), "cannot resume the target: %s",
			 attach_target__errmsg(t));
		return rr;
	}
	/* name the call site of each return address, not what follows it */
	for (size_t i = 0; i < c.n; i++) {
		bool ret = i && !c.walked[i].interrupted;
		frames[i].pc = c.walked[i].pc;
		frames[i].sp = c.walked[i].sp;
		prof_symbolizer__lookup(s, ret ? frames[i].pc - 1 : frames[i].pc, &frames[i].sym);
		frames[i].sym.addr = frames[i].pc;
	}
	free(c.walked);
	return (int)c.n;
}
