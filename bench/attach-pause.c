/* attach-pause: how long stop-the-world stops a live process.
 *
 * For 1, 8 and 64 threads (tests/targets/threads: the main thread plus
 * busy long-lived workers, all spinning on 2 cores' worth of CPU), seizes
 * the target and times attach_target__stop + __resume: the pause (first
 * interrupt to last resume, from attach_target__pause_stats) and the time
 * until every thread was stopped. SIGCHLD is blocked, as padrone's
 * programs do, so the tracer wakes on each stop at once.
 *
 * usage: attach-pause [ROUNDS]          (default 300 per thread count)
 * output: one line per thread count,
 *   stop-the-world threads=N p50=…ms p99=…ms max=…ms stop-p50=…ms stop-p99=…ms p99/goal=…
 * Goal: p99 <= 1 ms at 8 threads.
 */
#include "attach/attach.h"

#include <errno.h>
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

/* Start the threads target with `workers` busy workers; returns its pid. */
static pid_t start_target(int workers, FILE **out)
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
		execl(path, "threads", "-n", "0", "-l", n, "-t", "100000", (char *)NULL);
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

static int run(int threads, int rounds)
{
	FILE *out;
	pid_t pid = start_target(threads - 1, &out);
	if (pid < 0)
		return 1;
	struct timespec settle = { 0, 200000000 };
	nanosleep(&settle, NULL);	/* let every worker get going */
	struct attach_target *t;
	struct attach_error e;
	if (attach_seize(pid, NULL, &t, &e) < 0) {
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
	printf("stop-the-world threads=%d p50=%.3fms p99=%.3fms max=%.3fms stop-p50=%.3fms "
	       "stop-p99=%.3fms p99/goal=%.2f%s\n", n, pct_ms(pause, rounds, 0.5), p99,
	       (double)pause[rounds - 1] / 1e6, pct_ms(stop, rounds, 0.5),
	       pct_ms(stop, rounds, 0.99), p99 / 1.0, threads == 8 ? (p99 <= 1.0 ? " (goal met)"
									 : " (goal MISSED)") : "");
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
	static const int counts[] = { 1, 8, 64 };
	int bad = 0;
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
		bad |= run(counts[i], rounds);
	return bad;
}
