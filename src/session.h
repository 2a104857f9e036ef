/* session.h: what src/'s commands reach inside a session (private to
 * libpadrone; hidden from libpadrone.so).
 *
 * The session's parts (session-cfg.c, session-cc.c, instr.c) and the
 * commands in src/cmd/ work on the attached process through their own
 * room's API: they get the attach_target, the symbolizer and the modules
 * here. A part that keeps state for the attachment (session-cc.c's branch
 * index, instr.c's instrumentation) stores it as a named extension, which
 * the session releases at detach -- newest first, while the process is
 * still attached, so what a part changed in it is restored before it is let
 * go.
 */
#ifndef PADRONE_SRC_SESSION_H
#define PADRONE_SRC_SESSION_H

#include "src/padrone.h"
#include "src/report.h"

struct attach_target;
struct elf_modules;
struct prof_symbolizer;

/* The attached process, or NULL. */
PADRONE_HIDDEN struct attach_target *padrone_session_target(const struct padrone_session *s);
/* The process's symbolizer, made on first use and refreshed (new mappings)
 * on each call. 0 or -errno with the session's error set. */
PADRONE_HIDDEN int padrone_session_symbolizer(struct padrone_session *s,
					      struct prof_symbolizer **out);
/* The process's modules as the name resolver reads them (elf/), one set
 * per session, read again when its executable mappings have changed;
 * valid until the next call or detach. 0 or -errno with the session's
 * error set. */
PADRONE_HIDDEN int padrone_session_modules(struct padrone_session *s, struct elf_modules **out);
/* While pinned (calls nest), the modules are not read again: a borrower
 * (the session's code-cache part) keeps them valid across its calls. */
PADRONE_HIDDEN void padrone_session_pin_modules(struct padrone_session *s, bool pin);
/* The address in a "sub_<hex>" name, which reports give code that has no
 * symbol (after its runtime address). 0, or -ENOENT for any other name. */
PADRONE_HIDDEN int padrone_sub_name_addr(const char *name, uint64_t *addr);
/* A function a user named, resolved as every command resolves it: NAME or
 * MODULE:NAME through elf/'s resolver (a name with several definitions is
 * refused, listing them, as PADRONE_BAD_REQUEST), a "sub_<hex>" name, or a
 * line of the process's perf map (JIT code). size is 0 when unknown.
 * -ENOENT, with the session's error untouched, when nothing has the name. */
struct padrone_named {
	uint64_t addr, size;
	bool ifunc;		/* an IFUNC: its resolver, not an implementation */
	char module[256];	/* the defining file; "" for sub_ and perf map names */
};
PADRONE_HIDDEN int padrone_session_resolve(struct padrone_session *s, const char *name,
					   struct padrone_named *out);
/* The function a user named to a command that changes its code (replace,
 * restore, measure, instrument): "0xADDR", or a name as
 * padrone_session_resolve takes it; an address without a symbol's extent
 * (0x, sub_, perf map) must be a function's entry. f->name is name; f->size
 * is 0 when unknown. 0, or -errno with the session's error set. */
struct cc_func;
PADRONE_HIDDEN int padrone_session_find_function(struct padrone_session *s, const char *name,
						 struct cc_func *f);
/* The same for a command that patches it (replace, measure, instrument,
 * padrone_cc_redirect): a PLT stub is refused (PADRONE_BAD_REQUEST), with
 * where its GOT slot leads. restore takes one (a patch may predate this). */
PADRONE_HIDDEN int padrone_session_find_patchable(struct padrone_session *s, const char *name,
						  struct cc_func *f);
/* Record a failure on the session (for padrone_session__errmsg and the
 * exit status). Returns err (or -EINVAL if err is not negative). */
