/* session-process.c: the attached process as the session shows it: its
 * threads (from /proc, stopping it only when it must), backtraces, and its
 * executable modules. */
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
#include "src/status.h"
#include "src/session-state.h"

/* ---------------------------------------------------------------- threads */

/* name, state and CPU times from a stat file of /proc (no ptrace); 0 or
 * -1 when it cannot be read. */
int session__read_stat_file(const char *path, struct padrone_thread *th)
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
	session__read_stat_file(path, th);
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
		return session__fail_target(s, r, "stopping the process");
	for (size_t i = 0; i < n; i++) {
		struct user_regs_struct regs;
		if (!out[i].pc && attach_target__get_regs(s->t, out[i].tid, &regs) == 0)
			out[i].pc = regs.rip;	/* a thread gone meanwhile keeps pc 0 */
	}
	r = attach_target__resume(s->t);
	return r < 0 ? session__fail_target(s, r, "resuming the process") : 0;
}

/* Each thread's function, named as bt names its frame #0: a symbol, an
 * FDE's sub_ADDR, a perf map line, what the code cache holds there, else
 * MODULE+0xOFF. */
static void name_thread_pcs(struct padrone_session *s, struct padrone_thread *out, size_t n)
{
	struct prof_frame *raw = calloc(n, sizeof *raw);
	struct padrone_frame *frames = calloc(n, sizeof *frames);
	char (*names)[PADRONE_CC_NAME] = calloc(n, sizeof *names);

	if (raw && frames && names && session__need_symbolizer(s) == 0) {
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
int session__list_tids(struct padrone_session *s, pid_t **tids)
{
	int n;

	*tids = NULL;
	for (size_t cap = 64;; cap *= 2) {
		pid_t *more = realloc(*tids, cap * sizeof(**tids));
		if (!more) {
			free(*tids);
			*tids = NULL;
			return session__fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
		}
		*tids = more;
		n = attach_target__threads(s->t, *tids, cap);
		if (n < 0 || (size_t)n <= cap)
			break;
	}
	if (n < 0) {
		free(*tids);
		*tids = NULL;
		return session__fail_target(s, n, "listing threads");
	}
	return n;
}

int padrone_session__thread_count(struct padrone_session *s)
{
	pid_t *tids;
	int n;

	if ((n = session__need_target(s)) < 0 || (n = session__list_tids(s, &tids)) < 0)
		return n;
	free(tids);
	session__ok(s);
	return n;
}

/* Each listed thread's name, state and CPU times, then its pc and the
 * function there (the state read again: the one the pc goes with). */
static int describe_threads(struct padrone_session *s, struct padrone_thread *out, size_t n)
{
	pid_t pid = attach_target__pid(s->t);
	int r;

	for (size_t i = 0; i < n; i++)
		read_task_stat(pid, &out[i]);
	if (n && (r = read_pcs(s, out, n)) < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		read_task_stat(pid, &out[i]);
	if (n)
		name_thread_pcs(s, out, n);
	return 0;
}

int padrone_session__threads(struct padrone_session *s, struct padrone_thread_list **out)
{
	struct padrone_thread_list *l;
	pid_t *tids;
	int n, r;

	*out = NULL;
	if ((r = session__need_target(s)) < 0)
		return r;
	if ((n = session__list_tids(s, &tids)) < 0)
		return n;
	l = calloc(1, sizeof *l);
	if (l)
		l->items = calloc(n ? (size_t)n : 1, sizeof *l->items);
	if (!l || !l->items) {
		free(tids);
		padrone_thread_list__free(l);
		return session__fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	}
	l->count = (size_t)n;
	for (size_t i = 0; i < l->count; i++)
		l->items[i].tid = tids[i];
	free(tids);
	if ((r = describe_threads(s, l->items, l->count)) < 0) {
		padrone_thread_list__free(l);
		return r;
	}
	*out = l;
	session__ok(s);
	return 0;
}

void padrone_thread_list__free(struct padrone_thread_list *l)
{
	if (!l)
		return;
	free(l->items);
	free(l);
}

/* -------------------------------------------------------------- backtrace */

/* Is tid one of the process's threads? */
static int check_thread(struct padrone_session *s, pid_t tid)
{
	pid_t *tids;
	int n = session__list_tids(s, &tids);
	bool found = false;

	for (int i = 0; i < n && !found; i++)
		found = tids[i] == tid;
	free(tids);
	if (n < 0 || found)
		return n < 0 ? n : 0;
	return session__fail(s, PADRONE_BAD_REQUEST, -ESRCH, "%d is not a thread of process %d", (int)tid,
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
	int r = session__need_target(s);

	if (r < 0)
		return r;
	if (thread_gone(s, tid))
		return session__fail(s, PADRONE_BAD_REQUEST, -ESRCH, "thread %d of process %d exited before "
			    "its stack could be read", (int)tid, (int)attach_target__pid(s->t));
	return session__fail(s, err == -ETIMEDOUT ? PADRONE_TIMEOUT : PADRONE_SYSTEM, err,
		    "backtrace of thread %d: %s", (int)tid, *msg ? msg : strerror(-err));
}

/* The walk's frames, named (code-cache frames too), with borrowed
 * strings. */
static void fill_frames(struct padrone_session *s, struct padrone_frame *frames, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct prof_frame *f = &s->raw[i];
		frames[i] = (struct padrone_frame){
			.pc = f->pc,
			.offset = f->sym.start && f->pc >= f->sym.start ? f->pc - f->sym.start : 0,
			.name = f->sym.name ? f->sym.name : "",
			.module = f->sym.module ? f->sym.module : "",
		};
		s->cc_names[i][0] = '\0';
	}
	padrone_cc_name_frames(s, s->raw, frames, n, s->cc_names);
}

/* The list's own copies of its strings, in place of borrowed ones; false
 * when out of memory (the list's free takes it as it is). */
static bool own_frame_strings(struct padrone_frame_list *l)
{
	bool ok = session__own_string(&l->end.why);

	for (size_t i = 0; i < l->count; i++) {
		ok &= session__own_string(&l->items[i].name);
		ok &= session__own_string(&l->items[i].module);
	}
	return ok;
}

int padrone_session__backtrace(struct padrone_session *s, pid_t tid,
			       struct padrone_frame_list **out)
{
	struct padrone_frame_list *l;
	struct prof_walk_stop st;
	int r;

	*out = NULL;
	if ((r = session__need_target(s)) < 0 || (r = session__need_symbolizer(s)) < 0)
		return r;
	if (!tid)
		tid = attach_target__pid(s->t);
	else if ((r = check_thread(s, tid)) < 0)
		return r;
	r = prof_symbolizer__backtrace(s->sym, s->t, tid, s->raw, MAX_FRAMES, &st);
	if (r < 0)
		return backtrace_failed(s, tid, r);
	l = calloc(1, sizeof *l);
	if (l)
		l->items = calloc(r ? (size_t)r : 1, sizeof *l->items);
	if (!l || !l->items) {
		free(l);
		return session__fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	}
	l->count = (size_t)r;
	fill_frames(s, l->items, l->count);
	l->end = (struct padrone_backtrace_end){
		.complete = st.why == PROF_WALK_COMPLETE,
		.reason = prof_walk_end_name(st.why),	/* a constant */
		.frame = st.frame,
		.pc = st.pc,
		.sp = st.sp,
		.why = st.msg,
	};
	if (!own_frame_strings(l)) {
		padrone_frame_list__free(l);
		return session__fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	}
	*out = l;
	session__ok(s);
	return 0;
}

void padrone_frame_list__free(struct padrone_frame_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->count; i++) {
		free((char *)l->items[i].name);
		free((char *)l->items[i].module);
	}
	free((char *)l->end.why);
	free(l->items);
	free(l);
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

void padrone_module_list__free(struct padrone_module_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->count; i++) {
		free((char *)l->items[i].path);
		free((char *)l->items[i].build_id);
	}
	free(l->items);
	free(l);
}

/* Add the module mapped at m (its first executable mapping) to l, once. */
static int add_module(struct padrone_session *s, struct padrone_module_list *l,
		      const struct attach_maps *maps, const struct attach_map *m, size_t *cap)
{
	for (size_t i = 0; i < l->count; i++)
		if (strcmp(l->items[i].path, m->path) == 0)
			return 0;
	if (l->count == *cap) {
		size_t more = *cap ? *cap * 2 : 32;
		struct padrone_module *mods = realloc(l->items, more * sizeof(*mods));
		if (!mods)
			return -ENOMEM;
		l->items = mods;
		*cap = more;
	}
	struct prof_sym sym;
	prof_symbolizer__lookup(s->sym, m->start, &sym);	/* names the module either way */
	const struct attach_map *first = attach_maps__first_of(maps, m->path);
	struct padrone_module *mod = &l->items[l->count];
	mod->base = first ? first->start : m->start;
	mod->path = strdup(m->path);
	mod->build_id = strdup(sym.build_id ? sym.build_id : "");
	if (!mod->path || !mod->build_id) {
		free((char *)mod->path);
		free((char *)mod->build_id);
		return -ENOMEM;
	}
	l->count++;
	return 0;
}

int padrone_session__modules(struct padrone_session *s, struct padrone_module_list **out)
{
	struct padrone_module_list *l;
	struct attach_maps *maps;
	size_t cap = 0;
	int r;

	*out = NULL;
	if ((r = session__need_target(s)) < 0 || (r = session__need_symbolizer(s)) < 0)
		return r;
	pid_t pid = attach_target__pid(s->t);
	if ((r = attach_maps__read(pid, &maps)) < 0)
		return session__fail(s, PADRONE_SYSTEM, r, "cannot read the maps of process %d: %s", (int)pid,
			    strerror(-r));
	if (!(l = calloc(1, sizeof *l)))
		r = -ENOMEM;
	for (size_t i = 0; l && i < attach_maps__count(maps) && r == 0; i++) {
		const struct attach_map *m = attach_maps__at(maps, i);
		/* files, and the kernel's [vdso]; not anonymous or JIT memory */
		if ((m->prot & ATTACH_MAP_X) && (m->path[0] == '/' || !strcmp(m->path, "[vdso]")))
			r = add_module(s, l, maps, m, &cap);
	}
	attach_maps__free(maps);
	if (r < 0) {
		padrone_module_list__free(l);
		return session__fail(s, PADRONE_SYSTEM, r, "out of memory");
	}
	*out = l;
	session__ok(s);
	return 0;
}
