/* cab.h: single-producer/single-consumer rings in shared memory (CAB).
 *
 * Cache-friendly Asymmetric Buffering (Ha, Arnold, Blackburn, McKinley,
 * OOPSLA 2009). One ring per producing thread, in a memfd that both sides
 * map: padrone creates it, the target (or a forked child, or another thread)
 * maps the same fd. The ring carries records of 64-bit words.
 *
 * Records. A record is one header word followed by 0..max_record_words-1
 * payload words. The header is CAB_HDR(tag, n): bits 48..63 hold n, the
 * number of payload words; bits 0..47 are the producer's tag (a REP unit's
 * REP_S word is such a header, see rep.h). A header is never CAB_CLEAR (0)
 * and never CAB_MAGIC, so a header word alone tells "data" from "free" and
 * lets a consumer step over records without knowing what they mean.
 *
 * Layout (kind CAB). The data area is nchunks chunks of chunk_words words.
 * The last max_record_words words of every chunk are a guard holding
 * CAB_MAGIC; every other free word holds CAB_CLEAR. A record starts before the
 * guard and may run into it but never to the chunk's last word, so a record
 * never crosses a chunk boundary, the first word of every chunk in use is a
 * record header, and the producer always leaves a chunk through the slow
 * path (which is where it wakes a sleeping consumer). One line of CAB_MAGIC
 * after the last chunk marks the end of the buffer.
 *
 * Producer fast path (what instrumented code will emit inline; nothing else
 * is touched, in particular no shared index):
 *
 *	w = p->ptr;                       // thread-local, e.g. %gs:OFFSET
 *	if (*w != CAB_CLEAR) goto slow;   // load the sentinel
 *	w[1..n] = payload;                // store the record,
 *	w[0] = header;                    // header last (a release store;
 *	p->ptr = w + 1 + n;               // a plain mov on x86), advance.
 *
 * The slow path sees either CAB_MAGIC (the guard: move p->ptr to the start
 * of the next chunk, wrapping after the last one, and look again) or a
 * header at a chunk start: that chunk is not consumed yet, the ring is full.
 *
 * Consumer. It takes whole chunks, in order, and only once the producer has
 * started the chunk two ahead (it reads that chunk's first word), so the two
 * never touch the same cache lines. After handing a chunk's records to the
 * callback it clears the chunk (CLEAR, guard back to MAGIC) and stores the
 * chunk's first word last, with release: a producer that sees that word
 * CLEAR owns the whole chunk. Every word written is cleared, not only the
 * headers: records vary in length, so any word may be a record start in the
 * next lap, and a stale word there would look like the guard to the
 * producer (which would leave the chunk early) and like a record to a
 * drain. (Clearing only headers, or one word per line, would not be
 * cheaper anyway: the cost is per line written, and with records of a few
 * words nearly every line holds a header.)
 * Before handing records over, the consumer walks their headers to check
 * them (the callback gets whole records, whatever the target scribbled).
 *
 * Costs, measured (bench/pipeline-rings): per line, CAB's consumer reads
 * and clears and its producer loads the sentinel, then writes; N-way's
 * consumer only reads. While the ring fits in a core's L2 that makes CAB
 * up to ~10% slower than N-way (the clear is about a sixth of the
 * consumer's time); beyond L2 CAB is faster: its producer's first touch of
 * a line is a load, which the hardware fetches well ahead, where N-way's is
 * a store that waits for the line (the benchmark's one-thread table shows
 * it without a second core). Tried and dropped: non-temporal or CLDEMOTE'd
 * clears (the producer then fetches from farther: -45..-60%), reading with
 * ownership before clearing, wider stores, deferred clears, producer
 * prefetches of the next chunk (each within noise, or worse).
 *
 * Modes.
 *  - CAB_EXHAUSTIVE: a full ring makes the producer wait: spin for spin_us,
 *    then futex-wait (FUTEX_WAIT on a word in the shared mapping, so it works
 *    across processes) in slices of wait_ms, resuming when two chunks are
 *    free. It never waits forever: when the consumer has closed the ring, its
 *    pid is gone, or its heartbeat (a CLOCK_MONOTONIC timestamp the consumer
 *    refreshes as it polls and waits) is older than consumer_timeout_ms, the
 *    producer switches to dropping records and counts them; it resumes
 *    writing as soon as space appears again.
 *  - CAB_SAMPLING: the producer never waits; a record that finds the ring
 *    full is dropped and counted. The consumer analyses bursts of
 *    burst_chunks consecutive chunks and skips (clears unread) enough chunks
 *    in between to analyse about sample_rate of the stream; it reports the
 *    fraction of records it actually analysed (cab_stats.achieved_rate),
 *    counting the producer's drops as not analysed.
 * Whenever records were dropped or skipped before a span, the span is
 * delivered with CAB_SPAN_GAP, so analyses that pair consecutive records
 * (edge counts) do not pair across the hole.
 *
 * Other kinds, behind the same interface, for the benchmark:
 *  - CAB_KIND_NWAY: PiPA-style N-way buffering: nchunks buffers; the producer
 *    fills one (fast path: a bounds check against a thread-local limit), then
 *    hands it over by a release store of its length into the buffer's state
 *    word and takes the next buffer once the consumer marked it empty.
 *  - CAB_KIND_FFQ: FastForward (Giacomoni, Moseley, Vachharajani, PPoPP 2008):
 *    slots of max_record_words words; a slot is full when its first word (the
 *    header) is nonzero; the consumer reads slot by slot and zeroes each
 *    header; no shared indices. Exhaustive mode only.
 *
 * Conventions: functions return 0 (or a count) or a negative errno and leave
 * a message for cab_errmsg(); nothing prints or exits.
 */
