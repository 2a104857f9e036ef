/* Irreducible control flow: a loop entered in its middle by goto. */
#include "corpus.h"

NOINLINE long irreducible(int n, int start_inside)
{
	long s = 0;
	int i = 0;
	if (start_inside)
		goto inside;
	for (;;) {
		s += i * 3;
		if (++i >= n)
			break;
inside:
		s ^= i + corpus_sink;
		if (s & 1)
			s++;
		if (++i >= n)
			break;
	}
	return s;
}

NOINLINE long irreducible2(int n, int mode)
{
	/* two blocks jumping to each other, both entered from outside */
	long s = 0;
	int i = 0;
	if (mode & 1)
		goto b;
a:
	s += i++;
	if (i < n)
		goto b;
	return s;
b:
	s ^= (long)i++ * corpus_sink;
	if (i < n)
		goto a;
	return s;
}

long irreducible_run(int n)
{
	return irreducible(n, n & 1) + irreducible(n, 0) + irreducible2(n, n) +
	       irreducible2(n, n + 1);
}
