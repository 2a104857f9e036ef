/* Instrumentation in a session (issue 10): a function replaced by its
 * instrumented copy (codecache/instr.c), a consumer thread per thread's ring
 * recovering the references (pipeline/rep.h), and a simulator thread
 * simulating the host's caches as Cachegrind counts them
 * (pipeline/pipeline.h, src/instr-sim.c), one simulator for the whole
 * process (the threads' references interleave as the consumers hand them
 * over, as a single cache shared by the threads sees them).
 *
 * Several functions at once share the threads' state areas (a thread has
 * one gs_base; codecache/instr.c gives each function a section of it), so
 * the thread events go to any one active copy, which handles them for all.
 * Kept as the session extension "instr", released (uninstrumented)
 * at detach while the process is still attached: detaching puts the
 * threads' gs_base back, which a copy left in place could not survive. A
 * copy that could not be taken out (a stop that failed, a thread still in
 * it) is tried again at the next instrument, uninstrument or detach; at
 * detach it stays, with the threads' gs_base and its record, for a later
 * restore.
 */
#include "src/session.h"
#include "src/instr-sim.h"
#include "attach/attach.h"
#include "cfg/cfg.h"
#include "codecache/codecache.h"
#include "pipeline/cab.h"
#include "pipeline/pipeline.h"
#include "util/util.h"
#include "pipeline/rep.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_FUNCS 16
/* Chunks of 64 KiB per thread's ring: 4 MiB, a few milliseconds of a busy
 * thread's units, so that a consumer that a loaded machine schedules late
 * does not make the thread wait (16 chunks, 1 MiB: the thread waited about
 * every 0.5 ms). */
#define RING_CHUNKS 64

static const char *const event_names[PADRONE_NEVENTS] = {
	"Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw",
};

const char *padrone_event_name(unsigned i)
{
	return i < PADRONE_NEVENTS ? event_names[i] : NULL;
}

struct instr_state;

struct worker {
	struct instr_state *st;
	struct cab_ring *ring;		/* padrone's mapping; NULL once released */
	struct cab_consumer *cons;
	struct rep_recover *rec;
	struct sim_feed *feed;		/* cache: its references to the simulator */
	pthread_t th;
	bool started;
	pid_t tid;
	volatile int stop;
	uint64_t units, refs, lost, gaps;	/* final, once joined */
	/* published by the consumer after each span, for stats while it runs */
	_Atomic uint64_t live_units, live_refs, live_gaps, live_skipped;
	_Atomic uint64_t cpu_ns;		/* its CPU time, read as it ends */
	uint64_t prev_units, prev_refs, prev_ns;	/* at the last stats */
};

/* A loop as report needs it: where its blocks are. */
struct loop_span {
	struct padrone_iloop info;	/* ev unused */
	size_t nranges;
	struct cfg_range *ranges;	/* its blocks, nested loops' included */
};

struct func {
	char name[96];
	struct loop_span *loops;
	size_t nloops;
	uint64_t entry, size;
	char module[256];
	uint64_t module_base;
	struct cc_instr *in;
	struct worker *w;
	size_t nw;
	bool active;
	uint64_t t0_ns, t1_ns;
	uint64_t before_ns;		/* instrumented earlier in this attachment */
};

struct instr_state {
	struct csim_config cfg;
	struct csim *sim;
	struct sim_stage *stage;	/* simulates into sim */
	bool sampling;
	unsigned analyses;		/* PADRONE_ANALYZE_*, one bit */
	struct func f[MAX_FUNCS];
	size_t nf;
	/* read by the clone event (tracer thread): the active copies */
	struct cc_instr *_Atomic live[MAX_FUNCS];
};

/* The refs analysis: references recovered (the recoverer counts them),
 * nothing simulated. */
static void discard(void *arg, const struct rep_ref *refs, size_t n)
{
	(void)arg;
	(void)refs;
	(void)n;
}

static uint64_t thread_cpu_ns(clockid_t clock)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Recover the span (unless only the units are counted), then publish the
 * counts (only this thread writes the recoverer's and the consumer's own
 * counters: stats reads these copies). */
static int consume_span(void *arg, const uint64_t *words, size_t nwords, unsigned flags)
{
	struct worker *w = arg;
	struct rep_recover_stats rs = { 0 };
	struct cab_stats cs;
	int rc = w->rec ? rep_recover__cab_fn(w->rec, words, nwords, flags) : 0;

	cab_consumer__stats(w->cons, &cs);
	if (w->rec)
		rep_recover__stats(w->rec, &rs);
	else
		rs.units = cs.records_delivered;
	atomic_store_explicit(&w->live_units, rs.units, memory_order_relaxed);
	atomic_store_explicit(&w->live_refs, rs.refs + rs.instrs, memory_order_relaxed);
	atomic_store_explicit(&w->live_gaps, rs.gaps, memory_order_relaxed);
	atomic_store_explicit(&w->live_skipped, cs.records_skipped, memory_order_relaxed);
	return rc;
}

