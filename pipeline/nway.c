/* nway.c: PiPA-style N-way buffering behind the cab.h interface (for the
 * benchmark). nchunks buffers; the producer fills its buffer (the inline
 * fast path is a bounds check against p->lim), then hands it over with a
 * release store of CAB_BUF_FULL into the buffer's state word and takes the
 * next buffer once the consumer has stored CAB_BUF_EMPTY there. Lock-free:
 * each state word has one writer at a time, ownership passing with it. */
#include "pipeline/cab-internal.h"

#include <errno.h>

static void take_buffer(struct cab_producer *p)
{
	struct cab_ring *r = p->ring;
	uint32_t k = p->chunk;

	if (p->gap) {		/* we own the buffer's meta until we hand it over */
		r->meta[k].gap = 1;
		p->gap = false;
	}
	p->ptr = cab__chunk(r, k);
	p->lim = p->ptr + r->chunk_words;
}

static bool buffer_empty(struct cab_producer *p, void *arg)
{
	return __atomic_load_n(&p->ring->meta[p->chunk].state, __ATOMIC_ACQUIRE) == CAB_BUF_EMPTY;
}

int cab__nway_start(struct cab_producer *p)
{
	p->chunk = 0;
	p->ptr = p->lim = &p->blocked;
	if (buffer_empty(p, NULL))
		take_buffer(p);
	return 0;
}

static void hand_over(struct cab_producer *p)
{
	struct cab_ring *r = p->ring;
	uint32_t k = p->chunk;

	r->meta[k].used = (uint64_t)(p->ptr - cab__chunk(r, k));
	__atomic_store_n(&r->meta[k].state, CAB_BUF_FULL, __ATOMIC_RELEASE);
	cab__announce(r);
	p->chunk = (k + 1) % r->nchunks;
	p->ptr = p->lim = &p->blocked;
}

int cab__nway_slow(struct cab_producer *p, uint64_t hdr, const uint64_t *pl, size_t n)
{
	struct cab_ring *r = p->ring;

	for (;;) {
		if (p->ptr != &p->blocked) {
			if (p->ptr + 1 + n <= p->lim) {
				p->ptr[0] = hdr;
				memcpy(p->ptr + 1, pl, n * 8);
				p->ptr += 1 + n;
				return 0;
			}
			hand_over(p);
		}
		if (buffer_empty(p, NULL)) {
			if (p->dropping) {
				p->dropping = false;
				__atomic_store_n(&r->sh->prod_dropping, 0, __ATOMIC_RELAXED);
			}
			take_buffer(p);
			continue;
		}
		if (r->mode == CAB_EXHAUSTIVE && (!p->dropping || cab__consumer_back(p)) &&
		    cab__wait_space(p, buffer_empty, NULL) == 0)
			continue;
		cab__drop(p, n);
		return 1;
	}
}

int cab__nway_flush(struct cab_producer *p)
{
	struct cab_ring *r = p->ring;

	if (p->ptr != &p->blocked && p->ptr != cab__chunk(r, p->chunk))
		hand_over(p);
	return 0;
}

/* Deliver full buffers in order. all: the producer is finished, or stopped;
 * the buffer it is filling is not published, so a drain cannot see it. */
int cab__nway_poll(struct cab_consumer *c, cab_consume_fn fn, void *arg, bool all)
{
	struct cab_ring *r = c->r;
	int n = 0;

	for (uint32_t i = 0; i < r->nchunks; i++) {
		struct cab_meta *m = &r->meta[c->chunk];
		if (__atomic_load_n(&m->state, __ATOMIC_ACQUIRE) != CAB_BUF_FULL)
			break;
		const uint64_t *w = cab__chunk(r, c->chunk);
		size_t used = m->used < r->chunk_words ? (size_t)m->used : r->chunk_words;
		uint64_t nrec = 0;
		bool bad = false;
		size_t end = cab__scan(r, w, 0, used, &nrec, &bad);
		int rc = 0;
		if (bad || end != used) {
			c->st.corrupt++;
			cab__fail(-EBADMSG, "buffer %u: bad record header at word %zu", c->chunk, end);
		}
		if (cab__sampling_take(c)) {
			rc = cab__deliver(c, fn, arg, w, end,
					  CAB_SPAN_CHUNK | (m->gap ? CAB_SPAN_GAP : 0));
			c->st.records_delivered += nrec;
			c->st.words_delivered += end;
			c->st.chunks_consumed++;
		} else {
			c->st.records_skipped += nrec;
			c->st.chunks_skipped++;
			c->gap = true;
		}
		m->gap = 0;
		__atomic_store_n(&m->state, CAB_BUF_EMPTY, __ATOMIC_RELEASE);
		cab__space_freed(r);
		c->chunk = (c->chunk + 1) % r->nchunks;
		__atomic_store_n(&r->sh->cons_chunk, c->chunk, __ATOMIC_RELAXED);
		n++;
		if (rc)
			return rc;
		cab__chunk_done(c);
	}
	(void)all;
	return n;
}
