/* plt_ifunc: a target whose hot path calls a glibc IFUNC (strcasecmp)
 * through its own PLT, in a loop.
 *
 * glibc binds strcasecmp's GOT slot to the variant it chose for this CPU
 * (__strcasecmp_avx, _sse42, ...), so the slot no longer holds anything
 * named strcasecmp: only the stub's relocation says strcasecmp@plt.
 * exit@plt is called only for a bad option: without BIND_NOW its slot
 * stays unbound (lazy binding).
 *
 * usage: plt_ifunc [-d SECONDS] [-w WORK] [-e TICK]
 *   -d SECONDS   run that long, print "done ticks N" and exit 0 (default 0: forever)
 *   -w WORK      strcasecmp calls per tick (default 1000000)
 *   -e TICK      print the line tick TICK must show (with the same -w), exit
 *
 * output (line-buffered):
 *   ready PID                         once, first
 *   tick N checksum X                 after each tick; X = compare_words(N, WORK),
 *                                     so `plt_ifunc -e N -w WORK` checks it
 *   done ticks N                      at the end of -d
 */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char *const words[] = {
	"alpha", "ALPHA", "Bravo", "bravo", "charlie", "CharliE", "delta", "echo", "Echo", "fox",
};
#define NWORDS (sizeof words / sizeof words[0])

/* noipa: the calls stay real calls, each through strcasecmp@plt */
__attribute__((noipa)) unsigned long compare_words(unsigned long seed, long calls)
{
	unsigned long sum = seed;
	for (long i = 0; i < calls; i++) {
		const char *a = words[(seed + (unsigned long)i) % NWORDS];
		const char *b = words[(seed * 7 + (unsigned long)i * 3) % NWORDS];
		int c = strcasecmp(a, b);
		sum = sum * 31 + (unsigned long)(c < 0 ? 1 : c > 0 ? 2 : 3);
	}
	return sum;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double duration = 0;
	long work = 1000000, expect = -1;
	int c;

	while ((c = getopt(argc, argv, "d:w:e:")) != -1) {
		switch (c) {
		case 'd': duration = atof(optarg); break;
		case 'w': work = atol(optarg); break;
		case 'e': expect = atol(optarg); break;
		default:
			fprintf(stderr, "usage: plt_ifunc [-d SECONDS] [-w WORK] [-e TICK]\n");
			exit(2);	/* exit@plt: bound only here, lazily */
		}
	}
	if (expect >= 0) {
		printf("tick %ld checksum %lx\n", expect, compare_words((unsigned long)expect, work));
		return 0;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %d\n", (int)getpid());
	double start = now_s();
	long tick;
	for (tick = 1; duration <= 0 || now_s() - start < duration; tick++)
		printf("tick %ld checksum %lx\n", tick, compare_words((unsigned long)tick, work));
	printf("done ticks %ld\n", tick - 1);
	return 0;
}