int padrone_analyses_parse(const char *text, unsigned *out, char *why, size_t size)
{
	static const struct { const char *name; unsigned bit; } known[] = {
		{ "blocks", PADRONE_ANALYZE_BLOCKS }, { "record", PADRONE_ANALYZE_RECORD },
		{ "refs", PADRONE_ANALYZE_REFS }, { "cache", PADRONE_ANALYZE_CACHE },
	};
	unsigned bits = 0;

	for (const char *p = text; p && *p;) {
		size_t len = strcspn(p, ",");
		size_t i = 0;
		while (i < sizeof known / sizeof known[0] &&
		       !(strlen(known[i].name) == len && strncmp(p, known[i].name, len) == 0))
			i++;
		if (i == sizeof known / sizeof known[0]) {
			snprintf(why, size, "unknown analysis '%.*s' (blocks, record, refs or "
				 "cache)", (int)len, p);
			return -EINVAL;
		}
		bits |= known[i].bit;
		p += len + (p[len] == ',');
	}
	if (!bits) {
		snprintf(why, size, "no analysis named (blocks, record, refs or cache)");
		return -EINVAL;
	}
	*out = bits;
	return 0;
}

/* The most a set of analyses asks for: each level includes those below. */
static unsigned analysis_level(unsigned bits)
{
	unsigned top = PADRONE_ANALYZE_CACHE;

	if (!bits)
		return top;
	while (!(bits & top))
		top >>= 1;
	return top;
}

static void *consume(void *arg)
{
	struct worker *w = arg;

	cab_consumer__run(w->cons, consume_span, w, &w->stop);
	if (w->rec)
		rep_recover__flush(w->rec);
	if (w->feed)
		sim_feed__flush(w->feed);
	atomic_store(&w->cpu_ns, thread_cpu_ns(CLOCK_THREAD_CPUTIME_ID));
	return NULL;
}

/* The consumers end once their producer ended and they drained the ring
 * (bounded: a ring left mapped in a kept copy never ends). */
static void stop_workers(struct func *f)
{
	for (size_t i = 0; i < f->nw; i++) {
		struct worker *w = &f->w[i];
		if (!w->started)
			continue;
		for (int k = 0; k < 500 && !cab_consumer__eof(w->cons); k++)
			nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
		w->stop = 1;
		cab_ring__wake_consumer(w->ring);	/* it may be in a long nap */
		pthread_join(w->th, NULL);
		w->started = false;
		if (w->feed)	/* its last references simulated: report counts them */
			sim_feed__drain(w->feed);
		struct rep_recover_stats rs = { 0 };
		struct cab_stats cs;
		cab_consumer__stats(w->cons, &cs);
		if (w->rec)
			rep_recover__stats(w->rec, &rs);
		else
			rs.units = cs.records_delivered;
		w->units = rs.units;
		w->refs = rs.refs + rs.instrs;
		w->gaps = rs.gaps;
		w->lost = cs.records_dropped + cs.records_skipped;
	}
}

/* The consumers, their recoverers and padrone's mappings of the rings,
 * once the workers ended: their counts are kept in the workers. */
static void release_rings(struct func *f)
{
	for (size_t i = 0; i < f->nw; i++) {
		cab_consumer__close(f->w[i].cons);
		rep_recover__free(f->w[i].rec);
		sim_feed__close(f->w[i].feed);
		f->w[i].feed = NULL;
		f->w[i].cons = NULL;
		f->w[i].rec = NULL;
		f->w[i].ring = NULL;
	}
	cc_instr__free(f->in);
	f->in = NULL;
}

static void free_func(struct func *f)
{
	stop_workers(f);
	release_rings(f);
	free(f->w);
	for (size_t i = 0; i < f->nloops; i++)
		free(f->loops[i].ranges);
	free(f->loops);
	memset(f, 0, sizeof *f);
}

static int open_cache(struct padrone_session *s, struct cc_cache **c)
{
	struct attach_target *t = padrone_session_target(s);
	struct cc_error err;
	int rc;

	if (!t)
		return padrone_session_fail(s, PADRONE_NOT_ATTACHED, -ENOENT,
					    "not attached to a process");
	if ((rc = cc_cache__open(t, NULL, c, &err)) < 0) {
		int gone = padrone_session_fail_if_left(s);	/* its maps went with it */
		return gone < 0 ? gone : padrone_session_fail(s, PADRONE_SYSTEM, rc, "%s", err.msg);
	}
	return 0;
}

