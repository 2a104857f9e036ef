/* attach PID: seize a process, or connect to the padroned that serves it. */
#include <limits.h>
#include <stdio.h>

#include "src/cmd.h"

static int attach_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	struct padrone_ctl *ctl = ctx->ctl;
	unsigned long pid;
	char why[160];
	int st;

	if (padrone_parse_ulong("PID", padrone_args_value(args, 0), 1, INT_MAX, &pid, why,
				sizeof(why)) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	st = padrone_ctl_attach(ctl, (pid_t)pid, ctx->out, ctx->err);
	if (st != PADRONE_EXIT_OK)
		return st;
	if (ctl->remote_fd >= 0) {
		fprintf(ctx->out, "attached to process %lu through padroned (%s)\n", pid,
			ctl->remote_path);
		return PADRONE_EXIT_OK;
	}
	int n = padrone_session__thread_count(ctl->session);
	fprintf(ctx->out, "attached to process %lu, %d thread%s\n", pid, n, n == 1 ? "" : "s");
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_attach_entry = {
	.name = "attach",
	.usage = "PID",
	.summary = "attach to a running process",
	.help = "Seizes every thread of process PID; it keeps running. If a padroned\n"
		"serves PID, padrone talks to it instead and commands run there.",
	.lower = 1,
	.upper = 1,
	.flags = PADRONE_CMD_CLIENT,
	.exec = attach_exec,
};