#ifndef PADRONE_PIPELINE_CAB_H
#define PADRONE_PIPELINE_CAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CAB_CLEAR 0ULL
#define CAB_MAGIC 0xCAB0CAB0CAB0CAB0ULL
#define CAB_HDR(tag, n) (((uint64_t)(n) << 48) | (uint64_t)(tag))
#define CAB_HDR_LEN(h) ((size_t)((uint64_t)(h) >> 48))	/* payload words */
#define CAB_HDR_TAG(h) ((uint64_t)(h) & ((1ULL << 48) - 1))
#define CAB_MAX_RECORD_WORDS 4096	/* header + payload */

enum cab_kind { CAB_KIND_CAB = 0, CAB_KIND_NWAY = 1, CAB_KIND_FFQ = 2 };
enum cab_mode { CAB_EXHAUSTIVE = 0, CAB_SAMPLING = 1 };

/* Options; zero fields take the defaults shown. sz must be sizeof the struct
 * the caller was compiled with (as libbpf's opts), so fields can be added. */
struct cab_opts {
	size_t sz;
	enum cab_kind kind;		/* CAB_KIND_CAB */
	enum cab_mode mode;		/* CAB_EXHAUSTIVE */
	size_t chunk_bytes;		/* 64 KiB; multiple of 64, >= 2 * max record */
	unsigned nchunks;		/* 16; at least 4 */
	unsigned max_record_words;	/* 64; header included, <= CAB_MAX_RECORD_WORDS */
	unsigned spin_us;		/* 50: producer spins this long on a full ring */
	unsigned wait_ms;		/* 10: then futex-waits in slices of this */
	unsigned consumer_timeout_ms;	/* 2000: no heartbeat this long = consumer gone */
	double sample_rate;		/* 0.1: sampling mode, fraction analysed, (0, 1] */
	unsigned burst_chunks;		/* 4: sampling mode, chunks per analysed burst */
	bool populate_later;		/* false: its memory is allocated as it is made;
					 * true: by cab_ring__populate (a short setup) */
};

struct cab_ring;		/* one process's mapping of a ring */
struct cab_consumer;

/* The producer's state is public so that the fast path can be inline; only
 * ptr is touched by it (and lim by the N-way kind, base/slot_words by FFQ).
 * Everything else belongs to the slow path. */
struct cab_producer {
	uint64_t *ptr;		/* where the next record goes */
	uint64_t *lim;		/* NWAY: end of the current buffer; FFQ: end of the slots */
	uint64_t *base;		/* FFQ: first slot */
	uint32_t kind;
	uint32_t max_payload;	/* records carry at most this many payload words */
	uint32_t slot_words;	/* FFQ: words per slot */
	uint32_t chunk;		/* chunk/buffer of ptr, as of the last slow path */
	uint64_t *resume;	/* while blocked: where writing resumes */
	uint64_t blocked;	/* a non-CLEAR word ptr points at while blocked */
	uint64_t drop_checks;	/* drops since the consumer was last looked at */
	bool dropping;		/* consumer judged gone: drop instead of waiting */
	bool gap;		/* records were dropped since the last write */
	bool flushed;
	struct cab_ring *ring;
};

