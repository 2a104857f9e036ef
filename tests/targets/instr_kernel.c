/* instr_kernel: threads calling a known memory kernel on known data, for
 * the instrumentation tests.
 *
 * Usage: instr_kernel [THREADS [N [churn|spin|fork|switch|pair|ramp|hold FILE]]]   (2 threads, N = 1000)
 *        instr_kernel child N                         (what fork runs)
 * Each thread owns arrays x, y, o of N longs and calls
 *	axpy(a, x, y, o, n): o[i] = a * x[i] + y[i], for i < n
 * (built without vectorization: per element one read of x[i], one of y[i],
 * one write of o[i], in that order), then checks every o[i] itself.
 * Prints, once per thread: "thread K x=0x... y=0x... o=0x... n=N", then
 * "ready", then every 50 ms "alive CALLS bad MISMATCHES" (all threads).
 * With churn, the main thread also starts a short-lived thread every 50 ms
 * that calls axpy 20 times on arrays of its own, checks them and exits
 * (its calls and mismatches counted too, after "churned T shared S": S
 * counts those whose gs_base, read as they end, was still the non-zero one
 * of the thread that made them; an instrumented copy's state row is
 * never to be shared).
 * With spin, each thread instead enters spin(), which never returns: it
 * computes the same kernel over and over inline, counting its passes; the
 * main thread prints "spinning" once every thread has made a pass, then
 * every 50 ms "alive PASSES bad MISMATCHES", checking the threads' o
 * arrays itself (each pass writes the same values).
 * With fork, the main thread also makes a child every 50 ms, in turn by
 * fork, vfork and posix_spawn of "instr_kernel child N"; each child calls
 * axpy 20 times on arrays of its own and exits 0 only if every result was
 * right (the spawned one also prints "child ok"); the main thread waits for
 * it and prints "forked OK bad FAILED" (children so far).
 * With switch, each thread instead calls dispatch(k, o, x), a switch on
 * k = 0..7 in turn that GCC compiles to a jump table, each case changing
 * o[k] (its o array's first 8 longs) its own way, and checks o against the
 * same changes made by other code; "alive" counts its calls.
 * With pair, each thread calls axmy(a, x, y, o, n): o[i] = a * x[i] - y[i]
 * (the same references as axpy's) after each axpy, checked and counted as
 * a call too, and the main thread churns as with churn, its short-lived
 * threads calling axmy after each axpy as well (two functions to
 * instrument at once).
 * With hold FILE, SIGUSR1 (the main thread blocks it: a worker takes it)
 * makes the worker it interrupts inside code outside the program's own
 * (an instrumented copy: the loop calls nothing else) print "held", wait in
 * the handler until FILE exists, then print "let go" and return; one it
 * interrupts in the program's code prints "missed" and returns.
 * With ramp, only the first half of the threads (at least one) works until
 * SIGUSR2, which sets the others to work too (the load doubles with an even
 * THREADS); the main thread then prints "ramped" once.
 */
#include <asm/prctl.h>
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long n = 1000;
static atomic_long calls, bad;
static int pair;

__attribute__((noinline)) void axpy(long a, const long *x, const long *y, long *o, long n)
{
	for (long i = 0; i < n; i++)
		o[i] = a * x[i] + y[i];
}

/* pair's second kernel: per element one read of x[i], one of y[i], one
 * write of o[i], as axpy. */
__attribute__((noinline)) void axmy(long a, const long *x, const long *y, long *o, long n)
{
	for (long i = 0; i < n; i++)
		o[i] = a * x[i] - y[i];
}

/* With pair: axmy on the arrays, checked; its wrong results. */
static long axmy_checked(long a, const long *x, const long *y, long *o)
{
	long miss = 0;

	if (!pair)
		return 0;
	axmy(a, x, y, o, n);
	for (long i = 0; i < n; i++)
		miss += o[i] != a * x[i] - y[i];
	atomic_fetch_add(&calls, 1);
	return miss;
}

static const char *hold_file;
static __thread int a_worker;
extern char __executable_start[], etext[];

static void say(const char *line)
{
	ssize_t n = write(1, line, strlen(line));
	(void)n;
}

/* hold: a worker interrupted outside the program's code waits for the file. */
static void on_usr1(int sig, siginfo_t *si, void *ctx)
{
	const ucontext_t *uc = ctx;
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	struct timespec ts = { 0, 10000000 };

	(void)sig;
	(void)si;
	if (!a_worker)
		return;
	if (pc >= (uintptr_t)__executable_start && pc < (uintptr_t)etext) {
		say("missed\n");
		return;
	}
	say("held\n");
	while (access(hold_file, F_OK) != 0)
		nanosleep(&ts, NULL);
	say("let go\n");
}

