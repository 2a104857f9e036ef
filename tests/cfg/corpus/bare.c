/* A program that exports nothing: no stdout/stderr (their copy
 * relocations would put symbols in .dynsym's hashed part), no symbol
 * asked for by a library. Built non-PIE, its .gnu.hash hashes nothing and
 * says so with a symoffset that counts no symbol, while .dynsym holds the
 * imports the PLT slots name. Its cold parts call abort through the PLT:
 * unnamed, abort would seem to return and the cold part to run into the
 * next function. bare_fatal, from a library of the corpus, does not
 * return either, which only the compiler's layout tells. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

volatile int bare_sink = 1;

/* in libcorpusfatal.so (fatal.c) */
__attribute__((noreturn)) void bare_fatal(const char *msg);

/* a leaf: its cold part starts in a function's entry state */
NOINLINE long bare_sum(const long *v, int n)
{
	long s = 0;
	for (int i = 0; i < n; i++) {
		if (__builtin_expect(v[i] > 1000000, 0))
			abort();
		s += v[i];
	}
	return s;
}

/* with a frame: its cold part does not */
NOINLINE long bare_scale(long *v, int n, const char *tag)
{
	long s = (long)strlen(tag);
	for (int i = 0; i < n; i++) {
		if (__builtin_expect(v[i] < -1000000, 0)) {
			s += (long)strlen(tag + 1);
			abort();
		}
		v[i] = v[i] * bare_sink + s;
	}
	return bare_sum(v, n) + s;
}

/* ends in the call to bare_fatal: nothing after it in the function */
NOINLINE int bare_check(int x)
{
	if (x > 1000000)
		bare_fatal("bare: too large\n");
	return x * 3;
}

NOINLINE int bare_switch(int x)
{
	switch (x) {
	case 0: return bare_sink + 3;
	case 1: return bare_sink * 7;
	case 2: return bare_sink - 11;
	case 3: bare_sink++; return 19;
	case 4: return bare_sink ^ 23;
	case 5: return bare_sink + 29;
	case 6: return bare_sink * 31;
	case 7: bare_sink--; return 37;
	default: return -1;
	}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	long v[8], s = 0;
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 8; k++)
			v[k] = i + k;
		s += bare_scale(v, 8, argv[0]) + bare_switch(i % 10) + bare_check(i);
	}
	printf("checksum %ld\n", s);
	return 0;
}
