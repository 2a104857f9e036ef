/* session.c: libpadrone's session, composing attach/ and profile/. */
#include "src/padrone.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "attach/attach.h"
#include "elf/elf.h"
#include "profile/profile.h"
#include "src/report.h"
#include "src/session.h"

#define DEFAULT_SECONDS 2.0
#define MAX_FRAMES 256

/* A room's state kept across commands (session.h). */
struct ext {
	char *name;
	void *data;
	padrone_ext_release_fn release;
};

struct padrone_session {
	struct padrone_session_opts opts;
	struct ext *exts;		/* in the order they were added */
	size_t nexts;
	struct attach_target *t;
	struct prof_symbolizer *sym;	/* made on first use */
	struct elf_modules *names;	/* the resolver's modules, made on first use */
	unsigned names_pinned;		/* borrowed: not read again meanwhile */
	struct padrone_report *report;
	struct prof_hot *hot;		/* the last profile's ranking and chains */
	struct padrone_ip_count *samples;	/* of the last profile */
	size_t nsamples;
	struct padrone_chain *chains;	/* of the last profile, user frames */
	uint64_t *chain_ips;		/* what they point into */
	size_t nchains;
	int event_fd;			/* the target exited or exec'd */
	int interrupt_fd;		/* padrone_session__interrupt */
	/* Signal handlers and other threads read these: atomics (lock-free on
	 * x86-64, so async-signal-safe), not volatile sig_atomic_t. */
	atomic_bool profiling;		/* in a profile's or another wait (session.h) */
	atomic_bool leaving;		/* padrone_session_leave: end every profile */
	padrone_wait_hook_fn wait_hook;	/* padrone_session_set_wait_hook */
	void *wait_hook_arg;
	struct padrone_module *mods;	/* of padrone_session__modules */
	size_t nmods;
	struct prof_frame raw[MAX_FRAMES];
	struct padrone_frame frames[MAX_FRAMES];
	char cc_names[MAX_FRAMES][PADRONE_CC_NAME];	/* code-cache frames' names */
	struct prof_walk_stop bt_stop;	/* how the last backtrace ended */
	bool bt_done;
	enum padrone_why why;
	char errmsg[512];
	void *_Atomic instr;		/* padrone_session_set_instr */
};

static int keep_samples(struct padrone_session *s, const struct prof_sampler *smp);
static void forget_modules(struct padrone_session *s);

/* --------------------------------------------------------------- failures */

static int fail(struct padrone_session *s, enum padrone_why why, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int vfail(struct padrone_session *s, enum padrone_why why, int err, const char *fmt,
		 va_list ap)
{
	vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
	s->why = why;
	return err < 0 ? err : -EINVAL;
}

static int fail(struct padrone_session *s, enum padrone_why why, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = vfail(s, why, err, fmt, ap);
	va_end(ap);
	return err;
}

static void ok(struct padrone_session *s)
{
	s->why = PADRONE_OK;
	s->errmsg[0] = '\0';
}

static const struct {
	enum attach_why a;
	enum padrone_why p;
	const char *name;
} whys[] = {
	{ ATTACH_OK, PADRONE_OK, "ok" },
	{ ATTACH_NO_PROCESS, PADRONE_NO_PROCESS, "no-process" },
	{ ATTACH_ZOMBIE, PADRONE_ZOMBIE, "zombie" },
	{ ATTACH_KERNEL_THREAD, PADRONE_KERNEL_THREAD, "kernel-thread" },
	{ ATTACH_NOT_X86_64, PADRONE_NOT_X86_64, "not-x86-64" },
	{ ATTACH_PERMISSION, PADRONE_PERMISSION, "permission" },
	{ ATTACH_ALREADY_TRACED, PADRONE_ALREADY_TRACED, "already-traced" },
	{ ATTACH_TARGET_EXITED, PADRONE_TARGET_EXITED, "target-exited" },
	{ ATTACH_TARGET_EXECED, PADRONE_TARGET_EXECED, "target-execed" },
	{ ATTACH_TIMEOUT, PADRONE_TIMEOUT, "timeout" },
	{ ATTACH_SYSTEM, PADRONE_SYSTEM, "system" },
};

static enum padrone_why from_attach(enum attach_why a)
{
	for (size_t i = 0; i < sizeof(whys) / sizeof(whys[0]); i++)
		if (whys[i].a == a)
			return whys[i].p;
	return PADRONE_SYSTEM;
}

int padrone_why_exit_status(enum padrone_why why)
{
	if (why == PADRONE_NOT_ATTACHED)
		return 1;	/* a failed command, as in cmd.h */
	if (why == PADRONE_BAD_REQUEST)
		return 2;	/* a usage error */
	for (size_t i = 0; i < sizeof(whys) / sizeof(whys[0]); i++)
		if (whys[i].p == why)
			return attach_why_exit_status(whys[i].a);
	return attach_why_exit_status(ATTACH_SYSTEM);
}

const char *padrone_why_name(enum padrone_why why)
{
	if (why == PADRONE_NOT_ATTACHED)
		return "not-attached";
	if (why == PADRONE_BAD_REQUEST)
		return "bad-request";
	for (size_t i = 0; i < sizeof(whys) / sizeof(whys[0]); i++)
		if (whys[i].p == why)
			return whys[i].name;
	return "unknown";
}

/* A failed operation on the attached target: attach/ says why (a thread
 * that did not stop in time, a thread in D state among them, is a timeout,
 * not a system error). */
static int fail_target(struct padrone_session *s, int err, const char *what)
{
	enum attach_why why = attach_target__why(s->t);
	const char *msg = attach_target__errmsg(s->t);

	if (why == ATTACH_OK)	/* no message of attach/'s: the process's state */
		why = attach_target__state(s->t);
	if (why == ATTACH_OK)
		why = err == -ETIMEDOUT ? ATTACH_TIMEOUT : ATTACH_SYSTEM;
	return fail(s, from_attach(why), err, "%s: %s", what, *msg ? msg : strerror(-err));
}

enum padrone_why padrone_session__why(const struct padrone_session *s) { return s->why; }
const char *padrone_session__errmsg(const struct padrone_session *s) { return s->errmsg; }

int padrone_session__exit_status(const struct padrone_session *s)
{
	return padrone_why_exit_status(s->why);
}

/* --------------------------------------------------------------- lifetime */

struct padrone_session *padrone_session__new(const struct padrone_session_opts *opts)
{
	struct padrone_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->opts.sz = sizeof(s->opts);
	/* Copy only the fields the caller's (maybe older) struct has. */
	if (opts) {
		size_t n = opts->sz < sizeof(s->opts) ? opts->sz : sizeof(s->opts);
		memcpy(&s->opts, opts, n);
		s->opts.sz = sizeof(s->opts);
	}
	s->event_fd = -1;
	s->interrupt_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->interrupt_fd < 0) {
		int e = errno;
		free(s);
		errno = e;
		return NULL;
	}
	return s;
}

