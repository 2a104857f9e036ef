/* eintr: counts the system calls a tracer's stops interrupt.
 *
 * One thread waits in epoll_wait(2) on a signalfd for SIGUSR1, the main
 * thread in read(2) on a signalfd for SIGUSR2 (both signals blocked, so
 * only a stop can interrupt them). Each call that fails with EINTR is
 * counted and made again.
 *
 * Prints "ready PID", then, each time SIGUSR1 (SIGUSR2) arrives,
 * "epoll eintr N" ("read eintr N"): the EINTRs of that call so far.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

static int signal_fd(int sig)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, sig);
	return signalfd(-1, &set, SFD_CLOEXEC);
}

static void *epoll_waiter(void *arg)
{
	int sfd = signal_fd(SIGUSR1), ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN }, got;
	unsigned long eintr = 0;

	(void)arg;
	if (sfd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) < 0) {
		printf("error epoll setup\n");
		return NULL;
	}
	for (;;) {
		int n = epoll_wait(ep, &got, 1, -1);
		if (n < 0 && errno == EINTR) {
			eintr++;
			continue;
		}
		struct signalfd_siginfo si;
		if (n == 1 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			printf("epoll eintr %lu\n", eintr);
	}
}

int main(void)
{
	sigset_t set;
	pthread_t t;
	unsigned long eintr = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);	/* inherited by the thread */
	int sfd = signal_fd(SIGUSR2);
	if (sfd < 0 || pthread_create(&t, NULL, epoll_waiter, NULL) != 0) {
		printf("error setup\n");
		return 1;
	}
	printf("ready %d\n", (int)getpid());
	for (;;) {
		struct signalfd_siginfo si;
		ssize_t n = read(sfd, &si, sizeof(si));
		if (n < 0 && errno == EINTR) {
			eintr++;
			continue;
		}
		if (n == (ssize_t)sizeof(si))
			printf("read eintr %lu\n", eintr);
	}
}
