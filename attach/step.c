/* attach/step.c: single-stepping one thread of a stopped world
 * (attach_target__step).
 *
 * The thread steps with its own signal mask, as gdb does: padrone never
 * changes it, so a padrone killed in the middle of a step leaves no signal
 * blocked. (It used to block every signal but SIGTRAP for the step; killed
 * in between, the thread kept them all blocked forever.)
 *
 * Resumed from its parked stop, the thread first takes the signals already
 * pending for it, one by one, each in a signal-delivery stop before its
 * instruction runs. Delivered there, a signal would make the step run the
 * first instruction of its handler instead of the thread's own, and the
 * callers (codecache's step_out, instr-move) step a thread out of a range
 * of code one instruction at a time. So such a signal (one the instruction
 * did not raise) is held: its siginfo is saved and the stop resumed without
 * it. Once the step is over and the thread parked again, the thread itself
 * queues every held signal again with its original siginfo
 * (rt_tgsigqueueinfo run in the thread: only a thread may queue itself the
 * siginfo of a kill() or of the kernel). They are then pending as before,
 * and the kernel delivers them when the world resumes. (Queued again
 * behind what arrived meanwhile: a real-time signal of the same number
 * sent to this very thread during the step comes before them; a standard
 * one already pending again merges with its held twin, as pending standard
 * signals do.)
 *
 * What remains if padrone dies while it holds signals (from the resume
 * that held the first to the system call that queued the last again: one
 * step and a remote system call per signal held, about a millisecond for
 * five): the signals held are lost, and only those. The thread's mask is
 * its own throughout.
 * (A thread whose tracer dies in a signal-delivery stop gets that signal
 * delivered by the kernel: holding starts only when the step resumes.)
 *
 * The step's own trap: a padrone killed while the thread runs its
 * instruction with the trap flag, or sits in the trap's stop, leaves the
 * kernel to deliver that SIGTRAP to the target, mask or no mask, and
 * SIGTRAP's default action kills it. So while a stopped world has threads
 * stepped, SIGTRAP's action is the step guard of the syscall page
 * (syscall-page.S), armed at the first step of a stop and disarmed before
 * the world resumes: a trap that reaches it puts the target's own action
 * back and is swallowed (any other SIGTRAP is passed on to that action).
 * For the guard to get the trap, a thread that blocks SIGTRAP has it
 * unblocked for its step (the kernel would unblock it anyway, and reset a
 * blocked handler to SIG_DFL) and blocked again after, by padrone or, if
 * padrone died, by the guard. What is left: a padrone killed while the
 * guard is armed with no trap under way leaves the guard as SIGTRAP's
 * action until a SIGTRAP comes (it then puts the target's own back and
 * passes that signal on) or a later session disarms it. Without the page
 * (it could not be made) steps go unguarded, as they used to.
 */
#include "attach/internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <ucontext.h>

/* The signals one step may hold. More arriving before the instruction can
 * run (a flood): the step gives up, the thread unmoved, none lost. */
#define STEP_HELD_MAX 32

#define SIGBIT(sig) (1ull << ((sig) - 1))

struct held_sigs {
	siginfo_t si[STEP_HELD_MAX + 1];
	int n;
};

/* For tests only (check_attach_step): with PADRONE_TEST_KILL_IN_STEP=N in
 * its environment, padrone SIGKILLs itself at the N-th of these points of
 * its steps. */
static void test_kill_point(const char *what)
{
	static unsigned points;

	(void)what;	/* names the point for the reader */
	attach__test_kill_point("PADRONE_TEST_KILL_IN_STEP", &points);
}

/* ------------------------------------------------ scratch on the stack */

/* Room for a remote system call's arguments below the thread's red zone,
 * its bytes kept to be put back. */
struct scratch {
	uint64_t addr;
	unsigned char keep[256];
	size_t len;
};

static int scratch_take(struct attach_target *t, pid_t tid, size_t len, struct scratch *s)
{
	struct user_regs_struct regs;
	long pr = attach__ptrace(PTRACE_GETREGS, tid, NULL, &regs);
	if (pr < 0)
		return attach__ptrace_fail(t, pr, "PTRACE_GETREGS", tid);
	s->len = len;
	s->addr = (regs.rsp - 128 - len - 256) & ~15ull;
	if (len > sizeof s->keep ||
	    attach_target__read(t, s->addr, s->keep, len) != (ssize_t)len)
		return attach__fail(t, -EFAULT, "cannot use the stack of thread %d", (int)tid);
	return 0;
}

