/* attach/ops.c: the public verbs that need the tracer thread. Each packs
 * its arguments, runs on the tracer (attach__call) and leaves its message
 * with the caller. */
#include "attach/internal.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif


/* Event callbacks run inside the tracer's event handling: they may use the
 * per-thread calls but not anything that waits for events. */
int attach__not_in_callback(struct attach_target *t, const char *what)
{
	if (t->in_callback && attach__on_tracer(t))
		return attach__fail(t, -EDEADLK, "%s cannot be used from an event callback", what);
	return 0;
}

static int stop_fn(struct attach_target *t, void *arg)
{
	int r = attach__not_in_callback(t, "attach_target__stop");
	return r ? r : attach__stop_world(t);
}

int attach_target__stop(struct attach_target *t)
{
	return attach__call(t, stop_fn, NULL);
}

static int resume_fn(struct attach_target *t, void *arg)
{
	int r = attach__not_in_callback(t, "attach_target__resume");
	return r ? r : attach__resume_world(t);
}

int attach_target__resume(struct attach_target *t)
{
	return attach__call(t, resume_fn, NULL);
}

struct threads_arg {
	pid_t *tids;
	size_t max;
};

static int threads_fn(struct attach_target *t, void *arg)
{
	struct threads_arg *a = arg;
	int r = attach__check_alive(t);
	if (r < 0)
		return r;
	size_t n = 0;
	for (size_t i = 0; i < t->nth; i++) {
		/* one on its way out runs no more user code, and stays
		 * running until its exit is reported: nothing to ask of it */
		if (t->th[i].foreign || t->th[i].exiting)
			continue;
		if (n < a->max)
			a->tids[n] = t->th[i].tid;
		n++;
	}
	return (int)n;
}

int attach_target__threads(struct attach_target *t, pid_t *tids, size_t max)
{
	struct threads_arg a = { tids, tids ? max : 0 };
	return attach__call(t, threads_fn, &a);
}

/* ------------------------------------------------------------ registers */

struct regs_arg {
	pid_t tid;
	void *buf;
	size_t len;
	size_t *lenp;
	uint64_t value;
};

int attach__ptrace_fail(struct attach_target *t, long r, const char *what, pid_t tid)
{
	return attach__fail(t, (int)r, "%s of thread %d of process %d (%s) failed: %s", what,
			    (int)tid, (int)t->pid, t->comm, strerror((int)-r));
}

static int get_regs_fn(struct attach_target *t, void *arg)
{
	struct regs_arg *a = arg;
	int err;
	struct athread *th = attach__stopped_thread(t, a->tid, &err);
	if (!th)
		return err;
	long r = attach__ptrace(PTRACE_GETREGS, th->tid, NULL, a->buf);
	return r < 0 ? attach__ptrace_fail(t, r, "PTRACE_GETREGS", th->tid) : 0;
}

int attach_target__get_regs(struct attach_target *t, pid_t tid, struct user_regs_struct *regs)
{
	struct regs_arg a = { .tid = tid, .buf = regs };
	return attach__call(t, get_regs_fn, &a);
}

/* Remember a thread's first gs_base before padrone changes it. */
static int note_gs(struct attach_target *t, struct athread *th, uint64_t new_gs)
{
	if (th->gs_changed)
		return 0;
	struct user_regs_struct cur;
	long r = attach__ptrace(PTRACE_GETREGS, th->tid, NULL, &cur);
	if (r < 0)
		return attach__ptrace_fail(t, r, "PTRACE_GETREGS", th->tid);
	if (cur.gs_base != new_gs) {
		th->gs_changed = true;
		th->gs_orig = cur.gs_base;
	}
	return 0;
}

static int set_regs_fn(struct attach_target *t, void *arg)
{
	struct regs_arg *a = arg;
	const struct user_regs_struct *regs = a->buf;
	int err;
	struct athread *th = attach__stopped_thread(t, a->tid, &err);
	if (!th)
		return err;
	err = note_gs(t, th, regs->gs_base);
	if (err)
		return err;
	long r = attach__ptrace(PTRACE_SETREGS, th->tid, NULL, a->buf);
	return r < 0 ? attach__ptrace_fail(t, r, "PTRACE_SETREGS", th->tid) : 0;
}

int attach_target__set_regs(struct attach_target *t, pid_t tid, const struct user_regs_struct *regs)
{
	struct regs_arg a = { .tid = tid, .buf = (void *)regs };
	return attach__call(t, set_regs_fn, &a);
}

