/* attach/internal.h: what the files of attach/ share, and the few hooks its
 * tests use. Not for other rooms: they use attach/attach.h only. */
#ifndef PADRONE_ATTACH_INTERNAL_H
#define PADRONE_ATTACH_INTERNAL_H

#include "attach/attach.h"
#include "util/util.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>

#define ATTACH_MSG_MAX 512

/* ------------------------------------------------------------ messages */

/* Set the calling thread's message for t (t may be NULL before a target
 * exists) and return err. */
int attach__fail(const struct attach_target *t, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void attach__clear_msg(const struct attach_target *t);
/* The calling thread's message if it belongs to t, else "". */
const char *attach__msg(const struct attach_target *t);
/* Fill *e (may be NULL) and return err. */
int attach__seterr(struct attach_error *e, int err, enum attach_why why, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* -------------------------------------------------------------- /proc */

struct attach__proc {
	pid_t pid, tgid, ppid;
	pid_t nspid;		/* its pid in its own pid namespace (NSpid:'s last) */
	pid_t tracer;		/* the process (tgid) of TracerPid, 0 if none */
	int threads;		/* Threads: of status */
	char state;		/* R S D T t Z X I ... from /proc/PID/stat */
	unsigned long flags;	/* task flags (PF_*) */
	uid_t uid[4];		/* real, effective, saved, fs */
	gid_t gid[4];
	char comm[64];
};

/* Read /proc/PID/stat and status (tid: /proc/PID/task/TID when pid != tid
 * and pid != 0). 0 or -errno. */
int attach__proc_read(pid_t pid, struct attach__proc *p);
/* The same for /proc/<dir> ("PID/task/TID"). */
int attach__proc_read_path(const char *dir, struct attach__proc *p);
/* A thread of process pid that has not exited (pid itself unless its
 * leader is a zombie while other threads run). */
pid_t attach__live_task(pid_t pid);
/* /proc/PID/<leaf>, through a live thread's /proc/PID/task/TID/<leaf> when
 * the leader has exited (its own entries lose the address space). */
void attach__live_path(pid_t pid, const char *leaf, char *buf, size_t size);
/* comm of any pid into buf ("?" if gone). */
const char *attach__comm(pid_t pid, char *buf, size_t size);
/* Words for a /proc state letter ("uninterruptible sleep"...). */
const char *attach__state_words(char state);

/* What decides whether the kernel lets us trace a process. */
struct attach__perm_facts {
	pid_t pid;
	const char *comm;
	uid_t my_uid;		/* real uid and gid: what ptrace compares */
	gid_t my_gid;
	bool cap_sys_ptrace;	/* in our effective set */
	uid_t uid[3];		/* target real, effective, saved */
	gid_t gid[3];
	bool dumpable;		/* known from /proc/PID ownership */
	int yama_scope;		/* -1 when yama is absent */
	bool descendant;	/* target descends from us (yama scope 1) */
	/* padrone runs in a user namespace below the initial one, and the
	 * target in another (their uid_maps differ): padrone's capabilities
	 * may not count for it. */
	bool foreign_userns;
	uint64_t caps, my_caps;	/* permitted capabilities: target's, padrone's */
	char lsms[128];		/* the active security modules ("" if unknown) */
};
int attach__perm_facts(pid_t pid, const struct attach__proc *p, struct attach__perm_facts *f);
/* If the facts say the kernel will refuse: 1 and the reason in buf (a full
 * sentence); 0 if it should allow. Pure, so tests can feed it any facts. */
int attach__perm_explain(const struct attach__perm_facts *f, char *buf, size_t size);
/* The reason to give when the kernel refused although the facts say it
 * should allow (attach__perm_explain gave 0): a security module, or the user
 * namespaces. tid: the thread refused, 0 for the process. Pure. */
void attach__perm_unexplained(const struct attach__perm_facts *f, pid_t tid, char *buf,
			      size_t size);

/* Check that the program at path (normally /proc/PID/exe) is an x86-64
 * ELF program. 0, or -ENOEXEC with ATTACH_NOT_X86_64 in *e, naming pid/comm. */
int attach__elf_check(const char *path, pid_t pid, const char *comm, struct attach_error *e);

/* --------------------------------------------------------------- maps */

/* Parse the text of a /proc/PID/maps file. */
int attach__maps_parse(const char *text, size_t len, struct attach_maps **out);

/* -------------------------------------------------------------- memory */

/* Tests: make attach_target__read skip process_vm_readv. */
extern bool attach__force_mem_fallback;

/* ------------------------------------------------------------- threads */

/* Why a thread is in a ptrace stop (or is not in one). */
enum athread_stop {
	AT_RUNNING = 0,	/* not in a ptrace stop (or LISTENing in a group stop) */
	AT_PARKED,	/* PTRACE_EVENT_STOP: interrupt, group or initial stop. The
			 * only state in which a stopped world keeps its threads:
			 * the thread sits in get_signal(), so resuming it lets the
			 * kernel restart an interrupted system call as usual. */
	AT_SIGNAL,	/* signal-delivery-stop: .sig must be delivered */
	AT_EVENT,	/* clone / exec / exit event stop (.event) */
	AT_SYSCALL,	/* syscall-enter or -exit stop (remote syscalls only) */
};

struct athread {
	pid_t tid;
	pid_t parent;		/* the cloner, for a new thread (0: not known yet) */
	unsigned char stop;	/* enum athread_stop */
	int sig;		/* AT_SIGNAL: its signal; AT_PARKED: the stop signal */
	int event;		/* AT_EVENT: PTRACE_EVENT_* */
	bool interrupted;	/* PTRACE_INTERRUPT sent, no stop seen since */
	bool gstop;		/* parked in a group stop: resume with PTRACE_LISTEN */
	bool exiting;		/* PTRACE_EVENT_EXIT seen or interrupt said ESRCH */
	bool zombie;		/* dead but not reaped (or no longer ours) */
	bool fresh;		/* auto-attached; THREAD_NEW not reported yet */
	bool exit_told;		/* THREAD_EXIT reported */
	bool foreign;		/* a clone that is not a thread of the target */
	bool gs_changed;	/* gs_base set by padrone: restore at detach */
	bool stepping;		/* a single step of ours may still trap (ops.c) */
	uint64_t gs_orig;
	uint64_t seen_ns;	/* fresh: when its first stop arrived */
};

struct attach_req {
	int (*fn)(struct attach_target *t, void *arg);
	void *arg;
	int ret;
	bool done;
	char msg[ATTACH_MSG_MAX];
	struct attach_req *next;
};

struct attach_target {
	pid_t pid;
	char comm[64];
	int mem_fd;		/* /proc/PID/mem, opened at seize (pins the mm) */
	int stop_timeout_ms;
	int syscall_timeout_ms;

	/* The tracer thread and its request queue (lock, cond). */
	pthread_t thread;
	pid_t tracer_tid;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct attach_req *reqs, **reqs_tail;
	bool quit;
	bool tracer_done;	/* the tracer thread left its loop */
	int seize_ret;		/* seize result, handed to attach_seize */
	bool seize_done;
	struct attach_error seize_err;

	/* Read by any thread (atomics / under lock). */
	int state;		/* enum attach_why: OK, TARGET_EXITED, TARGET_EXECED */
	bool was_stopped;
	bool world_stopped;
	int exit_status;
	struct attach_pause_stats stats;	/* under lock */
	attach_event_fn ev_fn;	/* under lock */
	void *ev_arg;
	struct attach_restart *restarts;	/* under lock, sorted by lo (restart.c) */
	size_t nrestarts;

	/* Owned by the tracer thread. */
	struct athread *th;
	size_t nth, cap;
	int depth;		/* stop nesting */
	uint64_t pause_t0;
	uint64_t syscall_insn;	/* cached address of a `syscall` instruction */
	uint64_t sc_page;	/* the syscall page in the target (syscall-page.c), or 0 */
	bool no_sc_page;	/* it could not be made: raw `syscall`s only */
	bool guard_armed;	/* SIGTRAP's action is the page's step guard (step.c) */
	pid_t guard_tid;	/* the thread that armed it */
	uint64_t guard_reblock;	/* the page's reblock word, as last written */
	uint64_t guard_old[4];	/* the target's own SIGTRAP action (struct ksigaction) */
	size_t xstate_size;
	pid_t sc_tid;		/* thread running a remote syscall, or 0 */
	int in_callback;	/* inside an event callback */
	int qos_fd;		/* /dev/cpu_dma_latency, or -1 */
	bool qos_tried;		/* opened at the first pause (or refused) */
	bool qos_on;		/* asking for 0 us now (idle CPUs poll) */
	bool no_boost;		/* SCHED_FIFO refused (or not ours to set) */
	bool boosted;		/* running SCHED_FIFO now */
	bool sched_saved;	/* the tracer's own policy, put back after */
	int sched_policy;
	struct sched_param sched_param;
	bool left_running;	/* detach left threads for the kernel to release */
	char exec_comm[64];
};

/* Run fn on t's tracer thread and wait (directly when already on it). */
int attach__call(struct attach_target *t, int (*fn)(struct attach_target *, void *), void *arg);
bool attach__on_tracer(const struct attach_target *t);

/* Before a signal is delivered to tid (in a signal-delivery stop): its PC
 * out of every restartable range (restart.c). */
void attach__restart_before_signal(struct attach_target *t, pid_t tid);

/* Tracer-thread side (control.c; seizing in control-seize.c). */
int attach__seize_all(struct attach_target *t, struct attach_error *e);
/* Seizes the tasks not yet ours (interrupted too when interrupt_them): how
 * many, or -errno. */
int attach__seize_new(struct attach_target *t, bool interrupt_them, struct attach_error *e);
/* A thread added to the set (the leader first); NULL without memory. */
struct athread *attach__add_thread(struct attach_target *t, pid_t tid);
/* A tracee we have not met: a new thread, auto-attached by TRACECLONE. */
struct athread *attach__new_thread(struct attach_target *t, pid_t tid, pid_t parent);
/* PTRACE_INTERRUPT th (a thread that is gone is marked dying). */
void attach__interrupt(struct attach_target *t, struct athread *th);
int attach__detach_all(struct attach_target *t);
int attach__pump(struct attach_target *t, int wait_ms);
int attach__stop_world(struct attach_target *t);
int attach__resume_world(struct attach_target *t);
/* The tracer's loop, before it sleeps: give SCHED_FIFO back if the world
 * runs (see boost() in control.c). */
void attach__unboost(struct attach_target *t);
struct athread *attach__thread(struct attach_target *t, pid_t tid);
/* The thread, in a ptrace stop; else NULL and a message. */
struct athread *attach__stopped_thread(struct attach_target *t, pid_t tid, int *err);
/* Wait until th leaves AT_RUNNING (or vanishes); 0, -ETIMEDOUT, -ESRCH, -ECHILD. */
int attach__wait_thread(struct attach_target *t, pid_t tid, int timeout_ms);
/* Put a thread that is in some ptrace stop back into AT_PARKED. */
int attach__repark(struct attach_target *t, pid_t tid);
/* The message and error for a target that exited or exec'd, or 0. */
int attach__check_alive(struct attach_target *t);
/* Size of the thread's NT_X86_XSTATE regset (probed once), 0 if none. */
size_t attach__xstate_size(struct attach_target *t, pid_t tid);
/* A remote system call on a thread of a stopped world (syscall.c). */
int attach__syscall(struct attach_target *t, pid_t tid, long nr, const uint64_t args[6],
		    int64_t *ret);
/* The registers a remote system call and the syscall page's code clobber,
 * as the thread must have them afterwards, its signal mask, and where it
 * goes on: what the page's code restores when padrone dies in the middle
 * (syscall-page.S, same order). */
struct attach__scframe {
	uint64_t rip, rax, rcx, rdx, rsi, rdi, r8, r9, r10, r11, mask;
};
/* The frame for a thread saved as regs and mask, the way the kernel would
 * resume it: a system call of its own it was stopped in is made again. */
void attach__scframe_fill(struct attach__scframe *f, const struct user_regs_struct *regs,
			  uint64_t mask);
/* Where a remote system call on tid enters the syscall page (made at the
 * first call, through a raw `syscall` on tid, or found again after an
 * earlier session): 0 and *entry, or -errno (then only a raw `syscall` is
 * left). */
int attach__scpage_entry(struct attach_target *t, pid_t tid, uint64_t *entry);
/* Write the frame the page's code restores from. */
int attach__scpage_set_frame(struct attach_target *t, const struct attach__scframe *f);
/* The page's step guard (syscall-page.S): its symbols, and where one of
 * them is in the target's page (made or found by attach__scpage_entry). */
extern const unsigned char attach_scpage_begin[], attach_scpage_trap_old[], attach_scpage_trap_reblock[],
	attach_scpage_trap[], attach_scpage_restorer[];
uint64_t attach__scpage_at(const struct attach_target *t, const unsigned char *sym);
/* Whether addr is in a syscall page (this session's or an earlier one's):
 * that page's start, or 0. */
uint64_t attach__scpage_of(struct attach_target *t, uint64_t addr);
/* Put SIGTRAP's own action back if the step guard is armed (step.c): at
 * the end of a stop, on a parked thread. */
int attach__guard_disarm(struct attach_target *t);
/* A remote system call through a `syscall` instruction of the target's own
 * code, without the page (syscall.c): for making the page itself. */
int attach__raw_syscall(struct attach_target *t, pid_t tid, long nr, const uint64_t args[6],
			int64_t *ret);
/* For tests only: with var=N in its environment, padrone SIGKILLs itself
 * at the N-th call naming var (*points counts them), as a kill from
 * outside landing just there would. */
void attach__test_kill_point(const char *var, unsigned *points);
/* -EDEADLK with a message when called from an event callback on the
 * tracer thread (`what` may not wait for events there), else 0. */
int attach__not_in_callback(struct attach_target *t, const char *what);
/* The message for a ptrace request `what` on tid that failed with r. */
int attach__ptrace_fail(struct attach_target *t, long r, const char *what, pid_t tid);
/* Low-level ptrace wrapper: 0 or -errno. */
long attach__ptrace(int req, pid_t tid, void *addr, void *data);

#endif
