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
#include <sys/syscall.h>
#include <sys/uio.h>

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif


/* Event callbacks run inside the tracer's event handling: they may use the
 * per-thread calls but not anything that waits for events. */
static int not_in_callback(struct attach_target *t, const char *what)
{
	if (t->in_callback && attach__on_tracer(t))
		return attach__fail(t, -EDEADLK, "%s cannot be used from an event callback", what);
	return 0;
}

static int stop_fn(struct attach_target *t, void *arg)
{
	int r = not_in_callback(t, "attach_target__stop");
	return r ? r : attach__stop_world(t);
}

int attach_target__stop(struct attach_target *t)
{
	return attach__call(t, stop_fn, NULL);
}

static int resume_fn(struct attach_target *t, void *arg)
{
	int r = not_in_callback(t, "attach_target__resume");
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

static int ptrace_fail(struct attach_target *t, long r, const char *what, pid_t tid)
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
	return r < 0 ? ptrace_fail(t, r, "PTRACE_GETREGS", th->tid) : 0;
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
		return ptrace_fail(t, r, "PTRACE_GETREGS", th->tid);
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
	return r < 0 ? ptrace_fail(t, r, "PTRACE_SETREGS", th->tid) : 0;
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
		return ptrace_fail(t, r, "PTRACE_GETREGSET(NT_X86_XSTATE)", th->tid);
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
	return r < 0 ? ptrace_fail(t, r, "PTRACE_SETREGSET(NT_X86_XSTATE)", th->tid) : 0;
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
		return ptrace_fail(t, r, "PTRACE_GETREGS", th->tid);
	if (!th->gs_changed && regs.gs_base != a->value) {
		th->gs_changed = true;
		th->gs_orig = regs.gs_base;
	}
	regs.gs_base = a->value;
	r = attach__ptrace(PTRACE_SETREGS, th->tid, NULL, &regs);
	return r < 0 ? ptrace_fail(t, r, "setting gs_base", th->tid) : 0;
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
	int r = not_in_callback(t, "attach_target__syscall");
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

/* ------------------------------------------------------------------ step */

/* Kernel struct sigaction for rt_sigaction on x86-64. */
struct ksigaction {
	uint64_t handler, flags, restorer, mask;
};

static bool sigtrap_ignored(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ign = false;
	while (fgets(buf, sizeof buf, f))
		if (strncmp(buf, "SigIgn:", 7) == 0)
			ign = (strtoull(buf + 7, NULL, 16) >> (SIGTRAP - 1)) & 1;
	fclose(f);
	return ign;
}

/* rt_sigaction(SIGTRAP) in the target, with a scratch struct below the
 * thread's red zone (saved and put back). */
static int remote_sigtrap_action(struct attach_target *t, pid_t tid, const struct ksigaction *act,
				 struct ksigaction *old)
{
	struct user_regs_struct regs;
	long pr = attach__ptrace(PTRACE_GETREGS, tid, NULL, &regs);
	if (pr < 0)
		return ptrace_fail(t, pr, "PTRACE_GETREGS", tid);
	uint64_t scratch = (regs.rsp - 128 - 2 * sizeof(struct ksigaction) - 256) & ~15ull;
	unsigned char keep[2 * sizeof(struct ksigaction)];
	if (attach_target__read(t, scratch, keep, sizeof keep) != (ssize_t)sizeof keep)
		return attach__fail(t, -EFAULT, "cannot use the stack of thread %d", (int)tid);
	int r = 0;
	if (act)
		r = attach_target__write(t, scratch, act, sizeof(*act));
	int64_t ret = 0;
	if (r == 0) {
		uint64_t args[6] = { SIGTRAP, act ? scratch : 0,
				     old ? scratch + sizeof(struct ksigaction) : 0, 8, 0, 0 };
		r = attach__syscall(t, tid, SYS_rt_sigaction, args, &ret);
	}
	if (r == 0 && ret < 0)
		r = attach__fail(t, (int)ret, "rt_sigaction in process %d failed: %s", (int)t->pid,
				 strerror((int)-ret));
	if (r == 0 && old &&
	    attach_target__read(t, scratch + sizeof(*old), old, sizeof(*old)) != sizeof(*old))
		r = attach__fail(t, -EFAULT, "cannot read back the SIGTRAP action");
	attach_target__write(t, scratch, keep, sizeof keep);
	return r;
}

/* Whether the thread's own signal queue holds a single step's trap. */
static bool step_trap_queued(pid_t tid)
{
	struct __ptrace_peeksiginfo_args a = { .off = 0, .flags = 0, .nr = 8 };
	siginfo_t si[8];
	long n = attach__ptrace(PTRACE_PEEKSIGINFO, tid, &a, si);
	for (long i = 0; i < n; i++)
		if (si[i].si_signo == SIGTRAP &&
		    (si[i].si_code == TRAP_TRACE || si[i].si_code == TRAP_BRKPT))
			return true;
	return false;
}

/* The interrupt's stop can come before the step's trap (the kernel reports
 * a job-control trap before it dequeues a signal): the trap then waits in
 * the thread's queue, and once padrone detached it would be delivered to
 * the target, whom SIGTRAP's default action kills. Let the thread take it
 * now, every other signal still blocked: it stops for it before running
 * any instruction of its own, and that stop swallows it (control.c). */
static int take_queued_step_trap(struct attach_target *t, pid_t tid)
{
	struct athread *th = attach__thread(t, tid);
	if (!th || th->stop != AT_PARKED || th->gstop || !th->stepping ||
	    !step_trap_queued(tid))
		return 0;
	t->sc_tid = tid;
	long pr = attach__ptrace(PTRACE_CONT, tid, NULL, NULL);
	if (pr < 0) {
		t->sc_tid = 0;
		return ptrace_fail(t, pr, "PTRACE_CONT", tid);
	}
	th->stop = AT_RUNNING;
	int r = attach__wait_thread(t, tid, t->stop_timeout_ms);
	int rr = attach__repark(t, tid);
	return r < 0 ? r : rr;
}

static int single_step(struct attach_target *t, pid_t tid)
{
	/* Every signal but SIGTRAP blocked: the step is exactly one of the
	 * thread's own instructions, not the first of a handler. */
	uint64_t mask0, mask = ~(1ull << (SIGTRAP - 1));
	long pr = attach__ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(mask0), &mask0);
	if (pr == 0)
		pr = attach__ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(mask), &mask);
	if (pr < 0)
		return ptrace_fail(t, pr, "PTRACE_SETSIGMASK", tid);
	int r = 0;
	t->sc_tid = tid;
	for (int stale = 0; stale < 4; stale++) {
		pr = attach__ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL);
		if (pr < 0) {
			r = ptrace_fail(t, pr, "PTRACE_SINGLESTEP", tid);
			break;
		}
		struct athread *th = attach__thread(t, tid);
		th->stop = AT_RUNNING;
		/* Until its trap is seen: a step that outlasts the wait (a
		 * system call that blocks) traps later, and that trap is ours. */
		th->stepping = true;
		r = attach__wait_thread(t, tid, t->stop_timeout_ms);
		if (r < 0)
			break;
		th = attach__thread(t, tid);
		if (th->stop == AT_SIGNAL && th->sig == SIGTRAP)
			th->sig = 0;	/* the step's own trap */
		if (th->stop == AT_SIGNAL) {
			th->stepping = false;
			break;	/* done (another signal: the instruction faulted; delivered) */
		}
	}
	/* Stopped again before the mask goes back: after a step that timed
	 * out the thread still runs, and a mask set on a running thread is
	 * refused, which left every signal blocked. */
	struct athread *th = attach__thread(t, tid);
	if (th) {
		if (th->stop == AT_RUNNING && !th->interrupted)
			attach__interrupt(t, th);
		int rr = attach__repark(t, tid);
		if (rr == 0)
			rr = take_queued_step_trap(t, tid);
		if (rr < 0 && r == 0)
			r = rr;
		if (attach__thread(t, tid))
			attach__ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(mask0), &mask0);
	}
	t->sc_tid = 0;
	return r;
}

static int step_fn(struct attach_target *t, void *arg)
{
	pid_t tid = *(pid_t *)arg;
	int err = not_in_callback(t, "attach_target__step");
	if (err)
		return err;
	struct athread *th = attach__stopped_thread(t, tid, &err);
	if (!th)
		return err;
	tid = th->tid;
	err = attach__repark(t, tid);
	if (err < 0)
		return err;
	/* A trap sent to a thread ignoring SIGTRAP resets the disposition
	 * to SIG_DFL (force_sig): put the target's own back afterwards. */
	struct ksigaction old;
	bool ignored = sigtrap_ignored(t->pid);
	if (ignored && (err = remote_sigtrap_action(t, tid, NULL, &old)) < 0)
		return err;
	err = single_step(t, tid);
	if (ignored) {
		int rr = remote_sigtrap_action(t, tid, &old, NULL);
		if (rr < 0 && err == 0)
			err = rr;
	}
	return err;
}

int attach_target__step(struct attach_target *t, pid_t tid)
{
	return attach__call(t, step_fn, &tid);
}
