/* attach/tracer.c: the target object, its tracer thread and the request
 * queue that hands ptrace work to it.
 *
 * ptrace requests on a task are only valid from the thread that attached
 * it, so one thread per target owns every ptrace call. It waits for its
 * tracees with waitpid(-1, __WALL|__WNOTHREAD|WNOHANG): __WNOTHREAD limits
 * the wait to this thread's own tracees, so the host's other children are
 * never reaped here. Between events it sleeps in sigtimedwait(SIGCHLD)
 * with SIGCHLD (and every asynchronous signal) blocked in the thread, for
 * at most ATTACH_POLL_MS. Other threads queue a request and wake it with a
 * thread-directed tgkill(SIGCHLD), which its sigtimedwait consumes: no
 * handler ever runs.
 */
#include "attach/internal.h"

#include <dirent.h>
#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

bool attach__on_tracer(const struct attach_target *t)
{
	return t->tracer_tid == gettid();
}

static void wake_tracer(struct attach_target *t)
{
	/* Thread-directed: lands in the tracer's private pending set. */
	syscall(SYS_tgkill, getpid(), t->tracer_tid, SIGCHLD);
}

int attach__call(struct attach_target *t, int (*fn)(struct attach_target *, void *), void *arg)
{
	if (attach__on_tracer(t)) {
		int ret = fn(t, arg);
		if (ret >= 0)
			attach__clear_msg(t);
		return ret;
	}

	struct attach_req r = { .fn = fn, .arg = arg };
	pthread_mutex_lock(&t->lock);
	if (t->tracer_done) {
		pthread_mutex_unlock(&t->lock);
		return attach__fail(t, -ESRCH, "padrone is no longer attached to process %d (%s)",
				    (int)t->pid, t->comm);
	}
	*t->reqs_tail = &r;
	t->reqs_tail = &r.next;
	pthread_mutex_unlock(&t->lock);
	wake_tracer(t);

	pthread_mutex_lock(&t->lock);
	while (!r.done)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
	attach__fail(t, r.ret, "%s", r.msg);
	return r.ret;
}

/* Run every queued request; the answer's message travels with it. */
static void run_requests(struct attach_target *t)
{
	for (;;) {
		pthread_mutex_lock(&t->lock);
		struct attach_req *r = t->reqs;
		if (r) {
			t->reqs = r->next;
			if (!t->reqs)
				t->reqs_tail = &t->reqs;
		}
		pthread_mutex_unlock(&t->lock);
		if (!r)
			return;
		attach__clear_msg(t);
		int ret = r->fn(t, r->arg);
		/* A success carries no message (not one of a step that failed
		 * and was recovered from on the way). */
		snprintf(r->msg, sizeof r->msg, "%s", ret >= 0 ? "" : attach__msg(t));
		pthread_mutex_lock(&t->lock);
		r->ret = ret;
		r->done = true;
		pthread_cond_broadcast(&t->cond);
		pthread_mutex_unlock(&t->lock);
	}
}

/* Answer whatever is still queued once the thread is leaving. */
static void refuse_requests(struct attach_target *t)
{
	pthread_mutex_lock(&t->lock);
	t->tracer_done = true;
	for (struct attach_req *r = t->reqs; r; r = r->next) {
		r->ret = -ESRCH;
		snprintf(r->msg, sizeof r->msg, "padrone is no longer attached to process %d (%s)",
			 (int)t->pid, t->comm);
		r->done = true;
	}
	t->reqs = NULL;
	t->reqs_tail = &t->reqs;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static void *tracer_main(void *arg)
{
	struct attach_target *t = arg;
	struct attach_error e = { 0 };

	t->tracer_tid = gettid();
	int r = attach__seize_all(t, &e);
	if (r < 0)
		attach__detach_all(t);
	pthread_mutex_lock(&t->lock);
	t->seize_ret = r;
	t->seize_err = e;
	t->seize_done = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);

	while (r == 0) {
		run_requests(t);
		pthread_mutex_lock(&t->lock);
		bool quit = t->quit;
		pthread_mutex_unlock(&t->lock);
		if (quit)
			break;
		attach__unboost(t);
		attach__pump(t, ATTACH_POLL_MS);
	}
	refuse_requests(t);
	return NULL;
}

/* The tracer keeps synchronous signals (a crash must still be reported)
 * and blocks everything else: the host's signals go to its own threads. */
static void tracer_sigmask(sigset_t *set)
{
	sigfillset(set);
	sigdelset(set, SIGSEGV);
	sigdelset(set, SIGBUS);
	sigdelset(set, SIGFPE);
	sigdelset(set, SIGILL);
	sigdelset(set, SIGSYS);
	sigdelset(set, SIGTRAP);
}

