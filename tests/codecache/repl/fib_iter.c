/* cc_fib's fib, iterative: it follows the ABI, and writes rcx, rdx and rsi,
 * which cc_fib's callers keep values in across their calls to fib. */
long fib(long n)
{
	long a = 0, b = 1;

	for (long i = 0; i < n; i++) {
		long t = a + b;
		a = b;
		b = t;
	}
	return a;
}
