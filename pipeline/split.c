/* split.c: the set splitter and the simulator worker threads.
 *
 * Routing. The key of an address is the low `bits` bits of its line number
 * at the largest line size (csim_config_split_bits): at every level these
 * bits are part of the set number, so a line, and the set it lives in,
 * belongs to one worker (key % workers) at every level. Each worker stores
 * only its own sets of the large levels (csim_cache.compact); the small
 * ones it keeps whole, sets it never touches costing only memory.
 *
 * A reference whose bytes lie in blocks of different workers (an unaligned
 * access, or an instruction crossing a line) is cut into one part per
 * block. In per-line mode each line is an access of its own, so the parts
 * are independent (only the first counts the reference). In Cachegrind mode
 * the reference must count once, miss if any line missed, and reach the
 * next level, for every line, exactly when some line missed at this one.
 * The parts meet in a slot: at each level every part reports (one atomic
 * add: count + misses) whether its own lines missed. A part that missed
 * knows the verdict and goes on; a part that hit must wait for the others'
 * reports before it may touch (or skip) the next level.
 *
 * Waiting never blocks a worker. A part (or any access) that cannot go on
 * becomes a deferred item, registered on every (level, set) it may still
 * touch; later accesses to a registered set are deferred behind it, so each
 * set of each level still sees its accesses in the order of the stream,
 * which is all the sequential simulator's outcome depends on. Deferred items
 * are retried in order, as far as they go, whenever the worker has nothing
 * else to do or has finished a batch. The last part to finish counts the
 * reference, once, in its worker's rows. Since no worker ever waits for
 * another, the only cross-thread waits are the splitter's (a full ring, a
 * busy slot), which workers always relieve.
 *
 * Rings. Each worker is fed by a CAB ring (cab.h) in exhaustive mode. A
 * CAB consumer takes a chunk only once the producer is two chunks further,
 * so a part can sit unseen in a chunk being filled; when the splitter waits
 * for a slot (its parts still unseen), idle workers also read the chunk
 * being filled (cab_consumer__drain), which keeps everything moving.
 */
#include "pipeline/cab.h"
#include "pipeline/csim-internal.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SPLIT_MAX_WORKERS 64
#define SPLIT_NSLOTS 65536	/* at most: slot ids travel in 16 bits of rep_ref.pad */

/* rep_ref.pad[0] on the rings. */
#define PART_CUT 0x01u		/* one part of a reference cut across workers */
#define PART_NOCOUNT 0x02u	/* per-line mode: not the first part */

/* ------------------------------------------------------------- rings */

/* Each worker is fed through a CAB ring (cab.h) used within this process:
 * records of up to SPLIT_STAGE references (3 words each) behind a header
 * whose tag says what follows. Long records: a header per 85 references
 * rather than per 21 makes the worker's walk over the ring cheaper. */
#define SPLIT_TAG_REFS 1u
#define SPLIT_STAGE 85			/* 255 payload words */
#define SPLIT_RECORD_WORDS (1 + 3 * SPLIT_STAGE)

static double thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void backoff(unsigned *spins)
{
	if (++*spins < 64) {
		__builtin_ia32_pause();
	} else if (*spins < 256) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
}

/* -------------------------------------------------------------- slots */

/* Where the parts of one cut reference meet (Cachegrind mode). */
struct split_slot {
	/* Per level: parts reported (low 16 bits) + 65536 * parts that
	 * missed. */
	_Atomic uint32_t lv[CSIM_NLEVELS];
	_Atomic uint32_t done;		/* parts finished */
	_Atomic uint32_t busy;		/* 1 from routing until counted */
	uint32_t parts;
} __attribute__((aligned(64)));	/* a line each: no false sharing between neighbours */

#define SLOT_COUNT(v) ((v) & 0xffffu)
#define SLOT_MISSES(v) ((v) >> 16)

/* ------------------------------------------------------------ workers */

/* A reference (or part) that could not go on yet. */
struct item {
	uint64_t pc, addr;
	uint32_t size;
	uint8_t type, kind;
	int8_t level;		/* the level to access next, or (waiting) the
				 * level whose verdict it waits for */
	int8_t reg;		/* first registered level, -1 if none */
	bool waiting;		/* a cut part waiting for its partners */
	bool cut;
	uint16_t slot;
};

