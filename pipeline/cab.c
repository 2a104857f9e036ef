/* cab.c: CAB rings in a memfd: creation and mapping, the CAB kind's slow
 * path and consumer, and what the three kinds share (waiting, heartbeats,
 * drops, sampling). The fast paths are inline in cab.h. */
#include "pipeline/cab-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
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

static inline void cab__pause(void)
{
	__builtin_ia32_pause();
}

static bool pid_gone(int32_t pid)
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

/* Every chunk: CLEAR, then the guard of MAGIC words. */
static void init_chunk(struct cab_ring *r, uint32_t k)
{
	uint64_t *w = cab__chunk(r, k);

	memset(w, 0, (size_t)r->data_end * 8);
	for (uint32_t i = r->data_end; i < r->chunk_words; i++)
		w[i] = CAB_MAGIC;
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

int cab_ring__create_fd(int fd, const struct cab_opts *opts, struct cab_ring **out)
{
	struct geom g;
	int rc = geom_from_opts(opts, &g);

	*out = NULL;
	if (rc)
		return rc;
	struct cab_ring *r = calloc(1, sizeof(*r));
	if (!r)
		return cab__fail(-ENOMEM, "out of memory");
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd < 0) {
		rc = cab__fail(-errno, "dup ring fd %d: %s", fd, strerror(errno));
		goto err;
	}
	if (ftruncate(r->fd, (off_t)g.total) < 0) {
		rc = cab__fail(-errno, "ftruncate memfd to %zu bytes: %s", g.total, strerror(errno));
		goto err;
	}
	/* Neither side can resize it under the other (a shrink would SIGBUS). */
	if (fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = cab__fail(-errno, "sealing memfd: %s", strerror(errno));
		goto err;
	}
	/* Populated: page faults belong to setup, not to the first lap of
	 * records (a fault in instrumented code costs the target microseconds). */
	r->map = mmap(NULL, g.total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		rc = cab__fail(-errno, "mmap %zu bytes: %s", g.total, strerror(errno));
		goto err;
	}
	r->map_len = g.total;
	ring_fill(r, &g);
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
	if (r->kind == CAB_KIND_CAB)
		for (uint32_t k = 0; k < r->nchunks; k++)
			init_chunk(r, k);
	for (uint32_t i = 0; i < CAB_LINE / 8; i++)
		cab__chunk(r, r->nchunks)[i] = CAB_MAGIC;
	__atomic_store_n(&sh->magic, CAB_RING_MAGIC, __ATOMIC_RELEASE);
	*out = r;
	return 0;
err:
	cab_ring__close(r);
	return rc;
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

	struct cab_ring *r = calloc(1, sizeof(*r));
	if (!r)
		return cab__fail(-ENOMEM, "out of memory");
	r->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->fd < 0) {
		rc = cab__fail(-errno, "dup ring fd %d: %s", fd, strerror(errno));
		goto err;
	}
	r->map = mmap(NULL, g.total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		rc = cab__fail(-errno, "mmap ring fd %d: %s", fd, strerror(errno));
		goto err;
	}
	r->map_len = g.total;
	ring_fill(r, &g);
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

static void rate_of(struct cab_stats *st)
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

int cab_ring__stats(const struct cab_ring *r, struct cab_stats *st)
{
	struct cab_shared *sh = r->sh;

	memset(st, 0, sizeof(*st));
	st->records_dropped = __atomic_load_n(&sh->dropped_records, __ATOMIC_RELAXED);
	st->words_dropped = __atomic_load_n(&sh->dropped_words, __ATOMIC_RELAXED);
	st->producer_waits = __atomic_load_n(&sh->prod_waits, __ATOMIC_RELAXED);
	st->producer_wait_ns = __atomic_load_n(&sh->prod_wait_ns, __ATOMIC_RELAXED);
	st->producer_dropping = __atomic_load_n(&sh->prod_dropping, __ATOMIC_RELAXED);
	rate_of(st);
	return 0;
}

/* --------------------------------------------------- shared producer side */

/* The producer moved on (new chunk, handoff, flush): wake a sleeping consumer. */
void cab__announce(struct cab_ring *r)
{
	struct cab_shared *sh = r->sh;

	__atomic_fetch_add(&sh->prod_seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&sh->cons_sleeping, __ATOMIC_SEQ_CST))
		cab__futex_wake(&sh->prod_seq);
}

