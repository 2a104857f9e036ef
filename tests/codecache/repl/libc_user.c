/* Replacement code that needs what a loader must provide: calls into the
 * target's libc (through stubs when out of reach), its data through the
 * GOT, string literals and tables in .rodata, pointers in .data.rel.ro
 * (R_X86_64_64), initialized .data, .bss, a COMMON symbol and a static
 * helper. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;
int cc_common_counter __attribute__((common));
static int calls;			/* .bss */
static int weights[4] = { 3, 5, 7, 11 };	/* .data */

static int twice(int x) { return 2 * x; }
static int square(int x) { return x * x; }
static int (*const ops[])(int) = { twice, square };	/* .data.rel.ro */

/* Writes "NAME=<n>:<len>" into buf; returns a number built from all of it. */
int cc_describe(char *buf, size_t size, const char *name, int n)
{
	calls++;
	cc_common_counter += 2;
	snprintf(buf, size, "%s=%d:%zu", name, n, strlen(name));
	int r = ops[n & 1](n) + weights[n & 3] + (int)strlen(buf);
	return r + (environ != NULL) * 1000 + calls * 10000 + cc_common_counter * 100000;
}

int cc_other(int x) { return x + 1; }
