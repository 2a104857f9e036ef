/* The corpus program: runs every part N times and prints a checksum.
 * With "wait", prints "ready" and waits for SIGUSR1 first (so a test can
 * read its code from memory while it is alive), then runs. */
#include "corpus.h"

#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile int corpus_sink = 1;
static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	if (argc > 2 && strcmp(argv[2], "wait") == 0) {
		/* a test that fails before it lets us run must not leave us */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sigset_t block, old;
		sigemptyset(&block);
		sigaddset(&block, SIGUSR1);
		sigprocmask(SIG_BLOCK, &block, &old);
		signal(SIGUSR1, on_usr1);
		printf("ready\n");
		fflush(stdout);
		while (!go)
			sigsuspend(&old);
	}
	long s = switches_run(n) + loops_run(n) + irreducible_run(n) + noreturn_run(n) +
		 tailcalls_run(n) + cold_run(n) + cleanup_run(n);
	printf("checksum %ld\n", s);
	return 0;
}
