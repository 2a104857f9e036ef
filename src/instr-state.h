/* instr-state.h: what the instrumentation's files in src/ share (src/
 * internal): the session's record of its instrumented functions (struct
 * instr_state, kept as the session extension "instr"), each function's
 * consumers (struct worker), and the calls between src/instr.c (the
 * instrument and uninstrument commands), src/instr-workers.c (the
 * consumers), src/instr-cfg.c (the function's loops and edges) and
 * src/instr-report.c (reports and stats).
 */
#ifndef PADRONE_SRC_INSTR_STATE_H
#define PADRONE_SRC_INSTR_STATE_H

#include "src/session.h"
#include "pipeline/pipeline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define MAX_FUNCS 16

struct attach_target;
struct instr_state;
struct prof_sampler;
struct rep_table;

struct budget_row {
	pid_t tid;			/* 0: no reading */
	uint64_t busy_ns, wait_ns, calls;	/* on or waiting for a CPU; in the stubs */
};

/* the places a sample is counted by (instr-budget.c's enum where) */
#define BUDGET_WHERE 4

/* --max-overhead (instr-budget.c): a duty cycle whose share on is chosen
 * from the threads' busy time per call and from samples of the target, on
 * windows against off ones. */
struct instr_budget {
	double pct;			/* the budget, % of the target's time; 0: none */
	struct prof_sampler *smp;	/* cpu-clock samples of the target, read each window */
	double fraction;		/* of each period, on now */
	uint64_t prev[BUDGET_WHERE];	/* the sampler's counts at the last window's
					 * end, by where they were (instr-budget.c) */
	/* samples in the functions (original, copy, stub, gate, detour) and in all,
	 * on and off, decayed each period: what the estimate stands on */
	double in_on, all_on, in_off, all_off;
	double unsampled_ns;		/* the stubs' waits (ns) read since the last
					 * window's end: samples the sampler missed */
	/* samples in the copies (asleep in them included), asleep in them,
	 * and in all, either window, and the time on and in all (ms) over the
	 * same, decayed */
	double in_copy, asleep, busy, on_ms, period_ms;
	double in_switch;		/* off, in the gates and detours (decayed) */
	uint64_t samples_on, samples_off;	/* every window's, undecayed */
	unsigned since_ms;		/* periods ended since the last estimate */
	bool known;			/* an estimate was made */
	bool blind;			/* the last look could not measure the copy's cost */
	double f_on, f_off, slowdown, overhead;	/* overhead: % of the target's time */
	double q;			/* the share of the target's time in the copies */
	double cost;			/* the overhead (a fraction) per unit of d */
	/* its mean over the last estimates, and how far their overheads
	 * strayed from what it predicted (overhead_spread: variance, and its
	 * root in %) */
	double cost_mean, spread_var, spread;
	unsigned estimates;		/* made since the estimate was unknown */
	int nice_before;		/* the pipeline's niceness, back after */
	char note[128];			/* why the samples tell nothing */
	/* the other measure: the threads' busy time per call (instr-budget.c) */
	pid_t pid;
	struct budget_row *rows;	/* per row of the area: its last reading */
	size_t nrows;
	bool uncounted;			/* a function's gate does not count calls */
	bool split;			/* this off window was read once the pipeline idled */
	uint64_t own_ns, own_at;	/* padrone's CPU time, and when, last looked at */
	bool base_new;			/* the base grew in this period */
	/* busy time (ns) and calls, decayed: in off windows once the
	 * pipeline idled (the base), and in all windows */
	double base_ns, base_calls, all_ns, all_calls;
	bool by_calls, by_samples;	/* the estimate rests on them */
	double overhead_calls, overhead_samples;	/* each one's, % */
	double overhead_off;		/* being switched off, % */
	double ns_per_call_base, ns_per_call;
	char calls_note[96];		/* why the calls tell nothing */
};

