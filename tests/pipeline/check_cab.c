/* CAB rings: geometry checks, the sentinel layout, exact delivery through
 * wraps and chunk boundaries (all three kinds, tiny to large rings), two
 * processes (fork and fd passing), sampling mode, a consumer killed or
 * gone mid-stream (the producer must not hang and must count drops),
 * re-attaching, corrupt data, drain, and REP units recovered across
 * processes, the guessing header walk, and chunks handed back fully clear. */
#include "tests/lib/tu.h"
#include "pipeline/cab-internal.h"
#include "pipeline/rep.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ records */

/* Record i: tag i + 1, a length cycling through 0..maxp payload words, and
 * payload words that include CLEAR and MAGIC values on purpose. */
static bool max_len_only;	/* every record as long as allowed */

static size_t rec_len(uint64_t i, unsigned maxp)
{
	if (max_len_only)
		return maxp;
	return (size_t)((i * 7 + i / 3) % (maxp + 1));
}

static uint64_t rec_word(uint64_t i, size_t k)
{
	if (k % 5 == 4)
		return CAB_CLEAR;
	if (k % 7 == 6)
		return CAB_MAGIC;
	return (i + 1) * 0x9E3779B97F4A7C15ULL ^ (k * 0x2545F4914F6CDD1DULL);
}

static int put_rec(struct cab_producer *p, uint64_t i, unsigned maxp)
{
	uint64_t pl[CAB_MAX_RECORD_WORDS];
	size_t n = rec_len(i, maxp);

	for (size_t k = 0; k < n; k++)
		pl[k] = rec_word(i, k);
	return cab_producer__put(p, CAB_HDR(i + 1, n), pl, n);
}

struct verify {
	uint64_t next, nrec, bad, gaps, spans;
	unsigned maxp;
	unsigned slow_us;	/* sleep per span: a slow consumer */
	uint64_t stop_after;	/* stop (return 1) after this many records */
	char why[160];
};

static void vbad(struct verify *v, const char *why)
{
	if (!v->bad++)
		snprintf(v->why, sizeof v->why, "%s (record %" PRIu64 ")", why, v->next);
}

/* Records must come in order; a jump forward only at a span flagged GAP. */
static int verify_fn(void *arg, const uint64_t *w, size_t n, unsigned flags)
{
	struct verify *v = arg;
	size_t pos = 0;

	v->spans++;
	if (flags & CAB_SPAN_GAP)
		v->gaps++;
	while (pos < n) {
		uint64_t h = w[pos], i = CAB_HDR_TAG(h) - 1;
		size_t len = CAB_HDR_LEN(h);
		if (i != v->next && !(pos == 0 && (flags & CAB_SPAN_GAP) && i > v->next))
			vbad(v, "out of order");
		if (len != rec_len(i, v->maxp) || pos + 1 + len > n) {
			vbad(v, "bad length");
			return 0;
		}
		for (size_t k = 0; k < len; k++)
			if (w[pos + 1 + k] != rec_word(i, k))
				vbad(v, "bad payload");
		v->next = i + 1;
		v->nrec++;
		pos += 1 + len;
	}
	if (v->slow_us)
		usleep(v->slow_us);
	return v->stop_after && v->nrec >= v->stop_after;
}

static struct cab_opts opts_of(enum cab_kind kind, size_t chunk, unsigned nchunks, unsigned maxrec)
{
	return (struct cab_opts){ .sz = sizeof(struct cab_opts), .kind = kind, .chunk_bytes = chunk,
				  .nchunks = nchunks, .max_record_words = maxrec };
}

/* ------------------------------------------------------------ geometry */

START_TEST(bad_geometry_is_refused)
{
	struct cab_ring *r;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 4096, 3, 8);

	ck_assert_int_eq(cab_ring__create(&o, &r), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cab_errmsg(), "at least 4 chunks"));
	size_t bytes = 1;
	ck_assert_int_eq(cab_ring__size(&o, &bytes), -EINVAL);
	ck_assert_uint_eq(bytes, 0);
	o.nchunks = 4;
	o.chunk_bytes = 100;
	ck_assert_int_eq(cab_ring__create(&o, &r), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cab_errmsg(), "multiple of 64"));
	o.chunk_bytes = 64;
	ck_assert_int_eq(cab_ring__create(&o, &r), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cab_errmsg(), "fewer than two records"));
	o.chunk_bytes = 4096;
	o.max_record_words = CAB_MAX_RECORD_WORDS + 1;
	ck_assert_int_eq(cab_ring__create(&o, &r), -EINVAL);
	o.max_record_words = 8;
	o.kind = CAB_KIND_FFQ;
	o.mode = CAB_SAMPLING;
	ck_assert_int_eq(cab_ring__create(&o, &r), -ENOTSUP);
	o.kind = CAB_KIND_CAB;
	o.sample_rate = 1.5;
	ck_assert_int_eq(cab_ring__create(&o, &r), -EINVAL);
	o.sample_rate = 0;
	o.sz = 3;
	ck_assert_int_eq(cab_ring__create(&o, &r), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cab_errmsg(), "cab_opts.sz"));

	/* An fd that is no ring, or a truncated one. */
	int fd = memfd_create("not-a-ring", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(cab_ring__open(fd, &r), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cab_errmsg(), "too small"));
	ck_assert_int_eq(ftruncate(fd, 8192), 0);
	ck_assert_int_eq(cab_ring__open(fd, &r), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cab_errmsg(), "not a CAB ring"));
	close(fd);

	/* A good ring reopens with the same geometry; its memfd is sealed. */
	struct cab_ring *a, *b;
	o = opts_of(CAB_KIND_NWAY, 8192, 6, 16);
	ck_assert_int_eq(cab_ring__create(&o, &a), 0);
	ck_assert_int_eq(cab_ring__open(cab_ring__fd(a), &b), 0);
	ck_assert_int_eq(cab_ring__kind(b), CAB_KIND_NWAY);
	ck_assert_uint_eq(cab_ring__chunk_bytes(b), 8192);
	ck_assert_uint_eq(cab_ring__nchunks(b), 6);
	ck_assert_uint_eq(cab_ring__max_record_words(b), 16);
	ck_assert_int_eq(ftruncate(cab_ring__fd(a), 4096), -1);
	ck_assert_int_eq(errno, EPERM);
	cab_ring__close(b);
	cab_ring__close(a);
}
END_TEST

START_TEST(one_producer_one_consumer)
{
	struct cab_ring *r;
	struct cab_producer *p, *p2;
	struct cab_consumer *c, *c2;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 1024, 4, 8);
	uint64_t pl[16] = { 0 };

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_producer__open(r, &p2), -EBUSY);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	ck_assert_int_eq(cab_consumer__open(r, &c2), -EBUSY);
	ck_assert_int_eq(cab_producer__put(p, CAB_HDR(1, 8), pl, 8), -EMSGSIZE);
	ck_assert_int_eq(cab_producer__put(p, CAB_HDR(1, 7), pl, 7), 0);
	ck_assert_int_eq(cab_producer__slow(p, 0, pl, 0), -EINVAL);
	ck_assert_int_eq(cab_producer__slow(p, CAB_HDR(1, 2), pl, 3), -EINVAL);
	ck_assert_int_eq(cab_producer__flush(p), 0);
	ck_assert_int_eq(cab_producer__put(p, CAB_HDR(1, 1), pl, 1), -EPIPE);
	cab_producer__close(p);
	cab_consumer__close(c);
	cab_ring__close(r);
}
END_TEST

/* ------------------------------------------------------------ layout */

static bool chunk_pristine(struct cab_ring *r, uint32_t k)
{
	uint64_t *w = cab__chunk(r, k);
	for (uint32_t i = 0; i < r->chunk_words; i++)
		if (w[i] != (i < r->data_end ? CAB_CLEAR : CAB_MAGIC))
			return false;
	return true;
}