/* What a target owns on this side, once its tracer thread is gone. */
static void target_free(struct attach_target *t)
{
	if (t->mem_fd >= 0)
		close(t->mem_fd);
	if (t->qos_fd >= 0)	/* closed, the request goes with it */
		close(t->qos_fd);
	free(t->th);
	free(t->restarts);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static int precheck(pid_t pid, struct attach__proc *p, struct attach_error *e)
{
	char buf[ATTACH_MSG_MAX], comm2[64];
	int r;

	if (pid <= 0)
		return attach__seterr(e, -ESRCH, ATTACH_NO_PROCESS,
				      "no such process: %d is not a valid PID", (int)pid);
	r = attach__proc_read(pid, p);
	if (r == -ENOENT || r == -ESRCH)
		return attach__seterr(e, -ESRCH, ATTACH_NO_PROCESS,
				      "no such process: PID %d does not exist", (int)pid);
	if (r < 0)
		return attach__seterr(e, r, ATTACH_SYSTEM, "cannot read /proc/%d: %s", (int)pid,
				      strerror(-r));
	if (p->tgid && p->tgid != pid)
		return attach__seterr(e, -ESRCH, ATTACH_NO_PROCESS,
				      "no such process: %d is a thread of process %d (%s), not a "
				      "process; attach to %d", (int)pid, (int)p->tgid,
				      attach__comm(p->tgid, comm2, sizeof comm2), (int)p->tgid);
	if (p->flags & 0x00200000ul)	/* PF_KTHREAD */
		return attach__seterr(e, -EPERM, ATTACH_KERNEL_THREAD,
				      "process %d (%s) is a kernel thread: it has no user space to "
				      "attach to", (int)pid, p->comm);
	/* A zombie leader whose other threads still run is a live process. */
	if ((p->state == 'Z' || p->state == 'X') && p->threads <= 1)
		return attach__seterr(e, -ESRCH, ATTACH_ZOMBIE,
				      "process %d (%s) is a zombie: it has exited and its parent %d "
				      "(%s) has not reaped it yet; there is nothing left to attach to",
				      (int)pid, p->comm, (int)p->ppid,
				      attach__comm(p->ppid, comm2, sizeof comm2));
	struct attach__perm_facts f;
	attach__perm_facts(pid, p, &f);
	if (attach__perm_explain(&f, buf, sizeof buf))
		return attach__seterr(e, -EPERM, ATTACH_PERMISSION, "%s", buf);
	char exe[64], target[16];
	attach__live_path(pid, "exe", exe, sizeof exe);
	r = attach__elf_check(exe, pid, p->comm, e);
	/* The link itself refused (not the file it names): the kernel's access
	 * check on the process, for a reason the facts above do not show. */
	if (r < 0 && e->why == ATTACH_PERMISSION && readlink(exe, target, sizeof target) < 0 &&
	    (errno == EACCES || errno == EPERM)) {
		attach__perm_unexplained(&f, 0, buf, sizeof buf);
		return attach__seterr(e, r, ATTACH_PERMISSION, "%s", buf);
	}
	if (r < 0)
		return r;
	if (p->tracer) {
		if (p->tracer == getpid())
			return attach__seterr(e, -EBUSY, ATTACH_ALREADY_TRACED,
					      "process %d (%s) is already traced by this process (%d): "
					      "attach to it only once", (int)pid, p->comm, (int)getpid());
		return attach__seterr(e, -EBUSY, ATTACH_ALREADY_TRACED,
				      "process %d (%s) is already traced by process %d (%s); a process "
				      "can have only one tracer: detach that one first", (int)pid,
				      p->comm, (int)p->tracer, attach__comm(p->tracer, comm2, sizeof comm2));
	}
	return 0;
}

int attach_seize(pid_t pid, const struct attach_opts *opts, struct attach_target **out,
		 struct attach_error *err)
{
	struct attach_error local;
	struct attach__proc p;
	int r;

	if (!err)
		err = &local;
	memset(err, 0, sizeof(*err));
	if (!out)
		return attach__seterr(err, -EINVAL, ATTACH_SYSTEM, "attach_seize: out is NULL");
	*out = NULL;
	r = precheck(pid, &p, err);
	if (r < 0)
		return r;

	struct attach_target *t = calloc(1, sizeof(*t));
	if (!t)
		return attach__seterr(err, -ENOMEM, ATTACH_SYSTEM, "out of memory");
	t->pid = pid;
	t->qos_fd = -1;
	snprintf(t->comm, sizeof t->comm, "%s", p.comm);
	t->stop_timeout_ms = 1000;
	t->syscall_timeout_ms = 5000;
	if (opts && opts->sz >= offsetof(struct attach_opts, stop_timeout_ms) + sizeof(int) &&
	    opts->stop_timeout_ms > 0)
		t->stop_timeout_ms = opts->stop_timeout_ms;
	if (opts && opts->sz >= offsetof(struct attach_opts, syscall_timeout_ms) + sizeof(int) &&
	    opts->syscall_timeout_ms > 0)
		t->syscall_timeout_ms = opts->syscall_timeout_ms;
	t->was_stopped = p.state == 'T';
	t->reqs_tail = &t->reqs;
	t->state = ATTACH_OK;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);

	/* Opened now, it keeps the address space even if the leader exits. */
	char path[64];
	attach__live_path(pid, "mem", path, sizeof path);
	t->mem_fd = open(path, O_RDWR | O_CLOEXEC);
	if (t->mem_fd < 0) {
		r = -errno;
		attach__seterr(err, r, r == -EACCES || r == -EPERM ? ATTACH_PERMISSION : ATTACH_SYSTEM,
			       "cannot open %s: %s", path, strerror(-r));
		goto fail;
	}

	sigset_t all, old;
	tracer_sigmask(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&t->thread, NULL, tracer_main, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		attach__seterr(err, r, ATTACH_SYSTEM, "cannot start the tracer thread: %s",
			       strerror(-r));
		goto fail;
	}
	pthread_mutex_lock(&t->lock);
	while (!t->seize_done)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
	if (t->seize_ret < 0) {
		r = t->seize_ret;
		*err = t->seize_err;
		pthread_join(t->thread, NULL);
		goto fail;
	}
	*out = t;
	return 0;

fail:
	target_free(t);
	return r;
}