void padrone_session__free(struct padrone_session *s)
{
	if (!s)
		return;
	padrone_session__detach(s);
	close(s->interrupt_fd);
	free(s);
}

static void on_event(struct attach_target *t, const struct attach_event *ev, void *arg)
{
	struct padrone_session *s = arg;
	uint64_t one = 1;

	void *instr = atomic_load(&s->instr);

	/* a new thread, or a forked child: off the ring it inherited */
	if (ev->kind == ATTACH_EV_THREAD_NEW && instr)
		padrone_instr_thread_new(instr, ev->tid);
	if (ev->kind == ATTACH_EV_FORK && instr)
		padrone_instr_fork(instr, ev->tid);
	if (ev->kind == ATTACH_EV_THREAD_EXIT && instr)
		padrone_instr_thread_exit(instr, ev->tid);
	if (ev->kind == ATTACH_EV_EXIT || ev->kind == ATTACH_EV_EXEC) {
		if (write(s->event_fd, &one, sizeof(one)) < 0) {
			/* The counter cannot overflow from a handful of events. */
		}
	}
}

void padrone_session_set_instr(struct padrone_session *s, void *data)
{
	atomic_store(&s->instr, data);
}

int padrone_session__attach(struct padrone_session *s, pid_t pid)
{
	struct attach_opts ao = { .sz = sizeof(ao), .stop_timeout_ms = s->opts.stop_timeout_ms };
	struct attach_error err = { 0 };
	int r;

	if (s->t)
		return fail(s, PADRONE_BAD_REQUEST, -EBUSY, "already attached to process %d",
			    (int)attach_target__pid(s->t));
	s->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->event_fd < 0)
		return fail(s, PADRONE_SYSTEM, -errno, "eventfd: %s", strerror(errno));
	r = attach_seize(pid, &ao, &s->t, &err);
	if (r < 0) {
		close(s->event_fd);
		s->event_fd = -1;
		s->t = NULL;
		return fail(s, from_attach(err.why), r, "%s", err.msg);
	}
	attach_target__on_event(s->t, on_event, s);
	/* It may have died between the seize and the callback. */
	if (attach_target__state(s->t) != ATTACH_OK) {
		uint64_t one = 1;
		if (write(s->event_fd, &one, sizeof(one)) < 0) {
			/* cannot fail on a fresh eventfd */
		}
	}
	ok(s);
	return 0;
}

/* Release every extension, newest first; keep the first failure's reason. */
static int release_exts(struct padrone_session *s, char *err, size_t errlen)
{
	int first = 0;

	while (s->nexts) {
		struct ext *e = &s->exts[--s->nexts];
		int r = e->release ? e->release(s, e->data) : 0;
		if (r < 0 && !first) {
			first = r;
			snprintf(err, errlen, "%s", *s->errmsg ? s->errmsg : strerror(-r));
		}
		free(e->name);
	}
	free(s->exts);
	s->exts = NULL;
	return first;
}

int padrone_session__detach(struct padrone_session *s)
{
	int r = 0;

	if (!s->t)
		return fail(s, PADRONE_NOT_ATTACHED, -ENOENT, "not attached to a process");
	/* Rooms first, newest first, while the process is still ours. */
	char ext_err[sizeof(s->errmsg)] = "";
	int ext_r = release_exts(s, ext_err, sizeof(ext_err));
	padrone_report_free(s->report);
	s->report = NULL;
	prof_hot__free(s->hot);
	s->hot = NULL;
	keep_samples(s, NULL);
	prof_symbolizer__free(s->sym);
	s->sym = NULL;
	elf_modules__free(s->names);
	s->names = NULL;
	forget_modules(s);
	pid_t pid = attach_target__pid(s->t);
	r = attach_target__detach(s->t);
	s->t = NULL;
	close(s->event_fd);
	s->event_fd = -1;
	if (r < 0)
		return fail(s, PADRONE_SYSTEM, r, "detaching from process %d: %s", (int)pid,
			    strerror(-r));
	if (ext_r < 0)
		return fail(s, PADRONE_SYSTEM, ext_r, "%s", ext_err);
	ok(s);
	return 0;
}