/* The consumer freed chunk k: wake a producer waiting for it, or for any. */
void cab__chunk_freed(struct cab_ring *r, uint32_t k)
{
	struct cab_shared *sh = r->sh;

	__atomic_fetch_add(&sh->cons_seq, 1, __ATOMIC_SEQ_CST);
	uint32_t w = __atomic_load_n(&sh->prod_waiting, __ATOMIC_SEQ_CST);
	if (w == 1 || (w >= 2 && w - 2 == k))
		cab__futex_wake(&sh->cons_seq);
}

/* The consumer freed space: wake a waiting producer. */
void cab__space_freed(struct cab_ring *r)
{
	struct cab_shared *sh = r->sh;

	__atomic_fetch_add(&sh->cons_seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&sh->prod_waiting, __ATOMIC_SEQ_CST))
		cab__futex_wake(&sh->cons_seq);
}

void cab__drop(struct cab_producer *p, size_t n)
{
	struct cab_shared *sh = p->ring->sh;

	/* Single writer: plain increments, atomic only so readers see whole values. */
	__atomic_store_n(&sh->dropped_records, sh->dropped_records + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->dropped_words, sh->dropped_words + 1 + n, __ATOMIC_RELAXED);
	p->gap = true;
}

static bool consumer_gone(struct cab_producer *p, uint64_t since, uint64_t now)
{
	struct cab_shared *sh = p->ring->sh;
	uint32_t st = __atomic_load_n(&sh->cons_state, __ATOMIC_ACQUIRE);

	if (st == CAB_SIDE_CLOSED)
		return true;
	if (st == CAB_SIDE_ATTACHED && pid_gone(__atomic_load_n(&sh->cons_pid, __ATOMIC_RELAXED)))
		return true;
	uint64_t hb = __atomic_load_n(&sh->cons_heartbeat_ns, __ATOMIC_RELAXED);
	uint64_t last = hb > since ? hb : since;
	return now > last && now - last > (uint64_t)p->ring->timeout_ms * 1000000ULL;
}

/* A dropping producer looks (every few thousand drops) whether a consumer
 * is alive again; if so it goes back to waiting. */
bool cab__consumer_back(struct cab_producer *p)
{
	if (++p->drop_checks < 4096)
		return false;
	p->drop_checks = 0;
	uint64_t now = util_now_ns();
	if (consumer_gone(p, 0, now))
		return false;
	p->dropping = false;
	__atomic_store_n(&p->ring->sh->prod_dropping, 0, __ATOMIC_RELAXED);
	return true;
}

int cab__wait_space(struct cab_producer *p, bool (*ready)(struct cab_producer *, void *),
		    void *arg)
{
	struct cab_ring *r = p->ring;
	struct cab_shared *sh = r->sh;
	uint64_t t0 = util_now_ns(), now = t0;
	uint64_t spin_end = t0 + (uint64_t)r->spin_us * 1000;
	int rc = 0;

	cab__announce(r);	/* a sleeping consumer must wake to free space */
	for (unsigned i = 0; !ready(p, arg); i++) {
		cab__pause();
		if ((i & 63) == 0 && (now = util_now_ns()) >= spin_end)
			goto sleep;
	}
	goto done;
sleep:
	__atomic_store_n(&sh->prod_waits, sh->prod_waits + 1, __ATOMIC_RELAXED);
	for (;;) {
		uint32_t seq = __atomic_load_n(&sh->cons_seq, __ATOMIC_SEQ_CST);
		__atomic_store_n(&sh->prod_waiting, 1, __ATOMIC_SEQ_CST);
		if (ready(p, arg))
			break;
		now = util_now_ns();
		if (consumer_gone(p, t0, now)) {
			rc = 1;
			break;
		}
		cab__futex_wait(&sh->cons_seq, seq, r->wait_ms);
	}
	__atomic_store_n(&sh->prod_waiting, 0, __ATOMIC_RELAXED);
	now = util_now_ns();
	__atomic_store_n(&sh->prod_wait_ns, sh->prod_wait_ns + (now - t0), __ATOMIC_RELAXED);
done:
	if (rc) {
		p->dropping = true;
		p->drop_checks = 0;
		__atomic_store_n(&sh->prod_dropping, 1, __ATOMIC_RELAXED);
	}
	return rc;
}

