/* Calls that do not return: by name (exit, abort, __assert_fail, error,
 * __stack_chk_fail), through a function that only exits (found by
 * analysis: no attribute tells the caller), by the exit and exit_group
 * system calls, and through two mutually recursive functions that each
 * exit or call the other. No fallthrough must follow them. */
#include "corpus.h"

#include <assert.h>
#include <error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Deliberately without __attribute__((noreturn)). */
NOINLINE void die_quietly(int code)
{
	fflush(stdout);
	_exit(code);
}

NOINLINE void die_by_syscall(int code)
{
	for (;;)
		__asm__ volatile("syscall" : : "a"(231), "D"(code) : "rcx", "r11", "memory");
}

/* exit, not exit_group: the thread alone ends, and it does not return */
NOINLINE void die_by_exit(int code)
{
	for (;;)
		__asm__ volatile("syscall" : : "a"(60), "D"(code) : "rcx", "r11", "memory");
}

/* Neither returns, yet each has a path to the other: a fixpoint over the
 * call graph that takes the one being analysed as returning says both
 * return. */
NOINLINE void spin_odd(int n);

NOINLINE void spin_even(int n)
{
	if (n <= 0)
		die_quietly(6);
	spin_odd(n - 1);
}

NOINLINE void spin_odd(int n)
{
	if (n <= 0)
		die_by_exit(7);
	spin_even(n - 1);
}

NOINLINE int check_or_die(int x)
{
	if (x < 0)
		die_quietly(3);
	if (x > 1000000)
		die_by_syscall(4);
	if (x == 999999)
		spin_even(x);
	if (x == 999998)
		die_by_exit(5);
	return x * 2;
}

NOINLINE int check_assert(int x)
{
	assert(x >= 0);
	if (x == 123456789)
		abort();
	if (x == 987654321)
		error(2, 0, "impossible %d", x);
	return x + 1;
}

NOINLINE int check_buffer(const char *s)
{
	char buf[32];
	strncpy(buf, s, sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = 0;
	if (buf[0] == '!')
		exit(5);
	return (int)strlen(buf);
}

long noreturn_run(int n)
{
	long s = 0;
	for (int i = 0; i < n; i++)
		s += check_or_die(i) + check_assert(i) + check_buffer(i & 1 ? "odd" : "even");
	return s;
}
