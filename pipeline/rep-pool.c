/* rep-pool.c: parallel REP recovery, PiPA's second stage. Fed words are cut
 * into chunks at unit boundaries; recovery threads take whole chunks, each
 * recovering into buffers of its own chunk; the caller's thread hands the
 * buffers on strictly in feed order, so whoever consumes the references
 * (the set splitter, the analyses) sees exactly the serial stream.
 *
 * Counts: each thread counts blocks and the edges inside its chunks; the
 * edge from a chunk's predecessor (the last unit of the stream's previous
 * chunk) into its first unit is added in order, by the caller's thread,
 * which knows both. After bad data the rest of the feed is dropped, as
 * serial recovery skips the rest of a section; chunks of it that another
 * thread had already recovered have their counts taken back (counts wrap,
 * so taking back commutes with merging).
 *
 * Locking: one mutex, taken a few times per chunk and once per batch of
 * REP_BATCH references; the batches themselves move by pointer. */
#include "pipeline/pipeline.h"
#include "pipeline/rep-internal.h"
#include "pipeline/cab.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SLOT_FREE, SLOT_QUEUED, SLOT_RUNNING, SLOT_DONE };

/* Batches the head chunk gathers before its waiting caller is woken. */
#define WAKE_BATCHES 8

struct outbuf {
	struct rep_ref *v;
	size_t n;
};

/* A chunk in flight; slot seq % depth. Between SLOT_FREE and publication
 * only the caller's thread touches it, while SLOT_RUNNING only its worker
 * (and the caller taking buffers under the lock), once SLOT_DONE only the
 * caller. */
struct slot {
	uint64_t seq, stream, segment;
	const uint64_t *w;
	size_t n;
	uint64_t off;
	bool gap;
	int state;
	uint64_t *own;		/* the chunk's copy, when not borrowed */
	size_t owncap;
	struct outbuf *out;	/* filled batches; the caller takes them in order */
	size_t nout, outcap, taken;
	int rc;			/* -EBADMSG: bad data; other: fatal */
	char err[320];
	uint32_t head, tail;	/* table position + 1 of the first / last unit counted */
	struct rep_recover_stats delta;
};

struct stream_state {
	uint64_t id;
	uint32_t last;		/* table position + 1 of the last unit delivered; 0 = none */
	uint64_t next_off;
};

struct worker {
	struct rep_pool *p;
	pthread_t th;
	bool started;
	struct rep_recover *r;
	struct slot *cur;
	double cpu;
};

struct rep_pool {
	const struct rep_table *t;
	struct rep_pool_opts o;
	rep_pool_sink sink;
	void *arg;
	pthread_mutex_t mu;
	pthread_cond_t work_cv;	/* workers: a chunk was queued, or stop */
	pthread_cond_t done_cv;	/* caller: the head chunk has output or is done */
	bool caller_waits;	/* on done_cv */
	pthread_cond_t head_cv;	/* workers over their buffer quota: the head moved */
	struct slot *slots;
	unsigned depth;
	size_t cap_bufs;	/* batches a chunk may hold before it is the head */
	size_t chunk_words;
	uint64_t next_seq, next_work, next_out;
	uint64_t segment;	/* of the last feed; segments start at 1 */
	uint64_t failed_segment;	/* the last feed that had bad data, 0 = none */
	bool stop, finished;
	int fatal;
	int first_bad;
	struct worker *w;
	unsigned nworkers;
	struct rep_ref *free_bufs;	/* batches, chained through their first bytes */
	struct stream_state *streams;
	size_t nstreams, capstreams, last_stream;
	struct rep_recover *counts;	/* joined at finish */
	struct rep_pool_stats st;
	char errmsg[384];
};

/* ------------------------------------------------------------ helpers */

static int pool_fail(struct rep_pool *p, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int pool_fail(struct rep_pool *p, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->errmsg, sizeof p->errmsg, fmt, ap);
	va_end(ap);
	return err;
}

