/* leaver: exits (or execs) the moment its clock_nanosleep gets its own
 * first bytes back: in the middle of a restore of that function, while the
 * restore waits for a thread still sleeping in the replacement to leave it.
 *
 * usage: leaver [PROGRAM ARGS...]
 *   without PROGRAM: exit(0) when clock_nanosleep is restored
 *   with PROGRAM:    execv(PROGRAM, ARGS) then instead (same PID)
 *
 * A sleeper thread calls clock_nanosleep for 300 ms over and over (so that,
 * once replaced, it sleeps inside the replacement); the main thread watches
 * clock_nanosleep's first byte: it must change (replaced), then come back.
 *
 * output (line-buffered):
 *   ready PID
 *   tick N          after each of the sleeper's sleeps
 *   replaced        when the first byte changed
 *   leaving         when it came back, just before exit or exec
 *   error exec: ... if exec failed (exit 127)
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *sleeper(void *arg)
{
	struct timespec ts = { 0, 300000000 };
	(void)arg;
	for (long tick = 1;; tick++) {
		clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		printf("tick %ld\n", tick);
	}
	return NULL;
}

/* Until the first byte of f is (changed: is not) was. */
static void wait_byte(const volatile unsigned char *f, unsigned char was, int changed)
{
	while ((*f != was) != changed)
		sched_yield();
}

int main(int argc, char **argv)
{
	const volatile unsigned char *f = (const volatile unsigned char *)(void *)&clock_nanosleep;
	unsigned char orig = *f;
	pthread_t th;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %d\n", (int)getpid());
	pthread_create(&th, NULL, sleeper, NULL);
	wait_byte(f, orig, 1);
	printf("replaced\n");
	wait_byte(f, orig, 0);
	printf("leaving\n");
	if (argc < 2)
		_exit(0);
	execv(argv[1], argv + 1);
	printf("error exec: %s\n", strerror(errno));
	return 127;
}
