#include "tests/attach/helpers.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t hot_function_addr;

pid_t at_spawn_argv(struct tu_proc *p, char *const argv[])
{
	char line[256];
	ck_assert_int_eq(tu_spawn(p, argv, true), 0);
	int n = tu_wait_for(p, "ready ", line, sizeof line, 10000);
	ck_assert_msg(n > 0, "%s did not print ready (%d)", argv[0], n);
	int pid = 0;
	unsigned long long addr = 0;
	int got = sscanf(line, "ready %d hot_function %llx", &pid, &addr);
	ck_assert_int_ge(got, 1);
	ck_assert_int_eq(pid, p->pid);
	hot_function_addr = got == 2 ? addr : 0;
	return pid;
}

pid_t at_spawn(struct tu_proc *p, const char *target, ...)
{
	char *argv[32];
	char rel[128];
	int n = 0;
	va_list ap;

	snprintf(rel, sizeof rel, "tests/targets/%s", target);
	argv[n++] = (char *)tu_path(rel);
	va_start(ap, target);
	const char *a;
	while ((a = va_arg(ap, const char *)) && n < 31)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	char path[4096];
	snprintf(path, sizeof path, "%s", argv[0]);
	argv[0] = path;
	return at_spawn_argv(p, argv);
}

uint64_t at_hot_function(void)
{
	return hot_function_addr;
}

long at_check_ticks(struct tu_proc *p, int n, long work)
{
	char line[256], cmd[4200];
	long last = 0;
	for (int i = 0; i < n; i++) {
		int r = tu_wait_for(p, "tick ", line, sizeof line, 10000);
		ck_assert_msg(r > 0, "no tick from the target (%d)", r);
		long tick;
		unsigned long long sum;
		ck_assert_int_eq(sscanf(line, "tick %ld checksum %llx", &tick, &sum), 2);
		snprintf(cmd, sizeof cmd, "%s -e %ld -w %ld", tu_path("tests/targets/hotloop"), tick,
			 work);
		char *out = tu_run(cmd, NULL);
		ck_assert_ptr_nonnull(out);
		unsigned long long want = 0;
		long t2 = 0;
		ck_assert_int_eq(sscanf(out, "tick %ld checksum %llx", &t2, &want), 2);
		free(out);
		ck_assert_msg(sum == want, "tick %ld: checksum %llx, want %llx", tick, sum, want);
		last = tick;
	}
	return last;
}

long at_threads_ok(struct tu_proc *p)
{
	char line[256];
	long tick, created, errors;
	ck_assert_int_gt(tu_wait_for(p, "tick", line, sizeof line, 5000), 0);
	ck_assert_int_eq(sscanf(line, "tick %ld created %ld errors %ld", &tick, &created, &errors), 3);
	ck_assert_msg(errors == 0, "threads target: %s", line);
	return created;
}

void at_drain(struct tu_proc *p)
{
	char line[256];
	struct timespec t0, t;

	/* A fast target prints faster than 2 ms a line and would never pause:
	 * stop after 200 ms as well. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (tu_read_line(p, line, sizeof line, 2) >= 0) {
		ck_assert_msg(strncmp(line, "error", 5) != 0, "target: %s", line);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= 200)
			break;
	}
}

static int read_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	size_t n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
	return (int)n;
}

pid_t at_tracer(pid_t pid, pid_t tid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)(tid ? tid : pid));
	if (read_file(path, buf, sizeof buf) < 0)
		return -1;
	const char *t = strstr(buf, "TracerPid:");
	if (!t)
		return -1;
	pid_t tr = (pid_t)atoi(t + 10);
	/* TracerPid names the tracing thread: answer with its process. */
	snprintf(path, sizeof path, "/proc/%d/status", (int)tr);
	if (tr > 0 && read_file(path, buf, sizeof buf) > 0 && (t = strstr(buf, "\nTgid:")))
		tr = (pid_t)atoi(t + 6);
	return tr;
}

char at_state(pid_t pid, pid_t tid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)(tid ? tid : pid));
	if (read_file(path, buf, sizeof buf) < 0)
		return 0;
	const char *c = strrchr(buf, ')');
	return c && c[1] == ' ' ? c[2] : 0;
}

static int each_task(pid_t pid, pid_t *tids, int max)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (atoi(de->d_name) > 0 && n < max)
			tids[n++] = atoi(de->d_name);
	closedir(d);
	return n;
}

int at_task_count(pid_t pid)
{
	pid_t tids[4096];
	return each_task(pid, tids, 4096);
}

int at_tasks_not_traced_by(pid_t pid, pid_t tracer)
{
	pid_t tids[4096];
	int n = each_task(pid, tids, 4096), bad = 0;
	for (int i = 0; i < n; i++) {
		pid_t tr = at_tracer(pid, tids[i]);
		char st = at_state(pid, tids[i]);
		if (tr < 0 || st == 'Z' || st == 'X' || st == 0)
			continue;	/* exited meanwhile */
		bad += tr != tracer;
	}
	return bad;
}

bool at_wait_state(pid_t pid, const char *states, int timeout_ms)
{
	for (int i = 0; i < timeout_ms; i++) {
		char s = at_state(pid, 0);
		if (s && strchr(states, s))
			return true;
		at_sleep_ms(1);
	}
	return false;
}

void at_block_sigchld(void)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
}

const char *at_self_comm(void)
{
	static char buf[64];
	read_file("/proc/self/comm", buf, sizeof buf);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

void at_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

struct attach_target *at_seize(pid_t pid)
{
	struct attach_target *t = NULL;
	struct attach_error e;
	int r = attach_seize(pid, NULL, &t, &e);
	ck_assert_msg(r == 0, "attach_seize(%d): %d %s", (int)pid, r, e.msg);
	ck_assert_ptr_nonnull(t);
	return t;
}
