/* codecache-pause: the stop-the-world pause of a live patch.
 *
 * Runs tests/targets/cc_threads with 1, 8 and 64 worker threads (plus its
 * main and blocker threads), busy (each spinning on work()) and napping
 * (1 ms asleep after every 256 calls, like a server's threads), attaches,
 * and replaces work() by
 * tests/codecache/repl/work_alt.o and restores it ROUNDS times. Each patch
 * (replace or restore) reports its stop-the-world time: from the first
 * PTRACE_INTERRUPT to the last resume, thread checks and writes included.
 * Prints p50/p99 per thread count beside attach/'s bare stop+resume. The
 * workers compare every result with a reference; any mismatch fails it.
 * Busy workers outnumbering the CPUs make the pause a scheduling latency:
 * a thread not on a CPU stops only when it next gets one.
 *
 * usage: codecache-pause [ROUNDS]          Goal: p99 <= 1 ms with 8 workers.
 */
#include "attach/attach.h"
#include "codecache/codecache.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *top;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "codecache-pause: %s: %s\n", what, why);
	exit(1);
}

/* Drains the target's output; a mismatch is fatal. */
static void *drain(void *arg)
{
	FILE *f = arg;
	char line[256];
	unsigned long calls, bad;
	int id;

	while (fgets(line, sizeof line, f))
		if (sscanf(line, "worker %d: calls %lu mismatches %lu", &id, &calls, &bad) == 3 && bad)
			die("the target reports", line);
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static double pct_us(uint64_t *v, size_t n, double p)
{
	qsort(v, n, sizeof *v, cmp);
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return (double)v[i] / 1000.0;
}

static void run(int workers, bool nap, int rounds)
{
	char path[4096], nbuf[16], line[256];
	int fds[2];

	snprintf(path, sizeof path, "%s/tests/targets/cc_threads", top);
	snprintf(nbuf, sizeof nbuf, "%d", workers);
	if (pipe(fds) < 0)
		die("pipe", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl(path, path, nbuf, nap ? "nap" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	FILE *out = fdopen(fds[0], "r");
	while (fgets(line, sizeof line, out) && strncmp(line, "ready", 5) != 0)
		;
	pthread_t th;
	pthread_create(&th, NULL, drain, out);

	struct attach_target *t;
	struct attach_error aerr;
	struct cc_cache *c;
	struct cc_syms *sy;
	struct cc_error err;
	struct cc_image *im;
	struct cc_func f;
	struct cc_image_opts io = { .sz = sizeof io, .symbol = "work" };

	if (attach_seize(pid, NULL, &t, &aerr) < 0)
		die("attach", aerr.msg);
	if (cc_cache__open(t, NULL, &c, &err) < 0 || cc_syms__open(pid, &sy, &err) < 0 ||
	    cc_syms__func(sy, "work", &f, &err) < 0)
		die("open", err.msg);
	snprintf(path, sizeof path, "%s/tests/codecache/repl/work_alt.o", top);
	if (cc_image__open(path, &io, &im, &err) < 0)
		die("image", err.msg);

	uint64_t *p = calloc((size_t)rounds * 2, sizeof *p), *bare = calloc((size_t)rounds, sizeof *bare);
	unsigned threads = 0;
	for (int i = 0; i < rounds; i++) {
		struct cc_patch_stats st;
		struct cc_patch_opts o = { .sz = sizeof o, .stats = &st };
		if (cc_cache__replace(c, &f, im, cc_syms__resolve, sy, &o) < 0)
			die("replace", cc_cache__errmsg(c));
		p[2 * i] = st.stop_ns;
		threads = st.threads;
		if (cc_cache__restore(c, f.addr, "work", &o) < 0)
			die("restore", cc_cache__errmsg(c));
		p[2 * i + 1] = st.stop_ns;
		uint64_t t0 = now_ns();
		if (attach_target__stop(t) < 0 || attach_target__resume(t) < 0)
			die("stop", attach_target__errmsg(t));
		bare[i] = now_ns() - t0;
	}
	printf("pause per patch, %2d workers %s (%2u threads, %ld CPUs): p50 %7.1f us  p99 %8.1f us"
	       "   bare stop+resume: p50 %7.1f us  p99 %8.1f us\n", workers,
	       nap ? "napping" : "busy   ", threads, sysconf(_SC_NPROCESSORS_ONLN),
	       pct_us(p, (size_t)rounds * 2, 0.5), pct_us(p, (size_t)rounds * 2, 0.99),
	       pct_us(bare, (size_t)rounds, 0.5), pct_us(bare, (size_t)rounds, 0.99));
	fflush(stdout);
	free(p);
	free(bare);
	cc_image__free(im);
	cc_syms__free(sy);
	cc_cache__close(c);
	attach_target__detach(t);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	pthread_join(th, NULL);
	fclose(out);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 100;
	sigset_t chld;

	top = getenv("top_builddir") ? getenv("top_builddir") : ".";
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);
	static const int workers[] = { 1, 8, 64 };
	for (int nap = 1; nap >= 0; nap--)
		for (size_t i = 0; i < 3; i++)
			run(workers[i], nap, rounds);
	return 0;
}