/* ------------------------------------------------------ CAB producer */

static bool cab_two_free(struct cab_producer *p, void *arg)
{
	struct cab_ring *r = p->ring;
	uint32_t k = p->chunk, k2 = (k + 1) % r->nchunks;

	return __atomic_load_n(cab__chunk(r, k), __ATOMIC_ACQUIRE) == CAB_CLEAR &&
	       __atomic_load_n(cab__chunk(r, k2), __ATOMIC_ACQUIRE) == CAB_CLEAR;
}

/* The guard is as long as the longest record, so a record never ends on
 * its chunk's last word: every move to another chunk comes through here.
 * The chunk is still worked out from the pointer, and the end line wraps,
 * so that nothing depends on that. */
static int cab_slow(struct cab_producer *p, uint64_t hdr, const uint64_t *pl, size_t n)
{
	struct cab_ring *r = p->ring;
	bool entered = false;

	for (;;) {
		uint64_t *w = p->ptr == &p->blocked ? p->resume : p->ptr;
		uint32_t k = (uint32_t)((size_t)(w - r->data) / r->chunk_words);
		uint64_t *start = cab__chunk(r, k);

		if (k >= r->nchunks) {	/* the end line: wrap */
			p->ptr = r->data;
			entered = true;
			continue;
		}
		p->chunk = k;
		uint64_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
		if (v == CAB_CLEAR) {
			if (w == start && p->gap) {
				r->meta[k].gap = 1;
				p->gap = false;
			}
			if (p->dropping) {	/* space appeared: a consumer is back */
				p->dropping = false;
				__atomic_store_n(&r->sh->prod_dropping, 0, __ATOMIC_RELAXED);
			}
			memcpy(w + 1, pl, n * 8);
			__atomic_store_n(w, hdr, __ATOMIC_RELEASE);
			p->ptr = w + 1 + n;
			if (entered)
				cab__announce(r);
			return 0;
		}
		if (w != start) {
			/* The guard (or anything not CLEAR inside our chunk):
			 * the chunk ends here; on to the next. */
			p->ptr = cab__chunk(r, k + 1);
			entered = true;
			continue;
		}
		/* A chunk start not consumed yet: the ring is full. */
		if (r->mode == CAB_EXHAUSTIVE && (!p->dropping || cab__consumer_back(p)) &&
		    cab__wait_space(p, cab_two_free, NULL) == 0)
			continue;
		cab__drop(p, n);
		p->resume = w;
		p->ptr = &p->blocked;
		return 1;
	}
}

int cab_producer__slow(struct cab_producer *p, uint64_t hdr, const uint64_t *pl, size_t n)
{
	if (p->flushed)
		return cab__fail(-EPIPE, "put after flush");
	if (n > p->max_payload)
		return cab__fail(-EMSGSIZE, "record of %zu payload words, ring allows %u", n,
				 p->max_payload);
	if (hdr == CAB_CLEAR || hdr == CAB_MAGIC || CAB_HDR_LEN(hdr) != n)
		return cab__fail(-EINVAL, "bad record header %#llx for %zu payload words",
				 (unsigned long long)hdr, n);
	switch (p->kind) {
	case CAB_KIND_NWAY:
		return cab__nway_slow(p, hdr, pl, n);
	case CAB_KIND_FFQ:
		return cab__ffq_slow(p, hdr, pl, n);
	default:
		return cab_slow(p, hdr, pl, n);
	}
}

