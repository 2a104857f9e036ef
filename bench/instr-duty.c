/* instr-duty: what switching instrumentation off and on costs, and what
 * sampling by time keeps of the results (issue 11).
 *
 * On the streaming kernel of tests/targets/instr_kernel (axpy, one thread)
 * with 1000 longs per call and with 16 (where the three jumps a call pays
 * while switched off weigh the most), and on the pointer chase of
 * bench/instr-chase through 64 MiB (simulated with an LL of 32 MiB, so
 * that it misses for want of room), the target's own work rate (calls/s
 * from its "alive CALLS" lines) in each state, in interleaved rounds:
 * native (between
 * every two states: each state is weighed against the mean of the native
 * windows just before and just after it, since this host's rate drifts by
 * 10-20% between minutes), instrumented but switched off, on 1%, 10%
 * and 50% of the time (duty cycles 2/198, 20/180, 100/100 ms), on 100%
 * (full cache simulation, exhaustive), CAB's sampling mode (on 100%, the
 * target never waits, the consumer takes what it can), and under an
 * overhead budget of 5% and of 10% (--max-overhead: after BUDGET_SETTLE_S
 * for padrone to choose; the share on it chose and the overhead it
 * estimated beside the overhead measured). Each state is a fresh
 * attachment and instrumentation (results and the mode last as long as an
 * attachment), so that its report's D1 and LL miss ratios are its own:
 * those of 10%, 50% and 1% on and of sampling mode against the exhaustive
 * one's, as the report estimates them for the whole time and as measured,
 * with the range the report gives a sampled LL ratio (its cold-start
 * misses, first touches of lines, counted as hits .. as measured).
 * Each state's figure is the median of its rounds' rates, and the median of
 * its rounds' ratios to their own natives, by the wall clock and per second
 * of the target's own CPU time; each round's ratios are printed too
 * (wall/CPU), as the machine is shared.
 *
 * Then switched off and the budgets again by the twin method, on the
 * streaming kernel (1000 and 16 longs): the target and a native twin pinned to one CPU, whose
 * ratio the host's drift cannot move (twins() says how it is taken).
 *
 * Then the load doubling under --max-overhead 5: instr_kernel with 2
 * threads, one working; after BUDGET_SETTLE_S, the second starts (SIGUSR2),
 * and each second the rate, the share on and the estimate are printed,
 * then the overhead before and after against native rates of one and two
 * threads. Last, what a switch costs padrone (one byte per thread's state
 * block, no stop): p50 and p99 of padrone_session__instr_switch over 1000.
 *
 * usage: instr-duty [SECONDS_PER_WINDOW [ROUNDS]]   (default 1, 3)
 * Goals: off >= 0.99 of native; the overhead linear in the share on, at 10%
 * no more than 0.15x the overhead at 100%; the miss ratios of 10% on within
 * 5% of the exhaustive ones; under a budget, the overhead measured within
 * the budget + 1 point (the twins' figure the firmest), also after the load
 * doubles.
 */
#include "bench/alive.h"
#include "bench/median.h"
#include "src/padrone.h"

#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 16
#define SWITCHES 1000
#define BUDGET_SETTLE_S 10.0
#define DUTY_SETTLE_S 1.0	/* five periods of 200 ms */
#define RAMP_TRACE_S 10

static double window_s = 1;
static int rounds = 3;
static const char *ll_geometry;	/* --LL of the workload's instruments, NULL: the host's */

enum state { NATIVE, OFF, DUTY1, DUTY10, DUTY50, ON, SAMPLE, BUDGET5, BUDGET10, NSTATES };

static const struct state_def {
	const char *name;
	unsigned on_ms, off_ms;		/* a duty cycle, or 0 0 */
	double budget;			/* --max-overhead, or 0 */
	bool off, sampling;
} states[NSTATES] = {
	[NATIVE] = { "native" },
	[OFF] = { "instrumented, switched off", .off = true },
	[DUTY1] = { "on 1% (duty 2/198 ms)", 2, 198 },
	[DUTY10] = { "on 10% (duty 20/180 ms)", 20, 180 },
	[DUTY50] = { "on 50% (duty 100/100 ms)", 100, 100 },
	[ON] = { "on 100%" },
	[SAMPLE] = { "on 100%, CAB sampling mode", .sampling = true },
	[BUDGET5] = { "--max-overhead 5", .budget = 5 },
	[BUDGET10] = { "--max-overhead 10", .budget = 10 },
};

