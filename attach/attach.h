/* attach.h: process control of a live x86-64 Linux process.
 *
 * The only room that calls ptrace(). A seized target is served by one
 * tracer thread that attach/ starts: ptrace requests are only valid from the
 * thread that seized a task, so every call below that needs ptrace is handed
 * to that thread and waited for. Callers may use an attach_target from any
 * thread. The tracer thread also services the target while nobody asks
 * anything: it re-delivers the target's own signals, seizes new threads,
 * notices exec and exit.
 *
 * The tracer thread sleeps in sigtimedwait() on SIGCHLD. For instant handling
 * of the target's events, block SIGCHLD in every thread of the host process
 * before attaching (padroned and padrone do); otherwise the tracer also
 * polls every ATTACH_POLL_MS. It waits with waitpid(-1, __WALL|__WNOTHREAD),
 * which never takes the host's other children's statuses; the host in turn
 * must not waitpid(-1) without __WNOTHREAD (that would take the tracer's).
 * The tracer may consume a SIGCHLD meant for the host's own children (not
 * their statuses): a host must not rely on a SIGCHLD handler for them (use
 * pidfds or waitpid on a timer).
 * Other threads wake it with a thread-directed SIGCHLD (tgkill) that it
 * consumes itself: no handler runs. From the first interrupt of a stop
 * until it is idle again with the world resumed, it runs SCHED_FIFO when
 * allowed (root or CAP_SYS_NICE), so that neither the target's threads nor
 * other tasks take its CPU while the world waits for it (each would cost a
 * scheduler tick, 4 ms at HZ=250). Work a caller runs on it inside a pause
 * (attach_target__call) runs at that priority too. The pause of a stop and
 * resume asked for by another thread also includes that thread's own
 * scheduling between the two calls.
 *
 * padrone dying does not kill the target (no PTRACE_O_EXITKILL): the kernel
 * detaches it and it runs on. If the host is the target's parent, the
 * target's exit status goes to attach/ (ATTACH_EV_EXIT), not to the host's
 * waitpid.
 *
 * Conventions: functions return 0 or a negative errno; the reason in words
 * is left in the target (attach_target__errmsg) or, for attach_seize, in a
 * struct attach_error. No function prints or exits.
 */
#ifndef PADRONE_ATTACH_H
#define PADRONE_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTACH_POLL_MS 2

/* ---------------------------------------------------------------- errors */

/* Why an operation on a process could not be done, with enough structure
 * for a front end to decide on (src/status.c maps each to an exit status
 * and a name). */
enum attach_why {
	ATTACH_OK = 0,
	ATTACH_NO_PROCESS,	/* no such PID (-ESRCH) */
	ATTACH_ZOMBIE,		/* exited, not yet reaped (-ESRCH) */
	ATTACH_KERNEL_THREAD,	/* no user space to attach to (-EPERM) */
	ATTACH_NOT_X86_64,	/* a 32-bit (or x32) process (-ENOEXEC) */
	ATTACH_PERMISSION,	/* uid, CAP_SYS_PTRACE, yama, capabilities, an LSM or
				 * a user namespace said no (-EPERM) */
	ATTACH_ALREADY_TRACED,	/* another tracer holds it (-EBUSY) */
	ATTACH_TARGET_EXITED,	/* exited during the operation (-ESRCH) */
	ATTACH_TARGET_EXECED,	/* exec'd during the operation (-ECHILD) */
	ATTACH_TIMEOUT,		/* a thread did not stop in time (-ETIMEDOUT) */
	ATTACH_SYSTEM,		/* anything else; err says what */
};

struct attach_error {
	int err;		/* negative errno */
	enum attach_why why;
	char msg[512];		/* a full sentence naming the cause */
};


/* ------------------------------------------------------------------ maps */

#define ATTACH_MAP_R 1u
#define ATTACH_MAP_W 2u
#define ATTACH_MAP_X 4u
#define ATTACH_MAP_SHARED 8u

