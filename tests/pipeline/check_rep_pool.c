/* The recovery pool: 1, 2 and 3 recovery threads deliver exactly the
 * references, block and edge counts and stats of serial recovery (one
 * rep_recover per stream, fed the same words) on random streams of several
 * threads cut into random feeds and chunks, with bad data in some feeds;
 * on a multi-section file it equals rep_reader__replay; and fed by CAB rings
 * that forked producers write (one of them dying mid-stream), it equals
 * direct recovery of each producer's stream. */
#include "tests/lib/tu.h"
#include "pipeline/pipeline.h"
#include "pipeline/cab.h"
#include "pipeline/rep-internal.h"
#include "tests/pipeline/check_rep-gen.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define NSTREAMS 3
#define MAXMSG 64

/* ------------------------------------------------------------ collecting */

struct tref {
	uint64_t stream;
	struct rep_ref r;
};

struct got {
	struct tref *v;
	size_t n, cap;
	char msg[MAXMSG][320];
	uint64_t msg_stream[MAXMSG];
	int nmsg;
};

static void got_push(struct got *g, uint64_t stream, const struct rep_ref *refs, size_t n)
{
	if (g->n + n > g->cap) {
		g->cap = (g->n + n) * 2;
		g->v = realloc(g->v, g->cap * sizeof(*g->v));
		ck_assert_ptr_nonnull(g->v);
	}
	for (size_t i = 0; i < n; i++) {
		g->v[g->n + i].stream = stream;
		g->v[g->n + i].r = (struct rep_ref){ .pc = refs[i].pc, .addr = refs[i].addr,
						     .size = refs[i].size, .type = refs[i].type };
	}
	g->n += n;
}

static void got_msg(struct got *g, uint64_t stream, const char *msg)
{
	ck_assert_int_lt(g->nmsg, MAXMSG);
	snprintf(g->msg[g->nmsg], sizeof g->msg[0], "%s", msg);
	g->msg_stream[g->nmsg++] = stream;
}

static void got_free(struct got *g)
{
	free(g->v);
	memset(g, 0, sizeof(*g));
}

static int pool_sink(void *arg, uint64_t stream, const struct rep_ref *refs, size_t n)
{
	got_push(arg, stream, refs, n);
	return 0;
}

static void pool_error(void *arg, uint64_t stream, int err, const char *msg)
{
	ck_assert_int_eq(err, -EBADMSG);
	got_msg(arg, stream, msg);
}

/* Where two collections first differ, or SIZE_MAX. */
static size_t got_diff(const struct got *a, const struct got *b)
{
	size_t n = a->n < b->n ? a->n : b->n;
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a->v[i], &b->v[i], sizeof(a->v[i])))
			return i;
	return a->n == b->n ? SIZE_MAX : n;
}

/* Block and edge counts as a sorted list: from (0 for a block), to, count. */
struct cnt {
	uint32_t from, to;
	uint64_t n;
};
struct cnts {
	struct cnt *v;
	size_t n, cap;
};

static int cnt_fn(void *arg, uint32_t from, uint32_t to, uint64_t n)
{
	struct cnts *c = arg;
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 256;
		c->v = realloc(c->v, c->cap * sizeof(*c->v));
		ck_assert_ptr_nonnull(c->v);
	}
	c->v[c->n++] = (struct cnt){ from, to, n };
	return 0;
}

static int cnt_cmp(const void *x, const void *y)
{
	const struct cnt *a = x, *b = y;
	if (a->from != b->from)
		return a->from < b->from ? -1 : 1;
	return a->to < b->to ? -1 : a->to > b->to;
}

static void counts_of(const struct rep_recover *r, struct cnts *c)
{
	memset(c, 0, sizeof(*c));
	ck_assert_int_eq(rep_recover__foreach_count(r, cnt_fn, c), 0);
	qsort(c->v, c->n, sizeof(*c->v), cnt_cmp);
}

