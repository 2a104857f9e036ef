/* cc_fib's fib as it is (noinline, as there): recursive, writing no more
 * registers than the original, so no caller needs a gate. */
__attribute__((noinline)) long fib(long n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}