/* Called with whole records, nwords words in all. flags: CAB_SPAN_GAP when
 * records were lost (dropped, skipped) between the previous span and this
 * one; CAB_SPAN_CHUNK when the span begins where the producer began a chunk
 * (buffer, slot): a record boundary that does not depend on the records
 * before it, so an analysis that met a record it cannot read can pick up
 * again there. A nonzero return stops cab_consumer__run and is returned by
 * it. */
#define CAB_SPAN_GAP 1u
#define CAB_SPAN_CHUNK 2u
typedef int (*cab_consume_fn)(void *arg, const uint64_t *words, size_t nwords,
			      unsigned flags);

struct cab_stats {
	uint64_t chunks_consumed;	/* chunks (buffers, FFQ batches) delivered */
	uint64_t chunks_skipped;	/* sampling: cleared without being read */
	uint64_t records_delivered, words_delivered;
	uint64_t records_skipped;	/* in skipped chunks */
	uint64_t records_dropped, words_dropped;	/* by the producer */
	uint64_t producer_waits;	/* times the producer, finding the ring full, slept */
	uint64_t producer_wait_ns;	/* time spent in those waits */
	uint64_t corrupt;		/* malformed headers found (chunk rest discarded) */
	double achieved_rate;		/* delivered / (delivered + skipped + dropped) */
	bool producer_dropping;		/* the producer judged the consumer gone */
};

/* Thread-local text of the last error of a cab_* call in this thread. */
const char *cab_errmsg(void);

/* Create a ring in a new memfd (sealed against resizing) and map it. */
int cab_ring__create(const struct cab_opts *opts, struct cab_ring **out);
/* Map a ring another process created, from its fd (inherited or passed over
 * a unix socket). The fd is dup'ed; the caller keeps its own. The geometry is
 * read once and checked against the file size. */
int cab_ring__open(int fd, struct cab_ring **out);
/* Create a ring in an empty memfd someone else made (another process's,
 * opened through /proc/PID/fd/N): sized, sealed if it allows sealing, mapped
 * and laid out as cab_ring__create does. The fd is dup'ed. */
int cab_ring__create_fd(int fd, const struct cab_opts *opts, struct cab_ring **out);
/* Several rings in one file: this one at offset (a page boundary) of fd,
 * a memfd never written from offset on; the file is grown to hold it but
 * not sealed (the caller seals it once every ring is made). Mapped and
 * laid out as cab_ring__create_fd does; the fd is dup'ed. */
int cab_ring__create_at(int fd, uint64_t offset, const struct cab_opts *opts,
			struct cab_ring **out);

/* Where a producer that is not this library (code in another process,
 * written in assembly) finds what cab_producer__slow uses: byte offsets in
 * the mapping, and the geometry. Such a producer follows the protocol of
 * cab_producer__slow (guard, wrap, full, gap flags, waits, drops, counters)
 * and its fast path as described above. */
struct cab_layout {
	uint64_t total_bytes, data_offset, meta_offset, meta_stride, meta_gap;
	uint32_t chunk_words, nchunks, max_record_words, wait_ms, consumer_timeout_ms;
	/* offsets of the shared words */
	uint32_t prod_seq, prod_waiting, prod_state, prod_pid, prod_dropping;
	uint32_t dropped_records, dropped_words, prod_waits, prod_wait_ns;
	uint32_t cons_seq, cons_sleeping, cons_state, cons_heartbeat_ns;
};
void cab_ring__layout(const struct cab_ring *r, struct cab_layout *l);
/* The bytes a ring of these options takes (its file's size, total_bytes
 * of its layout), without making it. */
int cab_ring__size(const struct cab_opts *opts, size_t *bytes);
/* A producer elsewhere (pid) takes the ring: -EBUSY if one has. */
int cab_ring__attach_producer(struct cab_ring *r, int32_t pid);
/* Whether the producer waits now for the consumer to free a chunk (a
 * producer elsewhere says so in the shared header). */