/* The first fatal error stops everything (lock held). */
static void set_fatal(struct rep_pool *p, int err, const char *why)
{
	if (p->fatal)
		return;
	p->fatal = err;
	pool_fail(p, err, "%s", why);
	pthread_cond_broadcast(&p->work_cv);
	pthread_cond_broadcast(&p->head_cv);
	pthread_cond_broadcast(&p->done_cv);
}

/* A free batch array, or NULL (lock held). */
static struct rep_ref *buf_get(struct rep_pool *p)
{
	struct rep_ref *b = p->free_bufs;

	if (b) {
		memcpy(&p->free_bufs, b, sizeof(b));
		return b;
	}
	return malloc(REP_BATCH * sizeof(*b));
}

static void buf_put(struct rep_pool *p, struct rep_ref *b)
{
	memcpy(b, &p->free_bufs, sizeof(b));
	p->free_bufs = b;
}

static double thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct stream_state *stream_get(struct rep_pool *p, uint64_t id)
{
	if (p->last_stream < p->nstreams && p->streams[p->last_stream].id == id)
		return &p->streams[p->last_stream];
	for (size_t i = 0; i < p->nstreams; i++)
		if (p->streams[i].id == id)
			return &p->streams[p->last_stream = i];
	if (p->nstreams == p->capstreams) {
		size_t cap = p->capstreams ? 2 * p->capstreams : 16;
		struct stream_state *ns = realloc(p->streams, cap * sizeof(*ns));
		if (!ns)
			return NULL;
		p->streams = ns;
		p->capstreams = cap;
	}
	p->streams[p->nstreams] = (struct stream_state){ .id = id };
	return &p->streams[p->last_stream = p->nstreams++];
}

/* ------------------------------------------------------------ workers */

/* The recoverer's batch is full (or flushed): it joins the chunk's output
 * and the recoverer gets a fresh array. A chunk that is not the head yet
 * holds at most cap_bufs batches: its worker waits to become the head
 * (which never waits), so memory stays bounded whatever a unit expands to. */
static void worker_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct worker *k = arg;
	struct rep_pool *p = k->p;
	struct slot *s = k->cur;

	if (p->o.on_caller) {	/* the head chunk, on the caller's thread */
		int rc = p->fatal ? 0 : p->sink(p->arg, s->stream, refs, n);
		if (rc) {
			pthread_mutex_lock(&p->mu);
			set_fatal(p, rc < 0 ? rc : -ECANCELED, "the consumer of the references stopped");
			pthread_mutex_unlock(&p->mu);
		}
		return;
	}
	pthread_mutex_lock(&p->mu);
	while (!p->fatal && s->seq != p->next_out && s->nout - s->taken >= p->cap_bufs)
		pthread_cond_wait(&p->head_cv, &p->mu);
	if (p->fatal)
		goto out;	/* the batch is reused; nobody reads it any more */
	struct rep_ref *fresh = buf_get(p);
	if (s->nout == s->outcap) {
		size_t cap = s->outcap ? 2 * s->outcap : 16;
		struct outbuf *no = realloc(s->out, cap * sizeof(*no));
		if (no) {
			s->out = no;
			s->outcap = cap;
		}
	}
	if (!fresh || s->nout == s->outcap) {
		free(fresh);
		set_fatal(p, -ENOMEM, "out of memory");
		goto out;
	}
	s->out[s->nout++] = (struct outbuf){ (struct rep_ref *)refs, n };
	rep_recover__set_batch(k->r, fresh);
	/* Waking the caller for every batch made the two threads take turns,
	 * a futex wake and a context switch per 2048 references (a third of
	 * the recovery thread's time on this VM): it is woken for a few. */
	if (s->seq == p->next_out && p->caller_waits &&
	    s->nout - s->taken >= (p->cap_bufs < WAKE_BATCHES ? p->cap_bufs : WAKE_BATCHES))
		pthread_cond_signal(&p->done_cv);
out:
	pthread_mutex_unlock(&p->mu);
}