int cab_producer__open(struct cab_ring *r, struct cab_producer **out)
{
	struct cab_shared *sh = r->sh;
	uint32_t none = CAB_SIDE_NONE;

	*out = NULL;
	if (!__atomic_compare_exchange_n(&sh->prod_state, &none, CAB_SIDE_ATTACHED, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return cab__fail(-EBUSY, "ring already has a producer");
	struct cab_producer *p = calloc(1, sizeof(*p));
	if (!p)
		return cab__fail(-ENOMEM, "out of memory");
	p->ring = r;
	p->kind = r->kind;
	p->max_payload = r->max_rec - 1;
	p->slot_words = r->slot_words;
	p->blocked = ~0ULL;
	__atomic_store_n(&sh->prod_pid, (int32_t)getpid(), __ATOMIC_RELAXED);
	switch (r->kind) {
	case CAB_KIND_NWAY:
		cab__nway_start(p);
		break;
	case CAB_KIND_FFQ:
		p->base = p->ptr = r->data;
		p->lim = r->data + (size_t)r->nslots * r->slot_words;
		break;
	default:
		p->ptr = r->data;
		break;
	}
	*out = p;
	return 0;
}

int cab_producer__flush(struct cab_producer *p)
{
	struct cab_ring *r = p->ring;

	if (p->flushed)
		return 0;
	if (p->kind == CAB_KIND_NWAY)
		cab__nway_flush(p);
	p->flushed = true;
	p->resume = p->ptr;
	p->ptr = p->lim = &p->blocked;
	__atomic_store_n(&r->sh->prod_state, CAB_SIDE_FLUSHED, __ATOMIC_RELEASE);
	cab__announce(r);
	return 0;
}

void cab_producer__close(struct cab_producer *p)
{
	if (!p)
		return;
	cab_producer__flush(p);
	free(p);
}

/* ------------------------------------------------------ shared consumer side */

/* The walk is a chain: each header's place depends on the previous one's
 * length, so a plain walk costs a load's latency per record (about 7 cycles,
 * half the consumer's time in the ring benchmark). Streams repeat lengths
 * (a REP unit's length is its block's; a loop repeats its blocks), so the
 * walk guesses that a record is as long as the one before and advances by
 * that guess: the next address then depends on a register, not on the load,
 * the branch checking the guess is predicted, and the loads overlap. A wrong
 * guess costs a branch miss and takes the checked path; both paths accept
 * exactly the same headers. */
size_t cab__scan(const struct cab_ring *r, const uint64_t *w, size_t pos, size_t lim,
		 uint64_t *nrec, bool *bad)
{
	size_t step = 0, max_rec = r->max_rec;	/* step: the guessed length, 0 = none */
	uint64_t n = 0;

	while (pos < lim) {
		/* Lines arrive from the producer's core: fetch well ahead. */
		__builtin_prefetch(&w[pos + 128]);
		uint64_t h = __atomic_load_n(&w[pos], __ATOMIC_ACQUIRE);
		size_t len = 1 + CAB_HDR_LEN(h);
		if (__builtin_expect(len == step && h != CAB_CLEAR, 1)) {
			/* Hide that step == len here, or the compiler adds len
			 * (the loaded value) and the chain is back. */
			__asm__("" : "+r"(step));
			pos += step;
			n++;
			continue;
		}
		if (h == CAB_CLEAR)
			break;
		if (h == CAB_MAGIC || len > max_rec) {
			*bad = true;
			break;
		}
		step = len;
		pos += len;
		n++;
	}
	*nrec += n;
	return pos;
}

int cab__deliver(struct cab_consumer *c, cab_consume_fn fn, void *arg,
		 const uint64_t *w, size_t n, bool gap)
{
	if (!n)
		return 0;
	unsigned flags = (gap || c->gap) ? CAB_SPAN_GAP : 0;
	c->gap = false;
	int rc = fn ? fn(arg, w, n, flags) : 0;
	if (rc) {
		c->cb_ret = rc;
		return -ECANCELED;
	}
	return 0;
}

/* Sampling: analyse bursts of burst chunks, starting a burst whenever the
 * analysed share has fallen to the rate. Exhaustive: always. */
bool cab__sampling_take(struct cab_consumer *c)
{
	struct cab_ring *r = c->r;

	c->seen_chunks++;
	if (r->mode != CAB_SAMPLING) {
		c->analysed_chunks++;
		return true;
	}
	if (c->burst_left == 0 &&
	    (double)c->analysed_chunks <= r->rate * (double)(c->seen_chunks - 1))
		c->burst_left = r->burst;
	if (c->burst_left == 0)
		return false;
	c->burst_left--;
	c->analysed_chunks++;
	return true;
}

static uint64_t heartbeat(struct cab_consumer *c, bool force)
{
	uint64_t now = util_now_ns();

	if (force || now - c->last_hb_ns > 1000000) {
		__atomic_store_n(&c->r->sh->cons_heartbeat_ns, now, __ATOMIC_RELAXED);
		c->last_hb_ns = now;
	}
	return now;
}

/* Reading the clock after every chunk cost 6% at 4 KiB chunks: beat about
 * every 256 KiB delivered instead (even a slow analysis gets through that
 * in milliseconds; the producer waits seconds for a beat). */
void cab__chunk_done(struct cab_consumer *c)
{
	if (++c->hb_count >= c->hb_every) {
		c->hb_count = 0;
		heartbeat(c, false);
	}
}

int cab_consumer__open(struct cab_ring *r, struct cab_consumer **out)
{
	struct cab_shared *sh = r->sh;
	uint32_t st = __atomic_load_n(&sh->cons_state, __ATOMIC_ACQUIRE);

	*out = NULL;
	/* A new consumer may take over from one that closed or died. */
	if (st == CAB_SIDE_ATTACHED && !pid_gone(sh->cons_pid))
		return cab__fail(-EBUSY, "ring already has a consumer (pid %d)", sh->cons_pid);
	if (!__atomic_compare_exchange_n(&sh->cons_state, &st, CAB_SIDE_ATTACHED, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return cab__fail(-EBUSY, "ring already has a consumer");
	struct cab_consumer *c = calloc(1, sizeof(*c));
	if (!c)
		return cab__fail(-ENOMEM, "out of memory");
	c->r = r;
	c->chunk = __atomic_load_n(&sh->cons_chunk, __ATOMIC_RELAXED);
	c->off = __atomic_load_n(&sh->cons_off, __ATOMIC_RELAXED);
	uint32_t lim = r->kind == CAB_KIND_FFQ ? r->nslots : r->nchunks;
	if (c->chunk >= lim || c->off >= r->chunk_words) {
		c->chunk = 0;
		c->off = 0;
	}
	c->gap = st != CAB_SIDE_NONE;	/* a predecessor may have lost data */
	c->hb_every = r->chunk_words >= 32768 ? 1 : 32768 / r->chunk_words;
	__atomic_store_n(&sh->cons_pid, (int32_t)getpid(), __ATOMIC_RELAXED);
	heartbeat(c, true);
	*out = c;
	return 0;
}

/* ------------------------------------------------------ CAB consumer */

/* Deliver chunk k from c->off: all of it when complete (then clear it and
 * hand it back), else what is there so far. */
static int take_chunk(struct cab_consumer *c, cab_consume_fn fn, void *arg, bool complete)
{
	struct cab_ring *r = c->r;
	uint32_t k = c->chunk;
	uint64_t *w = cab__chunk(r, k);
	uint64_t nrec = 0;
	bool bad = false, take = true;
	size_t end = cab__scan(r, w, c->off, r->data_end, &nrec, &bad);
	bool gap = c->off == 0 && r->meta[k].gap;
	int rc = 0;

	if (bad) {
		c->st.corrupt++;
		cab__fail(-EBADMSG, "chunk %u: bad record header at word %zu", k, end);
	}
	if (complete)
		take = cab__sampling_take(c);
	if (take) {
		rc = cab__deliver(c, fn, arg, w + c->off, end - c->off, gap);
		c->st.records_delivered += nrec;
		c->st.words_delivered += end - c->off;
	} else {
		c->st.records_skipped += nrec;
		c->gap = true;
	}
	if (bad && complete)
		c->gap = true;	/* the rest of the chunk is lost: flag the next span */
	if (!complete) {
		c->off = (uint32_t)end;
		__atomic_store_n(&r->sh->cons_off, c->off, __ATOMIC_RELAXED);
		return rc;
	}
	if (take)
		c->st.chunks_consumed++;
	else
		c->st.chunks_skipped++;
	/* Hand the chunk back: CLEAR what was written, MAGIC over any spill
	 * into the guard, the first word last. */
	if (bad) {
		init_chunk(r, k);
	} else {
		size_t clr = end < r->data_end ? end : r->data_end;
		if (clr > 1)
			memset(w + 1, 0, (clr - 1) * 8);
		for (size_t i = r->data_end; i < end; i++)
			w[i] = CAB_MAGIC;
	}
	r->meta[k].gap = 0;
	__atomic_store_n(&w[0], CAB_CLEAR, __ATOMIC_RELEASE);
	c->chunk = (k + 1) % r->nchunks;
	c->off = 0;
	__atomic_store_n(&r->sh->cons_chunk, c->chunk, __ATOMIC_RELAXED);
	__atomic_store_n(&r->sh->cons_off, 0, __ATOMIC_RELAXED);
	cab__chunk_freed(r, k);
	return rc;
}

static bool started(const struct cab_ring *r, uint32_t k)
{
	return __atomic_load_n(cab__chunk(r, k % r->nchunks), __ATOMIC_ACQUIRE) != CAB_CLEAR;
}

/* all: the producer is finished (flushed or dead) or stopped (drain). */
static int cab_poll(struct cab_consumer *c, cab_consume_fn fn, void *arg, bool all, bool final)
{
	struct cab_ring *r = c->r;
	int n = 0, rc;

	for (uint32_t i = 0; i < r->nchunks; i++) {
		uint32_t k = c->chunk;
		if (!all) {
			/* Two chunks behind: k is complete once k+2 is started. */
			if (!started(r, k + 2))
				break;
			rc = take_chunk(c, fn, arg, true);
		} else {
			if (c->off == 0 && !started(r, k))
				break;
			/* The producer left k when it started k+1; the last
			 * chunk of a full ring is never known to be left. */
			bool left = final || (i + 1 < r->nchunks && started(r, k + 1));
			rc = take_chunk(c, fn, arg, left);
			if (!left) {
				n++;
				break;
			}
		}
		n++;
		if (rc)
			return rc;
		cab__chunk_done(c);
	}
	return n;
}

static bool producer_finished(struct cab_consumer *c)
{
	struct cab_shared *sh = c->r->sh;

	if (c->producer_dead)
		return true;
	return __atomic_load_n(&sh->prod_state, __ATOMIC_ACQUIRE) == CAB_SIDE_FLUSHED;
}

static int poll_kind(struct cab_consumer *c, cab_consume_fn fn, void *arg, bool all,
		     bool final)
{
	switch (c->r->kind) {
	case CAB_KIND_NWAY:
		return cab__nway_poll(c, fn, arg, all);
	case CAB_KIND_FFQ:
		return cab__ffq_poll(c, fn, arg, all);
	default:
		return cab_poll(c, fn, arg, all, final);
	}
}

/* Is anything left at the consumer's position (regardless of completeness)? */
static bool has_data(struct cab_consumer *c)
{
	struct cab_ring *r = c->r;

	switch (r->kind) {
	case CAB_KIND_NWAY:
		return __atomic_load_n(&r->meta[c->chunk].state, __ATOMIC_ACQUIRE) != CAB_BUF_EMPTY;
	case CAB_KIND_FFQ:
		return __atomic_load_n(r->data + (size_t)c->chunk * r->slot_words,
				       __ATOMIC_ACQUIRE) != 0;
	default:
		return c->off > 0 || started(r, c->chunk);
	}
}

static int poll_common(struct cab_consumer *c, cab_consume_fn fn, void *arg, bool all)
{
	if (c->eof)
		return 0;
	uint64_t now = heartbeat(c, false);
	/* A producer that died never flushes: what it wrote is all there is.
	 * Looked at here, not only in cab_consumer__run, so that a caller
	 * polling several rings sees it too. */
	if (!c->producer_dead && now - c->last_pid_check_ns > 100000000ULL) {
		c->last_pid_check_ns = now;
		if (pid_gone(__atomic_load_n(&c->r->sh->prod_pid, __ATOMIC_RELAXED)))
			c->producer_dead = true;
	}
	bool fin = producer_finished(c);
	int n = poll_kind(c, fn, arg, all || fin, fin);
	if (n >= 0 && fin && !has_data(c))
		c->eof = true;
	return n;
}

int cab_consumer__poll(struct cab_consumer *c, cab_consume_fn fn, void *arg)
{
	return poll_common(c, fn, arg, false);
}

int cab_consumer__drain(struct cab_consumer *c, cab_consume_fn fn, void *arg)
{
	return poll_common(c, fn, arg, true);
}

/* Would a poll now deliver something? */
static bool data_ready(struct cab_consumer *c)
{
	if (producer_finished(c))
		return true;
	if (c->r->kind == CAB_KIND_CAB)
		return started(c->r, c->chunk + 2);
	return has_data(c);
}

/* A sleeping consumer beats at least this often: a producer judges it gone
 * after timeout_ms without a beat. */
static unsigned heartbeat_slice_ms(const struct cab_ring *r)
{
	return r->timeout_ms / 4 ? r->timeout_ms / 4 : 1;
}

int cab_consumer__wait(struct cab_consumer *c, unsigned timeout_ms)
{
	struct cab_shared *sh = c->r->sh;
	/* Sleep in slices so the heartbeat keeps beating. */
	unsigned slice = heartbeat_slice_ms(c->r);
	uint64_t end = util_now_ns() + (uint64_t)timeout_ms * 1000000ULL;

	for (;;) {
		heartbeat(c, true);
		uint32_t seq = __atomic_load_n(&sh->prod_seq, __ATOMIC_SEQ_CST);
		__atomic_store_n(&sh->cons_sleeping, 1, __ATOMIC_SEQ_CST);
		if (data_ready(c))
			break;
		uint64_t now = util_now_ns();
		if (now >= end)
			break;
		uint64_t left = (end - now + 999999) / 1000000;
		cab__futex_wait(&sh->prod_seq, seq, left < slice ? (unsigned)left : slice);
		if (__atomic_load_n(&sh->prod_seq, __ATOMIC_RELAXED) != seq)
			break;
	}
	__atomic_store_n(&sh->cons_sleeping, 0, __ATOMIC_RELAXED);
	heartbeat(c, true);
	return 0;
}

bool cab_consumer__eof(struct cab_consumer *c)
{
	return c->eof;
}

/* An idle consumer's next nap: twice the last, at most a heartbeat slice.
 * The producer wakes a sleeping consumer whenever it enters a chunk, so a
 * nap ends early as soon as there is work; the timeout only bounds how
 * late a missed wake (the producer announces a chunk just before writing
 * its first word), a dead producer or a stop is noticed. A fixed short
 * nap woke every idle consumer 100 times a second: a padroned serving a
 * process with many rings (threads times functions) kept a CPU busy
 * with nothing to do. */
static unsigned next_nap_ms(const struct cab_ring *r, unsigned nap_ms)
{
	unsigned most = heartbeat_slice_ms(r);

	return nap_ms >= most / 2 ? most : nap_ms * 2;
}

int cab_consumer__run(struct cab_consumer *c, cab_consume_fn fn, void *arg,
		      const volatile int *stop)
{
	struct cab_ring *r = c->r;
	uint64_t idle_since = 0;
	unsigned nap_ms = r->wait_ms;

	while (!c->eof && !(stop && *stop)) {
		int n = cab_consumer__poll(c, fn, arg);
		if (n == -ECANCELED)
			return c->cb_ret;
		if (n < 0)
			return n;
		if (n > 0) {
			idle_since = 0;
			nap_ms = r->wait_ms;
			continue;
		}
		uint64_t now = util_now_ns();
		if (!idle_since)
			idle_since = now;
		if (now - idle_since < (uint64_t)r->spin_us * 1000) {
			cab__pause();
			continue;
		}
		cab_consumer__wait(c, nap_ms);
		nap_ms = next_nap_ms(r, nap_ms);
	}
	return 0;
}

void cab_ring__wake_consumer(struct cab_ring *r)
{
	cab__announce(r);
}

int cab_consumer__stats(const struct cab_consumer *c, struct cab_stats *st)
{
	cab_ring__stats(c->r, st);
	st->chunks_consumed = c->st.chunks_consumed;
	st->chunks_skipped = c->st.chunks_skipped;
	st->records_delivered = c->st.records_delivered;
	st->words_delivered = c->st.words_delivered;
	st->records_skipped = c->st.records_skipped;
	st->corrupt = c->st.corrupt;
	rate_of(st);
	return 0;
}

void cab_consumer__close(struct cab_consumer *c)
{
	if (!c)
		return;
	struct cab_shared *sh = c->r->sh;
	__atomic_store_n(&sh->cons_state, CAB_SIDE_CLOSED, __ATOMIC_RELEASE);
	/* A producer waiting on us must notice now, not at its timeout. */
	__atomic_fetch_add(&sh->cons_seq, 1, __ATOMIC_SEQ_CST);
	cab__futex_wake(&sh->cons_seq);
	free(c);
}