bool cab_ring__producer_waiting(const struct cab_ring *r);
/* Whether a consumer is attached (and has not closed) now. */
bool cab_ring__has_consumer(const struct cab_ring *r);
/* That producer has stopped for good (its code taken out): what it wrote
 * becomes the end of the stream for the consumer. */
void cab_ring__end_producer(struct cab_ring *r);
int cab_ring__fd(const struct cab_ring *r);
enum cab_kind cab_ring__kind(const struct cab_ring *r);
enum cab_mode cab_ring__mode(const struct cab_ring *r);
size_t cab_ring__chunk_bytes(const struct cab_ring *r);
unsigned cab_ring__nchunks(const struct cab_ring *r);
unsigned cab_ring__max_record_words(const struct cab_ring *r);
/* Counters from the shared header (either side may ask). */
int cab_ring__stats(const struct cab_ring *r, struct cab_stats *st);
/* Kind CAB: how many chunks hold records not consumed yet (the one the
 * producer is writing included), now; -ENOTSUP for the other kinds. How
 * full the ring is: nchunks of them and the producer waits (or drops). */
int cab_ring__chunks_in_use(const struct cab_ring *r);
/* A ring made with populate_later: its memory allocated now, its contents
 * untouched (producers and consumers may already be at work), so that the
 * producer's first lap takes no page fault that allocates. */
int cab_ring__populate(struct cab_ring *r);
/* Kind CAB, its producer ended and every chunk given back by its consumer:
 * the chunks' memory returned to the kernel, in every process that maps
 * the ring (they read as cleared chunks after), while the counters stay.
 * -EBUSY while the producer may write or a chunk holds records; -ENOTSUP
 * for the other kinds. */
int cab_ring__release_data(struct cab_ring *r);
void cab_ring__close(struct cab_ring *r);

/* ------------------------------------------------------------ producer */

/* The one producer of a ring (-EBUSY if one is attached). */
int cab_producer__open(struct cab_ring *r, struct cab_producer **out);
/* Everything but the fast path. Returns 0 stored, 1 dropped, or -EMSGSIZE
 * (record too long), -EPIPE (after flush). */
int cab_producer__slow(struct cab_producer *p, uint64_t hdr,
		       const uint64_t *payload, size_t n);
/* End of stream (thread exit): everything written becomes visible to the
 * consumer, which then drains the ring and reports end of stream. */
int cab_producer__flush(struct cab_producer *p);
/* Flushes if not flushed yet, detaches, frees. */
void cab_producer__close(struct cab_producer *p);

static inline int cab__put_cab(struct cab_producer *p, uint64_t hdr,
			       const uint64_t *payload, size_t n)
{
	uint64_t *w = p->ptr;

	if (__builtin_expect(__atomic_load_n(w, __ATOMIC_ACQUIRE) == CAB_CLEAR, 1)) {
		memcpy(w + 1, payload, n * sizeof(*w));
		__atomic_store_n(w, hdr, __ATOMIC_RELEASE);
		p->ptr = w + 1 + n;
		return 0;
	}
	return cab_producer__slow(p, hdr, payload, n);
}

static inline int cab__put_nway(struct cab_producer *p, uint64_t hdr,
				const uint64_t *payload, size_t n)
{
	uint64_t *w = p->ptr;

	if (__builtin_expect(w + 1 + n <= p->lim, 1)) {
		w[0] = hdr;
		memcpy(w + 1, payload, n * sizeof(*w));
		p->ptr = w + 1 + n;
		return 0;
	}
	return cab_producer__slow(p, hdr, payload, n);
}

static inline int cab__put_ffq(struct cab_producer *p, uint64_t hdr,
			       const uint64_t *payload, size_t n)
{
	uint64_t *w = p->ptr;

	if (__builtin_expect(__atomic_load_n(w, __ATOMIC_ACQUIRE) == 0, 1)) {
		memcpy(w + 1, payload, n * sizeof(*w));
		__atomic_store_n(w, hdr, __ATOMIC_RELEASE);
		w += p->slot_words;
		p->ptr = w == p->lim ? p->base : w;
		return 0;
	}
	return cab_producer__slow(p, hdr, payload, n);
}