static int fail_cache(struct padrone_session *s, struct cc_cache *c, int rc)
{
	int gone = padrone_session_fail_if_left(s);	/* it exited or exec'd meanwhile */

	if (gone < 0)
		return gone;
	enum padrone_why why = rc == -ESRCH ? PADRONE_TARGET_EXITED :
		rc == -ETIMEDOUT ? PADRONE_TIMEOUT : rc == -ENOMEM ? PADRONE_SYSTEM :
		PADRONE_BAD_REQUEST;
	return padrone_session_fail(s, why, rc, "%s", cc_cache__errmsg(c));
}

/* Takes f's copy out, or (kept earlier: a thread was still in it) tries
 * again to release its state. A failure changes nothing: f stays as it
 * was, its consumers and rings too, for a later uninstrument or detach to
 * try again. Once the entry is back f is inactive; once released, padrone's
 * side of its rings goes (a padroned that instruments again and again must
 * not keep a ring per thread per time). */
static int uninstrument_one(struct padrone_session *s, struct instr_state *st, struct func *f)
{
	struct cc_cache *c;
	int rc;

	if ((rc = open_cache(s, &c)) < 0)
		return rc;
	rc = cc_cache__uninstrument(c, f->in, NULL);
	if (rc < 0)
		rc = fail_cache(s, c, rc);
	cc_cache__close(c);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < MAX_FUNCS; i++)
		if (atomic_load(&st->live[i]) == f->in)
			atomic_store(&st->live[i], NULL);
	if (f->active)
		f->t1_ns = util_now_ns();
	f->active = false;
	stop_workers(f);
	if (cc_instr__released(f->in))
		release_rings(f);
	return 0;
}

/* Uninstrumented but kept (a thread was still in the copy): still to be
 * released. */
static bool pending(const struct func *f)
{
	return !f->active && f->in && !cc_instr__released(f->in);
}

/* The kept copies' state released, where no thread can run them any more
 * (tried again at each instrument, uninstrument and detach). */
static void release_pending(struct padrone_session *s, struct instr_state *st)
{
	for (size_t i = 0; i < st->nf; i++)
		if (pending(&st->f[i]))
			uninstrument_one(s, st, &st->f[i]);
}

/* At detach: a copy not taken out, or kept, is left as it is with its
 * directory record (a later restore takes it out), and the threads keep
 * their gs_base, which it needs: put back, a thread running it would
 * write through %gs at address 0. */
static int release(struct padrone_session *s, void *data)
{
	struct instr_state *st = data;
	/* a process that exited or exec'd has no code left to put back */
	bool gone = padrone_session__target_state(s) != PADRONE_OK;
	int first = 0;

	for (size_t i = 0; i < st->nf; i++) {
		struct func *f = &st->f[i];
		int rc = f->in && !gone && !cc_instr__released(f->in) ? uninstrument_one(s, st, f) : 0;
		if (rc < 0 && !first)
			first = rc;
		if (f->in && !gone && !cc_instr__released(f->in))
			cc_instr__leave(f->in);
		free_func(f);
	}
	padrone_session_set_instr(s, NULL);
	sim_stage__free(st->stage);
	csim__free(st->sim);
	free(st);
	return first;
}

void padrone_instr_thread_new(void *data, pid_t tid)
{
	struct instr_state *st = data;

	for (size_t i = 0; i < MAX_FUNCS; i++) {
		struct cc_instr *in = atomic_load(&st->live[i]);
		if (in) {
			cc_instr__thread_new(in, tid);
			return;	/* one gs_base per thread: its row serves every copy */
		}
	}
}

void padrone_instr_thread_exit(void *data, pid_t tid)
{
	struct instr_state *st = data;

	for (size_t i = 0; i < MAX_FUNCS; i++) {
		struct cc_instr *in = atomic_load(&st->live[i]);
		if (in)
			cc_instr__thread_exit(in, tid);
	}
}

/* A forked child: its gs_base to the sink row (every copy's sink), off
 * the rings of the thread that forked it. */
void padrone_instr_fork(void *data, pid_t tid)
{
	struct instr_state *st = data;

	for (size_t i = 0; i < MAX_FUNCS; i++) {
		struct cc_instr *in = atomic_load(&st->live[i]);
		if (in) {
			cc_instr__fork_child(in, tid);
			return;
		}
	}
}