struct worker {
	struct csim_split *sp;
	unsigned id;
	pthread_t thread;
	bool started;
	struct cab_ring *ring;
	struct cab_producer *prod;	/* the splitter's end */
	struct cab_consumer *cons;	/* the worker's end */
	uint64_t consumed;		/* references taken from the ring */
	struct csim_levels L;
	struct csim_result *res;
	int32_t *krank;
	/* Deferred items, a growable ring in stream order. */
	struct item *items;
	size_t icap, ihead, icount;
	/* Per deeper level and local set: deferred items registered there
	 * (they block fresh entries). */
	uint32_t *preg[CSIM_NLEVELS];
	uint64_t deferred;
	double cpu;		/* seconds of CPU, measured at exit */
	double busy;		/* of which simulating (not waiting for input) */
	int err;
};

struct csim_split {
	struct csim_config cfg;
	unsigned nworkers, bits, rshift;
	uint64_t kmask;
	uint8_t *owner;			/* key -> worker (key % workers) */
	struct worker *w;
	struct split_slot *slots;
	uint32_t nslots, next_slot;
	struct rep_ref *stage;		/* SPLIT_STAGE per worker */
	size_t *nstage;
	/* Set while someone waits on data still in a ring's current chunk (a
	 * CAB consumer only sees whole chunks): idle workers then drain. */
	_Atomic int hurry;
	struct csim_split_stats st;
	struct csim_result *result;
	bool finished;
	_Atomic int abort;
	char errmsg[256];
};

static int fail(struct csim_split *sp, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct csim_split *sp, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sp->errmsg, sizeof sp->errmsg, fmt, ap);
	va_end(ap);
	return err;
}

static bool deeper(int lv)
{
	return lv == CSIM_L2 || lv == CSIM_LL;
}

/* Count it as registered (delta +1) or not (-1) on its sets at lv. */
static void reg_level(struct worker *w, const struct item *it, int lv, int delta)
{
	const struct csim_cache *c = &w->L.lv[lv];
	uint64_t f, e;

	csim_cache_lines(c, it->addr, it->size, &f, &e);
	for (uint64_t l = f;; l++) {
		w->preg[lv][csim_cache_local_set(c, csim_cache_set(c, l))] += (uint32_t)delta;
		if (l == e)
			break;
	}
}

/* ... on every level from `from` to the end of its chain. */
static void reg_range(struct worker *w, const struct item *it, int from, int delta)
{
	for (int lv = from; lv >= 0; lv = w->L.next[lv])
		reg_level(w, it, lv, delta);
}

/* Is a deferred item registered on a set a fresh entry touches at lv?
 * (Deferred items are retried oldest first and only once all older ones are
 * done, so nothing ever blocks them.) */
static bool blocked(const struct worker *w, const struct item *it, int lv, bool fresh)
{
	const struct csim_cache *c = &w->L.lv[lv];
	uint64_t f, e;

	if (!fresh || !deeper(lv))
		return false;
	csim_cache_lines(c, it->addr, it->size, &f, &e);
	for (uint64_t l = f;; l++) {
		if (w->preg[lv][csim_cache_local_set(c, csim_cache_set(c, l))])
			return true;
		if (l == e)
			return false;
	}
}

/* The last part of a cut reference counts it, once. */
static int part_done(struct worker *w, const struct item *it)
{
	struct split_slot *sl = &w->sp->slots[it->slot];
	uint32_t done = atomic_fetch_add_explicit(&sl->done, 1, memory_order_acq_rel) + 1;

	if (done < sl->parts)
		return 0;
	struct csim_hot *h = csim_result_lookup(w->res, it->pc);
	if (!h)
		return -ENOMEM;
	int first = csim_first_level(it->type);
	csim_count_ref(h, it->type, true);
	for (int lv = 0; lv < CSIM_NLEVELS; lv++) {
		uint32_t v = atomic_load_explicit(&sl->lv[lv], memory_order_acquire);
		if (lv == first) {
			h->miss1[it->kind] += SLOT_MISSES(v) != 0;
		} else {
			csim_row_access(w->res, h, lv)[it->kind] += SLOT_COUNT(v) != 0;
			csim_row_miss(w->res, h, lv)[it->kind] += SLOT_MISSES(v) != 0;
		}
		atomic_store_explicit(&sl->lv[lv], 0, memory_order_relaxed);
	}
	atomic_store_explicit(&sl->done, 0, memory_order_relaxed);
	atomic_store_explicit(&sl->busy, 0, memory_order_release);
	return 0;
}

enum step { STEP_DONE, STEP_KEPT, STEP_ERR };

/* Take it as far as it can go (Cachegrind mode). fresh: not in the
 * deferred ring (nothing registered), so deferred items block it. On
 * STEP_DONE everything it registered is released. */
