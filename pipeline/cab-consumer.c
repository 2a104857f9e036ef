/* cab-consumer.c: the consumer side of a ring: what the three kinds share
 * (scanning a chunk's records, delivery, sampling bursts, heartbeats) and
 * the CAB kind's consumer, which takes whole chunks two behind the
 * producer. */
#include "pipeline/cab-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
		 const uint64_t *w, size_t n, unsigned flags)
{
	if (!n)
		return 0;
	if (c->gap)
		flags |= CAB_SPAN_GAP;
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

void cab_consumer__beat(struct cab_consumer *c)
{
	heartbeat(c, false);
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
	if (st == CAB_SIDE_ATTACHED && !cab__pid_gone(sh->cons_pid))
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
		unsigned flags = (gap ? CAB_SPAN_GAP : 0) | (c->off == 0 ? CAB_SPAN_CHUNK : 0);
		rc = cab__deliver(c, fn, arg, w + c->off, end - c->off, flags);
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
		cab__init_chunk(r, k);
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
		if (cab__pid_gone(__atomic_load_n(&c->r->sh->prod_pid, __ATOMIC_RELAXED)))
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
	return cab_consumer__run_idle(c, fn, NULL, arg, stop);
}

int cab_consumer__run_idle(struct cab_consumer *c, cab_consume_fn fn, cab_idle_fn idle, void *arg,
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
		int rc = idle ? idle(arg) : 0;
		if (rc < 0)
			return rc;
		if (rc > 0) {
			idle_since = 0;
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
	cab__rate_of(st);
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