static int get_state(struct padrone_session *s, struct instr_state **out)
{
	struct instr_state *st = padrone_session_ext(s, "instr");
	int rc;

	if (st) {
		*out = st;
		return 0;
	}
	if (!(st = calloc(1, sizeof *st)))
		return padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	csim_config_host(&st->cfg);	/* a fallback geometry when the host's makes no sense */
	st->cfg.cachegrind = true;
	for (int lv = 0; lv < CSIM_NLEVELS; lv++)
		csim_geom_cachegrind_tweak(&st->cfg.level[lv]);
	if ((rc = csim__new(&st->cfg, &st->sim)) < 0 ||
	    (rc = sim_stage__new(&st->sim, &st->stage)) < 0) {
		csim__free(st->sim);
		free(st);
		return padrone_session_fail(s, PADRONE_SYSTEM, rc, "cannot set up the cache "
					    "simulator");
	}
	/* this fails (and says why) when the process exited or exec'd */
	if ((rc = padrone_session_set_ext(s, "instr", st, release)) < 0) {
		sim_stage__free(st->stage);
		csim__free(st->sim);
		free(st);
		return rc;
	}
	padrone_session_set_instr(s, st);
	*out = st;
	return 0;
}

static void geometry(char *buf, size_t size, const struct csim_geom *g)
{
	snprintf(buf, size, "%llu,%u,%u", (unsigned long long)g->size, g->assoc, g->line);
}

static bool same_geometry(const struct csim_config *a, const struct csim_config *b)
{
	for (int lv = 0; lv < CSIM_NLEVELS; lv++)
		if (a->level[lv].size != b->level[lv].size ||
		    a->level[lv].assoc != b->level[lv].assoc || a->level[lv].line != b->level[lv].line)
			return false;
	return true;
}

/* The geometry o asks for, on top of cfg: 0, or a failure naming the
 * option. */
static int given_geometry(struct padrone_session *s, const struct padrone_instrument_opts *o,
			  struct csim_config *cfg)
{
	const struct { const char *text, *option; enum csim_level lv; } given[] = {
		{ o->i1, "--I1", CSIM_I1 }, { o->d1, "--D1", CSIM_D1 }, { o->ll, "--LL", CSIM_LL },
	};
	char why[160];

	for (size_t i = 0; i < sizeof given / sizeof given[0]; i++)
		if (given[i].text &&
		    csim_geom_parse(given[i].text, &cfg->level[given[i].lv], why, sizeof why) < 0)
			return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "%s: %s",
						    given[i].option, why);
	if (csim_config_check(cfg, why, sizeof why) < 0)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "%s", why);
	return 0;
}

/* The simulator gets o's geometry before the first function; after it,
 * the results so far fix the geometry. */
static int set_geometry(struct padrone_session *s, struct instr_state *st,
			const struct padrone_instrument_opts *o)
{
	struct csim_config want = st->cfg;
	struct csim *sim;
	char was[3][48];
	int rc;

	if (!o->i1 && !o->d1 && !o->ll)
		return 0;
	if ((rc = given_geometry(s, o, &want)) < 0)
		return rc;
	if (same_geometry(&want, &st->cfg))
		return 0;
	if (st->nf) {
		geometry(was[0], sizeof was[0], &st->cfg.level[CSIM_I1]);
		geometry(was[1], sizeof was[1], &st->cfg.level[CSIM_D1]);
		geometry(was[2], sizeof was[2], &st->cfg.level[CSIM_LL]);
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "the results so far "
					    "are for I1 %s, D1 %s, LL %s; detach to change the "
					    "geometry", was[0], was[1], was[2]);
	}
	if ((rc = csim__new(&want, &sim)) < 0)
		return padrone_session_fail(s, PADRONE_SYSTEM, rc, "cannot set up the cache "
					    "simulator");
	sim_stage__lock(st->stage);	/* (no feed yet: nothing simulates) */
	csim__free(st->sim);
	st->sim = sim;
	sim_stage__unlock(st->stage);
	st->cfg = want;
	return 0;
}

/* Named in top -H and /proc/PID/task/TID/comm, apart from padroned's
 * other threads (a ring's thread changes: the name does not say which). */
static void name_consumer(const struct worker *w)
{
	pthread_setname_np(w->th, "padrone-ring");
}

