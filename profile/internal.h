/* internal.h: what profile/'s files share; not part of the public API. */
#ifndef PADRONE_PROFILE_INTERNAL_H
#define PADRONE_PROFILE_INTERNAL_H

#include "profile/profile.h"
#include "util/util.h"
#include "elf/elf.h"

#include <linux/perf_event.h>
#include <stdarg.h>

/* ------------------------------------------------------------ mmap ring */

/* One perf_event mmap ring: the control page and 2^n data bytes. */
struct prof_ring {
	struct perf_event_mmap_page *meta;
	uint8_t *data;
	uint64_t size;		/* data bytes, a power of two */
	uint8_t *bounce;	/* a record that wraps is copied here */
	size_t bounce_cap;
};

/* Called for each record; a nonzero return stops the drain there (the
 * record counts as consumed). */
typedef int (*prof_ring_fn)(const struct perf_event_header *h, void *arg);

/* Wraps a mapped ring (meta page followed by size data bytes). */
int prof_ring__init(struct prof_ring *r, void *base, uint64_t size);
void prof_ring__fini(struct prof_ring *r);
/* Consumes every record between data_tail and data_head (acquire load of
 * data_head, release store of data_tail). Returns the number of records or
 * -EIO on a corrupt header (the ring is then skipped to data_head). */
int prof_ring__drain(struct prof_ring *r, prof_ring_fn fn, void *arg);
/* data_head now (acquire): what a later drain_to may stop at. */
uint64_t prof_ring__head(const struct prof_ring *r);
/* The same as drain, up to head only (a value prof_ring__head gave). */
int prof_ring__drain_to(struct prof_ring *r, uint64_t head, prof_ring_fn fn, void *arg);
/* Calls fn on every record now in the ring without consuming any. */
int prof_ring__peek(struct prof_ring *r, prof_ring_fn fn, void *arg);

/* ------------------------------------------------------- stack table */

/* Distinct call chains with a count each; open addressing. */
struct prof_stacks {
	struct prof_stack_ent *ents;	/* dense, in insertion order */
	size_t n, cap;
	uint32_t *slots;		/* index+1 into ents, 0 = empty */
	size_t nslots;
	uint64_t *ips;			/* all chains back to back */
	size_t nips, ips_cap;
};
struct prof_stack_ent {
	uint64_t hash, count;
	size_t off, len;		/* into ips */
};

void prof_stacks__init(struct prof_stacks *t);
void prof_stacks__fini(struct prof_stacks *t);
void prof_stacks__clear(struct prof_stacks *t);
int prof_stacks__add(struct prof_stacks *t, const uint64_t *ips, size_t n, uint64_t count);
/* Adds every chain of src into t. */
int prof_stacks__merge(struct prof_stacks *t, const struct prof_stacks *src);

/* ------------------------------------------------------- backends */

/* The BPF backend, opaque to sampler.c. */
struct prof_bpf;
/* Loads and attaches; on failure *why says why in words. */
int prof_bpf__open(pid_t pid, unsigned freq_hz, bool user_only, bool pmu, struct prof_bpf **out,
		   char *why, size_t whylen);
int prof_bpf__enable(struct prof_bpf *b, bool on);
/* Moves the kernel's aggregates into stacks and per-thread counts (via
 * cb), and clears them in the kernel; adds to the three counters. */
typedef void (*prof_bpf_thread_fn)(pid_t tid, uint64_t samples, void *arg);
int prof_bpf__collect(struct prof_bpf *b, struct prof_stacks *stacks, prof_bpf_thread_fn cb,
		      void *arg, uint64_t *lost, uint64_t *stack_errors, uint64_t *throttled);
void prof_bpf__free(struct prof_bpf *b);

/* ------------------------------------------------------- mappings */

/* An executable mapping the target made while sampled (PERF_RECORD_MMAP2),
 * kept so that samples in code unmapped before the report (dlclose) still
 * find their module. */
struct prof_mmap {
	uint64_t start, end, pgoff;
	unsigned maj, min;
	uint64_t ino;
	char *path;
};
/* The sampler's list, valid until it is freed. */
size_t prof_sampler__mmaps(const struct prof_sampler *s, const struct prof_mmap **out);