/* Put the bytes back; returns r, with its message if it is an error. */
static int scratch_give_back(struct attach_target *t, const struct scratch *s, int r)
{
	char msg[ATTACH_MSG_MAX];
	snprintf(msg, sizeof msg, "%s", attach__msg(t));
	attach_target__write(t, s->addr, s->keep, s->len);
	return r < 0 ? attach__fail(t, r, "%s", msg) : 0;
}

/* ------------------------------------------------- SIGTRAP's disposition */

/* Kernel struct sigaction for rt_sigaction on x86-64. */
struct ksigaction {
	uint64_t handler, flags, restorer, mask;
};

/* SIGTRAP's bit in one of the signal-set lines of /proc/PID/status
 * (field: "SigIgn:", "SigCgt:", ...). */
static bool sigtrap_in(pid_t pid, const char *field)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool in = false;
	size_t n = strlen(field);
	while (fgets(buf, sizeof buf, f))
		if (strncmp(buf, field, n) == 0)
			in = strtoull(buf + n, NULL, 16) & SIGBIT(SIGTRAP);
	fclose(f);
	return in;
}

/* rt_sigaction(SIGTRAP) in the target, through scratch on tid's stack. */
static int remote_sigtrap_action(struct attach_target *t, pid_t tid, const struct ksigaction *act,
				 struct ksigaction *old)
{
	struct scratch s;
	int r = scratch_take(t, tid, 2 * sizeof(struct ksigaction), &s);
	if (r < 0)
		return r;
	uint64_t old_at = s.addr + sizeof(struct ksigaction);
	if (act)
		r = attach_target__write(t, s.addr, act, sizeof(*act));
	int64_t ret = 0;
	if (r == 0) {
		uint64_t args[6] = { SIGTRAP, act ? s.addr : 0, old ? old_at : 0, 8, 0, 0 };
		r = attach__syscall(t, tid, SYS_rt_sigaction, args, &ret);
	}
	if (r == 0 && ret < 0)
		r = attach__fail(t, (int)ret, "rt_sigaction in process %d failed: %s", (int)t->pid,
				 strerror((int)-ret));
	if (r == 0 && old && attach_target__read(t, old_at, old, sizeof(*old)) != sizeof(*old))
		r = attach__fail(t, -EFAULT, "cannot read back the SIGTRAP action");
	return scratch_give_back(t, &s, r);
}

/* ------------------------------------------------------ held signals */

/* A signal the stepped instruction raised itself: a fault or a trap
 * (positive si_code), as the kernel tells synchronous signals apart. Any
 * other (kill, tgkill, sigqueue, a timer, SIGCHLD...) came from elsewhere. */
static bool raised_by_insn(const siginfo_t *si)
{
	const uint64_t sync = SIGBIT(SIGSEGV) | SIGBIT(SIGBUS) | SIGBIT(SIGILL) | SIGBIT(SIGFPE) |
			      SIGBIT(SIGTRAP) | SIGBIT(SIGSYS);
	return si->si_code > 0 && (sync & SIGBIT(si->si_signo));
}

/* The ids the thread's own system calls see (its pid namespace's). */
static void ns_ids(pid_t pid, pid_t tid, pid_t *ns_tgid, pid_t *ns_tid)
{
	struct attach__proc p;
	char dir[64];
	*ns_tgid = attach__proc_read(pid, &p) == 0 ? p.nspid : pid;
	snprintf(dir, sizeof dir, "%d/task/%d", (int)pid, (int)tid);
	*ns_tid = attach__proc_read_path(dir, &p) == 0 ? p.nspid : tid;
}

/* The thread (parked) queues itself one held signal again. */
static int requeue_one(struct attach_target *t, pid_t tid, const pid_t ids[2], uint64_t at,
		       const siginfo_t *si)
{
	int r = attach_target__write(t, at, si, sizeof *si);
	int64_t ret = 0;
	if (r == 0) {
		uint64_t args[6] = { (uint64_t)ids[0], (uint64_t)ids[1], (uint64_t)si->si_signo, at,
				     0, 0 };
		r = attach__syscall(t, tid, SYS_rt_tgsigqueueinfo, args, &ret);
	}
	if (r == 0 && ret < 0)
		r = attach__fail(t, (int)ret, "signal %d that thread %d of process %d (%s) took "
				 "during a single step could not be queued again: %s",
				 si->si_signo, (int)tid, (int)t->pid, t->comm,
				 strerror((int)-ret));
	return r;
}

