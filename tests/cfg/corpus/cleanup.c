/* Landing pads: built with -fexceptions, a cleanup variable makes the
 * compiler emit code the unwinder resumes in when a callee throws. No
 * branch reaches it; only the LSDA (.gcc_except_table) says where it is,
 * and gcc -O2 may put it in a .cold part (glibc's stdio functions do). */
#include "corpus.h"

NOINLINE long cleanup_step(long i)
{
	return i * corpus_sink + 1;
}

/* through a pointer: the compiler cannot tell it does not throw */
long (*volatile cleanup_fn)(long) = cleanup_step;

static void release(int *held)
{
	corpus_sink += *held & 1;
}

NOINLINE long with_cleanup(int n)
{
	int held __attribute__((cleanup(release))) = n;
	long s = 0;
	for (int i = 0; i < n; i++)
		s += cleanup_fn(i);
	return s;
}

long cleanup_run(int n)
{
	return with_cleanup(n % 13);
}
