/* session-state.h: the session's state, shared by the files that make it
 * up (private to them): session.c (lifetime, attach and detach, failures,
 * what src/'s commands reach), session-profile.c (profiles and their
 * reports), session-process.c (threads, backtraces and modules). */
#ifndef PADRONE_SRC_SESSION_STATE_H
#define PADRONE_SRC_SESSION_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile.h"
#include "src/padrone.h"
#include "src/session.h"
#include "util/util.h"

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
	struct padrone_report *report;	/* the last profile's, with its ranking */
	int event_fd;			/* the target exited or exec'd */
	int interrupt_fd;		/* padrone_session__interrupt */
	/* Signal handlers and other threads read these: atomics (lock-free on
	 * x86-64, so async-signal-safe), not volatile sig_atomic_t. */
	atomic_bool profiling;		/* in a profile's or another wait (session.h) */
	atomic_bool leaving;		/* padrone_session_leave: end every profile */
	padrone_wait_hook_fn wait_hook;	/* padrone_session_set_wait_hook */
	void *wait_hook_arg;
	struct prof_frame raw[MAX_FRAMES];	/* a backtrace's walk */
	char cc_names[MAX_FRAMES][PADRONE_CC_NAME];	/* code-cache frames' names */
	enum padrone_why why;
	char errmsg[512];
	void *_Atomic instr;		/* padrone_session_set_instr */
};

/* Record a failure (message, reason) on the session; returns err, or
 * -EINVAL if err is not negative. */
int session__fail(struct padrone_session *s, enum padrone_why why, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The last call succeeded: no reason, no message. */
void session__ok(struct padrone_session *s);
/* A failed operation on the attached target, as attach/ says why. */
int session__fail_target(struct padrone_session *s, int err, const char *what);
/* 0 while attached to a live process, else the failure (not attached,
 * exited, exec'd). */
int session__need_target(struct padrone_session *s);
/* The process's symbolizer, made on first use, refreshed on each call. */
int session__need_symbolizer(struct padrone_session *s);
/* Wakes a profile's wait (async-signal-safe). */
void session__wake_profile(struct padrone_session *s);
/* session-process.c: the process's threads (malloc'd in *tids; count or
 * -errno); a /proc stat file's name, state and CPU times. */
int session__list_tids(struct padrone_session *s, pid_t **tids);
int session__read_stat_file(const char *path, struct padrone_thread *th);

/* A list's own copy of *str, which was borrowed (padrone.h's Lists: the
 * caller owns every string of a list); false when out of memory, *str then
 * NULL, which the list's __free takes. */
static inline bool session__own_string(const char **str)
{
	*str = strdup(*str);
	return *str != NULL;
}

#endif
