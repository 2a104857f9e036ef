/* split-worker.c: a simulator worker of the set splitter: takes its
 * references from its CAB ring, simulates its own sets, and defers what
 * must wait (a cut reference's partners, a set with a deferred item ahead)
 * without ever blocking; how and why: split.c's opening comment. */
#include "pipeline/split-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

	if (!fresh || !split__deeper(lv))
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

/* References that only count (rep_ref_is_count), out of the entries' way. */
static __attribute__((noinline)) int count_only(struct worker *w, const struct rep_ref *r)
{
	return csim_count_only(w->res, r);
}

/* A fresh entry from the ring, Cachegrind mode. */
CSIM_HOT int cg_entry(struct worker *w, const struct rep_ref *r)
{
	if (__builtin_expect(r->pad[0] & PART_CUT, 0))
		return cg_part(w, r);
	if (__builtin_expect(rep_ref_is_count(r->type), 0))
		return count_only(w, r);
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
	if (__builtin_expect(rep_ref_is_count(r->type), 0))
		return count_only(w, r);
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

void *split__worker_main(void *arg)
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