/* Handles one ring record as the reader thread would (for tests). */
void prof_sampler__consume(struct prof_sampler *s, const struct perf_event_header *h);

/* ------------------------------------------------------- perf map files */

/* A huge or hostile file costs at most this much memory. */
#define PROF_PERFMAP_MAX_ENTRIES (1u << 20)
#define PROF_PERFMAP_MAX_NAME_BYTES (64u << 20)

struct prof_perfmap_ent {
	uint64_t start, end;	/* runtime [start, end) */
	size_t name;		/* offset into strings */
};
/* A piece of the address space and the entry that owns it (the last one
 * in the file that covers it). */
struct prof_perfmap_seg {
	uint64_t start, end;
	uint32_t ent;
};

/* The entries of one perf map file, as much of it as was read. */
struct prof_perfmap {
	struct prof_perfmap_ent *ents;	/* in file order */
	size_t n, cap;
	char *strings;
	size_t strings_len, strings_cap;
	struct prof_perfmap_seg *segs;	/* sorted, disjoint */
	size_t nsegs;
	uint64_t malformed;	/* lines skipped */
	uint64_t dropped;	/* entries beyond the caps */
	uint64_t consumed;	/* bytes of the file parsed (whole lines) */
	uint64_t dev, ino;	/* which file that was */
	bool skipping;		/* inside an over-long line */
};

void prof_perfmap__init(struct prof_perfmap *m);
void prof_perfmap__fini(struct prof_perfmap *m);
/* Parses the complete lines of buf; returns the bytes they took (the
 * unfinished tail is left for the next call) or -ENOMEM. */
int prof_perfmap__feed(struct prof_perfmap *m, const char *buf, size_t len);
/* Works out which entry owns each address, after feeding. */
int prof_perfmap__index(struct prof_perfmap *m);
/* Reads what the open file holds beyond what was read before (all of it
 * again if it is another file or has shrunk), and re-indexes. */
int prof_perfmap__update(struct prof_perfmap *m, int fd);
const struct prof_perfmap_ent *prof_perfmap__find(const struct prof_perfmap *m, uint64_t addr);
const char *prof_perfmap__name(const struct prof_perfmap *m, const struct prof_perfmap_ent *e);
/* Opens the perf map of pid (nspid inside its pid namespace): its root's
 * /tmp/perf-NSPID.map, else /tmp/perf-PID.map. Symlinks are refused
 * (-ELOOP), and files that are not regular, have other links or belong to
 * neither root nor one of uids (-EPERM). Returns an fd, and in path what
 * was opened; or -errno. */
int prof_perfmap__open(pid_t pid, pid_t nspid, const uid_t *uids, size_t nuids, char *path,
		       size_t pathlen);
/* The target's pid in its own namespace and its real, effective, saved
 * and filesystem uids, from /proc/PID/status. */
int prof_perfmap__ids(pid_t pid, pid_t *nspid, uid_t uids[4]);

/* ------------------------------------------------------- symbolizer */

/* Mappings seen by a sampler: consulted for addresses that the current
 * maps no longer hold. The symbolizer copies them. */
int prof_symbolizer__note_mmaps(struct prof_symbolizer *s, const struct prof_mmap *m, size_t n);

/* A copy of a formatted string that lives as long as the symbolizer. */
const char *prof_symbolizer__intern(struct prof_symbolizer *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Where a function that starts at addr (found without bounds of its own)
 * ends at the latest: the next known function of its module, or the end of
 * its mapping. 0 when addr is in no mapping. */
uint64_t prof_symbolizer__limit(struct prof_symbolizer *s, uint64_t addr);
/* The mapping holding addr: 0 and [*start, *end), or -ENOENT. */
int prof_symbolizer__mapping(struct prof_symbolizer *s, uint64_t addr, uint64_t *start,
			     uint64_t *end, const char **module);

/* ------------------------------------------------------- helpers */

/* snprintf into an error buffer. */
__attribute__((format(printf, 3, 4))) void prof__fmt(char *buf, size_t len, const char *fmt, ...);
void prof__seterr(struct prof_error *err, int e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