/* One state's figures in one round. */
struct seen {
	double rate, per_cpu;
	double of_native, of_native_cpu;	/* its rates over the natives around it */
	double d1, ll;			/* miss ratios, -1: none */
	double ll_warm;			/* LL's, cold-start misses as hits */
	double est_d1, est_ll;		/* sampled: the report's for the whole time */
	double fraction, estimate;	/* a budget's, as stats says at the end */
};

static void fail(struct padrone_session *s, const char *what)
{
	fprintf(stderr, "instr-duty: %s: %s\n", what, padrone_session__errmsg(s));
	exit(1);
}

/* The target's lines read (it must not block on its pipe) meanwhile. */
static void settle(struct target *t, double seconds)
{
	double t0 = now_s();

	while (now_s() - t0 < seconds)
		next_calls(t);
}

/* The function's D1 and LL miss ratios, data references, as measured,
 * and as the report estimates them for the whole time (as measured where
 * it does not: never switched off). */
static void miss_ratios(struct padrone_session *s, struct seen *v)
{
	struct padrone_ireport *r;

	v->d1 = v->ll = -1;
	if (padrone_session__instr_report(s, &r) < 0)
		fail(s, "report");
	if (r->nfunctions) {
		const uint64_t *ev = r->functions[0].ev;	/* Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw */
		double refs = (double)(ev[3] + ev[6]);
		if (refs > 0) {
			double ll = (double)(ev[5] + ev[8]);
			v->d1 = (double)(ev[4] + ev[7]) / refs;
			v->ll = ll / refs;
			v->ll_warm = ll > (double)r->cold[2] ? (ll - (double)r->cold[2]) / refs : 0;
		}
	}
	v->est_d1 = r->est_d1 >= 0 ? r->est_d1 : v->d1;
	v->est_ll = r->est_d1 >= 0 ? r->est_ll : v->ll;
	padrone_ireport__free(r);
}

static void budget_seen(struct padrone_session *s, struct seen *v)
{
	struct padrone_istats *st;

	if (padrone_session__instr_stats(s, &st) < 0)
		fail(s, "stats");
	v->fraction = st->budget_fraction;
	v->estimate = st->estimated ? st->overhead : -1;
	padrone_istats__free(st);
}

/* Attached afresh, FUNC instrumented and switched as d says. */
static void enter(struct padrone_session *s, pid_t pid, const char *func,
		  const struct state_def *d)
{
	struct padrone_instrument_opts o = { .sz = sizeof o, .sampling = d->sampling,
					     .ll = ll_geometry };

	if (padrone_session__attach(s, pid) < 0)
		fail(s, "attach");
	if (padrone_session__instrument(s, func, &o) < 0)
		fail(s, "instrument");
	if (d->off && padrone_session__instr_switch(s, false) < 0)
		fail(s, "switch off");
	if (d->on_ms && padrone_session__instr_duty(s, d->on_ms, d->off_ms) < 0)
		fail(s, "duty");
	if (d->budget && padrone_session__instr_budget(s, d->budget) < 0)
		fail(s, "budget");
}

static void measure(struct padrone_session *s, struct target *t, const char *func, enum state k,
		    struct seen *v)
{
	const struct state_def *d = &states[k];

	memset(v, 0, sizeof *v);
	v->d1 = v->ll = -1;
	if (k == NATIVE) {
		v->rate = rate_over(t, window_s, &v->per_cpu);
		return;
	}
	enter(s, t->pid, func, d);
	settle(t, d->budget ? BUDGET_SETTLE_S : d->on_ms ? DUTY_SETTLE_S : 0);
	v->rate = rate_over(t, window_s, &v->per_cpu);
	if (d->budget)
		budget_seen(s, v);
	if (!d->off)
		miss_ratios(s, v);
	if (padrone_session__uninstrument(s, NULL) < 0)
		fail(s, "uninstrument");
	padrone_session__detach(s);
}

