/* prof_signals: a hot loop interrupted by ~2000 signals a second
 * (ITIMER_REAL every 500 us, SIGALRM handler doing a little work).
 *
 * Prints "ready", then every 100 ms "signals N checksum C": N handler runs
 * so far, C the (constant) checksum of the hot loop's unit of work;
 * "BAD checksum" if one differs.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

static volatile unsigned rounds = 50000;
static volatile sig_atomic_t nsig;
static volatile uint64_t handler_sink;

__attribute__((noinline, noclone)) uint64_t prof_sig_spin(uint64_t x)
{
	for (unsigned i = 0; i < rounds; i++)
		x = (x ^ (x >> 7)) * 0x94d049bb133111ebull + i;
	return x;
}

static void on_alarm(int sig)
{
	uint64_t x = handler_sink;
	(void)sig;
	for (int i = 0; i < 50; i++)
		x = x * 31 + (uint64_t)i;
	handler_sink = x;
	nsig++;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	struct itimerval it = { { 0, 500 }, { 0, 500 } };
	uint64_t expect = prof_sig_spin(3);
	double last = now();

	setvbuf(stdout, NULL, _IOLBF, 0);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	printf("ready\n");
	for (;;) {
		if (prof_sig_spin(3) != expect)
			printf("BAD checksum\n");
		if (now() - last >= 0.1) {
			last = now();
			printf("signals %ld checksum %016llx\n", (long)nsig, (unsigned long long)expect);
		}
	}
}
