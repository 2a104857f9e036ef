/* libc's strtod, replaced live in a program padrone did not build (mawk):
 * the same conversion (glibc's own __strtod_internal), plus a count of the
 * calls, which the test reads to see that the replacement runs. */
extern double __strtod_internal(const char *nptr, char **endptr, int group);

unsigned long cc_strtod_calls;	/* the only data: first in the data block */

double strtod(const char *restrict nptr, char **restrict endptr)
{
	cc_strtod_calls++;
	return __strtod_internal(nptr, endptr, 0);
}
