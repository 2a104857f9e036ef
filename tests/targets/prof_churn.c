/* prof_churn: threads that come and go. Two workers are always running;
 * each spins in prof_churn_work for its lifetime (at least one call),
 * checks its result and exits, and the main thread (blocked in join)
 * starts the next one.
 *
 * usage: prof_churn [-l LIFETIME_US] [-r ROUNDS]
 *   -l  how long each worker lives, in microseconds (default 20000); at
 *       20 a worker makes one call and the main thread starts thousands of
 *       threads a second
 *   -r  rounds of prof_churn_work's loop per call (default 20000)
 *
 * Prints "ready", then every 200 ms "threads N checksum C": N workers
 * finished so far, C the (constant) result of one worker's work;
 * "BAD checksum" if a worker computed another.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned rounds = 20000;
static double lifetime_s = 0.02;
static uint64_t expect;
static volatile int bad;

__attribute__((noinline, noclone)) uint64_t prof_churn_work(uint64_t x)
{
	for (unsigned i = 0; i < rounds; i++)
		x = (x ^ (x >> 11)) * 0xbf58476d1ce4e5b9ull + i;
	return x;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
	double t0 = now();
	(void)arg;
	do {
		if (prof_churn_work(7) != expect)
			bad = 1;
	} while (now() - t0 < lifetime_s);
	return NULL;
}

static void options(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "l:r:")) != -1) {
		if (c == 'l')
			lifetime_s = atof(optarg) * 1e-6;
		else if (c == 'r')
			rounds = (unsigned)atol(optarg);
		else
			exit(2);
	}
}

int main(int argc, char **argv)
{
	pthread_t t[2];
	unsigned long done = 0;
	double last = now();

	options(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	expect = prof_churn_work(7);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	printf("ready\n");
	for (int i = 0;; i ^= 1) {
		pthread_join(t[i], NULL);
		done++;
		pthread_create(&t[i], NULL, worker, NULL);
		if (bad) {
			printf("BAD checksum\n");
			bad = 0;
		}
		if (now() - last >= 0.2) {
			last = now();
			printf("threads %lu checksum %016llx\n", done, (unsigned long long)expect);
		}
	}
}
