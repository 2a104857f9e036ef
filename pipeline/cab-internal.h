/* cab-internal.h: what cab.c, cab-producer.c, cab-consumer.c, nway.c and
 * ffq.c share; not a public header.
 *
 * The memfd holds: the shared header (struct cab_shared, its own cache lines
 * per writer), one struct cab_meta per chunk/buffer, then the data area at
 * data_offset (page aligned).
 */
#ifndef PADRONE_PIPELINE_CAB_INTERNAL_H
#define PADRONE_PIPELINE_CAB_INTERNAL_H

#include "pipeline/cab.h"
#include "util/util.h"

#include <stdarg.h>
#include <sys/types.h>

#define CAB_RING_MAGIC 0x31474e4952424143ULL	/* "CABRING1" */
#define CAB_RING_VERSION 1
#define CAB_LINE 64

enum { CAB_SIDE_NONE = 0, CAB_SIDE_ATTACHED = 1, CAB_SIDE_FLUSHED = 2, CAB_SIDE_CLOSED = 3 };
enum { CAB_BUF_EMPTY = 0, CAB_BUF_FULL = 1 };

struct cab_shared {
	/* written once by cab_ring__create */
	uint64_t magic;
	uint32_t version, kind, mode, pad0;
	uint64_t total_bytes, data_offset;
	uint32_t chunk_words, nchunks, max_record_words, slot_words;
	uint32_t nslots, spin_us, wait_ms, consumer_timeout_ms;
	uint32_t burst_chunks, pad1;
	double sample_rate;

	/* Grouped by who writes how often, so that neither side reads a line
	 * the other dirties per chunk: a side's per-chunk writes go to its own
	 * line, and the flags the other side checks per chunk change only
	 * when someone sleeps, attaches or ends. */

	/* the producer, per chunk (the consumer reads it only to sleep) */
	_Alignas(CAB_LINE) uint32_t prod_seq;	/* futex: bumped at chunk entry, handoff, flush */
	uint32_t pad2;
	uint64_t dropped_records, dropped_words;
	uint64_t prod_waits, prod_wait_ns;

	/* the producer, rarely */
	/* producer sleeps on cons_seq: 1 for any freed chunk, 2 + K (an
	 * instrumented copy's stub) for chunk K, so that it wakes when a
	 * stretch of the ring is free, not at each chunk */
	_Alignas(CAB_LINE) uint32_t prod_waiting;
	uint32_t prod_state;
	int32_t prod_pid;
	uint32_t prod_dropping;

	/* the consumer, per chunk (the producer reads it only to sleep) */
	_Alignas(CAB_LINE) uint32_t cons_seq;	/* futex: bumped when space is freed */
	uint32_t cons_chunk, cons_off;		/* where a re-attached consumer resumes */

	/* the consumer, rarely */
	_Alignas(CAB_LINE) uint32_t cons_sleeping;	/* consumer sleeps on prod_seq */
	uint32_t cons_state;
	int32_t cons_pid;

	/* the consumer's heartbeat, about once a millisecond */
	_Alignas(CAB_LINE) uint64_t cons_heartbeat_ns;
};

/* Per chunk (CAB) or buffer (NWAY). */
struct cab_meta {
	_Alignas(CAB_LINE) uint32_t state;	/* NWAY: CAB_BUF_EMPTY / CAB_BUF_FULL */
	uint32_t gap;				/* records were dropped before this chunk */
	uint64_t used;				/* NWAY: words in the full buffer */
};

struct cab_ring {
	int fd;
	off_t file_off;		/* where in fd the ring starts (page aligned) */
	void *map;
	size_t map_len;
	struct cab_shared *sh;
	struct cab_meta *meta;
	uint64_t *data;
	/* private copy of the geometry: the shared one is never trusted again */
	enum cab_kind kind;
	enum cab_mode mode;
	uint32_t chunk_words, nchunks, max_rec, data_end, slot_words, nslots;
	uint32_t spin_us, wait_ms, timeout_ms, burst;
	double rate;
};

struct cab_consumer {
	struct cab_ring *r;
	uint32_t chunk;		/* next chunk/buffer/slot to deliver */
	uint32_t off;		/* words of it already delivered (drain) */
	bool gap;		/* deliver the next span with CAB_SPAN_GAP */
	bool eof;
	bool producer_dead;
	int cb_ret;		/* what a callback returned to stop */
	uint32_t burst_left;
	uint64_t analysed_chunks, seen_chunks;
	uint64_t last_hb_ns, last_pid_check_ns;
	uint32_t hb_every, hb_count;	/* beat after every hb_every chunks/buffers */
	uint64_t dropped_seen;
	struct cab_stats st;
};

/* cab.c, cab-producer.c, cab-consumer.c */
int cab__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cab__futex_wait(uint32_t *word, uint32_t val, unsigned timeout_ms);
void cab__futex_wake(uint32_t *word);
/* The process pid is known to be gone (a side that left without saying). */
bool cab__pid_gone(int32_t pid);
/* Chunk k made empty: CLEAR, then the guard of MAGIC words. */
void cab__init_chunk(struct cab_ring *r, uint32_t k);
/* st's achieved_rate from its record counts. */
void cab__rate_of(struct cab_stats *st);

static inline void cab__pause(void)
{
	__builtin_ia32_pause();
}
void cab__announce(struct cab_ring *r);
void cab__space_freed(struct cab_ring *r);
void cab__chunk_freed(struct cab_ring *r, uint32_t k);
void cab__drop(struct cab_producer *p, size_t n);
bool cab__consumer_back(struct cab_producer *p);
/* Wait until ready(p, arg); 0 when it is, 1 when the consumer is gone. */
int cab__wait_space(struct cab_producer *p, bool (*ready)(struct cab_producer *, void *),
		    void *arg);
bool cab__sampling_take(struct cab_consumer *c);
/* A chunk or buffer was delivered: refresh the heartbeat now and then. */
void cab__chunk_done(struct cab_consumer *c);
int cab__deliver(struct cab_consumer *c, cab_consume_fn fn, void *arg,
		 const uint64_t *w, size_t n, unsigned flags);
/* Walk records in w[0..lim): stops at CLEAR, at lim, or at a bad header
 * (*bad set). Returns the end position; *nrec counts records. */
size_t cab__scan(const struct cab_ring *r, const uint64_t *w, size_t start, size_t lim,
		 uint64_t *nrec, bool *bad);

/* nway.c / ffq.c */
int cab__nway_slow(struct cab_producer *p, uint64_t hdr, const uint64_t *pl, size_t n);
int cab__nway_start(struct cab_producer *p);
int cab__nway_flush(struct cab_producer *p);
int cab__nway_poll(struct cab_consumer *c, cab_consume_fn fn, void *arg, bool all);
int cab__ffq_slow(struct cab_producer *p, uint64_t hdr, const uint64_t *pl, size_t n);
int cab__ffq_poll(struct cab_consumer *c, cab_consume_fn fn, void *arg, bool all);

static inline uint64_t *cab__chunk(const struct cab_ring *r, uint32_t k)
{
	return r->data + (size_t)k * r->chunk_words;
}

#endif