struct attach_map {
	uint64_t start, end;	/* [start, end) */
	uint64_t offset;	/* file offset of start */
	unsigned prot;		/* ATTACH_MAP_* */
	unsigned dev_major, dev_minor;
	uint64_t inode;
	const char *path;	/* "" for anonymous; "[heap]", "[vdso]"...; a
				 * deleted file keeps " (deleted)" */
};

/* A snapshot of /proc/PID/maps, sorted by address (through a live thread
 * when the main thread has exited). Needs no ptrace. */
struct attach_maps;

int attach_maps__read(pid_t pid, struct attach_maps **out);
void attach_maps__free(struct attach_maps *m);
size_t attach_maps__count(const struct attach_maps *m);
const struct attach_map *attach_maps__at(const struct attach_maps *m, size_t i);
/* The mapping containing addr, or NULL. O(log n). */
const struct attach_map *attach_maps__find(const struct attach_maps *m, uint64_t addr);
/* The lowest-addressed mapping of the file at path (module base), or NULL. */
const struct attach_map *attach_maps__first_of(const struct attach_maps *m, const char *path);
/* How many of the len bytes at addr lie in mappings, contiguously from
 * addr (0: addr is not mapped). What /proc/PID/mem or ptrace may be asked
 * to read: the kernel takes an address in the gap below the stack for the
 * stack growing down to it, and grows it (as far as the reader's own
 * RLIMIT_STACK allows; unlimited, a request far below fails and is logged
 * as __vm_enough_memory). attach_mapped_len reads the maps of pid first. */
uint64_t attach_maps__mapped_len(const struct attach_maps *m, uint64_t addr, uint64_t len);
size_t attach_mapped_len(pid_t pid, uint64_t addr, size_t len);

/* Thread tid of process pid: its time on a CPU and waiting for one, in ns,
 * as the scheduler counts them (/proc/PID/task/TID/schedstat; wait_ns may
 * be NULL); -errno when they cannot be read (the thread is gone). Read
 * without stopping anything. A kernel without schedstats shows 0 0. */
int attach_thread_sched_ns(pid_t pid, pid_t tid, uint64_t *run_ns, uint64_t *wait_ns);
/* A free range [*addr, *addr + size) inside [lo, hi), *addr a multiple of
 * align (a power of two), as close to near as possible; 0, or -ENOSPC when
 * no gap is large enough (-EINVAL for a bad align or size). Keeps off the
 * first 64 KiB, the stack's guard gap and anything above the 47-bit user
 * space. For placing code within +-2 GiB of other code (then map it with
 * MAP_FIXED_NOREPLACE: the maps may have changed since). */
int attach_maps__find_gap(const struct attach_maps *m, uint64_t lo, uint64_t hi,
			  uint64_t size, uint64_t align, uint64_t near, uint64_t *addr);

/* ---------------------------------------------------------------- target */

struct attach_target;

struct attach_opts {
	size_t sz;		/* sizeof(struct attach_opts) */
	int stop_timeout_ms;	/* how long stop-the-world waits per thread;
				 * 0 = default (1000) */
	int syscall_timeout_ms;	/* how long a remote system call may take
				 * before it is interrupted; 0 = default (5000) */
};

/* Checks the PID (exists, not zombie, not kernel thread, x86-64, not
 * traced, permitted), then PTRACE_SEIZEs every thread, rescanning
 * /proc/PID/task until the set is stable, with TRACECLONE|TRACEEXEC|
 * TRACEEXIT. The target keeps running. On failure *err says why and the
 * target is untouched. */
int attach_seize(pid_t pid, const struct attach_opts *opts,
		 struct attach_target **out, struct attach_error *err);

/* Resumes everything, restores what padrone changed in thread state,
 * detaches every thread (a job-control-stopped target stays stopped),
 * stops the tracer thread and frees t. Safe on an exited target. No other
 * call on t may be under way or follow. */
int attach_target__detach(struct attach_target *t);

pid_t attach_target__pid(const struct attach_target *t);
/* The target's pid as it sees it itself (getpid() in its pid namespace),
 * or -errno. */
pid_t attach_target__own_pid(const struct attach_target *t);
/* The last error message of an operation on t ("" if it succeeded). Per
 * calling thread. */
