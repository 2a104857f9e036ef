/* attach/syscall.c: running one system call inside the target.
 *
 * On a parked thread (world stopped): save its registers, xsave area and
 * signal mask; write into the syscall page (syscall-page.c) the frame that
 * lets the thread restore itself should padrone die; point rip at the
 * page's `syscall` and load rax/rdi/rsi/rdx/r10/r8/r9, with orig_rax = -1
 * so the kernel does not restart a system call the thread was interrupted
 * in (over our registers); then block every signal. PTRACE_SYSCALL takes
 * the thread to the call's entry and exit stops (ptrace stops, no signal,
 * so no SIGTRAP disposition is disturbed); rax at the exit stop is the
 * result. Then everything is restored at that exit stop, the mask first
 * and the registers last (a padrone killed in between leaves the thread on
 * the page's code, which restores them), and the thread is parked again
 * with PTRACE_INTERRUPT queued before it continues, so it stops inside
 * get_signal() before reaching user space: a system call it was originally
 * interrupted in is restarted by the kernel at resume.
 * The target's libc is never called. Only the mmap that makes the page
 * runs on a `syscall` instruction of the target's own code (the vDSO
 * first, then libc), unprotected.
 */
#include "attach/internal.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <elf.h>

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif

static bool scan_for_syscall(struct attach_target *t, uint64_t start, uint64_t end,
			     uint64_t *addr)
{
	unsigned char buf[65536];
	uint64_t at = start;
	while (at + 1 < end) {
		size_t want = end - at < sizeof buf ? (size_t)(end - at) : sizeof buf;
		ssize_t n = attach_target__read(t, at, buf, want);
		if (n < 2)
			return false;
		for (ssize_t i = 0; i + 1 < n; i++)
			if (buf[i] == 0x0f && buf[i + 1] == 0x05) {
				*addr = at + (uint64_t)i;
				return true;
			}
		at += (uint64_t)n - 1;	/* overlap one byte: 0f|05 across chunks */
	}
	return false;
}

/* A `syscall` (0f 05) in the target's executable mappings: where it is
 * does not matter, only that the CPU decodes one there. */
static int find_syscall_insn(struct attach_target *t, uint64_t *addr)
{
	unsigned char b[2];
	if (t->syscall_insn && attach_target__read(t, t->syscall_insn, b, 2) == 2 &&
	    b[0] == 0x0f && b[1] == 0x05) {
		*addr = t->syscall_insn;
		return 0;
	}
	t->syscall_insn = 0;
	struct attach_maps *m;
	int r = attach_maps__read(t->pid, &m);
	if (r < 0)
		return attach__fail(t, r, "cannot read the maps of process %d (%s): %s", (int)t->pid,
				    t->comm, strerror(-r));
	for (int pass = 0; pass < 3 && !t->syscall_insn; pass++) {
		for (size_t i = 0; i < attach_maps__count(m) && !t->syscall_insn; i++) {
			const struct attach_map *mp = attach_maps__at(m, i);
			if (!(mp->prot & ATTACH_MAP_X) || !(mp->prot & ATTACH_MAP_R) ||
			    strcmp(mp->path, "[vsyscall]") == 0)
				continue;
			bool vdso = strcmp(mp->path, "[vdso]") == 0;
			bool libc = strstr(mp->path, "/libc.so") || strstr(mp->path, "/libc-");
			if ((pass == 0 && !vdso) || (pass == 1 && !libc))
				continue;
			uint64_t a;
			if (scan_for_syscall(t, mp->start, mp->end, &a))
				t->syscall_insn = a;
		}
	}
	attach_maps__free(m);
	if (!t->syscall_insn)
		return attach__fail(t, -ENOEXEC, "no `syscall` instruction found in the executable "
				    "mappings of process %d (%s)", (int)t->pid, t->comm);
	*addr = t->syscall_insn;
	return 0;
}

size_t attach__xstate_size(struct attach_target *t, pid_t tid)
{
	if (t->xstate_size)
		return t->xstate_size;
	/* The kernel says how much it fills: probe with a generous buffer. */
	size_t cap = 1 << 16;
	void *buf = malloc(cap);
	if (!buf)
		return 0;
	struct iovec iov = { buf, cap };
	if (attach__ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) == 0)
		t->xstate_size = iov.iov_len;
	free(buf);
	return t->xstate_size;
}

struct saved {
	struct user_regs_struct regs;
	void *xstate;
	size_t xlen;
	uint64_t mask;
};