struct worker {
	struct instr_state *st;
	struct cab_ring *ring;		/* padrone's mapping; NULL once released */
	struct cab_consumer *cons;
	struct rep_recover *rec;
	struct sim_feed *feed;		/* cache: its references to the simulator;
					 * blocks, refs: its blocks' executions as Ir */
	const struct rep_table *table;	/* blocks, refs: the copy's, for the Ir */
	uint64_t *fed;			/* per block of the table: executions fed */
	uint64_t fed_ns;		/* when they (and the edges) were last handed over */
	bool data_counts;		/* refs: Dr and Dw too (instr-workers.c) */
	struct counted_pc *reps;	/* refs: the rep-prefixed string instructions,
					 * counted from the references recovered */
	size_t nreps;
	pthread_t th;
	bool started;
	pid_t tid;
	volatile int stop;
	uint64_t units, refs, lost, gaps;	/* final, once joined */
	/* published by the consumer after each span, for stats while it runs */
	/* live_unread: units delivered or skipped but not recovered (sampling's
	 * skipped chunks, units recovery could not read or found spoiled) */
	_Atomic uint64_t live_units, live_refs, live_gaps, live_unread;
	_Atomic uint64_t cpu_ns;		/* its CPU time, read as it ends */
	/* the function's edges (instr-cfg.c): this copy's unit ids, from and
	 * to, per edge (0 0: not counted), and their executions so far,
	 * published by the consumer; then (at nedges) the entry unit's id
	 * and executions */
	const uint32_t *edge_ids;
	_Atomic uint64_t *edge_n;
	size_t nedges;
	int nice;			/* its thread's, as it last set it (instr-nice.h) */
	uint64_t prev_units, prev_refs, prev_ns;	/* at the last stats */
	/* sampling mode: when the simulated caches' last window began, and
	 * the units delivered and lost until then (instr-workers.c) */
	uint64_t window_ns, window_delivered, window_lost;
	/* switched off, everything written to the ring so far was recovered
	 * and handed to the simulator (instr-workers.c, consumer_idle) */
	_Atomic bool drained;
};

/* A loop as report needs it: where its blocks are. */
struct loop_span {
	struct padrone_iloop info;	/* ev unused */
	size_t nranges;
	struct cfg_range *ranges;	/* its blocks, nested loops' included */
	/* indices into func.edges: from outside into the loop, back edges */
	uint32_t *enter, *back;
	uint32_t nenter, nback;
	bool holds_entry;		/* the function's entry block: calls enter it */
};

/* An edge of the function's CFG (instr-cfg.c). */
struct func_edge {
	uint64_t from, from_end;	/* the source block */
	uint64_t at;			/* its last instruction (from a copy's table) */
	uint64_t to;			/* the target block; 0: it leaves (a tail call) */
	uint8_t kind;			/* enum cfg_edge_kind */
	uint64_t done;			/* executions the ended consumers counted */
};

struct func {
	char name[96];
	struct loop_span *loops;
	size_t nloops;
	struct func_edge *edges;	/* the CFG's, in its order */
	size_t nedges;
	uint32_t *edge_ids;		/* the copy's unit ids per edge (worker.edge_ids) */
	uint64_t entry_runs_done;	/* the entry unit's executions, ended consumers' */
	uint64_t entry, size;
	char module[256];
	uint64_t module_base;
	struct cc_instr *in;
	struct worker *w;
	size_t nw;
	bool active;
	bool left;			/* left in the process at detach (not released) */
	uint64_t t0_ns, t1_ns;
	uint64_t before_ns;		/* instrumented earlier in this attachment */
	/* switched off (instr-duty.c): the time so, every time, and since
	 * when it is now (0: on) */
	uint64_t off_ns, off_since;
};

