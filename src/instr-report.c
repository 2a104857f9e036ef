/* instr-report.c: what an instrumentation found (issue 10; the design is
 * told in src/instr.c): the report (events per PC, loop and function, the
 * threads' counts) and the stats of the consumers while they run. */
#include "src/instr-state.h"
#include "src/instr-sim.h"
#include "cfg/cfg.h"
#include "codecache/codecache.h"
#include "pipeline/cab.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const event_names[PADRONE_NEVENTS] = {
	"Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw",
};

const char *padrone_event_name(unsigned i)
{
	return i < PADRONE_NEVENTS ? event_names[i] : NULL;
}

/* The attachment's instrumentation, for its report or stats; NULL, with the
 * session's error set, when nothing was instrumented in it. */
static struct instr_state *instrumented(struct padrone_session *s)
{
	struct instr_state *st = padrone_session_target(s) ? padrone_session_ext(s, "instr") :
		NULL;

	if (st && st->nf)
		return st;
	padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOENT,
			     "nothing was instrumented in this attachment");
	return NULL;
}

/* A consumer's counts: what it published so far while it runs, its totals
 * once joined. Lost units are those its ring dropped and those it found
 * unreadable. */
static void worker_counts(const struct worker *w, uint64_t *units, uint64_t *refs,
			  uint64_t *gaps, uint64_t *lost)
{
	struct cab_stats cs;

	*units = w->units;
	*refs = w->refs;
	*gaps = w->gaps;
	*lost = w->lost;
	if (!w->started)
		return;
	cab_ring__stats(w->ring, &cs);
	*units = atomic_load_explicit(&w->live_units, memory_order_relaxed);
	*refs = atomic_load_explicit(&w->live_refs, memory_order_relaxed);
	*gaps = atomic_load_explicit(&w->live_gaps, memory_order_relaxed);
	*lost = cs.records_dropped + atomic_load_explicit(&w->live_unread, memory_order_relaxed);
}

/* The events an analysis measures (padrone.h). */
static void measured_events(unsigned analysis, struct padrone_ireport *r)
{
	static const unsigned refs[] = { 0, 3, 6 };	/* Ir Dr Dw */

	r->nevents = 0;
	if (analysis == PADRONE_ANALYZE_CACHE)
		for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
			r->events[r->nevents++] = e;
	else if (analysis == PADRONE_ANALYZE_REFS)
		for (unsigned e = 0; e < 3; e++)
			r->events[r->nevents++] = refs[e];
	else if (analysis == PADRONE_ANALYZE_BLOCKS)
		r->events[r->nevents++] = 0;
}

/* How long f has been instrumented, every time in this attachment. */
static double func_seconds(const struct func *f)
{
	return (double)(f->before_ns + (f->active ? util_now_ns() : f->t1_ns) - f->t0_ns) / 1e9;
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
		uint64_t units, refs, gaps, lost;
		worker_counts(w, &units, &refs, &gaps, &lost);
		t->units += units;
		t->refs += refs;
		t->lost_units += lost;
		r->lost_units += lost;
		r->gaps += gaps;
	}
	return 0;
}

/* The fraction of the time each function (pf: one per st->f, or NULL) and
 * all were switched on, the windows, whether the results are sampled in
 * time at all (the duty thread changes these: under its lock). */
static void switched_time(struct instr_state *st, struct padrone_ifunction *pf, bool *sampled,
			  double *fraction, uint64_t *windows)
{
	double on = 0, all = 0;

	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->nf; i++) {
		double fr = instr__on_fraction(&st->f[i]), secs = func_seconds(&st->f[i]);
		if (pf)
			pf[i].fraction = fr;
		on += fr * secs;
		all += secs;
	}
	*sampled = st->switched;
	*windows = st->windows;
	*fraction = all > 0 ? on / all : 1.0;
	pthread_mutex_unlock(&st->lock);
}

/* How long the last window was on: until now, until it was switched off,
 * or until the last function was uninstrumented (st->lock held). */
static double last_window_s(const struct instr_state *st)
{
	uint64_t end = st->off ? st->off_at : util_now_ns(), last = 0;
	bool active = false;

	for (size_t i = 0; i < st->nf; i++) {
		active |= st->f[i].active;
		last = st->f[i].t1_ns > last ? st->f[i].t1_ns : last;
	}
	if (!active && last && last < end)
		end = last;
	return end > st->on_at ? (double)(end - st->on_at) / 1e9 : 0;
}

/* The whole time's data miss ratios, once sampled (in time, or by CAB's
 * sampling) with the cache simulated (padrone.h): the misses measured, and
 * those the hits on aged lines stand for. The window in progress: its
 * seconds on, or (units, sampling mode) none counted. */
static void estimate_ratios(struct instr_state *st, struct padrone_ireport *r)
{
	static const int lv[3] = { CSIM_I1, CSIM_D1, CSIM_LL };
	uint64_t ev[PADRONE_NEVENTS] = { 0 };

	r->est_d1 = r->est_ll = -1;
	if (!(r->sampled || r->sampling) || r->nevents != PADRONE_NEVENTS)
		return;
	pthread_mutex_lock(&st->lock);
	double on_s = r->sampled ? last_window_s(st) : 0;
	pthread_mutex_unlock(&st->lock);
	sim_stage__lock(st->stage);
	for (int i = 0; i < 3; i++) {
		r->aged_hits[i] = csim__window_aged_hits(st->sim, lv[i]);
		r->evicted[i] = csim__window_evicted(st->sim, lv[i], on_s);
	}
	sim_stage__unlock(st->stage);
	for (size_t i = 0; i < r->nfunctions; i++)
		for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
			ev[e] += r->functions[i].ev[e];
	double refs = (double)(ev[3] + ev[6]);	/* Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw */
	double d1m = (double)(ev[4] + ev[7]), i1m = (double)ev[1];
	if (refs <= 0)
		return;
	double data_share = d1m + i1m > 0 ? d1m / (d1m + i1m) : 1;
	r->est_d1 = fmin(1, (d1m + r->evicted[1]) / refs);
	r->est_ll = fmin(1, ((double)(ev[5] + ev[8]) + r->evicted[2] * data_share) / refs);
}

