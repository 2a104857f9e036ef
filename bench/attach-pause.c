/* attach-pause: how long stop-the-world stops a live process.
 *
 * For 1, 8 and 64 threads (tests/targets/threads: the main thread plus
 * long-lived workers), seizes the target and times attach_target__stop +
 * __resume, ROUNDS times with 2 ms of running between: the pause (first
 * interrupt to last resume, from attach_target__pause_stats) and the time
 * until every thread was stopped. Workers either spin ("busy": more
 * runnable threads than CPUs, the worst case, each must get a CPU to
 * stop) or sleep in 1 ms naps ("idle", like most threads of a service).
 * SIGCHLD is blocked, as padrone's programs do, so the tracer wakes on each
 * stop at once, and the benchmark's own thread runs SCHED_FIFO when allowed
 * (as padrone's tracer thread does while it stops and resumes), so that
 * other work on the machine does not delay its requests. The machine's load
 * average is printed with each line: other work on the CPUs still delays
 * the target's threads on their way to the stop, and no tracer can make up
 * for that.
 *
 * usage: attach-pause [ROUNDS]          (default 300 per line)
 * output: one line per thread count and kind,
 *   stop-the-world threads=N busy p50=…ms p99=…ms max=…ms stop-p50=…ms stop-p99=…ms p99/goal=… load=…
 * Goal: p99 <= 1 ms at 8 threads.
 */
#include "attach/attach.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *builddir(void)
{
	const char *d = getenv("top_builddir");
	return d && *d ? d : ".";
}

/* Start the threads target with `workers` workers; returns its pid. */
static pid_t start_target(int workers, bool idle, FILE **out)
{
	char path[4096], n[16];
	int fds[2];
	snprintf(path, sizeof path, "%s/tests/targets/threads", builddir());
	snprintf(n, sizeof n, "%d", workers);
	if (pipe(fds) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl(path, "threads", "-n", "0", "-l", n, "-t", "100000", idle ? "-S" : (char *)NULL,
		      (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	*out = fdopen(fds[0], "r");
	char line[128];
	if (!*out || !fgets(line, sizeof line, *out) || strncmp(line, "ready", 5) != 0) {
		fprintf(stderr, "attach-pause: %s did not start\n", path);
		return -1;
	}
	return pid;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct_ms(uint64_t *v, int n, double p)
{
	int i = (int)(p * (n - 1) + 0.5);
	return (double)v[i] / 1e6;
}

static double loadavg(void)
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

static int run(int threads, bool idle, int rounds)
{
	FILE *out;
	pid_t pid = start_target(threads - 1, idle, &out);
	if (pid < 0)
		return 1;
	struct timespec settle = { 0, 200000000 };
	nanosleep(&settle, NULL);	/* let every worker get going */
	struct attach_target *t;
	struct attach_error e;
	struct attach_opts o = { .sz = sizeof o, .stop_timeout_ms = 10000 };
	if (attach_seize(pid, &o, &t, &e) < 0) {
		fprintf(stderr, "attach-pause: %s\n", e.msg);
		return 1;
	}
	pid_t tids[128];
	int n = attach_target__threads(t, tids, 128);
	uint64_t *pause = calloc((size_t)rounds, sizeof(*pause));
	uint64_t *stop = calloc((size_t)rounds, sizeof(*stop));
	for (int i = 0; i < rounds; i++) {
		if (attach_target__stop(t) < 0 || attach_target__resume(t) < 0) {
			fprintf(stderr, "attach-pause: %s\n", attach_target__errmsg(t));
			return 1;
		}
		struct attach_pause_stats st;
		attach_target__pause_stats(t, &st);
		pause[i] = st.last_ns;
		stop[i] = st.last_stop_ns;
		struct timespec gap = { 0, 2000000 };	/* let it run between pauses */
		nanosleep(&gap, NULL);
	}
	attach_target__detach(t);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	fclose(out);
	qsort(pause, (size_t)rounds, sizeof(*pause), cmp_u64);
	qsort(stop, (size_t)rounds, sizeof(*stop), cmp_u64);
	double p99 = pct_ms(pause, rounds, 0.99);
	printf("stop-the-world threads=%d %s p50=%.3fms p99=%.3fms max=%.3fms stop-p50=%.3fms "
	       "stop-p99=%.3fms p99/goal=%.2f load=%.1f%s\n", n, idle ? "idle" : "busy",
	       pct_ms(pause, rounds, 0.5), p99, (double)pause[rounds - 1] / 1e6,
	       pct_ms(stop, rounds, 0.5), pct_ms(stop, rounds, 0.99), p99 / 1.0, loadavg(),
	       threads == 8 ? (p99 <= 1.0 ? " (goal met)" : " (goal missed)") : "");
	fflush(stdout);
	free(pause);
	free(stop);
	return 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 300;
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	struct sched_param sp = { .sched_priority = 1 };
	sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp);	/* not the target */
	static const int counts[] = { 1, 8, 64 };
	int bad = 0;
	for (int idle = 0; idle < 2; idle++)
		for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
			bad |= run(counts[i], idle, rounds);
	return bad;
}
