/* attach-pause: how long stop-the-world stops a live process.
 *
 * For 1, 8 and 64 workers (tests/targets/threads: the main thread, asleep
 * in 1 ms naps, plus long-lived workers), seizes the target and times
 * attach_target__stop + __resume ROUNDS times with 2 ms of running between.
 * Workers either spin ("busy": more runnable threads than CPUs, the worst
 * case, each must get a CPU to stop) or sleep in 1 ms naps ("napping", like
 * most threads of a service). Measured and printed as bench/pause.h says,
 * the same way as codecache-pause: the pause is attach/'s count (first
 * interrupt to last resume), "to-stop" the time until every thread was
 * stopped; this thread runs SCHED_FIFO, so the pause also holds the hand-
 * over of the resume request from it to the tracer thread.
 *
 * usage: attach-pause [ROUNDS [WORKERS [busy|napping]]]
 *        (default 300 per line; all lines)
 * Goal: p99 <= 1 ms at 8 workers (9 threads), busy and napping.
 */
#include "attach/attach.h"
#include "bench/pause.h"

#include <sys/wait.h>

static const char *builddir(void)
{
	const char *d = getenv("top_builddir");
	return d && *d ? d : ".";
}

/* Start the threads target with `workers` workers; returns its pid. */
static pid_t start_target(int workers, bool nap, FILE **out)
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
		execl(path, "threads", "-n", "0", "-l", n, "-t", "100000", nap ? "-S" : (char *)NULL,
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

/* One line; -1 on failure, else 1 when it misses the goal. */
static int run(int workers, bool nap, int rounds, double *others)
{
	FILE *out;
	pid_t pid = start_target(workers, nap, &out);
	if (pid < 0)
		return -1;
	pause_nap_ms(200);	/* let every worker get going */
	struct attach_target *t;
	struct attach_error e;
	struct attach_opts o = { .sz = sizeof o, .stop_timeout_ms = 10000 };
	if (attach_seize(pid, &o, &t, &e) < 0) {
		fprintf(stderr, "attach-pause: %s\n", e.msg);
		return -1;
	}
	int n = attach_target__threads(t, NULL, 0);
	uint64_t *pause = calloc((size_t)rounds, sizeof(*pause));
	uint64_t *stop = calloc((size_t)rounds, sizeof(*stop));
	struct pause_load load;
	pause_load_start(&load, pid);
	for (int i = 0; i < rounds; i++) {
		pause_nap_ms(2);	/* let it run between pauses */
		if (attach_target__stop(t) < 0 || attach_target__resume(t) < 0) {
			fprintf(stderr, "attach-pause: %s\n", attach_target__errmsg(t));
			return -1;
		}
		struct attach_pause_stats st;
		attach_target__pause_stats(t, &st);
		pause[i] = st.last_ns;
		stop[i] = st.last_stop_ns;
	}
	*others = pause_load_others(&load);
	attach_target__detach(t);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	fclose(out);
	int missed = pause_print("attach stop+resume", workers, nap ? "napping" : "busy", n, pause,
				 stop, (size_t)rounds, *others);
	free(pause);
	free(stop);
	return missed;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 300;
	int only = argc > 2 ? atoi(argv[2]) : 0;
	const char *kind = argc > 3 ? argv[3] : NULL;
	static const int counts[] = { 1, 8, 64 };
	int missed = 0, failed = 0;
	double worst = 0;
	int goal_lines = 0;

	if (rounds < 1)
		rounds = 300;
	pause_setup("attach-pause");
	for (int nap = 0; nap < 2; nap++)
		for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
			if (!pause_wanted(counts[i], nap, only, kind))
				continue;
			double others = 0;
			int r = run(counts[i], nap, rounds, &others);
			if (r < 0)
				failed = 1;
			else if (r > 0)
				missed++;
			if (counts[i] == PAUSE_GOAL_AT) {
				goal_lines += 1;
				if (others > worst)
					worst = others;
			}
		}
	pause_verdict("attach-pause", goal_lines, missed, worst);
	return failed;
}
