/* prof_hot: one thread spending nearly all its time in one function,
 * prof_spin, called as main -> prof_unit -> prof_mix -> prof_spin.
 *
 * usage: prof_hot [SECONDS]   (default: run until killed)
 * Prints "ready" once, then every 100 ms "rate R units U checksum C": R
 * work units per second over the last interval (U units), C the checksum
 * of a unit, which must
 * never change ("BAD checksum" if one differs). Built several ways by
 * tests/profile/Makemodule.am (PIE, stripped, without frame info).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t seed = 12345;
static volatile unsigned rounds = 100000;

/* Makes prof_spin a non-leaf, so that built with -fno-omit-frame-pointer it
 * really sets up a frame (gcc skips it in leaves). */
__attribute__((noinline, noclone)) void prof_note(uint64_t x)
{
	__asm__ volatile("" : : "r"(x));
}

__attribute__((noinline, noclone)) uint64_t prof_spin(uint64_t x, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		x = (x ^ (x >> 13)) * 0x9e3779b97f4a7c15ull + i;
		if ((i & 0xffff) == 0)
			prof_note(x);
	}
	return x;
}

__attribute__((noinline, noclone)) uint64_t prof_mix(uint64_t s)
{
	uint64_t r = prof_spin(s, rounds);
	__asm__ volatile("" : "+r"(r));
	return r ^ s;
}

__attribute__((noinline, noclone)) uint64_t prof_unit(void)
{
	uint64_t r = prof_mix(seed);
	__asm__ volatile("" : "+r"(r));
	return r + 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	double limit = argc > 1 ? atof(argv[1]) : 0, t0 = now();
	uint64_t expect = prof_unit();

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	for (;;) {
		double start = now(), t;
		unsigned long units = 0;
		do {
			if (prof_unit() != expect)
				printf("BAD checksum\n");
			units++;
			t = now();
		} while (t - start < 0.1);
		printf("rate %.0f units %lu checksum %016llx\n", (double)units / (t - start),
		       units, (unsigned long long)expect);
		if (limit > 0 && t - t0 >= limit)
			return 0;
	}
}