static int start_workers(struct padrone_session *s, struct instr_state *st, struct func *f)
{
	size_t n = cc_instr__thread_count(f->in), first = f->nw;
	/* after the workers of earlier times, which keep their counts */
	struct worker *ws = realloc(f->w, (first + n) * sizeof *ws);

	if (!ws)
		return padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	memset(ws + first, 0, n * sizeof *ws);
	f->w = ws;
	f->nw = first + n;
	for (size_t i = 0; i < n; i++) {
		struct worker *w = &f->w[first + i];
		struct cab_ring *r = cc_instr__ring(f->in, i, &w->tid);
		w->ring = r;
		w->st = st;
		w->prev_ns = util_now_ns();
		bool recover = st->analyses != PADRONE_ANALYZE_RECORD;
		bool simulate = st->analyses == PADRONE_ANALYZE_CACHE;
		rep_ref_sink to = simulate ? sim_feed__refs : st->analyses == PADRONE_ANALYZE_REFS ?
			discard : NULL;	/* blocks: counted, no address recovered */
		if ((simulate && sim_stage__open_feed(st->stage, &w->feed) < 0) ||
		    (recover && rep_recover__new(cc_instr__table(f->in), to, w->feed, &w->rec) < 0) ||
		    cab_consumer__open(r, &w->cons) < 0 ||
		    pthread_create(&w->th, NULL, consume, w) != 0)
			return padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "cannot start the "
						    "consumer of thread %d's ring", w->tid);
		w->started = true;
		name_consumer(w);
	}
	return 0;
}

/* The results kept of the function at entry, instrumented earlier in this
 * attachment and uninstrumented since (its rings released); NULL if none. */
static struct func *kept_results(struct instr_state *st, uint64_t entry)
{
	for (size_t i = 0; i < st->nf; i++)
		if (!st->f[i].active && !st->f[i].in && st->f[i].entry == entry)
			return &st->f[i];
	return NULL;
}

/* How long f has been instrumented, every time in this attachment. */
static double func_seconds(const struct func *f)
{
	return (double)(f->before_ns + (f->active ? util_now_ns() : f->t1_ns) - f->t0_ns) / 1e9;
}

/* The file the function's code is mapped from, and where its offset 0 is:
 * for the cachegrind.out "fl=" and its line numbers (the instructions'
 * addresses in the file). Anonymous code keeps "???" and base 0. */
static void find_module(pid_t pid, struct func *f)
{
	struct attach_maps *m;

	snprintf(f->module, sizeof f->module, "???");
	if (attach_maps__read(pid, &m) < 0)
		return;
	const struct attach_map *at = attach_maps__find(m, f->entry);
	const struct attach_map *first = at && at->path[0] == '/' ?
		attach_maps__first_of(m, at->path) : NULL;
	if (first) {
		snprintf(f->module, sizeof f->module, "%s", at->path);
		f->module_base = first->start - first->offset;
	}
	attach_maps__free(m);
}

static int loop_of(const struct cfg_function *cf, const struct cfg_loop *l, struct loop_span *out)
{
	if (!(out->ranges = calloc(l->block_count ? l->block_count : 1, sizeof *out->ranges)))
		return -ENOMEM;
	for (uint32_t i = 0; i < l->block_count; i++) {
		const struct cfg_block *b = cfg_function__block(cf, l->blocks[i]);
		out->ranges[out->nranges++] = (struct cfg_range){ b->start, b->end };
	}
	out->info = (struct padrone_iloop){
		.header = cfg_function__block(cf, l->header)->start, .parent = l->parent,
		.depth = l->depth, .blocks = l->block_count, .irreducible = l->irreducible,
	};
	return 0;
}

/* The function's loop forest, read before the copy goes in (its entry is
 * patched then). Without a CFG (unreadable, out of memory) report lists no
 * loops: the events per PC do not depend on it. */
static void find_loops(struct attach_target *t, uint64_t entry, struct func *f)
{
	struct cfg_build_opts bo = { .sz = sizeof bo };
	struct cfg_function *cf;
	struct cfg_reader *r;

	if (cfg_reader__open_live(t, NULL, &r) < 0)
		return;
	if (cfg_function__build(r, entry, &bo, &cf) == 0) {
		size_t n = cfg_function__loop_count(cf);
		f->loops = calloc(n ? n : 1, sizeof *f->loops);
		for (size_t i = 0; f->loops && i < n; i++)
			if (loop_of(cf, cfg_function__loop(cf, i), &f->loops[f->nloops++]) < 0)
				break;
		cfg_function__free(cf);
	}
	cfg_reader__free(r);
}

