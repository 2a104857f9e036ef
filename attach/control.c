/* attach/control.c: the target's events, stop-the-world, resume and
 * detach (seizing is control-seize.c). Everything here runs on the tracer
 * thread.
 *
 * Each thread of the target is in one of the states of enum athread_stop.
 * A stopped world keeps every thread in AT_PARKED: a PTRACE_EVENT_STOP
 * taken inside get_signal(). A thread that stops for another reason while
 * the world is being stopped is first sent on its way (its signal
 * delivered, its clone finished) with PTRACE_INTERRUPT queued before the
 * resume, so it parks again before it can reach user space. Keeping one
 * parked state means resuming is always the same, and the kernel itself
 * restarts a system call the thread was in.
 */
#include "attach/internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a new thread waits for its cloner's event before it is
 * reported anyway (the cloner may have been killed in between). */
#define FRESH_WAIT_NS (100 * 1000000ull)

long attach__ptrace(int req, pid_t tid, void *addr, void *data)
{
	long r = ptrace((enum __ptrace_request)req, tid, addr, data);
	return r < 0 ? -errno : r;
}

/* ------------------------------------------------------------- threads */

struct athread *attach__thread(struct attach_target *t, pid_t tid)
{
	for (size_t i = 0; i < t->nth; i++)
		if (t->th[i].tid == tid)
			return &t->th[i];
	return NULL;
}

/* The leader goes first, the others in arrival order. */
struct athread *attach__add_thread(struct attach_target *t, pid_t tid)
{
	if (t->nth == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct athread *v = realloc(t->th, cap * sizeof(*v));
		if (!v)
			return NULL;
		t->th = v;
		t->cap = cap;
	}
	size_t at = t->nth;
	if (tid == t->pid) {
		memmove(&t->th[1], &t->th[0], t->nth * sizeof(*t->th));
		at = 0;
	}
	t->nth++;
	memset(&t->th[at], 0, sizeof(t->th[at]));
	t->th[at].tid = tid;
	return &t->th[at];
}

static void drop_thread(struct attach_target *t, pid_t tid)
{
	struct athread *th = attach__thread(t, tid);
	if (!th)
		return;
	size_t i = (size_t)(th - t->th);
	memmove(&t->th[i], &t->th[i + 1], (t->nth - i - 1) * sizeof(*t->th));
	t->nth--;
}

static void emit(struct attach_target *t, enum attach_event_kind kind, pid_t tid, pid_t parent,
		 int status)
{
	pthread_mutex_lock(&t->lock);
	attach_event_fn fn = t->ev_fn;
	void *arg = t->ev_arg;
	pthread_mutex_unlock(&t->lock);
	if (!fn)
		return;
	struct attach_event ev = { .kind = kind, .tid = tid, .parent_tid = parent, .status = status };
	t->in_callback++;
	fn(t, &ev, arg);
	t->in_callback--;
}

static void set_state(struct attach_target *t, enum attach_why why)
{
	__atomic_store_n(&t->state, (int)why, __ATOMIC_RELEASE);
	if (why != ATTACH_OK) {
		t->depth = 0;
		__atomic_store_n(&t->world_stopped, false, __ATOMIC_RELEASE);
	}
}

int attach__check_alive(struct attach_target *t)
{
	switch (attach_target__state(t)) {
	case ATTACH_TARGET_EXITED:
		return attach__fail(t, -ESRCH, "process %d (%s) has exited", (int)t->pid, t->comm);
	case ATTACH_TARGET_EXECED:
		return attach__fail(t, -ECHILD,
				    "process %d (%s) called exec (now %s); padrone detached from it "
				    "and the new program runs untraced", (int)t->pid, t->comm,
				    t->exec_comm);
	default:
		return 0;
	}
}

/* --------------------------------------------------- resuming one thread */

void attach__interrupt(struct attach_target *t, struct athread *th)
{
	int r = (int)attach__ptrace(PTRACE_INTERRUPT, th->tid, NULL, NULL);
	if (r == -ESRCH)
		th->exiting = th->zombie = true;	/* no longer ours: it is dying */
	else
		th->interrupted = true;
}

