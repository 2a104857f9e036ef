/* ustime: redis's own ustime() (server.c: gettimeofday in microseconds),
 * compiled apart: what scripts/soak replaces the running redis-server's
 * ustime by, and back, under load. The same result, so redis must not
 * notice. clock_gettime, not gettimeofday: glibc's gettimeofday is an IFUNC,
 * which a replacement cannot be linked against. */
#include <time.h>

long long ustime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