START_TEST(sentinels_and_two_chunks_behind)
{
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 512, 4, 8);	/* 64 words: 56 data + 8 guard */
	uint64_t pl[7] = { 1, 2, 3, 4, 5, 6, 7 };

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_uint_eq(r->data_end, 56);
	for (uint32_t k = 0; k < 4; k++)
		ck_assert(chunk_pristine(r, k));
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);

	/* Records of 8 words: 7 fill words 0..55; the producer stops on the
	 * guard. A record of 5 words at 52 would have run into it. */
	for (uint64_t i = 0; i < 7; i++)
		ck_assert_int_eq(cab_producer__put(p, CAB_HDR(i + 1, 7), pl, 7), 0);
	ck_assert_ptr_eq(p->ptr, cab__chunk(r, 0) + 56);
	ck_assert_uint_eq(*p->ptr, CAB_MAGIC);
	ck_assert_int_eq(cab_consumer__poll(c, NULL, NULL), 0);
	/* Eight more: through chunk 1 and into chunk 2. */
	for (uint64_t i = 7; i < 15; i++)
		ck_assert_int_eq(cab_producer__put(p, CAB_HDR(i + 1, 7), pl, 7), 0);
	ck_assert_ptr_eq(p->ptr, cab__chunk(r, 2) + 8);
	ck_assert_uint_eq(cab__chunk(r, 1)[48], CAB_HDR(14, 7));
	ck_assert_int_eq(cab_consumer__poll(c, NULL, NULL), 1);	/* chunk 0 only */
	ck_assert(chunk_pristine(r, 0));	/* cleared, guard restored */
	ck_assert(!chunk_pristine(r, 1));
	ck_assert_int_eq(cab_consumer__poll(c, NULL, NULL), 0);
	struct cab_stats st;
	cab_consumer__stats(c, &st);
	ck_assert_uint_eq(st.records_delivered, 7);

	/* Flush: the rest (chunk 1 and the partial chunk 2) follows. */
	cab_producer__flush(p);
	ck_assert_int_eq(cab_consumer__poll(c, NULL, NULL), 2);
	ck_assert(cab_consumer__eof(c));
	cab_consumer__stats(c, &st);
	ck_assert_uint_eq(st.records_delivered, 15);
	ck_assert_uint_eq(st.records_dropped, 0);
	for (uint32_t k = 0; k < 4; k++)
		ck_assert(chunk_pristine(r, k));
	cab_producer__close(p);
	cab_consumer__close(c);
	cab_ring__close(r);
}
END_TEST

/* The consumer's walk guesses each record is as long as the one before; it
 * must accept and refuse exactly what a plain walk does: a CLEAR word ends
 * the data even after records of one word (whose length, 1, is CLEAR's
 * too), MAGIC and over-long headers are refused inside a run of equal
 * lengths, and a change of length is followed. */
START_TEST(header_walk_checks_every_guess)
{
	struct cab_ring *r;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 512, 4, 8);
	uint64_t w[64], nrec;
	bool bad;

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	memset(w, 0, sizeof w);
	for (int i = 0; i < 5; i++)	/* five records of no payload, then CLEAR */
		w[i] = CAB_HDR(i + 1, 0);
	nrec = 0, bad = false;
	ck_assert_uint_eq(cab__scan(r, w, 0, 56, &nrec, &bad), 5);
	ck_assert_uint_eq(nrec, 5);
	ck_assert(!bad);

	/* Runs of 3-word records, a change to 1 and 8 words, back to 3. */
	size_t at = 0, want = 0;
	static const unsigned lens[] = { 3, 3, 3, 1, 1, 8, 3, 3, 3, 3 };
	memset(w, 0, sizeof w);
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		w[at] = CAB_HDR(i + 1, lens[i] - 1);
		for (unsigned k = 1; k < lens[i]; k++)
			w[at + k] = k % 2 ? CAB_MAGIC : CAB_CLEAR;	/* payload is never read */
		at += lens[i];
	}
	want = at;
	nrec = 0, bad = false;
	ck_assert_uint_eq(cab__scan(r, w, 0, 56, &nrec, &bad), want);
	ck_assert_uint_eq(nrec, 10);
	ck_assert(!bad);
	/* The walk stops at lim, at a record boundary past it. */
	nrec = 0;
	ck_assert_uint_eq(cab__scan(r, w, 0, 8, &nrec, &bad), 9);
	ck_assert_uint_eq(nrec, 3);

	/* Inside a run of equal lengths: MAGIC, then an over-long header. */
	uint64_t bads[2] = { CAB_MAGIC, CAB_HDR(77, 8) };
	for (int b = 0; b < 2; b++) {
		memset(w, 0, sizeof w);
		for (int i = 0; i < 12; i++)
			w[i * 4] = CAB_HDR(i + 1, 3);
		w[6 * 4] = bads[b];
		nrec = 0, bad = false;
		ck_assert_uint_eq(cab__scan(r, w, 0, 56, &nrec, &bad), 24);
		ck_assert_uint_eq(nrec, 6);
		ck_assert(bad);
	}
	cab_ring__close(r);
}
END_TEST

/* Every chunk the consumer hands back is as new: CLEAR up to the guard,
 * MAGIC in it, whatever was there. Records of every length (so the next
 * lap's record starts fall on the last lap's payload words), payload words
 * never CLEAR (so any word left uncleared would stop the producer early,
 * and a drain would read it as a record), records spilling into the guard
 * by every amount, and many wraps. */
START_TEST(consumed_chunks_are_handed_back_clear)
{
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 512, 6, 16);	/* 64 words: 48 data + 16 guard */
	uint64_t pl[15];
	uint64_t got = 0, words = 0;

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	for (uint64_t i = 0; i < 20000; i++) {
		size_t n = (size_t)((i * 7 + i / 5) % 16);
		for (size_t k = 0; k < n; k++)
			pl[k] = ~0ULL - i - k;
		uint64_t *at = p->ptr;
		ck_assert_int_eq(cab_producer__put(p, CAB_HDR(i + 1, n), pl, n), 0);
		/* The fast path never leaves a chunk before its guard: a record
		 * starting below it went exactly where the last one ended. */
		uint32_t k = (uint32_t)((size_t)(at - r->data) / r->chunk_words);
		if (at < r->data + (size_t)r->nchunks * r->chunk_words &&
		    at < cab__chunk(r, k) + r->data_end && at != cab__chunk(r, k))
			ck_assert_ptr_eq(p->ptr, at + 1 + n);
		uint32_t from = c->chunk;
		int rc = cab_consumer__poll(c, NULL, NULL);
		ck_assert_int_ge(rc, 0);
		for (int j = 0; j < rc; j++)
			ck_assert_msg(chunk_pristine(r, (from + (uint32_t)j) % r->nchunks),
				      "chunk %u handed back dirty (record %" PRIu64 ")",
				      (from + (uint32_t)j) % r->nchunks, i);
		got += (uint64_t)rc;
		words += 1 + n;
	}
	ck_assert_uint_gt(got, 3 * r->nchunks);	/* many wraps */
	/* A chunk holds data_end words and at most a record's spill: with
	 * nothing cut short, the chunks used are few. */
	struct cab_stats st;
	cab_consumer__stats(c, &st);
	ck_assert_uint_le(st.chunks_consumed * r->data_end, words);
	cab_producer__flush(p);
	while (!cab_consumer__eof(c))
		ck_assert_int_ge(cab_consumer__poll(c, NULL, NULL), 0);
	cab_consumer__stats(c, &st);
	ck_assert_uint_eq(st.records_delivered, 20000);
	ck_assert_uint_eq(st.words_delivered, words);
	ck_assert_uint_eq(st.corrupt, 0);
	for (uint32_t k = 0; k < r->nchunks; k++)
		ck_assert(chunk_pristine(r, k));
	cab_producer__close(p);
	cab_consumer__close(c);
	cab_ring__close(r);
}
END_TEST

/* ------------------------------------------------------------ one thread */

struct geo {
	enum cab_kind kind;
	size_t chunk;
	unsigned nchunks, maxrec;
};

static const struct geo geos[] = {
	{ CAB_KIND_CAB, 128, 4, 4 },		/* tiny: 16 words, 3-word guard */
	{ CAB_KIND_CAB, 512, 5, 32 },		/* chunk = 2 records of the largest size */
	{ CAB_KIND_CAB, 4096, 7, 64 },
	{ CAB_KIND_CAB, 65536, 16, 4096 },	/* the largest records */
	{ CAB_KIND_NWAY, 128, 4, 4 },
	{ CAB_KIND_NWAY, 4096, 8, 64 },
	{ CAB_KIND_FFQ, 128, 4, 4 },
	{ CAB_KIND_FFQ, 4096, 8, 16 },
};

/* Put and poll in turn, so the ring never fills: every record must come
 * out exactly once, in order, through many wraps. */
