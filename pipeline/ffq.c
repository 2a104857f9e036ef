/* ffq.c: a FastForward queue (Giacomoni, Moseley, Vachharajani, PPoPP 2008)
 * behind the cab.h interface, for the benchmark. The ring is an array of
 * slots of max_record_words words; a slot is full when its first word (the
 * record header, written last with release) is nonzero. The producer checks
 * its slot, the consumer reads slot after slot and zeroes each header; there
 * are no shared indices. Unlike CAB the consumer follows the producer slot
 * by slot, so the two sides share cache lines as they go. The paper's
 * temporal slipping (the consumer holding back while close behind the
 * producer) is left out: measured in bench/pipeline-rings it changed
 * nothing, because there the ring runs full and it is the producer that
 * trails the consumer, slot by slot (as any FastForward producer must). */
#include "pipeline/cab-internal.h"

#include <errno.h>

static bool slot_free(struct cab_producer *p, void *arg)
{
	return __atomic_load_n(p->ptr, __ATOMIC_ACQUIRE) == 0;
}

int cab__ffq_slow(struct cab_producer *p, uint64_t hdr, const uint64_t *pl, size_t n)
{
	struct cab_ring *r = p->ring;

	for (;;) {
		if (slot_free(p, NULL)) {
			if (p->dropping) {
				p->dropping = false;
				__atomic_store_n(&r->sh->prod_dropping, 0, __ATOMIC_RELAXED);
			}
			return cab__put_ffq(p, hdr, pl, n);
		}
		if ((!p->dropping || cab__consumer_back(p)) &&
		    cab__wait_space(p, slot_free, NULL) == 0)
			continue;
		cab__drop(p, n);
		return 1;
	}
}

/* Dequeue slot after slot, FastForward style: read the header, deliver the
 * record, empty the slot, next. One call takes at most a quarter of the
 * slots, so heartbeats and stop requests are seen. */
int cab__ffq_poll(struct cab_consumer *c, cab_consume_fn fn, void *arg, bool all)
{
	struct cab_ring *r = c->r;
	uint32_t max = r->nslots / 4 ? r->nslots / 4 : 1, count = 0;
	uint64_t dropped = __atomic_load_n(&r->sh->dropped_records, __ATOMIC_RELAXED);
	int rc = 0;

	/* Drops are not marked in the data; a rise of the counter flags the
	 * next record. */
	if (dropped != c->dropped_seen) {
		c->dropped_seen = dropped;
		c->gap = true;
	}
	while (count < max && !rc) {
		uint64_t *w = r->data + (size_t)c->chunk * r->slot_words;
		uint64_t h = __atomic_load_n(w, __ATOMIC_ACQUIRE);
		if (h == 0)
			break;
		size_t len = 1 + CAB_HDR_LEN(h);
		if (len > r->slot_words) {
			c->st.corrupt++;
			cab__fail(-EBADMSG, "slot %u: bad record header", c->chunk);
		} else {
			rc = cab__deliver(c, fn, arg, w, len, CAB_SPAN_CHUNK);
			c->st.records_delivered++;
			c->st.words_delivered += len;
		}
		__atomic_store_n(w, 0, __ATOMIC_RELEASE);
		c->chunk = c->chunk + 1 == r->nslots ? 0 : c->chunk + 1;
		count++;
	}
	if (count) {
		cab__space_freed(r);
		c->st.chunks_consumed++;
		__atomic_store_n(&r->sh->cons_chunk, c->chunk, __ATOMIC_RELAXED);
	}
	(void)all;
	return rc ? rc : (count ? 1 : 0);
}
