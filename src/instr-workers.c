/* instr-workers.c: the consumers of an instrumentation (issue 10; the
 * design is told in src/instr.c): a thread per thread's ring, which
 * recovers the references of the units (pipeline/rep.h) and hands them to
 * the simulator (src/instr-sim.c), started, stopped and released. */
#include "src/instr-nice.h"
#include "src/instr-state.h"
#include "src/instr-sim.h"
#include "codecache/codecache.h"
#include "pipeline/cab.h"
#include "pipeline/rep.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The refs analysis: references recovered (the recoverer counts them),
 * nothing simulated. */
static void discard(void *arg, const struct rep_ref *refs, size_t n)
{
	(void)arg;
	(void)refs;
	(void)n;
}

/* A rep-prefixed string instruction under the refs analysis: its
 * iterations, which no block count tells, as its references recovered
 * say them (Ir, Dr, Dw), and how many of each were fed. */
struct counted_pc {
	uint64_t pc;
	uint64_t n[3], fed[3];
};

static struct counted_pc *counted_at(const struct worker *w, uint64_t pc)
{
	for (size_t k = 0; k < w->nreps; k++)
		if (w->reps[k].pc == pc)
			return &w->reps[k];
	return NULL;
}

/* Cachegrind counts a modify as a read (Dr) alone, as the simulator does. */
static void count_ref(uint64_t n[3], uint8_t type)
{
	n[type == REP_REF_INSTR ? 0 : type == REP_REF_WRITE ? 2 : 1]++;
}

/* The refs analysis' sink where the copy has rep-prefixed string
 * instructions: their references counted (the few PCs are looked up
 * linearly); every other instruction's are the blocks'. */
static void count_reps(void *arg, const struct rep_ref *refs, size_t n)
{
	struct worker *w = arg;

	for (size_t i = 0; i < n; i++) {
		if (refs[i].type == REP_REF_RUN) {	/* a loop's, of no rep prefix */
			i += rep_run_entries(refs[i].size, refs[i].addr) - 1;
			continue;
		}
		struct counted_pc *c = counted_at(w, refs[i].pc);
		if (c)
			count_ref(c->n, refs[i].type);
	}
}

/* The table's instructions with a counted reference (a rep prefix). */
static int find_reps(struct worker *w)
{
	for (size_t i = 0; i < rep_table__size(w->table); i++) {
		const struct rep_block *b = rep_table__nth(w->table, i);
		for (uint32_t k = 0; k < b->nrefs; k++) {
			if (b->refs[k].count == REP_NO_SLOT || counted_at(w, b->refs[k].pc))
				continue;
			struct counted_pc *more = realloc(w->reps, (w->nreps + 1) * sizeof *more);
			if (!more)
				return -ENOMEM;
			w->reps = more;
			w->reps[w->nreps++] = (struct counted_pc){ .pc = b->refs[k].pc };
		}
	}
	return 0;
}

uint64_t instr__thread_cpu_ns(clockid_t clock)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Units that reached the consumer but were not recovered: chunks sampling
 * skipped, units recovery could not read with the rest of their chunk (it
 * picks up again at the next chunk), and units a signal handler spoiled. */
static uint64_t unread_units(const struct cab_stats *cs, const struct rep_recover_stats *rs)
{
	return cs->records_skipped + rs->corrupt + rs->spoiled;
}

/* How often a consumer of the blocks or refs analysis hands its blocks'
 * counts over, and any consumer publishes its edges' (instr-cfg.c): each
 * span (up to a chunk) was a walk of the whole table and a wake-up of the
 * simulator, on the consumer's hot path; a report taken while it runs is
 * this much behind at most. */
#define FEED_EVERY_NS 10000000u

/* Counts for the simulator, in batches. */
struct counts_out {
	struct sim_feed *feed;
	struct rep_ref refs[256];
	size_t n;
};

static void put_count(struct counts_out *o, uint64_t pc, uint64_t n, uint8_t type)
{
	if (!n)
		return;
	o->refs[o->n++] = (struct rep_ref){ .pc = pc, .addr = n, .type = type };
	if (o->n == sizeof o->refs / sizeof o->refs[0]) {
		sim_feed__refs(o->feed, o->refs, o->n);
		o->n = 0;
	}
}