static int detach_fn(struct attach_target *t, void *arg)
{
	int r = attach__detach_all(t);
	pthread_mutex_lock(&t->lock);
	t->quit = true;
	pthread_mutex_unlock(&t->lock);
	return r;
}

/* The kernel detaches what the tracer thread still traced when it exits,
 * a moment after pthread_join returns: wait for that, so that the target
 * is free when attach_target__detach returns. */
static void wait_released(struct attach_target *t)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)t->pid);
	for (int i = 0; i < 2000; i++) {
		DIR *d = opendir(path);
		if (!d)
			return;
		bool held = false;
		struct dirent *de;
		while ((de = readdir(d)) && !held) {
			struct attach__proc p;
			char dir[64];
			int tid = atoi(de->d_name);
			if (tid <= 0)
				continue;
			snprintf(dir, sizeof dir, "%d/task/%d", (int)t->pid, tid);
			held = attach__proc_read_path(dir, &p) == 0 && p.tracer == getpid();
		}
		closedir(d);
		if (!held)
			return;
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
}

int attach_target__detach(struct attach_target *t)
{
	if (!t)
		return 0;
	if (attach__on_tracer(t))
		return attach__fail(t, -EDEADLK, "attach_target__detach cannot run on the tracer "
					      "thread (from an event callback or attach_target__call)");
	int r = attach__call(t, detach_fn, NULL);
	pthread_join(t->thread, NULL);
	if (t->left_running)
		wait_released(t);
	target_free(t);
	return r;
}

pid_t attach_target__pid(const struct attach_target *t)
{
	return t->pid;
}

pid_t attach_target__own_pid(const struct attach_target *t)
{
	struct attach__proc p;
	int rc = attach__proc_read(t->pid, &p);

	return rc < 0 ? rc : p.nspid;
}

enum attach_why attach_target__state(const struct attach_target *t)
{
	return (enum attach_why)__atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
}

bool attach_target__was_stopped(const struct attach_target *t)
{
	return t->was_stopped;
}

bool attach_target__is_stopped(const struct attach_target *t)
{
	return __atomic_load_n(&t->world_stopped, __ATOMIC_ACQUIRE);
}

void attach_target__on_event(struct attach_target *t, attach_event_fn fn, void *arg)
{
	pthread_mutex_lock(&t->lock);
	t->ev_fn = fn;
	t->ev_arg = arg;
	pthread_mutex_unlock(&t->lock);
}

void attach_target__pause_stats(const struct attach_target *t, struct attach_pause_stats *st)
{
	pthread_mutex_lock((pthread_mutex_t *)&t->lock);
	*st = t->stats;
	pthread_mutex_unlock((pthread_mutex_t *)&t->lock);
}

int attach_target__call(struct attach_target *t, int (*fn)(struct attach_target *t, void *arg),
			void *arg)
{
	return attach__call(t, fn, arg);
}