static void assert_same_counts(const struct rep_recover *a, const struct rep_recover *b,
			       const char *ctx)
{
	struct cnts x, y;
	struct rep_recover_stats sa, sb;

	counts_of(a, &x);
	counts_of(b, &y);
	ck_assert_msg(x.n == y.n, "%s: %zu vs %zu blocks and edges", ctx, x.n, y.n);
	for (size_t i = 0; i < x.n; i++)
		ck_assert_msg(x.v[i].from == y.v[i].from && x.v[i].to == y.v[i].to &&
			      x.v[i].n == y.v[i].n,
			      "%s: count %zu: %u->%u %" PRIu64 " vs %u->%u %" PRIu64, ctx, i, x.v[i].from,
			      x.v[i].to, x.v[i].n, y.v[i].from, y.v[i].to, y.v[i].n);
	rep_recover__stats(a, &sa);
	rep_recover__stats(b, &sb);
	ck_assert_msg(sa.units == sb.units && sa.refs == sb.refs && sa.instrs == sb.instrs &&
		      sa.bytes == sb.bytes && sa.gaps == sb.gaps,
		      "%s: stats %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64
		      " vs %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64, ctx, sa.units,
		      sa.refs, sa.instrs, sa.bytes, sa.gaps, sb.units, sb.refs, sb.instrs, sb.bytes,
		      sb.gaps);
	free(x.v);
	free(y.v);
}

/* ------------------------------------------------------------ serial truth */

struct feed {
	uint64_t stream;
	size_t at, n;		/* words of the corpus */
	uint64_t off;
	unsigned flags;
};

struct stream_sink {
	struct got *g;
	uint64_t stream;
};

static void serial_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct stream_sink *s = arg;
	got_push(s->g, s->stream, refs, n);
}

/* What one rep_recover per stream makes of the feeds, bad data ending its
 * feed (as rep_reader__replay ends a section); counts merged into *merged. */
static void serial(const struct rep_table *t, const uint64_t *w, const struct feed *f, size_t nf,
		   struct got *g, struct rep_recover **merged)
{
	struct rep_recover *r[NSTREAMS];
	struct stream_sink ss[NSTREAMS];

	for (int i = 0; i < NSTREAMS; i++) {
		ss[i] = (struct stream_sink){ g, (uint64_t)i };
		ck_assert_int_eq(rep_recover__new(t, serial_sink, &ss[i], &r[i]), 0);
	}
	for (size_t i = 0; i < nf; i++) {
		struct rep_recover *x = r[f[i].stream];
		if (f[i].flags & REP_POOL_GAP)
			ck_assert_int_eq(rep_recover__gap(x), 0);
		int rc = rep_recover__feed(x, w + f[i].at, f[i].n, f[i].off);
		if (!rc)
			rc = rep__recover_section_end(x, f[i].off + f[i].n * 8);
		rep_recover__flush(x);
		if (rc) {
			ck_assert_int_eq(rc, -EBADMSG);
			got_msg(g, f[i].stream, rep_errmsg());
			ck_assert_int_eq(rep_recover__gap(x), 0);
		}
	}
	ck_assert_int_eq(rep_recover__new(t, NULL, NULL, merged), 0);
	for (int i = 0; i < NSTREAMS; i++) {
		ck_assert_int_eq(rep_recover__merge(*merged, r[i]), 0);
		rep_recover__free(r[i]);
	}
}

struct pool_cfg {
	unsigned workers, depth;
	size_t chunk_bytes, max_chunk_refs;
	bool on_caller;		/* workers must be 1 then */
};

