/* cc_leaf: a thread that spends its time in leaf(), called by mid(), the
 * function padrone replaces; for the stack checks of restore and replace.
 *
 * cc_leaf [MS]: main calls mid(i) for i = 0, 1, ...; mid returns leaf(i) + 1,
 * leaf sleeps MS ms (default 300) and returns 3 * i. Each call prints
 * "leaf: called from 0xRA (mid|elsewhere)" as leaf starts to sleep (RA its
 * return address: elsewhere once mid is replaced), then "round I ok" (or
 * "round I BAD R" if mid returned something else). A replacement of mid
 * freed while leaf is to return into it kills the process or prints BAD.
 * "ready" comes first.
 *
 * Built three ways: plain (the test deletes the file once it runs, as a
 * package upgrade does), with gcc -static (no .eh_frame_hdr), and without
 * unwind tables (no stack walker gets past leaf).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long sleep_ms = 300;

__attribute__((noipa)) long leaf(long x)
{
	uintptr_t ra = (uintptr_t)__builtin_return_address(0);
	extern long mid(long);
	struct timespec ts = { sleep_ms / 1000, (sleep_ms % 1000) * 1000000 };

	printf("leaf: called from %#lx (%s)\n", (unsigned long)ra,
	       ra > (uintptr_t)mid && ra < (uintptr_t)mid + 64 ? "mid" : "elsewhere");
	nanosleep(&ts, NULL);
	return 3 * x;
}

__attribute__((noipa)) long mid(long x)
{
	return leaf(x) + 1;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		sleep_ms = atol(argv[1]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	for (long i = 0;; i++) {
		long r = mid(i);
		if (r == 3 * i + 1)
			printf("round %ld ok\n", i);
		else
			printf("round %ld BAD %ld\n", i, r);
	}
}
