/* session.c: libpadrone's session: its lifetime, attaching and detaching,
 * failures, and what src/'s commands reach inside it (session.h). Profiles
 * are in session-profile.c; threads, backtraces and modules in
 * session-process.c. */
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

/* --------------------------------------------------------------- failures */

static int vfail(struct padrone_session *s, enum padrone_why why, int err, const char *fmt,
		 va_list ap)
{
	vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
	if (!s->errmsg[0])	/* a room that gave no reason: at least the errno's */
		snprintf(s->errmsg, sizeof(s->errmsg), "%s", strerror(err < 0 ? -err : EINVAL));
	s->why = why;
	return err < 0 ? err : -EINVAL;
}

int session__fail(struct padrone_session *s, enum padrone_why why, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = vfail(s, why, err, fmt, ap);
	va_end(ap);
	return err;
}

void session__ok(struct padrone_session *s)
{
	s->why = PADRONE_OK;
	s->errmsg[0] = '\0';
}

/* A failed operation on the attached target: attach/ says why (a thread
 * that did not stop in time, a thread in D state among them, is a timeout,
 * not a system error). */
int session__fail_target(struct padrone_session *s, int err, const char *what)
{
	enum attach_why why = attach_target__why(s->t);
	const char *msg = attach_target__errmsg(s->t);

	if (why == ATTACH_OK)	/* no message of attach/'s: the process's state */
		why = attach_target__state(s->t);
	if (why == ATTACH_OK)
		why = err == -ETIMEDOUT ? ATTACH_TIMEOUT : ATTACH_SYSTEM;
	return session__fail(s, padrone_why_from_attach(why), err, "%s: %s", what, *msg ? msg : strerror(-err));
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
	/* Only the fields the caller's (maybe older) struct has. */
	if (!UTIL_OPTS_COPY(&s->opts, opts)) {
		free(s);
		errno = EINVAL;
		return NULL;
	}
	s->opts.sz = sizeof(s->opts);
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
		return session__fail(s, PADRONE_BAD_REQUEST, -EBUSY, "already attached to process %d",
			    (int)attach_target__pid(s->t));
	s->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->event_fd < 0)
		return session__fail(s, PADRONE_SYSTEM, -errno, "eventfd: %s", strerror(errno));
	r = attach_seize(pid, &ao, &s->t, &err);
	if (r < 0) {
		close(s->event_fd);
		s->event_fd = -1;
		s->t = NULL;
		return session__fail(s, padrone_why_from_attach(err.why), r, "%s", err.msg);
	}
	attach_target__on_event(s->t, on_event, s);
	/* It may have died between the seize and the callback. */
	if (attach_target__state(s->t) != ATTACH_OK) {
		uint64_t one = 1;
		if (write(s->event_fd, &one, sizeof(one)) < 0) {
			/* cannot fail on a fresh eventfd */
		}
	}
	session__ok(s);
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
		return session__fail(s, PADRONE_NOT_ATTACHED, -ENOENT, "not attached to a process");
	/* Rooms first, newest first, while the process is still ours. */
	char ext_err[sizeof(s->errmsg)] = "";
	int ext_r = release_exts(s, ext_err, sizeof(ext_err));
	padrone_report_free(s->report);
	s->report = NULL;
	prof_symbolizer__free(s->sym);
	s->sym = NULL;
	elf_modules__free(s->names);
	s->names = NULL;
	pid_t pid = attach_target__pid(s->t);
	r = attach_target__detach(s->t);
	s->t = NULL;
	close(s->event_fd);
	s->event_fd = -1;
	if (r < 0)
		return session__fail(s, PADRONE_SYSTEM, r, "detaching from process %d: %s", (int)pid,
			    strerror(-r));
	if (ext_r < 0)
		return session__fail(s, PADRONE_SYSTEM, ext_r, "%s", ext_err);
	session__ok(s);
	return 0;
}

bool padrone_session__attached(const struct padrone_session *s) { return s->t != NULL; }
pid_t padrone_session__pid(const struct padrone_session *s)
{
	return s->t ? attach_target__pid(s->t) : 0;
}

enum padrone_why padrone_session__target_state(const struct padrone_session *s)
{
	return s->t ? padrone_why_from_attach(attach_target__state(s->t)) : PADRONE_NOT_ATTACHED;
}

int padrone_session__event_fd(const struct padrone_session *s) { return s->t ? s->event_fd : -1; }

/* Only atomics and write(2) on an eventfd: async-signal-safe. */
void session__wake_profile(struct padrone_session *s)
{
	uint64_t one = 1;

	if (write(s->interrupt_fd, &one, sizeof(one)) < 0) {
		/* async-signal context: nothing to report to */
	}
}

void padrone_session__interrupt(struct padrone_session *s)
{
	if (s && atomic_load(&s->profiling))
		session__wake_profile(s);
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

int session__need_target(struct padrone_session *s)
{
	if (!s->t)
		return session__fail(s, PADRONE_NOT_ATTACHED, -ENOENT, "not attached to a process");
	enum attach_why st = attach_target__state(s->t);
	if (st == ATTACH_TARGET_EXITED)
		return session__fail(s, PADRONE_TARGET_EXITED, -ESRCH, "process %d has exited",
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
			return session__fail(s, PADRONE_TARGET_EXECED, -ECHILD,
				    "process %d has exec'd another program (now %s)", (int)pid, comm);
		return session__fail(s, PADRONE_TARGET_EXECED, -ECHILD,
			    "process %d has exec'd another program", (int)pid);
	}
	return 0;
}

int padrone_session_fail_if_gone(struct padrone_session *s)
{
	return s->t ? session__need_target(s) : 0;
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

int session__need_symbolizer(struct padrone_session *s)
{
	struct prof_error err = { 0 };
	int r;

	if (s->sym)
		return prof_symbolizer__refresh(s->sym) < 0 ?
			session__fail(s, PADRONE_SYSTEM, -EIO, "%s", prof_symbolizer__errmsg(s->sym)) : 0;
	r = prof_symbolizer__new(attach_target__pid(s->t), &s->sym, &err);
	if (r < 0) {
		s->sym = NULL;
		return session__fail(s, PADRONE_SYSTEM, r, "%s", err.msg);
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
	if ((r = session__need_target(s)) < 0)
		return r;
	if (s->names && !s->names_pinned && !elf_modules__current(s->names)) {
		elf_modules__free(s->names);
		s->names = NULL;
	}
	if (!s->names &&
	    (r = elf_modules__open(attach_target__pid(s->t), &s->names, why, sizeof why)) < 0)
		return session__fail(s, PADRONE_SYSTEM, r, "%s", why);
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
	if ((r = session__need_target(s)) < 0 || (r = session__need_symbolizer(s)) < 0)
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

	if ((r = session__need_target(s)) < 0)
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
		return session__fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	}
	s->exts = more;
	s->exts[s->nexts++] = (struct ext){ .name = copy, .data = data, .release = release };
	return 0;
}