/* The process gone, no unit comes any more: what its rings held is
 * recovered and simulated before the report, which is then final (a
 * consumer sees its producer dead within 100 ms). */
#define SETTLE_GONE_MS 3000u

int padrone_session__instr_report(struct padrone_session *s, struct padrone_ireport **out)
{
	struct instr_state *st = instrumented(s);
	struct padrone_ireport *r;
	size_t nrows = 0;

	*out = NULL;
	if (!st)
		return -ENOENT;
	if (padrone_session__target_state(s) != PADRONE_OK)
		instr__settle(st, SETTLE_GONE_MS);
	if (!(r = calloc(1, sizeof *r)) || !(r->functions = calloc(st->nf, sizeof *r->functions)))
		goto oom;
	r->pid = padrone_session__pid(s);
	r->sampling = st->sampling;
	r->analysis = st->analyses;
	measured_events(st->analyses, r);
	r->asked = st->asked;
	instr__geometry(r->i1, sizeof r->i1, &st->cfg.level[CSIM_I1]);
	instr__geometry(r->d1, sizeof r->d1, &st->cfg.level[CSIM_D1]);
	instr__geometry(r->ll, sizeof r->ll, &st->cfg.level[CSIM_LL]);
	uint64_t held[CSIM_NLEVELS];
	sim_stage__lock(st->stage);
	struct csim_pc_stats *rows = csim_result__sorted(csim__result(st->sim), CSIM_BY_PC, &nrows);
	csim__lines_held(st->sim, held);
	sim_stage__unlock(st->stage);
	r->cold[0] = held[CSIM_I1];
	r->cold[1] = held[CSIM_D1];
	r->cold[2] = held[CSIM_LL];
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
		if (add_loops(pf, f) < 0 || instr__report_cfg(f, pf) < 0 || add_threads(r, f) < 0)
			goto oom_rows;
	}
	free(rows);
	switched_time(st, r->functions, &r->sampled, &r->fraction, &r->windows);
	estimate_ratios(st, r);
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
		free(r->functions[i].edges);
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
		uint64_t now = instr__thread_cpu_ns(clock);
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
	worker_counts(w, &t->units, &t->refs, &t->gaps, &t->lost_units);
	if (w->started) {
		struct cab_stats cs;
		int inuse = cab_ring__chunks_in_use(ring);
		cab_ring__stats(ring, &cs);
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

/* The overhead budget's choice and estimate (st->lock held). */
static void budget_stats(const struct instr_state *st, struct padrone_istats *r)
{
	const struct instr_budget *b = &st->budget;

	if (!b->pct)
		return;
	r->max_overhead = b->pct;
	r->budget_fraction = b->fraction;
	r->estimated = b->known;
	r->overhead = b->overhead;
	r->slowdown = b->slowdown;
	r->share_on = b->f_on;
	r->share_off = b->f_off;
	r->share_copy = b->q;
	r->recent_on = b->all_on;
	r->recent_off = b->all_off;
	r->samples_on = b->samples_on;
	r->samples_off = b->samples_off;
	snprintf(r->note, sizeof r->note, "%s", b->by_samples ? "" : b->note);
	r->by_calls = b->by_calls;
	r->by_samples = b->by_samples;
	r->overhead_calls = b->overhead_calls;
	r->overhead_samples = b->overhead_samples;
	r->overhead_off = b->overhead_off;
	r->spread = b->spread;
	r->ns_per_call = b->ns_per_call;
	r->ns_per_call_off = b->ns_per_call_base;
	r->recent_calls = b->all_calls;
	snprintf(r->calls_note, sizeof r->calls_note, "%s", b->by_calls ? "" : b->calls_note);
}

int padrone_session__instr_stats(struct padrone_session *s, struct padrone_istats **out)
{
	struct instr_state *st = instrumented(s);
	struct padrone_istats *r;
	size_t n = 0;

	*out = NULL;
	if (!st)
		return -ENOENT;
	for (size_t i = 0; i < st->nf; i++)
		n += st->f[i].nw;
	if (!(r = calloc(1, sizeof *r)) || !(r->threads = calloc(n + 1, sizeof *r->threads))) {
		free(r);
		return padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	}
	r->pid = padrone_session__pid(s);
	r->sampling = st->sampling;
	bool sampled;
	switched_time(st, NULL, &sampled, &r->on_fraction, &r->windows);
	pthread_mutex_lock(&st->lock);
	r->on = !st->off;
	r->duty_on_ms = st->duty_on_ms;
	r->duty_off_ms = st->duty_off_ms;
	budget_stats(st, r);
	pthread_mutex_unlock(&st->lock);
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
	r->sim_cpu_s = sim_stage__cpu_s(st->stage);
	r->cpu_s += r->sim_cpu_s;
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
