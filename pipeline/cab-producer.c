/* cab-producer.c: the producer side of a ring: what the three kinds share
 * (announcing, dropping, waiting for space while watching the consumer's
 * heartbeat) and the CAB kind's slow path. The fast path is inline in
 * cab.h. */
#include "pipeline/cab-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	if (st == CAB_SIDE_ATTACHED && cab__pid_gone(__atomic_load_n(&sh->cons_pid, __ATOMIC_RELAXED)))
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
