/* elf_names: names defined more than once. Two files of this program each
 * keep a `static int counter`; this file has a static scale() and its
 * library libelf_names.so a global one; and a libc alias is called.
 * Prints "ready", then "round N ok" every 50 ms while every result is
 * right ("round N BAD ..." otherwise). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int bump_b(void);
int lib_scale(int x);

static int counter;

__attribute__((noinline)) int bump_a(void)
{
	return ++counter;
}

__attribute__((noinline)) static int scale(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3;
}

int main(void)
{
	printf("ready\n");
	fflush(stdout);
	for (long round = 1;; round++) {
		int a = bump_a(), b = bump_b(), s = scale((int)round), l = lib_scale((int)round);
		char *dup = strndup("names", 3);
		int ok = a == round && b == 2 * round && s == 3 * round && l == 5 * round + 1 &&
			 dup && !strcmp(dup, "nam");
		free(dup);
		if (ok)
			printf("round %ld ok\n", round);
		else
			printf("round %ld BAD %d %d %d %d\n", round, a, b, s, l);
		fflush(stdout);
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	}
}
