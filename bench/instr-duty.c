/* instr-duty: what switching instrumentation off and on costs (issue 11).
 *
 * On the streaming kernel of tests/targets/instr_kernel (axpy, one thread),
 * with 1000 longs per call and with 16 (where the three jumps a call pays
 * while switched off weigh the most), the target's own work rate (calls/s
 * from its "alive CALLS" lines), side by side in interleaved rounds:
 * native (not instrumented), instrumented but switched off, on 10% of the
 * time (duty cycle 20/180 ms), on 100% (full cache simulation, exhaustive),
 * and under an overhead budget of 5% and of 10% (--max-overhead: after
 * BUDGET_SETTLE_S for padrone to choose, the share on it chose and the
 * overhead it estimated, beside the overhead measured).
 * Each state's figure is the median of its rounds, its ratio to native's,
 * by the wall clock and per second of the target's own CPU time; the
 * machine is shared, so each round's ratios are printed too (wall/CPU). Last, what a
 * switch costs padrone (one byte per thread's state block, no stop): the
 * time of padrone_session__instr_switch, p50 and p99 over 1000 switches.
 *
 * usage: instr-duty [SECONDS_PER_WINDOW [ROUNDS]]   (default 2, 3)
 * Goals: off >= 0.99 of native; at 10% on, the overhead no more than 0.15x
 * the overhead at 100%; under a budget, the overhead measured within the
 * budget + 1 point.
 */
#include "bench/alive.h"
#include "bench/median.h"
#include "src/padrone.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUNDS 16
#define SWITCHES 1000
#define BUDGET_SETTLE_S 10.0

static double window_s = 2;
static int rounds = 3;

/* The rate over one window of window_s (alive.h). */
static double rate(struct target *t, double *per_cpu)
{
	return rate_over(t, window_s, per_cpu);
}

enum state { NATIVE, OFF, DUTY10, ON, BUDGET5, BUDGET10, NSTATES };
static const char *const state_names[NSTATES] = {
	"native", "instrumented, switched off", "on 10% (duty 20/180 ms)", "on 100%",
	"--max-overhead 5", "--max-overhead 10",
};

/* Under a budget: the share on chosen and the overhead estimated, as
 * stats shows them at the end of the window. */
struct budget_seen {
	double fraction, estimate;
};

static void fail(struct padrone_session *s, const char *what)
{
	fprintf(stderr, "instr-duty: %s: %s\n", what, padrone_session__errmsg(s));
	exit(1);
}

/* The target's lines read (it must not block on its pipe) while padrone
 * chooses. */
static void settle(struct target *t, double seconds)
{
	double t0 = now_s();

	while (now_s() - t0 < seconds)
		next_calls(t);
}

static double budget_rate(struct padrone_session *s, struct target *t, double pct, double *c,
			  struct budget_seen *seen)
{
	struct padrone_istats *st;

	if (padrone_session__instr_budget(s, pct) < 0)
		fail(s, "budget");
	settle(t, BUDGET_SETTLE_S);
	double r = rate(t, c);
	if (padrone_session__instr_stats(s, &st) < 0)
		fail(s, "stats");
	seen->fraction = st->budget_fraction;
	seen->estimate = st->estimated ? st->overhead : -1;
	padrone_istats__free(st);
	return r;
}

/* One round: each state in turn, the process instrumented for all but
 * native. */
static void round_of(struct padrone_session *s, struct target *t, const char *func,
		     double r[NSTATES], double c[NSTATES], struct budget_seen seen[2])
{
	r[NATIVE] = rate(t, &c[NATIVE]);
	if (padrone_session__instrument(s, func, NULL) < 0)
		fail(s, "instrument");
	if (padrone_session__instr_switch(s, false) < 0)
		fail(s, "switch off");
	r[OFF] = rate(t, &c[OFF]);
	if (padrone_session__instr_duty(s, 20, 180) < 0)
		fail(s, "duty");
	r[DUTY10] = rate(t, &c[DUTY10]);
	if (padrone_session__instr_switch(s, true) < 0)
		fail(s, "switch on");
	r[ON] = rate(t, &c[ON]);
	r[BUDGET5] = budget_rate(s, t, 5, &c[BUDGET5], &seen[0]);
	r[BUDGET10] = budget_rate(s, t, 10, &c[BUDGET10], &seen[1]);
	if (padrone_session__uninstrument(s, NULL) < 0)
		fail(s, "uninstrument");
}