bool padrone_session__attached(const struct padrone_session *s) { return s->t != NULL; }
pid_t padrone_session__pid(const struct padrone_session *s)
{
	return s->t ? attach_target__pid(s->t) : 0;
}

enum padrone_why padrone_session__target_state(const struct padrone_session *s)
{
	return s->t ? from_attach(attach_target__state(s->t)) : PADRONE_NOT_ATTACHED;
}

int padrone_session__event_fd(const struct padrone_session *s) { return s->t ? s->event_fd : -1; }

/* Only atomics and write(2) on an eventfd: async-signal-safe. */
static void wake_profile(struct padrone_session *s)
{
	uint64_t one = 1;

	if (write(s->interrupt_fd, &one, sizeof(one)) < 0) {
		/* async-signal context: nothing to report to */
	}
}

void padrone_session__interrupt(struct padrone_session *s)
{
	if (s && atomic_load(&s->profiling))
		wake_profile(s);
}

void padrone_session_leave(struct padrone_session *s)
{
	if (!s)
		return;
	/* Either this sees the profile's flag, or the profile (which sets its
	 * flag before looking) sees ours: sequentially consistent, no gap. */
	atomic_store(&s->leaving, true);
	padrone_session__interrupt(s);
}

static int need_target(struct padrone_session *s)
{
	if (!s->t)
		return fail(s, PADRONE_NOT_ATTACHED, -ENOENT, "not attached to a process");
	enum attach_why st = attach_target__state(s->t);
	if (st == ATTACH_TARGET_EXITED)
		return fail(s, PADRONE_TARGET_EXITED, -ESRCH, "process %d has exited",
			    (int)attach_target__pid(s->t));
	/* Facts only: what to do next differs (padroned and one-shot padrone
	 * have let go already; at the prompt it takes detach, then attach). */
	if (st == ATTACH_TARGET_EXECED) {
		char comm[32] = "", path[64];
		pid_t pid = attach_target__pid(s->t);
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		FILE *f = fopen(path, "re");
		if (f) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = '\0';
			fclose(f);
		}
		comm[strcspn(comm, "\n")] = '\0';
		if (*comm)
			return fail(s, PADRONE_TARGET_EXECED, -ECHILD,
				    "process %d has exec'd another program (now %s)", (int)pid, comm);
		return fail(s, PADRONE_TARGET_EXECED, -ECHILD,
			    "process %d has exec'd another program", (int)pid);
	}
	return 0;
}

int padrone_session_fail_if_gone(struct padrone_session *s)
{
	return s->t ? need_target(s) : 0;
}

int padrone_session_fail_if_left(struct padrone_session *s)
{
	/* The tracer thread may not have seen the exit or exec event yet when
	 * the operation failed on its effects (maps gone, code unreadable); a
	 * stop waits for every thread, so it fails on a process that left. */
	if (s->t && attach_target__state(s->t) == ATTACH_OK && attach_target__stop(s->t) == 0)
		attach_target__resume(s->t);
	return padrone_session_fail_if_gone(s);
}

static int need_symbolizer(struct padrone_session *s)
{
	struct prof_error err = { 0 };
	int r;

	if (s->sym)
		return prof_symbolizer__refresh(s->sym) < 0 ?
			fail(s, PADRONE_SYSTEM, -EIO, "%s", prof_symbolizer__errmsg(s->sym)) : 0;
	r = prof_symbolizer__new(attach_target__pid(s->t), &s->sym, &err);
	if (r < 0) {
		s->sym = NULL;
		return fail(s, PADRONE_SYSTEM, r, "%s", err.msg);
	}
	return 0;
}

int padrone_sub_name_addr(const char *name, uint64_t *addr)
{
	char *end;

	if (strncmp(name, "sub_", 4) != 0 || !isxdigit((unsigned char)name[4]))
		return -ENOENT;
	errno = 0;
	unsigned long long v = strtoull(name + 4, &end, 16);
	if (*end || errno || !v)
		return -ENOENT;
	*addr = v;
	return 0;
}

/* ---------------------------------------------------------------- threads */

/* name, state and CPU times from a stat file of /proc (no ptrace); 0 or
 * -1 when it cannot be read. */
static int read_stat_file(const char *path, struct padrone_thread *th)
{
	char buf[1024];
	long tick = sysconf(_SC_CLK_TCK);
	int fd;
	ssize_t n;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* "tid (comm) S ..." -- comm may hold spaces and parentheses. */
	char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
	if (!open_paren || !close_paren || close_paren < open_paren)
		return -1;
	size_t len = (size_t)(close_paren - open_paren - 1);
	if (len >= sizeof(th->name))
		len = sizeof(th->name) - 1;
	memcpy(th->name, open_paren + 1, len);
	th->name[len] = '\0';
	unsigned long long utime = 0, stime = 0;
	/* After ")": state, then fields 4..13, then utime (14) and stime (15). */
	if (sscanf(close_paren + 2, "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %llu",
		   &th->state, &utime, &stime) == 3 && tick > 0) {
		th->user_ms = utime * 1000 / (unsigned long long)tick;
		th->system_ms = stime * 1000 / (unsigned long long)tick;
		return 0;
	}
	return -1;
}

/* The same from /proc/PID/task/TID/stat. */
static void read_task_stat(pid_t pid, struct padrone_thread *th)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)th->tid);
	read_stat_file(path, th);
}

/* How often, and how far apart, info threads looks in /proc for the pc of
 * a thread that is running before it stops the process to read it. */
#define PC_LOOKS 5
#define PC_LOOK_US 2000

