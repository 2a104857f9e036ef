/* The code cache: mappings inside the target, an allocator over them, and
 * the directory that lets a later session find them.
 *
 * Code areas are private anonymous r-x mappings and data areas rw-; both
 * are made by remote mmap(MAP_FIXED_NOREPLACE) in a gap of the target's maps
 * within +-2 GiB of the code they serve, and written only through
 * /proc/PID/mem, so no page of the target is ever writable and executable.
 * The cache grows by adding areas. "This process" (no target) works the
 * same way on the caller's own address space, for tests and benchmarks.
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static const char *const phase_names[] = {
	[CC_PHASE_NONE] = "", [CC_PHASE_OPEN] = "open", [CC_PHASE_ALLOCATE] = "allocate",
	[CC_PHASE_LOAD] = "load", [CC_PHASE_WRITE] = "write", [CC_PHASE_REDIRECT] = "redirect",
	[CC_PHASE_RESTORE] = "restore", [CC_PHASE_MEASURE] = "measure",
};

const char *cc_phase_name(enum cc_phase p)
{
	return p < sizeof phase_names / sizeof phase_names[0] && phase_names[p] ? phase_names[p] : "?";
}

int cc__fail(struct cc_cache *c, enum cc_phase phase, int err, const char *fmt, ...)
{
	char msg[sizeof c->errmsg - 16];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	c->phase = phase;
	snprintf(c->errmsg, sizeof c->errmsg, "%s: %s", cc_phase_name(phase), msg);
	return err;
}

const char *cc_cache__errmsg(const struct cc_cache *c) { return c->errmsg; }
enum cc_phase cc_cache__errphase(const struct cc_cache *c) { return c->phase; }
struct attach_target *cc_cache__target(const struct cc_cache *c) { return c->t; }

/* ------------------------------------------------------------- the space */

/* A target that exited (or exec'd) meanwhile: say that, not "bad address".
 * attach/ may not have seen the exit yet; a zombie has no memory left. */
