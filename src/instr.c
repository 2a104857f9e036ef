/* instr.c: the session's instrument and uninstrument commands (issue 10),
 * and the thread events that keep the copies right; the consumers are
 * src/instr-workers.c, the reports and stats src/instr-report.c.
 *
 * Instrumentation in a session: a function replaced by its
 * instrumented copy (codecache/instr.c), a consumer thread per thread's ring
 * recovering the references (pipeline/rep.h), and a simulator thread
 * simulating the host's caches as Cachegrind counts them
 * (pipeline/pipeline.h, src/instr-sim.c), one simulator for the whole
 * process (the threads' references interleave as the consumers hand them
 * over, as a single cache shared by the threads sees them).
 *
 * Several functions at once share the threads' state areas (a thread has
 * one gs_base; codecache/instr-area.c gives each function a section of it), so
 * the thread events go to any one active copy, which handles them for all.
 * Kept as the session extension "instr", released (uninstrumented)
 * at detach while the process is still attached: detaching puts the
 * threads' gs_base back, which a copy left in place could not survive. A
 * copy that could not be taken out (a stop that failed, a thread still in
 * it) is tried again at the next instrument, uninstrument or detach; at
 * detach it stays, with the threads' gs_base and its record, for a later
 * restore.
 */
#include "src/instr-nice.h"
#include "src/instr-state.h"
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

/* Chunks of 64 KiB per thread's ring: 4 MiB, a few milliseconds of a busy
 * thread's units, so that a consumer that a loaded machine schedules late
 * does not make the thread wait (16 chunks, 1 MiB: the thread waited about
 * every 0.5 ms). */
#define RING_CHUNKS 64

int padrone_analyses_parse(const char *text, unsigned *out, char *why, size_t size)
{
	static const struct { const char *name; unsigned bit; } known[] = {
		{ "blocks", PADRONE_ANALYZE_BLOCKS }, { "record", PADRONE_ANALYZE_RECORD },
		{ "refs", PADRONE_ANALYZE_REFS }, { "cache", PADRONE_ANALYZE_CACHE },
		{ "edges", PADRONE_ANALYZE_EDGES }, { "loops", PADRONE_ANALYZE_LOOPS },
	};
	unsigned bits = 0;

	for (const char *p = text; p && *p;) {
		size_t len = strcspn(p, ",");
		size_t i = 0;
		while (i < sizeof known / sizeof known[0] &&
		       !(strlen(known[i].name) == len && strncmp(p, known[i].name, len) == 0))
			i++;
		if (i == sizeof known / sizeof known[0]) {
			snprintf(why, size, "unknown analysis '%.*s' (blocks, record, refs, "
				 "cache, edges or loops)", (int)len, p);
			return -EINVAL;
		}
		bits |= known[i].bit;
		p += len + (p[len] == ',');
	}
	if (!bits) {
		snprintf(why, size, "no analysis named (blocks, record, refs, cache, edges or "
			 "loops)");
		return -EINVAL;
	}
	*out = bits;
	return 0;
}

/* The analyses that are levels, each including those below; edges and
 * loops are counted by all but record. */
#define LEVELS (PADRONE_ANALYZE_BLOCKS | PADRONE_ANALYZE_RECORD | PADRONE_ANALYZE_REFS | \
		PADRONE_ANALYZE_CACHE)
#define ANALYSES (LEVELS | PADRONE_ANALYZE_EDGES | PADRONE_ANALYZE_LOOPS)

/* The most a set of analyses asks for (edges or loops alone: blocks, the
 * least that counts them). */
static unsigned analysis_level(unsigned bits)
{
	unsigned top = PADRONE_ANALYZE_CACHE;

	if (!bits)
		return top;
	if (!(bits & LEVELS))
		return PADRONE_ANALYZE_BLOCKS;
	while (!(bits & top))
		top >>= 1;
	return top;
}