static void recover_chunk(struct worker *k, struct slot *s)
{
	struct rep_recover_stats a, b;
	int rc;

	rep_recover__stats(k->r, &a);
	rep__recover_begin(k->r);
	rc = rep_recover__feed(k->r, s->w, s->n, s->off);
	if (!rc)	/* chunks end at unit boundaries but a feed's last one */
		rc = rep__recover_section_end(k->r, s->off + s->n * 8);
	rep_recover__flush(k->r);
	s->rc = rc;
	if (rc)
		snprintf(s->err, sizeof s->err, "%s", rep_errmsg());
	s->head = rep__recover_head(k->r);
	s->tail = rep__recover_tail(k->r);
	rep_recover__stats(k->r, &b);
	s->delta = (struct rep_recover_stats){
		.units = b.units - a.units, .refs = b.refs - a.refs,
		.instrs = b.instrs - a.instrs, .bytes = b.bytes - a.bytes,
		.spoiled = b.spoiled - a.spoiled,
	};
}

/* Lock held (dropped while recovering): the next queued chunk. */
static void run_next(struct worker *k)
{
	struct rep_pool *p = k->p;
	struct slot *s = &p->slots[p->next_work++ % p->depth];
	/* A chunk of a feed known bad is dropped anyway. */
	bool skip = p->fatal || s->segment == p->failed_segment;

	s->state = SLOT_RUNNING;
	k->cur = s;
	pthread_mutex_unlock(&p->mu);
	if (!skip)
		recover_chunk(k, s);
	pthread_mutex_lock(&p->mu);
	if (s->rc && s->rc != -EBADMSG)
		set_fatal(p, s->rc, s->err);
	s->state = SLOT_DONE;
	k->cur = NULL;
	pthread_cond_signal(&p->done_cv);
}

static void *worker_main(void *arg)
{
	struct worker *k = arg;
	struct rep_pool *p = k->p;
	double c0 = thread_cpu();

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && p->next_work == p->next_seq)
			pthread_cond_wait(&p->work_cv, &p->mu);
		if (p->next_work == p->next_seq)
			break;
		run_next(k);
	}
	pthread_mutex_unlock(&p->mu);
	k->cpu = thread_cpu() - c0;
	return NULL;
}

/* ------------------------------------------------------- the caller's side */

/* Lock held. The head chunk is complete: join its counts, report its bad
 * data, or take back the counts of a dropped one. */
static void retire(struct rep_pool *p, struct slot *s)
{
	struct stream_state *ss = stream_get(p, s->stream);	/* made by feed */
	int rc = 0;

	if (p->fatal)
		return;
	if (s->segment == p->failed_segment) {
		p->st.discarded++;
		if (s->delta.units || s->delta.bytes)
			rc = rep__recover_uncount(p->counts, s->w, s->delta.units, &s->delta);
		rep__recover_lost(p->counts, rep__units_in(s->w, s->n));
		goto out;
	}
	if (s->gap) {
		ss->last = 0;
		rep_recover__gap(p->counts);
	}
	if (ss->last && s->head)
		rc = rep__recover_add_edge(p->counts, ss->last, s->head);
	if (s->tail)
		ss->last = s->tail;
	if (s->rc) {
		/* The feed's units chain by their lengths: the rest of it is lost,
		 * the bad unit first (its chunk's units but those recovered). */
		p->st.errors++;
		rep__recover_lost(p->counts, rep__units_in(s->w, s->n) - s->delta.units -
					     s->delta.spoiled);
		ss->last = 0;
		p->failed_segment = s->segment;
		rep_recover__gap(p->counts);
		if (!p->first_bad) {
			p->first_bad = s->rc;
			pool_fail(p, s->rc, "%s", s->err);
		}
		if (p->o.error) {	/* the slot stays ours while unlocked */
			pthread_mutex_unlock(&p->mu);
			p->o.error(p->arg, s->stream, s->rc, s->err);
			pthread_mutex_lock(&p->mu);
		}
	}
out:
	if (rc)
		set_fatal(p, rc, "out of memory");
}