/* Append one record: hdr must be CAB_HDR(tag, n) with hdr != 0. Returns 0
 * stored, 1 dropped (ring full and not waiting), or a negative errno. */
static inline int cab_producer__put(struct cab_producer *p, uint64_t hdr,
				    const uint64_t *payload, size_t n)
{
	if (__builtin_expect(n > p->max_payload, 0))
		return cab_producer__slow(p, hdr, payload, n);
	switch (p->kind) {
	case CAB_KIND_NWAY:
		return cab__put_nway(p, hdr, payload, n);
	case CAB_KIND_FFQ:
		return cab__put_ffq(p, hdr, payload, n);
	default:
		return cab__put_cab(p, hdr, payload, n);
	}
}

/* Append a record already laid out as header + payload. */
static inline int cab_producer__put_record(struct cab_producer *p, const uint64_t *rec)
{
	return cab_producer__put(p, rec[0], rec + 1, CAB_HDR_LEN(rec[0]));
}

/* ------------------------------------------------------------ consumer */

/* The one consumer of a ring (-EBUSY if one is attached). Records its pid
 * and starts its heartbeat. */
int cab_consumer__open(struct cab_ring *r, struct cab_consumer **out);
/* Deliver every chunk that is complete (the producer is two chunks ahead),
 * or, once the producer has flushed or its process is gone (looked at every
 * 100 ms), everything. Returns the number of chunks (buffers, FFQ batches)
 * delivered or skipped, 0 if none was ready, or -ECANCELED if the callback
 * stopped it (cab_consumer__run returns the callback's value). Refreshes the
 * heartbeat. */
int cab_consumer__poll(struct cab_consumer *c, cab_consume_fn fn, void *arg);
/* Deliver everything written so far, including the chunk the producer is
 * still writing (what it adds later comes with later polls). For a producer
 * that is stopped or dead. Returns as poll. */
int cab_consumer__drain(struct cab_consumer *c, cab_consume_fn fn, void *arg);
/* The consumer is alive though busy elsewhere (waiting for a later stage
 * of its own pipeline): its heartbeat refreshed, so that an exhaustive
 * producer waits for it rather than judge it gone and drop. Called by the
 * consumer's thread at least every consumer_timeout_ms / 4 while it
 * waits. */
void cab_consumer__beat(struct cab_consumer *c);
/* Sleep until the producer makes progress or timeout_ms passes (futex on
 * the shared header; heartbeats continue). Returns 0. */
int cab_consumer__wait(struct cab_consumer *c, unsigned timeout_ms);
/* True once the producer flushed (or died) and everything was delivered. */
bool cab_consumer__eof(struct cab_consumer *c);
/* Poll until end of stream, *stop becoming nonzero, or the callback
 * returning nonzero (returned). Spins briefly when idle, then sleeps until
 * the producer enters a chunk, in naps growing from wait_ms to a quarter
 * of consumer_timeout_ms (heartbeats continue): an idle ring costs a few
 * wakes a second. When the producer's process is gone, drains what it
 * wrote and ends. Whoever sets *stop calls cab_ring__wake_consumer, or the
 * consumer may see it only at the end of its nap. */
int cab_consumer__run(struct cab_consumer *c, cab_consume_fn fn, void *arg,
		      const volatile int *stop);
/* Called by cab_consumer__run_idle before each nap (nothing ready): a
 * negative return stops the run and is returned, a positive one (it
 * delivered something itself, as by cab_consumer__drain) skips the nap. */
typedef int (*cab_idle_fn)(void *arg);
/* cab_consumer__run, idle(arg) called before each nap. */
int cab_consumer__run_idle(struct cab_consumer *c, cab_consume_fn fn, cab_idle_fn idle, void *arg,
			   const volatile int *stop);
/* Wake the ring's consumer if it sleeps (any thread or process). */
void cab_ring__wake_consumer(struct cab_ring *r);
/* Consumer-side counters (delivered, skipped, corrupt) plus the shared ones. */
int cab_consumer__stats(const struct cab_consumer *c, struct cab_stats *st);
/* Detach: a waiting producer stops waiting and drops from now on. */
void cab_consumer__close(struct cab_consumer *c);

#ifdef __cplusplus
}
#endif

#endif
