/* disas FUNC|ADDR: a function's code, block by block. */
#include "src/cmd.h"

static int disas_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	return padrone_cmd_print_cfg(ctx, padrone_args_value(args, 0), PADRONE_CFG_DISAS);
}

const struct padrone_cmd_entry padrone_cmd_disas_entry = {
	.name = "disas",
	.alias = "disassemble",
	.usage = "FUNC|ADDR",
	.summary = "disassemble a function, block by block, as read from the process",
	.help = "Only code reachable from the entry is shown: where the function ends is\n"
		"where its control flow ends.",
	.lower = 1,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_READ_ONLY,
	.exec = disas_exec,
};