static void cont(struct athread *th, int req, int sig)
{
	attach__ptrace(req, th->tid, NULL, (void *)(long)sig);
	th->stop = AT_RUNNING;
}

/* A thread in some stop, world not held: let it go on. */
static void release(struct attach_target *t, struct athread *th)
{
	switch (th->stop) {
	case AT_PARKED:
		cont(th, th->gstop ? PTRACE_LISTEN : PTRACE_CONT, 0);
		break;
	case AT_SIGNAL:
		attach__restart_before_signal(t, th->tid);
		cont(th, PTRACE_CONT, th->sig);	/* never swallow the target's signal */
		break;
	default:
		cont(th, PTRACE_CONT, 0);
		break;
	}
}

/* A thread in some stop, world held: bring it to AT_PARKED. The interrupt
 * goes first so that it is pending when the thread resumes: the thread
 * parks on its way out of the kernel, before any user instruction. */
static void toward_park(struct attach_target *t, struct athread *th)
{
	if (th->stop == AT_PARKED)
		return;
	if (th->stop == AT_EVENT && th->event == PTRACE_EVENT_EXIT) {
		/* Leaving: let it go (holding it would also hold an exec that
		 * waits for the other threads to die); lagging() waits until
		 * it is a zombie. */
		cont(th, PTRACE_CONT, 0);
		return;
	}
	int sig = th->stop == AT_SIGNAL ? th->sig : 0;
	if (sig)
		attach__restart_before_signal(t, th->tid);
	attach__interrupt(t, th);
	cont(th, PTRACE_CONT, sig);
}

/* The trap of a single step (TRAP_TRACE; TRAP_BRKPT when the step was a
 * system call), not one the target raised itself (int3, kill, a hardware
 * breakpoint of its own). */
static bool is_step_trap(pid_t tid)
{
	siginfo_t si;
	return attach__ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) == 0 &&
	       (si.si_code == TRAP_TRACE || si.si_code == TRAP_BRKPT);
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/* Decide what a thread that just stopped does next. */
static void settle(struct attach_target *t, pid_t tid)
{
	struct athread *th = attach__thread(t, tid);
	if (!th || th->stop == AT_RUNNING || attach_target__state(t) != ATTACH_OK)
		return;
	if (th->foreign) {
		/* Another process (a fork, or a clone without CLONE_THREAD):
		 * not ours. Held until its maker's event names it, told (with
		 * the maker, if that came), let go. */
		if (th->fresh && th->stop == AT_PARKED && !th->parent &&
		    util_now_ns() - th->seen_ns < FRESH_WAIT_NS)
			return;
		if (th->fresh) {
			th->fresh = false;
			emit(t, ATTACH_EV_FORK, tid, th->parent, 0);
		}
		attach__ptrace(PTRACE_DETACH, tid, NULL, NULL);
		drop_thread(t, tid);
		return;
	}
	if (th->fresh) {
		/* Hold it at its first stop until its cloner's event names the
		 * parent. A first stop of another kind (killed before it ever
		 * ran: its exit stop) is reported at once. */
		if (th->stop == AT_PARKED && !th->parent &&
		    util_now_ns() - th->seen_ns < FRESH_WAIT_NS)
			return;
		th->fresh = false;
		emit(t, ATTACH_EV_THREAD_NEW, tid, th->parent, 0);
		th = attach__thread(t, tid);
		if (!th)
			return;
	}
	if (t->sc_tid == tid)
		return;	/* a remote syscall or a step is driving this thread */
	if (t->depth > 0)
		toward_park(t, th);
	else
		release(t, th);
}

static bool tgid_is(pid_t tid, pid_t pid)
{
	struct attach__proc p;
	if (attach__proc_read(tid, &p) < 0)
		return true;	/* gone already: it cannot matter */
	return p.tgid == pid;
}

/* A tracee we have not met: a new thread, auto-attached by TRACECLONE. */
struct athread *attach__new_thread(struct attach_target *t, pid_t tid, pid_t parent)
{
	struct athread *th = attach__add_thread(t, tid);
	if (!th)
		return NULL;
	th->fresh = true;
	th->parent = parent;
	th->foreign = !tgid_is(tid, t->pid);
	return th;
}