static int gone_or(struct cc_cache *c, int rc)
{
	char path[64], buf[256];

	if (!c->t)
		return rc;
	/* an exiting process loses its memory a moment before it is a
	 * zombie: look a few times */
	for (int i = 0; i < 20; i++) {
		if (attach_target__state(c->t) != ATTACH_OK)
			return -ESRCH;
		snprintf(path, sizeof path, "/proc/%d/stat", c->pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -ESRCH;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		const char *paren = strrchr(buf, ')');
		if (paren && (paren[2] == 'Z' || paren[2] == 'X'))
			return -ESRCH;
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
	}
	return rc;
}

int cc__read(struct cc_cache *c, uint64_t addr, void *buf, size_t len)
{
	if (c->t) {
		ssize_t n = attach_target__read(c->t, addr, buf, len);
		if (n < 0)
			return gone_or(c, (int)n);
		return (size_t)n == len ? 0 : gone_or(c, -EFAULT);
	}
	ssize_t n = pread(c->memfd, buf, len, (off_t)addr);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

int cc__write(struct cc_cache *c, uint64_t addr, const void *buf, size_t len)
{
	if (c->t) {
		int rc = attach_target__write(c->t, addr, buf, len);
		return rc < 0 ? gone_or(c, rc) : 0;
	}
	/* /proc/self/mem writes through read-only and r-x pages, as in a
	 * target: the code stays unwritable through its mapping. */
	ssize_t n = pwrite(c->memfd, buf, len, (off_t)addr);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

/* A system call in the target (or here). 0 and *ret (raw, -errno on the
 * kernel's refusal), or the reason padrone could not make it. */
int cc__syscall(struct cc_cache *c, long nr, const uint64_t args[6], int64_t *ret)
{
	if (c->t)
		return attach_target__syscall(c->t, 0, nr, args, ret);
	long r = syscall(nr, args[0], args[1], args[2], args[3], args[4], args[5]);
	*ret = r < 0 ? -errno : r;
	return 0;
}

static int prot_of(unsigned p)
{
	return (p & CC_PROT_R ? PROT_READ : 0) | (p & CC_PROT_W ? PROT_WRITE : 0) |
	       (p & CC_PROT_X ? PROT_EXEC : 0);
}

/* mmap exactly at addr, never over something else. */
static int map_at(struct cc_cache *c, uint64_t addr, uint64_t size, unsigned prot)
{
	uint64_t a[6] = { addr, size, (uint64_t)prot_of(prot),
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, (uint64_t)-1, 0 };
	int64_t r;
	int rc = cc__syscall(c, SYS_mmap, a, &r);

	if (rc < 0)
		return cc__fail(c, CC_PHASE_ALLOCATE, rc, "could not run mmap in process %d: %s",
				c->pid, c->t ? attach_target__errmsg(c->t) : strerror(-rc));
	if (r < 0 && r > -4096)
		return cc__fail(c, CC_PHASE_ALLOCATE, (int)r, "mmap of %" PRIu64 " bytes at 0x%"
				PRIx64 " in process %d failed: %s", size, addr, c->pid,
				strerror((int)-r));
	if ((uint64_t)r != addr) {	/* a kernel without MAP_FIXED_NOREPLACE */
		uint64_t u[6] = { (uint64_t)r, size };
		cc__syscall(c, SYS_munmap, u, &r);
		return cc__fail(c, CC_PHASE_ALLOCATE, -EEXIST, "mmap at 0x%" PRIx64 " in process "
				"%d landed elsewhere", addr, c->pid);
	}
	return 0;
}

static int unmap(struct cc_cache *c, uint64_t addr, uint64_t size)
{
	uint64_t a[6] = { addr, size };
	int64_t r;
	int rc = cc__syscall(c, SYS_munmap, a, &r);
	return rc < 0 ? rc : (int)(r < 0 ? r : 0);
}

int cc__protect(struct cc_cache *c, uint64_t addr, uint64_t size, unsigned prot)
{
	uint64_t a[6] = { addr, size, (uint64_t)prot_of(prot) };
	int64_t r;
	int rc = cc__syscall(c, SYS_mprotect, a, &r);
	return rc < 0 ? rc : (int)(r < 0 ? r : 0);
}

/* ------------------------------------------------------------ directory */

int cc__dir_save(struct cc_cache *c)
{
	if (!c->dir_addr)
		return 0;
	int rc = cc__write(c, c->dir_addr, &c->dir, sizeof c->dir);
	if (rc < 0)
		return cc__fail(c, CC_PHASE_WRITE, rc, "cannot update the code cache's directory "
				"at 0x%" PRIx64 " in process %d: %s", c->dir_addr, c->pid,
				strerror(-rc));
	return 0;
}

/* Look for a directory an earlier session left. */
static int dir_find(struct cc_cache *c)
{
	struct attach_maps *m;
	int rc = attach_maps__read(c->pid, &m);

	if (rc < 0)
		return cc__fail(c, CC_PHASE_OPEN, rc, "cannot read the maps of process %d: %s",
				c->pid, strerror(-rc));
	for (size_t i = 0; i < attach_maps__count(m); i++) {
		const struct attach_map *mp = attach_maps__at(m, i);
		struct { char magic[16]; uint64_t self; uint32_t version, size; } h;
		if (mp->path[0] || mp->prot != (ATTACH_MAP_R | ATTACH_MAP_W) ||
		    mp->end - mp->start < sizeof c->dir)
			continue;
		if (cc__read(c, mp->start, &h, sizeof h) < 0 ||
		    memcmp(h.magic, CC_DIR_MAGIC, 16) != 0 || h.self != mp->start)
			continue;
		if (h.version != CC_DIR_VERSION || h.size != sizeof c->dir) {
			uint64_t at = mp->start;
			attach_maps__free(m);
			return cc__fail(c, CC_PHASE_OPEN, -EPROTO, "process %d has a code cache of "
					"another padrone version (directory v%u) at 0x%" PRIx64,
					c->pid, h.version, at);
		}
		uint64_t at = mp->start;
		attach_maps__free(m);
		if ((rc = cc__read(c, at, &c->dir, sizeof c->dir)) < 0)
			return cc__fail(c, CC_PHASE_OPEN, rc, "cannot read the code cache's directory "
					"in process %d", c->pid);
		c->dir_addr = at;
		return 0;
	}
	attach_maps__free(m);
	return 0;
}

int cc_cache__open(struct attach_target *t, const struct cc_cache_opts *opts,
		   struct cc_cache **out, struct cc_error *err)
{
	struct cc_cache *c = calloc(1, sizeof *c);

	*out = NULL;
	if (!c) {
		if (err)
			*err = (struct cc_error){ .err = -ENOMEM, .msg = "out of memory" };
		return -ENOMEM;
	}
	c->o = (struct cc_cache_opts){ .sz = sizeof c->o };
	if (!UTIL_OPTS_COPY(&c->o, opts)) {
		free(c);
		return cc__err(err, -EINVAL, UTIL_OPTS_UNKNOWN);
	}
	if (!c->o.code_size)
		c->o.code_size = 64 << 10;
	if (!c->o.data_size)
		c->o.data_size = 256 << 10;
	c->o.code_size = (c->o.code_size + 4095) & ~4095UL;
	c->o.data_size = (c->o.data_size + 4095) & ~4095UL;
	c->t = t;
	c->xref = c->o.xref;
	c->memfd = -1;
	c->pid = t ? attach_target__pid(t) : getpid();
	if (!t && (c->memfd = open("/proc/self/mem", O_RDWR | O_CLOEXEC)) < 0) {
		int rc = -errno;
		if (err)
			snprintf(err->msg, sizeof err->msg, "open: cannot open /proc/self/mem: %s",
				 strerror(errno));
		free(c);
		return rc;
	}
	int rc = dir_find(c);
	if (rc < 0) {
		if (err) {
			err->err = rc;
			snprintf(err->msg, sizeof err->msg, "%.500s", c->errmsg);
		}
		cc_cache__close(c);
		return rc;
	}
	*out = c;
	return 0;
}

void cc_cache__close(struct cc_cache *c)
{
	if (!c)
		return;
	if (c->memfd >= 0)
		close(c->memfd);
	cc__unwinder_free(c);
	if (c->own_xref)
		cc_xref__free(c->xref);
	free(c);
}

bool cc_cache__exists(const struct cc_cache *c)
{
	return c->dir_addr != 0;
}

int cc__grow(void *vp, size_t *cap, size_t need, size_t size, size_t first)
{
	void **v = vp;

	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap : first;
	while (nc < need)
		nc *= 2;
	void *p = realloc(*v, nc * size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = nc;
	return 0;
}

/* ------------------------------------------------------------ allocation */

#define GUARD 4096	/* the inaccessible page below the directory */

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

bool cc__in_reach(uint64_t near, uint64_t addr, uint64_t size)
{
	if (!near)
		return true;
	uint64_t lo = addr < near ? near - addr : addr - near;
	uint64_t end = addr + size;
	uint64_t hi = end < near ? near - end : end - near;
	return lo <= CC_REACH && hi <= CC_REACH;
}

/* A new area of kind near `near`; returns its index. */
static int area_new(struct cc_cache *c, unsigned kind, uint64_t size, uint64_t near)
{
	struct attach_maps *m;
	uint64_t lo = 0x10000, hi = 1ULL << 47, at;
	int rc;

	if (c->dir.nareas == CC_MAX_AREAS)
		return cc__fail(c, CC_PHASE_ALLOCATE, -ENOSPC, "the code cache of process %d has "
				"its maximum of %d mappings", c->pid, CC_MAX_AREAS);
	if (!near)
		near = c->dir_addr ? c->dir_addr : 1ULL << 45;
	if (near > CC_REACH + lo)
		lo = near - CC_REACH + size;
	if (near < hi - CC_REACH)
		hi = near + CC_REACH - size;
	for (int attempt = 0; attempt < 4; attempt++) {
		if ((rc = attach_maps__read(c->pid, &m)) < 0)
			return cc__fail(c, CC_PHASE_ALLOCATE, rc, "cannot read the maps of process "
					"%d: %s", c->pid, strerror(-rc));
		rc = attach_maps__find_gap(m, lo, hi, size, 4096, near, &at);
		attach_maps__free(m);
		if (rc < 0)
			return cc__fail(c, CC_PHASE_ALLOCATE, -ENOSPC, "no free %" PRIu64 " bytes "
					"within +-2 GiB of 0x%" PRIx64 " in process %d", size, near,
					c->pid);
		rc = map_at(c, at, size, kind == CC_AREA_CODE ? CC_PROT_R | CC_PROT_X :
				  kind == CC_AREA_DATA ? CC_PROT_R | CC_PROT_W : 0);
		if (rc != -EEXIST)	/* raced with the target's own mmap: retry */
			break;
	}
	if (rc < 0)
		return rc;
	struct cc_dir_area *a = &c->dir.areas[c->dir.nareas];
	*a = (struct cc_dir_area){ .addr = at, .size = size, .kind = kind };
	return (int)c->dir.nareas++;
}

/* The directory goes at the start of the first data area, found again by
 * that mapping's start. An inaccessible page below it keeps it the start:
 * the kernel merges adjacent anonymous mappings of the same protection, and
 * a data area (or one of the target's own) mapped just below would
 * otherwise swallow it and hide the directory from later sessions. */
static int dir_create(struct cc_cache *c, uint64_t near)
{
	uint64_t size = align_up(sizeof c->dir, 4096);
	int rc;

	if (size < c->o.data_size)
		size = c->o.data_size;
	int i = area_new(c, CC_AREA_DATA, GUARD + size, near);
	if (i < 0)
		return i;
	struct cc_dir_area *a = &c->dir.areas[i];
	if ((rc = cc__protect(c, a->addr, GUARD, 0)) < 0) {
		unmap(c, a->addr, a->size);
		c->dir.nareas--;
		return cc__fail(c, CC_PHASE_ALLOCATE, rc, "mprotect in process %d failed: %s",
				c->pid, strerror(-rc));
	}
	a->addr += GUARD;
	a->size -= GUARD;
	memcpy(c->dir.magic, CC_DIR_MAGIC, 16);
	c->dir.self = c->dir.areas[i].addr;
	c->dir.version = CC_DIR_VERSION;
	c->dir.size = sizeof c->dir;
	c->dir.next_id = 1;
	c->dir.areas[i].used = align_up(sizeof c->dir, 64);
	c->dir_addr = c->dir.self;
	return cc__dir_save(c);
}

static int take_free(struct cc_cache *c, unsigned kind, uint64_t size, uint64_t align,
		     uint64_t near, uint64_t *addr)
{
	for (uint32_t i = 0; i < c->dir.nfree; i++) {
		struct cc_dir_block *b = &c->dir.free[i];
		uint64_t a = align_up(b->addr, align);
		if (b->kind != kind || a + size > b->addr + b->size || !cc__in_reach(near, a, size))
			continue;
		struct cc_dir_block head = { b->addr, a - b->addr, kind, 0 };
		struct cc_dir_block tail = { a + size, b->addr + b->size - (a + size), kind, 0 };
		c->dir.free[i] = c->dir.free[--c->dir.nfree];
		if (head.size && c->dir.nfree < CC_MAX_FREE)
			c->dir.free[c->dir.nfree++] = head;
		if (tail.size && c->dir.nfree < CC_MAX_FREE)
			c->dir.free[c->dir.nfree++] = tail;
		*addr = a;
		return 0;
	}
	return -ENOENT;
}

int cc_cache__alloc(struct cc_cache *c, enum cc_area area, size_t size, size_t align,
		    uint64_t near, uint64_t *addr)
{
	unsigned kind = area == CC_CODE ? CC_AREA_CODE : CC_AREA_DATA;
	int rc;

	if (!align)
		align = 16;
	if (size == 0 || (align & (align - 1)) || align > 4096)
		return cc__fail(c, CC_PHASE_ALLOCATE, -EINVAL, "bad allocation request (%zu bytes, "
				"alignment %zu)", size, align);
	if (!c->dir_addr && (rc = dir_create(c, near)) < 0)
		return rc;
	if (take_free(c, kind, size, align, near, addr) == 0)
		return cc__dir_save(c);
	for (uint32_t i = 0; i < c->dir.nareas; i++) {
		struct cc_dir_area *a = &c->dir.areas[i];
		uint64_t at = align_up(a->addr + a->used, align);
		if (a->kind != kind || at + size > a->addr + a->size || !cc__in_reach(near, at, size))
			continue;
		a->used = at + size - a->addr;
		*addr = at;
		return cc__dir_save(c);
	}
	uint64_t want = align_up(size + align, 4096);
	uint64_t dflt = kind == CC_AREA_CODE ? c->o.code_size : c->o.data_size;
	int i = area_new(c, kind, want > dflt ? want : dflt, near);
	if (i < 0)
		return i;
	struct cc_dir_area *a = &c->dir.areas[i];
	*addr = a->addr;
	a->used = size;
	return cc__dir_save(c);
}

static struct cc_dir_area *area_of(struct cc_cache *c, uint64_t addr, uint64_t size)
{
	for (uint32_t i = 0; i < c->dir.nareas; i++) {
		struct cc_dir_area *a = &c->dir.areas[i];
		if (addr >= a->addr && addr + size <= a->addr + a->size)
			return a;
	}
	return NULL;
}

int cc_cache__free(struct cc_cache *c, uint64_t addr, size_t size)
{
	struct cc_dir_area *a = area_of(c, addr, size);

	if (!a)
		return cc__fail(c, CC_PHASE_RESTORE, -EINVAL, "0x%" PRIx64 " is not in the code "
				"cache of process %d", addr, c->pid);
	if (a->kind == CC_AREA_IMAGE) {
		int rc = unmap(c, a->addr, a->size);
		if (rc < 0)
			return cc__fail(c, CC_PHASE_RESTORE, rc, "munmap of 0x%" PRIx64 " in process "
					"%d failed: %s", a->addr, c->pid, strerror(-rc));
		*a = c->dir.areas[--c->dir.nareas];
		return cc__dir_save(c);
	}
	if (addr + size == a->addr + a->used)
		a->used -= size;	/* the last block: give it back to the area */
	else if (c->dir.nfree < CC_MAX_FREE)
		c->dir.free[c->dir.nfree++] = (struct cc_dir_block){ addr, size, a->kind, 0 };
	return cc__dir_save(c);
}

int cc_cache__write(struct cc_cache *c, uint64_t addr, const void *buf, size_t len)
{
	if (!area_of(c, addr, len))
		return cc__fail(c, CC_PHASE_WRITE, -EINVAL, "0x%" PRIx64 "+%zu is not in the code "
				"cache of process %d", addr, len, c->pid);
	int rc = cc__write(c, addr, buf, len);
	if (rc < 0)
		return cc__fail(c, CC_PHASE_WRITE, rc, "cannot write %zu bytes at 0x%" PRIx64
				" in process %d: %s", len, addr, c->pid, strerror(-rc));
	return 0;
}

int cc_cache__read(struct cc_cache *c, uint64_t addr, void *buf, size_t len)
{
	int rc = cc__read(c, addr, buf, len);
	if (rc < 0)
		return cc__fail(c, CC_PHASE_MEASURE, rc, "cannot read %zu bytes at 0x%" PRIx64
				" in process %d: %s", len, addr, c->pid, strerror(-rc));
	return 0;
}

/* ------------------------------------------------------------- loading */

/* A shared object's span: mapped inaccessible, then each segment given its
 * protection (never write+exec), then written through /proc/PID/mem. */
static int image_area(struct cc_cache *c, const struct cc_image_layout *l, uint64_t near,
		      uint64_t *addr)
{
	uint64_t size = align_up(l->code_size, 4096);
	int rc;

	if (!c->dir_addr && (rc = dir_create(c, near)) < 0)
		return rc;
	int i = area_new(c, CC_AREA_IMAGE, size, near);
	if (i < 0)
		return i;
	struct cc_dir_area *a = &c->dir.areas[i];
	a->used = size;
	for (size_t k = 0; k < l->nsegs; k++) {
		rc = cc__protect(c, a->addr + l->segs[k].off, l->segs[k].size, l->segs[k].prot);
		if (rc < 0) {
			unmap(c, a->addr, a->size);
			c->dir.nareas--;
			return cc__fail(c, CC_PHASE_ALLOCATE, rc, "mprotect in process %d failed: %s",
					c->pid, strerror(-rc));
		}
	}
	*addr = a->addr;
	return cc__dir_save(c);
}

int cc_cache__load(struct cc_cache *c, const struct cc_image *im, uint64_t near,
		   cc_resolve_fn resolve, void *arg, struct cc_loaded *out)
{
	struct cc_image_layout l;
	struct cc_error err;
	uint8_t *code = NULL, *data = NULL;
	int rc;

	memset(out, 0, sizeof *out);
	cc_image__layout(im, &l);
	/* phase allocate */
	if (l.fixed) {
		rc = image_area(c, &l, near, &out->code);
		out->code_size = align_up(l.code_size, 4096);
	} else {
		rc = cc_cache__alloc(c, CC_CODE, l.code_size, 64, near, &out->code);
		out->code_size = l.code_size;
		if (rc == 0 && l.data_size) {
			rc = cc_cache__alloc(c, CC_DATA, l.data_size, 64, near, &out->data);
			out->data_size = l.data_size;
		}
	}
	if (rc < 0)
		goto err;
	/* phase load: link here, against the target */
	code = calloc(1, out->code_size);
	data = calloc(1, out->data_size ? out->data_size : 1);
	if (!code || !data) {
		rc = cc__fail(c, CC_PHASE_LOAD, -ENOMEM, "out of memory");
		goto err;
	}
	rc = cc_image__link(im, out->code, out->data, resolve, arg, code, data, &out->entry, &err);
	if (rc < 0) {
		cc__fail(c, CC_PHASE_LOAD, rc, "%s", err.msg);
		goto err;
	}
	/* phase write */
	if ((rc = cc_cache__write(c, out->code, code, out->code_size)) < 0 ||
	    (out->data_size && (rc = cc_cache__write(c, out->data, data, out->data_size)) < 0))
		goto err;
	free(code);
	free(data);
	return 0;
err:
	free(code);
	free(data);
	cc_cache__unload(c, out);
	return rc;
}

void cc_cache__unload(struct cc_cache *c, struct cc_loaded *l)
{
	char keep[sizeof c->errmsg];
	enum cc_phase phase = c->phase;

	/* undoing after a failure must not replace the failure's message */
	memcpy(keep, c->errmsg, sizeof keep);
	if (l->code)
		cc_cache__free(c, l->code, l->code_size);
	if (l->data)
		cc_cache__free(c, l->data, l->data_size);
	memcpy(c->errmsg, keep, sizeof keep);
	c->phase = phase;
	memset(l, 0, sizeof *l);
}