static int get_xstate_fn(struct attach_target *t, void *arg)
{
	struct regs_arg *a = arg;
	int err;
	struct athread *th = attach__stopped_thread(t, a->tid, &err);
	if (!th)
		return err;
	size_t need = attach__xstate_size(t, th->tid);
	if (!need)
		return attach__fail(t, -EOPNOTSUPP, "the kernel gives no xsave state for thread %d",
				    (int)th->tid);
	if (*a->lenp < need) {
		*a->lenp = need;
		return attach__fail(t, -ENOSPC, "the xsave area of thread %d needs %zu bytes",
				    (int)th->tid, need);
	}
	struct iovec iov = { a->buf, need };
	long r = attach__ptrace(PTRACE_GETREGSET, th->tid, (void *)NT_X86_XSTATE, &iov);
	if (r < 0)
		return attach__ptrace_fail(t, r, "PTRACE_GETREGSET(NT_X86_XSTATE)", th->tid);
	*a->lenp = iov.iov_len;
	return 0;
}

int attach_target__get_xstate(struct attach_target *t, pid_t tid, void *buf, size_t *len)
{
	struct regs_arg a = { .tid = tid, .buf = buf, .lenp = len };
	return attach__call(t, get_xstate_fn, &a);
}

static int set_xstate_fn(struct attach_target *t, void *arg)
{
	struct regs_arg *a = arg;
	int err;
	struct athread *th = attach__stopped_thread(t, a->tid, &err);
	if (!th)
		return err;
	struct iovec iov = { a->buf, a->len };
	long r = attach__ptrace(PTRACE_SETREGSET, th->tid, (void *)NT_X86_XSTATE, &iov);
	return r < 0 ? attach__ptrace_fail(t, r, "PTRACE_SETREGSET(NT_X86_XSTATE)", th->tid) : 0;
}

int attach_target__set_xstate(struct attach_target *t, pid_t tid, const void *buf, size_t len)
{
	struct regs_arg a = { .tid = tid, .buf = (void *)buf, .len = len };
	return attach__call(t, set_xstate_fn, &a);
}

static int set_gs_fn(struct attach_target *t, void *arg)
{
	struct regs_arg *a = arg;
	int err;
	struct athread *th = attach__stopped_thread(t, a->tid, &err);
	if (!th)
		return err;
	struct user_regs_struct regs;
	long r = attach__ptrace(PTRACE_GETREGS, th->tid, NULL, &regs);
	if (r < 0)
		return attach__ptrace_fail(t, r, "PTRACE_GETREGS", th->tid);
	if (!th->gs_changed && regs.gs_base != a->value) {
		th->gs_changed = true;
		th->gs_orig = regs.gs_base;
	}
	regs.gs_base = a->value;
	r = attach__ptrace(PTRACE_SETREGS, th->tid, NULL, &regs);
	return r < 0 ? attach__ptrace_fail(t, r, "setting gs_base", th->tid) : 0;
}

int attach_target__set_gs_base(struct attach_target *t, pid_t tid, uint64_t gs_base)
{
	struct regs_arg a = { .tid = tid, .value = gs_base };
	return attach__call(t, set_gs_fn, &a);
}

/* 0 now, and 0 is what detach puts back. */
static int clear_gs_fn(struct attach_target *t, void *arg)
{
	struct regs_arg *a = arg;
	int r = set_gs_fn(t, a);
	struct athread *th = r == 0 ? attach__thread(t, a->tid) : NULL;
	if (th) {
		th->gs_changed = true;
		th->gs_orig = 0;
	}
	return r;
}

int attach_target__clear_gs_base(struct attach_target *t, pid_t tid)
{
	struct regs_arg a = { .tid = tid, .value = 0 };
	return attach__call(t, clear_gs_fn, &a);
}

static int keep_gs_fn(struct attach_target *t, void *arg)
{
	(void)arg;
	for (size_t i = 0; i < t->nth; i++)
		t->th[i].gs_changed = false;
	return 0;
}

int attach_target__keep_gs_bases(struct attach_target *t)
{
	return attach__call(t, keep_gs_fn, NULL);
}

/* ------------------------------------------------------- remote syscall */

struct syscall_arg {
	pid_t tid;
	long nr;
	const uint64_t *args;
	int64_t *ret;
};

static int syscall_fn(struct attach_target *t, void *arg)
{
	struct syscall_arg *a = arg;
	int r = attach__not_in_callback(t, "attach_target__syscall");
	if (r)
		return r;
	r = attach__stop_world(t);
	if (r < 0)
		return r;
	r = attach__syscall(t, a->tid, a->nr, a->args, a->ret);
	/* Keep the syscall's message over resume's (which sets none on success). */
	char msg[ATTACH_MSG_MAX];
	snprintf(msg, sizeof msg, "%s", attach__msg(t));
	int rr = attach__resume_world(t);
	if (r == 0 && rr < 0 && attach_target__state(t) == ATTACH_OK)
		return rr;
	attach__fail(t, r, "%s", msg);
	return r;
}

int attach_target__syscall(struct attach_target *t, pid_t tid, long nr, const uint64_t args[6],
			   int64_t *ret)
{
	static const uint64_t none[6];
	int64_t dummy;
	struct syscall_arg a = { tid, nr, args ? args : none, ret ? ret : &dummy };
	return attach__call(t, syscall_fn, &a);
}
