/* help [COMMAND]: list the commands, or describe one. */
#include <stdio.h>

#include "src/cmd.h"

static int help_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *name = padrone_args_value(args, 0);
	const struct padrone_cmd_entry *e;
	bool ambiguous;

	if (!name) {
		for (const struct padrone_cmd_entry *const *p = padrone_cmd_table; *p; p++)
			fprintf(ctx->out, "  %-10s %s\n", (*p)->name, (*p)->summary);
		fprintf(ctx->out, "Type 'help COMMAND' for its usage; any unique prefix of a "
			"command's name works.\n"
			"At the prompt ^C clears the line or interrupts the running command; "
			"^D leaves.\n");
		return PADRONE_EXIT_OK;
	}
	e = padrone_cmd_find(name, &ambiguous);
	if (!e)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s command: %s",
					 ambiguous ? "ambiguous" : "unknown", name);
	padrone_cmd_print_usage(ctx->out, e);
	if (e->alias)
		fprintf(ctx->out, "%s (also: %s)\n", e->summary, e->alias);
	else
		fprintf(ctx->out, "%s\n", e->summary);
	if (e->help)
		fprintf(ctx->out, "%s\n", e->help);
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_help_entry = {
	.name = "help",
	.usage = "[COMMAND]",
	.summary = "list the commands, or describe one",
	.lower = 0,
	.upper = 1,
	.flags = PADRONE_CMD_CLIENT | PADRONE_CMD_READ_ONLY,
	.exec = help_exec,
};