/* The same feeds through a pool; returns finish's value. */
static int pooled(const struct rep_table *t, const uint64_t *w, const struct feed *f, size_t nf,
		  const struct pool_cfg *cfg, struct got *g, struct rep_pool **out)
{
	struct rep_pool_opts o = { .sz = sizeof(o), .workers = cfg->workers, .depth = cfg->depth,
				   .chunk_bytes = cfg->chunk_bytes,
				   .max_chunk_refs = cfg->max_chunk_refs, .error = pool_error,
				   .on_caller = cfg->on_caller };
	struct rep_pool *p;

	ck_assert_int_eq(rep_pool__new(t, &o, pool_sink, g, &p), 0);
	for (size_t i = 0; i < nf; i++)
		ck_assert_int_eq(rep_pool__feed(p, f[i].stream, w + f[i].at, f[i].n, f[i].off,
						f[i].flags), 0);
	*out = p;
	return rep_pool__finish(p);
}

/* Random feeds over the corpus: a few units each, to a random stream,
 * sometimes after a gap, sometimes cut short (the last unit incomplete). */
static size_t make_feeds(uint64_t *s, const struct corpus *c, struct feed *f, size_t max)
{
	size_t nf = 0, at = 0;
	uint64_t off[NSTREAMS] = { 0 };

	while (at < c->n && nf < max) {
		size_t end = at;
		for (unsigned k = 1 + rnd_below(s, 60); k && end < c->n; k--)
			end += 1 + (size_t)(c->w[end] >> 48);
		uint64_t st = rnd_below(s, NSTREAMS);
		size_t n = end - at;
		if (rnd_below(s, 25) == 0 && c->w[at] >> 48)
			n -= 1;	/* cut short: its last unit runs past the feed's end */
		f[nf] = (struct feed){ st, at, n, off[st],
				       (rnd_below(s, 6) == 0 ? REP_POOL_GAP : 0u) |
					       (rnd_below(s, 2) ? REP_POOL_BORROW : 0u) };
		off[st] += 8 * n;
		nf++;
		at = end;
	}
	return nf;
}

/* Bad headers in a few random units: an unknown block, a block's id with
 * the wrong slot count, a word that is no header at all. */
static void corrupt(uint64_t *s, struct corpus *c, int k)
{
	while (k--) {
		size_t at = 0, pick = rnd_below(s, (unsigned)c->n);
		while (at + 1 + (c->w[at] >> 48) <= pick)
			at += 1 + (size_t)(c->w[at] >> 48);
		uint64_t h = c->w[at];
		switch (rnd_below(s, 3)) {
		case 0:
			c->w[at] = REP_S_WORD(5000, h >> 48);
			break;
		case 1:
			c->w[at] = REP_S_WORD((uint32_t)h % 20 + 1, (h >> 48) ^ 1);
			break;
		default:
			c->w[at] = 0xdeadbeefcafef00dULL;
			break;
		}
	}
}

static void compare_one(const struct rep_table *t, const uint64_t *w, const struct feed *f,
			size_t nf, const struct pool_cfg *cfg, const struct got *want,
			const struct rep_recover *want_counts, uint64_t seed)
{
	struct got g = { 0 };
	struct rep_pool *p;
	char ctx[160];

	snprintf(ctx, sizeof ctx, "seed %#" PRIx64 " workers %u depth %u chunk %zu max %zu", seed,
		 cfg->workers, cfg->depth, cfg->chunk_bytes, cfg->max_chunk_refs);
	int rc = pooled(t, w, f, nf, cfg, &g, &p);
	ck_assert_msg(rc == (want->nmsg ? -EBADMSG : 0), "%s: finish %d", ctx, rc);
	size_t d = got_diff(&g, want);
	ck_assert_msg(d == SIZE_MAX, "%s: references differ at %zu (%zu vs %zu)", ctx, d, g.n,
		      want->n);
	ck_assert_msg(g.nmsg == want->nmsg, "%s: %d errors, serial %d", ctx, g.nmsg, want->nmsg);
	for (int i = 0; i < g.nmsg; i++) {
		ck_assert_str_eq(g.msg[i], want->msg[i]);
		ck_assert_uint_eq(g.msg_stream[i], want->msg_stream[i]);
	}
	if (want->nmsg)
		ck_assert_str_eq(rep_pool__errmsg(p), want->msg[0]);
	assert_same_counts(rep_pool__counts(p), want_counts, ctx);
	struct rep_pool_stats st;
	rep_pool__stats(p, &st);
	ck_assert_uint_eq(st.workers, cfg->workers);
	ck_assert_uint_eq(st.errors, (uint64_t)want->nmsg);
	rep_pool__free(p);
	got_free(&g);
}