/* One round: every state in turn, each between two native windows; the
 * round's native is their mean. */
static void round_of(struct padrone_session *s, struct target *t, const char *func,
		     struct seen v[NSTATES])
{
	struct seen before, after, *n = &v[NATIVE];

	measure(s, t, func, NATIVE, &before);
	*n = before;
	for (int k = NATIVE + 1; k < NSTATES; k++) {
		measure(s, t, func, k, &v[k]);
		measure(s, t, func, NATIVE, &after);
		v[k].of_native = 2 * v[k].rate / (before.rate + after.rate);
		v[k].of_native_cpu = 2 * v[k].per_cpu / (before.per_cpu + after.per_cpu);
		n->rate += after.rate;
		n->per_cpu += after.per_cpu;
		before = after;
	}
	n->rate /= NSTATES;
	n->per_cpu /= NSTATES;
	n->of_native = n->of_native_cpu = 1;
}

/* The median over the rounds of one figure of state k. */
static double median_of(struct seen v[][NSTATES], int k, size_t field)
{
	double x[MAX_ROUNDS];

	for (int r = 0; r < rounds; r++)
		x[r] = *(const double *)((const char *)&v[r][k] + field);
	return bench_median(x, rounds);
}
#define MEDIAN(v, k, f) median_of(v, k, offsetof(struct seen, f))

static void print_states(struct seen v[][NSTATES], double ratio[NSTATES])
{
	for (int k = 0; k < NSTATES; k++) {
		ratio[k] = MEDIAN(v, k, of_native);
		printf("  %-28s %10.0f calls/s  %.3f of native | per target CPU-s %.3f", states[k].name,
		       MEDIAN(v, k, rate), ratio[k], MEDIAN(v, k, of_native_cpu));
		if (MEDIAN(v, k, d1) >= 0)
			printf(" | D1 miss %.4f%% LL %.4f%%", 100 * MEDIAN(v, k, d1),
			       100 * MEDIAN(v, k, ll));
		printf("  (rounds:");
		for (int r = 0; r < rounds; r++)
			printf(" %.3f/%.3f", v[r][k].of_native, v[r][k].of_native_cpu);
		printf(")\n");
	}
}

/* The overhead against the share on: linear means overhead(d) = d * overhead(1)
 * (ratio: each state's rate of native). */
static void print_curve(const double ratio[NSTATES])
{
	static const struct { enum state k; double d; } on[] = {
		{ DUTY1, 0.01 }, { DUTY10, 0.10 }, { DUTY50, 0.50 }, { ON, 1.0 },
	};
	double full = 1 / ratio[ON] - 1;

	printf("  overhead (native time per call - 1) by share on:");
	for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
		double o = 1 / ratio[on[i].k] - 1;
		printf(" %g%% %.3f (%.2fx of linear)", 100 * on[i].d, o,
		       full > 0 ? o / (on[i].d * full) : 0);
	}
	printf("; off %.3f\n", 1 / ratio[OFF] - 1);
	printf("  at 10%% on: %.3fx the overhead at 100%% (goal <= 0.15x); off: %.3f of native "
	       "(goal >= 0.99)\n", full > 0 ? (1 / ratio[DUTY10] - 1) / full : 0, ratio[OFF]);
}

/* A miss ratio against the exhaustive one: relative difference, or the
 * absolute one when the exhaustive ratio is below 0.1%. */
static void print_ratio_vs(const char *what, double got, double want)
{
	if (want >= 0.001)
		printf(" %s %.2f%%", what, 100 * (got - want) / want);
	else
		printf(" %s %+.4f points", what, 100 * (got - want));
}

/* The two LL ratios the report gives a sampled run (cold-start misses as
 * hits .. as measured), whether the exhaustive ratio is between them, and
 * the exhaustive run's own with its cold-start misses as hits (a run
 * that had begun earlier: with an LL that holds all the function's lines,
 * all of its LL misses are first touches, whose share of a run falls with
 * its length, so runs of different lengths compare only so). */