/* Every held signal back in the thread's queue, in the order it took them;
 * one the kernel refuses (a full queue) does not keep the others out. The
 * first failure is the one reported. */
static int requeue_held(struct attach_target *t, pid_t tid, const struct held_sigs *h)
{
	if (h->n == 0)
		return 0;
	pid_t ids[2];
	ns_ids(t->pid, tid, &ids[0], &ids[1]);
	struct scratch s;
	int r = scratch_take(t, tid, sizeof(siginfo_t), &s);
	if (r < 0)
		return r;
	char first[ATTACH_MSG_MAX] = "";
	for (int i = 0; i < h->n && attach__thread(t, tid); i++) {
		int rr = requeue_one(t, tid, ids, s.addr, &h->si[i]);
		if (rr < 0 && r == 0) {
			r = rr;
			snprintf(first, sizeof first, "%s", attach__msg(t));
		}
	}
	if (r < 0)
		attach__fail(t, r, "%s", first);
	return scratch_give_back(t, &s, r);
}

/* ---------------------------------------------------------------- step */

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
 * now: a synchronous signal is dequeued before any other, so the thread
 * stops for it before running any instruction of its own, and that stop
 * swallows it (control.c). */
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
		return attach__ptrace_fail(t, pr, "PTRACE_CONT", tid);
	}
	th->stop = AT_RUNNING;
	int r = attach__wait_thread(t, tid, t->stop_timeout_ms);
	int rr = attach__repark(t, tid);
	return r < 0 ? r : rr;
}

/* The thread stopped during its step: 1 when the step is over, 0 to step
 * on (a stale interrupt's stop, or a signal now held), or -errno. */
static int take_stop(struct attach_target *t, pid_t tid, uint64_t pc0, struct held_sigs *h)
{
	struct athread *th = attach__thread(t, tid);
	if (th->stop != AT_SIGNAL)
		return 0;
	if (th->sig == 0)
		return 1;	/* the step's own trap, swallowed by control.c */
	siginfo_t si;
	struct user_regs_struct regs;
	long pr = attach__ptrace(PTRACE_GETSIGINFO, tid, NULL, &si);
	if (pr == 0)
		pr = attach__ptrace(PTRACE_GETREGS, tid, NULL, &regs);
	if (pr < 0)
		return attach__ptrace_fail(t, pr, "reading a signal's stop", tid);
	if (raised_by_insn(&si) || regs.rip != pc0) {
		/* The instruction ran: a fault of its own is delivered as it
		 * always was; a trap of its own is the step's. */
		if (th->sig == SIGTRAP)
			th->sig = 0;
		th->stepping = false;
		return 1;
	}
	h->si[h->n++] = si;
	th->sig = 0;	/* held: the step goes on without it */
	if (h->n <= STEP_HELD_MAX)
		return 0;
	th->stepping = false;
	return attach__fail(t, -EAGAIN, "thread %d of process %d (%s) was not stepped: more than "
			    "%d signals arrived before its instruction could run", (int)tid,
			    (int)t->pid, t->comm, STEP_HELD_MAX);
}

/* Step until the thread has run one instruction of its own, holding the
 * signals that come first. 0 or -errno. */
static int step_until_done(struct attach_target *t, pid_t tid, uint64_t pc0,
			   struct held_sigs *h)
{
	for (int stale = 0; stale < 4;) {
		long pr = attach__ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL);
		if (pr < 0)
			return attach__ptrace_fail(t, pr, "PTRACE_SINGLESTEP", tid);
		struct athread *th = attach__thread(t, tid);
		th->stop = AT_RUNNING;
		/* Until its trap is seen: a step that outlasts the wait (a
		 * system call that blocks) traps later, and that trap is ours. */
		th->stepping = true;
		test_kill_point("stepping: the trap flag set");
		int r = attach__wait_thread(t, tid, t->stop_timeout_ms);
		if (r == 0)
			test_kill_point("in the trap's stop, or a signal's");
		if (r == 0)
			r = take_stop(t, tid, pc0, h);
		if (r != 0)
			return r < 0 ? r : 0;
		stale += attach__thread(t, tid)->stop != AT_SIGNAL;
	}
	return 0;
}

