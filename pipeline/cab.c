/* cab.c: CAB rings in a memfd: creation and mapping, geometry, stats, and
 * the small helpers every side uses (errors, futexes). The producer side is
 * cab-producer.c, the consumer side cab-consumer.c; the fast paths are
 * inline in cab.h. */
#include "pipeline/cab-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static __thread char cab_err[256];

const char *cab_errmsg(void)
{
	return cab_err;
}

int cab__fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cab_err, sizeof cab_err, fmt, ap);
	va_end(ap);
	return err;
}

/* Shared (not FUTEX_PRIVATE_FLAG) futexes: the two sides may be processes. */
void cab__futex_wait(uint32_t *word, uint32_t val, unsigned timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };

	syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0);
}

void cab__futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

bool cab__pid_gone(int32_t pid)
{
	return pid > 0 && kill(pid, 0) < 0 && errno == ESRCH;
}

/* ------------------------------------------------------------- geometry */

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

struct geom {
	struct cab_opts o;
	size_t meta_offset, data_offset, data_bytes, total;
	uint32_t chunk_words, slot_words, nslots;
};

static int geom_from_opts(const struct cab_opts *in, struct geom *g)
{
	struct cab_opts *o = &g->o;

	memset(g, 0, sizeof(*g));
	if (in) {
		if (in->sz < offsetof(struct cab_opts, kind) || in->sz > sizeof(*in))
			return cab__fail(-EINVAL, "cab_opts.sz is %zu, expected %zu", in->sz,
					 sizeof(*in));
		memcpy(o, in, in->sz);
	}
	if (!o->chunk_bytes)
		o->chunk_bytes = 64 * 1024;
	if (!o->nchunks)
		o->nchunks = 16;
	if (!o->max_record_words)
		o->max_record_words = 64;
	if (!o->spin_us)
		o->spin_us = 50;
	if (!o->wait_ms)
		o->wait_ms = 10;
	if (!o->consumer_timeout_ms)
		o->consumer_timeout_ms = 2000;
	if (o->sample_rate == 0)
		o->sample_rate = 0.1;
	if (!o->burst_chunks)
		o->burst_chunks = 4;

	if ((unsigned)o->kind > CAB_KIND_FFQ)
		return cab__fail(-EINVAL, "unknown ring kind %d", (int)o->kind);
	if ((unsigned)o->mode > CAB_SAMPLING)
		return cab__fail(-EINVAL, "unknown ring mode %d", (int)o->mode);
	if (o->kind == CAB_KIND_FFQ && o->mode == CAB_SAMPLING)
		return cab__fail(-ENOTSUP, "FastForward rings have no sampling mode");
	if (o->max_record_words < 1 || o->max_record_words > CAB_MAX_RECORD_WORDS)
		return cab__fail(-EINVAL, "max_record_words %u not in 1..%u",
				 o->max_record_words, CAB_MAX_RECORD_WORDS);
	if (o->chunk_bytes % CAB_LINE)
		return cab__fail(-EINVAL, "chunk size %zu is not a multiple of %d bytes",
				 o->chunk_bytes, CAB_LINE);
	if (o->chunk_bytes / 8 < 2 * (size_t)o->max_record_words)
		return cab__fail(-EINVAL, "chunk size %zu holds fewer than two records of %u words",
				 o->chunk_bytes, o->max_record_words);
	if (o->chunk_bytes / 8 > UINT32_MAX)
		return cab__fail(-EINVAL, "chunk size %zu too large", o->chunk_bytes);
	if (o->nchunks < 4)
		return cab__fail(-EINVAL, "a ring needs at least 4 chunks (the consumer stays two behind), got %u",
				 o->nchunks);
	if (o->nchunks > (1u << 20) || o->chunk_bytes * o->nchunks > (1ULL << 36))
		return cab__fail(-EINVAL, "ring of %u chunks of %zu bytes is too large",
				 o->nchunks, o->chunk_bytes);
	if (!(o->sample_rate > 0 && o->sample_rate <= 1))
		return cab__fail(-EINVAL, "sample rate %g not in (0, 1]", o->sample_rate);

	g->chunk_words = (uint32_t)(o->chunk_bytes / 8);
	g->data_bytes = o->chunk_bytes * o->nchunks;
	g->slot_words = o->max_record_words;
	g->nslots = (uint32_t)(g->data_bytes / 8 / g->slot_words);
	g->meta_offset = round_up(sizeof(struct cab_shared), CAB_LINE);
	g->data_offset = round_up(g->meta_offset + (size_t)o->nchunks * sizeof(struct cab_meta),
				  4096);
	/* One line of MAGIC after the last chunk: the end of the buffer. A
	 * record ending exactly there leaves the producer pointing at it. */
	g->total = g->data_offset + g->data_bytes + CAB_LINE;
	return 0;
}

