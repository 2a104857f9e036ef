/* split.c: the set splitter; its simulator worker threads are split-worker.c.
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
#include "pipeline/split-internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

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
		if (!split__deeper(lv) || !w->L.lv[lv].tags)
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
		if ((rc = -pthread_create(&sp->w[i].thread, NULL, split__worker_main, &sp->w[i]))) {
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

/* A whole reference straight into worker w's next record. */
static inline int stage_whole(struct csim_split *sp, unsigned w, const struct rep_ref *r)
{
	struct rep_ref *d = &sp->stage[(size_t)w * SPLIT_STAGE + sp->nstage[w]++];

	*d = *r;
	d->pad[0] = d->pad[1] = d->pad[2] = 0;
	return sp->nstage[w] == SPLIT_STAGE ? flush_stage(sp, w) : 0;
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
			if (!rep_ref_is_count(r->type)) {
				rc = fail(sp, -EINVAL, "reference %zu has an unknown type %u", i,
					  r->type);
				break;
			}
			/* counts of no set: any worker's rows, merged at the end */
			rc = stage_whole(sp, 0, r);
			continue;
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
		rc = stage_whole(sp, w1, r);
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