static enum step step(struct worker *w, struct item *it, bool fresh)
{
	for (;;) {
		if (it->waiting) {
			struct split_slot *sl = &w->sp->slots[it->slot];
			uint32_t v = atomic_load_explicit(&sl->lv[it->level], memory_order_acquire);
			if (SLOT_COUNT(v) < sl->parts)
				return STEP_KEPT;
			int nx = w->L.next[it->level];
			if (!SLOT_MISSES(v) || nx < 0)
				goto done;
			it->waiting = false;
			it->level = (int8_t)nx;
		}
		int lv = it->level;
		if (blocked(w, it, lv, fresh))
			return STEP_KEPT;
		if (it->reg == lv) {
			reg_level(w, it, lv, -1);
			it->reg = (int8_t)w->L.next[lv];
		}
		bool miss = csim_cache_access(&w->L.lv[lv], it->addr, it->size);
		int nx = w->L.next[lv];
		if (it->cut) {
			struct split_slot *sl = &w->sp->slots[it->slot];
			atomic_fetch_add_explicit(&sl->lv[lv], 1u + (miss ? 65536u : 0u),
						  memory_order_acq_rel);
			if (nx < 0)
				goto done;
			if (miss) {
				it->level = (int8_t)nx;
			} else {
				it->waiting = true;
			}
			continue;
		}
		/* A whole reference at a deeper level: its row may have
		 * moved since it was deferred (the table grows), so find it. */
		struct csim_hot *h = csim_result_lookup(w->res, it->pc);
		if (!h)
			return STEP_ERR;
		csim_row_access(w->res, h, lv)[it->kind]++;
		if (!miss)
			goto done;
		csim_row_miss(w->res, h, lv)[it->kind]++;
		if (nx < 0)
			goto done;
		it->level = (int8_t)nx;
	}
done:
	if (it->reg >= 0) {
		reg_range(w, it, it->reg, -1);
		it->reg = -1;
	}
	if (it->cut && part_done(w, it))
		return STEP_ERR;
	return STEP_DONE;
}

