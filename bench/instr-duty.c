/* instr-duty: what switching instrumentation off and on costs (issue 11).
 *
 * On the streaming kernel of tests/targets/instr_kernel (axpy, one thread),
 * with 1000 longs per call and with 16 (where the three jumps a call pays
 * while switched off weigh the most), the target's own work rate (calls/s
 * from its "alive CALLS" lines), side by side in interleaved rounds:
 * native (not instrumented), instrumented but switched off, on 10% of the
 * time (duty cycle 20/180 ms), on 100% (full cache simulation, exhaustive).
 * Each state's figure is the median of its rounds, its ratio to native's,
 * by the wall clock and per second of the target's own CPU time; the
 * machine is shared, so each round's ratios are printed too (wall/CPU). Last, what a
 * switch costs padrone (one byte per thread's state block, no stop): the
 * time of padrone_session__instr_switch, p50 and p99 over 1000 switches.
 *
 * usage: instr-duty [SECONDS_PER_WINDOW [ROUNDS]]   (default 2, 3)
 * Goals: off >= 0.99 of native; at 10% on, the overhead no more than 0.15x
 * the overhead at 100%.
 */
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

static double window_s = 2;
static int rounds = 3;

struct target {
	pid_t pid;
	FILE *out;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int start(struct target *t, char *const argv[])
{
	int p[2];

	if (pipe(p) < 0)
		return -1;
	if ((t->pid = fork()) == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	t->out = fdopen(p[0], "r");
	return t->pid > 0 ? 0 : -1;
}

static void stop(struct target *t)
{
	kill(t->pid, SIGKILL);
	waitpid(t->pid, NULL, 0);
	fclose(t->out);
}

/* The next "alive CALLS bad B" line's calls; exits on a wrong result. */
static long next_calls(struct target *t)
{
	char line[256];
	long calls, bad;

	while (fgets(line, sizeof line, t->out))
		if (sscanf(line, "alive %ld bad %ld", &calls, &bad) == 2) {
			if (bad) {
				fprintf(stderr, "instr-duty: the target computed %ld wrong results\n",
					bad);
				exit(1);
			}
			return calls;
		}
	fprintf(stderr, "instr-duty: the target stopped\n");
	exit(1);
}

/* The CPU time all the target's threads have run, in seconds (schedstat:
 * nanoseconds). */
static double cpu_s(pid_t pid)
{
	char path[320], line[128];
	double sum = 0;

	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
		FILE *f = fopen(path, "re");
		unsigned long long ns;
		if (f && fgets(line, sizeof line, f) && sscanf(line, "%llu", &ns) == 1)
			sum += (double)ns / 1e9;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return sum;
}

/* Calls per second over one window, after a line to settle, and per
 * second of the target's own CPU time (less at the mercy of a busy
 * machine's scheduling than the wall clock; the main thread's sleeps
 * cost nothing). */
static double rate(struct target *t, double *per_cpu)
{
	next_calls(t);
	long c0 = next_calls(t), c1;
	double t0 = now_s(), t1, u0 = cpu_s(t->pid);

	do {
		c1 = next_calls(t);
		t1 = now_s();
	} while (t1 - t0 < window_s);
	double u = cpu_s(t->pid) - u0;
	*per_cpu = u > 0 ? (double)(c1 - c0) / u : 0;
	return (double)(c1 - c0) / (t1 - t0);
}

enum state { NATIVE, OFF, DUTY10, ON, NSTATES };
static const char *const state_names[NSTATES] = {
	"native", "instrumented, switched off", "on 10% (duty 20/180 ms)", "on 100%",
};

static void fail(struct padrone_session *s, const char *what)
{
	fprintf(stderr, "instr-duty: %s: %s\n", what, padrone_session__errmsg(s));
	exit(1);
}

/* One round: each state in turn, the process instrumented for all but
 * native. */
static void round_of(struct padrone_session *s, struct target *t, const char *func,
		     double r[NSTATES], double c[NSTATES])
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
		round_of(s, &t, "axpy", r[k], c[k]);
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
	switch_cost(s, "axpy");
	padrone_session__detach(s);
	padrone_session__free(s);
	stop(&t);
}

int main(int argc, char **argv)
{
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