const char *attach_target__errmsg(const struct attach_target *t);
/* Why the calling thread's last operation on t failed: ATTACH_OK after a
 * success, ATTACH_TARGET_EXITED / _EXECED, ATTACH_TIMEOUT or ATTACH_SYSTEM;
 * (what a front end's status is made of). */
enum attach_why attach_target__why(const struct attach_target *t);
/* ATTACH_OK while alive; ATTACH_TARGET_EXITED / ATTACH_TARGET_EXECED once
 * that happened (padrone then only detaches). */
enum attach_why attach_target__state(const struct attach_target *t);
/* Whether the process was in job-control stop when seized. */
bool attach_target__was_stopped(const struct attach_target *t);

/* Thread ids currently seized, main thread first; threads on their way out
 * (past their exit event) are not listed: they run no user code and may
 * not stop again. Returns how many there
 * are (may exceed max; only max are copied) or -errno. */
int attach_target__threads(struct attach_target *t, pid_t *tids, size_t max);

/* Thread events, delivered on the tracer thread while the new thread (or
 * the exiting one) is still stopped, so the callback may use the per-thread
 * calls below on it (registers, xstate, gs_base, memory). It must not use
 * what waits for the target (stop, resume, syscall, step, detach: they
 * return -EDEADLK there). Keep callbacks short. A new thread is held until
 * its cloner's event names the parent (parent_tid 0 if that never came). */
enum attach_event_kind {
	ATTACH_EV_THREAD_NEW,	/* tid was cloned by parent_tid */
	ATTACH_EV_THREAD_EXIT,	/* tid is exiting (wait status in .status) */
	ATTACH_EV_EXEC,		/* the process exec'd (parent_tid: the thread that
				 * called exec); t is now dead */
	ATTACH_EV_EXIT,		/* the process exited (status in .status) */
	ATTACH_EV_FORK,		/* tid is a new process that parent_tid made (fork,
				 * vfork, posix_spawn, a clone without
				 * CLONE_THREAD), held at its first stop: it has
				 * the parent's gs_base, which the callback may
				 * change (set_gs_base works on it); it is let go
				 * (detached) right after */
};
struct attach_event {
	enum attach_event_kind kind;
	pid_t tid, parent_tid;
	int status;
};
typedef void (*attach_event_fn)(struct attach_target *t, const struct attach_event *ev,
				void *arg);
void attach_target__on_event(struct attach_target *t, attach_event_fn fn, void *arg);

/* ---------------------------------------------------------- stop / resume */

/* PTRACE_INTERRUPT every thread and wait until each is in a ptrace stop;
 * a signal that arrives meanwhile is delivered to its thread (its handler
 * runs at resume), never lost. Threads created meanwhile are stopped too,
 * and exiting ones are waited for until they are zombies: no thread runs.
 * A thread that cannot stop (a vfork parent, uninterruptible I/O) makes it
 * fail with -ETIMEDOUT after opts.stop_timeout_ms, the world resumed.
 * Nests: only the outermost call stops. */
int attach_target__stop(struct attach_target *t);
/* Undo attach_target__stop. */
int attach_target__resume(struct attach_target *t);
bool attach_target__is_stopped(const struct attach_target *t);

struct attach_pause_stats {
	uint64_t count;		/* completed stop..resume intervals */
	uint64_t last_ns;	/* the last one, from first interrupt to last resume */
	uint64_t max_ns;
	uint64_t total_ns;
	uint64_t last_stop_ns;	/* time to get every thread stopped, last time */
};
void attach_target__pause_stats(const struct attach_target *t, struct attach_pause_stats *st);

/* -------------------------------------------------------------- memory */

/* Read len bytes at addr (process_vm_readv, falling back to /proc/PID/mem).
 * Returns bytes read (short at an unmapped page; -EFAULT if the first is
 * unmapped) or -errno. Needs no stop and no tracer round trip. */
ssize_t attach_target__read(struct attach_target *t, uint64_t addr, void *buf, size_t len);
/* Write through /proc/PID/mem, which also writes read-only text. All of it
 * or -errno. The caller is responsible for stopping the world before
 * writing code that may run. */