struct instr_state {
	struct csim_config cfg;
	struct csim *sim;
	struct sim_stage *stage;	/* simulates into sim */
	/* the pipeline threads' niceness asked for (instr-nice.h): lowest
	 * under a budget, the process's own after */
	_Atomic int pipeline_nice;
	bool sampling;
	unsigned analyses;		/* PADRONE_ANALYZE_*, one bit */
	unsigned asked;			/* every bit instrument was given */
	struct func f[MAX_FUNCS];
	size_t nf;
	/* read by the clone event (tracer thread): the active copies */
	struct cc_instr *_Atomic live[MAX_FUNCS];
	/* switching (instr-duty.c): the duty thread's switches against
	 * instrument and uninstrument, which hold it while they change a func */
	pthread_mutex_t lock;
	_Atomic bool off;		/* switched off now (the consumers read it
					 * without the lock) */
	uint64_t windows;		/* times switched on, the first instrument's too */
	uint64_t on_at, off_at;		/* the last window's start, the last switch off */
	/* ever switched off: results cover part of the time (read by the
	 * consumers too, without the lock) */
	_Atomic bool switched;
	unsigned duty_on_ms, duty_off_ms;	/* the duty cycle, 0 0: none */
	pthread_t duty;
	bool duty_running;
	pthread_cond_t duty_wake;	/* ends the duty thread's wait early */
	bool duty_stop;
	struct instr_budget budget;
};

/* instr.c: a cache's geometry as "size,assoc,line" (buf: its text). */
void instr__geometry(char *buf, size_t size, const struct csim_geom *g);

/* instr-duty.c */
void instr__duty_init(struct instr_state *st);
/* f was just instrumented (st->lock held): its first window, or off as
 * the others are. */
void instr__switch_joined(struct instr_state *st, struct func *f);
/* f is no longer instrumented (st->lock held): its time off closed. */
void instr__switch_left(struct func *f);
/* The duty thread ended (before uninstrumenting everything, at detach). */
void instr__duty_stop(struct instr_state *st);
/* Until every consumer has drained its ring (its producer ended: the
 * process gone) and the simulator has simulated all it was given, at most
 * most_ms. */
void instr__settle(struct instr_state *st, unsigned most_ms);
/* Switched on again, nothing being instrumented (st->lock not held): a
 * later instrument starts on, whatever the last window was. */
void instr__switch_reset(struct instr_state *st);
void instr__duty_destroy(struct instr_state *st);
/* The fraction of f's time instrumented that it was switched on. */
double instr__on_fraction(const struct func *f);

/* instr-budget.c (under st->lock, on the duty thread but start and stop) */
int instr__budget_start(struct instr_state *st, pid_t pid, double pct, char *why, size_t size);
void instr__budget_stop(struct instr_state *st);
/* A window ends (on: it was on): its samples counted as on or off, the
 * threads' busy time and calls read. */
void instr__budget_window_end(struct instr_state *st, bool on);
/* An off window begins: how often (ms) to look whether padrone's pipeline
 * is idle, 0: never; and a look: true once it is, the threads read then
 * (the rest of the window is the base of the busy time per call). */
unsigned instr__budget_watch_ms(struct instr_state *st);
bool instr__budget_idle(struct instr_state *st);
/* A period (on, then off) ended: every few, a new estimate and fraction;
 * the next period's windows into st->duty_on_ms, duty_off_ms. */
void instr__budget_period_end(struct instr_state *st);

/* instr-cfg.c */
/* f's loops and edges, from the CFG read at entry, before the copy goes in
 * (its entry is patched then). Without a CFG (unreadable, out of memory)
 * report lists neither: the events per PC do not depend on it. */
void instr__read_cfg(struct attach_target *t, uint64_t entry, struct func *f);
void instr__free_cfg(struct func *f);
/* The units of f's copy (its table) that make each edge. */
int instr__map_edges(struct func *f, const struct rep_table *t);
/* The consumer's counts of the edges, published (on its thread). */
void instr__publish_edges(struct worker *w);
/* An ended consumer's counts into f's. */
void instr__fold_edges(struct func *f, struct worker *w);
/* pf's edges and its loops' entries and iterations (after its PCs and
 * loops are in). */
int instr__report_cfg(const struct func *f, struct padrone_ifunction *pf);

/* instr-workers.c */
/* A consumer per ring of f's copy (after the workers of earlier times). */
int instr__start_workers(struct padrone_session *s, struct instr_state *st, struct func *f);
void instr__stop_workers(struct func *f);
void instr__release_rings(struct func *f);
uint64_t instr__thread_cpu_ns(clockid_t clock);

#endif
