/* hotfuncs: a small client of libpadrone. Attaches to a running process,
 * samples it, prints its hottest functions and detaches.
 *
 *	usage: hotfuncs PID [SECONDS [N]]
 *
 * Build against an installed libpadrone:
 *	cc -o hotfuncs hotfuncs.c $(pkg-config --cflags --libs padrone)
 */
#ifndef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L	/* sigset_t, pthread_sigmask */
#endif
#include <padrone.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: hotfuncs PID [SECONDS [N]]\n");
		return 2;
	}
	pid_t pid = (pid_t)atoi(argv[1]);
	double seconds = argc > 2 ? atof(argv[2]) : 1.0;
	size_t top = argc > 3 ? (size_t)atoi(argv[3]) : 5;

	/* libpadrone's tracer thread waits for SIGCHLD: block it in every
	 * thread, i.e. here, before any thread exists (see padrone.h). */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);

	struct padrone_session *s = padrone_session__new(NULL);
	if (!s) {
		perror("hotfuncs");
		return 1;
	}
	if (padrone_session__attach(s, pid) < 0) {
		fprintf(stderr, "hotfuncs: %s\n", padrone_session__errmsg(s));
		int status = padrone_session__exit_status(s);
		padrone_session__free(s);
		return status;
	}
	struct padrone_profile_opts opts = { .sz = sizeof(opts), .seconds = seconds };
	if (padrone_session__profile(s, &opts) < 0) {
		fprintf(stderr, "hotfuncs: %s\n", padrone_session__errmsg(s));
		int status = padrone_session__exit_status(s);
		padrone_session__free(s);
		return status;
	}
	const struct padrone_report *r = padrone_session__report(s);
	printf("%llu samples of process %d in %.2f s\n",
	       (unsigned long long)padrone_report__samples(r), (int)padrone_report__pid(r),
	       padrone_report__duration_s(r));
	for (size_t i = 0; i < top && i < padrone_report__count(r); i++) {
		const struct padrone_function *f = padrone_report__function(r, i);
		printf("%6.2f%%  %-30s %s\n", f->self_pct, f->name, f->module);
	}
	padrone_session__free(s);	/* detaches: the process runs on */
	return 0;
}