static void hold_setup(const char *file)
{
	struct sigaction sa = { .sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO | SA_RESTART };

	hold_file = file;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

struct worker {
	long k;
	long *x, *y, *o;
	pthread_barrier_t *b;
	volatile long passes;
	int spin, table;
	int late;		/* ramp: waits for SIGUSR2 */
};

static atomic_int ramped;

static void on_usr2(int sig)
{
	(void)sig;
	atomic_store(&ramped, 1);
}

/* ramp: the second half's wait for SIGUSR2 */
static void wait_for_ramp(void)
{
	struct timespec ms = { 0, 1000000 };

	while (!atomic_load(&ramped))
		nanosleep(&ms, NULL);
}

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

/* A tail call through a register: an indirect jmp whose targets no CFG
 * can know (instrument refuses it). */
__attribute__((noinline, used)) void call_through(void (*f)(long), long x)
{
	f(x);
}

/* Dense cases with bodies of their own: a jump table. */
__attribute__((noinline)) void dispatch(long k, long *o, long x)
{
	switch (k) {
	case 0: o[0] += x; break;
	case 1: o[1] ^= x; break;
	case 2: o[2] -= x; break;
	case 3: o[3] = o[3] * 3 + x; break;
	case 4: o[4] |= x; break;
	case 5: o[5] += 2 * x; break;
	case 6: o[6] = x - o[6]; break;
	case 7: o[7] += o[0]; break;
	}
}

/* The same changes, made differently (no table). */
static void dispatch_ref(long k, long *o, long x)
{
	long v[8];

	for (int i = 0; i < 8; i++)
		v[i] = o[i];
	v[0] += k == 0 ? x : 0;
	v[1] = k == 1 ? v[1] ^ x : v[1];
	v[2] -= k == 2 ? x : 0;
	v[3] = k == 3 ? v[3] * 3 + x : v[3];
	v[4] = k == 4 ? v[4] | x : v[4];
	v[5] += k == 5 ? 2 * x : 0;
	v[6] = k == 6 ? x - v[6] : v[6];
	v[7] += k == 7 ? o[0] : 0;
	for (int i = 0; i < 8; i++)
		o[i] = v[i];
}

static void *work(void *arg)
{
	struct worker *w = arg;

	a_worker = 1;
	pthread_barrier_wait(w->b);
	if (w->late)
		wait_for_ramp();
	if (w->spin)
		spin(SPIN_A, w->x, w->y, w->o, n, &w->passes);
	if (w->table) {
		long ref[8] = { 0 };
		for (int i = 0; i < 8; i++)
			w->o[i] = 0;
		for (long round = 0;; round++) {
			long k = round & 7, x = (round * 2654435761) % 1000;
			dispatch(k, w->o, x);
			dispatch_ref(k, ref, x);
			long miss = 0;
			for (int i = 0; i < 8; i++)
				miss += w->o[i] != ref[i];
			atomic_fetch_add(&calls, 1);
			atomic_fetch_add(&bad, miss);
		}
	}
	for (long round = 0;; round++) {
		long a = 3 + (round & 7);
		axpy(a, w->x, w->y, w->o, n);
		long miss = 0;
		for (long i = 0; i < n; i++) {
			miss += w->o[i] != a * w->x[i] + w->y[i];
			w->o[i] = -1;
		}
		miss += axmy_checked(a, w->x, w->y, w->o);
		atomic_fetch_add(&calls, 1);
		atomic_fetch_add(&bad, miss);
	}
	return NULL;
}

static atomic_long churned, shared;

static unsigned long gs_base(void)
{
	unsigned long gs = 0;

	syscall(SYS_arch_prctl, ARCH_GET_GS, &gs);
	return gs;
}

/* arg: the gs_base of the thread that made it */
static void *short_lived(void *arg)
{
	long *x = malloc((size_t)n * sizeof(long)), *y = malloc((size_t)n * sizeof(long));
	long *o = malloc((size_t)n * sizeof(long));
	unsigned long parent_gs = (unsigned long)arg;

	for (long i = 0; i < n; i++) {
		x[i] = 7 * i;
		y[i] = i + 1;
	}
	for (long round = 0; round < 20; round++) {
		axpy(2, x, y, o, n);
		long miss = 0;
		for (long i = 0; i < n; i++)
			miss += o[i] != 2 * x[i] + y[i];
		miss += axmy_checked(2, x, y, o);
		atomic_fetch_add(&calls, 1);
		atomic_fetch_add(&bad, miss);
	}
	free(x);
	free(y);
	free(o);
	if (parent_gs && gs_base() == parent_gs)
		atomic_fetch_add(&shared, 1);
	atomic_fetch_add(&churned, 1);
	return NULL;
}

/* axpy 20 times on arrays (of n longs) of the caller's; wrong results. */
static long axpy_checked(long *x, long *y, long *o)
{
	long miss = 0;

	for (long i = 0; i < n; i++) {
		x[i] = 5 * i + 1;
		y[i] = i - 7;
	}
	for (long round = 0; round < 20; round++) {
		axpy(round, x, y, o, n);
		for (long i = 0; i < n; i++)
			miss += o[i] != round * x[i] + y[i];
	}
	return miss;
}

extern char **environ;
static long child_arrays[3][1 << 16];

/* A child still on its parent's gs_base after its calls: its units went
 * into the parent's ring (padrone gives a child the sink at its fork
 * event; without padrone, the ring stub's owner check moves it there). */
static bool on_parents_ring(unsigned long parent_gs)
{
	return parent_gs && gs_base() == parent_gs;
}

/* One child, by fork (kind 0), vfork (1) or posix_spawn (2): whether it
 * ran right (exit status 0) and off its parent's ring. */
static int one_child(int kind, char *self)
{
	pid_t pid;
	int status;

	unsigned long my_gs = gs_base();

	if (kind == 0) {
		long *x = malloc((size_t)n * sizeof(long)), *y = malloc((size_t)n * sizeof(long));
		long *o = malloc((size_t)n * sizeof(long));
		if ((pid = fork()) == 0)
			_exit(axpy_checked(x, y, o) || on_parents_ring(my_gs) ? 1 : 0);
		free(x);
		free(y);
		free(o);
	} else if (kind == 1) {
		/* shares our memory until it exits: arrays set aside for it */
		if ((pid = vfork()) == 0)
			_exit(axpy_checked(child_arrays[0], child_arrays[1], child_arrays[2]) ||
			      on_parents_ring(my_gs) ? 1 : 0);
	} else {
		char len[32];
		snprintf(len, sizeof len, "%ld", n);
		char *argv[] = { self, "child", len, NULL };
		if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
			return 0;
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
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
	if (argc > 2 && strcmp(argv[1], "child") == 0) {
		n = atol(argv[2]);
		long *x = malloc((size_t)n * sizeof(long)), *y = malloc((size_t)n * sizeof(long));
		long *o = malloc((size_t)n * sizeof(long));
		long miss = axpy_checked(x, y, o);
		if (!miss)
			printf("child ok\n");
		return miss ? 1 : 0;
	}
	long nthreads = argc > 1 ? atol(argv[1]) : 2;
	if (argc > 2)
		n = atol(argv[2]);
	pair = argc > 3 && strcmp(argv[3], "pair") == 0;
	int churn = pair || (argc > 3 && argv[3][0] == 'c');
	int spinning = argc > 3 && strcmp(argv[3], "spin") == 0;
	int forking = argc > 3 && argv[3][0] == 'f';
	int table = argc > 3 && strcmp(argv[3], "switch") == 0;
	int holding = argc > 4 && strcmp(argv[3], "hold") == 0;
	int ramp = argc > 3 && strcmp(argv[3], "ramp") == 0, said_ramped = 0;
	long forked = 0, failed = 0;
	if (holding)
		hold_setup(argv[4]);
	if (ramp)
		signal(SIGUSR2, on_usr2);
	if (forking && n > (1 << 16))
		return 2;
	if (nthreads < 1 || nthreads > 64 || n < 1)
		return 2;
	pthread_barrier_t b;
	pthread_barrier_init(&b, NULL, (unsigned)nthreads + 1);
	struct worker *ws = calloc((size_t)nthreads, sizeof *ws);
	for (long k = 0; k < nthreads; k++) {
		struct worker *w = &ws[k];
		w->k = k;
		w->b = &b;
		w->spin = spinning && !table;
		w->table = table;
		w->late = ramp && k >= (nthreads + 1) / 2;
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
	if (holding) {	/* the workers take SIGUSR1, not the main thread */
		sigset_t usr1;
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &usr1, NULL);
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
			if (pthread_create(&t, NULL, short_lived, (void *)gs_base()) == 0)
				pthread_detach(t);
			printf("churned %ld shared %ld\n", atomic_load(&churned),
			       atomic_load(&shared));
		}
		if (forking) {
			fflush(stdout);		/* not twice through a forked child */
			if (one_child((int)(forked + failed) % 3, argv[0]))
				forked++;
			else
				failed++;
			printf("forked %ld bad %ld\n", forked, failed);
		}
		if (ramp && !said_ramped && atomic_load(&ramped)) {
			printf("ramped\n");
			said_ramped = 1;
		}
		printf("alive %ld bad %ld\n", atomic_load(&calls), atomic_load(&bad));
		fflush(stdout);
	}
}
