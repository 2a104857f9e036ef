/* cc_threads: threads living in the functions padrone patches.
 *
 * cc_threads NTHREADS [forever|unwinder|nap]
 *  - NTHREADS workers call work() back to back and compare every result
 *    with ref_work(), the same function written differently; every ~100 ms
 *    each prints "worker I: calls N mismatches M" (M must stay 0 whatever
 *    code work() runs);
 *  - one thread calls blocker(SYS_pause) in a loop: it sleeps inside
 *    blocker's first bytes until SIGUSR1, then prints "blocker: woke K
 *    ret R";
 *  - with "forever", one more thread calls run_it(forever) and never comes
 *    back: its pc is in forever(), and run_it's return address, which lies
 *    inside run_it's first bytes, is on its stack.
 *  - with "nap", workers sleep 1 ms after every 256 calls (mostly idle,
 *    like a server's threads) instead of spinning;
 *  - with "unwinder", it maps libgcc_s (as a C++ program or one using
 *    thread cancellation would), whose unwinding a measuring stub must not
 *    meet.
 * "ready" is printed once all threads run and the blocker is about to
 * sleep for the first time.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__attribute__((noipa)) unsigned work(unsigned x)
{
	for (int i = 0; i < 200; i++)
		x = (x ^ (x >> 7)) * 2654435761u + (unsigned)i;
	return x;
}

static unsigned ref_work(unsigned x)
{
	unsigned i = 0;
	while (i < 200) {
		unsigned s = x >> 7;
		x ^= s;
		x *= 2654435761u;
		x += i++;
	}
	return x;
}

/* blocker(nr) = syscall(nr) with the syscall in its first bytes, so a thread
 * sleeping in it has its pc inside the bytes an entry jump overwrites. */
long blocker(long nr);
__asm__(".text\n"
	".globl blocker\n"
	".type blocker, @function\n"
	"blocker:\n"
	"	mov %edi, %eax\n"
	"	syscall\n"
	"	mov $1, %ecx\n"
	"	ret\n"
	".size blocker, .-blocker\n");

/* run_it(fn) = fn(), 1; the call is its first instruction, so the return
 * address lies inside the bytes an entry jump would overwrite. */
int run_it(void (*fn)(void));
__asm__(".text\n"
	".globl run_it\n"
	".type run_it, @function\n"
	"run_it:\n"
	"	call *%rdi\n"
	"	mov $1, %eax\n"
	"	ret\n"
	".size run_it, .-run_it\n");

static volatile unsigned long forever_spins;
static int nap;

/* (a load first: a loop head at the entry would be refused as a branch
 * into the bytes an entry jump overwrites) */
__attribute__((noipa)) void forever(void)
{
	unsigned long n = forever_spins;
	for (;;)
		forever_spins = ++n;
}

static void on_usr1(int sig)
{
	(void)sig;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
	long id = (long)arg;
	unsigned long calls = 0, bad = 0;
	unsigned x = (unsigned)id * 7919u + 1;
	double next = now() + 0.1;

	for (;;) {
		unsigned r = work(x);
		if (r != ref_work(x))
			bad++;
		x = r + 1;
		if ((++calls & 255) == 0) {
			if (nap)
				usleep(1000);
			if (now() >= next) {
				printf("worker %ld: calls %lu mismatches %lu\n", id, calls, bad);
				next += 0.1;
			}
		}
	}
	return NULL;
}

static sem_t sleeper_up;

static void *sleeper(void *arg)
{
	sigset_t usr1;

	(void)arg;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);	/* only this thread takes it */
	for (long k = 1;; k++) {
		printf("blocker: waiting %ld\n", k);
		if (k == 1)
			sem_post(&sleeper_up);
		long r = blocker(SYS_pause);
		printf("blocker: woke %ld ret %ld\n", k, r);
	}
	return NULL;
}

static void *spinner(void *arg)
{
	(void)arg;
	printf("spinner: %d\n", run_it(forever));
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	int with_forever = argc > 2 && strcmp(argv[2], "forever") == 0;
	nap = argc > 2 && strcmp(argv[2], "nap") == 0;
	if (argc > 2 && strcmp(argv[2], "unwinder") == 0 && !dlopen("libgcc_s.so.1", RTLD_NOW)) {
		printf("cannot load libgcc_s: %s\n", dlerror());
		return 1;
	}
	pthread_t t;
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigset_t usr1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	for (long i = 0; i < n; i++)
		pthread_create(&t, NULL, worker, (void *)i);
	sem_init(&sleeper_up, 0, 0);
	pthread_create(&t, NULL, sleeper, NULL);
	sem_wait(&sleeper_up);
	if (with_forever)
		pthread_create(&t, NULL, spinner, NULL);
	printf("ready\n");
	for (;;)
		sleep(1000);	/* (not pause(): only the blocker sleeps in that) */
}