/* Lock held. Hand on every batch that is ready, in order, retiring chunks
 * as they complete; wait while the head is before `until`. Returns the
 * fatal error, if any. */
static int deliver(struct rep_pool *p, uint64_t until)
{
	while (p->next_out < p->next_seq) {
		struct slot *s = &p->slots[p->next_out % p->depth];
		if (s->taken < s->nout) {
			struct outbuf b = s->out[s->taken++];
			bool drop = p->fatal || s->segment == p->failed_segment;
			pthread_mutex_unlock(&p->mu);
			int rc = drop ? 0 : p->sink(p->arg, s->stream, b.v, b.n);
			pthread_mutex_lock(&p->mu);
			buf_put(p, b.v);
			if (rc)
				set_fatal(p, rc < 0 ? rc : -ECANCELED, "the consumer of the references stopped");
			continue;
		}
		if (s->state != SLOT_DONE) {
			if (p->next_out >= until)
				break;
			p->st.waits++;
			p->caller_waits = true;
			pthread_cond_wait(&p->done_cv, &p->mu);
			p->caller_waits = false;
			continue;
		}
		retire(p, s);
		s->state = SLOT_FREE;
		s->nout = s->taken = 0;
		p->next_out++;
		pthread_cond_broadcast(&p->head_cv);
	}
	return p->fatal;
}

/* Where a chunk starting at `at` ends: after whole units of about
 * chunk_words, found by their headers' lengths, and never before a repeat
 * unit (it needs the unit before it). A header that cannot be one ends the
 * walk; the rest goes into this chunk, whose worker names the bad data. */
static size_t cut(const struct rep_pool *p, const uint64_t *w, size_t at, size_t n)
{
	size_t end = at;

	if (n - at <= p->chunk_words)
		return n;
	while (end < n && (end < at + p->chunk_words || w[end] & REP_S_REPEAT)) {
		uint64_t h = w[end];
		if (!h || (h >> 32 & 0xffff & ~((REP_S_SPOILED | REP_S_REPEAT) >> 32)))
			return n;
		end += REP_S_WORDS(h);
	}
	return end < n ? end : n;
}

