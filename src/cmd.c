/* cmd.c: the command table, lookup, usage, the error path, and running a
 * command locally or through padroned. */
#include "src/cmd.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "src/client.h"
#include "src/protocol.h"
#include "src/export.h"
#include "src/session.h"

extern const struct padrone_cmd_entry padrone_cmd_attach_entry;
extern const struct padrone_cmd_entry padrone_cmd_detach_entry;
extern const struct padrone_cmd_entry padrone_cmd_info_entry;
extern const struct padrone_cmd_entry padrone_cmd_profile_entry;
extern const struct padrone_cmd_entry padrone_cmd_hot_entry;
extern const struct padrone_cmd_entry padrone_cmd_bt_entry;
extern const struct padrone_cmd_entry padrone_cmd_cfg_entry;
extern const struct padrone_cmd_entry padrone_cmd_loops_entry;
extern const struct padrone_cmd_entry padrone_cmd_disas_entry;
extern const struct padrone_cmd_entry padrone_cmd_help_entry;
extern const struct padrone_cmd_entry padrone_cmd_quit_entry;
extern const struct padrone_cmd_entry padrone_cmd_replace_entry;
extern const struct padrone_cmd_entry padrone_cmd_restore_entry;
extern const struct padrone_cmd_entry padrone_cmd_measure_entry;
extern const struct padrone_cmd_entry padrone_cmd_top_entry;
extern const struct padrone_cmd_entry padrone_cmd_instrument_entry;
extern const struct padrone_cmd_entry padrone_cmd_report_entry;
extern const struct padrone_cmd_entry padrone_cmd_uninstrument_entry;
extern const struct padrone_cmd_entry padrone_cmd_stats_entry;

const struct padrone_cmd_entry *const padrone_cmd_table[] = {
	&padrone_cmd_attach_entry,
	&padrone_cmd_info_entry,
	&padrone_cmd_profile_entry,
	&padrone_cmd_hot_entry,
	&padrone_cmd_top_entry,
	&padrone_cmd_bt_entry,
	&padrone_cmd_cfg_entry,
	&padrone_cmd_loops_entry,
	&padrone_cmd_disas_entry,
	&padrone_cmd_replace_entry,
	&padrone_cmd_restore_entry,
	&padrone_cmd_measure_entry,
	&padrone_cmd_instrument_entry,
	&padrone_cmd_report_entry,
	&padrone_cmd_stats_entry,
	&padrone_cmd_uninstrument_entry,
	&padrone_cmd_detach_entry,
	&padrone_cmd_help_entry,
	&padrone_cmd_quit_entry,
	NULL
};

const struct padrone_cmd_entry *padrone_cmd_find(const char *name, bool *ambiguous)
{
	const struct padrone_cmd_entry *found = NULL;
	size_t len = strlen(name);

	*ambiguous = false;
	if (!len)
		return NULL;
	for (const struct padrone_cmd_entry *const *e = padrone_cmd_table; *e; e++) {
		if (strcmp((*e)->name, name) == 0 || ((*e)->alias && strcmp((*e)->alias, name) == 0))
			return *e;
	}
	for (const struct padrone_cmd_entry *const *e = padrone_cmd_table; *e; e++) {
		if (strncmp((*e)->name, name, len) != 0)
			continue;
		if (found) {
			*ambiguous = true;
			return NULL;
		}
		found = *e;
	}
	return found;
}

enum padrone_cmd_access padrone_cmd_access(const struct padrone_ctl *ctl, const char *name)
{
	bool ambiguous;
	const struct padrone_cmd_entry *e = padrone_cmd_find(name, &ambiguous);

	if (!e)
		return PADRONE_ACCESS_READ;
	if ((e->flags & PADRONE_CMD_PROFILES) &&
	    (!(e->flags & PADRONE_CMD_READ_ONLY) || !padrone_session__report(ctl->session)))
		return PADRONE_ACCESS_SAMPLE;
	return e->flags & PADRONE_CMD_READ_ONLY ? PADRONE_ACCESS_READ : PADRONE_ACCESS_WRITE;
}

void padrone_cmd_print_usage(FILE *f, const struct padrone_cmd_entry *e)
{
	fprintf(f, "usage: %s%s%s\n", e->name, *e->usage ? " " : "", e->usage);
}

static void print_error(FILE *err, const char *prog, const char *fmt, va_list ap)
{
	fprintf(err, "%s: ", prog);
	vfprintf(err, fmt, ap);
	fputc('\n', err);
}

int padrone_cmd_error(struct padrone_cmd_ctx *ctx, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_error(ctx->err, ctx->ctl->prog, fmt, ap);
	va_end(ap);
	return status;
}

int padrone_cmd_session_error(struct padrone_cmd_ctx *ctx)
{
	struct padrone_session *s = ctx->ctl->session;
	const char *msg = padrone_session__errmsg(s);

	return padrone_cmd_error(ctx, padrone_session__exit_status(s), "%s",
				 *msg ? msg : "failed");
}