int attach_target__write(struct attach_target *t, uint64_t addr, const void *buf, size_t len);

/* ----------------------------------------------- per-thread (world stopped) */

/* These need the thread in a ptrace stop: inside attach_target__stop. */
int attach_target__get_regs(struct attach_target *t, pid_t tid, struct user_regs_struct *regs);
int attach_target__set_regs(struct attach_target *t, pid_t tid, const struct user_regs_struct *regs);
/* The xsave area (NT_X86_XSTATE). *len in: buffer size, out: size used;
 * -ENOSPC with *len set to the size needed. */
int attach_target__get_xstate(struct attach_target *t, pid_t tid, void *buf, size_t *len);
int attach_target__set_xstate(struct attach_target *t, pid_t tid, const void *buf, size_t len);
/* Set gs_base (also in user_regs_struct). The first value padrone changes
 * (here or with set_regs) is put back at detach, also in threads that
 * inherited it. */
int attach_target__set_gs_base(struct attach_target *t, pid_t tid, uint64_t gs_base);
/* gs_base to 0 for good (detach leaves it 0): one that an earlier padrone
 * set and left behind (killed while instrumenting). */
int attach_target__clear_gs_base(struct attach_target *t, pid_t tid);
/* Detach leaves every thread's gs_base as it is now (not the one padrone
 * found): code left in the target that reaches its state through gs (an
 * instrumented copy padrone could not take out) still finds it. No stop
 * needed. */
int attach_target__keep_gs_bases(struct attach_target *t);

/* Execute one system call in the target on thread tid (default: the main
 * thread, tid 0): registers, xsave state and signal mask saved, all signals
 * blocked, orig_rax = -1 so no interrupted call restarts into it, run at a
 * `syscall` instruction found in the target's own code (never calling its
 * libc), then everything restored. *ret gets the raw result (negative errno
 * from the kernel). The return value says whether padrone managed to run it;
 * *ret whether the call succeeded. Stops the world itself if needed. A
 * thread that was stopped inside a system call of its own restarts it as
 * usual afterwards. A call still blocked after opts.syscall_timeout_ms is
 * interrupted (-ETIMEDOUT; *ret then what the interrupted call returned). */
int attach_target__syscall(struct attach_target *t, pid_t tid, long nr,
			   const uint64_t args[6], int64_t *ret);

/* Single-step tid one instruction of its own (world stopped). Its signal
 * mask is never changed: a signal that arrives before the instruction runs
 * is held and queued again for the thread, with its siginfo, after the
 * step (delivered when the world resumes); a fault of the instruction is
 * delivered. The trap's SIGTRAP is the step's own and is not delivered; a
 * SIGTRAP the target ignores, blocks or handles stays so. -EAGAIN (thread
 * unmoved) when more signals than a step can hold keep arriving. */
int attach_target__step(struct attach_target *t, pid_t tid);

/* Restartable ranges: code of the target that a signal handler must not
 * start inside and that may run again from its restart point (the first
 * instructions of an rseq-like commit: loads, then the one store that
 * commits). When attach/ delivers a signal to a thread whose PC is in
 * [lo, hi), it first moves the PC to restart, so the handler returns there
 * and the range runs again whole. The restart point is lo or outside the
 * range. Only while padrone is attached: code using them must stay
 * memory-safe when padrone is gone. remove drops every range inside
 * [lo, hi). */
struct attach_restart {
	uint64_t lo, hi, restart;
};
int attach_target__restart_add(struct attach_target *t, const struct attach_restart *r, size_t n);
void attach_target__restart_remove(struct attach_target *t, uint64_t lo, uint64_t hi);

/* Run fn(arg) on the tracer thread, where ptrace requests on the target's
 * threads are valid (libunwind-ptrace's accessors call ptrace themselves).
 * Returns fn's result. */
int attach_target__call(struct attach_target *t, int (*fn)(struct attach_target *t, void *arg),
			void *arg);

#ifdef __cplusplus
}
#endif
#endif