static void interleaved(const struct geo *g, uint64_t nrec)
{
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct cab_opts o = opts_of(g->kind, g->chunk, g->nchunks, g->maxrec);
	struct verify v = { .maxp = g->maxrec - 1 };

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	for (uint64_t i = 0; i < nrec; i++) {
		ck_assert_int_eq(put_rec(p, i, v.maxp), 0);
		ck_assert_int_ge(cab_consumer__poll(c, verify_fn, &v), 0);
	}
	cab_producer__flush(p);
	while (!cab_consumer__eof(c))
		ck_assert_int_ge(cab_consumer__poll(c, verify_fn, &v), 0);
	ck_assert_msg(v.bad == 0, "kind %d chunk %zu: %s", g->kind, g->chunk, v.why);
	ck_assert_uint_eq(v.nrec, nrec);
	ck_assert_uint_eq(v.gaps, 0);
	struct cab_stats st;
	cab_consumer__stats(c, &st);
	ck_assert_uint_eq(st.records_delivered, nrec);
	ck_assert_uint_eq(st.records_dropped, 0);
	ck_assert_uint_eq(st.corrupt, 0);
	ck_assert(st.achieved_rate == 1.0);
	cab_producer__close(p);
	cab_consumer__close(c);
	cab_ring__close(r);
}

/* How full the ring is (stats' fill): chunks holding records not consumed
 * yet, counted from their first words. */
START_TEST(chunks_in_use_counts_unconsumed_chunks)
{
	struct cab_ring *r, *nway;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 512, 6, 16);	/* 48 data words a chunk */
	struct cab_opts on = opts_of(CAB_KIND_NWAY, 512, 6, 16);
	uint64_t pl[15] = { 0 };

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	ck_assert_int_eq(cab_ring__chunks_in_use(r), 0);
	ck_assert_int_eq(cab_producer__put(p, CAB_HDR(1, 15), pl, 15), 0);
	ck_assert_int_eq(cab_ring__chunks_in_use(r), 1);
	for (uint64_t i = 1; i < 9; i++)	/* 16 words a record: 3 a chunk */
		ck_assert_int_eq(cab_producer__put(p, CAB_HDR(i + 1, 15), pl, 15), 0);
	ck_assert_int_eq(cab_ring__chunks_in_use(r), 3);
	ck_assert_int_eq(cab_consumer__poll(c, NULL, NULL), 1);	/* the one two behind */
	ck_assert_int_eq(cab_ring__chunks_in_use(r), 2);
	cab_producer__flush(p);
	while (!cab_consumer__eof(c))
		ck_assert_int_ge(cab_consumer__poll(c, NULL, NULL), 0);
	ck_assert_int_eq(cab_ring__chunks_in_use(r), 0);
	cab_producer__close(p);
	cab_consumer__close(c);
	cab_ring__close(r);
	ck_assert_int_eq(cab_ring__create(&on, &nway), 0);
	ck_assert_int_eq(cab_ring__chunks_in_use(nway), -ENOTSUP);
	cab_ring__close(nway);
}
END_TEST

static int count_words(void *arg, const uint64_t *words, size_t n, unsigned flags)
{
	(void)words;
	(void)flags;
	*(size_t *)arg += n;
	return 0;
}

/* Bytes of memory behind a ring's memfd. */
static long long ring_memory(const struct cab_ring *r)
{
	struct stat st;

	ck_assert_int_eq(fstat(cab_ring__fd(r), &st), 0);
	return (long long)st.st_blocks * 512;
}

/* A ring whose producer ended and whose consumer drained it gives its
 * chunks' memory back, and only then; what the consumer read stays read,
 * the ring stays a ring (its counters, its end). */
START_TEST(a_drained_ring_gives_its_pages_back)
{
	struct cab_ring *r, *nway;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 16384, 4, 16);
	struct cab_opts on = opts_of(CAB_KIND_NWAY, 16384, 4, 16);
	size_t words = 0;
	uint64_t pl[15] = { 0 };

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	for (uint64_t i = 0; i < 250; i++)	/* 2000 words a chunk: 2 chunks */
		ck_assert_int_eq(cab_producer__put(p, CAB_HDR(i + 1, 15), pl, 15), 0);
	long long full = ring_memory(r);
	ck_assert_int_ge(full, 2 * 16384);
	ck_assert_int_eq(cab_ring__release_data(r), -EBUSY);	/* the producer may write */
	cab_producer__flush(p);
	ck_assert_int_eq(cab_ring__release_data(r), -EBUSY);	/* records not read */
	ck_assert_int_eq(ring_memory(r), full);
	while (!cab_consumer__eof(c))
		ck_assert_int_ge(cab_consumer__poll(c, count_words, &words), 0);
	ck_assert_uint_eq(words, 250 * 16);
	ck_assert_int_eq(cab_ring__release_data(r), 0);
	ck_assert_int_le(ring_memory(r), full - 2 * 16384);
	ck_assert_int_eq(cab_ring__chunks_in_use(r), 0);
	ck_assert(cab_consumer__eof(c));
	ck_assert_int_eq(cab_consumer__poll(c, count_words, &words), 0);
	ck_assert_uint_eq(words, 250 * 16);
	cab_producer__close(p);
	cab_consumer__close(c);
	cab_ring__close(r);
	ck_assert_int_eq(cab_ring__create(&on, &nway), 0);
	ck_assert_int_eq(cab_ring__release_data(nway), -ENOTSUP);
	cab_ring__close(nway);
}
END_TEST

/* A ring made to be populated later is made touching only its guards'
 * pages, reads as a ring made whole (every chunk CLEAR up to its guard of
 * MAGIC), and gets its memory when asked, its contents untouched. */
START_TEST(a_ring_populated_later_is_the_same_ring)
{
	struct cab_opts o = opts_of(CAB_KIND_CAB, 65536, 16, 16);
	struct cab_ring *r;
	struct cab_producer *p;
	uint64_t pl[15] = { 0 };

	o.populate_later = true;
	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	long long made = ring_memory(r);
	ck_assert_int_le(made, 16 * 65536 / 4);	/* a page a chunk, and the header's */
	for (uint32_t k = 0; k < 16; k++) {
		const uint64_t *w = cab__chunk(r, k);
		ck_assert_uint_eq(w[0], CAB_CLEAR);
		ck_assert_uint_eq(w[r->data_end - 1], 0);
		for (uint32_t i = r->data_end; i < r->chunk_words; i++)
			ck_assert_uint_eq(w[i], CAB_MAGIC);
	}
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_producer__put(p, CAB_HDR(7, 15), pl, 15), 0);
	ck_assert_int_eq(cab_ring__populate(r), 0);
	ck_assert_int_ge(ring_memory(r), 16 * 65536);
	ck_assert_uint_eq(cab__chunk(r, 0)[0], CAB_HDR(7, 15));	/* what was written stays */
	ck_assert_int_eq(cab_ring__chunks_in_use(r), 1);
	cab_producer__close(p);
	cab_ring__close(r);
}
END_TEST

/* Rings side by side in one file, as instrumentation maps them into a
 * target with one mmap: each is a ring of its own (what one carries never
 * shows in another), a mapping of the whole file sees each at its offset,
 * and a drained one gives back its own pages only. */
START_TEST(rings_sharing_a_file_stay_apart)
{
	struct cab_opts o = opts_of(CAB_KIND_CAB, 16384, 4, 16);
	struct cab_ring *r[3];
	struct cab_producer *p[3];
	struct cab_consumer *c[3];
	struct cab_layout l;
	uint64_t pl[15] = { 0 };
	int fd = memfd_create("check-cab-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	long page = sysconf(_SC_PAGESIZE);

	ck_assert_int_ge(fd, 0);
	o.populate_later = true;
	ck_assert_int_eq(cab_ring__create_at(fd, 1, &o, &r[0]), -EINVAL);	/* not a page */
	ck_assert_int_eq(cab_ring__create_at(fd, 0, &o, &r[0]), 0);
	cab_ring__layout(r[0], &l);
	size_t bytes;	/* what a ring of these options takes, known before */
	ck_assert_int_eq(cab_ring__size(&o, &bytes), 0);
	ck_assert_uint_eq(bytes, l.total_bytes);
	uint64_t stride = (l.total_bytes + (uint64_t)page - 1) / (uint64_t)page * (uint64_t)page;
	for (int i = 1; i < 3; i++)
		ck_assert_int_eq(cab_ring__create_at(fd, (uint64_t)i * stride, &o, &r[i]), 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)(2 * stride + l.total_bytes));
	/* the whole file, as the target maps it */
	char *all = mmap(NULL, 3 * stride, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(all, MAP_FAILED);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(cab_producer__open(r[i], &p[i]), 0);
		ck_assert_int_eq(cab_consumer__open(r[i], &c[i]), 0);
		/* ring i carries 50 * (i + 1) records tagged i + 1 */
		for (int k = 0; k < 50 * (i + 1); k++)
			ck_assert_int_eq(cab_producer__put(p[i], CAB_HDR((uint64_t)i + 1, 15), pl, 15), 0);
		cab_producer__flush(p[i]);
		uint64_t first;
		memcpy(&first, all + (uint64_t)i * stride + l.data_offset, 8);
		ck_assert_uint_eq(first, CAB_HDR((uint64_t)i + 1, 15));
	}
	for (int i = 0; i < 3; i++) {
		size_t words = 0;
		while (!cab_consumer__eof(c[i]))
			ck_assert_int_ge(cab_consumer__poll(c[i], count_words, &words), 0);
		ck_assert_uint_eq(words, 50u * (unsigned)(i + 1) * 16);
	}
	/* ring 1 gives its chunks back: only its data pages leave the file */
	long long before = ring_memory(r[1]);
	ck_assert_int_eq(cab_ring__release_data(r[1]), 0);
	ck_assert_int_le(ring_memory(r[1]), before - 16384);
	for (int i = 0; i < 3; i++) {
		unsigned char in[1];
		ck_assert_int_eq(mincore(all + (uint64_t)i * stride + l.data_offset, 1, in), 0);
		ck_assert_msg((in[0] & 1) == (i != 1), "ring %d's first chunk %s", i,
			      in[0] & 1 ? "kept" : "gone");
		ck_assert_int_eq(mincore(all + (uint64_t)i * stride, 1, in), 0);
		ck_assert_msg(in[0] & 1, "ring %d's header gone", i);
	}
	munmap(all, 3 * stride);
	for (int i = 0; i < 3; i++) {
		cab_producer__close(p[i]);
		cab_consumer__close(c[i]);
		cab_ring__close(r[i]);
	}
	close(fd);
}
END_TEST