/* The system call a step runs (the thread stopped inside one restarts it,
 * or stands on a `syscall`): its number, -1 for none, -2 for one of the
 * 32-bit entries. */
static long stepped_syscall(struct attach_target *t, const struct user_regs_struct *r)
{
	long ax = (long)r->rax;
	if ((long)r->orig_rax >= 0 && (ax == -512 || ax == -513 || ax == -514))
		return (long)r->orig_rax;
	unsigned char b[2];
	if (attach_target__read(t, r->rip, b, 2) != 2)
		return -2;	/* cannot tell: count it as one that may */
	if (b[0] == 0x0f && b[1] == 0x05)
		return ax;
	return (b[0] == 0xcd && b[1] == 0x80) || (b[0] == 0x0f && b[1] == 0x34) ? -2 : -1;
}

/* A system call that sets the mask itself, or swaps in another for its
 * duration and has the kernel put the thread's own back on its return. */
static bool sets_mask(long nr)
{
	return nr == -2 || nr == SYS_rt_sigprocmask || nr == SYS_rt_sigreturn ||
	       nr == SYS_rt_sigsuspend || nr == SYS_pselect6 || nr == SYS_ppoll ||
	       nr == SYS_epoll_pwait || nr == SYS_epoll_pwait2 || nr == SYS_io_pgetevents;
}

/* ------------------------------------------------------- the step guard */

#define KSA_SIGINFO 4u
#define KSA_RESTORER 0x04000000u

/* The offsets the guard's code (syscall-page.S) reads. */
_Static_assert(offsetof(ucontext_t, uc_sigmask) == 296, "ucontext's uc_sigmask");
_Static_assert(offsetof(siginfo_t, si_code) == 8, "siginfo's si_code");

static bool is_guard(struct attach_target *t, const struct ksigaction *a)
{
	return a->handler == attach__scpage_at(t, attach_scpage_trap);
}

/* The target's own SIGTRAP action, as read now: a guard an earlier padrone
 * left armed (it died) keeps the target's in its page. */
static int own_action(struct attach_target *t, const struct ksigaction *now,
		      struct ksigaction *own)
{
	uint64_t page = attach__scpage_of(t, now->handler);
	*own = *now;
	if (!page || now->handler - page != (uint64_t)(attach_scpage_trap - attach_scpage_begin))
		return 0;
	uint64_t at = page + (uint64_t)(attach_scpage_trap_old - attach_scpage_begin);
	if (attach_target__read(t, at, own, sizeof *own) != sizeof *own)
		return attach__fail(t, -EFAULT, "cannot read the SIGTRAP action an earlier "
				    "padrone kept in process %d (%s)", (int)t->pid, t->comm);
	return 0;
}

/* The page's reblock word: what the guard sets again in the thread's mask. */
static int set_reblock(struct attach_target *t, uint64_t bits)
{
	if (t->guard_reblock == bits)
		return 0;
	int r = attach_target__write(t, attach__scpage_at(t, attach_scpage_trap_reblock), &bits,
				     sizeof bits);
	if (r == 0)
		t->guard_reblock = bits;
	return r;
}

/* SIGTRAP's action the guard, the target's own kept in the page first (a
 * padrone killed in between leaves the target's own in place). */
static int arm_guard(struct attach_target *t, pid_t tid)
{
	if (t->guard_armed)
		return 0;
	uint64_t entry;
	int r = attach__scpage_entry(t, tid, &entry);
	if (r < 0)
		return r;
	struct ksigaction now, own;
	if ((r = remote_sigtrap_action(t, tid, NULL, &now)) < 0 ||
	    (r = own_action(t, &now, &own)) < 0)
		return r;
	t->guard_reblock = ~0ull;	/* unknown: written below */
	r = attach_target__write(t, attach__scpage_at(t, attach_scpage_trap_old), &own,
				 sizeof own);
	if (r == 0)
		r = set_reblock(t, 0);
	struct ksigaction guard = { attach__scpage_at(t, attach_scpage_trap),
				    KSA_SIGINFO | KSA_RESTORER,
				    attach__scpage_at(t, attach_scpage_restorer), 0 };
	if (r == 0)
		r = remote_sigtrap_action(t, tid, &guard, NULL);
	if (r < 0)
		return r;
	memcpy(t->guard_old, &own, sizeof own);
	t->guard_armed = true;
	t->guard_tid = tid;
	test_kill_point("the guard armed, no step yet");
	return 0;
}