static void print_cold_range(double lo, double hi, double want, double want_warm)
{
	printf(" (range %.4f%%..%.4f%%, %s; its cold-start misses as hits %.4f%%)", 100 * lo,
	       100 * hi, lo <= want && want <= hi ? "the exhaustive one inside" :
	       "the exhaustive one outside", 100 * want_warm);
}

/* State k's D1 and LL ratios (the median of its rounds' est_d1 and
 * est_ll, or d1 and ll: estimated) against the exhaustive ones. */
static void print_state_vs(const char *sep, const char *name, struct seen v[][NSTATES],
			   enum state k, bool estimated, double d1, double ll)
{
	printf("%s%s:", sep, name);
	print_ratio_vs("D1", estimated ? MEDIAN(v, k, est_d1) : MEDIAN(v, k, d1), d1);
	print_ratio_vs("LL", estimated ? MEDIAN(v, k, est_ll) : MEDIAN(v, k, ll), ll);
}

static void print_sampled_ratios(struct seen v[][NSTATES])
{
	double d1 = MEDIAN(v, ON, d1), ll = MEDIAN(v, ON, ll), warm = MEDIAN(v, ON, ll_warm);

	if (d1 < 0)
		return;
	printf("  miss ratios against the exhaustive run's (goal within 5%%), as estimated for the "
	       "whole time:");
	print_state_vs(" ", "10% on", v, DUTY10, true, d1, ll);
	print_state_vs(", ", "50% on", v, DUTY50, true, d1, ll);
	print_state_vs(", ", "1% on", v, DUTY1, true, d1, ll);
	print_state_vs(", ", "CAB sampling mode", v, SAMPLE, true, d1, ll);
	print_state_vs("; as measured: ", "10% on", v, DUTY10, false, d1, ll);
	print_cold_range(MEDIAN(v, DUTY10, ll_warm), MEDIAN(v, DUTY10, ll), ll, warm);
	print_state_vs(", ", "1% on", v, DUTY1, false, d1, ll);
	print_cold_range(MEDIAN(v, DUTY1, ll_warm), MEDIAN(v, DUTY1, ll), ll, warm);
	print_state_vs("; ", "CAB sampling mode", v, SAMPLE, false, d1, ll);
	printf("\n");
}

static void print_budgets(struct seen v[][NSTATES])
{
	for (int k = BUDGET5; k <= BUDGET10; k++) {
		double pct = states[k].budget;
		printf("  --max-overhead %g: overhead measured %.1f%% (goal <= %g%% + 1 point), "
		       "per target CPU-s %.1f%%; (rounds: measured/share on chosen/estimated:", pct,
		       100 * (1 / MEDIAN(v, k, of_native) - 1), pct,
		       100 * (1 / MEDIAN(v, k, of_native_cpu) - 1));
		for (int r = 0; r < rounds; r++)
			printf(" %.1f%%/%.2f%%/%.1f%%", 100 * (1 / v[r][k].of_native - 1),
			       100 * v[r][k].fraction, v[r][k].estimate);
		printf(")\n");
	}
}

/* The target started, and a session to attach to it. */
static struct padrone_session *started(struct target *t, char *const argv[])
{
	struct padrone_session *s = padrone_session__new(NULL);

	if (!s || start(t, argv) < 0) {
		perror("instr-duty: start");
		exit(1);
	}
	next_calls(t);
	return s;
}

static void workload(const char *title, char *const argv[], const char *func)
{
	static struct seen v[MAX_ROUNDS][NSTATES];
	double ratio[NSTATES];
	struct target t;
	struct padrone_session *s = started(&t, argv);

	printf("%s\n", title);
	fflush(stdout);
	for (int r = 0; r < rounds; r++)
		round_of(s, &t, func, v[r]);
	print_states(v, ratio);
	print_curve(ratio);
	print_sampled_ratios(v);
	print_budgets(v);
	fflush(stdout);
	padrone_session__free(s);
	stop(&t);
}

