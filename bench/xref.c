/* xref: what the side-entry check costs a patch in libc.
 *
 * Before patching a function's entry, codecache/ refuses when code anywhere
 * in its module branches into the bytes the jump overwrites; that needs an
 * index of the module's branches (a sweep of its code, the jump tables of
 * every function with an indirect jmp), made once per module and kept for
 * the session (struct cc_xref). Here a target (cc_leaf) is seized and libc's
 * puts is "replaced" in a dry run (planning and every check, nothing
 * written): ROUNDS times with a fresh index (the first patch of a session
 * in libc) and ROUNDS times with a kept one. The difference is the index;
 * CPU time (this process) is given beside wall time, which a busy machine
 * inflates.
 *
 * usage: xref CC_LEAF MID_OTHER_O [ROUNDS]    Goal: libc indexed in < 0.3 s
 * of CPU.
 */
#include "attach/attach.h"
#include "codecache/codecache.h"
#include "bench/median.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double secs(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct ctx {
	struct attach_target *t;
	struct cc_syms *sy;
	struct cc_image *im;
	struct cc_func fn;
};

/* One dry run of replacing puts, with the given index (NULL: a fresh one
 * inside the cache); wall and CPU seconds. */
static int dry_run(struct ctx *x, struct cc_xref *xref, double *wall, double *cpu)
{
	struct cc_cache_opts co = { .sz = sizeof co, .xref = xref };
	struct cc_patch_opts po = { .sz = sizeof po, .dry_run = true };
	struct cc_cache *c;
	struct cc_error err;

	double w0 = secs(CLOCK_MONOTONIC), c0 = secs(CLOCK_PROCESS_CPUTIME_ID);
	if (cc_cache__open(x->t, &co, &c, &err) < 0) {
		fprintf(stderr, "xref: %s\n", err.msg);
		return -1;
	}
	int rc = cc_cache__replace(c, &x->fn, x->im, cc_syms__resolve, x->sy, &po);
	if (rc < 0)
		fprintf(stderr, "xref: %s\n", cc_cache__errmsg(c));
	cc_cache__close(c);
	*wall = secs(CLOCK_MONOTONIC) - w0;
	*cpu = secs(CLOCK_PROCESS_CPUTIME_ID) - c0;
	return rc;
}

int main(int argc, char **argv)
{
	int rounds = argc > 3 ? atoi(argv[3]) : 5;
	struct attach_error aerr;
	struct cc_error err;
	struct ctx x = { 0 };

	if (argc < 3 || rounds < 1) {
		fprintf(stderr, "usage: xref CC_LEAF MID_OTHER_O [ROUNDS]\n");
		return 2;
	}
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", 1);
		dup2(null, 1);
		execl(argv[1], argv[1], "50", (char *)NULL);
		_exit(127);
	}
	usleep(300000);
	struct cc_image_opts io = { .sz = sizeof io, .symbol = "mid" };
	if (attach_seize(pid, NULL, &x.t, &aerr) < 0 || cc_syms__open(pid, &x.sy, &err) < 0 ||
	    cc_image__open(argv[2], &io, &x.im, &err) < 0 || cc_syms__func(x.sy, "puts", &x.fn, &err) < 0) {
		fprintf(stderr, "xref: %s\n", x.t ? err.msg : aerr.msg);
		kill(pid, SIGKILL);
		return 1;
	}
	double fresh_w[64], fresh_c[64], kept_w[64], kept_c[64];
	struct cc_xref *xref;
	rounds = rounds > 64 ? 64 : rounds;
	cc_xref__new(&xref);
	int rc = dry_run(&x, xref, &fresh_w[0], &fresh_c[0]);	/* fills xref */
	for (int i = 0; i < rounds && rc == 0; i++)
		rc = dry_run(&x, NULL, &fresh_w[i], &fresh_c[i]);
	for (int i = 0; i < rounds && rc == 0; i++)
		rc = dry_run(&x, xref, &kept_w[i], &kept_c[i]);
	cc_xref__free(xref);
	cc_image__free(x.im);
	cc_syms__free(x.sy);
	attach_target__detach(x.t);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (rc < 0)
		return 1;
	double fw = bench_median(fresh_w, rounds), fc = bench_median(fresh_c, rounds);
	double kw = bench_median(kept_w, rounds), kc = bench_median(kept_c, rounds);
	printf("xref   dry run of a patch of libc's puts, median of %d: index made %.1f ms wall "
	       "%.1f ms CPU, index kept %.1f ms wall %.1f ms CPU\n", rounds, fw * 1e3, fc * 1e3,
	       kw * 1e3, kc * 1e3);
	printf("xref   libc's index: %.1f ms wall, %.1f ms CPU  goal CPU < 300 ms: %s\n",
	       (fw - kw) * 1e3, (fc - kc) * 1e3, fc - kc < 0.3 ? "met" : "MISSED");
	return 0;
}