static void random_streams(int bad)
{
	uint64_t seed = seed_from_env(), s = seed;
	struct feed *f = calloc(4000, sizeof(*f));
	int discarded_seen = 0;

	/* Misaligned words read as a rep count could ask for 2^50 iterations. */
	gen_no_rep = bad;
	for (int round = 0; round < 6; round++) {
		struct corpus c;
		make_corpus(&s, &c, 20, 1500);
		if (bad)
			corrupt(&s, &c, 1 + (int)rnd_below(&s, 4));
		size_t nf = make_feeds(&s, &c, f, 4000);
		struct got want = { 0 };
		struct rep_recover *want_counts;
		serial(c.t, c.w, f, nf, &want, &want_counts);
		for (unsigned k = 0; k <= 3; k++) {	/* 0: on the caller's thread */
			struct pool_cfg cfg = {
				.workers = k ? k : 1, .on_caller = !k, .depth = 2 + rnd_below(&s, 8),
				.chunk_bytes = 8 * (1 + rnd_below(&s, 400)),
				.max_chunk_refs = round % 2 ? 1 + rnd_below(&s, 5000) : 0,
			};
			compare_one(c.t, c.w, f, nf, &cfg, &want, want_counts, seed);
		}
		/* Bad data in a feed cut into many chunks: later chunks of it,
		 * recovered by other threads, are dropped and uncounted. */
		struct pool_cfg many = { .workers = 3, .depth = 12, .chunk_bytes = 64 };
		struct got g = { 0 };
		struct rep_pool *p;
		pooled(c.t, c.w, f, nf, &many, &g, &p);
		struct rep_pool_stats st;
		rep_pool__stats(p, &st);
		discarded_seen += st.discarded > 0;
		ck_assert_uint_eq(got_diff(&g, &want), SIZE_MAX);
		assert_same_counts(rep_pool__counts(p), want_counts, "many chunks");
		rep_pool__free(p);
		got_free(&g);
		rep_recover__free(want_counts);
		got_free(&want);
		free_corpus(&c);
	}
	gen_no_rep = false;
	if (bad)
		ck_assert_msg(discarded_seen > 0, "seed %#" PRIx64 ": no chunk was ever dropped", seed);
	free(f);
}

START_TEST(any_number_of_threads_equals_serial_recovery)
{
	random_streams(0);
}
END_TEST

START_TEST(bad_data_ends_its_feed_the_same_way)
{
	random_streams(1);
}
END_TEST

/* One unit expanding to far more references than a chunk may buffer (a
 * long rep movs): the threads wait their turn, output stays bounded. */