struct busiest {
	double run, delay;
};

static void keep_busiest(void *arg, double run, double delay)
{
	struct busiest *b = arg;

	if (run > b->run)
		*b = (struct busiest){ run, delay };
}

/* The busiest thread of pid (the one that calls the function: the
 * targets' main threads sleep between their lines): its time on a CPU and
 * waiting for one, in seconds. */
static void worker_times(pid_t pid, double *run, double *delay)
{
	struct busiest b = { 0, 0 };

	each_thread_times(pid, keep_busiest, &b);
	*run = b.run;
	*delay = b.delay;
}

/* A twin's calls, and the time its worker was not kept waiting for the
 * CPU, from one line to another. */
struct twin_mark {
	long calls;
	double at, run, delay;
};

static struct twin_mark twin_mark(struct target *t)
{
	struct twin_mark m;

	m.calls = fresh_calls(t);
	m.at = now_s();
	worker_times(t->pid, &m.run, &m.delay);
	return m;
}

/* One twin window: the target's calls per second of its worker's time not
 * spent waiting for the CPU (running, or asleep: waiting for padrone's
 * consumer is the target's loss; waiting for the twin is not), over the
 * twin's; and the same with the worker's CPU time alone. */
struct twin_ratio {
	double alone, cpu;
};

static double per_s(long calls, double s)
{
	if (calls <= 0 || s <= 0) {
		fprintf(stderr, "instr-duty: a twin did no work\n");
		exit(1);
	}
	return (double)calls / s;
}

static struct twin_ratio twin_window(struct target *a, struct target *b)
{
	struct twin_mark a0 = twin_mark(a), b0 = twin_mark(b), a1, b1;

	settle(a, window_s);
	a1 = twin_mark(a);
	b1 = twin_mark(b);
	double fa = per_s(a1.calls - a0.calls, a1.at - a0.at - (a1.delay - a0.delay));
	double fb = per_s(b1.calls - b0.calls, b1.at - b0.at - (b1.delay - b0.delay));
	double ca = per_s(a1.calls - a0.calls, a1.run - a0.run);
	double cb = per_s(b1.calls - b0.calls, b1.run - b0.run);
	return (struct twin_ratio){ fa / fb, ca / cb };
}

/* Switched off and the budgets by the twin method: the target and a twin
 * of it that padrone never touches, both pinned to CPU 0, share that CPU
 * and whatever else disturbs it, so their ratio does not drift with the
 * host as rates taken minutes apart do (padrone's pipeline runs on the
 * other CPUs). Each state's overhead is the twins' ratio native (the mean
 * of the windows just before and after) over their ratio in the state,
 * less one, by
 * the time each was not kept waiting for the CPU (what the target would
 * take alone on it: its run time and the time it slept waiting for the
 * consumer; by the wall clock, the twin would take the CPU meanwhile and
 * count that loss twice), and by their CPU time alone (the copy's own
 * cost). */
/* The twins' rounds switched off (overheads f by the time not kept
 * waiting, c by CPU time), as rates of native: the gate's and the jumps'
 * own cost, which the host's drift no longer hides. */
static void print_twin_off(const double alone[MAX_ROUNDS], const double cpu[MAX_ROUNDS])
{
	double f[MAX_ROUNDS], c[MAX_ROUNDS];

	memcpy(f, alone, sizeof f);	/* bench_median sorts */
	memcpy(c, cpu, sizeof c);
	printf("  switched off: %.3f of the twin's rate (goal >= 0.99), by CPU time alone %.3f; "
	       "(rounds:", 1 / (1 + bench_median(f, rounds)), 1 / (1 + bench_median(c, rounds)));
	for (int r = 0; r < rounds; r++)
		printf(" %.3f/%.3f", 1 / (1 + alone[r]), 1 / (1 + cpu[r]));
	printf(")\n");
}