/* A block's instructions run n times more: Ir, and under the refs analysis
 * Dr and Dw of the references that run once per execution; those of a
 * rep-prefixed instruction come from count_reps. */
static void put_block(struct counts_out *o, const struct worker *w, const struct rep_block *b,
		      uint64_t n)
{
	if (!n)
		return;
	for (uint32_t k = 0; k < b->ninstrs; k++)
		if (!w->data_counts || !counted_at(w, b->instrs[k].pc))
			put_count(o, b->instrs[k].pc, n, REP_REF_FETCH_HITS);
	for (uint32_t k = 0; w->data_counts && k < b->nrefs; k++) {
		const struct rep_mref *m = &b->refs[k];
		if (m->count == REP_NO_SLOT)
			put_count(o, m->pc, n, m->type == REP_REF_WRITE ? REP_REF_WRITES :
				  REP_REF_READS);
	}
}

/* The blocks and refs analyses simulate nothing: each block's executions
 * since the last look go to the simulator as counts of its instructions
 * (REP_REF_FETCH_HITS) and, under refs, of their data references (READS,
 * WRITES, a modify counted as a read as Cachegrind does), which it adds to
 * their PCs' Ir, Dr and Dw (rep.h), so that report gives them per PC, loop
 * and function as Cachegrind would: every FEED_EVERY_NS, and at the end.
 * Nothing else goes into the feed, so its batch is empty here. */
static void feed_block_counts(struct worker *w)
{
	struct counts_out o = { .feed = w->feed };
	static const uint8_t types[3] = { REP_REF_FETCH_HITS, REP_REF_READS, REP_REF_WRITES };

	for (size_t i = 0; i < rep_table__size(w->table); i++) {
		const struct rep_block *b = rep_table__nth(w->table, i);
		uint64_t now = rep_recover__block_count(w->rec, b->id);
		put_block(&o, w, b, now - w->fed[i]);
		w->fed[i] = now;
	}
	for (size_t k = 0; k < w->nreps; k++) {
		struct counted_pc *c = &w->reps[k];
		for (int e = 0; e < 3; e++) {
			put_count(&o, c->pc, c->n[e] - c->fed[e], types[e]);
			c->fed[e] = c->n[e];
		}
	}
	if (o.n)
		sim_feed__refs(w->feed, o.refs, o.n);
	/* handed over now, in one batch when they fit in one (2048 PCs): a
	 * report taken meanwhile sees a block's instructions counted alike */
	sim_feed__flush(w->feed);
}

/* Sampling mode's windows begin at most this often: each ages every line
 * the simulated caches hold, and CAB's sampling leaves chunks out hundreds
 * of times a second (gaps closer together add up). */
#define WINDOW_EVERY_NS 20000000u

/* CAB's sampling left units out before this span: in the simulated caches
 * a new window, the units left out since the last its gap, those delivered
 * its window before (instr-sim.h, counted in units: the producer runs at
 * one speed whether they are kept or not). Not where time is switched off,
 * whose windows count seconds. */
static void sampling_gap(struct worker *w)
{
	struct cab_stats cs;
	uint64_t now = util_now_ns();

	if (!w->st->sampling || !w->feed || !w->rec || atomic_load(&w->st->switched) ||
	    now - w->window_ns < WINDOW_EVERY_NS)
		return;
	cab_consumer__stats(w->cons, &cs);
	uint64_t lost = cs.records_skipped + cs.records_dropped;
	rep_recover__flush(w->rec);	/* the window before, whole */
	sim_feed__window(w->feed, (double)(cs.records_delivered - w->window_delivered),
			 (double)(lost - w->window_lost));
	w->window_ns = now;
	w->window_delivered = cs.records_delivered;
	w->window_lost = lost;
}

/* Recover the span (unless only the units are counted), then publish the
 * counts (only this thread writes the recoverer's and the consumer's own
 * counters: stats reads these copies). */