START_TEST(huge_units_stay_in_order)
{
	struct rep_table *t;
	const uint16_t N = REP_NO_SLOT;
	struct rep_instr in[] = { { 0x1000, 3, 0 }, { 0x1003, 2, 0 } };
	struct rep_mref m[] = {
		{ .pc = 0x1000, .disp = 0, .size = 8, .type = REP_REF_READ, .scale = 1, .base = 0, .index = N, .seg = N, .count = N },
		{ .pc = 0x1003, .disp = 0, .size = 1, .type = REP_REF_WRITE, .scale = 1, .base = 1, .index = N, .seg = N, .count = 2 },
	};
	struct rep_block b = { .id = 1, .nslots = 3, .pc = 0x1000, .ninstrs = 2, .nrefs = 2,
			       .instrs = in, .refs = m };
	enum { NU = 400 };
	uint64_t w[NU * 4];

	ck_assert_int_eq(rep_table__new(&t), 0);
	ck_assert_int_eq(rep_table__add(t, &b), 0);
	for (int u = 0; u < NU; u++) {
		w[4 * u] = REP_S_WORD(1, 3);
		w[4 * u + 1] = 0x10000 + 8 * (uint64_t)u;
		w[4 * u + 2] = 0x900000 + 0x10000 * (uint64_t)u;
		w[4 * u + 3] = u % 7 ? 3 : 20000;	/* rep stosb counts */
	}
	struct feed f = { 0, 0, NU * 4, 0, REP_POOL_BORROW };
	struct got want = { 0 };
	struct rep_recover *wc;
	serial(t, w, &f, 1, &want, &wc);
	for (unsigned k = 0; k <= 3; k++) {
		struct pool_cfg cfg = { .workers = k ? k : 1, .on_caller = !k, .depth = 6,
					.chunk_bytes = 64, .max_chunk_refs = 4096 };
		compare_one(t, w, &f, 1, &cfg, &want, wc, 0);
	}
	rep_recover__free(wc);
	got_free(&want);
	rep_table__free(t);
}
END_TEST

/* ------------------------------------------------------------ files */

/* Sections of threads 1, 2, 1, 1, 3 (the last two of thread 1 are one
 * run: an edge joins them), the second one with bad data: the pool fed as
 * padrone-sim feeds it equals rep_reader__replay. */
START_TEST(multi_section_file_equals_replay)
{
	uint64_t seed = seed_from_env(), s = seed;
	struct corpus c;
	char path[64];
	static const uint64_t tids[] = { 1, 2, 1, 1, 3 };
	size_t cuts[6] = { 0 };

	snprintf(path, sizeof path, "/tmp/padrone-pool-%d.rep", (int)getpid());
	make_corpus(&s, &c, 25, 3000);
	for (int k = 1; k < 5; k++) {	/* unit boundaries near k/5 */
		size_t at = cuts[k - 1];
		while (at < c.n * (size_t)k / 5)
			at += 1 + (size_t)(c.w[at] >> 48);
		cuts[k] = at;
	}
	cuts[5] = c.n;
	/* An unknown block id half-way through the second section. */
	size_t bad = cuts[1];
	while (bad < (cuts[1] + cuts[2]) / 2)
		bad += 1 + (size_t)(c.w[bad] >> 48);
	c.w[bad] = REP_S_WORD(9999, c.w[bad] >> 48);

	struct rep_writer *wr;
	ck_assert_int_eq(rep_writer__open(path, c.t, &wr), 0);
	for (int k = 0; k < 5; k++)
		ck_assert_int_eq(rep_writer__stream(wr, tids[k], c.w + cuts[k], cuts[k + 1] - cuts[k]), 0);
	ck_assert_int_eq(rep_writer__close(wr), 0);

	/* Serial. */
	struct rep_reader *rd;
	struct rep_recover *r;
	struct refvec want = { 0 };
	ck_assert_int_eq(rep_reader__open(path, &rd), 0);
	ck_assert_int_eq(rep_recover__new(rep_reader__table(rd), sink, &want, &r), 0);
	ck_assert_int_eq(rep_reader__replay(rd, r), -EBADMSG);
	char want_msg[400];
	snprintf(want_msg, sizeof want_msg, "%s", rep_errmsg());
	ck_assert_ptr_nonnull(strstr(want_msg, "unknown block id 9999"));
	ck_assert_uint_gt(want.n, 0);
	struct rep_reader *rd0 = rd;	/* r counts in its table */

	for (unsigned k = 0; k <= 3; k++) {
		struct rep_pool_opts o = { .sz = sizeof(o), .workers = k, .chunk_bytes = 512,
					   .error = pool_error, .on_caller = !k };
		struct got g = { 0 };
		struct rep_pool *p;
		uint64_t tid, prev = 0, woff;
		const uint64_t *w;
		size_t n;
		bool first = true;
		ck_assert_int_eq(rep_reader__open(path, &rd), 0);
		ck_assert_int_eq(rep_pool__new(rep_reader__table(rd), &o, pool_sink, &g, &p), 0);
		while (rep_reader__next(rd, &tid, &w, &n, &woff) == 1) {
			unsigned fl = REP_POOL_BORROW | (first || tid != prev ? REP_POOL_GAP : 0);
			ck_assert_int_eq(rep_pool__feed(p, tid, w, n, woff, fl), 0);
			first = false;
			prev = tid;
		}
		ck_assert_int_eq(rep_pool__finish(p), -EBADMSG);
		ck_assert_int_eq(g.nmsg, 1);
		ck_assert_uint_eq(g.msg_stream[0], 2);
		ck_assert_ptr_nonnull(strstr(want_msg, g.msg[0]));	/* replay adds the path */
		ck_assert_uint_eq(g.n, want.n);
		for (size_t i = 0; i < g.n; i++)
			ck_assert_msg(!memcmp(&g.v[i].r, &want.v[i], sizeof(want.v[i])),
				      "workers %u: reference %zu differs", k, i);
		/* Two readers, two tables: counts compare by block id. */
		assert_same_counts(rep_pool__counts(p), r, "file");
		rep_pool__free(p);
		rep_reader__close(rd);
		got_free(&g);
	}
	rep_recover__free(r);
	rep_reader__close(rd0);
	free(want.v);
	unlink(path);
	free_corpus(&c);
}
END_TEST