/* A parked thread to run the disarming system call on. */
static pid_t parked_thread(struct attach_target *t)
{
	struct athread *th = attach__thread(t, t->guard_tid);
	if (th && th->stop != AT_RUNNING && !th->exiting && !th->zombie)
		return th->tid;
	for (size_t i = 0; i < t->nth; i++)
		if (t->th[i].stop != AT_RUNNING && !t->th[i].exiting && !t->th[i].zombie)
			return t->th[i].tid;
	return 0;
}

int attach__guard_disarm(struct attach_target *t)
{
	if (!t->guard_armed)
		return 0;
	t->guard_armed = false;
	if (attach_target__state(t) != ATTACH_OK)
		return 0;	/* exited, or exec'd: the new image has its own actions */
	pid_t tid = parked_thread(t);
	if (!tid)
		return attach__fail(t, -ESRCH, "no stopped thread of process %d (%s) to put its "
				    "SIGTRAP action back with", (int)t->pid, t->comm);
	struct ksigaction own;
	memcpy(&own, t->guard_old, sizeof own);
	return remote_sigtrap_action(t, tid, &own, NULL);
}

/* After a step that may have changed SIGTRAP's action itself (nr: the
 * system call it made, as stepped_syscall tells): is the guard still in
 * place? If the target set an action
 * of its own, that one stands. */
static int recheck_guard(struct attach_target *t, pid_t tid, const struct user_regs_struct *regs0,
			 long nr)
{
	if (!t->guard_armed || (nr != SYS_rt_sigaction && nr != -2))
		return 0;
	if (nr == SYS_rt_sigaction && (regs0->rdi != SIGTRAP || !regs0->rsi))
		return 0;
	struct ksigaction now;
	int r = remote_sigtrap_action(t, tid, NULL, &now);
	if (r == 0 && !is_guard(t, &now))
		t->guard_armed = false;
	return r;
}

/* A thread that blocked SIGTRAP finds it unblocked after its step: by
 * padrone for the step guard (guarded_step), or by the kernel, which
 * forces the trap (and resets a handler of it, which step_fn puts back).
 * Block it again, unless the instruction was a system call that
 * sets the mask: its own mask then stands, and setting one would also undo
 * the kernel's restoring of the mask a call swapped in. A padrone killed
 * between the trap and this leaves SIGTRAP unblocked, nothing else. */
static int reblock_sigtrap(struct attach_target *t, pid_t tid, uint64_t mask0,
			   const struct user_regs_struct *regs0)
{
	if (!(mask0 & SIGBIT(SIGTRAP)) || sets_mask(stepped_syscall(t, regs0)))
		return 0;
	uint64_t mask;
	long pr = attach__ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(mask), &mask);
	if (pr == 0 && !(mask & SIGBIT(SIGTRAP))) {
		mask |= SIGBIT(SIGTRAP);
		pr = attach__ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(mask), &mask);
	}
	return pr < 0 ? attach__ptrace_fail(t, pr, "blocking SIGTRAP again", tid) : 0;
}

/* Park the thread after its step, whatever stop the step left it in. */
static int park_after_step(struct attach_target *t, pid_t tid)
{
	struct athread *th = attach__thread(t, tid);
	if (!th)
		return 0;
	/* A step that timed out leaves the thread running (in a system call
	 * that blocks): interrupt it. */
	if (th->stop == AT_RUNNING && !th->interrupted)
		attach__interrupt(t, th);
	int r = attach__repark(t, tid);
	return r < 0 ? r : take_queued_step_trap(t, tid);
}

