/* The corpus program: runs every part N times and prints a checksum.
 * With "wait", prints "ready" and waits for a line on stdin first (so a
 * test can read its code from memory while it is alive), then runs. */
#include "corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile int corpus_sink = 1;

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	if (argc > 2 && strcmp(argv[2], "wait") == 0) {
		char line[64];
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	long s = switches_run(n) + loops_run(n) + irreducible_run(n) + noreturn_run(n) +
		 tailcalls_run(n) + cold_run(n);
	printf("checksum %ld\n", s);
	return 0;
}
