/* threads: a multithreaded target with constant thread churn.
 *
 * usage: threads [-d SECONDS] [-n CHURN] [-l LONG] [-w WORK] [-t TICK_MS] [-S] [-X] [-M]
 *   -d SECONDS  run that long, then print "done ..." and exit 0 (default 0: forever)
 *   -n CHURN    short-lived threads alive at once, created and joined
 *               continuously by the main thread (default 4; 0: none)
 *   -l LONG     long-lived worker threads, running until the end (default 2)
 *   -w WORK     iterations of work() per short-lived thread (default 20000)
 *   -t TICK_MS  print a tick line every TICK_MS (default 100)
 *   -S          long-lived threads sleep in 1 ms nanosleeps instead of spinning
 *   -X          the main thread calls pthread_exit after "ready" (its zombie
 *               stays while a new "driver" thread does its work); the
 *               process ends with exit(0) after "done"
 *   -M          signal masks of their own: the main thread blocks SIGUSR2,
 *               long-lived thread k (1, 2, ...) SIGRTMIN+k (the ones past
 *               SIGRTMAX: none); each checks its mask on every round and
 *               counts a change in E (a tracer that restored the wrong one)
 *
 * output (line-buffered):
 *   ready PID                                  once, after the long-lived threads start
 *   tick N created C errors E                  every TICK_MS
 *   done created C errors E                    at the end of -d
 *
 * Every short-lived thread i returns work(i, WORK); the main thread joins
 * it and compares with its own work(i, WORK). Long-lived threads compute
 * work(k) twice and compare. Any mismatch (registers or memory harmed by a
 * tracer) counts in E, which must stay 0. Dies of SIGPIPE when its reader
 * goes away.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long work_iters = 20000;
static atomic_long errors;
static atomic_int stop;
static int sleepy;

__attribute__((noinline)) static uint64_t work(uint64_t seed, long iters)
{
	uint64_t x = seed * 0x2545F4914F6CDD1Dull + 7;
	double acc = 1.0;
	for (long i = 0; i < iters; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		acc += (double)(x >> 40) * 1e-9;
	}
	uint64_t bits;
	memcpy(&bits, &acc, sizeof bits);
	return x ^ bits;
}

static void *short_lived(void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	return (void *)(uintptr_t)work(i, work_iters);
}

static int own_masks;

/* -M: block sig (0: none) on top of what the thread has; keep the result
 * in *want. */
static void block_own(int sig, sigset_t *want)
{
	sigset_t set;
	sigemptyset(&set);
	if (sig)
		sigaddset(&set, sig);
	pthread_sigmask(SIG_BLOCK, &set, want);
	pthread_sigmask(SIG_BLOCK, NULL, want);
}

/* -M: is the calling thread's mask still want? */
static void check_own(const sigset_t *want)
{
	sigset_t cur;
	if (!own_masks)
		return;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	for (int sig = 1; sig < SIGRTMAX; sig++)
		if (sigismember(&cur, sig) != sigismember(want, sig)) {
			atomic_fetch_add(&errors, 1);
			return;
		}
}

static void *long_lived(void *arg)
{
	uint64_t k = (uintptr_t)arg * 1000003u;
	int sig = SIGRTMIN + (int)(uintptr_t)arg;
	sigset_t want;
	if (own_masks)
		block_own(sig <= SIGRTMAX ? sig : 0, &want);
	while (!atomic_load(&stop)) {
		check_own(&want);
		if (work(k, 5000) != work(k, 5000))
			atomic_fetch_add(&errors, 1);
		k++;
		if (sleepy) {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double duration, tick_s = 0.1;
static int churn = 4, nlong = 2, main_exits;
static pthread_t *longs;

/* Creates and joins the short-lived threads, prints the ticks, ends the
 * process. */
static void *driver(void *arg)
{
	pthread_t *ring = calloc((size_t)churn + 1, sizeof(*ring));
	uintptr_t *ring_id = calloc((size_t)churn + 1, sizeof(*ring_id));
	double start = now_s(), next_tick = start + tick_s;
	uintptr_t created = 0;
	long tick = 0;
	int live = 0, head = 0;
	sigset_t want;
	if (own_masks)	/* a new driver thread (-X) inherited it: blocks nothing more */
		block_own(main_exits ? 0 : SIGUSR2, &want);
	while (duration <= 0 || now_s() - start < duration) {
		check_own(&want);
		if (churn > 0) {
			if (live == churn) {	/* join the oldest, check its answer */
				void *ret;
				pthread_join(ring[head], &ret);
				if ((uint64_t)(uintptr_t)ret != work(ring_id[head], work_iters))
					atomic_fetch_add(&errors, 1);
				live--;
			}
			ring_id[head] = created;
			if (pthread_create(&ring[head], NULL, short_lived, (void *)created) == 0) {
				created++;
				live++;
				head = (head + 1) % churn;
			}
		} else {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
		if (now_s() >= next_tick) {
			printf("tick %ld created %lu errors %ld\n", ++tick, (unsigned long)created,
			       atomic_load(&errors));
			next_tick += tick_s;
		}
	}
	for (int i = 0; i < live; i++) {
		int at = (head - live + i + 2 * churn) % churn;
		void *ret;
		pthread_join(ring[at], &ret);
		if ((uint64_t)(uintptr_t)ret != work(ring_id[at], work_iters))
			atomic_fetch_add(&errors, 1);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nlong; i++)
		pthread_join(longs[i], NULL);
	printf("done created %lu errors %ld\n", (unsigned long)created, atomic_load(&errors));
	exit(0);
}

int main(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "d:n:l:w:t:SXM")) != -1) {
		switch (c) {
		case 'd': duration = atof(optarg); break;
		case 'n': churn = atoi(optarg); break;
		case 'l': nlong = atoi(optarg); break;
		case 'w': work_iters = atol(optarg); break;
		case 't': tick_s = atof(optarg) / 1000.0; break;
		case 'S': sleepy = 1; break;
		case 'X': main_exits = 1; break;
		case 'M': own_masks = 1; break;
		default:
			fprintf(stderr, "usage: threads [-d SECONDS] [-n CHURN] [-l LONG] [-w WORK] "
					"[-t TICK_MS] [-S] [-X] [-M]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	longs = calloc((size_t)nlong + 1, sizeof(*longs));
	for (int i = 0; i < nlong; i++)
		pthread_create(&longs[i], NULL, long_lived, (void *)(uintptr_t)(i + 1));
	printf("ready %d\n", (int)getpid());

	if (main_exits) {
		pthread_t drv;
		pthread_create(&drv, NULL, driver, NULL);
		pthread_exit(NULL);
	}
	driver(NULL);
	return 0;
}