START_TEST(wraps_and_chunk_boundaries_exact)
{
	interleaved(&geos[_i], _i == 3 ? 3000 : 20000);
}
END_TEST

/* Records of the largest size fill every chunk exactly to its last word,
 * so the producer reaches each next chunk (and the end of the ring) on the
 * fast path. */
START_TEST(max_records_end_exactly_at_chunk_ends)
{
	max_len_only = true;
	interleaved(&geos[_i], 5000);
	max_len_only = false;
}
END_TEST

START_TEST(drain_delivers_the_partial_chunk)
{
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 1024, 4, 8);
	struct verify v = { .maxp = 7 };
	uint64_t i = 0;

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	for (; i < 5; i++)
		put_rec(p, i, 7);
	ck_assert_int_eq(cab_consumer__poll(c, verify_fn, &v), 0);
	ck_assert_int_eq(cab_consumer__drain(c, verify_fn, &v), 1);
	ck_assert_uint_eq(v.nrec, 5);
	ck_assert_int_eq(cab_consumer__drain(c, verify_fn, &v), 1);	/* nothing new */
	ck_assert_uint_eq(v.nrec, 5);
	/* The producer goes on in the same chunk and beyond; nothing twice. */
	for (; i < 300; i++) {
		put_rec(p, i, 7);
		if (i % 37 == 0)
			ck_assert_int_ge(cab_consumer__drain(c, verify_fn, &v), 0);
		else
			ck_assert_int_ge(cab_consumer__poll(c, verify_fn, &v), 0);
	}
	cab_producer__flush(p);
	while (!cab_consumer__eof(c))
		cab_consumer__poll(c, verify_fn, &v);
	ck_assert_msg(v.bad == 0, "%s", v.why);
	ck_assert_uint_eq(v.nrec, 300);
	cab_producer__close(p);
	cab_consumer__close(c);
	cab_ring__close(r);
}
END_TEST

/* cab_consumer__run_idle: the idle function runs before each nap; what it
 * delivers itself (a drain) is looked at again before any nap, its
 * negative return ends the run. */
struct idle_drain {
	struct cab_consumer *c;
	struct verify v;
	int calls, stop, fail_at;
};

static int idle_drain_fn(void *arg)
{
	struct idle_drain *d = arg;
	uint64_t before = d->v.nrec;

	if (++d->calls == d->fail_at)
		return -EIO;
	int n = cab_consumer__drain(d->c, verify_fn, &d->v);
	if (n < 0)
		return n;
	if (d->v.nrec != before)
		return 1;
	d->stop = 1;	/* seen to the end: the run ends after this nap */
	return 0;
}

START_TEST(run_idle_calls_idle_before_each_nap)
{
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 1024, 4, 8);
	struct idle_drain d = { .v = { .maxp = 7 } };

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_consumer__open(r, &d.c), 0);
	for (uint64_t i = 0; i < 5; i++)	/* a chunk begun: no poll delivers it */
		put_rec(p, i, 7);
	ck_assert_int_eq(cab_consumer__run_idle(d.c, verify_fn, idle_drain_fn, &d, &d.stop), 0);
	ck_assert_msg(d.v.bad == 0, "%s", d.v.why);
	ck_assert_uint_eq(d.v.nrec, 5);
	ck_assert_int_eq(d.calls, 2);	/* drained, then nothing new */
	d.stop = 0;
	d.fail_at = d.calls + 1;
	put_rec(p, 5, 7);
	ck_assert_int_eq(cab_consumer__run_idle(d.c, verify_fn, idle_drain_fn, &d, &d.stop), -EIO);
	ck_assert_uint_eq(d.v.nrec, 5);
	cab_producer__close(p);
	cab_consumer__close(d.c);
	cab_ring__close(r);
}
END_TEST

START_TEST(corrupt_chunk_is_counted_not_followed)
{
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 1024, 4, 8);
	struct verify v = { .maxp = 7 };

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	for (uint64_t i = 0; i < 10; i++)
		put_rec(p, i, 7);
	/* Someone (the target, say) scribbles a header claiming 1000 words. */
	uint64_t *w = cab__chunk(r, 0);
	size_t at = 0;
	for (int k = 0; k < 3; k++)
		at += 1 + CAB_HDR_LEN(w[at]);
	w[at] = CAB_HDR(999, 1000);
	/* The consumer stops reading chunk 0 there, flags the loss, and
	 * restores the chunk; later records are intact. */
	for (uint64_t i = 10; i < 200; i++) {
		put_rec(p, i, 7);
		cab_consumer__poll(c, verify_fn, &v);
	}
	cab_producer__flush(p);
	while (!cab_consumer__eof(c))
		cab_consumer__poll(c, verify_fn, &v);
	struct cab_stats st;
	cab_consumer__stats(c, &st);
	ck_assert_uint_eq(st.corrupt, 1);
	ck_assert_ptr_nonnull(strstr(cab_errmsg(), "chunk 0: bad record header at word"));
	ck_assert_msg(v.bad == 0, "%s", v.why);
	ck_assert_uint_eq(v.gaps, 1);	/* the jump over the lost records is flagged */
	ck_assert_uint_eq(v.next, 200);
	for (uint32_t k = 0; k < 4; k++)
		ck_assert(chunk_pristine(r, k));
	cab_producer__close(p);
	cab_consumer__close(c);
	cab_ring__close(r);
}
END_TEST

START_TEST(closed_consumer_means_drops_not_waits)
{
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 1024, 4, 8);

	o.consumer_timeout_ms = 60000;	/* only the close can explain a quick end */
	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	cab_consumer__close(c);
	uint64_t t0 = util_now_ns(), stored = 0, dropped = 0;
	for (uint64_t i = 0; i < 10000; i++) {
		int rc = put_rec(p, i, 7);
		ck_assert_int_ge(rc, 0);
		rc ? dropped++ : stored++;
	}
	ck_assert_uint_lt(util_now_ns() - t0, 10000000000ULL);
	struct cab_stats st;
	cab_ring__stats(r, &st);
	ck_assert_uint_eq(st.records_dropped, dropped);
	ck_assert_uint_gt(dropped, 9000);
	ck_assert(st.producer_dropping);
	cab_producer__close(p);
	cab_ring__close(r);
}
END_TEST

/* ------------------------------------------------------------ two processes */

struct child_result {
	uint64_t nrec, bad, gaps, next;
	struct cab_stats st;
	int rc;
	char why[160];
};

struct child_cfg {
	unsigned maxp;
	unsigned slow_us;
	uint64_t stop_after;	/* then linger without consuming (to be killed) */
};

/* The consumer side, in a forked child: map the ring from its fd, run to
 * end of stream, report over the pipe. */