int padrone_session__instrument(struct padrone_session *s, const char *function,
				const struct padrone_instrument_opts *opts)
{
	struct padrone_instrument_opts o = { .sz = sizeof o };
	struct instr_state *st = NULL;
	struct cc_cache *c;
	struct cc_func fn;
	int rc;

	if (!UTIL_OPTS_COPY(&o, opts))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, UTIL_OPTS_UNKNOWN);
	if (!padrone_session_target(s))
		return padrone_session_fail(s, PADRONE_NOT_ATTACHED, -ENOENT,
					    "not attached to a process");
	if ((rc = padrone_session_find_function(s, function, &fn)) < 0 || (rc = get_state(s, &st)) < 0)
		return rc;
	release_pending(s, st);	/* a kept copy's gs_base would refuse it */
	struct cc_instr *share = NULL;	/* the threads' state areas, if any yet */
	for (size_t i = 0; i < st->nf; i++) {
		if (pending(&st->f[i]) && st->f[i].entry == fn.addr)
			return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EBUSY, "%s was "
						    "uninstrumented, but a thread is still in its "
						    "copy; try again once it has left",
						    st->f[i].name);
		if (!st->f[i].active)
			continue;
		if (st->f[i].entry == fn.addr)
			return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EEXIST, "%s is "
						    "instrumented; uninstrument it first",
						    st->f[i].name);
		share = share ? share : st->f[i].in;
	}
	/* The same function again adds to its results (report would count
	 * its PCs' events once per entry), in a slot of its own no more. */
	struct func *f = kept_results(st, fn.addr);
	bool again = f != NULL;
	if (!again && st->nf == MAX_FUNCS)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOSPC, "%d functions were "
					    "instrumented in this attachment; detach first",
					    MAX_FUNCS);
	if ((rc = set_geometry(s, st, &o)) < 0)
		return rc;
	if (st->nf && st->sampling != o.sampling)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "the results so far "
					    "are in %s mode; detach to change it",
					    st->sampling ? "sample" : "exhaustive");
	if (o.analyses & ~(PADRONE_ANALYZE_BLOCKS | PADRONE_ANALYZE_RECORD |
			   PADRONE_ANALYZE_REFS | PADRONE_ANALYZE_CACHE))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "unknown analyses "
					    "0x%x", o.analyses);
	if (st->nf && st->analyses != analysis_level(o.analyses))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "the results so far "
					    "come from other analyses; detach to change them");
	if (!again) {
		f = &st->f[st->nf];
		memset(f, 0, sizeof *f);
		snprintf(f->name, sizeof f->name, "%s", function);
		find_loops(padrone_session_target(s), fn.addr, f);
	}
	fn.name = f->name;
	size_t slot = (size_t)(f - st->f);
	if ((rc = open_cache(s, &c)) < 0) {
		if (!again)
			free_func(f);
		return rc;
	}
	unsigned level = analysis_level(o.analyses);
	struct cc_instr_opts io = { .sz = sizeof io, .sampling = o.sampling,
				    .blocks_only = level == PADRONE_ANALYZE_BLOCKS,
				    .nchunks = RING_CHUNKS,
				    .publish = &st->live[slot], .share = share };
	rc = cc_cache__instrument(c, &fn, &io, &f->in);
	if (rc < 0) {
		rc = fail_cache(s, c, rc);
		cc_cache__close(c);
		if (!again)
			free_func(f);
		return rc;
	}
	cc_cache__close(c);
	st->sampling = o.sampling;
	st->analyses = level;
	if (again)
		f->before_ns += f->t1_ns - f->t0_ns;
	else
		st->nf++;
	f->active = true;
	f->t0_ns = util_now_ns();
	cc_instr__function(f->in, &f->entry, &f->size);
	find_module(padrone_session__pid(s), f);
	if ((rc = start_workers(s, st, f)) < 0) {
		uninstrument_one(s, st, f);
		return rc;
	}
	return 0;
}

int padrone_session__uninstrument(struct padrone_session *s, const char *function)
{
	struct instr_state *st = padrone_session_target(s) ? padrone_session_ext(s, "instr") :
		NULL;
	size_t done = 0;
	int first = 0;

	if (!padrone_session_target(s))
		return padrone_session_fail(s, PADRONE_NOT_ATTACHED, -ENOENT,
					    "not attached to a process");
	for (size_t i = 0; st && i < st->nf; i++) {
		struct func *f = &st->f[i];
		/* an active one, or one kept earlier, released now if it can be */
		if (!(f->active || pending(f)) || (function && strcmp(function, f->name) != 0))
			continue;
		int rc = uninstrument_one(s, st, f);
		if (rc < 0 && !first)
			first = rc;
		done++;
	}
	if (first < 0)
		return first;
	if (!done)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOENT, function ?
					    "%s is not instrumented" : "nothing is instrumented%s",
					    function ? function : "");
	return 0;
}

static void events_of(const struct csim_counts *c, uint64_t ev[PADRONE_NEVENTS])
{
	ev[0] = c->refs[CSIM_INSTR];
	ev[1] = c->miss[CSIM_I1][CSIM_INSTR];
	ev[2] = c->miss[CSIM_LL][CSIM_INSTR];
	ev[3] = c->refs[CSIM_READ];
	ev[4] = c->miss[CSIM_D1][CSIM_READ];
	ev[5] = c->miss[CSIM_LL][CSIM_READ];
	ev[6] = c->refs[CSIM_WRITE];
	ev[7] = c->miss[CSIM_D1][CSIM_WRITE];
	ev[8] = c->miss[CSIM_LL][CSIM_WRITE];
}

