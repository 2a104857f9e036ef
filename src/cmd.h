/* cmd.h: padrone's interactive commands (private to src/).
 *
 * Commands are data, as in tmux: each src/cmd/NAME.c defines one
 * `const struct padrone_cmd_entry padrone_cmd_NAME_entry` and src/cmd.c lists
 * them all in one NULL-terminated table. A command's words are parsed once
 * by the shared parser (src/args.h) against the entry's option list and
 * positional bounds; a parse failure prints the entry's usage. Any unique
 * prefix of a name finds its command; an ambiguous one lists the matches.
 *
 * The same command runs in padroned (remote: padrone sends the words over
 * the control socket and prints the reply) or in padrone itself when no
 * padroned serves the process. Output goes to ctx->out, errors through
 * padrone_cmd_error() to ctx->err; the status a command returns becomes the
 * program's exit status.
 *
 * Adding a command: write src/cmd/NAME.c, add its entry to the table in
 * src/cmd.c and the file to src/Makemodule.am, and document its usage line
 * in man/padrone.1 (a test checks every usage is there).
 */
#ifndef PADRONE_SRC_CMD_H
#define PADRONE_SRC_CMD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "src/args.h"
#include "src/padrone.h"
#include "src/status.h"	/* PADRONE_EXIT_* */

/* Entry flags. */
enum {
	PADRONE_CMD_TARGET = 1u << 0,	/* needs an attached process */
	PADRONE_CMD_CLIENT = 1u << 1,	/* runs in the padrone client itself, never sent to padroned */
	/* -o FILE (option 'o') names a file for what the command prints: padrone
	 * (not padroned) creates it beside FILE, runs the command -- here or in
	 * padroned -- with its output there, and renames it into place if the
	 * command succeeds; "-" is standard output. The command itself just
	 * prints on ctx->out. */
	PADRONE_CMD_OUTFILE = 1u << 2,
	/* How padroned lets commands of several clients share the session
	 * (padrone_cmd_access). Without either flag a command may change the
	 * process and runs alone. */
	PADRONE_CMD_READ_ONLY = 1u << 3,	/* reads the process and the session, changes neither */
	PADRONE_CMD_PROFILES = 1u << 4,	/* samples or watches the process for a while
					 * (profile, instrument --hot or --for: reads
					 * run during its wait); with READ_ONLY: only
					 * when the session has no profile yet (hot) */
};

/* What a command does to the session, for padroned's scheduler (jobs.h). */
enum padrone_cmd_access {
	PADRONE_ACCESS_WRITE,	/* may change the process or the session: alone */
	PADRONE_ACCESS_READ,	/* only reads: also while a profile samples */
	PADRONE_ACCESS_SAMPLE,	/* a profile: one at a time; lets reads run while it samples */
};

/* The bounds of profile's SECONDS and HZ (padroned checks its options
 * against them before it attaches). Rates above 10 kHz are further refused
 * by profile/ without a PMU unless forced. */
#define PADRONE_PROFILE_MIN_SECONDS 0.01
#define PADRONE_PROFILE_MAX_SECONDS 86400.0
#define PADRONE_PROFILE_MAX_HZ 1000000ul
/* profile/'s PROF_MAX_SOFT_FREQ_HZ: above it, -f (--force) is needed
 * without a PMU. */
#define PADRONE_PROFILE_SOFT_MAX_HZ 10000ul

struct padrone_ctl;
struct padrone_cmd_ctx;

struct padrone_cmd_entry {
	const char *name;
	const char *alias;		/* another full name, or NULL */
	const char *usage;		/* after the name: "[-j] [N]" */
	const char *summary;		/* one line for help */
	const char *help;		/* more lines for help CMD, or NULL */
	const struct padrone_opt *opts;	/* terminated by {0}; NULL: none */
	int lower, upper;		/* positional arguments; upper < 0: no limit */
	unsigned flags;			/* PADRONE_CMD_* */
	int (*exec)(struct padrone_cmd_ctx *ctx, const struct padrone_args *args);
};

/* All commands, NULL-terminated, in the order help lists them. */
extern const struct padrone_cmd_entry *const padrone_cmd_table[];

/* What a command runs against. */
struct padrone_cmd_ctx {
	struct padrone_ctl *ctl;
	const struct padrone_cmd_entry *entry;
	FILE *out, *err;
};

/* The one error path: print "PROG: message" on ctx->err and return status
 * (which the command returns in turn). */