static void consumer_child(int ringfd, int out, const struct child_cfg *cfg)
{
	struct cab_ring *r;
	struct cab_consumer *c;
	struct verify v = { .maxp = cfg->maxp, .slow_us = cfg->slow_us, .stop_after = cfg->stop_after };
	struct child_result res = { 0 };

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	res.rc = cab_ring__open(ringfd, &r);
	if (!res.rc)
		res.rc = cab_consumer__open(r, &c);
	if (!res.rc) {
		if (write(out, "S", 1) != 1)
			_exit(3);
		res.rc = cab_consumer__run(c, verify_fn, &v, NULL);
		if (cfg->stop_after)
			pause();	/* keep the ring attached, stop consuming */
		cab_consumer__stats(c, &res.st);
	}
	res.nrec = v.nrec;
	res.bad = v.bad;
	res.gaps = v.gaps;
	res.next = v.next;
	memcpy(res.why, v.why, sizeof res.why);
	if (write(out, &res, sizeof res) != (ssize_t)sizeof res)
		_exit(2);
	_exit(0);
}

static pid_t fork_consumer(struct cab_ring *r, const struct child_cfg *cfg, int *rfd)
{
	int fds[2];

	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		consumer_child(cab_ring__fd(r), fds[1], cfg);
	}
	close(fds[1]);
	*rfd = fds[0];
	char s;
	struct pollfd pfd = { fds[0], POLLIN, 0 };
	ck_assert_int_eq(poll(&pfd, 1, 30000), 1);
	ck_assert_int_eq(read(fds[0], &s, 1), 1);	/* attached */
	ck_assert_int_eq(s, 'S');
	return pid;
}

static void read_result(int fd, struct child_result *res)
{
	struct pollfd pfd = { fd, POLLIN, 0 };
	ck_assert_int_eq(poll(&pfd, 1, 60000), 1);
	ck_assert_int_eq(read(fd, res, sizeof *res), (ssize_t)sizeof *res);
	close(fd);
}

static void reap(pid_t pid)
{
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static uint64_t produce(struct cab_producer *p, uint64_t from, uint64_t n, unsigned maxp,
			uint64_t *dropped)
{
	uint64_t stored = 0;
	for (uint64_t i = from; i < from + n; i++) {
		int rc = put_rec(p, i, maxp);
		ck_assert_int_ge(rc, 0);
		if (rc)
			(*dropped)++;
		else
			stored++;
	}
	return stored;
}

struct bg_producer {
	pthread_t th;
	struct cab_producer *p;
	uint64_t from, n, stored, dropped;
	unsigned maxp;
	int err;
};

static void *bg_run(void *arg)
{
	struct bg_producer *b = arg;
	for (uint64_t i = b->from; i < b->from + b->n; i++) {
		int rc = put_rec(b->p, i, b->maxp);
		if (rc < 0)
			b->err = rc;
		else if (rc)
			b->dropped++;
		else
			b->stored++;
	}
	return NULL;
}

static void bg_start(struct bg_producer *b)
{
	ck_assert_int_eq(pthread_create(&b->th, NULL, bg_run, b), 0);
}

/* Wait (bounded) until the producer sleeps on a full ring. */
static void wait_producer_blocked(struct cab_ring *r)
{
	for (int i = 0; i < 30000; i++) {
		if (__atomic_load_n(&r->sh->prod_waiting, __ATOMIC_ACQUIRE))
			return;
		usleep(1000);
	}
	ck_abort_msg("the producer never waited");
}

static void cross_process(enum cab_kind kind, size_t chunk, unsigned nchunks, unsigned maxrec,
			  unsigned slow_us, uint64_t n)
{
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_opts o = opts_of(kind, chunk, nchunks, maxrec);
	struct child_cfg cfg = { .maxp = maxrec - 1, .slow_us = slow_us };
	struct child_result res;
	uint64_t dropped = 0;
	int rfd;

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	pid_t pid = fork_consumer(r, &cfg, &rfd);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	produce(p, 0, n, cfg.maxp, &dropped);
	cab_producer__flush(p);
	read_result(rfd, &res);
	reap(pid);
	ck_assert_int_eq(res.rc, 0);
	ck_assert_msg(res.bad == 0, "kind %d: %s", kind, res.why);
	ck_assert_uint_eq(dropped, 0);
	ck_assert_uint_eq(res.nrec, n);
	ck_assert_uint_eq(res.gaps, 0);
	ck_assert_uint_eq(res.st.records_dropped, 0);
	if (slow_us) {	/* a slow consumer made the producer wait */
		struct cab_stats st;
		cab_ring__stats(r, &st);
		ck_assert_uint_gt(st.producer_waits, 0);
	}
	cab_producer__close(p);
	cab_ring__close(r);
}

START_TEST(two_processes_exhaustive)
{
	static const enum cab_kind kinds[] = { CAB_KIND_CAB, CAB_KIND_NWAY, CAB_KIND_FFQ };
	cross_process(kinds[_i], 16384, 8, 16, 0, 300000);
}
END_TEST

START_TEST(two_processes_slow_consumer_makes_producer_wait)
{
	static const enum cab_kind kinds[] = { CAB_KIND_CAB, CAB_KIND_NWAY, CAB_KIND_FFQ };
	/* 2 ms per span against the producer's 50 us of spinning: it must
	 * sleep unless it is always slower than the consumer, which it is not
	 * even on a loaded machine (with 50 us it did not once, under ASan) */
	cross_process(kinds[_i], 1024, 4, 8, 2000, 5000);
}
END_TEST

START_TEST(two_processes_max_records)
{
	static const enum cab_kind kinds[] = { CAB_KIND_CAB, CAB_KIND_NWAY, CAB_KIND_FFQ };
	max_len_only = true;
	cross_process(kinds[_i], 4096, 4, 4, 0, 200000);
	max_len_only = false;
}
END_TEST

START_TEST(two_processes_large_ring)
{
	cross_process(CAB_KIND_CAB, 1 << 20, 64, 512, 0, 400000);
}
END_TEST

/* The ring's fd sent over a unix socket to a process forked before the ring
 * existed. */
START_TEST(fd_passing)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	int res_pipe[2];
	ck_assert_int_eq(pipe(res_pipe), 0);
	struct child_cfg cfg = { .maxp = 15 };
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		close(res_pipe[0]);
		char b;
		char ctl[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { &b, 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				     .msg_controllen = sizeof ctl };
		if (recvmsg(sv[1], &mh, 0) != 1)
			_exit(4);
		int fd;
		memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof fd);
		consumer_child(fd, res_pipe[1], &cfg);
	}
	close(sv[1]);
	close(res_pipe[1]);
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 8192, 8, 16);
	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	char b = 'F';
	struct iovec iov = { &b, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = sizeof ctl };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	int fd = cab_ring__fd(r);
	memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	ck_assert_int_eq(sendmsg(sv[0], &mh, 0), 1);
	char s;
	ck_assert_int_eq(read(res_pipe[0], &s, 1), 1);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	uint64_t dropped = 0;
	produce(p, 0, 50000, 15, &dropped);
	cab_producer__flush(p);
	struct child_result res;
	read_result(res_pipe[0], &res);
	reap(pid);
	ck_assert_msg(res.rc == 0 && res.bad == 0, "rc %d %s", res.rc, res.why);
	ck_assert_uint_eq(res.nrec, 50000);
	close(sv[0]);
	cab_producer__close(p);
	cab_ring__close(r);
}
END_TEST

static void sampling(enum cab_kind kind, double rate, unsigned slow_us, uint64_t n)
{
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_opts o = opts_of(kind, 4096, 16, 8);
	struct child_cfg cfg = { .maxp = 7, .slow_us = slow_us };
	struct child_result res;
	uint64_t dropped = 0;
	int rfd;

	o.mode = CAB_SAMPLING;
	o.sample_rate = rate;
	o.burst_chunks = 2;
	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	pid_t pid = fork_consumer(r, &cfg, &rfd);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	uint64_t stored = produce(p, 0, n, cfg.maxp, &dropped);
	cab_producer__flush(p);
	read_result(rfd, &res);
	reap(pid);
	ck_assert_int_eq(res.rc, 0);
	/* Records come in order; every hole is flagged. */
	ck_assert_msg(res.bad == 0, "%s", res.why);
	/* Everything is accounted for: analysed, skipped by the consumer, or
	 * dropped by the producer, which never waited. */
	ck_assert_uint_eq(res.st.records_dropped, dropped);
	ck_assert_uint_eq(res.st.records_delivered + res.st.records_skipped, stored);
	ck_assert_uint_eq(res.nrec, res.st.records_delivered);
	ck_assert_uint_eq(res.st.producer_waits, 0);
	double want = (double)res.st.records_delivered / (double)n;
	ck_assert(res.st.achieved_rate > 0 && fabs(res.st.achieved_rate - want) < 1e-9);
	if (rate < 1)
		ck_assert_uint_gt(res.st.chunks_skipped, 0);
	/* Of the chunks the consumer saw, it analysed about the rate. */
	double chunk_rate = (double)res.st.chunks_consumed /
			    (double)(res.st.chunks_consumed + res.st.chunks_skipped);
	ck_assert_msg(chunk_rate <= rate + 0.05, "analysed %.3f of chunks, rate %.2f", chunk_rate,
		      rate);
	if (!slow_us)
		ck_assert_msg(chunk_rate >= rate - 0.1, "analysed %.3f of chunks, rate %.2f", chunk_rate,
			      rate);
	else
		ck_assert_uint_gt(dropped, 0);	/* too slow even for the rate */
	cab_producer__close(p);
	cab_ring__close(r);
}