static void free_func(struct func *f)
{
	instr__stop_workers(f);
	instr__release_rings(f);
	free(f->w);
	instr__free_cfg(f);
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
	pthread_mutex_lock(&st->lock);	/* no switch of the copy while it goes */
	rc = cc_cache__uninstrument(c, f->in, NULL);
	if (rc < 0)
		rc = fail_cache(s, c, rc);
	cc_cache__close(c);
	if (rc == 0) {
		for (size_t i = 0; i < MAX_FUNCS; i++)
			if (atomic_load(&st->live[i]) == f->in)
				atomic_store(&st->live[i], NULL);
		if (f->active)
			f->t1_ns = util_now_ns();
		f->active = false;
		instr__switch_left(f);
	}
	pthread_mutex_unlock(&st->lock);
	if (rc < 0)
		return rc;
	instr__stop_workers(f);
	if (cc_instr__released(f->in))
		instr__release_rings(f);
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

	instr__duty_stop(st);
	for (size_t i = 0; i < st->nf; i++) {
		struct func *f = &st->f[i];
		int rc = f->in && !gone && !cc_instr__released(f->in) ? uninstrument_one(s, st, f) : 0;
		if (rc < 0 && !first)
			first = rc;
		if (f->in && !gone && !cc_instr__released(f->in)) {
			cc_instr__leave(f->in);
			f->left = true;
		}
		free_func(f);
	}
	padrone_session_set_instr(s, NULL);
	sim_stage__free(st->stage);
	csim__free(st->sim);
	instr__duty_destroy(st);
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
	instr__duty_init(st);
	st->pipeline_nice = INSTR_NICE_UNSET;
	csim_config_host(&st->cfg);	/* a fallback geometry when the host's makes no sense */
	st->cfg.cachegrind = true;
	for (int lv = 0; lv < CSIM_NLEVELS; lv++)
		csim_geom_cachegrind_tweak(&st->cfg.level[lv]);
	if ((rc = csim__new(&st->cfg, &st->sim)) < 0 ||
	    (rc = sim_stage__new(&st->sim, &st->pipeline_nice, &st->stage)) < 0) {
		csim__free(st->sim);
		instr__duty_destroy(st);
		free(st);
		return padrone_session_fail(s, PADRONE_SYSTEM, rc, "cannot set up the cache "
					    "simulator");
	}
	/* this fails (and says why) when the process exited or exec'd */
	if ((rc = padrone_session_set_ext(s, "instr", st, release)) < 0) {
		sim_stage__free(st->stage);
		csim__free(st->sim);
		instr__duty_destroy(st);
		free(st);
		return rc;
	}
	padrone_session_set_instr(s, st);
	*out = st;
	return 0;
}

void instr__geometry(char *buf, size_t size, const struct csim_geom *g)
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
		instr__geometry(was[0], sizeof was[0], &st->cfg.level[CSIM_I1]);
		instr__geometry(was[1], sizeof was[1], &st->cfg.level[CSIM_D1]);
		instr__geometry(was[2], sizeof was[2], &st->cfg.level[CSIM_LL]);
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

/* The results kept of the function at entry, instrumented earlier in this
 * attachment and uninstrumented since (its rings released); NULL if none. */
static struct func *kept_results(struct instr_state *st, uint64_t entry)
{
	for (size_t i = 0; i < st->nf; i++)
		if (!st->f[i].active && !st->f[i].in && st->f[i].entry == entry)
			return &st->f[i];
	return NULL;
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
	if ((rc = padrone_session_find_patchable(s, function, &fn)) < 0 || (rc = get_state(s, &st)) < 0)
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
	if (o.analyses & ~ANALYSES)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "unknown analyses "
					    "0x%x", o.analyses);
	if (st->nf && st->analyses != analysis_level(o.analyses))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "the results so far "
					    "come from other analyses; detach to change them");
	if (!again) {
		f = &st->f[st->nf];
		memset(f, 0, sizeof *f);
		snprintf(f->name, sizeof f->name, "%s", function);
		instr__read_cfg(padrone_session_target(s), fn.addr, f);
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
	st->asked |= o.analyses ? o.analyses : PADRONE_ANALYZE_CACHE;
	pthread_mutex_lock(&st->lock);	/* the duty thread sees it whole */
	if (again)
		f->before_ns += f->t1_ns - f->t0_ns;
	else
		st->nf++;
	f->active = true;
	f->t0_ns = util_now_ns();
	instr__switch_joined(st, f);
	pthread_mutex_unlock(&st->lock);
	cc_instr__function(f->in, &f->entry, &f->size);
	find_module(padrone_session__pid(s), f);
	if (instr__map_edges(f, cc_instr__table(f->in)) < 0)
		rc = padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	if (rc < 0 || (rc = instr__start_workers(s, st, f)) < 0) {
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
	bool left = false;	/* still instrumented */
	for (size_t i = 0; st && i < st->nf; i++)
		left |= st->f[i].active;
	if (st && !left) {	/* nothing left to switch: the next starts on, as the first did */
		instr__duty_stop(st);
		instr__switch_reset(st);
	}
	if (first < 0)
		return first;
	if (!done)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOENT, function ?
					    "%s is not instrumented" : "nothing is instrumented%s",
					    function ? function : "");
	return 0;
}
