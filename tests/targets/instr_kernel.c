/* instr_kernel: threads calling a known memory kernel on known data, for
 * the instrumentation tests.
 *
 * Usage: instr_kernel [THREADS [N [churn|spin]]]   (2 threads, N = 1000)
 * Each thread owns arrays x, y, o of N longs and calls
 *	axpy(a, x, y, o, n): o[i] = a * x[i] + y[i], for i < n
 * (built without vectorization: per element one read of x[i], one of y[i],
 * one write of o[i], in that order), then checks every o[i] itself.
 * Prints, once per thread: "thread K x=0x... y=0x... o=0x... n=N", then
 * "ready", then every 50 ms "alive CALLS bad MISMATCHES" (all threads).
 * With churn, the main thread also starts a short-lived thread every 50 ms
 * that calls axpy 20 times on arrays of its own, checks them and exits
 * (its calls and mismatches counted too, after "churned T").
 * With spin, each thread instead enters spin(), which never returns: it
 * computes the same kernel over and over inline, counting its passes; the
 * main thread prints "spinning" once every thread has made a pass, then
 * every 50 ms "alive PASSES bad MISMATCHES", checking the threads' o
 * arrays itself (each pass writes the same values).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long n = 1000;
static atomic_long calls, bad;

__attribute__((noinline)) void axpy(long a, const long *x, const long *y, long *o, long n)
{
	for (long i = 0; i < n; i++)
		o[i] = a * x[i] + y[i];
}

struct worker {
	long k;
	long *x, *y, *o;
	pthread_barrier_t *b;
	volatile long passes;
	int spin;
};

/* Never returns: the kernel, pass after pass, inline (no call). */
__attribute__((noinline)) void spin(long a, const long *x, const long *y, long *o, long n,
				    volatile long *passes)
{
	for (;;) {
		for (long i = 0; i < n; i++)
			o[i] = a * x[i] + y[i];
		*passes += 1;
	}
}

#define SPIN_A 5

static void *work(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(w->b);
	if (w->spin)
		spin(SPIN_A, w->x, w->y, w->o, n, &w->passes);
	for (long round = 0;; round++) {
		long a = 3 + (round & 7);
		axpy(a, w->x, w->y, w->o, n);
		long miss = 0;
		for (long i = 0; i < n; i++) {
			miss += w->o[i] != a * w->x[i] + w->y[i];
			w->o[i] = -1;
		}
		atomic_fetch_add(&calls, 1);
		atomic_fetch_add(&bad, miss);
	}
	return NULL;
}

static atomic_long churned;

static void *short_lived(void *arg)
{
	long *x = malloc((size_t)n * sizeof(long)), *y = malloc((size_t)n * sizeof(long));
	long *o = malloc((size_t)n * sizeof(long));

	(void)arg;
	for (long i = 0; i < n; i++) {
		x[i] = 7 * i;
		y[i] = i + 1;
	}
	for (long round = 0; round < 20; round++) {
		axpy(2, x, y, o, n);
		long miss = 0;
		for (long i = 0; i < n; i++)
			miss += o[i] != 2 * x[i] + y[i];
		atomic_fetch_add(&calls, 1);
		atomic_fetch_add(&bad, miss);
	}
	free(x);
	free(y);
	free(o);
	atomic_fetch_add(&churned, 1);
	return NULL;
}

static long spun(struct worker *ws, long nthreads, long *least)
{
	long all = 0;

	*least = -1;
	for (long k = 0; k < nthreads; k++) {
		long p = ws[k].passes;
		all += p;
		if (*least < 0 || p < *least)
			*least = p;
	}
	return all;
}

__attribute__((noreturn)) static void watch_spinners(struct worker *ws, long nthreads)
{
	struct timespec ts = { 0, 50000000 };
	long least;

	while (spun(ws, nthreads, &least), least < 1)
		nanosleep(&ts, NULL);
	printf("spinning\n");
	fflush(stdout);
	for (;;) {
		nanosleep(&ts, NULL);
		long miss = 0, all = spun(ws, nthreads, &least);
		for (long k = 0; k < nthreads; k++)
			for (long i = 0; i < n; i++)
				miss += ws[k].o[i] != SPIN_A * ws[k].x[i] + ws[k].y[i];
		printf("alive %ld bad %ld\n", all, miss);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	long nthreads = argc > 1 ? atol(argv[1]) : 2;
	if (argc > 2)
		n = atol(argv[2]);
	int churn = argc > 3 && argv[3][0] == 'c';
	int spinning = argc > 3 && argv[3][0] == 's';
	if (nthreads < 1 || nthreads > 64 || n < 1)
		return 2;
	pthread_barrier_t b;
	pthread_barrier_init(&b, NULL, (unsigned)nthreads + 1);
	struct worker *ws = calloc((size_t)nthreads, sizeof *ws);
	for (long k = 0; k < nthreads; k++) {
		struct worker *w = &ws[k];
		w->k = k;
		w->b = &b;
		w->spin = spinning;
		w->x = malloc((size_t)n * sizeof(long));
		w->y = malloc((size_t)n * sizeof(long));
		w->o = malloc((size_t)n * sizeof(long));
		for (long i = 0; i < n; i++) {
			w->x[i] = i * 3 + k;
			w->y[i] = i ^ (k << 4);
		}
		printf("thread %ld x=%p y=%p o=%p n=%ld\n", k, (void *)w->x, (void *)w->y,
		       (void *)w->o, n);
		pthread_t t;
		pthread_create(&t, NULL, work, w);
	}
	printf("ready\n");
	fflush(stdout);
	pthread_barrier_wait(&b);
	if (spinning)
		watch_spinners(ws, nthreads);
	for (;;) {
		struct timespec ts = { 0, 50000000 };
		nanosleep(&ts, NULL);
		if (churn) {
			pthread_t t;
			if (pthread_create(&t, NULL, short_lived, NULL) == 0)
				pthread_detach(t);
			printf("churned %ld\n", atomic_load(&churned));
		}
		printf("alive %ld bad %ld\n", atomic_load(&calls), atomic_load(&bad));
		fflush(stdout);
	}
}