static void on_exec(struct attach_target *t, struct athread *th)
{
	unsigned long former = 0;
	attach__ptrace(PTRACE_GETEVENTMSG, th->tid, NULL, &former);
	attach__comm(t->pid, t->exec_comm, sizeof t->exec_comm);
	/* The other threads are gone (exec kills them); the new program
	 * starts untraced. */
	attach__ptrace(PTRACE_DETACH, t->pid, NULL, NULL);
	t->nth = 0;
	set_state(t, ATTACH_TARGET_EXECED);
	emit(t, ATTACH_EV_EXEC, t->pid, (pid_t)former, 0);
}

static void on_event(struct attach_target *t, struct athread *th)
{
	unsigned long msg = 0;
	pid_t tid = th->tid;

	switch (th->event) {
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
	case PTRACE_EVENT_CLONE: {
		attach__ptrace(PTRACE_GETEVENTMSG, tid, NULL, &msg);
		pid_t child = (pid_t)msg;
		struct athread *c = attach__thread(t, child);
		if (!c)
			c = attach__new_thread(t, child, tid);
		else
			c->parent = tid;
		th = attach__thread(t, tid);	/* the table may have moved */
		if (c && th && th->gs_changed && !c->foreign) {
			/* It inherited padrone's gs_base: its own before that
			 * was the parent's. */
			c->gs_changed = true;
			c->gs_orig = th->gs_orig;
		}
		settle(t, child);	/* reports it if its stop came first */
		break;
	}
	case PTRACE_EVENT_EXIT:
		attach__ptrace(PTRACE_GETEVENTMSG, tid, NULL, &msg);
		th->exiting = true;
		th->exit_told = true;
		emit(t, ATTACH_EV_THREAD_EXIT, tid, 0, (int)msg);
		break;
	case PTRACE_EVENT_EXEC:
		on_exec(t, th);
		break;
	default:
		break;
	}
}

static void on_death(struct attach_target *t, pid_t tid, int status)
{
	struct athread *th = attach__thread(t, tid);
	if (th) {
		bool told = th->exit_told;
		drop_thread(t, tid);
		if (!told)
			emit(t, ATTACH_EV_THREAD_EXIT, tid, 0, status);
	}
	/* The leader reports last (after every other thread), so its death is
	 * the process's. If the leader was never ours (it was a zombie when
	 * we came), the last thread's is. After an exec the process runs
	 * another program, not ours: a death told after it (the new program
	 * ending while padrone is still leaving) does not make it an exit. */
	if (attach_target__state(t) == ATTACH_TARGET_EXECED)
		return;
	if (tid == t->pid || (t->nth == 0 && attach_target__state(t) == ATTACH_OK)) {
		t->exit_status = status;
		t->nth = 0;
		set_state(t, ATTACH_TARGET_EXITED);
		emit(t, ATTACH_EV_EXIT, t->pid, 0, status);
	}
}

static void dispatch(struct attach_target *t, pid_t tid, int status)
{
	if (attach_target__state(t) != ATTACH_OK)
		return;	/* leftovers of an exec or exit: reaped, nothing more */
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		on_death(t, tid, status);
		return;
	}
	if (!WIFSTOPPED(status))
		return;
	struct athread *th = attach__thread(t, tid);
	if (!th) {
		th = attach__new_thread(t, tid, 0);
		if (!th)
			return;
		th->seen_ns = util_now_ns();
	}
	th->interrupted = false;	/* any ptrace stop consumes a pending interrupt */
	int sig = WSTOPSIG(status), ev = status >> 16;
	if (sig == (SIGTRAP | 0x80)) {
		th->stop = AT_SYSCALL;
	} else if (ev == PTRACE_EVENT_STOP) {
		th->stop = AT_PARKED;
		th->sig = sig;
		th->gstop = is_stop_signal(sig);
	} else if (ev) {
		th->stop = AT_EVENT;
		th->event = ev;
		on_event(t, th);
	} else {
		th->stop = AT_SIGNAL;
		th->sig = sig;
		if (sig == SIGTRAP && th->stepping && is_step_trap(tid)) {
			th->sig = 0;	/* ours, however late: never the target's */
			th->stepping = false;
		}
	}
	settle(t, tid);
}

