/* instr_signals: a function called in a loop and, on the same thread, from
 * a signal handler run 1000 times a second, so that the handler's calls
 * interrupt the loop's anywhere inside the function (and inside an
 * instrumented copy of it: tests/codecache/instrument-signals.sh).
 *
 * Usage: instr_signals [nodefer]
 * scale(x, o, n) sets o[i] = 3 * x[i] + 1, one load and one store per
 * element. The loop calls it on LOOP_N elements, the handler (SIGALRM of a
 * 1 ms ITIMER_REAL; with nodefer, SA_NODEFER: it may interrupt itself) on
 * HANDLER_N others; each checks its own output after every call and counts
 * a wrong element as bad. A handler that interrupts the handler uses the
 * second of the handler's two array pairs (HANDLER_X[1], HANDLER_O[1]),
 * one deeper still makes no call.
 * Prints "scale=0xADDR LOOP_N HANDLER_N", "arrays LOOP_X LOOP_O HANDLER_X
 * HANDLER_O" (addresses; the handler's are two pairs of HANDLER_N elements
 * each, one after the other), then "ready", then every 50 ms
 * "alive LOOPCALLS HANDLERCALLS bad BAD". SIGUSR1 pauses the calls and
 * resumes them: once paused, between two calls of the loop and with the
 * handler skipping its call, "paused LOOPCALLS HANDLERCALLS" (exact counts
 * of the calls made so far).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define LOOP_N 4096
#define HANDLER_N 64

__attribute__((noinline)) void scale(const long *x, long *o, long n)
{
	for (long i = 0; i < n; i++)
		o[i] = 3 * x[i] + 1;
}

static long loop_x[LOOP_N], loop_o[LOOP_N];
static long handler_x[2][HANDLER_N], handler_o[2][HANDLER_N];
static volatile sig_atomic_t depth;	/* handlers running */
static volatile sig_atomic_t paused;
static volatile long loop_calls, handler_calls, bad;

/* Call scale on x and check what it wrote, then spoil it for the next. */
static void call_and_check(const long *x, long *o, long n)
{
	scale(x, o, n);
	for (long i = 0; i < n; i++) {
		if (o[i] != 3 * x[i] + 1)
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
		o[i] = -1;
	}
}

static void on_alarm(int sig)
{
	(void)sig;
	if (paused)
		return;
	int d = depth++;
	if (d < 2) {
		call_and_check(handler_x[d], handler_o[d], HANDLER_N);
		/* one instruction: a nested handler cannot come between */
		__atomic_fetch_add(&handler_calls, 1, __ATOMIC_RELAXED);
	}
	depth--;
}

static void toggle_pause(int sig)
{
	(void)sig;
	paused = !paused;
}

static void pause_point(void)
{
	if (!paused)
		return;
	printf("paused %ld %ld\n", loop_calls, handler_calls);
	fflush(stdout);
	while (paused)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
}

static long elapsed_ns(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1000000000L + b->tv_nsec - a->tv_nsec;
}

int main(int argc, char **argv)
{
	bool nodefer = argc > 1 && strcmp(argv[1], "nodefer") == 0;

	for (long i = 0; i < LOOP_N; i++)
		loop_x[i] = i * 7 - 5;
	for (long i = 0; i < HANDLER_N; i++)
		handler_x[0][i] = handler_x[1][i] = 1000 - i * 11;
	struct sigaction pause_sa = { .sa_handler = toggle_pause, .sa_flags = SA_RESTART };
	struct sigaction alarm_sa = { .sa_handler = on_alarm,
				      .sa_flags = SA_RESTART | (nodefer ? SA_NODEFER : 0) };
	sigaction(SIGUSR1, &pause_sa, NULL);
	sigaction(SIGALRM, &alarm_sa, NULL);
	struct itimerval every_ms = { { 0, 1000 }, { 0, 1000 } };
	if (setitimer(ITIMER_REAL, &every_ms, NULL) != 0) {
		perror("setitimer");
		return 1;
	}
	printf("scale=%p %d %d\narrays %p %p %p %p\nready\n", (void *)scale, LOOP_N, HANDLER_N,
	       (void *)loop_x, (void *)loop_o, (void *)handler_x, (void *)handler_o);
	fflush(stdout);
	struct timespec last, now;
	clock_gettime(CLOCK_MONOTONIC, &last);
	for (;;) {
		pause_point();
		call_and_check(loop_x, loop_o, LOOP_N);
		loop_calls++;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (elapsed_ns(&last, &now) >= 50000000L) {
			printf("alive %ld %ld bad %ld\n", loop_calls, handler_calls, bad);
			fflush(stdout);
			last = now;
		}
	}
}