/* p50 and p99 of a switch off then on, in microseconds. */
static void switch_cost(struct padrone_session *s, const char *func)
{
	static double us[SWITCHES];

	if (padrone_session__instrument(s, func, NULL) < 0)
		fail(s, "instrument");
	for (int i = 0; i < SWITCHES; i++) {
		double t0 = now_s();
		if (padrone_session__instr_switch(s, i % 2 == 0 ? false : true) < 0)
			fail(s, "switch");
		us[i] = (now_s() - t0) * 1e6;
	}
	padrone_session__uninstrument(s, NULL);
	double p50 = bench_median(us, SWITCHES);	/* sorts */
	printf("  a switch (padrone's side; the process never stops): p50 %.1f us, p99 %.1f us, "
	       "max %.1f us over %d\n", p50, us[SWITCHES * 99 / 100], us[SWITCHES - 1], SWITCHES);
}

static void workload(const char *kernel, const char *n)
{
	char *argv[] = { (char *)kernel, "1", (char *)n, NULL };
	double r[MAX_ROUNDS][NSTATES], c[MAX_ROUNDS][NSTATES];
	struct budget_seen seen[MAX_ROUNDS][2];
	struct target t;
	struct padrone_session *s = padrone_session__new(NULL);

	printf("streaming kernel: axpy, %s longs per call, 1 thread\n", n);
	if (!s || start(&t, argv) < 0) {
		perror("instr-duty: start");
		exit(1);
	}
	next_calls(&t);
	if (padrone_session__attach(s, t.pid) < 0)
		fail(s, "attach");
	for (int k = 0; k < rounds; k++)
		round_of(s, &t, "axpy", r[k], c[k], seen[k]);
	double med[NSTATES], medc[NSTATES];
	for (int st = 0; st < NSTATES; st++) {
		double v[MAX_ROUNDS], w[MAX_ROUNDS];
		for (int k = 0; k < rounds; k++) {
			v[k] = r[k][st];
			w[k] = c[k][st];
		}
		med[st] = bench_median(v, rounds);
		medc[st] = bench_median(w, rounds);
	}
	for (int st = 0; st < NSTATES; st++) {
		printf("  %-28s %10.0f calls/s  %.3f of native | per target CPU-s %.3f  (rounds:",
		       state_names[st], med[st], med[st] / med[NATIVE], medc[st] / medc[NATIVE]);
		for (int k = 0; k < rounds; k++)
			printf(" %.3f/%.3f", r[k][st] / r[k][NATIVE], c[k][st] / c[k][NATIVE]);
		printf(")\n");
	}
	double full = med[NATIVE] / med[ON] - 1, tenth = med[NATIVE] / med[DUTY10] - 1;
	printf("  overhead (native time per call - 1): on 100%% %.3f, on 10%% %.3f: %.2fx of "
	       "100%%'s (goal <= 0.15x); off %.3f\n", full, tenth, full > 0 ? tenth / full : 0,
	       med[NATIVE] / med[OFF] - 1);
	for (int i = 0; i < 2; i++) {
		int st = BUDGET5 + i;
		printf("  --max-overhead %d: overhead measured %.1f%% (goal <= %d%% + 1 point), "
		       "per target CPU-s %.1f%%; (rounds: share on chosen/estimated overhead:",
		       5 * (i + 1), 100 * (med[NATIVE] / med[st] - 1), 5 * (i + 1),
		       100 * (medc[NATIVE] / medc[st] - 1));
		for (int k = 0; k < rounds; k++)
			printf(" %.1f%%/%.1f%%", 100 * seen[k][i].fraction, seen[k][i].estimate);
		printf(")\n");
	}
	switch_cost(s, "axpy");
	padrone_session__detach(s);
	padrone_session__free(s);
	stop(&t);
}

int main(int argc, char **argv)
{
	bench_name = "instr-duty";
	char dir[4096];
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
	snprintf(dir, sizeof dir, "%s/tests/targets/instr_kernel", b);
	workload(dir, "1000");
	workload(dir, "16");
	return 0;
}