static int ctl_error(struct padrone_ctl *ctl, FILE *err, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int ctl_error(struct padrone_ctl *ctl, FILE *err, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	print_error(err, ctl->prog, fmt, ap);
	va_end(ap);
	return status;
}

void padrone_prepare_signals(void)
{
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* ------------------------------------------------------------------- ctl */

/* How many padrone_ctl_interrupt calls are under way, for every ctl: not a
 * field, which padrone_ctl_init would reset under a handler that runs. */
static atomic_int interrupts_running;

int padrone_ctl_init(struct padrone_ctl *ctl, const char *prog, bool daemon)
{
	/* A handler may already read a static ctl's live: zero stays zero. */
	memset(ctl, 0, sizeof(*ctl));
	ctl->prog = prog;
	ctl->daemon = daemon;
	ctl->remote_fd = -1;
	ctl->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ctl->cancel_fd < 0)
		return -errno;
	ctl->session = padrone_session__new(NULL);
	if (!ctl->session) {
		int e = errno;
		close(ctl->cancel_fd);
		ctl->cancel_fd = -1;
		return -e;
	}
	/* Last: a handler that sees it may use everything above. */
	atomic_store(&ctl->live, ctl->session);
	return 0;
}

void padrone_ctl_fini(struct padrone_ctl *ctl)
{
	padrone_client_disconnect(ctl);
	/* Hide the session from handlers, then wait for any that took it
	 * before: one may run on another thread (the sampler's reader, say).
	 * A handler interrupting this thread finishes before it goes on. */
	atomic_store(&ctl->live, NULL);
	while (atomic_load(&interrupts_running))
		sched_yield();
	padrone_session__free(ctl->session);
	ctl->session = NULL;
	if (ctl->cancel_fd >= 0)
		close(ctl->cancel_fd);
	ctl->cancel_fd = -1;
}

void padrone_ctl_interrupt(struct padrone_ctl *ctl, bool leave)
{
	/* Counted before the pointer is read: fini's store and then its load
	 * of the count cannot both miss this (sequentially consistent). */
	atomic_fetch_add(&interrupts_running, 1);
	struct padrone_session *s = atomic_load(&ctl->live);
	if (s && leave)
		padrone_session_leave(s);
	else if (s)
		padrone_session__interrupt(s);
	if (s) {
		uint64_t one = 1;
		if (write(ctl->cancel_fd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow: nothing to report */
		}
	}
	atomic_fetch_sub(&interrupts_running, 1);
}

bool padrone_ctl_take_interrupt(struct padrone_ctl *ctl)
{
	uint64_t v;

	return read(ctl->cancel_fd, &v, sizeof(v)) == sizeof(v);	/* an eventfd: all at once */
}

pid_t padrone_ctl_pid(const struct padrone_ctl *ctl)
{
	if (ctl->remote_fd >= 0)
		return ctl->remote_pid;
	return ctl->session ? padrone_session__pid(ctl->session) : 0;
}

int padrone_ctl_attach(struct padrone_ctl *ctl, pid_t pid, FILE *out, FILE *err)
{
	pid_t cur = padrone_ctl_pid(ctl);

	if (cur)
		return ctl_error(ctl, err, PADRONE_EXIT_FAILURE,
				 "already attached to process %d: detach first", (int)cur);
	if (!ctl->daemon) {
		int st = padrone_client_connect(ctl, pid, err);
		if (st != -ENOENT)
			return st;	/* connected (0), or padroned is there but failed us */
	}
	if (padrone_session__attach(ctl->session, pid) < 0) {
		const char *msg = padrone_session__errmsg(ctl->session);
		int st = padrone_session__exit_status(ctl->session);
		char path[256], dirs[600];
		pid_t server;
		if (st == padrone_why_exit_status(PADRONE_ALREADY_TRACED) && !ctl->daemon &&
		    padrone_client_unfound_server(pid, &server, path, sizeof path) == 0)
			return ctl_error(ctl, err, st, "%s; that padroned serves it from the "
					 "run directory %s, and this padrone looks in %s: run it "
					 "with PADRONE_RUNDIR=%s", msg, path,
					 padrone_rundir_looked(dirs, sizeof dirs), path);
		return ctl_error(ctl, err, st, "%s", msg);
	}
	return PADRONE_EXIT_OK;
}

static int exec_local(struct padrone_ctl *ctl, const struct padrone_cmd_entry *e, int count,
		      char *const words[], FILE *out, FILE *err)
{
	struct padrone_cmd_ctx ctx = { .ctl = ctl, .entry = e, .out = out, .err = err };
	struct padrone_args *args;
	char why[256];
	int r = padrone_args_parse(e->opts, e->lower, e->upper, count - 1, words + 1, &args,
				   why, sizeof(why));

	if (r == -ENOMEM)
		return ctl_error(ctl, err, PADRONE_EXIT_FAILURE, "out of memory");
	if (r < 0) {
		ctl_error(ctl, err, PADRONE_EXIT_USAGE, "%s: %s", e->name, why);
		padrone_cmd_print_usage(err, e);
		return PADRONE_EXIT_USAGE;
	}
	if ((e->flags & PADRONE_CMD_TARGET) && !padrone_session__attached(ctl->session))
		r = padrone_cmd_error(&ctx, padrone_why_exit_status(PADRONE_NOT_ATTACHED),
				      "not attached to a process: use 'attach PID' first");
	else
		r = e->exec(&ctx, args);
	padrone_args_free(args);
	return r;
}

/* Run the command here or in padroned. */
static int run_entry(struct padrone_ctl *ctl, const struct padrone_cmd_entry *e, int count,
		     char *const words[], FILE *out, FILE *err)
{
	if (ctl->remote_fd >= 0 && !(e->flags & PADRONE_CMD_CLIENT))
		return padrone_client_forward(ctl, e, count, words, out, err);
	return exec_local(ctl, e, count, words, out, err);
}

/* A PADRONE_CMD_OUTFILE command's -o FILE, or NULL (none, "-", or words
 * that do not parse: the command will say why). */
static char *outfile_of(const struct padrone_cmd_entry *e, int count, char *const words[])
{
	struct padrone_args *args;
	char why[256];
	char *file = NULL;

	if (padrone_args_parse(e->opts, e->lower, e->upper, count - 1, words + 1, &args, why,
			       sizeof(why)) < 0)
		return NULL;
	const char *o = padrone_args_get(args, 'o');
	if (o && strcmp(o, "-") != 0)
		file = strdup(o);
	padrone_args_free(args);
	return file;
}

struct outfile_run {
	struct padrone_ctl *ctl;
	const struct padrone_cmd_entry *e;
	int count;
	char *const *words;
	FILE *err;
	int status;
};

/* A status after which the command's output is still complete: a profile
 * whose process exited or exec'd wrote what it sampled until then. */
static bool output_kept(int status, FILE *f)
{
	return (status == padrone_why_exit_status(PADRONE_TARGET_EXITED) ||
		status == padrone_why_exit_status(PADRONE_TARGET_EXECED)) && ftell(f) > 0;
}

static int run_into_file(FILE *f, void *arg, char *why, size_t len)
{
	struct outfile_run *x = arg;

	x->status = run_entry(x->ctl, x->e, x->count, x->words, f, x->err);
	if (x->status && !output_kept(x->status, f)) {
		snprintf(why, len, "the command failed");
		return -ECANCELED;
	}
	return 0;
}

/* The command with its output in -o's file, renamed into place only if it
 * succeeds (or wrote a profile cut short by its process's end). */
static int run_outfile(struct padrone_ctl *ctl, const struct padrone_cmd_entry *e, int count,
		       char *const words[], const char *file, FILE *err)
{
	struct outfile_run x = { ctl, e, count, words, err, PADRONE_EXIT_FAILURE };
	char why[512];
	int r = padrone_export_atomic(file, run_into_file, &x, why, sizeof(why));

	if (r == -ECANCELED)
		return x.status;
	if (r < 0)
		return ctl_error(ctl, err, PADRONE_EXIT_FAILURE, "%s", why);
	if (isatty(fileno(err)))
		fprintf(err, "%s: wrote %s\n", ctl->prog, file);
	return x.status;
}

int padrone_ctl_run(struct padrone_ctl *ctl, int count, char *const words[], FILE *out, FILE *err)
{
	bool ambiguous;
	const struct padrone_cmd_entry *e;

	if (count < 1)
		return PADRONE_EXIT_OK;
	e = padrone_cmd_find(words[0], &ambiguous);
	if (!e && ambiguous) {
		ctl_error(ctl, err, PADRONE_EXIT_USAGE, "ambiguous command: %s, could be:", words[0]);
		for (const struct padrone_cmd_entry *const *p = padrone_cmd_table; *p; p++)
			if (strncmp((*p)->name, words[0], strlen(words[0])) == 0)
				fprintf(err, "  %s\n", (*p)->name);
		return PADRONE_EXIT_USAGE;
	}
	if (!e)
		return ctl_error(ctl, err, PADRONE_EXIT_USAGE,
				 "unknown command: %s (try 'help')", words[0]);
	/* padroned prints; the file is the client's, in the client's cwd */
	char *file = (e->flags & PADRONE_CMD_OUTFILE) && !ctl->daemon ?
			     outfile_of(e, count, words) : NULL;
	int status = file ? run_outfile(ctl, e, count, words, file, err) :
			    run_entry(ctl, e, count, words, out, err);
	free(file);
	return status;
}

int padrone_ctl_run_line(struct padrone_ctl *ctl, const char *line, FILE *out, FILE *err)
{
	char **words;
	char why[128];
	int n = padrone_split_line(line, &words, why, sizeof(why));
	int status = PADRONE_EXIT_OK;

	if (n == -ENOMEM)
		return ctl_error(ctl, err, PADRONE_EXIT_FAILURE, "out of memory");
	if (n < 0)
		return ctl_error(ctl, err, PADRONE_EXIT_USAGE, "%s", why);
	for (int i = 0; i < n && status == PADRONE_EXIT_OK && !ctl->quit;) {
		int j = i;
		while (j < n && strcmp(words[j], ";") != 0)
			j++;
		status = padrone_ctl_run(ctl, j - i, words + i, out, err);
		i = j + 1;
	}
	padrone_free_words(words);
	return status;
}