static void twins(const char *title, char *const argv[], const char *func)
{
	enum { NB = 3 };
	static const enum state budget[NB] = { OFF, BUDGET5, BUDGET10 };
	double cpu[NB][MAX_ROUNDS], alone[NB][MAX_ROUNDS];
	struct seen seen[NB][MAX_ROUNDS];
	struct target a, b;
	struct padrone_session *s = started(&a, argv);

	if (start(&b, argv) < 0) {
		perror("instr-duty: start");
		exit(1);
	}
	printf("%s, and a native twin, both on CPU 0\n", title);
	fflush(stdout);
	for (int r = 0; r < rounds; r++) {
		struct twin_ratio before = twin_window(&a, &b), under, after;
		for (int k = 0; k < NB; k++) {
			enter(s, a.pid, func, &states[budget[k]]);
			settle(&a, states[budget[k]].budget ? BUDGET_SETTLE_S : window_s);
			under = twin_window(&a, &b);
			budget_seen(s, &seen[k][r]);
			if (padrone_session__uninstrument(s, NULL) < 0)
				fail(s, "uninstrument");
			padrone_session__detach(s);
			after = twin_window(&a, &b);
			cpu[k][r] = (before.cpu + after.cpu) / 2 / under.cpu - 1;
			alone[k][r] = (before.alone + after.alone) / 2 / under.alone - 1;
			before = after;
		}
	}
	for (int k = 0; k < NB; k++) {
		double pct = states[budget[k]].budget, c[MAX_ROUNDS], f[MAX_ROUNDS];
		if (!pct) {
			print_twin_off(alone[k], cpu[k]);
			continue;
		}
		memcpy(c, cpu[k], sizeof c);	/* bench_median sorts */
		memcpy(f, alone[k], sizeof f);
		printf("  --max-overhead %g: overhead measured against the twin %.1f%% (goal <= %g%% "
		       "+ 1 point), by CPU time alone %.1f%%; (rounds: measured/CPU time/share on "
		       "chosen/estimated:", pct, 100 * bench_median(f, rounds), pct,
		       100 * bench_median(c, rounds));
		for (int r = 0; r < rounds; r++)
			printf(" %.1f%%/%.1f%%/%.2f%%/%.1f%%", 100 * alone[k][r], 100 * cpu[k][r],
			       100 * seen[k][r].fraction, seen[k][r].estimate);
		printf(")\n");
	}
	fflush(stdout);
	padrone_session__free(s);
	stop(&b);
	stop(&a);
}

/* The line "ramped" the target prints once its second thread works. */
static void wait_ramped(struct target *t)
{
	char line[256];

	while (fgets(line, sizeof line, t->out))
		if (strncmp(line, "ramped", 6) == 0)
			return;
	fprintf(stderr, "instr-duty: the target stopped\n");
	exit(1);
}

/* --max-overhead 5 while the load doubles: one thread, then two. */
static void load_doubling(const char *kernel)
{
	char *argv[] = { (char *)kernel, "2", "1000", "ramp", NULL };
	struct target t;
	struct padrone_session *s = started(&t, argv);
	double c, native1, native2, before, after;
	struct seen v;

	printf("streaming kernel: axpy, 1000 longs per call, 1 thread, then 2, under --max-overhead 5\n");
	native1 = rate_over(&t, 3 * window_s, &c);
	enter(s, t.pid, "axpy", &states[BUDGET5]);
	settle(&t, BUDGET_SETTLE_S);
	before = rate_over(&t, 3 * window_s, &c);
	budget_seen(s, &v);
	printf("  1 thread: native %.0f calls/s, budget %.0f: overhead measured %.1f%%, share on "
	       "%.2f%%, estimated %.1f%%\n", native1, before, 100 * (native1 / before - 1),
	       100 * v.fraction, v.estimate);
	kill(t.pid, SIGUSR2);
	wait_ramped(&t);
	double trace[RAMP_TRACE_S];
	struct seen tv[RAMP_TRACE_S];
	for (int i = 0; i < RAMP_TRACE_S; i++) {
		trace[i] = rate_over(&t, 1, &c);
		budget_seen(s, &tv[i]);
	}
	after = rate_over(&t, 3 * window_s, &c);
	budget_seen(s, &v);
	if (padrone_session__uninstrument(s, NULL) < 0)
		fail(s, "uninstrument");
	settle(&t, 1);
	native2 = rate_over(&t, 3 * window_s, &c);
	printf("  2 threads: native %.0f calls/s (%.2fx of 1 thread), budget %.0f: overhead "
	       "measured %.1f%% (goal <= 5%% + 1 point), share on %.2f%%, estimated %.1f%%\n",
	       native2, native2 / native1, after, 100 * (native2 / after - 1), 100 * v.fraction,
	       v.estimate);
	printf("  each second after the second thread started (overhead measured/share on/estimated):");
	for (int i = 0; i < RAMP_TRACE_S; i++)
		printf(" %.1f%%/%.2f%%/%.1f%%", 100 * (native2 / trace[i] - 1), 100 * tv[i].fraction,
		       tv[i].estimate);
	printf("\n");
	fflush(stdout);
	padrone_session__detach(s);
	padrone_session__free(s);
	stop(&t);
}

