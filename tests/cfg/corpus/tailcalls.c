/* Tail calls: to a local function, to a library function through the PLT,
 * mutual recursion made into jumps, a conditional tail call. */
#include "corpus.h"

#include <stdlib.h>
#include <string.h>

NOINLINE long tc_leaf(long x)
{
	return x * 3 + corpus_sink;
}

NOINLINE long tc_forward(long x)
{
	return tc_leaf(x + 1);
}

NOINLINE long tc_choose(long x)
{
	if (x & 1)
		return tc_leaf(x);
	return tc_forward(x >> 1);
}

NOINLINE size_t tc_plt(const char *s)
{
	return strlen(s);
}

NOINLINE long tc_odd(long x);

NOINLINE long tc_even(long x)
{
	if (x <= 0)
		return 1;
	return tc_odd(x - 1);
}

NOINLINE long tc_odd(long x)
{
	if (x <= 0)
		return 0;
	return tc_even(x - 1);
}

long tailcalls_run(int n)
{
	long s = 0;
	for (int i = 0; i < n; i++)
		s += tc_choose(i) + (long)tc_plt(i & 1 ? "abc" : "de") + tc_even(i % 9);
	return s;
}
