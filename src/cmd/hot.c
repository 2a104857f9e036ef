/* hot [-jln] [N]: the hottest functions of the last profile (and their
 * hottest loops). */
#include "src/cmd.h"

#define HOT_DEFAULT 10

static const struct padrone_opt hot_opts[] = {
	{ 'j', "json", NULL },
	{ 'l', "loops", NULL },
	{ 'n', "no-sample", NULL },
	{ 0 },
};

static int hot_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *count = padrone_args_value(args, 0);
	unsigned long n = HOT_DEFAULT;
	char why[160];

	if (count && padrone_parse_ulong("N", count, 1, 1000000, &n, why, sizeof(why)) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	/* -n: what a profile found already, or nothing (bash completion
	 * asks padroned this way: it must never sample) */
	if (padrone_args_has(args, 'n') && !padrone_session__report(ctx->ctl->session))
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "no profile yet: run 'profile' "
					 "first");
	int st = padrone_cmd_profile_if_none(ctx);	/* nothing sampled yet: do it now */
	if (st)
		return st;
	if (padrone_args_has(args, 'l'))
		return padrone_cmd_print_hot_loops(ctx, padrone_args_has(args, 'j'), n);
	return padrone_cmd_print_report(ctx, padrone_args_has(args, 'j'), n);
}

const struct padrone_cmd_entry padrone_cmd_hot_entry = {
	.name = "hot",
	.usage = "[-jln] [N]",
	.summary = "show the N hottest functions of the last profile",
	.help = "N defaults to 10. Without a profile yet, samples for 2 seconds first.\n"
		"-j (--json) prints the report as JSON. -l (--loops) shows each function's\n"
		"hottest loop, from its control-flow graph rebuilt from memory. -n\n"
		"(--no-sample) never samples: without a profile it fails (status 2).",
	.opts = hot_opts,
	.lower = 0,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_READ_ONLY | PADRONE_CMD_PROFILES,
	.exec = hot_exec,
};
