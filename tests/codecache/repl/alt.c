/* Replacements for corpus functions, with visibly different results. */
int cc_switch(int x)
{
	return x * 100 + 1;
}

int cc_callee(int x)
{
	return x * 1000;
}

static long fib_iter(int n)
{
	long a = 0, b = 1;
	for (int i = 0; i < n; i++) {
		long t = a + b;
		a = b;
		b = t;
	}
	return a;
}

long cc_fib(int n)
{
	return fib_iter(n) + 1000000;
}