static int save_thread(struct attach_target *t, pid_t tid, struct saved *s)
{
	long r = attach__ptrace(PTRACE_GETREGS, tid, NULL, &s->regs);
	if (r == 0)
		r = attach__ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof(s->mask), &s->mask);
	if (r == 0) {
		s->xlen = attach__xstate_size(t, tid);
		s->xstate = s->xlen ? malloc(s->xlen) : NULL;
		if (s->xstate) {
			struct iovec iov = { s->xstate, s->xlen };
			r = attach__ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov);
			s->xlen = iov.iov_len;
		}
	}
	if (r < 0)
		return attach__fail(t, (int)r, "cannot save the state of thread %d of process %d "
				    "(%s): %s", (int)tid, (int)t->pid, t->comm, strerror((int)-r));
	return 0;
}

void attach__test_kill_point(const char *var, unsigned *points)
{
	const char *env = getenv(var);

	if (env && strtoul(env, NULL, 10) == __atomic_add_fetch(points, 1, __ATOMIC_RELAXED))
		kill(getpid(), SIGKILL);
}

/* For tests only (check_attach_syscall): with PADRONE_TEST_KILL_IN_SYSCALL=N
 * in its environment, padrone SIGKILLs itself at the N-th of these points
 * of the system calls it runs through the syscall page. */
static void test_kill_point(uint64_t page_entry, const char *what)
{
	static unsigned points;

	(void)what;	/* names the point for the reader */
	if (page_entry)
		attach__test_kill_point("PADRONE_TEST_KILL_IN_SYSCALL", &points);
}

/* The mask first, the registers last: until they are back, the thread is
 * on the syscall page's code, which would restore them itself. */
static int restore_thread(struct attach_target *t, pid_t tid, struct saved *s,
			  uint64_t page_entry)
{
	long r = attach__ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(s->mask), &s->mask);
	if (r == 0 && s->xstate) {
		struct iovec iov = { s->xstate, s->xlen };
		r = attach__ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov);
	}
	test_kill_point(page_entry, "mask restored, registers not yet");
	if (r == 0)
		r = attach__ptrace(PTRACE_SETREGS, tid, NULL, &s->regs);
	if (r < 0)
		return attach__fail(t, (int)r, "cannot restore the state of thread %d of process "
				    "%d (%s): %s", (int)tid, (int)t->pid, t->comm, strerror((int)-r));
	return 0;
}

/* Run the thread to its next syscall stop. 1 when there, 0 when a signal
 * of the target's own came first (it is left in AT_SIGNAL), or -errno. */
static int to_syscall_stop(struct attach_target *t, pid_t tid, int timeout_ms)
{
	for (int stale = 0; stale < 4; stale++) {
		long r = attach__ptrace(PTRACE_SYSCALL, tid, NULL, NULL);
		if (r < 0)
			return attach__fail(t, (int)r, "PTRACE_SYSCALL on thread %d failed: %s",
					    (int)tid, strerror((int)-r));
		struct athread *th = attach__thread(t, tid);
		th->stop = AT_RUNNING;
		r = attach__wait_thread(t, tid, timeout_ms);
		if (r < 0)
			return (int)r;
		th = attach__thread(t, tid);
		if (th->stop == AT_SYSCALL)
			return 1;
		if (th->stop == AT_SIGNAL)
			return 0;
		/* A stale interrupt or another event stop: go on. */
	}
	return attach__fail(t, -EAGAIN, "thread %d of process %d (%s) keeps stopping before "
			    "the system call", (int)tid, (int)t->pid, t->comm);
}

/* One attempt, through the syscall page's entry (0: a raw `syscall` of the
 * target's code). 1 done, 0 to retry (a signal came first and was
 * delivered), -errno on failure. */