/* A thread's pc as the kernel tells it without a stop: the last field of
 * /proc/PID/task/TID/syscall, for a thread that is not on a CPU (blocked
 * in a system call: "NR ARGS... SP PC"; elsewhere in the kernel: "-1 SP
 * PC"). 0 for one that is running there ("running"), or gone. */
static uint64_t pc_from_proc(pid_t pid, pid_t tid)
{
	char path[64], buf[256];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	const char *last = strrchr(buf, ' ');
	if (!last || strncmp(buf, "running", 7) == 0)
		return 0;
	return strtoull(last + 1, NULL, 0);
}

/* Every listed thread's pc: from /proc for those off a CPU (no stop: a
 * stop interrupts the system calls threads are blocked in, and epoll_wait,
 * among others, then fails with EINTR); the world is stopped once, for a
 * moment, only if a thread is running, whose pc nothing else tells. */
static int read_pcs(struct padrone_session *s, struct padrone_thread *out, size_t n)
{
	pid_t pid = attach_target__pid(s->t);
	bool running = true;

	for (size_t i = 0; i < n; i++)
		out[i].pc = 0;
	/* A thread caught on its way back into a system call (just after
	 * attach's own stop, say) blocks again within microseconds: look a
	 * few times before stopping anything for it. */
	for (int round = 0; running && round < PC_LOOKS; round++) {
		if (round)
			usleep(PC_LOOK_US);
		running = false;
		for (size_t i = 0; i < n; i++) {
			if (!out[i].pc)
				out[i].pc = pc_from_proc(pid, out[i].tid);
			running |= !out[i].pc && out[i].state != 'Z' && out[i].state != 'X';
		}
	}
	if (!running)
		return 0;
	int r = attach_target__stop(s->t);
	if (r < 0)
		return fail_target(s, r, "stopping the process");
	for (size_t i = 0; i < n; i++) {
		struct user_regs_struct regs;
		if (!out[i].pc && attach_target__get_regs(s->t, out[i].tid, &regs) == 0)
			out[i].pc = regs.rip;	/* a thread gone meanwhile keeps pc 0 */
	}
	r = attach_target__resume(s->t);
	return r < 0 ? fail_target(s, r, "resuming the process") : 0;
}

/* Each thread's function, named as bt names its frame #0: a symbol, an
 * FDE's sub_ADDR, a perf map line, what the code cache holds there, else
 * MODULE+0xOFF. */
static void name_thread_pcs(struct padrone_session *s, struct padrone_thread *out, size_t n)
{
	struct prof_frame *raw = calloc(n, sizeof *raw);
	struct padrone_frame *frames = calloc(n, sizeof *frames);
	char (*names)[PADRONE_CC_NAME] = calloc(n, sizeof *names);

	if (raw && frames && names && need_symbolizer(s) == 0) {
		for (size_t i = 0; i < n; i++) {
			raw[i].pc = out[i].pc;
			if (out[i].pc)	/* 0: gone meanwhile, nothing to name */
				prof_symbolizer__lookup(s->sym, out[i].pc, &raw[i].sym);
			frames[i].name = raw[i].sym.name ? raw[i].sym.name : "";
		}
		padrone_cc_name_frames(s, raw, frames, n, names);
		for (size_t i = 0; i < n; i++)
			if (out[i].pc)
				snprintf(out[i].function, sizeof(out[i].function), "%s", frames[i].name);
	}
	free(raw);
	free(frames);
	free(names);
}

/* The thread ids, main first, in a malloc'd *tids; how many, or -errno. */
static int list_tids(struct padrone_session *s, pid_t **tids)
{
	int n;

	*tids = NULL;
	for (size_t cap = 64;; cap *= 2) {
		pid_t *more = realloc(*tids, cap * sizeof(**tids));
		if (!more) {
			free(*tids);
			*tids = NULL;
			return fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
		}
		*tids = more;
		n = attach_target__threads(s->t, *tids, cap);
		if (n < 0 || (size_t)n <= cap)
			break;
	}
	if (n < 0) {
		free(*tids);
		*tids = NULL;
		return fail_target(s, n, "listing threads");
	}
	return n;
}

int padrone_session__threads(struct padrone_session *s, struct padrone_thread *out, size_t max)
{
	pid_t *tids;
	int n, r;

	if ((r = need_target(s)) < 0)
		return r;
	if ((n = list_tids(s, &tids)) < 0)
		return n;
	size_t fill = (size_t)n < max ? (size_t)n : max;
	for (size_t i = 0; i < fill; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].tid = tids[i];
		read_task_stat(attach_target__pid(s->t), &out[i]);
	}
	free(tids);
	if (fill && (r = read_pcs(s, out, fill)) < 0)
		return r;
	for (size_t i = 0; i < fill; i++)	/* the state the pc goes with */
		read_task_stat(attach_target__pid(s->t), &out[i]);
	if (fill)
		name_thread_pcs(s, out, fill);
	ok(s);
	return n;
}

/* ---------------------------------------------------------------- profile */

/* How often a profile tells its progress callback. */
#define PROGRESS_INTERVAL_S 0.25

static void read_cpu_time(pid_t pid, uint64_t *user_ns, uint64_t *system_ns);

/* The process's CPU time now, kept as the profile's end unless it is gone
 * (the kernel's accounting goes with it: the last reading stands). */
static void note_cpu_time(pid_t pid, uint64_t *user_ns, uint64_t *system_ns)
{
	uint64_t u, sys;

	read_cpu_time(pid, &u, &sys);
	if (u >= *user_ns && sys >= *system_ns && (u || sys)) {
		*user_ns = u;
		*system_ns = sys;
	}
}