static int consume_span(void *arg, const uint64_t *words, size_t nwords, unsigned flags)
{
	struct worker *w = arg;

	struct rep_recover_stats rs = { 0 };
	struct cab_stats cs;

	atomic_store_explicit(&w->drained, false, memory_order_relaxed);
	instr__follow_nice(&w->st->pipeline_nice, &w->nice);
	if (flags & CAB_SPAN_GAP)
		sampling_gap(w);
	int rc = w->rec ? rep_recover__cab_fn(w->rec, words, nwords, flags) : 0;
	uint64_t now_ns = util_now_ns();
	if (now_ns - w->fed_ns >= FEED_EVERY_NS) {
		w->fed_ns = now_ns;
		if (w->fed)
			feed_block_counts(w);
		instr__publish_edges(w);
	}

	cab_consumer__stats(w->cons, &cs);
	if (w->rec)
		rep_recover__stats(w->rec, &rs);
	else
		rs.units = cs.records_delivered;
	atomic_store_explicit(&w->live_units, rs.units, memory_order_relaxed);
	atomic_store_explicit(&w->live_refs, rs.refs + rs.instrs, memory_order_relaxed);
	atomic_store_explicit(&w->live_gaps, rs.gaps, memory_order_relaxed);
	atomic_store_explicit(&w->live_unread, unread_units(&cs, &rs), memory_order_relaxed);
	return rc;
}

/* Nothing ready. Switched off, what the producer wrote since (the chunks
 * a poll leaves until it is two ahead) is recovered, and everything handed
 * to the simulator, so that a window's references are simulated before
 * the next window begins (instr-duty.c, consumers_drained). */
static int consumer_idle(void *arg)
{
	struct worker *w = arg;
	struct cab_stats before, after;

	if (!atomic_load(&w->st->off) || atomic_load(&w->drained))
		return 0;
	cab_consumer__stats(w->cons, &before);
	int n = cab_consumer__drain(w->cons, consume_span, w);
	if (n < 0)
		return n;
	cab_consumer__stats(w->cons, &after);
	if (after.words_delivered != before.words_delivered)
		return 1;	/* looked at again before it naps */
	if (w->rec)
		rep_recover__flush(w->rec);
	if (w->feed)
		sim_feed__flush(w->feed);
	atomic_store(&w->drained, true);
	return 0;
}

/* Held up by the simulator: the producer waits for it, not drops. */
static void consumer_alive(void *arg)
{
	struct worker *w = arg;

	cab_consumer__beat(w->cons);
}

static void *consume(void *arg)
{
	struct worker *w = arg;

	/* the install makes the ring without its memory, which would cost the
	 * target's stop 0.8 ms a MiB: its consumer allocates it, all consumers
	 * at once, while its producer may already write (contents kept) */
	cab_ring__populate(w->ring);
	cab_consumer__run_idle(w->cons, consume_span, consumer_idle, w, &w->stop);
	if (w->rec)
		rep_recover__flush(w->rec);
	if (w->fed)
		feed_block_counts(w);
	instr__publish_edges(w);
	if (w->feed)
		sim_feed__flush(w->feed);
	atomic_store(&w->drained, true);	/* (its thread gone: nothing more comes) */
	atomic_store(&w->cpu_ns, instr__thread_cpu_ns(CLOCK_THREAD_CPUTIME_ID));
	return NULL;
}

/* The consumers end once their producer ended and they drained the ring
 * (bounded: a ring left mapped in a kept copy never ends; one left in the
 * process at detach is not waited for). */
void instr__stop_workers(struct func *f)
{
	for (size_t i = 0; i < f->nw; i++) {
		struct worker *w = &f->w[i];
		if (!w->started)
			continue;
		for (int k = 0; k < 500 && !f->left && !cab_consumer__eof(w->cons); k++)
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
		w->lost = cs.records_dropped + unread_units(&cs, &rs);
	}
}

/* Joined, its ring and consumer given back: only its counts are left. */
static bool ended(const struct worker *w)
{
	return !w->started && !w->ring && !w->cons && !w->rec && !w->feed;
}

static void add_counts(struct worker *into, const struct worker *w)
{
	into->units += w->units;
	into->refs += w->refs;
	into->lost += w->lost;
	into->gaps += w->gaps;
	into->cpu_ns += w->cpu_ns;
	into->prev_units += w->prev_units;	/* the rate since the last stats */
	into->prev_refs += w->prev_refs;
}

