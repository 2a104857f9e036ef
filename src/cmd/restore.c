/* restore [-n] [-t MS] FUNC: put a replaced function's original code back. */
#include "src/cmd.h"

static const struct padrone_opt restore_opts[] = {
	{ 'n', "dry-run", NULL },
	{ 't', "timeout", "MS" },
	{ 0 },
};

static int restore_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *func = padrone_args_value(args, 0);
	struct padrone_restore_opts o = { .sz = sizeof o, .dry_run = padrone_args_has(args, 'n') };
	const char *timeout = padrone_args_get(args, 't');
	struct padrone_patch p;
	unsigned long ms;
	char why[160];

	if (timeout && padrone_parse_ulong("MS", timeout, 1, 3600000, &ms, why, sizeof why) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	o.timeout_ms = timeout ? (int)ms : 0;
	if (padrone_session__restore(ctx->ctl->session, func, &o, &p) < 0)
		return padrone_cmd_session_error(ctx);
	fputs(p.report, ctx->out);
	if (!o.dry_run)
		fprintf(ctx->out, "restored %s (0x%llx): %u site%s, world stopped %.1f us%s\n", func,
			(unsigned long long)p.function, p.sites, p.sites == 1 ? "" : "s",
			(double)p.stop_ns / 1000.0,
			p.kept_code ? "; its replacement's code stays in the cache" : "");
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_restore_entry = {
	.name = "restore",
	.usage = "[-n] [-t MS] FUNC",
	.summary = "put back the original code of a replaced function",
	.help = "Undoes replace FUNC, from this session or an earlier one, and takes out a\n"
		"measuring stub left by a padrone killed while measuring FUNC. The\n"
		"replacement's code is freed once no thread is in it; a thread still in it\n"
		"after -t MS (default 2000) leaves it in the code cache. -n prints what would\n"
		"be done.",
	.opts = restore_opts,
	.lower = 1,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET,
	.exec = restore_exec,
};
