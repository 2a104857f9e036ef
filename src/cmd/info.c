/* info threads|replacements: the attached process's threads, or the
 * functions replaced or measured in it. */
#include <stdlib.h>
#include <string.h>

#include "src/cmd.h"
#include "src/report.h"

static int info_threads(struct padrone_cmd_ctx *ctx)
{
	struct padrone_session *s = ctx->ctl->session;
	struct padrone_thread *t = NULL;
	int n, cap = 0;

	/* Threads come and go: ask again until the buffer held them all. */
	for (;;) {
		n = padrone_session__threads(s, t, (size_t)cap);
		if (n < 0 || n <= cap)
			break;
		cap = n + 16;
		free(t);
		t = calloc((size_t)cap, sizeof(*t));
		if (!t)
			return padrone_cmd_error(ctx, PADRONE_EXIT_FAILURE, "out of memory");
	}
	if (n < 0) {
		free(t);
		return padrone_cmd_session_error(ctx);
	}
	fprintf(ctx->out, "%-8s %-16s %-5s %9s %9s  %-18s  %s\n", "TID", "NAME", "STATE",
		"USER ms", "SYS ms", "PC", "FUNCTION");
	for (int i = 0; i < n; i++) {
		char plain[512];
		fprintf(ctx->out, "%-8d %-16s %-5c %9llu %9llu  0x%016llx  %s\n", (int)t[i].tid,
			t[i].name, t[i].state ? t[i].state : '?',
			(unsigned long long)t[i].user_ms, (unsigned long long)t[i].system_ms,
			(unsigned long long)t[i].pc,
			t[i].function[0] ? padrone_demangle(t[i].function, plain, sizeof plain) : "??");
	}
	free(t);
	return PADRONE_EXIT_OK;
}

/* What the code cache's directory records, whichever session made it. */
static int info_replacements(struct padrone_cmd_ctx *ctx)
{
	struct padrone_session *s = ctx->ctl->session;
	struct padrone_replacement *r = NULL;
	int n, cap = 0;

	for (;;) {
		n = padrone_session__replacements(s, r, (size_t)cap);
		if (n < 0 || n <= cap)
			break;
		cap = n;
		free(r);
		r = calloc((size_t)cap, sizeof(*r));
		if (!r)
			return padrone_cmd_error(ctx, PADRONE_EXIT_FAILURE, "out of memory");
	}
	if (n < 0) {
		free(r);
		return padrone_cmd_session_error(ctx);
	}
	if (n == 0)
		fprintf(ctx->out, "no function is replaced or measured\n");
	else
		fprintf(ctx->out, "%-24s %-9s %-18s  %5s %10s  %s\n", "FUNCTION", "KIND", "ENTRY",
			"SITES", "STOP us", "SOURCE");
	for (int i = 0; i < n; i++) {
		char source[256];
		if (r[i].measuring)
			snprintf(source, sizeof(source), "%s (padrone process %d%s)", r[i].source,
				 (int)r[i].owner, r[i].stale ? ", gone: restore takes it out" : "");
		else
			snprintf(source, sizeof(source), "%s", r[i].source);
		fprintf(ctx->out, "%-24s %-9s 0x%016llx  %5u %10.1f  %s\n", r[i].name,
			r[i].measuring ? "measuring" : "replaced", (unsigned long long)r[i].function,
			r[i].sites, (double)r[i].stop_ns / 1000.0, source);
	}
	free(r);
	return PADRONE_EXIT_OK;
}

static int info_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *what = padrone_args_value(args, 0);

	/* Subjects match by prefix too, like commands. */
	if (strncmp("threads", what, strlen(what)) == 0)
		return info_threads(ctx);
	if (strncmp("replacements", what, strlen(what)) == 0)
		return info_replacements(ctx);
	padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "info: unknown subject: %s", what);
	padrone_cmd_print_usage(ctx->err, ctx->entry);
	return PADRONE_EXIT_USAGE;
}

const struct padrone_cmd_entry padrone_cmd_info_entry = {
	.name = "info",
	.usage = "threads|replacements",
	.summary = "list the threads, or the functions replaced or measured",
	.help = "threads: each thread's tid, name, state, CPU time and where it is (the\n"
		"process is stopped for a moment to read the program counters).\n"
		"replacements: each function replaced or being measured, by any session:\n"
		"its name, entry, the places written (its entry, call sites), the\n"
		"stop-the-world time of its patch and what replaced it; a measuring stub\n"
		"whose padrone is gone is marked, restore takes it out.",
	.lower = 1,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET,
	.exec = info_exec,
};
