/* execer: runs a while, then calls exec (the exec-during-an-operation case).
 *
 * usage: execer [-d DELAY_MS] [-t THREADS] [-x] PROGRAM [ARGS...]
 *   -d DELAY_MS  exec PROGRAM after this long (default 500)
 *   -t THREADS   busy threads running meanwhile (default 0); exec kills them
 *   -x           exec from one of those threads, not the main thread (the
 *                kernel then gives the exec'ing thread the process's PID)
 *
 * output (line-buffered):
 *   ready PID
 *   tick N             every 10 ms until the exec
 *   exec PROGRAM       just before execv(PROGRAM, ARGS) (same PID afterwards)
 *   error exec: ...    if exec failed (exit 127)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char **prog;
static volatile int go_exec;

static void do_exec(void)
{
	printf("exec %s\n", prog[0]);
	fflush(stdout);
	execv(prog[0], prog);
	printf("error exec: %s\n", strerror(errno));
	fflush(stdout);
	_exit(127);
}

static void *busy(void *arg)
{
	volatile unsigned long x = 0;
	for (;;) {
		x++;
		if (arg && go_exec)
			do_exec();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	long delay_ms = 500;
	int nthreads = 0, from_thread = 0, c;

	while ((c = getopt(argc, argv, "+d:t:x")) != -1) {
		switch (c) {
		case 'd': delay_ms = atol(optarg); break;
		case 't': nthreads = atoi(optarg); break;
		case 'x': from_thread = 1; break;
		default:
			fprintf(stderr, "usage: execer [-d DELAY_MS] [-t THREADS] [-x] PROGRAM [ARGS...]\n");
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "execer: no PROGRAM\n");
		return 2;
	}
	prog = argv + optind;
	if (from_thread && nthreads == 0)
		nthreads = 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < nthreads; i++) {
		pthread_t th;
		pthread_create(&th, NULL, busy, from_thread && i == 0 ? (void *)1 : NULL);
	}
	printf("ready %d\n", (int)getpid());
	for (long tick = 1; tick * 10 < delay_ms; tick++) {
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
		printf("tick %ld\n", tick);
	}
	if (from_thread) {
		go_exec = 1;
		for (;;)
			pause();
	}
	do_exec();
	return 0;
}
