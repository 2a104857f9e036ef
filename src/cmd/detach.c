/* detach: let the process go (padroned, when it served it, exits). */
#include <stdio.h>

#include "src/client.h"
#include "src/cmd.h"

static int detach_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	struct padrone_ctl *ctl = ctx->ctl;

	if (ctl->remote_fd >= 0) {
		char *words[] = { (char *)ctx->entry->name, NULL };
		int st = padrone_client_forward(ctl, ctx->entry, 1, words, ctx->out, ctx->err);
		padrone_client_disconnect(ctl);
		return st;
	}
	pid_t pid = padrone_session__pid(ctl->session);
	if (!pid)
		return padrone_cmd_error(ctx, padrone_why_exit_status(PADRONE_NOT_ATTACHED),
					 "not attached to a process");
	if (ctl->daemon)
		ctl->quit = true;	/* padroned serves one process: it is done */
	if (padrone_session__detach(ctl->session) < 0)
		return padrone_cmd_session_error(ctx);
	fprintf(ctx->out, "detached from process %d\n", (int)pid);
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_detach_entry = {
	.name = "detach",
	.usage = "",
	.summary = "let the process run on untouched",
	.help = "Restores everything padrone changed and lets every thread go; a process\n"
		"stopped by job control stays stopped. Through padroned, padroned detaches\n"
		"and exits.",
	.lower = 0,
	.upper = 0,
	.flags = PADRONE_CMD_CLIENT,
	.exec = detach_exec,
};
