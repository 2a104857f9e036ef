/* quit: leave padrone (detaching first if padrone itself is attached). */
#include <stdio.h>

#include "src/client.h"
#include "src/cmd.h"

static int quit_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	struct padrone_ctl *ctl = ctx->ctl;
	pid_t pid = padrone_session__pid(ctl->session);

	ctl->quit = true;
	if (ctl->remote_fd >= 0)
		fprintf(ctx->out, "left padroned serving process %d (it keeps serving)\n",
			(int)ctl->remote_pid);
	padrone_client_disconnect(ctl);	/* padroned keeps serving */
	if (pid && padrone_session__detach(ctl->session) < 0)
		return padrone_cmd_session_error(ctx);
	if (pid)
		fprintf(ctx->out, "detached from process %d\n", (int)pid);
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_quit_entry = {
	.name = "quit",
	.alias = "exit",
	.usage = "",
	.summary = "leave padrone",
	.help = "Detaches first if padrone itself is attached. A padroned padrone was\n"
		"talking to keeps serving. Says which. ^D at an empty prompt does the same.\n"
		"Sent to padroned, it detaches and exits.",
	.lower = 0,
	.upper = 0,
	.flags = PADRONE_CMD_CLIENT,
	.exec = quit_exec,
};
