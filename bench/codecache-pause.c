/* codecache-pause: the stop-the-world pause of a live patch.
 *
 * Runs tests/targets/cc_threads with 1, 8 and 64 worker threads (plus its
 * main and blocker threads, both asleep), busy (each spinning on work())
 * and napping (1 ms asleep after every 256 calls, like a server's threads),
 * attaches, and replaces work() by tests/codecache/repl/work_alt.o and
 * restores it ROUNDS times, 2 ms of running before each pause. Each patch
 * (replace or restore) reports its stop-the-world time (cc_patch_stats:
 * attach/'s count from the first PTRACE_INTERRUPT to the last resume,
 * thread checks and writes included). A restore then stops the world
 * briefly ("grace looks", the count per restore and the longest of each
 * restore's printed) until every thread has left the code it frees. Beside
 * them, on the same target, a
 * bare attach_target__stop + __resume measured exactly as attach-pause
 * measures it. Both printed as bench/pause.h says. The workers compare
 * every result with a reference; any mismatch fails the run.
 *
 * usage: codecache-pause [ROUNDS [WORKERS [busy|napping]]]
 *        (default 100 rounds, 200 patches, per line; all lines)
 * Goal: p99 <= 1 ms at 8 workers (10 threads), busy and napping.
 */
#include "attach/attach.h"
#include "bench/pause.h"
#include "codecache/codecache.h"

#include <sys/wait.h>

static const char *top;

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

/* Three lines (patch, grace looks, bare); returns how many miss the goal. */
static int run(int workers, bool nap, int rounds, double *others)
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

	struct attach_opts ao = { .sz = sizeof ao, .stop_timeout_ms = 10000 };
	if (attach_seize(pid, &ao, &t, &aerr) < 0)
		die("attach", aerr.msg);
	if (cc_cache__open(t, NULL, &c, &err) < 0 || cc_syms__open(pid, &sy, &err) < 0 ||
	    cc_syms__func(sy, "work", &f, &err) < 0)
		die("open", err.msg);
	snprintf(path, sizeof path, "%s/tests/codecache/repl/work_alt.o", top);
	if (cc_image__open(path, &io, &im, &err) < 0)
		die("image", err.msg);

	size_t np = (size_t)rounds * 2;
	uint64_t *p = calloc(np, sizeof *p), *pstop = calloc(np, sizeof *pstop);
	uint64_t *bare = calloc((size_t)rounds, sizeof *bare);
	uint64_t *bstop = calloc((size_t)rounds, sizeof *bstop);
	uint64_t *look = calloc((size_t)rounds, sizeof *look);
	unsigned threads = 0, looks = 0;
	struct pause_load load;
	pause_load_start(&load, pid);
	for (int i = 0; i < rounds; i++) {
		struct cc_patch_stats st;
		struct cc_patch_opts o = { .sz = sizeof o, .stats = &st };
		pause_nap_ms(2);
		if (cc_cache__replace(c, &f, im, cc_syms__resolve, sy, &o) < 0)
			die("replace", cc_cache__errmsg(c));
		p[2 * i] = st.stop_ns;
		pstop[2 * i] = st.to_stop_ns;
		threads = st.threads;
		pause_nap_ms(2);
		if (cc_cache__restore(c, f.addr, "work", &o) < 0)
			die("restore", cc_cache__errmsg(c));
		p[2 * i + 1] = st.stop_ns;
		pstop[2 * i + 1] = st.to_stop_ns;
		look[i] = st.look_max_ns;
		looks += st.looks;
		pause_nap_ms(2);
		if (attach_target__stop(t) < 0 || attach_target__resume(t) < 0)
			die("stop", attach_target__errmsg(t));
		struct attach_pause_stats ps;
		attach_target__pause_stats(t, &ps);
		bare[i] = ps.last_ns;
		bstop[i] = ps.last_stop_ns;
	}
	*others = pause_load_others(&load);
	const char *kind = nap ? "napping" : "busy";
	char what[32];
	int missed = pause_print("codecache patch", workers, kind, (int)threads, p, pstop, np, *others);
	/* after a restore: brief stops until every thread left the freed code */
	snprintf(what, sizeof what, "  grace looks x%.1f", (double)looks / rounds);
	missed += pause_print(what, workers, kind, (int)threads, look, NULL, (size_t)rounds, *others);
	missed += pause_print("  bare stop+resume", workers, kind, (int)threads, bare, bstop,
			      (size_t)rounds, *others);
	free(look);
	free(p);
	free(pstop);
	free(bare);
	free(bstop);
	cc_image__free(im);
	cc_syms__free(sy);
	cc_cache__close(c);
	attach_target__detach(t);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	pthread_join(th, NULL);
	fclose(out);
	return missed;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 100;
	int only = argc > 2 ? atoi(argv[2]) : 0;
	const char *kind = argc > 3 ? argv[3] : NULL;
	static const int workers[] = { 1, 8, 64 };
	int missed = 0;
	double worst = 0;
	int goal_lines = 0;

	if (rounds < 1)
		rounds = 100;
	top = getenv("top_builddir") ? getenv("top_builddir") : ".";
	pause_setup("codecache-pause");
	for (int nap = 0; nap < 2; nap++)
		for (size_t i = 0; i < sizeof workers / sizeof workers[0]; i++) {
			if (!pause_wanted(workers[i], nap, only, kind))
				continue;
			double others = 0;
			missed += run(workers[i], nap, rounds, &others);
			if (workers[i] == PAUSE_GOAL_AT) {
				goal_lines += 3;
				if (others > worst)
					worst = others;
			}
		}
	pause_verdict("codecache-pause", goal_lines, missed, worst);
	return 0;
}