/* Sleep for the profile's length, or less when interrupted or the target
 * goes away; tell o's progress callback how far it is on the way, and keep
 * the process's CPU time in *user_ns and *system_ns as it goes. */
static void wait_profile(struct padrone_session *s, const struct prof_sampler *smp,
			 const struct padrone_profile_opts *o, double seconds, uint64_t *user_ns,
			 uint64_t *system_ns)
{
	struct timespec t0, now;
	pid_t pid = attach_target__pid(s->t);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		note_cpu_time(pid, user_ns, system_ns);
		clock_gettime(CLOCK_MONOTONIC, &now);
		double elapsed = (double)(now.tv_sec - t0.tv_sec) +
				 (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		double left = seconds - elapsed;
		if (left <= 0)
			return;
		if (o->progress) {
			struct prof_totals t;
			prof_sampler__totals(smp, &t);
			o->progress(o->progress_arg, elapsed, seconds, t.samples);
		}
		if (left > PROGRESS_INTERVAL_S)
			left = PROGRESS_INTERVAL_S;
		struct pollfd pfd[2] = {
			{ .fd = s->interrupt_fd, .events = POLLIN },
			{ .fd = s->event_fd, .events = POLLIN },
		};
		int r = poll(pfd, 2, (int)(left * 1000) + 1);
		if (r > 0)
			return;
		if (r < 0 && errno != EINTR)
			return;
	}
}

/* The process's CPU time so far (all its threads, living and dead), from
 * the kernel's accounting in /proc/PID/stat; 0 when unreadable. */
static void read_cpu_time(pid_t pid, uint64_t *user_ns, uint64_t *system_ns)
{
	char path[64];
	struct padrone_thread th = { 0 };

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	*user_ns = *system_ns = 0;
	if (read_stat_file(path, &th) == 0) {
		*user_ns = th.user_ms * 1000000ull;
		*system_ns = th.system_ms * 1000000ull;
	}
}

/* What a profile measured besides its samples: when it began, the process's
 * CPU time meanwhile (the kernel's accounting: user and system), whether
 * kernel code was sampled. */
struct profile_facts {
	uint64_t start_ns;	/* CLOCK_REALTIME */
	uint64_t user0, system0, user1, system1;
	bool user_only;
};

/* Samples whose IP was in the kernel. */
static uint64_t kernel_samples(const struct prof_hot *hot)
{
	uint64_t n = 0;

	for (size_t i = 0; hot && i < prof_hot__stack_count(hot); i++) {
		const struct prof_hot_frame *f;
		size_t nf;
		uint64_t count;
		if (prof_hot__stack(hot, i, &f, &nf, &count) == 0 && nf &&
		    f[0].addr >= PROF_KERNEL_START)
			n += count;
	}
	return n;
}

/* How the threads were covered: "per-cpu", "per-thread" (ring) or
 * "in-kernel" (bpf, per CPU too). */
static const char *sampling_name(const struct prof_totals *t)
{
	if (t->backend == PROF_BACKEND_BPF)
		return "in-kernel";
	return prof_ring_mode_name(t->ring_mode);
}

/* The report of a profile: totals, and hot's functions (hot NULL: none). */
static int build_report(struct padrone_session *s, const struct prof_totals *t,
			const struct prof_hot *hot, const struct profile_facts *pf)
{
	struct padrone_report *r = padrone_report_new(attach_target__pid(s->t), t->event,
						      t->freq_hz, (double)t->duration_ns / 1e9,
						      t->samples, t->lost);
	int e = r ? 0 : -ENOMEM;

	if (r) {
		padrone_report_set_throttled(r, t->throttled);
		padrone_report_set_kernel(r, pf->user_only || !t->kernel, kernel_samples(hot),
					  pf->user1 - pf->user0, pf->system1 - pf->system0);
		padrone_report_set_start(r, pf->start_ns);
		e = padrone_report_set_backend(r, prof_backend_name(t->backend),
					       t->fell_back ? t->fallback_reason : "");
		if (e == 0)
			e = padrone_report_set_sampling(r, sampling_name(t), t->ring_mode_reason);
	}
	for (size_t i = 0; r && hot && e == 0 && i < prof_hot__count(hot); i++) {
		const struct prof_func *f = prof_hot__at(hot, i);
		e = padrone_report_add(r, f->name, f->module, f->start, f->end, f->self,
				       f->inclusive, prof_bounds_name(f->bounds));
	}
	if (e < 0) {
		padrone_report_free(r);
		return fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	}
	padrone_report_sort(r);
	padrone_report_free(s->report);
	s->report = r;
	return 0;
}

/* Drop an interrupt that came while nobody was profiling. */
static void drain(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof(v)) > 0)
		;
}

/* From here to profile_end an interrupt ends the profile: also one that
 * comes while the sampler is being set up (loading the BPF program takes a
 * while), which the wait then sees at once. Older ones are dropped. */
static void profile_begin(struct padrone_session *s)
{
	drain(s->interrupt_fd);
	atomic_store(&s->profiling, true);
	if (atomic_load(&s->leaving))
		wake_profile(s);
}

static void profile_end(struct padrone_session *s)
{
	atomic_store(&s->profiling, false);
	drain(s->interrupt_fd);
}

void padrone_session_set_wait_hook(struct padrone_session *s, padrone_wait_hook_fn fn, void *arg)
{
	s->wait_hook = fn;
	s->wait_hook_arg = arg;
}