int padrone_cmd_error(struct padrone_cmd_ctx *ctx, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A failure of the session: its message and its per-cause exit status. */
int padrone_cmd_session_error(struct padrone_cmd_ctx *ctx);

/* Without a profile yet, sample for profile's default time first (hot,
 * instrument --hot), its progress shown on a terminal. An exit status. */
int padrone_cmd_profile_if_none(struct padrone_cmd_ctx *ctx);
/* Print the session's last report: as text (at most max functions, 0: all)
 * or as JSON. Shared by profile and hot. */
int padrone_cmd_print_report(struct padrone_cmd_ctx *ctx, bool json, size_t max);
/* Build the CFG of the function `what` names and print it in fmt. Shared
 * by cfg, loops and disas (src/cmd/cfg.c). */
int padrone_cmd_print_cfg(struct padrone_cmd_ctx *ctx, const char *what,
			  enum padrone_cfg_format fmt);
/* The max hottest functions of the last profile with their hottest loops,
 * as text or JSON (hot -l; src/cmd/loops.c). */
int padrone_cmd_print_hot_loops(struct padrone_cmd_ctx *ctx, bool json, size_t max);

/* Find a command by exact name, alias or unique prefix. NULL when none or
 * several match; *ambiguous tells which. */
const struct padrone_cmd_entry *padrone_cmd_find(const char *name, bool *ambiguous);
/* How the command words[0] (a name or prefix) uses the session now: its
 * flags, and for hot whether the session has a profile. An unknown or
 * ambiguous name only prints an error: READ. Call it only when no command
 * runs on ctl's session (padroned's scheduler does, between commands). */
enum padrone_cmd_access padrone_cmd_access(const struct padrone_ctl *ctl, const char *name);
/* "usage: profile [-f] ..." */
void padrone_cmd_print_usage(FILE *f, const struct padrone_cmd_entry *e);

/* What padrone and padroned do first, before any thread exists: block
 * SIGCHLD (attach/'s tracer thread inherits the mask and waits for it with
 * sigtimedwait(), see attach/attach.h) and ignore SIGPIPE (a client or
 * padroned that hangs up is an error to report, not a reason to die). */
void padrone_prepare_signals(void);

/* ------------------------------------------------------------------- ctl */

/* Where commands execute: a local session, or a connection to the padroned
 * that serves the process. */
struct padrone_ctl {
	const char *prog;		/* "padrone" or "padroned": prefixes errors */
	bool daemon;			/* this is padroned executing a client's command */
	struct padrone_session *session;	/* local; attached or not */
	int remote_fd;			/* connected padroned, or -1 */
	pid_t remote_pid;		/* the process that padroned serves */
	pid_t remote_server;		/* padroned itself */
	dev_t remote_exe_dev;		/* its program when connecting (an exec */
	ino_t remote_exe_ino;		/* tells from a change of it) */
	char remote_path[256];		/* its socket */
	bool quit;			/* end the session after this command */
	/* padrone_ctl_interrupt makes it readable: a command running in
	 * padroned is cancelled (padrone_client_forward sends CANCEL). */
	int cancel_fd;
	/* The session while a signal handler may use it (padrone_ctl_interrupt). */
	struct padrone_session *_Atomic live;
};

/* A ctl with an unattached session. 0 or -errno. */
int padrone_ctl_init(struct padrone_ctl *ctl, const char *prog, bool daemon);
/* Disconnect or detach, free the session (once no padrone_ctl_interrupt
 * is using it). */
void padrone_ctl_fini(struct padrone_ctl *ctl);
/* For signal handlers: end the running profile or measure
 * (padrone_session__interrupt) or, with leave, also every later one
 * (padrone_session_leave: the program is going away); a command running in
 * padroned is cancelled there. Async-signal-safe, from any thread, at any
 * time: does nothing on a zeroed ctl (a static one before padrone_ctl_init)
 * or after padrone_ctl_fini, and never touches a freed session. */
void padrone_ctl_interrupt(struct padrone_ctl *ctl, bool leave);
/* Did padrone_ctl_interrupt come since the last call? (It takes it.) */
bool padrone_ctl_take_interrupt(struct padrone_ctl *ctl);
/* The attached PID (local or remote), or 0. */
pid_t padrone_ctl_pid(const struct padrone_ctl *ctl);

/* Attach to pid: through its padroned if one serves it (and we are not
 * padroned), else locally. Errors on err; returns an exit status. */
int padrone_ctl_attach(struct padrone_ctl *ctl, pid_t pid, FILE *out, FILE *err);

/* Run one command given as words (words[0] its name or a prefix): send it
 * to padroned or execute it here. Returns its exit status. */
int padrone_ctl_run(struct padrone_ctl *ctl, int count, char *const words[], FILE *out, FILE *err);
/* Run a line of text: words split as a shell would (quotes, backslash),
 * several commands separated by ';', '#' starts a comment. Stops at the
 * first failing command and returns its status. */
int padrone_ctl_run_line(struct padrone_ctl *ctl, const char *line, FILE *out, FILE *err);

#endif
