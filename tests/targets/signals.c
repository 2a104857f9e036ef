/* signals: a target that takes frequent signals and checks none is lost.
 *
 * usage: signals [-d SECONDS] [-r HZ] [-t TICK_MS]
 *   -d SECONDS  run time (default 2)
 *   -r HZ       SIGALRM rate of a CLOCK_MONOTONIC POSIX timer (default 1000)
 *   -t TICK_MS  print a tick line every TICK_MS (default 100)
 *
 * Three streams of signals:
 *   SIGALRM  from the timer. POSIX merges expirations into one pending
 *            signal and reports the merged ones as si_overrun; the handler
 *            counts 1 + si_overrun, so the total must match the expirations
 *            elapsed (E, from the clock) up to the last moment.
 *   SIGUSR1  from a helper child, one at a time: the child waits (shared
 *            memory) until the target has counted each before sending the
 *            next, so none can merge; one not counted within 2 s is lost.
 *   SIGRTMIN from the child in bursts of 4 with sigqueue() and a sequence
 *            number: real-time signals queue without merging and arrive in
 *            order, so a gap in the sequence is a lost (or reordered) signal.
 *
 * output (line-buffered):
 *   ready PID
 *   tick N alrm A usr1 U rt R
 *   done alrm A expected E usr1 U sent S lost L rt R rtsent Q gaps G
 *   ok | bad            ok when L == 0, G == 0, R == Q, U == S and
 *                       |A - E| <= 2 + E/100 (the last expirations may still
 *                       be in flight when the clock is read)
 * Exit 0 (also when "bad": the test reads the line). Dies of SIGPIPE when
 * its reader goes away; the child exits when its parent does.
 */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct shared {
	atomic_long usr1_seen;	/* by the target */
	atomic_long usr1_sent;	/* by the child */
	atomic_long usr1_lost;
	atomic_long rt_sent;
	atomic_int stop;
};

static struct shared *sh;
static volatile long alrm_total, rt_seen, rt_gaps, rt_next = 1;
static volatile int hz;
static struct timespec start;

static long expirations_now(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double el = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
	return (long)(el * hz);
}

static void on_alrm(int sig, siginfo_t *si, void *uc)
{
	alrm_total += 1 + si->si_overrun;
}

static void on_usr1(int sig)
{
	atomic_fetch_add(&sh->usr1_seen, 1);
}

static void on_rt(int sig, siginfo_t *si, void *uc)
{
	long seq = si->si_value.sival_int;
	if (seq != rt_next)
		rt_gaps++;
	rt_next = seq + 1;
	rt_seen++;
}

static void child(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	int seq = 1;
	while (!atomic_load(&sh->stop)) {
		long n = atomic_fetch_add(&sh->usr1_sent, 1) + 1;
		kill(parent, SIGUSR1);
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (atomic_load(&sh->usr1_seen) < n && !atomic_load(&sh->stop)) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec >= 2) {
				atomic_fetch_add(&sh->usr1_lost, 1);
				atomic_store(&sh->usr1_seen, n);	/* resynchronise */
				break;
			}
			usleep(50);
		}
		for (int i = 0; i < 4 && !atomic_load(&sh->stop); i++) {
			union sigval v = { .sival_int = seq };
			if (sigqueue(parent, SIGRTMIN, v) == 0) {
				seq++;
				atomic_fetch_add(&sh->rt_sent, 1);
			}
		}
		usleep(500);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	double duration = 2, tick_s = 0.1;
	int c;

	hz = 1000;
	while ((c = getopt(argc, argv, "d:r:t:")) != -1) {
		switch (c) {
		case 'd': duration = atof(optarg); break;
		case 'r': hz = atoi(optarg); break;
		case 't': tick_s = atof(optarg) / 1000.0; break;
		default:
			fprintf(stderr, "usage: signals [-d SECONDS] [-r HZ] [-t TICK_MS]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	struct sigaction sa = { 0 };
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sa.sa_sigaction = on_alrm;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_sigaction = on_rt;
	sigaction(SIGRTMIN, &sa, NULL);
	struct sigaction su = { 0 };
	su.sa_flags = SA_RESTART;
	su.sa_handler = on_usr1;
	sigaction(SIGUSR1, &su, NULL);

	pid_t parent = getpid();
	pid_t kid = fork();
	if (kid == 0)
		child(parent);

	timer_t tm;
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM };
	timer_create(CLOCK_MONOTONIC, &sev, &tm);
	clock_gettime(CLOCK_MONOTONIC, &start);
	long period_ns = 1000000000L / hz;
	struct itimerspec its = { { 0, period_ns }, { 0, 0 } };
	its.it_value.tv_sec = start.tv_sec + (start.tv_nsec + period_ns) / 1000000000L;
	its.it_value.tv_nsec = (start.tv_nsec + period_ns) % 1000000000L;
	timer_settime(tm, TIMER_ABSTIME, &its, NULL);
	printf("ready %d\n", (int)getpid());

	long tick = 0;
	long tick_ns = (long)(tick_s * 1e9);
	struct timespec next = start;
	for (;;) {
		next.tv_nsec += tick_ns;
		next.tv_sec += next.tv_nsec / 1000000000L;
		next.tv_nsec %= 1000000000L;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		printf("tick %ld alrm %ld usr1 %ld rt %ld\n", ++tick, alrm_total,
		       atomic_load(&sh->usr1_seen), rt_seen);
		if (tick * tick_s >= duration)
			break;
	}
	atomic_store(&sh->stop, 1);
	waitpid(kid, NULL, 0);
	/* Let queued real-time signals in, then read the timer's account with
	 * SIGALRM blocked so the two numbers belong to one moment. */
	struct timespec settle = { 0, 50000000 };
	while (nanosleep(&settle, &settle) < 0 && errno == EINTR)
		;
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_BLOCK, &alrm, NULL);
	long a = alrm_total, e = expirations_now();
	long lost = atomic_load(&sh->usr1_lost), sent = atomic_load(&sh->usr1_sent);
	long seen = atomic_load(&sh->usr1_seen), rts = atomic_load(&sh->rt_sent);
	printf("done alrm %ld expected %ld usr1 %ld sent %ld lost %ld rt %ld rtsent %ld gaps %ld\n",
	       a, e, seen, sent, lost, rt_seen, rts, rt_gaps);
	long d = e - a < 0 ? a - e : e - a;
	bool ok = lost == 0 && rt_gaps == 0 && rt_seen == rts && seen == sent && d <= 2 + e / 100;
	printf("%s\n", ok ? "ok" : "bad");
	return 0;
}
