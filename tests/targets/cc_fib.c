/* cc_fib: callers that rely on -fipa-ra (GCC's default at -O2).
 *
 * fib is recursive and writes only rax and rdi of the call-clobbered
 * registers; GCC, knowing that, keeps main's loop counter and count of bad
 * results in rdx and rcx across the calls to it (and fib its own values
 * across its recursive call). A replacement that follows the ABI may write
 * those. Each round checks fib(0..20) against a table and prints "round N:
 * ok" (or BAD); with a wrong counter the loop indexes out of the table.
 */
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) long fib(long n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

int main(void)
{
	static const long want[] = { 0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610,
				     987, 1597, 2584, 4181, 6765 };

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("cc_fib: pid %d ready\n", (int)getpid());
	for (long r = 1;; r++) {
		long bad = 0;
		for (int k = 0; k < 21; k++)
			bad += fib(k) != want[k];
		printf("round %ld: %s\n", r, bad ? "BAD" : "ok");
		usleep(20000);
	}
}