static void call_wait_hook(struct padrone_session *s, bool begin)
{
	if (s->wait_hook)
		s->wait_hook(s, begin, s->wait_hook_arg);
}

/* Other commands' waits share the profile's interrupt (measure's). */
void padrone_session_wait_begin(struct padrone_session *s)
{
	profile_begin(s);
	call_wait_hook(s, true);
}

void padrone_session_wait_end(struct padrone_session *s)
{
	call_wait_hook(s, false);
	profile_end(s);
}

bool padrone_session_wait_interrupted(struct padrone_session *s, int ms)
{
	struct pollfd pfd[2] = {
		{ .fd = s->interrupt_fd, .events = POLLIN },
		{ .fd = s->event_fd, .events = POLLIN },
	};
	int r = poll(pfd, s->event_fd >= 0 ? 2 : 1, ms);

	return r > 0;
}

static int run_sampler(struct padrone_session *s, struct prof_sampler *smp,
		       const struct padrone_profile_opts *o, struct profile_facts *pf)
{
	pid_t pid = attach_target__pid(s->t);
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	pf->start_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	read_cpu_time(pid, &pf->user0, &pf->system0);
	int r = prof_sampler__start(smp);

	if (r < 0)
		return fail(s, PADRONE_SYSTEM, r, "%s", prof_sampler__errmsg(smp));
	call_wait_hook(s, true);
	pf->user1 = pf->user0;
	pf->system1 = pf->system0;
	wait_profile(s, smp, o, o->seconds > 0 ? o->seconds : DEFAULT_SECONDS, &pf->user1,
		     &pf->system1);
	call_wait_hook(s, false);
	note_cpu_time(pid, &pf->user1, &pf->system1);
	r = prof_sampler__stop(smp);
	return r < 0 ? fail(s, PADRONE_SYSTEM, r, "%s", prof_sampler__errmsg(smp)) : 0;
}

/* Keep where each user-space sample was, for cfg/'s hot loops; smp NULL
 * just forgets. */
static int keep_samples(struct padrone_session *s, const struct prof_sampler *smp)
{
	free(s->samples);
	free(s->chains);
	free(s->chain_ips);
	s->samples = NULL;
	s->chains = NULL;
	s->chain_ips = NULL;
	s->nsamples = s->nchains = 0;
	size_t n = smp ? prof_sampler__stack_count(smp) : 0;
	if (!n)
		return 0;
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		const uint64_t *ips;
		size_t nips;
		uint64_t count;
		if (prof_sampler__stack(smp, i, &ips, &nips, &count) == 0)
			total += nips;
	}
	s->samples = calloc(n, sizeof(*s->samples));
	s->chains = calloc(n, sizeof(*s->chains));
	s->chain_ips = calloc(total ? total : 1, sizeof(*s->chain_ips));
	if (!s->samples || !s->chains || !s->chain_ips)
		return fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		const uint64_t *ips;
		size_t nips;
		uint64_t count;
		if (prof_sampler__stack(smp, i, &ips, &nips, &count) < 0)
			continue;
		/* in the kernel: not this process's code (as the report's self) */
		if (nips && ips[0] < PROF_KERNEL_START)
			s->samples[s->nsamples++] = (struct padrone_ip_count){ ips[0], count };
		/* the user frames, which follow the kernel's */
		size_t k = 0;
		while (k < nips && ips[k] >= PROF_KERNEL_START)
			k++;
		if (k == nips || used + (nips - k) > total)
			continue;
		memcpy(s->chain_ips + used, ips + k, (nips - k) * sizeof(*ips));
		s->chains[s->nchains++] = (struct padrone_chain){ s->chain_ips + used, nips - k, count };
		used += nips - k;
	}
	return 0;
}

