/* libcfg_noreturn.so: a noreturn function of a user's shared library. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noreturn)) void lib_die(const char *why)
{
	fprintf(stderr, "fatal: %s\n", why);
	exit(3);
}
