/* cfg_noreturn: a call through the PLT to a library's noreturn function
 * (libcfg_noreturn.so's lib_die), at the very end of checked_double, whose
 * next bytes are another function's. Built without unwind tables, so no
 * FDE ends checked_double: only the library's code says the call does not
 * come back. Prints "ready", then "round N ok" every 50 ms. */
#include <stdio.h>
#include <time.h>

__attribute__((noreturn)) void lib_die(const char *why);

__attribute__((noinline)) int checked_double(int x)
{
	if (x < 0)
		lib_die("negative");
	return 2 * x;
}

__attribute__((noinline)) int after_checked(int x)
{
	int s = 0;
	for (int i = 0; i < x; i++)
		s += i ^ x;
	return s;
}

int main(void)
{
	printf("ready\n");
	fflush(stdout);
	for (int round = 1;; round++) {
		int ok = checked_double(round) == 2 * round && after_checked(3) == 3 + 2 + 1;
		printf("round %d %s\n", round, ok ? "ok" : "BAD");
		fflush(stdout);
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
}
