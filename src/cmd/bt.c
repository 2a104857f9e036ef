/* bt [TID]: a thread's call stack. */
#include <limits.h>

#include "src/cmd.h"
#include "src/report.h"

static int bt_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *arg = padrone_args_value(args, 0);
	const struct padrone_frame *f;
	unsigned long tid = 0;
	size_t n;
	char why[160];

	if (arg && padrone_parse_ulong("TID", arg, 1, INT_MAX, &tid, why, sizeof(why)) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	if (padrone_session__backtrace(ctx->ctl->session, (pid_t)tid, &f, &n) < 0)
		return padrone_cmd_session_error(ctx);
	for (size_t i = 0; i < n; i++) {
		char plain[512];
		fprintf(ctx->out, "#%-3zu 0x%016llx in %s", i, (unsigned long long)f[i].pc,
			*f[i].name ? padrone_demangle(f[i].name, plain, sizeof plain) : "??");
		if (*f[i].name && f[i].offset)
			fprintf(ctx->out, "+0x%llx", (unsigned long long)f[i].offset);
		fprintf(ctx->out, *f[i].module ? " (%s)\n" : "\n", f[i].module);
	}
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_bt_entry = {
	.name = "bt",
	.alias = "backtrace",
	.usage = "[TID]",
	.summary = "show a thread's call stack (default: the main thread)",
	.help = "Stops the process for the time of the walk (libunwind, .eh_frame).",
	.lower = 0,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_READ_ONLY,
	.exec = bt_exec,
};
