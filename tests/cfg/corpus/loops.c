/* Loops: nested to depth 3, while, do-while, break/continue, a loop with
 * two back edges, loops over arrays. */
#include "corpus.h"

static int grid[16][16][4];

NOINLINE long loop_nest3(int n)
{
	long s = 0;
	for (int i = 0; i < n && i < 16; i++)
		for (int j = 0; j < 16; j++)
			for (int k = 0; k < 4; k++) {
				grid[i][j][k] += i * j - k + corpus_sink;
				s += grid[i][j][k];
			}
	return s;
}

NOINLINE long loop_while(unsigned x)
{
	long steps = 0;
	while (x != 1 && steps < 1000) {
		x = (x & 1) ? 3 * x + 1 : x / 2;
		steps++;
	}
	return steps;
}

NOINLINE long loop_dowhile(int n)
{
	long s = 0;
	int i = 0;
	do {
		s += i * corpus_sink;
		if (i % 7 == 3)
			continue;
		s ^= i;
		if (s > 1000000)
			break;
	} while (++i < n);
	return s;
}

NOINLINE long loop_two_latches(int n)
{
	long s = 0;
	int i = 0;
again:
	s += i;
	if (i < n && (i & 1)) {
		i += 3;
		goto again;
	}
	if (i < n) {
		i += 1;
		corpus_sink++;
		goto again;
	}
	return s;
}

NOINLINE long loop_sibling(int n)
{
	long s = 0;
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < i % 5; j++)
			s += j * corpus_sink;
		for (int j = 0; j < i % 3; j++)
			s -= j;
	}
	return s;
}

long loops_run(int n)
{
	return loop_nest3(n % 17) + loop_while((unsigned)n + 27) + loop_dowhile(n) +
	       loop_two_latches(n) + loop_sibling(n);
}