int padrone_session__profile(struct padrone_session *s, const struct padrone_profile_opts *opts)
{
	struct padrone_profile_opts o = { .sz = sizeof(o) };
	struct prof_sampler *smp = NULL;
	struct prof_hot *hot = NULL;
	struct profile_facts pf = { 0 };
	struct prof_error err = { 0 };
	int r;

	if (opts)
		memcpy(&o, opts, opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	if ((r = need_target(s)) < 0)
		return r;
	if (o.seconds < 0 || o.seconds != o.seconds)
		return fail(s, PADRONE_BAD_REQUEST, -EINVAL, "a profile cannot last %g seconds",
			    o.seconds);
	struct prof_opts po = {
		.sz = sizeof(po),
		.freq_hz = o.hz,
		.backend = o.backend == PADRONE_BACKEND_BPF ? PROF_BACKEND_BPF : PROF_BACKEND_RING,
		.force = o.force,
		.user_only = o.user_only,
	};
	pf.user_only = o.user_only;
	/* the maps as they are while it lives: what names its samples if it
	 * exits or execs meanwhile */
	if ((r = need_symbolizer(s)) < 0)
		return r;
	profile_begin(s);
	r = prof_sampler__open(attach_target__pid(s->t), &po, &smp, &err);
	if (r < 0) {
		profile_end(s);
		return fail(s, r == -EINVAL ? PADRONE_BAD_REQUEST : PADRONE_SYSTEM, r, "%s",
			    err.msg);
	}
	r = run_sampler(s, smp, &o, &pf);
	profile_end(s);
	enum attach_why ended = attach_target__state(s->t);
	if (ended != ATTACH_OK)
		prof_symbolizer__gone(s->sym);	/* keep what it had mapped */
	else if (r == 0)
		r = need_symbolizer(s);
	/* No sample at all (a stopped process): nothing to rank. */
	if (r == 0 && prof_sampler__stack_count(smp) > 0 &&
	    (r = prof_hot__build(smp, s->sym, &hot, &err)) < 0)
		fail(s, PADRONE_SYSTEM, r, "%s", err.msg);
	if (r == 0) {
		struct prof_totals t;
		prof_sampler__totals(smp, &t);
		r = build_report(s, hot ? prof_hot__totals(hot) : &t, hot, &pf);
		if (r == 0)
			padrone_report_set_ended(s->report, from_attach(ended));
	}
	if (r == 0)
		r = keep_samples(s, smp);
	if (r == 0) {	/* the chains of the report that replaced the last one */
		prof_hot__free(s->hot);
		s->hot = hot;
	} else {
		prof_hot__free(hot);
	}
	prof_sampler__free(smp);
	/* gone during the profile: the report of what was sampled until then
	 * stays, and the status says what happened */
	if (r == 0 && ended != ATTACH_OK)
		r = need_target(s);
	if (r == 0)
		ok(s);
	return r;
}

const struct padrone_ip_count *padrone_session_samples(const struct padrone_session *s, size_t *n)
{
	*n = s->nsamples;
	return s->samples;
}

const struct padrone_chain *padrone_session_chains(const struct padrone_session *s, size_t *n)
{
	*n = s->nchains;
	return s->nchains ? s->chains : NULL;
}

const struct padrone_report *padrone_session__report(const struct padrone_session *s)
{
	return s->report;
}

const struct prof_hot *padrone_session_hot(const struct padrone_session *s)
{
	return s->hot;
}

/* -------------------------------------------------------------- backtrace */

/* Is tid one of the process's threads? */
static int check_thread(struct padrone_session *s, pid_t tid)
{
	pid_t *tids;
	int n = list_tids(s, &tids);
	bool found = false;

	for (int i = 0; i < n && !found; i++)
		found = tids[i] == tid;
	free(tids);
	if (n < 0 || found)
		return n < 0 ? n : 0;
	return fail(s, PADRONE_BAD_REQUEST, -ESRCH, "%d is not a thread of process %d", (int)tid,
		    (int)attach_target__pid(s->t));
}

/* Has thread tid of the attached process exited (gone, or a zombie)? */
static bool thread_gone(struct padrone_session *s, pid_t tid)
{
	char path[64];
	struct padrone_thread th = { .tid = tid };

	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)attach_target__pid(s->t), (int)tid);
	if (access(path, F_OK) < 0)
		return true;
	read_task_stat(attach_target__pid(s->t), &th);
	return th.state == 'Z' || th.state == 'X';
}

/* Why a backtrace failed: the process gone (its own status), the thread
 * exited meanwhile (a request that can no longer be done: the process is
 * still there), or anything else. */
static int backtrace_failed(struct padrone_session *s, pid_t tid, int err)
{
	const char *msg = prof_symbolizer__errmsg(s->sym);
	int r = need_target(s);

	if (r < 0)
		return r;
	if (thread_gone(s, tid))
		return fail(s, PADRONE_BAD_REQUEST, -ESRCH, "thread %d of process %d exited before "
			    "its stack could be read", (int)tid, (int)attach_target__pid(s->t));
	return fail(s, err == -ETIMEDOUT ? PADRONE_TIMEOUT : PADRONE_SYSTEM, err,
		    "backtrace of thread %d: %s", (int)tid, *msg ? msg : strerror(-err));
}

int padrone_session__backtrace(struct padrone_session *s, pid_t tid,
			       const struct padrone_frame **frames, size_t *count)
{
	int r;

	*frames = NULL;
	*count = 0;
	if ((r = need_target(s)) < 0 || (r = need_symbolizer(s)) < 0)
		return r;
	if (!tid)
		tid = attach_target__pid(s->t);
	else if ((r = check_thread(s, tid)) < 0)
		return r;
	s->bt_done = false;
	r = prof_symbolizer__backtrace(s->sym, s->t, tid, s->raw, MAX_FRAMES, &s->bt_stop);
	if (r < 0)
		return backtrace_failed(s, tid, r);
	for (int i = 0; i < r; i++) {
		const struct prof_frame *f = &s->raw[i];
		s->frames[i] = (struct padrone_frame){
			.pc = f->pc,
			.offset = f->sym.start && f->pc >= f->sym.start ? f->pc - f->sym.start : 0,
			.name = f->sym.name ? f->sym.name : "",
			.module = f->sym.module ? f->sym.module : "",
		};
		s->cc_names[i][0] = '\0';
	}
	padrone_cc_name_frames(s, s->raw, s->frames, (size_t)r, s->cc_names);
	*frames = s->frames;
	*count = (size_t)r;
	s->bt_done = true;
	ok(s);
	return 0;
}

int padrone_session__backtrace_end(const struct padrone_session *s,
				   struct padrone_backtrace_end *out)
{
	const struct prof_walk_stop *st = &s->bt_stop;

	memset(out, 0, sizeof(*out));
	if (!s->bt_done)
		return -ENOENT;
	*out = (struct padrone_backtrace_end){
		.complete = st->why == PROF_WALK_COMPLETE,
		.reason = prof_walk_end_name(st->why),
		.frame = st->frame,
		.pc = st->pc,
		.sp = st->sp,
		.why = st->msg,
	};
	return 0;
}

/* ---------------------------------------------------------------- modules */