/* settle() every thread in a stop other than parked (fresh_only: the new
 * threads whose cloner never reported, once they waited long enough).
 * By tid: settle() may change the table. */
static void settle_each(struct attach_target *t, bool fresh_only)
{
	uint64_t now = util_now_ns();
#define SETTLE_WANTS(th) (fresh_only ? (th)->fresh && !(th)->parent && (th)->stop == AT_PARKED && \
				       now - (th)->seen_ns >= FRESH_WAIT_NS \
				     : (th)->stop != AT_RUNNING && (th)->stop != AT_PARKED)
	size_t n = 0;
	for (size_t i = 0; i < t->nth; i++)
		n += SETTLE_WANTS(&t->th[i]);
	if (!n)
		return;
	pid_t *some = malloc(n * sizeof(*some));
	if (!some)
		return;
	n = 0;
	for (size_t i = 0; i < t->nth; i++)
		if (SETTLE_WANTS(&t->th[i]))
			some[n++] = t->th[i].tid;
#undef SETTLE_WANTS
	for (size_t i = 0; i < n; i++)
		settle(t, some[i]);
	free(some);
}

static int drain(struct attach_target *t)
{
	int n = 0;
	for (;;) {
		int status;
		pid_t tid = waitpid(-1, &status, __WALL | __WNOTHREAD | WNOHANG);
		if (tid < 0 && errno == EINTR)
			continue;
		if (tid <= 0)
			break;
		dispatch(t, tid, status);
		n++;
	}
	return n;
}

int attach__pump(struct attach_target *t, int wait_ms)
{
	int n = drain(t);
	if (n == 0 && wait_ms > 0) {
		sigset_t chld;
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		struct timespec ts = { wait_ms / 1000, (long)(wait_ms % 1000) * 1000000L };
		sigtimedwait(&chld, NULL, &ts);
		n = drain(t);
	}
	settle_each(t, true);
	return n;
}

/* ------------------------------------------------------ stop the world */

static void task_state(struct attach_target *t, pid_t tid, char *state)
{
	char path[64];
	snprintf(path, sizeof path, "%d/task/%d", (int)t->pid, (int)tid);
	struct attach__proc p;
	*state = attach__proc_read_path(path, &p) < 0 ? 'X' : p.state;
}

/* Is th keeping the world from being stopped? A thread on its way out
 * (after its exit stop) runs only kernel code, but is waited for until it
 * is a zombie so that a stopped world has no running thread at all. */
static bool lagging(struct attach_target *t, struct athread *th)
{
	if (th->stop == AT_PARKED || th->zombie)
		return false;
	if (!th->exiting)
		return true;
	if (th->stop != AT_RUNNING)
		return false;	/* at its exit stop in a callback: on its way */
	char st;
	task_state(t, th->tid, &st);
	if (st == 'Z' || st == 'X')
		th->zombie = true;	/* e.g. a leader that called pthread_exit */
	return !th->zombie;
}

/* Wait until every thread is parked (or dead). */
static int wait_parked(struct attach_target *t, uint64_t deadline)
{
	for (;;) {
		int r = attach__check_alive(t);
		if (r < 0)
			return r;
		pid_t lag = 0;
		for (size_t i = 0; i < t->nth && !lag; i++)
			if (lagging(t, &t->th[i]))
				lag = t->th[i].tid;
		if (!lag)
			return 0;
		uint64_t now = util_now_ns();
		if (now >= deadline) {
			/* Late threads that are dying anyway do not count. */
			char st = 0;
			lag = 0;
			for (size_t i = 0; i < t->nth && !lag; i++) {
				struct athread *th = &t->th[i];
				if (!lagging(t, th) || th->exiting)
					continue;
				task_state(t, th->tid, &st);
				if (st == 'Z' || st == 'X')
					th->exiting = th->zombie = true;
				else
					lag = th->tid;
			}
			if (!lag)
				return 0;
			return attach__fail(t, -ETIMEDOUT,
					    "thread %d of process %d (%s) did not stop within %d ms "
					    "(state %c: %s)", (int)lag, (int)t->pid, t->comm,
					    t->stop_timeout_ms, st, attach__state_words(st));
		}
		uint64_t left_ms = (deadline - now + 999999) / 1000000;
		attach__pump(t, (int)(left_ms < ATTACH_POLL_MS ? left_ms : ATTACH_POLL_MS));
	}
}