START_TEST(two_processes_sampling)
{
	sampling(CAB_KIND_CAB, 0.25, 0, 400000);
}
END_TEST

START_TEST(two_processes_sampling_slow_consumer)
{
	sampling(CAB_KIND_CAB, 0.5, 10000, 200000);
}
END_TEST

START_TEST(two_processes_sampling_nway)
{
	sampling(CAB_KIND_NWAY, 0.25, 0, 400000);
}
END_TEST

/* The consumer is SIGKILLed mid-stream while the producer waits on a full
 * ring. reaped: its pid is gone at once; else it is a zombie and only the
 * silent heartbeat tells. */
static void killed_consumer(enum cab_kind kind, bool reaped)
{
	struct cab_ring *r;
	struct cab_opts o = opts_of(kind, 1024, 4, 8);
	struct child_cfg cfg = { .maxp = 7, .stop_after = 200 };
	struct bg_producer b = { .n = 100000, .maxp = 7 };
	int rfd;

	o.consumer_timeout_ms = reaped ? 60000 : 300;
	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	pid_t pid = fork_consumer(r, &cfg, &rfd);
	ck_assert_int_eq(cab_producer__open(r, &b.p), 0);
	bg_start(&b);
	wait_producer_blocked(r);	/* the consumer stopped after 200 records */
	ck_assert_uint_eq(b.dropped, 0);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	uint64_t t0 = util_now_ns();
	if (reaped)
		ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	/* The producer must not hang: it notices and drops. */
	ck_assert_int_eq(pthread_join(b.th, NULL), 0);
	uint64_t took_ms = (util_now_ns() - t0) / 1000000;
	ck_assert_msg(took_ms < 20000, "producer took %" PRIu64 " ms", took_ms);
	ck_assert_int_eq(b.err, 0);
	ck_assert_uint_gt(b.dropped, 90000);
	ck_assert_uint_eq(b.stored + b.dropped, 100000);
	struct cab_stats st;
	cab_ring__stats(r, &st);
	ck_assert_uint_eq(st.records_dropped, b.dropped);
	ck_assert_uint_gt(st.producer_waits, 0);
	ck_assert(st.producer_dropping);
	cab_producer__close(b.p);
	close(rfd);
	if (!reaped) {
		int ws;
		ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
		ck_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
	}
	cab_ring__close(r);
}

START_TEST(killed_consumer_zombie)
{
	static const enum cab_kind kinds[] = { CAB_KIND_CAB, CAB_KIND_NWAY, CAB_KIND_FFQ };
	killed_consumer(kinds[_i], false);
}
END_TEST

START_TEST(killed_consumer_reaped)
{
	static const enum cab_kind kinds[] = { CAB_KIND_CAB, CAB_KIND_NWAY, CAB_KIND_FFQ };
	killed_consumer(kinds[_i], true);
}
END_TEST

/* After its consumer died, a new one attaches and the producer resumes:
 * the new consumer sees a gap, then records in order. */
START_TEST(new_consumer_takes_over)
{
	struct cab_ring *r;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 1024, 4, 8);
	struct child_cfg dying = { .maxp = 7, .stop_after = 100 }, fresh = { .maxp = 7 };
	struct child_result res;
	struct bg_producer b = { .n = 5000, .maxp = 7 };
	int rfd;

	o.consumer_timeout_ms = 60000;
	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	pid_t pid = fork_consumer(r, &dying, &rfd);
	ck_assert_int_eq(cab_producer__open(r, &b.p), 0);
	bg_start(&b);
	wait_producer_blocked(r);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(rfd);
	ck_assert_int_eq(pthread_join(b.th, NULL), 0);
	ck_assert_uint_gt(b.dropped, 0);
	pid = fork_consumer(r, &fresh, &rfd);
	b.from = 5000;
	b.n = 20000;
	uint64_t before = b.dropped;
	bg_run(&b);
	/* Up to 4096 drops pass before a dropping producer looks again. */
	ck_assert_uint_le(b.dropped - before, 4096);
	cab_producer__flush(b.p);
	read_result(rfd, &res);
	reap(pid);
	ck_assert_msg(res.rc == 0 && res.bad == 0, "%s", res.why);
	ck_assert_uint_gt(res.gaps, 0);
	ck_assert_uint_eq(res.next, 25000);	/* the last record arrived */
	struct cab_stats st;
	cab_ring__stats(r, &st);
	ck_assert(!st.producer_dropping);
	cab_producer__close(b.p);
	cab_ring__close(r);
}
END_TEST

/* Stops the poll after one span: exactly one chunk handed back. */
static int one_span_fn(void *arg, const uint64_t *w, size_t n, unsigned flags)
{
	verify_fn(arg, w, n, flags);
	return 1;
}

static bool chunk_taken(struct cab_ring *r, uint32_t k)
{
	return __atomic_load_n(cab__chunk(r, k), __ATOMIC_ACQUIRE) != CAB_CLEAR;
}

/* A full ring: the producer sleeps. One chunk handed back is not enough (it
 * waits for two, so that it and the consumer never share a line): it keeps
 * sleeping through many wake-ups; the second one wakes it. */
START_TEST(exhaustive_producer_wakes_only_for_two_free_chunks)
{
	struct cab_ring *r;
	struct cab_consumer *c;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 1024, 4, 8);
	struct bg_producer b = { .n = 20000, .maxp = 7 };
	struct verify v = { .maxp = 7 };

	o.consumer_timeout_ms = 60000;
	o.spin_us = 1;
	o.wait_ms = 5;	/* it looks again every 5 ms, and at every hand-back */
	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	ck_assert_int_eq(cab_producer__open(r, &b.p), 0);
	bg_start(&b);
	wait_producer_blocked(r);	/* chunks 0..3 written, back at chunk 0 */
	ck_assert(chunk_taken(r, 0) && chunk_taken(r, 1));

	ck_assert_int_eq(cab_consumer__poll(c, one_span_fn, &v), -ECANCELED);
	ck_assert(!chunk_taken(r, 0) && chunk_taken(r, 1));
	usleep(300000);
	ck_assert_msg(!chunk_taken(r, 0), "the producer wrote with one chunk free");
	ck_assert_uint_eq(__atomic_load_n(&r->sh->prod_waiting, __ATOMIC_ACQUIRE), 1);
	struct cab_stats st;
	cab_ring__stats(r, &st);
	ck_assert_uint_eq(st.producer_waits, 1);

	ck_assert_int_eq(cab_consumer__poll(c, one_span_fn, &v), -ECANCELED);
	int waited = 0;
	while (!chunk_taken(r, 0) && waited++ < 5000)
		usleep(1000);
	ck_assert_msg(chunk_taken(r, 0), "two chunks free and the producer still sleeps");

	/* The rest arrives whole and in order. */
	bool joined = false;
	for (int i = 0; !cab_consumer__eof(c) && i < 1000000; i++) {
		if (!joined && pthread_tryjoin_np(b.th, NULL) == 0) {
			joined = true;
			cab_producer__flush(b.p);
		}
		if (cab_consumer__poll(c, verify_fn, &v) == 0)
			usleep(100);
	}
	ck_assert(joined && cab_consumer__eof(c));
	ck_assert_msg(v.bad == 0, "%s", v.why);
	ck_assert_uint_eq(v.nrec, 20000);
	ck_assert_uint_eq(b.dropped, 0);
	cab_producer__close(b.p);
	cab_consumer__close(c);
	cab_ring__close(r);
}
END_TEST

/* No consumer ever attaches: the producer fills the ring, waits
 * consumer_timeout_ms for a heartbeat that never comes, then drops (and
 * counts) without waiting again. */
