#include "tests/lib/tu.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *env_dir(const char *name)
{
	const char *d = getenv(name);
	return d && *d ? d : ".";
}

static const char *join(char *buf, size_t size, const char *dir, const char *rel)
{
	snprintf(buf, size, "%s/%s", dir, rel);
	return buf;
}

const char *tu_path(const char *rel)
{
	static __thread char buf[4][PATH_MAX];
	static __thread int next;
	next = (next + 1) % 4;
	return join(buf[next], sizeof buf[next], env_dir("top_builddir"), rel);
}

const char *tu_srcpath(const char *rel)
{
	static __thread char buf[4][PATH_MAX];
	static __thread int next;
	next = (next + 1) % 4;
	return join(buf[next], sizeof buf[next], env_dir("top_srcdir"), rel);
}

static char public_dir[64];

static void remove_public_dir(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", public_dir);
	if (system(cmd) != 0)
		dprintf(STDERR_FILENO, "tu: cannot remove %s\n", public_dir);
}

/* A directory under /tmp that everyone may search, made once per process. */
static const char *public_dir_path(void)
{
	if (public_dir[0])
		return public_dir;
	snprintf(public_dir, sizeof(public_dir), "/tmp/padrone-tu-%d-XXXXXX", (int)getpid());
	if (!mkdtemp(public_dir) || chmod(public_dir, 0755) < 0) {
		dprintf(STDERR_FILENO, "tu: cannot make %s: %s\n", public_dir, strerror(errno));
		public_dir[0] = '\0';
		return NULL;
	}
	atexit(remove_public_dir);
	return public_dir;
}

const char *tu_public_path(const char *rel)
{
	static __thread char buf[4][PATH_MAX];
	static __thread int next;
	const char *dir = public_dir_path();
	const char *src = tu_path(rel);
	const char *base = strrchr(rel, '/');
	char cmd[2 * PATH_MAX + 32];

	if (!dir)
		return NULL;
	next = (next + 1) % 4;
	join(buf[next], sizeof buf[next], dir, base ? base + 1 : rel);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 0755 '%s'", src, buf[next], buf[next]);
	if (system(cmd) != 0) {
		dprintf(STDERR_FILENO, "tu: cannot copy %s to %s\n", src, buf[next]);
		return NULL;
	}
	return buf[next];
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int tu_spawn(struct tu_proc *p, char *const argv[], bool merge_stderr)
{
	int fds[2];

	memset(p, 0, sizeof(*p));
	p->pid = -1;
	p->out_fd = -1;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int err = -errno;
		close(fds[0]);
		close(fds[1]);
		return err;
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		if (merge_stderr)
			dup2(fds[1], STDERR_FILENO);
		/* Targets run in their own process group so a test can stop or
		 * signal them without touching the test runner. */
		setpgid(0, 0);
		/* A failed assertion ends the test process before its tu_kill:
		 * the target must not outlive it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(127);
		execvp(argv[0], argv);
		dprintf(STDERR_FILENO, "tu_spawn: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	p->pid = pid;
	p->out_fd = fds[0];
	return 0;
}

static int take_line(struct tu_proc *p, char *line, size_t size)
{
	char *nl = memchr(p->buf, '\n', p->len);
	if (!nl)
		return -EAGAIN;
	size_t n = (size_t)(nl - p->buf);
	size_t copy = n < size - 1 ? n : size - 1;
	memcpy(line, p->buf, copy);
	line[copy] = '\0';
	p->len -= n + 1;
	memmove(p->buf, nl + 1, p->len);
	return (int)copy;
}

int tu_read_line(struct tu_proc *p, char *line, size_t size, int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;

	for (;;) {
		int n = take_line(p, line, size);
		if (n >= 0)
			return n;
		if (p->len == sizeof(p->buf)) {	/* overlong line: hand it out */
			p->buf[p->len - 1] = '\n';
			continue;
		}
		long left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = { .fd = p->out_fd, .events = POLLIN };
		int r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ETIMEDOUT;
		ssize_t got = read(p->out_fd, p->buf + p->len, sizeof(p->buf) - p->len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -EPIPE;
		p->len += (size_t)got;
	}
}

int tu_wait_for(struct tu_proc *p, const char *prefix, char *line, size_t size,
		int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;
	size_t plen = strlen(prefix);

	for (;;) {
		long left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		int n = tu_read_line(p, line, size, (int)left);
		if (n < 0)
			return n;
		if (strncmp(line, prefix, plen) == 0)
			return n;
	}
}

int tu_wait(struct tu_proc *p, int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;
	int status;

	if (p->pid <= 0)
		return -ECHILD;
	for (;;) {
		pid_t r = waitpid(p->pid, &status, WNOHANG);
		if (r == p->pid) {
			p->pid = -1;
			return status;
		}
		if (r < 0 && errno != EINTR)
			return -errno;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		usleep(2000);
	}
}

void tu_kill(struct tu_proc *p)
{
	if (p->pid > 0) {
		kill(p->pid, SIGCONT);
		kill(p->pid, SIGKILL);
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
		p->pid = -1;
	}
	if (p->out_fd >= 0) {
		close(p->out_fd);
		p->out_fd = -1;
	}
}

char *tu_run(const char *cmd, int *status)
{
	FILE *f = popen(cmd, "r");
	if (!f)
		return NULL;
	size_t cap = 4096, len = 0;
	char *out = malloc(cap);
	if (!out) {
		pclose(f);
		return NULL;
	}
	size_t n;
	while ((n = fread(out + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2) {
			char *bigger = realloc(out, cap * 2);
			if (!bigger)
				break;
			out = bigger;
			cap *= 2;
		}
	}
	out[len] = '\0';
	int st = pclose(f);
	if (status)
		*status = st;
	return out;
}

bool tu_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return true;
#else
	return false;
#endif
}

int tu_main(Suite *s)
{
	SRunner *sr = srunner_create(s);
	/* "-" makes Check write TAP to stdout, which tap-driver.sh reads. */
	srunner_set_tap(sr, "-");
	srunner_run_all(sr, CK_SILENT);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void tu_block_sigchld(void)
{
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);
}