/* Every thread leaving and none parked: the process is dying (SIGKILL or
 * exit_group). Wait for its death to be reported rather than answer that
 * an empty world is stopped. */
static int wait_not_dying(struct attach_target *t, uint64_t deadline)
{
	for (;;) {
		int r = attach__check_alive(t);
		if (r < 0)
			return r;
		for (size_t i = 0; i < t->nth; i++)
			if (t->th[i].stop == AT_PARKED)
				return 0;
		/* Let the ones held at their exit stop die. */
		for (size_t i = 0; i < t->nth; i++)
			if (t->th[i].stop != AT_RUNNING)
				release(t, &t->th[i]);
		if (util_now_ns() >= deadline + 1000000000ull)
			return attach__fail(t, -ESRCH, "process %d (%s) is exiting", (int)t->pid,
					    t->comm);
		attach__pump(t, ATTACH_POLL_MS);
	}
}

/* Resume every parked thread (held new threads wait for their cloner). */
static void release_all(struct attach_target *t)
{
	for (size_t i = 0; i < t->nth; i++) {
		struct athread *th = &t->th[i];
		if (th->stop != AT_RUNNING && !(th->fresh && !th->parent))
			release(t, th);
	}
}

static void account_pause(struct attach_target *t)
{
	uint64_t ns = util_now_ns() - t->pause_t0;
	pthread_mutex_lock(&t->lock);
	t->stats.count++;
	t->stats.last_ns = ns;
	t->stats.total_ns += ns;
	if (ns > t->stats.max_ns)
		t->stats.max_ns = ns;
	pthread_mutex_unlock(&t->lock);
}

/* From the first interrupt of a stop until the tracer is idle again (the
 * span of boost(), below), idle CPUs poll instead of halting: a CPU latency
 * request of 0 us (/dev/cpu_dma_latency, held open; its value back to the
 * kernel's default when the tracer goes idle). Under a hypervisor a halted
 * vCPU takes hundreds of microseconds to milliseconds to wake (its host
 * must schedule it again), and a pause wakes threads on idle CPUs many
 * times: each target thread into its stop and out, three round trips per
 * system call run in the target. On a 2-vCPU VM whose idle CPUs halt
 * (cpuidle-haltpoll), a remote getpid on an idle machine took 0.4-3.4 ms
 * without the request, 0.13-0.65 ms with it. Root only (the device is
 * 0600); without it nothing changes. */
#define QOS_DEFAULT_US 2000000000	/* PM_QOS_CPU_LATENCY_DEFAULT_VALUE: no constraint */

static void keep_cpus_polling(struct attach_target *t, bool on)
{
	if (on && !t->qos_tried) {
		t->qos_fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
		t->qos_tried = true;
	}
	if (t->qos_fd < 0 || t->qos_on == on)
		return;
	int32_t us = on ? 0 : QOS_DEFAULT_US;
	if (write(t->qos_fd, &us, sizeof us) == (ssize_t)sizeof us)
		t->qos_on = on;
}

/* From the first interrupt of a stop until it is idle again with the world
 * running, the tracer runs SCHED_FIFO when allowed (root or CAP_SYS_NICE).
 * As a normal task it would lose its CPU three ways, each time until the
 * task that took it ends its time slice at a scheduler tick (4 ms at
 * HZ=250): to the target's threads, woken one by one by the resume (or
 * spinning while it interrupts them); to any other task while the world is
 * stopped and only the tracer can end the pause; and at the switch back
 * itself, since a task leaving SCHED_FIFO with others runnable on its CPU
 * is rescheduled at once. So the policy is given back only when the tracer
 * goes idle (attach__unboost, from its loop before it sleeps), with the
 * world running and every request answered: never inside a pause, nor
 * between a resume and the answer to whoever asked for it. */