PADRONE_HIDDEN int padrone_session_fail(struct padrone_session *s, enum padrone_why why, int err,
					const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The session's failure when its process has exited or exec'd (the words
 * and status padrone gives those everywhere), or 0 while it lives. */
PADRONE_HIDDEN int padrone_session_fail_if_gone(struct padrone_session *s);
/* The same after an operation that changes the process failed: whether it
 * failed because the process exited or exec'd in its middle (a stop of the
 * world tells), so that it says so and not what broke on the way. */
PADRONE_HIDDEN int padrone_session_fail_if_left(struct padrone_session *s);

/* For a program that is leaving (SIGTERM): the running profile ends now,
 * and so does every later one of this session, at once (with the samples
 * it has). Async-signal-safe, from any thread; s NULL does nothing. Unlike
 * padrone_session__interrupt, not lost when it comes just before a profile
 * begins. */
PADRONE_HIDDEN void padrone_session_leave(struct padrone_session *s);

/* Waits a command can cut short: a profile's sampling and measure's wait
 * for calls. padrone_session__interrupt (and _leave) end the one under
 * way. A wait other than the profile's (which has its own) goes:
 *   padrone_session_wait_begin(s);
 *   while (!done && !padrone_session_wait_interrupted(s, slice_ms)) ...;
 *   padrone_session_wait_end(s);
 * wait_interrupted sleeps up to ms and tells whether the wait was
 * interrupted or the process has gone. */
PADRONE_HIDDEN void padrone_session_wait_begin(struct padrone_session *s);
PADRONE_HIDDEN bool padrone_session_wait_interrupted(struct padrone_session *s, int ms);
PADRONE_HIDDEN void padrone_session_wait_end(struct padrone_session *s);

/* Called, when set, as each wait above begins (begin true) and ends, on
 * the thread that waits. padroned's scheduler lets another thread use the
 * session from the begin of a profile's wait to its end, for commands that
 * only read it (padrone_cmd_access): the profile touches nothing of the
 * session meanwhile. fn NULL: none. */
typedef void (*padrone_wait_hook_fn)(struct padrone_session *s, bool begin, void *arg);
PADRONE_HIDDEN void padrone_session_set_wait_hook(struct padrone_session *s, padrone_wait_hook_fn fn,
						  void *arg);

/* The last profile's ranking with its symbolized chains (what the pprof
 * and folded exports write, what cfg counts on blocks and replace -C takes
 * callers from), or NULL; valid until the next profile or detach. */
struct prof_hot;
PADRONE_HIDDEN const struct prof_hot *padrone_session_hot(const struct padrone_session *s);

/* Releases an extension: restore what it changed in the process (still
 * attached), free it. A failure is reported by detach, which goes on. */
typedef int (*padrone_ext_release_fn)(struct padrone_session *s, void *data);

/* The extension stored under name, or NULL. */
PADRONE_HIDDEN void *padrone_session_ext(const struct padrone_session *s, const char *name);
/* Store data under name (replacing, and releasing, an earlier one). 0 or
 * -ENOMEM (data is then not kept: the caller still owns it). Needs an
 * attached process: extensions belong to one attachment. */
PADRONE_HIDDEN int padrone_session_set_ext(struct padrone_session *s, const char *name, void *data,
					   padrone_ext_release_fn release);

/* Instrumentation's state (src/instr.c), read by the clone event on the
 * tracer thread: a new thread must get its own gs_base before it runs. */
PADRONE_HIDDEN void padrone_session_set_instr(struct padrone_session *s, void *data);
PADRONE_HIDDEN void padrone_instr_thread_new(void *data, pid_t tid);
PADRONE_HIDDEN void padrone_instr_thread_exit(void *data, pid_t tid);
PADRONE_HIDDEN void padrone_instr_fork(void *data, pid_t tid);

/* Names the frames of a backtrace that are code of the code cache
 * (symbolized as anonymous memory): "replacement of mid" and its offset,
 * module "[code cache]", the names kept in names[i]. Best effort: a cache
 * that cannot be read leaves the frames as they were. */
#define PADRONE_CC_NAME 112
struct prof_frame;
PADRONE_HIDDEN void padrone_cc_name_frames(struct padrone_session *s, const struct prof_frame *raw,
					   struct padrone_frame *frames, size_t n,
					   char (*names)[PADRONE_CC_NAME]);

#endif