static int defer(struct worker *w, struct item *it)
{
	if (w->icount == w->icap) {
		size_t ncap = w->icap ? w->icap * 2 : 256;
		struct item *n = malloc(ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (size_t i = 0; i < w->icount; i++)
			n[i] = w->items[(w->ihead + i) & (w->icap - 1)];
		free(w->items);
		w->items = n;
		w->icap = ncap;
		w->ihead = 0;
	}
	it->reg = (int8_t)(it->waiting ? w->L.next[it->level] : it->level);
	if (it->reg >= 0)
		reg_range(w, it, it->reg, +1);
	w->items[(w->ihead + w->icount++) & (w->icap - 1)] = *it;
	w->deferred++;
	return 0;
}

/* The deferred items, oldest first, as far as they go. The first one kept
 * back (it waits for its partners' verdicts) ends the pass: the younger
 * ones wait behind it, so a pass costs what it completes, not the length
 * of the queue. This always progresses: the oldest unfinished reference
 * of the whole stream waits for nothing older, so its parts are at the
 * heads of their workers' queues (or fresh) and reach each verdict. */
static int retry(struct worker *w)
{
	while (w->icount) {
		enum step r = step(w, &w->items[w->ihead], false);
		if (r == STEP_ERR)
			return -ENOMEM;
		if (r == STEP_KEPT)
			return 0;
		w->ihead = (w->ihead + 1) & (w->icap - 1);
		w->icount--;
	}
	return 0;
}

/* The deeper levels of a fresh entry (a part, or a whole reference that
 * missed its first level behind deferred items): go on, or defer. */
static int cg_go_on(struct worker *w, struct item *it)
{
	enum step st = step(w, it, true);
	if (st == STEP_ERR)
		return -ENOMEM;
	return st == STEP_KEPT ? defer(w, it) : 0;
}

/* A part of a cut reference (its size was cut to cachegrind's by the
 * splitter): report its first level to the slot, then go on. */
static int cg_part(struct worker *w, const struct rep_ref *r)
{
	int first = csim_first_level(r->type), nx = w->L.next[first];
	struct item it = { .pc = r->pc, .addr = r->addr, .size = r->size, .type = r->type,
			   .kind = (uint8_t)csim_kind_of(r->type), .reg = -1, .cut = true,
			   .slot = (uint16_t)(r->pad[1] | r->pad[2] << 8) };
	bool miss = csim_cache_access(&w->L.lv[first], it.addr, it.size);
	struct split_slot *sl = &w->sp->slots[it.slot];
	atomic_fetch_add_explicit(&sl->lv[first], 1u + (miss ? 65536u : 0u), memory_order_acq_rel);
	if (nx < 0)
		return part_done(w, &it);
	it.level = (int8_t)(miss ? nx : first);
	it.waiting = !miss;
	return cg_go_on(w, &it);
}

/* A fresh entry from the ring, Cachegrind mode. */
CSIM_HOT int cg_entry(struct worker *w, const struct rep_ref *r)
{
	if (__builtin_expect(r->pad[0] & PART_CUT, 0))
		return cg_part(w, r);
	/* A whole reference: nothing to wait for at the first level. */
	struct csim_hot *h = csim_result_lookup(w->res, r->pc);
	if (__builtin_expect(!h, 0))
		return -ENOMEM;
	uint8_t type = r->type;
	uint64_t addr = r->addr;
	uint32_t size = csim_cg_size(type, r->size);
	if (__builtin_expect(!csim_cg_first(&w->L, h, type, addr, size), 1))
		return 0;
	int nx = w->L.next[csim_first_level(type)], kind = csim_kind_of(type);
	if (nx < 0)
		return 0;
	if (!w->icount) {
		/* Nothing deferred, so nothing registered: no set to wait
		 * behind. */
		csim_cg_deep(&w->L, nx, r->addr, size, kind, w->res, h);
		return 0;
	}
	struct item it = { .pc = r->pc, .addr = r->addr, .size = size, .type = r->type,
			   .kind = (uint8_t)kind, .reg = -1, .level = (int8_t)nx };
	return cg_go_on(w, &it);
}

/* A fresh entry, per-line mode: parts are independent. */
CSIM_HOT int line_entry(struct worker *w, const struct rep_ref *r)
{
	struct csim_hot *h = csim_result_lookup(w->res, r->pc);
	if (__builtin_expect(!h, 0))
		return -ENOMEM;
	if (__builtin_expect(!(r->pad[0] & PART_CUT), 1)) {
		csim_line_ref(&w->L, r, w->res, h);
		return 0;
	}
	int first = csim_first_level(r->type);
	uint64_t end = r->addr + r->size - 1;
	bool counted = !(r->pad[0] & PART_NOCOUNT);
	if (counted)
		csim_count_ref(h, r->type, false);
	csim_line_first(&w->L, first, r->addr, end, csim_kind_of(r->type), counted, w->res, h);
	if (r->type == REP_REF_MODIFY)
		csim_line_first(&w->L, first, r->addr, end, CSIM_WRITE, counted, w->res, h);
	return 0;
}

/* Entries in one mode: the body of the two copies below. */
CSIM_HOT int consume_batch(struct worker *w, const struct rep_ref *refs, size_t n, const bool cg)
{
	for (size_t i = 0; i < n; i++) {
		__builtin_prefetch(&refs[i + 64]);	/* as in csim.c's batches */
		int rc = cg ? cg_entry(w, &refs[i]) : line_entry(w, &refs[i]);
		if (__builtin_expect(rc != 0, 0))
			return rc;
	}
	return 0;
}

static int consume_plain(struct worker *w, const struct rep_ref *refs, size_t n)
{
	return w->L.cachegrind ? consume_batch(w, refs, n, true) : consume_batch(w, refs, n, false);
}

CSIM_AVX2 __attribute__((flatten)) static int consume_avx2(struct worker *w,
							  const struct rep_ref *refs, size_t n)
{
	return w->L.cachegrind ? consume_batch(w, refs, n, true) : consume_batch(w, refs, n, false);
}

CSIM_AVX512 __attribute__((flatten)) static int consume_avx512(struct worker *w,
							      const struct rep_ref *refs, size_t n)
{
	return w->L.cachegrind ? consume_batch(w, refs, n, true) : consume_batch(w, refs, n, false);
}

static int consume(struct worker *w, const struct rep_ref *refs, size_t n)
{
	switch (w->L.simd) {
	case CSIM_SIMD_AVX512:
		return consume_avx512(w, refs, n);
	case CSIM_SIMD_AVX2:
		return consume_avx2(w, refs, n);
	default:
		return consume_plain(w, refs, n);
	}
}

/* A span of records from the ring. */
static int on_span(void *arg, const uint64_t *words, size_t nwords, unsigned flags)
{
	struct worker *w = arg;

	if (flags & CAB_SPAN_GAP) {
		w->err = -EPIPE;	/* exhaustive rings lose nothing: a bug */
		return 1;
	}
	for (size_t i = 0; i < nwords; i += 1 + CAB_HDR_LEN(words[i])) {
		size_t len = CAB_HDR_LEN(words[i]);
		if (CAB_HDR_TAG(words[i]) != SPLIT_TAG_REFS || len % 3) {
			w->err = -EBADMSG;
			return 1;
		}
		/* Payload words are rep_refs (24 bytes, 8-aligned). */
		const struct rep_ref *refs = (const struct rep_ref *)(const void *)(words + i + 1);
		if ((w->err = consume(w, refs, len / 3)))
			return 1;
		w->consumed += len / 3;
	}
	return 0;
}

/* Deliver what the ring has: complete chunks, or with drain also the chunk
 * being written. Returns references taken, or -1 on error. */
static int64_t take(struct worker *w, bool drain)
{
	uint64_t before = w->consumed;
	double t = thread_cpu();
	int rc = drain ? cab_consumer__drain(w->cons, on_span, w)
		       : cab_consumer__poll(w->cons, on_span, w);
	w->busy += thread_cpu() - t;
	if (rc < 0) {
		if (!w->err)
			w->err = rc;
		return -1;
	}
	return (int64_t)(w->consumed - before);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct csim_split *sp = w->sp;
	unsigned spins = 0;

	w->res->tot_dirty = true;
	while (!atomic_load_explicit(&sp->abort, memory_order_relaxed)) {
		int64_t n = take(w, false);
		if (n < 0)
			break;
		if (w->icount && (w->err = retry(w)))
			break;
		if (n > 0) {
			spins = 0;
			continue;
		}
		if (cab_consumer__eof(w->cons)) {
			if (!w->icount)
				break;
			backoff(&spins);	/* partners' verdicts still to come */
			continue;
		}
		/* Idle. Only what someone waits for is worth reading out of
		 * the chunk the splitter is filling. */
		if (atomic_load_explicit(&sp->hurry, memory_order_relaxed) &&
		    (n = take(w, true)) != 0) {
			if (n < 0)
				break;
			spins = 0;
			continue;
		}
		if (w->icount)
			backoff(&spins);
		else
			cab_consumer__wait(w->cons, 2);
	}
	if (w->err)
		atomic_store(&sp->abort, 1);
	w->cpu = thread_cpu();
	return NULL;
}

/* ------------------------------------------------------------ splitter */

static void split_destroy_workers(struct csim_split *sp)
{
	for (unsigned i = 0; sp->w && i < sp->nworkers; i++) {
		struct worker *w = &sp->w[i];
		cab_producer__close(w->prod);
		cab_consumer__close(w->cons);
		cab_ring__close(w->ring);
		csim_levels_free(&w->L);
		csim_result__free(w->res);
		free(w->krank);
		free(w->items);
		for (int lv = 0; lv < CSIM_NLEVELS; lv++) {
			free(w->preg[lv]);
		}
	}
	free(sp->w);
	sp->w = NULL;
}

static int ring_init(struct csim_split *sp, struct worker *w, size_t ring_bytes,
		     size_t chunk_bytes)
{
	/* At least 4 chunks (CAB's consumer stays two behind), of whole
	 * cache lines, each holding at least two records (of the ring's
	 * maximum size, below). */
	size_t min_chunk = (2 * 8 * SPLIT_RECORD_WORDS + 63) & ~(size_t)63;
	while (chunk_bytes / 2 >= min_chunk && ring_bytes / chunk_bytes < 4)
		chunk_bytes /= 2;
	chunk_bytes &= ~(size_t)63;
	if (chunk_bytes < min_chunk)
		chunk_bytes = min_chunk;
	struct cab_opts o = {
		.sz = sizeof(o), .kind = CAB_KIND_CAB, .mode = CAB_EXHAUSTIVE,
		.chunk_bytes = chunk_bytes,
		.nchunks = (unsigned)(ring_bytes / chunk_bytes < 4 ? 4 : ring_bytes / chunk_bytes),
		.max_record_words = SPLIT_RECORD_WORDS,
		/* Both ends live in this process: a worker is never "gone",
		 * only perhaps descheduled for a while on a busy machine. */
		.consumer_timeout_ms = 600000,
	};
	int rc;
	if ((rc = cab_ring__create(&o, &w->ring)) || (rc = cab_producer__open(w->ring, &w->prod)) ||
	    (rc = cab_consumer__open(w->ring, &w->cons)))
		return fail(sp, rc, "worker %u's ring: %s", w->id, cab_errmsg());
	return 0;
}

static int worker_init(struct csim_split *sp, struct worker *w, unsigned id, size_t ring_bytes,
		       size_t chunk_bytes)
{
	uint64_t nkeys = 1ull << sp->bits, owned = 0;
	int rc;

	w->sp = sp;
	w->id = id;
	w->krank = malloc(nkeys * sizeof(*w->krank));
	w->res = csim_result__new();
	if (!w->krank || !w->res)
		return -ENOMEM;
	csim_result_set_mode(w->res, sp->cfg.cachegrind);
	for (uint64_t k = 0; k < nkeys; k++)
		w->krank[k] = sp->owner[k] == id ? (int32_t)owned++ : -1;
	/* A single worker owns every set: the plain layout. */
	rc = sp->nworkers == 1 ? csim_levels_init(&w->L, &sp->cfg, 0, NULL, 0)
			       : csim_levels_init(&w->L, &sp->cfg, sp->bits, w->krank, owned);
	if (rc)
		return rc;
	if ((rc = ring_init(sp, w, ring_bytes, chunk_bytes)))
		return rc;
	if (!sp->cfg.cachegrind)
		return 0;
	for (int lv = 0; lv < CSIM_NLEVELS; lv++) {
		if (!deeper(lv) || !w->L.lv[lv].tags)
			continue;
		w->preg[lv] = calloc(w->L.lv[lv].nsets_local, sizeof(uint32_t));
		if (!w->preg[lv])
			return -ENOMEM;
	}
	return 0;
}

int csim_split__new(const struct csim_config *cfg, const struct csim_split_opts *opts,
		    struct csim_split **out)
{
	struct csim_split_opts o = { 0 };
	struct csim_split *sp;
	char err[256];
	int rc;

	*out = NULL;
	if (!UTIL_OPTS_COPY(&o, opts))
		return -EINVAL;
	if (csim_config_check(cfg, err, sizeof err))
		return -EINVAL;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->cfg = *cfg;
	unsigned maxbits = csim_config_split_bits(cfg);
	unsigned want = o.workers ? o.workers : 1;
	if (want > SPLIT_MAX_WORKERS)
		want = SPLIT_MAX_WORKERS;
	if (maxbits < 31 && want > (1u << maxbits))
		want = 1u << maxbits;
	sp->nworkers = want;
	/* All the key bits allowed (capped): more keys spread uneven worker
	 * counts better; the compact set layout makes them free. */
	sp->bits = maxbits > 12 ? 12 : maxbits;
	sp->kmask = (1ull << sp->bits) - 1;
	sp->owner = malloc((size_t)sp->kmask + 1);
	if (!sp->owner) {
		rc = -ENOMEM;
		goto err;
	}
	for (uint64_t k = 0; k <= sp->kmask; k++)
		sp->owner[k] = (uint8_t)(k % sp->nworkers);
	for (int i = 0; i < CSIM_NLEVELS; i++)
		if (cfg->level[i].size && (unsigned)__builtin_ctz(cfg->level[i].line) > sp->rshift)
			sp->rshift = (unsigned)__builtin_ctz(cfg->level[i].line);
	sp->st.workers = sp->nworkers;
	sp->st.bits = sp->bits;
	atomic_init(&sp->abort, 0);
	sp->w = calloc(sp->nworkers, sizeof(*sp->w));
	sp->stage = malloc(sp->nworkers * SPLIT_STAGE * sizeof(*sp->stage));
	sp->nstage = calloc(sp->nworkers, sizeof(*sp->nstage));
	sp->result = csim_result__new();
	if (sp->result)
		csim_result_set_mode(sp->result, cfg->cachegrind);
	sp->nslots = o.slots && o.slots < SPLIT_NSLOTS ? o.slots : SPLIT_NSLOTS;
	if (cfg->cachegrind)
		sp->slots = aligned_alloc(64, sp->nslots * sizeof(*sp->slots));
	if (!sp->w || !sp->stage || !sp->nstage || !sp->result || (cfg->cachegrind && !sp->slots)) {
		rc = -ENOMEM;
		goto err;
	}
	if (sp->slots)
		memset(sp->slots, 0, sp->nslots * sizeof(*sp->slots));
	size_t ring = o.ring_bytes ? o.ring_bytes : 4u << 20;
	size_t chunk = o.chunk_bytes ? o.chunk_bytes : 64u << 10;
	atomic_init(&sp->hurry, 0);
	for (unsigned i = 0; i < sp->nworkers; i++)
		if ((rc = worker_init(sp, &sp->w[i], i, ring, chunk)))
			goto err;
	for (unsigned i = 0; i < sp->nworkers; i++) {
		if ((rc = -pthread_create(&sp->w[i].thread, NULL, worker_main, &sp->w[i]))) {
			fail(sp, rc, "cannot start worker thread %u: %s", i, strerror(-rc));
			goto err;
		}
		sp->w[i].started = true;
	}
	*out = sp;
	return 0;
err:
	csim_split__free(sp);
	return rc;
}

static int flush_stage(struct csim_split *sp, unsigned wi)
{
	size_t n = sp->nstage[wi];
	const uint64_t *payload = (const uint64_t *)(const void *)(sp->stage + (size_t)wi * SPLIT_STAGE);
	int rc = cab_producer__put(sp->w[wi].prod, CAB_HDR(SPLIT_TAG_REFS, 3 * n), payload, 3 * n);

	sp->st.per_worker[wi] += n;
	sp->nstage[wi] = 0;
	if (rc == 1)	/* exhaustive mode drops only when the worker is gone */
		return fail(sp, -EPIPE, "worker %u stopped taking references", wi);
	if (rc < 0)
		return fail(sp, rc, "worker %u's ring: %s", wi, cab_errmsg());
	return 0;
}

static int flush_all(struct csim_split *sp)
{
	for (unsigned i = 0; i < sp->nworkers; i++)
		if (sp->nstage[i]) {
			int rc = flush_stage(sp, i);
			if (rc)
				return rc;
		}
	return 0;
}

static int stage(struct csim_split *sp, unsigned wi, const struct rep_ref *r)
{
	sp->stage[(size_t)wi * SPLIT_STAGE + sp->nstage[wi]++] = *r;
	return sp->nstage[wi] == SPLIT_STAGE ? flush_stage(sp, wi) : 0;
}

static unsigned worker_of(const struct csim_split *sp, uint64_t block)
{
	return sp->owner[block & sp->kmask];
}

/* Do blocks b1..b2 all belong to worker w? */
static bool one_worker(const struct csim_split *sp, uint64_t b1, uint64_t end, unsigned w)
{
	for (uint64_t b = b1 + 1; b <= end >> sp->rshift && b > b1; b++)
		if (worker_of(sp, b) != w)
			return false;
	return true;
}

/* A free slot; the workers free them as cut references complete. Staged
 * entries are written out first so that they can. */
static int take_slot(struct csim_split *sp, uint32_t parts, uint16_t *id)
{
	struct split_slot *sl = &sp->slots[sp->next_slot];
	unsigned spins = 0;

	if (atomic_load_explicit(&sl->busy, memory_order_acquire)) {
		int rc = flush_all(sp);
		if (rc)
			return rc;
		/* The parts still unseen may sit in chunks being filled. */
		atomic_fetch_add(&sp->hurry, 1);
		while (atomic_load_explicit(&sl->busy, memory_order_acquire)) {
			if (atomic_load_explicit(&sp->abort, memory_order_relaxed)) {
				atomic_fetch_sub(&sp->hurry, 1);
				return -ECANCELED;
			}
			backoff(&spins);
		}
		atomic_fetch_sub(&sp->hurry, 1);
	}
	sl->parts = parts;
	atomic_store_explicit(&sl->busy, 1, memory_order_relaxed);
	*id = (uint16_t)sp->next_slot;
	sp->next_slot = (sp->next_slot + 1) % sp->nslots;
	return 0;
}

static int route_cut(struct csim_split *sp, const struct rep_ref *r, uint64_t end)
{
	uint64_t b1 = r->addr >> sp->rshift, b2 = end >> sp->rshift;
	uint16_t slot = 0;
	int rc;

	sp->st.cross++;
	sp->st.parts += b2 - b1;
	if (sp->cfg.cachegrind) {
		if (b2 - b1 >= 0xffff)
			return fail(sp, -E2BIG, "a reference of %u bytes spans too many lines",
				    r->size);
		if ((rc = take_slot(sp, (uint32_t)(b2 - b1 + 1), &slot)))
			return rc;
	}
	for (uint64_t b = b1;; b++) {
		struct rep_ref p = *r;
		uint64_t lo = b == b1 ? r->addr : b << sp->rshift;
		uint64_t hi = b == b2 ? end : ((b + 1) << sp->rshift) - 1;
		p.addr = lo;
		p.size = (uint32_t)(hi - lo + 1);
		p.pad[0] = (uint8_t)(PART_CUT | (b != b1 && !sp->cfg.cachegrind ? PART_NOCOUNT : 0));
		p.pad[1] = (uint8_t)(slot & 0xff);
		p.pad[2] = (uint8_t)(slot >> 8);
		if ((rc = stage(sp, worker_of(sp, b), &p)))
			return rc;
		if (b == b2)
			return 0;
	}
}

static int push(struct csim_split *sp, const struct rep_ref *refs, size_t n);

int csim_split__push(struct csim_split *sp, const struct rep_ref *refs, size_t n)
{
	double t = thread_cpu();
	int rc = push(sp, refs, n);
	sp->st.splitter_cpu += thread_cpu() - t;
	return rc;
}

static int push(struct csim_split *sp, const struct rep_ref *refs, size_t n)
{
	const bool cg = sp->cfg.cachegrind;
	const unsigned rshift = sp->rshift;
	size_t i;
	int rc = 0;

	if (sp->finished)
		return fail(sp, -EPIPE, "push after finish");
	if (atomic_load_explicit(&sp->abort, memory_order_relaxed))
		return fail(sp, -ECANCELED, "a worker failed (out of memory)");
	for (i = 0; i < n && !rc; i++) {
		const struct rep_ref *r = &refs[i];
		__builtin_prefetch(r + 64);	/* as in csim.c's batches */
		if (__builtin_expect(!csim_ref_type_valid(r->type), 0)) {
			rc = fail(sp, -EINVAL, "reference %zu has an unknown type %u", i, r->type);
			break;
		}
		uint32_t size = cg ? csim_cg_size(r->type, r->size) : (r->size ? r->size : 1);
		uint64_t end = r->addr + size - 1;
		uint64_t b1 = r->addr >> rshift;
		unsigned w1 = worker_of(sp, b1);
		if (__builtin_expect(end >> rshift != b1 || end < r->addr, 0) &&
		    !one_worker(sp, b1, end < r->addr ? UINT64_MAX : end, w1)) {
			rc = route_cut(sp, r, end < r->addr ? UINT64_MAX : end);
			continue;
		}
		/* Straight into the worker's next record. */
		struct rep_ref *d = &sp->stage[(size_t)w1 * SPLIT_STAGE + sp->nstage[w1]++];
		*d = *r;
		d->pad[0] = d->pad[1] = d->pad[2] = 0;
		if (sp->nstage[w1] == SPLIT_STAGE)
			rc = flush_stage(sp, w1);
	}
	sp->st.refs += i;
	return rc == -ECANCELED ? fail(sp, rc, "a worker failed (out of memory)") : rc;
}

int csim_split__finish(struct csim_split *sp)
{
	int rc = 0;

	if (sp->finished)
		return 0;
	sp->finished = true;
	double t = thread_cpu();
	rc = flush_all(sp);
	for (unsigned i = 0; i < sp->nworkers; i++)
		cab_producer__flush(sp->w[i].prod);
	sp->st.splitter_cpu += thread_cpu() - t;
	for (unsigned i = 0; i < sp->nworkers; i++) {
		struct worker *w = &sp->w[i];
		if (w->started)
			pthread_join(w->thread, NULL);
		w->started = false;
		if (w->err && !rc)
			rc = fail(sp, w->err, "worker %u: %s", i, strerror(-w->err));
		sp->st.waits += w->deferred;
		if (i < 64) {
			sp->st.worker_cpu[i] = w->cpu;
			sp->st.worker_busy[i] = w->busy;
		}
	}
	for (unsigned i = 0; !rc && i < sp->nworkers; i++)
		if (csim_result__merge(sp->result, sp->w[i].res))
			rc = fail(sp, -ENOMEM, "out of memory merging results");
	uint64_t max = 0, sum = 0;
	for (unsigned i = 0; i < sp->nworkers && i < 64; i++) {
		sum += sp->st.per_worker[i];
		if (sp->st.per_worker[i] > max)
			max = sp->st.per_worker[i];
	}
	sp->st.imbalance = sum ? (double)max * sp->nworkers / (double)sum : 1.0;
	return rc;
}

const struct csim_result *csim_split__result(const struct csim_split *sp)
{
	return sp->result;
}

void csim_split__stats(const struct csim_split *sp, struct csim_split_stats *st)
{
	*st = sp->st;
}

const char *csim_split__errmsg(const struct csim_split *sp)
{
	return sp->errmsg;
}

void csim_split__free(struct csim_split *sp)
{
	if (!sp)
		return;
	atomic_store(&sp->abort, 1);
	for (unsigned i = 0; sp->w && i < sp->nworkers; i++) {
		if (sp->w[i].started)
			pthread_join(sp->w[i].thread, NULL);
	}
	split_destroy_workers(sp);
	free(sp->slots);
	free(sp->owner);
	free(sp->stage);
	free(sp->nstage);
	csim_result__free(sp->result);
	free(sp);
}