static void boost(struct attach_target *t, bool on)
{
	keep_cpus_polling(t, on);
	if (t->no_boost || t->boosted == on)
		return;
	if (!t->sched_saved) {
		/* A host that runs real-time already keeps its own policy. */
		t->sched_policy = sched_getscheduler(0);
		sched_getparam(0, &t->sched_param);
		t->sched_saved = true;
		if (t->sched_policy != SCHED_OTHER) {
			t->no_boost = true;
			return;
		}
	}
	struct sched_param fifo = { .sched_priority = 1 };
	int r = on ? sched_setscheduler(0, SCHED_FIFO, &fifo)
		   : sched_setscheduler(0, t->sched_policy, &t->sched_param);
	if (r < 0)
		t->no_boost = true;
	else
		t->boosted = on;
}

void attach__unboost(struct attach_target *t)
{
	if (t->depth == 0)
		boost(t, false);
}

/* keep: on a timeout, leave the threads that did stop parked (detach
 * wants them) instead of resuming them all. */
static int stop_world(struct attach_target *t, bool keep)
{
	struct attach_error e;
	int r = attach__check_alive(t);
	if (r < 0)
		return r;
	if (t->depth++ > 0)
		return 0;
	boost(t, true);
	t->pause_t0 = util_now_ns();
	for (size_t i = 0; i < t->nth; i++) {
		struct athread *th = &t->th[i];
		if (th->stop == AT_RUNNING && !th->interrupted && !th->exiting)
			attach__interrupt(t, th);
	}
	/* Threads already in some other stop are parked by settle(). */
	settle_each(t, false);
	uint64_t deadline = t->pause_t0 + (uint64_t)t->stop_timeout_ms * 1000000u;
	/* A thread whose cloner was seized in the middle of clone() escaped
	 * TRACECLONE. Once every thread is parked, no clone() is under way:
	 * one more look at /proc/PID/task then finds every such thread. */
	do {
		r = wait_parked(t, deadline);
		if (r < 0)
			goto fail;
		r = attach__seize_new(t, true, &e);
		if (r < 0) {
			attach__fail(t, r, "%s", e.msg);
			goto fail;
		}
	} while (r > 0);
	r = wait_not_dying(t, deadline);
	if (r < 0)
		goto fail;
	pthread_mutex_lock(&t->lock);
	t->stats.last_stop_ns = util_now_ns() - t->pause_t0;
	pthread_mutex_unlock(&t->lock);
	__atomic_store_n(&t->world_stopped, true, __ATOMIC_RELEASE);
	return 0;	/* still SCHED_FIFO: see boost() */
fail:
	if (attach_target__state(t) == ATTACH_OK && !keep) {
		t->depth = 0;
		release_all(t);
	}
	return r;
}

int attach__stop_world(struct attach_target *t)
{
	return stop_world(t, false);
}

int attach__resume_world(struct attach_target *t)
{
	int r = attach__check_alive(t);
	if (r < 0)
		return r;
	if (t->depth == 0)
		return attach__fail(t, -EINVAL, "process %d (%s) is not stopped: resume without stop",
				    (int)t->pid, t->comm);
	/* SIGTRAP's own action back while every thread is parked; the
	 * world resumes even if that failed (the message says so) */
	if (t->depth == 1)
		r = attach__guard_disarm(t);
	if (--t->depth > 0)
		return 0;
	__atomic_store_n(&t->world_stopped, false, __ATOMIC_RELEASE);
	boost(t, true);	/* (normally still on since the stop) */
	release_all(t);
	account_pause(t);
	return r;
}