static void init_guard(struct cab_ring *r, uint32_t k)
{
	uint64_t *w = cab__chunk(r, k);

	for (uint32_t i = r->data_end; i < r->chunk_words; i++)
		w[i] = CAB_MAGIC;
}

/* Every chunk: CLEAR, then the guard of MAGIC words. */
void cab__init_chunk(struct cab_ring *r, uint32_t k)
{
	memset(cab__chunk(r, k), 0, (size_t)r->data_end * 8);
	init_guard(r, k);
}

/* The private copy of the geometry, from checked options only: the shared
 * header is never trusted again after the ring is mapped. */
static void ring_fill(struct cab_ring *r, const struct geom *g)
{
	r->kind = g->o.kind;
	r->mode = g->o.mode;
	r->chunk_words = g->chunk_words;
	r->nchunks = g->o.nchunks;
	r->max_rec = g->o.max_record_words;
	r->data_end = r->chunk_words - r->max_rec;
	r->slot_words = g->slot_words;
	r->nslots = g->nslots;
	r->spin_us = g->o.spin_us;
	r->wait_ms = g->o.wait_ms;
	r->timeout_ms = g->o.consumer_timeout_ms;
	r->burst = g->o.burst_chunks;
	r->rate = g->o.sample_rate;
	r->sh = r->map;
	r->meta = (struct cab_meta *)((char *)r->map + g->meta_offset);
	r->data = (uint64_t *)((char *)r->map + g->data_offset);
}

/* A ring owning a close-on-exec copy of fd (*out set even on failure, for
 * cab_ring__close). */
static int ring_new(int fd, struct cab_ring **out)
{
	struct cab_ring *r = calloc(1, sizeof(*r));

	*out = r;
	if (!r)
		return cab__fail(-ENOMEM, "out of memory");
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd < 0)
		return cab__fail(-errno, "dup ring fd %d: %s", fd, strerror(errno));
	return 0;
}

/* Maps the whole memfd, populated: page faults belong to setup, not to the
 * first lap of records (a fault in instrumented code costs the target
 * microseconds). With populate_later, cab_ring__populate does it. */
static int ring_map(struct cab_ring *r, const struct geom *g)
{
	int populate = g->o.populate_later ? 0 : MAP_POPULATE;

	r->map = mmap(NULL, g->total, PROT_READ | PROT_WRITE, MAP_SHARED | populate, r->fd,
		      r->file_off);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		return cab__fail(-errno, "mmap ring (%zu bytes): %s", g->total, strerror(errno));
	}
	r->map_len = g->total;
	ring_fill(r, g);
	return 0;
}