START_TEST(exhaustive_producer_without_a_consumer_drops_after_the_timeout)
{
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 1024, 4, 8);
	uint64_t stored = 0, dropped = 0, first_drop_ns = 0;

	o.consumer_timeout_ms = 300;
	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	uint64_t t_all = util_now_ns();
	for (uint64_t i = 0; i < 20000; i++) {
		uint64_t t0 = util_now_ns();
		int rc = put_rec(p, i, 7);
		uint64_t took = util_now_ns() - t0;
		ck_assert_int_ge(rc, 0);
		if (rc == 0) {
			ck_assert_msg(!dropped, "record %" PRIu64 " stored after drops began", i);
			ck_assert_msg(took < 200000000ULL, "a store waited %" PRIu64 " ns", took);
			stored++;
		} else {
			if (!dropped++)
				first_drop_ns = took;
		}
	}
	uint64_t total = util_now_ns() - t_all;
	/* It waited the timeout once, for the first drop only. */
	ck_assert_msg(first_drop_ns >= 300000000ULL && first_drop_ns < 10000000000ULL,
		      "first drop after %" PRIu64 " ns", first_drop_ns);
	ck_assert_msg(total - first_drop_ns < 5000000000ULL, "the drops took %" PRIu64 " ns",
		      total - first_drop_ns);
	ck_assert_uint_gt(stored, 0);
	ck_assert_uint_eq(stored + dropped, 20000);
	struct cab_stats st;
	cab_ring__stats(r, &st);
	ck_assert_uint_eq(st.records_dropped, dropped);
	ck_assert_uint_eq(st.producer_waits, 1);
	ck_assert(st.producer_dropping);
	cab_producer__close(p);
	cab_ring__close(r);
}
END_TEST

/* Sampling mode: the consumer process stops reading, then is SIGKILLed
 * while the producer writes. The producer never waits, before or after:
 * it drops what finds the ring full, counts it, and finishes at its own
 * pace. */
START_TEST(sampling_producer_never_hangs_on_a_killed_consumer)
{
	struct cab_ring *r;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 4096, 8, 8);
	struct child_cfg cfg = { .maxp = 7, .stop_after = 500 };
	struct bg_producer b = { .n = 2000000, .maxp = 7 };
	int rfd;

	o.mode = CAB_SAMPLING;
	o.sample_rate = 0.5;
	o.consumer_timeout_ms = 60000;	/* not what ends anything here */
	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	pid_t pid = fork_consumer(r, &cfg, &rfd);
	ck_assert_int_eq(cab_producer__open(r, &b.p), 0);
	uint64_t t0 = util_now_ns();
	bg_start(&b);
	/* The consumer stopped after 500 records: the ring fills, drops begin. */
	struct cab_stats st;
	for (int i = 0; i < 30000; i++) {
		cab_ring__stats(r, &st);
		if (st.records_dropped)
			break;
		usleep(1000);
	}
	ck_assert_uint_gt(st.records_dropped, 0);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(pthread_join(b.th, NULL), 0);
	uint64_t took_ms = (util_now_ns() - t0) / 1000000;
	int ws;
	ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
	ck_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
	close(rfd);
	ck_assert_msg(took_ms < 30000, "producer took %" PRIu64 " ms", took_ms);
	ck_assert_int_eq(b.err, 0);
	ck_assert_uint_eq(b.stored + b.dropped, b.n);
	ck_assert_uint_gt(b.dropped, b.n / 2);
	cab_ring__stats(r, &st);
	ck_assert_uint_eq(st.records_dropped, b.dropped);
	ck_assert_uint_eq(st.producer_waits, 0);
	ck_assert_uint_eq(st.producer_wait_ns, 0);
	cab_producer__close(b.p);
	cab_ring__close(r);
}
END_TEST

/* ------------------------------------------------------------ REP via CAB */

struct hash_arg {
	uint64_t h, n;
};

static void hash_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct hash_arg *a = arg;
	for (size_t i = 0; i < n; i++) {
		a->h = (a->h ^ refs[i].addr) * 0x100000001B3ULL;
		a->h = (a->h ^ refs[i].pc ^ ((uint64_t)refs[i].size << 32 | refs[i].type)) * 0x100000001B3ULL;
	}
	a->n += n;
}

static void rep_table_small(struct rep_table **t)
{
	const uint16_t N = REP_NO_SLOT;
	ck_assert_int_eq(rep_table__new(t), 0);
	for (uint32_t id = 1; id <= 8; id++) {
		struct rep_instr in[3] = { { 0x1000 * id, 3, 0 }, { 0x1000 * id + 3, 4, 0 },
					   { 0x1000 * id + 7, 2, 0 } };
		struct rep_mref m[3] = {
			{ .pc = 0x1000 * id, .disp = 8, .size = 8, .type = REP_REF_READ, .scale = 1, .base = 0, .index = N, .seg = N, .count = N },
			{ .pc = 0x1000 * id + 3, .disp = -16, .size = 4, .type = REP_REF_WRITE, .scale = 8, .base = 0, .index = 1, .seg = N, .count = N },
			{ .pc = 0x1000 * id + 7, .disp = 0, .size = 1, .type = REP_REF_MODIFY, .scale = 1, .base = (uint16_t)(id % 2 ? 0 : 2), .index = N, .seg = N, .count = N },
		};
		struct rep_block b = { .id = id, .nslots = (uint16_t)(id % 2 ? 2 : 3), .pc = 0x1000 * id,
				       .ninstrs = 3, .nrefs = 3, .instrs = in, .refs = m };
		ck_assert_int_eq(rep_table__add(*t, &b), 0);
	}
}

START_TEST(rep_units_recovered_across_processes)
{
	struct rep_table *t;
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 4096, 8, 8);
	enum { NU = 100000 };
	uint64_t *stream = malloc(NU * 4 * 8);
	size_t n = 0;
	uint64_t s = 12345;

	rep_table_small(&t);
	for (int u = 0; u < NU; u++) {
		uint32_t id = 1 + (uint32_t)((s = s * 6364136223846793005ULL + 1) >> 61);
		unsigned ns = id % 2 ? 2 : 3;
		stream[n++] = REP_S_WORD(id, ns);
		for (unsigned k = 0; k < ns; k++)
			stream[n++] = (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 8;
	}
	/* The truth: recovery straight from memory. */
	struct hash_arg direct = { 14695981039346656037ULL, 0 };
	struct rep_recover *rec;
	ck_assert_int_eq(rep_recover__new(t, hash_sink, &direct, &rec), 0);
	ck_assert_int_eq(rep_recover__feed(rec, stream, n, 0), 0);
	rep_recover__flush(rec);
	rep_recover__free(rec);

	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct cab_ring *cr;
		struct cab_consumer *c;
		struct hash_arg got = { 14695981039346656037ULL, 0 };
		struct rep_recover *cr_rec;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (cab_ring__open(cab_ring__fd(r), &cr) || cab_consumer__open(cr, &c) ||
		    rep_recover__new(t, hash_sink, &got, &cr_rec))
			_exit(2);
		if (write(fds[1], "S", 1) != 1)
			_exit(3);
		int rc = cab_consumer__run(c, rep_recover__cab_fn, cr_rec, NULL);
		rep_recover__flush(cr_rec);
		uint64_t out[3] = { (uint64_t)rc, got.h, got.n };
		_exit(write(fds[1], out, sizeof out) == sizeof out ? 0 : 4);
	}
	close(fds[1]);
	char c;
	ck_assert_int_eq(read(fds[0], &c, 1), 1);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	for (size_t at = 0; at < n; at += 1 + CAB_HDR_LEN(stream[at]))
		ck_assert_int_eq(cab_producer__put_record(p, stream + at), 0);
	cab_producer__flush(p);
	uint64_t out[3];
	struct pollfd pfd = { fds[0], POLLIN, 0 };
	ck_assert_int_eq(poll(&pfd, 1, 60000), 1);
	ck_assert_int_eq(read(fds[0], out, sizeof out), (ssize_t)sizeof out);
	reap(pid);
	ck_assert_uint_eq(out[0], 0);
	ck_assert_uint_eq(out[2], direct.n);
	ck_assert_uint_eq(out[1], direct.h);
	close(fds[0]);
	cab_producer__close(p);
	cab_ring__close(r);
	rep_table__free(t);
	free(stream);
}
END_TEST

/* Recovery meets a unit it cannot read (an unknown block, though its header
 * is a good CAB record) in the middle of a ring: that unit and the rest of
 * its chunk are counted as corrupt, with a gap; the chunks after it are
 * recovered (a chunk starts on a unit boundary), and the consumer runs on
 * to the end. */
struct bad_span {
	struct rep_recover *rec;
	uint64_t bad_hdr, lost;	/* records from the bad one to its span's end */
};