/* p50 and p99 of a switch off then on, in microseconds. */
static void switch_cost(const char *kernel)
{
	char *argv[] = { (char *)kernel, "1", "1000", NULL };
	static double us[SWITCHES];
	struct target t;
	struct padrone_session *s = started(&t, argv);

	enter(s, t.pid, "axpy", &states[ON]);
	for (int i = 0; i < SWITCHES; i++) {
		double t0 = now_s();
		if (padrone_session__instr_switch(s, i % 2 == 0 ? false : true) < 0)
			fail(s, "switch");
		us[i] = (now_s() - t0) * 1e6;
	}
	padrone_session__uninstrument(s, NULL);
	double p50 = bench_median(us, SWITCHES);	/* sorts */
	printf("a switch (padrone's side; the process never stops): p50 %.1f us, p99 %.1f us, "
	       "max %.1f us over %d\n", p50, us[SWITCHES * 99 / 100], us[SWITCHES - 1], SWITCHES);
	padrone_session__detach(s);
	padrone_session__free(s);
	stop(&t);
}

int main(int argc, char **argv)
{
	bench_name = "instr-duty";
	char kernel[4096], chase[4096];
	const char *b = getenv("top_builddir") ? getenv("top_builddir") : ".";

	if (argc > 1)
		window_s = atof(argv[1]);
	if (argc > 2)
		rounds = atoi(argv[2]);
	if (window_s <= 0 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: instr-duty [SECONDS_PER_WINDOW [ROUNDS (1 to %d)]]\n",
			MAX_ROUNDS);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(kernel, sizeof kernel, "%s/tests/targets/instr_kernel", b);
	snprintf(chase, sizeof chase, "%s/bench/instr-chase", b);
	char *axpy1000[] = { kernel, "1", "1000", NULL }, *axpy16[] = { kernel, "1", "16", NULL };
	char *pinned1000[] = { "taskset", "-c", "0", kernel, "1", "1000", NULL };
	char *pinned16[] = { "taskset", "-c", "0", kernel, "1", "16", NULL };
	char *chase_argv[] = { chase, "1048576", NULL };
	workload("streaming kernel: axpy, 1000 longs per call, 1 thread", axpy1000, "axpy");
	workload("streaming kernel: axpy, 16 longs per call, 1 thread", axpy16, "axpy");
	/* The LL of 32 MiB, 16 ways (this host's L3 as sysfs tells it; the
	 * cpuid leaves cachegrind reads describe 256 MiB, direct-mapped, on
	 * this VM), so that the chase through 64 MiB misses it for want of
	 * room and not only on first touches. */
	ll_geometry = "33554432,16,64";
	workload("pointer chase: chase, 1000 steps per call through 64 MiB, 1 thread, LL 32 MiB "
		 "16 ways", chase_argv, "chase");
	ll_geometry = NULL;
	twins("streaming kernel: axpy, 1000 longs per call", pinned1000, "axpy");
	twins("streaming kernel: axpy, 16 longs per call", pinned16, "axpy");
	load_doubling(kernel);
	switch_cost(kernel);
	return 0;
}