int padrone_session__pause_stats(const struct padrone_session *s, struct padrone_pause_stats *out)
{
	struct attach_pause_stats st;

	memset(out, 0, sizeof(*out));
	if (!s->t)
		return -ENOENT;
	attach_target__pause_stats(s->t, &st);
	*out = (struct padrone_pause_stats){
		.count = st.count,
		.last_ns = st.last_ns,
		.max_ns = st.max_ns,
		.total_ns = st.total_ns,
		.last_stop_ns = st.last_stop_ns,
	};
	return 0;
}

static void forget_modules(struct padrone_session *s)
{
	for (size_t i = 0; i < s->nmods; i++) {
		free((char *)s->mods[i].path);
		free((char *)s->mods[i].build_id);
	}
	free(s->mods);
	s->mods = NULL;
	s->nmods = 0;
}

/* Add the module mapped at m (its first executable mapping), once. */
static int add_module(struct padrone_session *s, const struct attach_maps *maps,
		      const struct attach_map *m, size_t *cap)
{
	for (size_t i = 0; i < s->nmods; i++)
		if (strcmp(s->mods[i].path, m->path) == 0)
			return 0;
	if (s->nmods == *cap) {
		size_t more = *cap ? *cap * 2 : 32;
		struct padrone_module *mods = realloc(s->mods, more * sizeof(*mods));
		if (!mods)
			return -ENOMEM;
		s->mods = mods;
		*cap = more;
	}
	struct prof_sym sym;
	prof_symbolizer__lookup(s->sym, m->start, &sym);	/* names the module either way */
	const struct attach_map *first = attach_maps__first_of(maps, m->path);
	struct padrone_module *mod = &s->mods[s->nmods];
	mod->base = first ? first->start : m->start;
	mod->path = strdup(m->path);
	mod->build_id = strdup(sym.build_id ? sym.build_id : "");
	if (!mod->path || !mod->build_id) {
		free((char *)mod->path);
		free((char *)mod->build_id);
		return -ENOMEM;
	}
	s->nmods++;
	return 0;
}

int padrone_session__modules(struct padrone_session *s, const struct padrone_module **modules,
			     size_t *count)
{
	struct attach_maps *maps;
	size_t cap = 0;
	int r;

	*modules = NULL;
	*count = 0;
	forget_modules(s);
	if ((r = need_target(s)) < 0 || (r = need_symbolizer(s)) < 0)
		return r;
	pid_t pid = attach_target__pid(s->t);
	if ((r = attach_maps__read(pid, &maps)) < 0)
		return fail(s, PADRONE_SYSTEM, r, "cannot read the maps of process %d: %s", (int)pid,
			    strerror(-r));
	for (size_t i = 0; i < attach_maps__count(maps) && r == 0; i++) {
		const struct attach_map *m = attach_maps__at(maps, i);
		/* files, and the kernel's [vdso]; not anonymous or JIT memory */
		if ((m->prot & ATTACH_MAP_X) && (m->path[0] == '/' || !strcmp(m->path, "[vdso]")))
			r = add_module(s, maps, m, &cap);
	}
	attach_maps__free(maps);
	if (r < 0) {
		forget_modules(s);
		return fail(s, PADRONE_SYSTEM, r, "out of memory");
	}
	*modules = s->mods;
	*count = s->nmods;
	ok(s);
	return 0;
}

/* ------------------------------------------------------ for src/'s commands */

struct attach_target *padrone_session_target(const struct padrone_session *s)
{
	return s->t;
}

int padrone_session_modules(struct padrone_session *s, struct elf_modules **out)
{
	char why[512];
	int r;

	*out = NULL;
	if ((r = need_target(s)) < 0)
		return r;
	if (s->names && !s->names_pinned && !elf_modules__current(s->names)) {
		elf_modules__free(s->names);
		s->names = NULL;
	}
	if (!s->names &&
	    (r = elf_modules__open(attach_target__pid(s->t), &s->names, why, sizeof why)) < 0)
		return fail(s, PADRONE_SYSTEM, r, "%s", why);
	*out = s->names;
	return 0;
}

void padrone_session_pin_modules(struct padrone_session *s, bool pin)
{
	s->names_pinned += pin ? 1 : -1;
}

int padrone_session_symbolizer(struct padrone_session *s, struct prof_symbolizer **out)
{
	int r;

	*out = NULL;
	if ((r = need_target(s)) < 0 || (r = need_symbolizer(s)) < 0)
		return r;
	*out = s->sym;
	return 0;
}

int padrone_session_fail(struct padrone_session *s, enum padrone_why why, int err,
			 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = vfail(s, why, err, fmt, ap);
	va_end(ap);
	return err;
}

void *padrone_session_ext(const struct padrone_session *s, const char *name)
{
	for (size_t i = 0; i < s->nexts; i++)
		if (strcmp(s->exts[i].name, name) == 0)
			return s->exts[i].data;
	return NULL;
}

int padrone_session_set_ext(struct padrone_session *s, const char *name, void *data,
			    padrone_ext_release_fn release)
{
	int r;

	if ((r = need_target(s)) < 0)
		return r;
	for (size_t i = 0; i < s->nexts; i++) {
		struct ext *e = &s->exts[i];
		if (strcmp(e->name, name) != 0)
			continue;
		void *old = e->data;
		padrone_ext_release_fn old_release = e->release;
		e->data = data;
		e->release = release;
		return old_release && old != data ? old_release(s, old) : 0;
	}
	struct ext *more = realloc(s->exts, (s->nexts + 1) * sizeof(*more));
	char *copy = strdup(name);
	if (!more || !copy) {
		if (more)
			s->exts = more;
		free(copy);
		return fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	}
	s->exts = more;
	s->exts[s->nexts++] = (struct ext){ .name = copy, .data = data, .release = release };
	return 0;
}