static int bad_span_fn(void *arg, const uint64_t *w, size_t n, unsigned flags)
{
	struct bad_span *b = arg;
	bool after_bad = false;

	for (size_t i = 0; i < n; i += 1 + CAB_HDR_LEN(w[i])) {
		after_bad = after_bad || w[i] == b->bad_hdr;
		b->lost += after_bad;
	}
	return rep_recover__cab_fn(b->rec, w, n, flags);
}

START_TEST(recovery_resynchronises_at_the_chunk_after_a_bad_unit)
{
	struct rep_table *t;
	struct cab_ring *r;
	struct cab_producer *p;
	struct cab_consumer *c;
	struct cab_opts o = opts_of(CAB_KIND_CAB, 4096, 64, 8);
	enum { NU = 8000, BAD = 3000 };
	struct bad_span b = { .bad_hdr = REP_S_WORD(99, 2) };

	rep_table_small(&t);
	ck_assert_int_eq(rep_recover__new(t, NULL, NULL, &b.rec), 0);
	ck_assert_int_eq(cab_ring__create(&o, &r), 0);
	ck_assert_int_eq(cab_producer__open(r, &p), 0);
	for (uint64_t u = 0; u < NU; u++) {	/* block 1: two slots */
		uint64_t unit[3] = { u == BAD ? b.bad_hdr : REP_S_WORD(1, 2), 0x1000 + u, u };
		ck_assert_int_eq(cab_producer__put_record(p, unit), 0);
	}
	cab_producer__flush(p);
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	int rc = cab_consumer__run(c, bad_span_fn, &b, NULL);
	rep_recover__flush(b.rec);
	struct rep_recover_stats rs;
	rep_recover__stats(b.rec, &rs);
	ck_assert_msg(rc == 0, "the consumer stopped: %d %s", rc, rep_errmsg());
	ck_assert_ptr_nonnull(strstr(rep_errmsg(), "unknown block id 99"));
	/* the bad unit and at most a chunk's rest (4096 bytes: 170 units) */
	ck_assert_uint_ge(b.lost, 1);
	ck_assert_uint_le(b.lost, 170);
	ck_assert_uint_eq(rs.corrupt, b.lost);
	ck_assert_uint_eq(rs.units, NU - b.lost);
	ck_assert_uint_eq(rep_recover__block_count(b.rec, 1), NU - b.lost);
	ck_assert_uint_ge(rs.gaps, 1);
	ck_assert(cab_consumer__eof(c));
	cab_consumer__close(c);
	cab_producer__close(p);
	cab_ring__close(r);
	rep_recover__free(b.rec);
	rep_table__free(t);
}
END_TEST

struct collect {
	uint64_t w[16];
	size_t n;
};

static int collect_fn(void *arg, const uint64_t *words, size_t n, unsigned flags)
{
	struct collect *c = arg;
	(void)flags;
	for (size_t i = 0; i < n && c->n < 16; i++)
		c->w[c->n++] = words[i];
	return 0;
}

/* A ring laid out in a memfd someone else made (instrumented code's rings:
 * made in the target, laid out by padrone), and the layout a producer in
 * assembly follows: the offsets name the very words the library uses. A
 * producer attached by pid excludes another; ending it ends the stream. */
START_TEST(a_ring_in_a_foreign_memfd_and_its_layout)
{
	int fd = memfd_create("foreign", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	struct cab_opts o = { .sz = sizeof o, .chunk_bytes = 8192, .nchunks = 4 };
	struct cab_ring *r;
	struct cab_layout l;

	ck_assert_int_ge(fd, 0);
	ck_assert_msg(cab_ring__create_fd(fd, &o, &r) == 0, "%s", cab_errmsg());
	close(fd);
	cab_ring__layout(r, &l);
	char *base = (char *)r->map;
	ck_assert_ptr_eq(base + l.data_offset, (char *)r->data);
	ck_assert_ptr_eq(base + l.meta_offset, (char *)r->meta);
	ck_assert_uint_eq(l.meta_stride, sizeof(struct cab_meta));
	ck_assert_ptr_eq(base + l.meta_offset + l.meta_stride + l.meta_gap, (char *)&r->meta[1].gap);
	ck_assert_ptr_eq(base + l.prod_seq, (char *)&r->sh->prod_seq);
	ck_assert_ptr_eq(base + l.cons_seq, (char *)&r->sh->cons_seq);
	ck_assert_ptr_eq(base + l.cons_heartbeat_ns, (char *)&r->sh->cons_heartbeat_ns);
	ck_assert_ptr_eq(base + l.dropped_records, (char *)&r->sh->dropped_records);
	ck_assert_uint_eq(l.chunk_words, 1024);
	ck_assert_uint_eq(l.nchunks, 4);
	ck_assert_uint_eq(l.total_bytes, l.data_offset + 4 * 8192 + 64);
	ck_assert_uint_eq(cab__chunk(r, 0)[1024 - 64], CAB_MAGIC);	/* the guard */
	ck_assert_int_eq(cab_ring__attach_producer(r, 4242), 0);
	ck_assert_int_eq(cab_ring__attach_producer(r, 4243), -EBUSY);
	ck_assert_int_eq(r->sh->prod_pid, 4242);
	/* a record written as the assembly producer does, then the end */
	uint64_t *w = cab__chunk(r, 0);
	w[1] = 77;
	__atomic_store_n(&w[0], CAB_HDR(5, 1), __ATOMIC_RELEASE);
	cab_ring__end_producer(r);
	struct cab_consumer *c;
	ck_assert_int_eq(cab_consumer__open(r, &c), 0);
	struct collect col = { 0 };
	ck_assert_int_ge(cab_consumer__poll(c, collect_fn, &col), 0);
	ck_assert_int_ge(cab_consumer__poll(c, collect_fn, &col), 0);
	ck_assert(cab_consumer__eof(c));
	ck_assert_uint_eq(col.n, 2);
	ck_assert_uint_eq(col.w[0], CAB_HDR(5, 1));
	ck_assert_uint_eq(col.w[1], 77);
	cab_consumer__close(c);
	cab_ring__close(r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cab");
	TCase *tc = tcase_create("cab");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, bad_geometry_is_refused);
	tcase_add_test(tc, a_ring_in_a_foreign_memfd_and_its_layout);
	tcase_add_test(tc, one_producer_one_consumer);
	tcase_add_test(tc, sentinels_and_two_chunks_behind);
	tcase_add_test(tc, header_walk_checks_every_guess);
	tcase_add_test(tc, consumed_chunks_are_handed_back_clear);
	tcase_add_test(tc, chunks_in_use_counts_unconsumed_chunks);
	tcase_add_test(tc, a_drained_ring_gives_its_pages_back);
	tcase_add_test(tc, a_ring_populated_later_is_the_same_ring);
	tcase_add_test(tc, rings_sharing_a_file_stay_apart);
	tcase_add_loop_test(tc, wraps_and_chunk_boundaries_exact, 0, sizeof geos / sizeof geos[0]);
	tcase_add_loop_test(tc, max_records_end_exactly_at_chunk_ends, 0, sizeof geos / sizeof geos[0]);
	tcase_add_test(tc, drain_delivers_the_partial_chunk);
	tcase_add_test(tc, run_idle_calls_idle_before_each_nap);
	tcase_add_test(tc, corrupt_chunk_is_counted_not_followed);
	tcase_add_test(tc, closed_consumer_means_drops_not_waits);
	tcase_add_loop_test(tc, two_processes_exhaustive, 0, 3);
	tcase_add_loop_test(tc, two_processes_slow_consumer_makes_producer_wait, 0, 3);
	tcase_add_loop_test(tc, two_processes_max_records, 0, 3);
	tcase_add_test(tc, two_processes_large_ring);
	tcase_add_test(tc, fd_passing);
	tcase_add_test(tc, two_processes_sampling);
	tcase_add_test(tc, two_processes_sampling_slow_consumer);
	tcase_add_test(tc, two_processes_sampling_nway);
	tcase_add_loop_test(tc, killed_consumer_zombie, 0, 3);
	tcase_add_loop_test(tc, killed_consumer_reaped, 0, 3);
	tcase_add_test(tc, new_consumer_takes_over);
	tcase_add_test(tc, exhaustive_producer_wakes_only_for_two_free_chunks);
	tcase_add_test(tc, exhaustive_producer_without_a_consumer_drops_after_the_timeout);
	tcase_add_test(tc, sampling_producer_never_hangs_on_a_killed_consumer);
	tcase_add_test(tc, rep_units_recovered_across_processes);
	tcase_add_test(tc, recovery_resynchronises_at_the_chunk_after_a_bad_unit);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