/* The ended workers of f's earlier times, one per thread: a function
 * instrumented again and again (by a service's padroned, a cycle a
 * minute) would otherwise keep a worker per thread per time, forever
 * (about 1.5 kB a time with redis's threads). report and stats sum a
 * thread's counts anyway. */
static void merge_ended(struct func *f)
{
	size_t k = 0;

	for (size_t i = 0; i < f->nw; i++) {
		struct worker *w = &f->w[i], *into = NULL;
		for (size_t j = 0; j < k && !into && ended(w); j++)
			if (ended(&f->w[j]) && f->w[j].tid == w->tid)
				into = &f->w[j];
		if (into)
			add_counts(into, w);
		else
			f->w[k++] = *w;	/* none runs: they can move */
	}
	f->nw = k;
}

/* The consumers, their recoverers and padrone's mappings of the rings,
 * once the workers ended: their counts are kept in the workers,
 * one per thread. */
void instr__release_rings(struct func *f)
{
	for (size_t i = 0; i < f->nw; i++) {
		instr__fold_edges(f, &f->w[i]);
		cab_consumer__close(f->w[i].cons);
		rep_recover__free(f->w[i].rec);
		sim_feed__close(f->w[i].feed);
		free(f->w[i].fed);
		free(f->w[i].reps);
		f->w[i].fed = NULL;
		f->w[i].reps = NULL;
		f->w[i].nreps = 0;
		f->w[i].table = NULL;
		f->w[i].feed = NULL;
		f->w[i].cons = NULL;
		f->w[i].rec = NULL;
		f->w[i].ring = NULL;
	}
	cc_instr__free(f->in);
	f->in = NULL;
	merge_ended(f);
}

/* Named in top -H and /proc/PID/task/TID/comm, apart from padroned's
 * other threads (a ring's thread changes: the name does not say which). */
static void name_consumer(const struct worker *w)
{
	pthread_setname_np(w->th, "padrone-ring");
}

int instr__start_workers(struct padrone_session *s, struct instr_state *st, struct func *f)
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
		w->nice = INSTR_NICE_UNSET;
		w->prev_ns = util_now_ns();
		bool recover = st->analyses != PADRONE_ANALYZE_RECORD;
		bool simulate = st->analyses == PADRONE_ANALYZE_CACHE;
		bool ir_from_blocks = recover && !simulate;
		if (ir_from_blocks) {
			w->table = cc_instr__table(f->in);
			w->fed = calloc(rep_table__size(w->table) + 1, sizeof *w->fed);
			w->data_counts = st->analyses == PADRONE_ANALYZE_REFS;
		}
		if (recover) {
			w->edge_ids = f->edge_ids;
			w->nedges = f->nedges;
			w->edge_n = calloc(f->nedges + 1, sizeof *w->edge_n);	/* and the entry */
		}
		bool ok = (!recover || w->edge_n) && (!ir_from_blocks || w->fed) &&
			  (!w->data_counts || find_reps(w) == 0) &&
			  (!recover || sim_stage__open_feed(st->stage, &w->feed) == 0);
		/* blocks: counted, no address recovered */
		rep_ref_sink to = simulate ? sim_feed__refs : !w->data_counts ? NULL :
			w->nreps ? count_reps : discard;
		ok = ok && (!recover || rep_recover__new(cc_instr__table(f->in), to,
							 simulate ? (void *)w->feed : w, &w->rec) == 0);
		if (ok && to) {	/* the stream as the simulator takes it (or would): */
			/* a loop's fetches that hit its I1 line as counts, */
			const struct csim_geom *i1 = &st->cfg.level[CSIM_I1];
			rep_recover__set_fetch_line(w->rec, i1->line);
			rep_recover__set_fetch_sets(w->rec, (uint32_t)csim_geom_sets(i1));
			rep_recover__set_runs(w->rec, true);	/* its references packed */
		}
		if (ok && simulate) {	/* the recoverer's batches, not copies */
			sim_feed__keep_batches(w->feed, w->rec);
			sim_feed__while_waiting(w->feed, consumer_alive, w);
		}
		if (!ok || cab_consumer__open(r, &w->cons) < 0 ||
		    pthread_create(&w->th, NULL, consume, w) != 0)
			return padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "cannot start the "
						    "consumer of thread %d's ring", w->tid);
		w->started = true;
		name_consumer(w);
	}
	return 0;
}