static int submit(struct rep_pool *p, uint64_t stream, const uint64_t *w, size_t n, uint64_t off,
		  bool gap, bool borrow)
{
	pthread_mutex_lock(&p->mu);
	int rc = deliver(p, p->next_seq >= p->depth ? p->next_seq - p->depth + 1 : 0);
	pthread_mutex_unlock(&p->mu);
	if (rc)
		return rc;
	/* Free and ours until published. */
	struct slot *s = &p->slots[p->next_seq % p->depth];
	if (!borrow && n) {
		if (n > s->owncap) {
			free(s->own);
			s->owncap = 0;
			if (!(s->own = malloc(n * sizeof(*w))))
				return pool_fail(p, -ENOMEM, "out of memory");
			s->owncap = n;
		}
		memcpy(s->own, w, n * sizeof(*w));
		w = s->own;
	}
	s->stream = stream;
	s->segment = p->segment;
	s->w = w;
	s->n = n;
	s->off = off;
	s->gap = gap;
	s->rc = 0;
	s->head = s->tail = 0;
	memset(&s->delta, 0, sizeof(s->delta));
	pthread_mutex_lock(&p->mu);
	s->seq = p->next_seq++;
	s->state = SLOT_QUEUED;
	p->st.chunks++;
	if (p->o.on_caller) {	/* every earlier chunk is delivered: the head */
		double c0 = thread_cpu();
		run_next(&p->w[0]);
		p->w[0].cpu += thread_cpu() - c0;
		rc = deliver(p, 0);
	} else {
		pthread_cond_signal(&p->work_cv);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int rep_pool__feed(struct rep_pool *p, uint64_t stream, const uint64_t *words, size_t n,
		   uint64_t offset, unsigned flags)
{
	int rc;

	if (p->finished)
		return pool_fail(p, -EPIPE, "feed after finish");
	if (p->fatal)
		return p->fatal;
	if (flags & ~(unsigned)(REP_POOL_GAP | REP_POOL_BORROW))
		return pool_fail(p, -EINVAL, "unknown feed flags %#x", flags);
	struct stream_state *ss = stream_get(p, stream);
	if (!ss)
		return pool_fail(p, -ENOMEM, "out of memory");
	if (offset == UINT64_MAX)
		offset = ss->next_off;
	ss->next_off = offset + n * 8;
	p->segment++;
	bool gap = flags & REP_POOL_GAP;
	if (!n && !gap)
		return 0;
	size_t at = 0;
	do {	/* an empty feed with a gap still carries the gap */
		size_t end = cut(p, words, at, n);
		if ((rc = submit(p, stream, words + at, end - at, offset + at * 8, gap,
				 flags & REP_POOL_BORROW)))
			return rc;
		gap = false;
		at = end;
	} while (at < n);
	pthread_mutex_lock(&p->mu);
	rc = deliver(p, 0);
	pthread_mutex_unlock(&p->mu);
	return rc;
}

struct cab_feed {
	struct rep_pool *p;
	uint64_t stream;
};

static int cab_feed_fn(void *arg, const uint64_t *w, size_t n, unsigned flags)
{
	struct cab_feed *f = arg;

	return rep_pool__feed(f->p, f->stream, w, n, UINT64_MAX,
			      (flags & CAB_SPAN_GAP) ? REP_POOL_GAP : 0);
}

/* A live ring to sleep on, round robin. */
static struct cab_consumer *next_live(struct cab_consumer *const *c, size_t n, size_t *rr)
{
	for (size_t i = 0; i < n; i++) {
		size_t k = (*rr)++ % n;
		if (!cab_consumer__eof(c[k]))
			return c[k];
	}
	return NULL;
}

int rep_pool__run_cab(struct rep_pool *p, struct cab_consumer *const *c, size_t n,
		      const volatile int *stop)
{
	struct cab_feed *f = calloc(n ? n : 1, sizeof(*f));
	unsigned idle = 0;
	size_t rr = 0;
	int rc = 0;

	if (!f)
		return pool_fail(p, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		f[i] = (struct cab_feed){ p, i };
	while (!(stop && *stop)) {
		int got = 0;
		for (size_t i = 0; i < n; i++) {
			if (cab_consumer__eof(c[i]))
				continue;
			int k = cab_consumer__poll(c[i], cab_feed_fn, &f[i]);
			if (k < 0) {
				rc = p->fatal ? p->fatal
					      : pool_fail(p, k, "ring %zu: %s", i, cab_errmsg());
				goto out;
			}
			got += k;
		}
		pthread_mutex_lock(&p->mu);
		rc = deliver(p, 0);
		pthread_mutex_unlock(&p->mu);
		if (rc)
			goto out;
		struct cab_consumer *sleep_on = next_live(c, n, &rr);
		if (!sleep_on)
			break;	/* every ring ended */
		if (got) {
			idle = 0;
		} else if (++idle < 64) {
			sched_yield();
		} else {
			/* One ring's futex at a time: a short nap, then look at all. */
			cab_consumer__wait(sleep_on, 1);
		}
	}
out:
	free(f);
	return rc;
}

int rep_pool__finish(struct rep_pool *p)
{
	int rc;

	if (p->finished)
		return p->fatal ? p->fatal : p->first_bad;
	pthread_mutex_lock(&p->mu);
	rc = deliver(p, p->next_seq);
	p->stop = true;
	pthread_cond_broadcast(&p->work_cv);
	pthread_cond_broadcast(&p->head_cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nworkers; i++) {
		if (p->w[i].started)
			pthread_join(p->w[i].th, NULL);
		p->w[i].started = false;
		if (i < 64)
			p->st.worker_cpu[i] = p->w[i].cpu;
		if (!rc && (rc = rep_recover__merge(p->counts, p->w[i].r)))
			pool_fail(p, rc, "%s", rep_errmsg());
	}
	p->finished = true;
	if (rc && !p->fatal)
		p->fatal = rc;
	return p->fatal ? p->fatal : p->first_bad;
}

/* ------------------------------------------------------------ life */

int rep_pool__new(const struct rep_table *t, const struct rep_pool_opts *opts,
		  rep_pool_sink sink, void *arg, struct rep_pool **out)
{
	struct rep_pool *p;
	int rc;

	*out = NULL;
	if (opts && (opts->sz < offsetof(struct rep_pool_opts, workers) || opts->sz > sizeof(*opts)))
		return -EINVAL;
	if (!(p = calloc(1, sizeof(*p))))
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work_cv, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	pthread_cond_init(&p->head_cv, NULL);
	if (opts)
		memcpy(&p->o, opts, opts->sz);
	p->t = t;
	p->sink = sink;
	p->arg = arg;
	p->nworkers = p->o.workers && !p->o.on_caller ? p->o.workers : 1;
	if (p->nworkers > 256) {
		rep_pool__free(p);
		return -EINVAL;
	}
	p->depth = p->o.depth ? p->o.depth : 4 * p->nworkers;
	if (p->depth < 2)
		p->depth = 2;
	p->chunk_words = (p->o.chunk_bytes ? p->o.chunk_bytes : 64 * 1024) / 8;
	if (!p->chunk_words)
		p->chunk_words = 1;
	size_t max_refs = p->o.max_chunk_refs ? p->o.max_chunk_refs : 256 * 1024;
	p->cap_bufs = (max_refs + REP_BATCH - 1) / REP_BATCH;
	p->st.workers = p->nworkers;
	p->slots = calloc(p->depth, sizeof(*p->slots));
	p->w = calloc(p->nworkers, sizeof(*p->w));
	if (!p->slots || !p->w || rep_recover__new(t, NULL, NULL, &p->counts)) {
		rc = -ENOMEM;
		goto err;
	}
	for (unsigned i = 0; i < p->nworkers; i++) {
		struct worker *k = &p->w[i];
		k->p = p;
		if ((rc = rep_recover__new(t, worker_sink, k, &k->r)))
			goto err;
		rep_recover__set_fetch_line(k->r, p->o.fetch_line);
		rep_recover__set_fetch_sets(k->r, p->o.fetch_sets);
	}
	for (unsigned i = 0; i < p->nworkers && !p->o.on_caller; i++) {
		if ((rc = -pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i])))
			goto err;
		p->w[i].started = true;
	}
	*out = p;
	return 0;
err:
	rep_pool__free(p);
	return rc;
}

void rep_pool__free(struct rep_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	set_fatal(p, -ECANCELED, "freed");	/* workers stop at once, drop their output */
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; p->w && i < p->nworkers; i++) {
		if (p->w[i].started)
			pthread_join(p->w[i].th, NULL);
		rep_recover__free(p->w[i].r);
	}
	for (unsigned i = 0; p->slots && i < p->depth; i++) {
		struct slot *s = &p->slots[i];
		for (size_t j = s->taken; j < s->nout; j++)
			free(s->out[j].v);
		free(s->out);
		free(s->own);
	}
	while (p->free_bufs) {
		struct rep_ref *b = p->free_bufs;
		memcpy(&p->free_bufs, b, sizeof(b));
		free(b);
	}
	rep_recover__free(p->counts);
	pthread_cond_destroy(&p->work_cv);
	pthread_cond_destroy(&p->done_cv);
	pthread_cond_destroy(&p->head_cv);
	pthread_mutex_destroy(&p->mu);
	free(p->slots);
	free(p->w);
	free(p->streams);
	free(p);
}

const struct rep_recover *rep_pool__counts(const struct rep_pool *p)
{
	return p->counts;
}

void rep_pool__stats(const struct rep_pool *p, struct rep_pool_stats *st)
{
	*st = p->st;
}

const char *rep_pool__errmsg(const struct rep_pool *p)
{
	return p->errmsg;
}
