/* prof_spawn: starts one busy thread when told to (SIGUSR1), so a test
 * can have a thread born at a chosen moment, e.g. between opening a
 * sampler and starting it. The main thread only sleeps.
 *
 * Prints "ready", "spawned TID" per SIGUSR1, and every 100 ms from each
 * busy thread "spin TID checksum C" (C constant; "BAD checksum" if not).
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t requests;
static volatile unsigned rounds = 20000;

__attribute__((noinline, noclone)) uint64_t prof_spawn_work(uint64_t x)
{
	for (unsigned i = 0; i < rounds; i++)
		x = (x ^ (x >> 5)) * 0xff51afd7ed558ccdull + i;
	return x;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *spin(void *arg)
{
	uint64_t expect = prof_spawn_work(1);
	double last = now();
	long tid = syscall(SYS_gettid);

	(void)arg;
	printf("spawned %ld\n", tid);
	for (;;) {
		if (prof_spawn_work(1) != expect)
			printf("BAD checksum\n");
		if (now() - last >= 0.1) {
			last = now();
			printf("spin %ld checksum %016llx\n", tid, (unsigned long long)expect);
		}
	}
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	requests++;
}

int main(void)
{
	int done = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGUSR1, on_usr1);
	printf("ready\n");
	for (;;) {
		while (done < requests) {
			pthread_t t;
			pthread_create(&t, NULL, spin, NULL);
			done++;
		}
		usleep(10000);
	}
}
