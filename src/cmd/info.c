/* info threads: the attached process's threads. */
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

static int info_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *what = padrone_args_value(args, 0);

	/* Subjects match by prefix too, like commands. */
	if (strncmp("threads", what, strlen(what)) == 0)
		return info_threads(ctx);
	padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "info: unknown subject: %s", what);
	padrone_cmd_print_usage(ctx->err, ctx->entry);
	return PADRONE_EXIT_USAGE;
}

const struct padrone_cmd_entry padrone_cmd_info_entry = {
	.name = "info",
	.usage = "threads",
	.summary = "list the threads: tid, name, state, CPU time, where each is",
	.help = "Stops the process for a moment to read every thread's program counter.",
	.lower = 1,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET,
	.exec = info_exec,
};
