/* bench/pause.h: what attach-pause and codecache-pause share, so that both
 * measure and print a stop-the-world pause the same way.
 *
 * The pause is attach/'s own count (attach_pause_stats.last_ns): from the
 * first PTRACE_INTERRUPT to the last resume. The benchmark's thread blocks
 * SIGCHLD (as padrone's programs do, so the tracer wakes on each stop at
 * once) and runs SCHED_FIFO when allowed, with SCHED_RESET_ON_FORK so that
 * neither the target nor the tracer thread inherits it: between a stop and
 * a resume that it asks for, other work on the machine does not delay it.
 *
 * The machine is shared: a target thread that is not on a CPU when it is
 * interrupted stops only when the scheduler next gives it one, and other
 * processes' work delays that. Each line therefore says how much CPU the
 * rest of the machine used meanwhile ("others", in CPUs, from /proc/stat
 * minus this process and the target) beside the load average.
 *
 * Line format (one per thread count and kind):
 *   WHAT  N workers KIND  (T threads): p50 X ms  p99 X ms  max X ms  to-stop p99 X ms
 *       load L  others C CPUs[  goal p99 <= 1 ms: met|MISSED]
 */
#ifndef PADRONE_BENCH_PAUSE_H
#define PADRONE_BENCH_PAUSE_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define PAUSE_GOAL_MS 1.0
#define PAUSE_GOAL_AT 8	/* workers (issue: "p99 <= 1 ms at 8 threads") */

/* SIGCHLD blocked, SCHED_FIFO for this thread only; false (and why on
 * stderr) when real-time is refused: the figures then include this
 * thread's own scheduling delays. */
static inline bool pause_setup(const char *prog)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);
	struct sched_param sp = { .sched_priority = 1 };
	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0)
		return true;
	fprintf(stderr, "%s: cannot run SCHED_FIFO (%s): its own scheduling delays count in the "
		"pauses\n", prog, strerror(errno));
	return false;
}

static inline void pause_nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* CPU time used, in clock ticks: the whole machine (busy, not idle or
 * stolen), and one process with all its threads (pid 0: this one). */
static inline double pause_machine_ticks(void)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "re");
	if (!f)
		return 0;
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
		       &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n < 7)
		return 0;
	/* user nice system idle iowait irq softirq steal */
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6]);
}

static inline double pause_proc_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, pid ? "/proc/%d/stat" : "/proc/self/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t len = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[len] = '\0';
	char *p = strrchr(buf, ')');	/* comm may hold spaces */
	unsigned long long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
		return 0;
	return (double)(ut + st);
}

/* What the rest of the machine used during one line's measurement. */
struct pause_load {
	double machine, self, target;
	uint64_t t_ns;
	pid_t pid;
};

static inline uint64_t pause_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void pause_load_start(struct pause_load *l, pid_t target)
{
	l->pid = target;
	l->machine = pause_machine_ticks();
	l->self = pause_proc_ticks(0);
	l->target = pause_proc_ticks(target);
	l->t_ns = pause_now_ns();
}

/* Other processes' CPU use since pause_load_start, in CPUs (call before the
 * target is killed). */
static inline double pause_load_others(const struct pause_load *l)
{
	double ticks = (pause_machine_ticks() - l->machine) - (pause_proc_ticks(0) - l->self) -
		       (pause_proc_ticks(l->pid) - l->target);
	double secs = (double)(pause_now_ns() - l->t_ns) / 1e9;
	double hz = (double)sysconf(_SC_CLK_TCK);
	return secs > 0 && ticks > 0 ? ticks / hz / secs : 0;
}

static inline double pause_loadavg(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "re");
	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

static int pause_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The p-quantile of v[0..n) in ms (sorts v). */
static inline double pause_pct_ms(uint64_t *v, size_t n, double p)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof *v, pause_cmp_u64);
	return (double)v[(size_t)(p * (double)(n - 1) + 0.5)] / 1e6;
}

/* Whether the line for (workers, nap) is wanted: only (0: any) and kind
 * ("busy", "napping", NULL: any) from the command line. */
static inline bool pause_wanted(int workers, bool nap, int only, const char *kind)
{
	if (only && workers != only)
		return false;
	return !kind || strcmp(kind, nap ? "napping" : "busy") == 0;
}

/* One line; returns 1 when this line carries the goal and misses it.
 * to_stop may be NULL (not measured). */
static inline int pause_print(const char *what, int workers, const char *kind, int threads,
			      uint64_t *pause, uint64_t *to_stop, size_t n, double others)
{
	char stop[32] = "      -   ";
	double p99 = pause_pct_ms(pause, n, 0.99);
	bool goal = workers == PAUSE_GOAL_AT;
	if (to_stop)
		snprintf(stop, sizeof stop, "%7.3f ms", pause_pct_ms(to_stop, n, 0.99));
	printf("%-20s %2d workers %-7s (%2d threads): p50 %7.3f ms  p99 %7.3f ms  max %7.3f ms  "
	       "to-stop p99 %s  load %4.1f  others %.2f CPUs%s\n", what, workers, kind, threads,
	       pause_pct_ms(pause, n, 0.5), p99, (double)pause[n - 1] / 1e6, stop, pause_loadavg(),
	       others, !goal ? "" : p99 <= PAUSE_GOAL_MS ? "  goal p99 <= 1 ms: met"
						     : "  goal p99 <= 1 ms: MISSED");
	fflush(stdout);
	return goal && p99 > PAUSE_GOAL_MS;
}

/* The closing verdict; none when no line at PAUSE_GOAL_AT workers ran. */
static inline void pause_verdict(const char *prog, int goal_lines, int missed, double worst_others)
{
	if (!goal_lines)
		return;
	if (!missed)
		printf("%s: goal met: p99 <= %.0f ms at %d workers on all %d line%s\n", prog,
		       PAUSE_GOAL_MS, PAUSE_GOAL_AT, goal_lines, goal_lines == 1 ? "" : "s");
	else
		printf("%s: goal MISSED on %d of %d line%s at %d workers (other processes used up to "
		       "%.2f CPUs meanwhile%s)\n", prog, missed, goal_lines, goal_lines == 1 ? "" : "s",
		       PAUSE_GOAL_AT, worst_others,
		       worst_others >= 0.25 ? ": run again on a quieter machine" : "");
}

#endif