static bool in_loop(const struct loop_span *l, uint64_t pc)
{
	for (size_t i = 0; i < l->nranges; i++)
		if (pc >= l->ranges[i].start && pc < l->ranges[i].end)
			return true;
	return false;
}

/* Each loop's events: its PCs', nested loops' included. */
static int add_loops(struct padrone_ifunction *pf, const struct func *f)
{
	if (!f->nloops)
		return 0;
	if (!(pf->loops = calloc(f->nloops, sizeof *pf->loops)))
		return -ENOMEM;
	for (size_t i = 0; i < f->nloops; i++) {
		struct padrone_iloop *pl = &pf->loops[pf->nloops++];
		*pl = f->loops[i].info;
		for (size_t k = 0; k < pf->npcs; k++)
			if (in_loop(&f->loops[i], pf->pcs[k].pc))
				for (int e = 0; e < PADRONE_NEVENTS; e++)
					pl->ev[e] += pf->pcs[k].ev[e];
	}
	return 0;
}

/* Threads: the consumers' counts (live ones read now). */
static int add_threads(struct padrone_ireport *r, const struct func *f)
{
	for (size_t i = 0; i < f->nw; i++) {
		const struct worker *w = &f->w[i];
		struct padrone_ithread *t = NULL;
		for (size_t k = 0; k < r->nthreads && !t; k++)
			if (r->threads[k].tid == w->tid)
				t = &r->threads[k];
		if (!t) {
			struct padrone_ithread *nt = realloc(r->threads,
							     (r->nthreads + 1) * sizeof *nt);
			if (!nt)
				return -ENOMEM;
			r->threads = nt;
			t = &nt[r->nthreads++];
			memset(t, 0, sizeof *t);
			t->tid = w->tid;
		}
		uint64_t units = w->units, refs = w->refs, lost = w->lost, gaps = w->gaps;
		if (w->started) {	/* running: what its consumer published so far */
			struct cab_stats cs;
			cab_ring__stats(w->ring, &cs);
			units = atomic_load_explicit(&w->live_units, memory_order_relaxed);
			refs = atomic_load_explicit(&w->live_refs, memory_order_relaxed);
			gaps = atomic_load_explicit(&w->live_gaps, memory_order_relaxed);
			lost = cs.records_dropped +
				atomic_load_explicit(&w->live_skipped, memory_order_relaxed);
		}
		t->units += units;
		t->refs += refs;
		t->lost_units += lost;
		r->lost_units += lost;
		r->gaps += gaps;
	}
	return 0;
}

int padrone_session__instr_report(struct padrone_session *s, struct padrone_ireport **out)
{
	struct instr_state *st = padrone_session_target(s) ? padrone_session_ext(s, "instr") :
		NULL;
	struct padrone_ireport *r;
	size_t nrows = 0;

	*out = NULL;
	if (!st || !st->nf)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOENT, "nothing was "
					    "instrumented in this attachment");
	if (!(r = calloc(1, sizeof *r)) || !(r->functions = calloc(st->nf, sizeof *r->functions)))
		goto oom;
	r->pid = padrone_session__pid(s);
	r->sampling = st->sampling;
	geometry(r->i1, sizeof r->i1, &st->cfg.level[CSIM_I1]);
	geometry(r->d1, sizeof r->d1, &st->cfg.level[CSIM_D1]);
	geometry(r->ll, sizeof r->ll, &st->cfg.level[CSIM_LL]);
	sim_stage__lock(st->stage);
	struct csim_pc_stats *rows = csim_result__sorted(csim__result(st->sim), CSIM_BY_PC, &nrows);
	sim_stage__unlock(st->stage);
	if (!rows)
		goto oom;
	for (size_t i = 0; i < st->nf; i++) {
		const struct func *f = &st->f[i];
		struct padrone_ifunction *pf = &r->functions[r->nfunctions++];
		snprintf(pf->name, sizeof pf->name, "%s", f->name);
		pf->entry = f->entry;
		pf->active = f->active;
		snprintf(pf->module, sizeof pf->module, "%s", f->module);
		pf->module_base = f->module_base;
		r->seconds += func_seconds(f);
		/* this time's, for info's "since" */
		pf->seconds = (double)((f->active ? util_now_ns() : f->t1_ns) - f->t0_ns) / 1e9;
		uint64_t copy_size;
		if (f->in)	/* released once uninstrumented */
			cc_instr__copy(f->in, &pf->copy, &copy_size);
		if (!(pf->pcs = calloc(nrows + 1, sizeof *pf->pcs)))
			goto oom_rows;
		for (size_t k = 0; k < nrows; k++) {
			if (rows[k].pc < f->entry || rows[k].pc >= f->entry + f->size)
				continue;
			struct padrone_pc_events *pe = &pf->pcs[pf->npcs++];
			pe->pc = rows[k].pc;
			events_of(&rows[k].c, pe->ev);
			for (int e = 0; e < PADRONE_NEVENTS; e++)
				pf->ev[e] += pe->ev[e];
		}
		if (add_loops(pf, f) < 0 || add_threads(r, f) < 0)
			goto oom_rows;
	}
	free(rows);
	*out = r;
	return 0;