/* ------------------------------------------------------------ CAB rings */

/* Producer i writes units [from, to) of the corpus into its ring and
 * flushes; the one told to die kills itself half-way, never flushing. */
static void producer_child(int fd, const uint64_t *w, size_t from, size_t to, bool die)
{
	struct cab_ring *r;
	struct cab_producer *p;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (cab_ring__open(fd, &r) || cab_producer__open(r, &p))
		_exit(2);
	size_t half = from + (to - from) / 2;
	for (size_t at = from; at < to; at += 1 + CAB_HDR_LEN(w[at])) {
		if (die && at >= half)
			raise(SIGKILL);
		if (cab_producer__put_record(p, w + at) != 0)
			_exit(3);
	}
	cab_producer__flush(p);
	_exit(0);
}

START_TEST(rings_of_forked_producers_equal_direct_recovery)
{
	uint64_t seed = seed_from_env(), s = seed;
	struct corpus c;
	struct cab_ring *ring[NSTREAMS];
	struct cab_consumer *cons[NSTREAMS];
	struct cab_opts o = { .sz = sizeof(o), .chunk_bytes = 8192, .nchunks = 4,
			      .max_record_words = 512, .consumer_timeout_ms = 60000 };
	pid_t pid[NSTREAMS];
	size_t lo[NSTREAMS], hi[NSTREAMS], die_at = 0;
	struct sigaction ign = { .sa_handler = SIG_IGN }, old;

	gen_no_rep = false;
	make_corpus(&s, &c, 30, 6000);
	/* Three streams of the corpus; the last producer dies half-way. */
	lo[0] = 0;
	for (int i = 0; i < NSTREAMS; i++) {
		size_t at = lo[i];
		while (at < c.n * (size_t)(i + 1) / NSTREAMS)
			at += 1 + (size_t)(c.w[at] >> 48);
		hi[i] = at;
		if (i + 1 < NSTREAMS)
			lo[i + 1] = at;
	}
	for (die_at = lo[2]; die_at < lo[2] + (hi[2] - lo[2]) / 2;)
		die_at += 1 + (size_t)(c.w[die_at] >> 48);

	/* Children reaped by the kernel: a dead producer's pid is gone at once. */
	ck_assert_int_eq(sigaction(SIGCHLD, &ign, &old), 0);
	for (int i = 0; i < NSTREAMS; i++) {
		ck_assert_int_eq(cab_ring__create(&o, &ring[i]), 0);
		ck_assert_int_eq(cab_consumer__open(ring[i], &cons[i]), 0);
		pid[i] = fork();
		ck_assert_int_ge(pid[i], 0);
		if (pid[i] == 0)
			producer_child(cab_ring__fd(ring[i]), c.w, lo[i], hi[i], i == 2);
	}
	struct got g = { 0 };
	struct rep_pool *p;
	struct rep_pool_opts po = { .sz = sizeof(po), .workers = 2, .chunk_bytes = 4096,
				    .error = pool_error };
	ck_assert_int_eq(rep_pool__new(c.t, &po, pool_sink, &g, &p), 0);
	ck_assert_int_eq(rep_pool__run_cab(p, cons, NSTREAMS, NULL), 0);
	ck_assert_int_eq(rep_pool__finish(p), 0);
	for (int i = 0; i < NSTREAMS; i++) {
		for (int k = 0; k < 5000 && kill(pid[i], 0) == 0; k++)
			usleep(1000);
		ck_assert_msg(kill(pid[i], 0) < 0 && errno == ESRCH, "producer %d still runs", i);
	}
	ck_assert_int_eq(sigaction(SIGCHLD, &old, NULL), 0);

	/* Direct recovery of what each producer wrote, stream by stream. */
	struct feed f[NSTREAMS] = {
		{ 0, lo[0], hi[0] - lo[0], 0, 0 },
		{ 1, lo[1], hi[1] - lo[1], 0, 0 },
		{ 2, lo[2], die_at - lo[2], 0, 0 },
	};
	struct got want = { 0 };
	struct rep_recover *wc;
	serial(c.t, c.w, f, NSTREAMS, &want, &wc);
	ck_assert_int_eq(g.nmsg, 0);
	/* Each stream in order; streams interleave as the rings were polled. */
	for (uint64_t st = 0; st < NSTREAMS; st++) {
		size_t i = 0, j = 0, n = 0;
		for (;; i++, j++, n++) {
			while (i < g.n && g.v[i].stream != st)
				i++;
			while (j < want.n && want.v[j].stream != st)
				j++;
			if (i == g.n || j == want.n)
				break;
			ck_assert_msg(!memcmp(&g.v[i].r, &want.v[j].r, sizeof(g.v[i].r)),
				      "seed %#" PRIx64 " stream %" PRIu64 ": reference %zu differs", seed,
				      st, n);
		}
		ck_assert_msg(i == g.n && j == want.n, "stream %" PRIu64 ": %zu references, want more",
			      st, n);
		ck_assert_uint_gt(n, 0);
	}
	ck_assert_uint_eq(g.n, want.n);
	/* No record was lost, no gap flagged: the counts are the direct ones. */
	assert_same_counts(rep_pool__counts(p), wc, "rings");
	for (int i = 0; i < NSTREAMS; i++) {
		cab_consumer__close(cons[i]);
		cab_ring__close(ring[i]);
	}
	rep_pool__free(p);
	rep_recover__free(wc);
	got_free(&g);
	got_free(&want);
	free_corpus(&c);
}
END_TEST

int main(void)
{
	tu_block_sigchld();
	Suite *s = suite_create("rep_pool");
	TCase *tc = tcase_create("rep_pool");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, any_number_of_threads_equals_serial_recovery);
	tcase_add_test(tc, bad_data_ends_its_feed_the_same_way);
	tcase_add_test(tc, huge_units_stay_in_order);
	tcase_add_test(tc, multi_section_file_equals_replay);
	tcase_add_test(tc, rings_of_forked_producers_equal_direct_recovery);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