int cab_ring__create(const struct cab_opts *opts, struct cab_ring **out)
{
	int fd = memfd_create("padrone-cab", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	*out = NULL;
	if (fd < 0)
		return cab__fail(-errno, "memfd_create: %s", strerror(errno));
	int rc = cab_ring__create_fd(fd, opts, out);
	close(fd);
	return rc;
}

/* The ring at offset of fd, whose bytes there were never written when the
 * file is no longer than offset (they read as zeros: only the guards'
 * pages need touching); the file grown to hold it. */
static int create_in(int fd, off_t offset, bool seal, const struct cab_opts *opts,
		     struct cab_ring **out)
{
	struct geom g;
	int rc = geom_from_opts(opts, &g);

	*out = NULL;
	if (rc)
		return rc;
	if (offset < 0 || offset % sysconf(_SC_PAGESIZE))
		return cab__fail(-EINVAL, "a ring at offset %lld of its file: not a page boundary",
				 (long long)offset);
	struct cab_ring *r;
	struct stat st;
	if ((rc = ring_new(fd, &r)) < 0)
		goto err;
	r->file_off = offset;
	if (fstat(r->fd, &st) < 0) {
		rc = cab__fail(-errno, "fstat ring fd %d: %s", fd, strerror(errno));
		goto err;
	}
	bool fresh = st.st_size <= offset;
	if (st.st_size < offset + (off_t)g.total && ftruncate(r->fd, offset + (off_t)g.total) < 0) {
		rc = cab__fail(-errno, "ftruncate memfd to %lld bytes: %s",
			       (long long)(offset + (off_t)g.total), strerror(errno));
		goto err;
	}
	/* Neither side can resize it under the other (a shrink would SIGBUS). */
	if (seal && fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = cab__fail(-errno, "sealing memfd: %s", strerror(errno));
		goto err;
	}
	if ((rc = ring_map(r, &g)) < 0)
		goto err;
	struct cab_shared *sh = r->sh;
	sh->version = CAB_RING_VERSION;
	sh->kind = g.o.kind;
	sh->mode = g.o.mode;
	sh->total_bytes = g.total;
	sh->data_offset = g.data_offset;
	sh->chunk_words = g.chunk_words;
	sh->nchunks = g.o.nchunks;
	sh->max_record_words = g.o.max_record_words;
	sh->slot_words = g.slot_words;
	sh->nslots = g.nslots;
	sh->spin_us = g.o.spin_us;
	sh->wait_ms = g.o.wait_ms;
	sh->consumer_timeout_ms = g.o.consumer_timeout_ms;
	sh->burst_chunks = g.o.burst_chunks;
	sh->sample_rate = g.o.sample_rate;
	/* a fresh file reads as zeros (CLEAR): only the guards' pages touched */
	for (uint32_t k = 0; r->kind == CAB_KIND_CAB && k < r->nchunks; k++) {
		if (fresh)
			init_guard(r, k);
		else
			cab__init_chunk(r, k);
	}
	for (uint32_t i = 0; i < CAB_LINE / 8; i++)
		cab__chunk(r, r->nchunks)[i] = CAB_MAGIC;
	__atomic_store_n(&sh->magic, CAB_RING_MAGIC, __ATOMIC_RELEASE);
	*out = r;
	return 0;
err:
	cab_ring__close(r);
	return rc;
}

int cab_ring__create_fd(int fd, const struct cab_opts *opts, struct cab_ring **out)
{
	return create_in(fd, 0, true, opts, out);
}

int cab_ring__create_at(int fd, uint64_t offset, const struct cab_opts *opts,
			struct cab_ring **out)
{
	if (offset > (uint64_t)INT64_MAX / 2)
		return cab__fail(-EINVAL, "a ring at offset %" PRIu64 " of its file", offset);
	return create_in(fd, (off_t)offset, false, opts, out);
}

int cab_ring__open(int fd, struct cab_ring **out)
{
	struct stat st;
	struct cab_shared hdr;
	int rc;

	*out = NULL;
	if (fstat(fd, &st) < 0)
		return cab__fail(-errno, "fstat ring fd %d: %s", fd, strerror(errno));
	if ((size_t)st.st_size < sizeof(hdr))
		return cab__fail(-EINVAL, "ring fd %d: %lld bytes, too small for a ring header",
				 fd, (long long)st.st_size);
	if (pread(fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		return cab__fail(-EIO, "ring fd %d: cannot read the header", fd);
	if (hdr.magic != CAB_RING_MAGIC || hdr.version != CAB_RING_VERSION)
		return cab__fail(-EINVAL, "ring fd %d: not a CAB ring (version %u)", fd,
				 CAB_RING_VERSION);

	/* Re-derive the layout from the options and compare: a corrupt header
	 * must not make us map or index outside the file. */
	struct cab_opts o = {
		.sz = sizeof(o), .kind = hdr.kind, .mode = hdr.mode,
		.chunk_bytes = (size_t)hdr.chunk_words * 8, .nchunks = hdr.nchunks,
		.max_record_words = hdr.max_record_words, .spin_us = hdr.spin_us,
		.wait_ms = hdr.wait_ms, .consumer_timeout_ms = hdr.consumer_timeout_ms,
		.sample_rate = hdr.sample_rate, .burst_chunks = hdr.burst_chunks,
	};
	struct geom g;
	if ((rc = geom_from_opts(&o, &g)))
		return cab__fail(rc, "ring fd %d: bad geometry: %s", fd, cab_errmsg());
	if (g.total != hdr.total_bytes || g.total != (size_t)st.st_size ||
	    g.data_offset != hdr.data_offset || g.nslots != hdr.nslots ||
	    g.slot_words != hdr.slot_words)
		return cab__fail(-EINVAL, "ring fd %d: header does not match its size (%lld bytes)",
				 fd, (long long)st.st_size);

	struct cab_ring *r;
	if ((rc = ring_new(fd, &r)) < 0)
		goto err;
	if ((rc = ring_map(r, &g)) < 0)
		goto err;
	*out = r;
	return 0;
err:
	cab_ring__close(r);
	return rc;
}

int cab_ring__fd(const struct cab_ring *r)
{
	return r->fd;
}

enum cab_kind cab_ring__kind(const struct cab_ring *r)
{
	return r->kind;
}

enum cab_mode cab_ring__mode(const struct cab_ring *r)
{
	return r->mode;
}

size_t cab_ring__chunk_bytes(const struct cab_ring *r)
{
	return (size_t)r->chunk_words * 8;
}

unsigned cab_ring__nchunks(const struct cab_ring *r)
{
	return r->nchunks;
}

unsigned cab_ring__max_record_words(const struct cab_ring *r)
{
	return r->max_rec;
}

int cab_ring__size(const struct cab_opts *opts, size_t *bytes)
{
	struct geom g;
	int rc = geom_from_opts(opts, &g);

	*bytes = rc ? 0 : g.total;
	return rc;
}

void cab_ring__layout(const struct cab_ring *r, struct cab_layout *l)
{
	memset(l, 0, sizeof(*l));
	l->total_bytes = r->map_len;
	l->data_offset = (uint64_t)((char *)r->data - (char *)r->map);
	l->meta_offset = (uint64_t)((char *)r->meta - (char *)r->map);
	l->meta_stride = sizeof(struct cab_meta);
	l->meta_gap = offsetof(struct cab_meta, gap);
	l->chunk_words = r->chunk_words;
	l->nchunks = r->nchunks;
	l->max_record_words = r->max_rec;
	l->wait_ms = r->wait_ms;
	l->consumer_timeout_ms = r->timeout_ms;
	l->prod_seq = offsetof(struct cab_shared, prod_seq);
	l->prod_waiting = offsetof(struct cab_shared, prod_waiting);
	l->prod_state = offsetof(struct cab_shared, prod_state);
	l->prod_pid = offsetof(struct cab_shared, prod_pid);
	l->prod_dropping = offsetof(struct cab_shared, prod_dropping);
	l->dropped_records = offsetof(struct cab_shared, dropped_records);
	l->dropped_words = offsetof(struct cab_shared, dropped_words);
	l->prod_waits = offsetof(struct cab_shared, prod_waits);
	l->prod_wait_ns = offsetof(struct cab_shared, prod_wait_ns);
	l->cons_seq = offsetof(struct cab_shared, cons_seq);
	l->cons_sleeping = offsetof(struct cab_shared, cons_sleeping);
	l->cons_state = offsetof(struct cab_shared, cons_state);
	l->cons_heartbeat_ns = offsetof(struct cab_shared, cons_heartbeat_ns);
}

int cab_ring__attach_producer(struct cab_ring *r, int32_t pid)
{
	struct cab_shared *sh = r->sh;
	uint32_t none = CAB_SIDE_NONE;

	if (!__atomic_compare_exchange_n(&sh->prod_state, &none, CAB_SIDE_ATTACHED, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return cab__fail(-EBUSY, "ring already has a producer");
	__atomic_store_n(&sh->prod_pid, pid, __ATOMIC_RELAXED);
	return 0;
}

bool cab_ring__producer_waiting(const struct cab_ring *r)
{
	return __atomic_load_n(&r->sh->prod_waiting, __ATOMIC_ACQUIRE) != 0;
}

bool cab_ring__has_consumer(const struct cab_ring *r)
{
	return __atomic_load_n(&r->sh->cons_state, __ATOMIC_ACQUIRE) == CAB_SIDE_ATTACHED;
}

void cab_ring__end_producer(struct cab_ring *r)
{
	__atomic_store_n(&r->sh->prod_state, CAB_SIDE_FLUSHED, __ATOMIC_RELEASE);
	cab__announce(r);
}

void cab_ring__close(struct cab_ring *r)
{
	if (!r)
		return;
	if (r->map)
		munmap(r->map, r->map_len);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

void cab__rate_of(struct cab_stats *st)
{
	uint64_t all = st->records_delivered + st->records_skipped + st->records_dropped;

	st->achieved_rate = all ? (double)st->records_delivered / (double)all : 1.0;
}

int cab_ring__chunks_in_use(const struct cab_ring *r)
{
	int n = 0;

	if (r->kind != CAB_KIND_CAB)
		return -ENOTSUP;
	/* a chunk's first word is CLEAR exactly while the producer may take it */
	for (uint32_t k = 0; k < r->nchunks; k++)
		n += __atomic_load_n(cab__chunk(r, k), __ATOMIC_RELAXED) != CAB_CLEAR;
	return n;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23	/* Linux 5.14 */
#endif

int cab_ring__populate(struct cab_ring *r)
{
	if (madvise(r->map, r->map_len, MADV_POPULATE_WRITE) < 0)
		return cab__fail(-errno, "cannot allocate the ring's memory: %s", strerror(errno));
	return 0;
}

int cab_ring__release_data(struct cab_ring *r)
{
	if (r->kind != CAB_KIND_CAB)
		return -ENOTSUP;
	if (__atomic_load_n(&r->sh->prod_state, __ATOMIC_ACQUIRE) != CAB_SIDE_FLUSHED ||
	    cab_ring__chunks_in_use(r) > 0)
		return -EBUSY;
	/* exactly the chunks: their whole pages freed, a page they share with
	 * the line of MAGIC after them zeroed up to it (the guards inside the
	 * chunks go too: no producer writes here again) */
	off_t at = r->file_off + (off_t)((char *)r->data - (char *)r->map);
	off_t len = (off_t)r->nchunks * r->chunk_words * 8;
	if (fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at, len) < 0)
		return cab__fail(-errno, "cannot give the ring's pages back: %s", strerror(errno));
	return 0;
}

int cab_ring__stats(const struct cab_ring *r, struct cab_stats *st)
{
	struct cab_shared *sh = r->sh;

	memset(st, 0, sizeof(*st));
	st->records_dropped = __atomic_load_n(&sh->dropped_records, __ATOMIC_RELAXED);
	st->words_dropped = __atomic_load_n(&sh->dropped_words, __ATOMIC_RELAXED);
	st->producer_waits = __atomic_load_n(&sh->prod_waits, __ATOMIC_RELAXED);
	st->producer_wait_ns = __atomic_load_n(&sh->prod_wait_ns, __ATOMIC_RELAXED);
	st->producer_dropping = __atomic_load_n(&sh->prod_dropping, __ATOMIC_RELAXED);
	cab__rate_of(st);
	return 0;
}
