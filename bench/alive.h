/* bench/alive.h: a target that prints "alive CALLS bad B" lines
 * (tests/targets/instr_kernel, bench/instr-chase), started with its
 * stdout on a pipe; its work rate read from those lines, per second and
 * per second of its own CPU time. */
#ifndef PADRONE_BENCH_ALIVE_H
#define PADRONE_BENCH_ALIVE_H

#include <dirent.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct target {
	pid_t pid;
	FILE *out;
};

/* The benchmark's name, for its messages (set by main). */
static const char *bench_name = "bench";

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The targets running, killed if the bench exits on an error (exit(1)
 * from a check): a bench never leaves a target behind. */
#define ALIVE_MAX 4
static pid_t alive_pids[ALIVE_MAX];

static inline void kill_alive(void)
{
	for (int i = 0; i < ALIVE_MAX; i++)
		if (alive_pids[i] > 0) {
			kill(alive_pids[i], SIGKILL);
			waitpid(alive_pids[i], NULL, 0);
			alive_pids[i] = 0;
		}
}

static inline void alive_mark(pid_t old, pid_t pid)
{
	for (int i = 0; i < ALIVE_MAX; i++)
		if (alive_pids[i] == old) {
			alive_pids[i] = pid;
			return;
		}
}

static inline int start(struct target *t, char *const argv[])
{
	int p[2];
	static bool registered;

	if (!registered)
		registered = atexit(kill_alive) == 0;

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
	if (t->out)	/* unbuffered: poll() then sees every line not read */
		setvbuf(t->out, NULL, _IONBF, 0);
	if (t->pid > 0)
		alive_mark(0, t->pid);
	return t->pid > 0 && t->out ? 0 : -1;
}

static inline void stop(struct target *t)
{
	kill(t->pid, SIGKILL);
	waitpid(t->pid, NULL, 0);
	alive_mark(t->pid, 0);
	fclose(t->out);
}

/* The next "alive CALLS bad B" line's calls; exits on a wrong result. */
static inline long next_calls(struct target *t)
{
	char line[256];
	long calls, bad;

	while (fgets(line, sizeof line, t->out))
		if (sscanf(line, "alive %ld bad %ld", &calls, &bad) == 2) {
			if (bad) {
				fprintf(stderr, "%s: the target computed %ld wrong results\n",
					bench_name, bad);
				exit(1);
			}
			return calls;
		}
	fprintf(stderr, "%s: the target stopped\n", bench_name);
	exit(1);
}

/* Each thread of pid's time on a CPU and waiting for one, in seconds
 * (schedstat: nanoseconds, unlike the ticks of /proc/PID/stat), handed to
 * fn. */
static inline void each_thread_times(pid_t pid, void (*fn)(void *arg, double run, double delay),
				     void *arg)
{
	char path[320], line[128];
	unsigned long long run, delay;

	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
		FILE *f = fopen(path, "re");
		if (f && fgets(line, sizeof line, f) &&
		    sscanf(line, "%llu %llu", &run, &delay) == 2)
			fn(arg, (double)run / 1e9, (double)delay / 1e9);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
}

static inline void add_run(void *arg, double run, double delay)
{
	(void)delay;
	*(double *)arg += run;
}

/* The CPU time all the target's threads have run, in seconds. */
static inline double cpu_s(pid_t pid)
{
	double sum = 0;

	each_thread_times(pid, add_run, &sum);
	return sum;
}

/* The calls of the first line the target prints from now on (those
 * already waiting skipped): two targets' counts over the same window,
 * each read as its line comes. */
static inline long fresh_calls(struct target *t)
{
	struct pollfd p = { .fd = fileno(t->out), .events = POLLIN };

	while (poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
		next_calls(t);
	return next_calls(t);
}

/* Calls per second over a window of window_s (after a line to settle),
 * and per second of the target's CPU time (what the copy's own code
 * costs, apart from the time it waits or is not scheduled on a busy
 * machine). */
static inline double rate_over(struct target *t, double window_s, double *per_cpu)
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

#endif