oom_rows:
	free(rows);
oom:
	padrone_ireport__free(r);
	return padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
}

void padrone_ireport__free(struct padrone_ireport *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nfunctions; i++) {
		free(r->functions[i].pcs);
		free(r->functions[i].loops);
	}
	free(r->functions);
	free(r->threads);
	free(r);
}

/* ------------------------------------------------------------------ stats */

/* The consumer's CPU time: its clock while it runs, what it read last
 * once joined. */
static double worker_cpu_s(const struct worker *w)
{
	clockid_t clock;
	uint64_t ns = atomic_load(&w->cpu_ns);

	if (w->started && pthread_getcpuclockid(w->th, &clock) == 0) {
		uint64_t now = thread_cpu_ns(clock);
		ns = now ? now : ns;
	}
	return (double)ns / 1e9;
}

static void worker_stats(const struct func *f, size_t i, struct padrone_istat_thread *t)
{
	struct worker *w = &f->w[i];
	struct cab_ring *ring = w->ring;
	uint64_t now = util_now_ns();

	t->tid = w->tid;
	snprintf(t->function, sizeof t->function, "%s", f->name);
	t->active = w->started;
	t->units = w->units;
	t->refs = w->refs;
	t->gaps = w->gaps;
	t->lost_units = w->lost;
	if (w->started) {
		struct cab_stats cs;
		int inuse = cab_ring__chunks_in_use(ring);
		cab_ring__stats(ring, &cs);
		t->units = atomic_load_explicit(&w->live_units, memory_order_relaxed);
		t->refs = atomic_load_explicit(&w->live_refs, memory_order_relaxed);
		t->gaps = atomic_load_explicit(&w->live_gaps, memory_order_relaxed);
		t->lost_units = cs.records_dropped +
			atomic_load_explicit(&w->live_skipped, memory_order_relaxed);
		t->ring_fill = inuse < 0 ? -1 : 100.0 * inuse / cab_ring__nchunks(ring);
		t->producer_waits = cs.producer_waits;
	}
	double dt = (double)(now - w->prev_ns) / 1e9;
	if (dt > 0) {
		t->units_per_s = (double)(t->units - w->prev_units) / dt;
		t->refs_per_s = (double)(t->refs - w->prev_refs) / dt;
	}
	t->seconds = dt;
	t->cpu_s = worker_cpu_s(w);
	w->prev_units = t->units;
	w->prev_refs = t->refs;
	w->prev_ns = now;
}

int padrone_session__instr_stats(struct padrone_session *s, struct padrone_istats **out)
{
	struct instr_state *st = padrone_session_target(s) ? padrone_session_ext(s, "instr") :
		NULL;
	struct padrone_istats *r;
	size_t n = 0;

	*out = NULL;
	if (!st || !st->nf)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOENT, "nothing was "
					    "instrumented in this attachment");
	for (size_t i = 0; i < st->nf; i++)
		n += st->f[i].nw;
	if (!(r = calloc(1, sizeof *r)) || !(r->threads = calloc(n + 1, sizeof *r->threads))) {
		free(r);
		return padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	}
	r->pid = padrone_session__pid(s);
	r->sampling = st->sampling;
	for (size_t i = 0; i < st->nf; i++) {
		const struct func *f = &st->f[i];
		r->seconds += func_seconds(f);
		for (size_t k = 0; k < f->nw; k++) {
			struct padrone_istat_thread *t = &r->threads[r->nthreads++];
			worker_stats(f, k, t);
			r->units += t->units;
			r->refs += t->refs;
			r->lost_units += t->lost_units;
			r->gaps += t->gaps;
			r->cpu_s += t->cpu_s;
		}
	}
	*out = r;
	return 0;
}

void padrone_istats__free(struct padrone_istats *r)
{
	if (!r)
		return;
	free(r->threads);
	free(r);
}