static int try_syscall(struct attach_target *t, pid_t tid, long nr, const uint64_t args[6],
		       int64_t *ret, uint64_t page_entry)
{
	struct saved s = { 0 };
	uint64_t insn = page_entry;
	int r = 0;
	if (!insn && (r = find_syscall_insn(t, &insn)) < 0)
		return r;
	r = save_thread(t, tid, &s);
	if (r < 0)
		goto out;
	if (page_entry) {
		struct attach__scframe f;
		attach__scframe_fill(&f, &s.regs, s.mask);
		if ((r = attach__scpage_set_frame(t, &f)) < 0)
			goto out;
	}
	uint64_t all = ~0ull;
	struct user_regs_struct regs = s.regs;
	regs.rax = (unsigned long long)nr;
	regs.orig_rax = (unsigned long long)-1;
	regs.rip = insn;
	regs.rdi = args[0];
	regs.rsi = args[1];
	regs.rdx = args[2];
	regs.r10 = args[3];
	regs.r8 = args[4];
	regs.r9 = args[5];
	/* The registers first: once they point at the page, a padrone killed
	 * leaves the thread on code that puts its mask back too. */
	long pr = attach__ptrace(PTRACE_SETREGS, tid, NULL, &regs);
	if (pr == 0)
		pr = attach__ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof(all), &all);
	if (pr < 0) {
		r = attach__fail(t, (int)pr, "cannot prepare thread %d for a system call: %s",
				 (int)tid, strerror((int)-pr));
		goto restore;
	}
	test_kill_point(page_entry, "ready, before the call");
	t->sc_tid = tid;
	r = to_syscall_stop(t, tid, t->stop_timeout_ms);	/* entry */
	if (r > 0)
		test_kill_point(page_entry, "at the call's entry");
	if (r == 0)
		goto restore;	/* SIGSTOP or SIGKILL came first: deliver it, retry */
	if (r < 0)
		goto restore;
	r = to_syscall_stop(t, tid, t->syscall_timeout_ms);	/* exit */
	if (r == -ETIMEDOUT) {
		/* A blocking call: interrupt it, keep the error to report. */
		attach__ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
		if (attach__wait_thread(t, tid, t->stop_timeout_ms) == 0 &&
		    attach__ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0)
			*ret = (int64_t)regs.rax;
		r = attach__fail(t, -ETIMEDOUT, "system call %ld in process %d (%s) did not return "
				 "within %d ms and was interrupted", nr, (int)t->pid, t->comm,
				 t->syscall_timeout_ms);
		goto restore;
	}
	if (r <= 0) {
		if (r == 0)
			r = attach__fail(t, -EINTR, "system call %ld in process %d (%s) was cut "
					 "short by a signal", nr, (int)t->pid, t->comm);
		goto restore;
	}
	pr = attach__ptrace(PTRACE_GETREGS, tid, NULL, &regs);
	if (pr < 0) {
		r = attach__fail(t, (int)pr, "cannot read the result of system call %ld: %s", nr,
				 strerror((int)-pr));
		goto restore;
	}
	*ret = (int64_t)regs.rax;
	test_kill_point(page_entry, "at the call's exit");
	r = 1;
restore:
	if (attach__thread(t, tid) && attach_target__state(t) == ATTACH_OK) {
		int rr = restore_thread(t, tid, &s, page_entry);
		if (rr < 0 && r >= 0)
			r = rr;
		rr = attach__repark(t, tid);	/* delivers a signal that came first */
		if (rr < 0 && r >= 0)
			r = rr;
	}
	t->sc_tid = 0;
out:
	free(s.xstate);
	return r;
}

static int run_syscall(struct attach_target *t, pid_t tid, long nr, const uint64_t args[6],
		       int64_t *ret, uint64_t page_entry)
{
	for (int attempt = 0; attempt < 4; attempt++) {
		int r = attach__repark(t, tid);
		if (r < 0)
			return r;
		r = try_syscall(t, tid, nr, args, ret, page_entry);
		if (r != 0)
			return r < 0 ? r : 0;
	}
	return attach__fail(t, -EAGAIN, "signals kept arriving before system call %ld in process "
			    "%d (%s)", nr, (int)t->pid, t->comm);
}

int attach__raw_syscall(struct attach_target *t, pid_t tid, long nr, const uint64_t args[6],
			int64_t *ret)
{
	return run_syscall(t, tid, nr, args, ret, 0);
}

int attach__syscall(struct attach_target *t, pid_t tid, long nr, const uint64_t args[6],
		    int64_t *ret)
{
	int err;
	struct athread *th = attach__stopped_thread(t, tid, &err);
	if (!th)
		return err;
	tid = th->tid;
	if (th->exiting)
		return attach__fail(t, -ESRCH, "thread %d of process %d (%s) is exiting", (int)tid,
				    (int)t->pid, t->comm);
	uint64_t page_entry = 0;
	if (attach__scpage_entry(t, tid, &page_entry) < 0) {
		int gone = attach__check_alive(t);
		if (gone < 0)
			return gone;
		page_entry = 0;	/* no page: a raw `syscall`, as before it existed */
	}
	return run_syscall(t, tid, nr, args, ret, page_entry);
}
