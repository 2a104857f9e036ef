/* attach/control-seize.c: seizing every thread of the target, rescanning
 * /proc/PID/task until no new thread shows, so that none is missed while
 * others clone. Runs on the tracer thread; the state machine it feeds is
 * control.c's. */
#include "attach/internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <unistd.h>

/* Forks are traced only to be told (ATTACH_EV_FORK) and let go: a child
 * inherits the forking thread's gs_base, which instrumentation may have
 * pointed at that thread's ring. */
#define SEIZE_OPTIONS (PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | \
		       PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK)

/* ----------------------------------------------------------------- seize */

/* The tids of /proc/PID/task in a malloc'd array; how many, or -errno. */
static int list_tasks(pid_t pid, pid_t **out)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	size_t n = 0, cap = 64;
	pid_t *v = malloc(cap * sizeof(*v));
	struct dirent *de;
	while (v && (de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		if (tid <= 0)
			continue;
		if (n == cap) {
			pid_t *bigger = realloc(v, 2 * cap * sizeof(*v));
			if (!bigger) {
				free(v);
				v = NULL;
				break;
			}
			v = bigger;
			cap *= 2;
		}
		v[n++] = tid;
	}
	closedir(d);
	if (!v)
		return -ENOMEM;
	*out = v;
	return (int)n;
}

static int cmp_tid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return x < y ? -1 : x > y;
}

/* Seize one task we have not met. 1 if it is now ours, 0 to skip it, or
 * -errno with a message in *e. */
static int seize_one(struct attach_target *t, pid_t tid, bool interrupt_it, struct attach_error *e)
{
	char comm2[64], buf[ATTACH_MSG_MAX];
	int r = (int)attach__ptrace(PTRACE_SEIZE, tid, NULL, (void *)(long)SEIZE_OPTIONS);
	if (r == 0) {
		struct athread *th = attach__add_thread(t, tid);
		if (!th)
			return attach__seterr(e, -ENOMEM, ATTACH_SYSTEM, "out of memory");
		if (interrupt_it)
			attach__interrupt(t, th);
		return 1;
	}
	if (r == -ESRCH)
		return 0;	/* gone in the meantime */
	if (r != -EPERM)
		return attach__seterr(e, r, ATTACH_SYSTEM, "PTRACE_SEIZE of thread %d of process %d "
				      "(%s) failed: %s", (int)tid, (int)t->pid, t->comm, strerror(-r));
	struct attach__proc p;
	if (attach__proc_read(tid, &p) < 0 || p.state == 'Z' || p.state == 'X')
		return 0;	/* exited: the kernel refuses zombies */
	if (p.tracer == getpid()) {
		/* A new thread TRACECLONE already gave us; its stop is coming. */
		if (!attach__thread(t, tid) && !attach__new_thread(t, tid, 0))
			return attach__seterr(e, -ENOMEM, ATTACH_SYSTEM, "out of memory");
		return 1;
	}
	if (p.tracer && tid == t->pid)
		return attach__seterr(e, -EBUSY, ATTACH_ALREADY_TRACED,
				      "process %d (%s) is already traced by process %d (%s); a process "
				      "can have only one tracer: detach that one first", (int)t->pid,
				      t->comm, (int)p.tracer, attach__comm(p.tracer, comm2, sizeof comm2));
	if (p.tracer)
		return attach__seterr(e, -EBUSY, ATTACH_ALREADY_TRACED,
				      "thread %d of process %d (%s) is already traced by process %d "
				      "(%s); a thread can have only one tracer: detach that one first",
				      (int)tid, (int)t->pid, t->comm, (int)p.tracer,
				      attach__comm(p.tracer, comm2, sizeof comm2));
	struct attach__perm_facts f;
	attach__perm_facts(t->pid, &p, &f);
	if (attach__perm_explain(&f, buf, sizeof buf))
		return attach__seterr(e, -EPERM, ATTACH_PERMISSION, "%s", buf);
	attach__perm_unexplained(&f, tid, buf, sizeof buf);
	return attach__seterr(e, -EPERM, ATTACH_PERMISSION, "%s", buf);
}

/* Seize every task in /proc/PID/task we do not hold yet; the number
 * seized, or -errno. */
int attach__seize_new(struct attach_target *t, bool interrupt_them, struct attach_error *e)
{
	pid_t *tids = NULL;
	int n = list_tasks(t->pid, &tids);
	if (n < 0)
		return n == -ENOENT ? 0 : attach__seterr(e, n, ATTACH_SYSTEM, "cannot list the "
							 "threads of process %d (%s): %s",
							 (int)t->pid, t->comm, strerror(-n));
	/* Ours, sorted, to look the listed ones up. */
	size_t known_n = t->nth;
	pid_t *known = malloc((known_n + 1) * sizeof(*known));
	if (!known) {
		free(tids);
		return attach__seterr(e, -ENOMEM, ATTACH_SYSTEM, "out of memory");
	}
	for (size_t i = 0; i < known_n; i++)
		known[i] = t->th[i].tid;
	qsort(known, known_n, sizeof(*known), cmp_tid);
	int added = 0;
	for (int i = 0; i < n; i++) {
		if (bsearch(&tids[i], known, known_n, sizeof(*known), cmp_tid) ||
		    attach__thread(t, tids[i]))	/* met meanwhile */
			continue;
		int r = seize_one(t, tids[i], interrupt_them, e);
		if (r < 0) {
			added = r;
			break;
		}
		added += r;
	}
	free(known);
	free(tids);
	return added;
}

/* A thread seized in the middle of clone() gives a child that is not
 * auto-attached and may not be in /proc/PID/task yet. A brief stop of the
 * world lets every such clone() finish and finds the child (see
 * attach__stop_world). Threads that cannot stop now (a vfork parent) are
 * not cloning either: that is no failure here. */
static int close_clone_window(struct attach_target *t)
{
	if (attach__stop_world(t) == 0)
		attach__resume_world(t);
	pthread_mutex_lock(&t->lock);
	memset(&t->stats, 0, sizeof t->stats);
	pthread_mutex_unlock(&t->lock);
	return attach__check_alive(t);
}

int attach__seize_all(struct attach_target *t, struct attach_error *e)
{
	/* A thread that was being cloned by a not-yet-seized one is not
	 * auto-attached: list again until a round finds nobody new. */
	for (int round = 0; round < 10000; round++) {
		int added = attach__seize_new(t, false, e);
		if (added < 0)
			return added;
		attach__pump(t, 0);
		if (attach_target__state(t) != ATTACH_OK || t->nth == 0)
			break;
		if (added == 0) {
			if (close_clone_window(t) == 0)
				return 0;
			break;
		}
	}
	if (attach_target__state(t) == ATTACH_TARGET_EXECED)
		return attach__seterr(e, -ECHILD, ATTACH_TARGET_EXECED,
				      "process %d (%s) called exec while padrone was attaching; "
				      "it runs untraced", (int)t->pid, t->comm);
	if (attach_target__state(t) == ATTACH_TARGET_EXITED || t->nth == 0)
		return attach__seterr(e, -ESRCH, ATTACH_TARGET_EXITED,
				      "process %d (%s) exited while padrone was attaching",
				      (int)t->pid, t->comm);
	return attach__seterr(e, -EAGAIN, ATTACH_SYSTEM,
			      "process %d (%s) creates threads faster than padrone can seize them",
			      (int)t->pid, t->comm);
}