static int single_step(struct attach_target *t, pid_t tid, uint64_t mask0)
{
	struct user_regs_struct regs0;
	long pr = attach__ptrace(PTRACE_GETREGS, tid, NULL, &regs0);
	if (pr < 0)
		return attach__ptrace_fail(t, pr, "PTRACE_GETREGS", tid);
	struct held_sigs *held = calloc(1, sizeof *held);
	if (!held)
		return attach__fail(t, -ENOMEM, "out of memory");
	t->sc_tid = tid;
	int r = step_until_done(t, tid, regs0.rip, held);
	char msg[ATTACH_MSG_MAX];	/* the step's own, over what follows */
	snprintf(msg, sizeof msg, "%s", attach__msg(t));
	/* Each in turn, even after an error: held signals go back whenever
	 * the thread can take them. */
	int rr = park_after_step(t, tid);
	if (rr == 0)
		rr = requeue_held(t, tid, held);
	if (rr == 0 && attach__thread(t, tid))
		rr = reblock_sigtrap(t, tid, mask0, &regs0);
	if (r < 0)
		attach__fail(t, r, "%s", msg);
	else if (rr < 0)
		r = rr;
	t->sc_tid = 0;
	free(held);
	return r;
}

/* One step under the guard (armed). A thread that blocks SIGTRAP has it
 * unblocked for the step, so that the guard, not SIG_DFL, gets the trap
 * should padrone die (the kernel resets the action of a blocked signal it
 * forces); single_step blocks it again. Not over a system call that sets
 * the mask, whose own mask must see SIGTRAP blocked: the kernel then resets
 * the guard, and the target's own action is put back at once. */
static int guarded_step(struct attach_target *t, pid_t tid, uint64_t mask0)
{
	struct user_regs_struct regs0;
	long pr = attach__ptrace(PTRACE_GETREGS, tid, NULL, &regs0);
	if (pr < 0)
		return attach__ptrace_fail(t, pr, "PTRACE_GETREGS", tid);
	long nr = stepped_syscall(t, &regs0);
	bool blocked = mask0 & SIGBIT(SIGTRAP);
	bool unblock = blocked && !sets_mask(nr);
	int r = set_reblock(t, unblock ? SIGBIT(SIGTRAP) : 0);
	if (r == 0 && unblock) {
		uint64_t mask = mask0 & ~SIGBIT(SIGTRAP);
		pr = attach__ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(mask), &mask);
		if (pr < 0)
			r = attach__ptrace_fail(t, pr, "unblocking SIGTRAP for a step", tid);
	}
	if (r < 0)
		return r;
	r = single_step(t, tid, mask0);
	if (!attach__thread(t, tid))
		return r;
	char msg[ATTACH_MSG_MAX];	/* the step's own, over what follows */
	snprintf(msg, sizeof msg, "%s", attach__msg(t));
	int rr = blocked && !unblock ? attach__guard_disarm(t) : recheck_guard(t, tid, &regs0, nr);
	if (r < 0)
		attach__fail(t, r, "%s", msg);
	return r < 0 ? r : rr;
}

static int step_fn(struct attach_target *t, void *arg)
{
	pid_t tid = *(pid_t *)arg;
	int err = attach__not_in_callback(t, "attach_target__step");
	if (err)
		return err;
	struct athread *th = attach__stopped_thread(t, tid, &err);
	if (!th)
		return err;
	tid = th->tid;
	err = attach__repark(t, tid);
	if (err < 0)
		return err;
	uint64_t mask0;
	long pr = attach__ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(mask0), &mask0);
	if (pr < 0)
		return attach__ptrace_fail(t, pr, "PTRACE_GETSIGMASK", tid);
	/* (disarmed when the world resumes, or at detach) */
	if (arm_guard(t, tid) == 0)
		return guarded_step(t, tid, mask0);
	/* Unguarded (no syscall page). A trap forced on a thread that
	 * ignores SIGTRAP, or blocks it and has a handler, resets the
	 * disposition to SIG_DFL: put the target's own back afterwards. */
	struct ksigaction old;
	bool reset = sigtrap_in(t->pid, "SigIgn:") ||
		     ((mask0 & SIGBIT(SIGTRAP)) && sigtrap_in(t->pid, "SigCgt:"));
	if (reset && (err = remote_sigtrap_action(t, tid, NULL, &old)) < 0)
		return err;
	err = single_step(t, tid, mask0);
	if (reset && attach__thread(t, tid)) {
		char msg[ATTACH_MSG_MAX];	/* the step's own, over the call's */
		snprintf(msg, sizeof msg, "%s", attach__msg(t));
		int rr = remote_sigtrap_action(t, tid, &old, NULL);
		if (err < 0)
			attach__fail(t, err, "%s", msg);
		else
			err = rr;
	}
	return err;
}

int attach_target__step(struct attach_target *t, pid_t tid)
{
	return attach__call(t, step_fn, &tid);
}
