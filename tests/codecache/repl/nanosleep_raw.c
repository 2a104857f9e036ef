/* clock_nanosleep by its system call alone: a replacement for libc's that
 * behaves the same (0 or the error number), for tests/codecache/leaving.sh,
 * which replaces it in targets that sleep between ticks. */
#include <time.h>

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem)
{
	register long r10 __asm__("r10") = (long)rem;
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(230L), "D"((long)clock), "S"((long)flags), "d"(req), "r"(r10)
			 : "rcx", "r11", "memory");
	return r < 0 ? (int)-r : 0;
}
