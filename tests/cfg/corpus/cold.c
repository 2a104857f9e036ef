/* Hot/cold splitting: gcc moves unlikely paths to .text.unlikely as
 * FUNC.cold parts, which are part of the function. */
#include "corpus.h"

#include <stdio.h>
#include <stdlib.h>

__attribute__((cold, noinline)) static void report(const char *what, long v)
{
	fprintf(stderr, "corpus: %s %ld\n", what, v);
}

NOINLINE long cold_split(long *v, int n)
{
	long s = 0;
	for (int i = 0; i < n; i++) {
		if (__builtin_expect(v[i] < 0, 0)) {
			report("negative", v[i]);
			s -= v[i] * corpus_sink;
			continue;
		}
		if (__builtin_expect(v[i] > 1000000, 0)) {
			report("huge", v[i]);
			abort();
		}
		s += v[i];
	}
	return s;
}

long cold_run(int n)
{
	long v[8];
	for (int i = 0; i < 8; i++)
		v[i] = i * n;
	return cold_split(v, 8);
}
