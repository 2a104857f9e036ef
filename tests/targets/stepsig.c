/* stepsig: a thread that padrone single-steps while signals arrive for it.
 *
 * usage: stepsig [-s]
 *   -s  start a sender child that sends signals for as long as we run
 *
 * The main thread runs spin forever: one-byte instructions and a two-byte
 * jump back to the first, so the tests know where each step must land. It
 * alone takes signals; a reporter thread, every signal blocked, prints.
 *
 * Signals the main thread counts:
 *   SIGUSR1 from the sender: sigqueue() with the values 1, 2, 3...; the
 *           next is sent once the last was counted, so none can merge.
 *   SIGRTMIN from the sender: sigqueue() in bursts of 4 with a sequence
 *           number; the next burst once the last was counted (real-time
 *           signals queue and arrive in order).
 *           Each of those must carry si_code SI_QUEUE, the sender's pid and
 *           the next value of its stream; any other is "bad" (lost,
 *           duplicated, reordered or with another signal's siginfo).
 *   SIGUSR1 from anyone else (si_code not SI_QUEUE): counted as "ext".
 *   SIGRTMIN+1 from anyone: sigqueue() values 1, 2, 3... in order, counted
 *           as "rt2"; another value is "bad".
 *   SIGTRAP: counted as "trap" (a single step's trap must never arrive;
 *           the handler is there so that its disposition can be checked).
 *   SIGTERM: the reporter prints the done line and the program exits.
 *
 * output (line-buffered):
 *   ready PID
 *   spin 0xFIRST 0xJUMP      the loop's first instruction and its jump back
 *   tick N usr1 U rt R ext E bad B trap T rt2 V     every 20 ms
 *   done usr1 U sent S rt R rtsent Q ext E bad B trap T rt2 V
 *   error: spin returned
 * Exit 0. The sender exits when we do.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define BURST 4

struct shared {
	atomic_long usr1_seen, usr1_sent;
	atomic_long rt_seen, rt_sent;
	atomic_long ext, bad, trap, rt2;
	atomic_int sender;
};

static struct shared *sh;
static volatile sig_atomic_t term;

void spin(void);
extern const char spin_first[], spin_jump[];
__asm__(".text\n"
	".globl spin\n.type spin, @function\n"
	"spin:\n"
	".globl spin_first\nspin_first:\n"
	"\tnop\n\tnop\n\tcld\n\tnop\n\tclc\n\tnop\n\tnop\n\tstc\n\tnop\n\tnop\n"
	".globl spin_jump\nspin_jump:\n"
	"\tjmp spin_first\n"
	".size spin, . - spin\n");

/* One of a stream's signals: from the sender, by sigqueue, the next value. */
static void check(const siginfo_t *si, atomic_long *seen)
{
	long want = atomic_load(seen) + 1;
	if (si->si_code != SI_QUEUE || si->si_pid != atomic_load(&sh->sender) ||
	    si->si_value.sival_int != want)
		atomic_fetch_add(&sh->bad, 1);
	atomic_store(seen, want);
}

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	if (si->si_code != SI_QUEUE)
		atomic_fetch_add(&sh->ext, 1);
	else
		check(si, &sh->usr1_seen);
}

static void on_rt(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	check(si, &sh->rt_seen);
}

static void on_rt2(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	long want = atomic_load(&sh->rt2) + 1;
	if (si->si_code != SI_QUEUE || si->si_value.sival_int != want)
		atomic_fetch_add(&sh->bad, 1);
	atomic_store(&sh->rt2, want);
}

static void on_trap(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	atomic_fetch_add(&sh->trap, 1);
}

static void on_term(int sig)
{
	(void)sig;
	term = 1;
}

static void catch(int sig, void (*fn)(int, siginfo_t *, void *))
{
	struct sigaction sa = { .sa_sigaction = fn, .sa_flags = SA_SIGINFO | SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

static void pause_us(long us)
{
	struct timespec ts = { 0, us * 1000 };
	nanosleep(&ts, NULL);
}

static void send(pid_t to, int sig, long value)
{
	union sigval v = { .sival_int = (int)value };
	while (sigqueue(to, sig, v) < 0)
		pause_us(100);	/* EAGAIN: the queue is full for now */
}

static void sender(pid_t target)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != target)
		_exit(0);
	for (;;) {
		long u = atomic_load(&sh->usr1_sent);
		if (atomic_load(&sh->usr1_seen) == u) {
			atomic_store(&sh->usr1_sent, u + 1);
			send(target, SIGUSR1, u + 1);
		}
		long r = atomic_load(&sh->rt_sent);
		if (atomic_load(&sh->rt_seen) == r) {
			atomic_store(&sh->rt_sent, r + BURST);
			for (long i = 1; i <= BURST; i++)
				send(target, SIGRTMIN, r + i);
		}
		pause_us(50);
	}
}

static void *reporter(void *arg)
{
	(void)arg;
	for (long n = 1; !term; n++) {
		printf("tick %ld usr1 %ld rt %ld ext %ld bad %ld trap %ld rt2 %ld\n", n,
		       atomic_load(&sh->usr1_seen), atomic_load(&sh->rt_seen),
		       atomic_load(&sh->ext), atomic_load(&sh->bad), atomic_load(&sh->trap),
		       atomic_load(&sh->rt2));
		pause_us(20000);
	}
	printf("done usr1 %ld sent %ld rt %ld rtsent %ld ext %ld bad %ld trap %ld rt2 %ld\n",
	       atomic_load(&sh->usr1_seen), atomic_load(&sh->usr1_sent), atomic_load(&sh->rt_seen),
	       atomic_load(&sh->rt_sent), atomic_load(&sh->ext), atomic_load(&sh->bad),
	       atomic_load(&sh->trap), atomic_load(&sh->rt2));
	exit(0);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof *sh);
	catch(SIGUSR1, on_usr1);
	catch(SIGRTMIN, on_rt);
	catch(SIGTRAP, on_trap);
	catch(SIGRTMIN + 1, on_rt2);
	signal(SIGTERM, on_term);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_t th;
	pthread_create(&th, NULL, reporter, NULL);	/* inherits: all blocked */
	if (argc > 1 && strcmp(argv[1], "-s") == 0) {
		pid_t me = getpid(), child = fork();
		if (child == 0)
			sender(me);
		atomic_store(&sh->sender, child);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	printf("ready %d\n", (int)getpid());
	printf("spin %p %p\n", (void *)spin_first, (void *)spin_jump);
	spin();
	printf("error: spin returned\n");
	return 1;
}