int attach__detach_all(struct attach_target *t)
{
	int r = 0;
	if (attach_target__state(t) != ATTACH_OK)
		goto out;
	if (t->depth == 0) {
		/* A thread too slow to stop (a loaded machine, a vfork parent)
		 * is no failure here: the others are detached below, and the
		 * kernel detaches it when the tracer thread exits. */
		stop_world(t, true);
		if (attach_target__state(t) != ATTACH_OK)
			goto out;	/* it exited or exec'd meanwhile: nothing to detach */
		t->depth = 1;
	}
	r = attach__guard_disarm(t);
	for (size_t i = 0; i < t->nth; i++) {
		struct athread *th = &t->th[i];
		if (th->stop == AT_RUNNING) {
			if (th->exiting || th->zombie)
				continue;
			t->left_running = true;
			if (th->gs_changed && r == 0)
				r = attach__fail(t, -ETIMEDOUT, "thread %d of process %d (%s) did not "
						 "stop: its gs_base was not put back", (int)th->tid,
						 (int)t->pid, t->comm);
			continue;
		}
		if (th->gs_changed) {
			struct user_regs_struct regs;
			if (attach__ptrace(PTRACE_GETREGS, th->tid, NULL, &regs) == 0) {
				regs.gs_base = th->gs_orig;
				attach__ptrace(PTRACE_SETREGS, th->tid, NULL, &regs);
			}
		}
		/* A job-control stop is reinstated by the kernel at detach. */
		if (th->stop == AT_SIGNAL && th->sig)
			attach__restart_before_signal(t, th->tid);
		attach__ptrace(PTRACE_DETACH, th->tid, NULL,
			       (void *)(long)(th->stop == AT_SIGNAL ? th->sig : 0));
		th->stop = AT_RUNNING;
	}
	account_pause(t);
out:
	t->nth = 0;
	t->depth = 0;
	__atomic_store_n(&t->world_stopped, false, __ATOMIC_RELEASE);
	return r;
}

/* ------------------------------------------------- one thread at a time */

struct athread *attach__stopped_thread(struct attach_target *t, pid_t tid, int *err)
{
	*err = attach__check_alive(t);
	if (*err < 0)
		return NULL;
	if (tid == 0) {
		/* The main thread, or the first one still able to run code. */
		for (size_t i = 0; i < t->nth; i++)
			if (!t->th[i].exiting) {
				tid = t->th[i].tid;
				break;
			}
		if (tid == 0) {
			*err = attach__fail(t, -ESRCH, "process %d (%s) has no live thread",
					    (int)t->pid, t->comm);
			return NULL;
		}
	}
	struct athread *th = attach__thread(t, tid);
	if (!th) {
		*err = attach__fail(t, -ESRCH, "%d is not a thread of process %d (%s)", (int)tid,
				    (int)t->pid, t->comm);
		return NULL;
	}
	if (th->stop == AT_RUNNING) {
		*err = attach__fail(t, -EBUSY,
				    "thread %d of process %d (%s) is running: stop the world first "
				    "(attach_target__stop)", (int)tid, (int)t->pid, t->comm);
		return NULL;
	}
	return th;
}

int attach__wait_thread(struct attach_target *t, pid_t tid, int timeout_ms)
{
	uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		int r = attach__check_alive(t);
		if (r < 0)
			return r;
		struct athread *th = attach__thread(t, tid);
		if (!th)
			return attach__fail(t, -ESRCH, "thread %d of process %d (%s) exited",
					    (int)tid, (int)t->pid, t->comm);
		if (th->stop != AT_RUNNING)
			return 0;
		uint64_t now = util_now_ns();
		if (now >= deadline)
			return attach__fail(t, -ETIMEDOUT, "thread %d of process %d (%s) did not "
					    "stop within %d ms", (int)tid, (int)t->pid, t->comm,
					    timeout_ms);
		uint64_t left_ms = (deadline - now + 999999) / 1000000;
		attach__pump(t, (int)(left_ms < ATTACH_POLL_MS ? left_ms : ATTACH_POLL_MS));
	}
}

int attach__repark(struct attach_target *t, pid_t tid)
{
	if (t->sc_tid == tid)
		t->sc_tid = 0;
	for (;;) {
		struct athread *th = attach__thread(t, tid);
		if (!th)
			return attach__fail(t, -ESRCH, "thread %d of process %d (%s) exited",
					    (int)tid, (int)t->pid, t->comm);
		if (th->stop == AT_PARKED)
			return 0;
		if (th->stop != AT_RUNNING)
			toward_park(t, th);
		int r = attach__wait_thread(t, tid, t->stop_timeout_ms);
		if (r < 0)
			return r;
	}
}
