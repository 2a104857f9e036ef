/* profile [-fj] [-b ring|bpf] [SECONDS [HZ]]: sample, then show the top. */
#include <stdlib.h>
#include <string.h>

#include "src/cmd.h"

#define PROFILE_TEXT_TOP 20

static const struct padrone_opt profile_opts[] = {
	{ 'b', "backend", "BACKEND" },
	{ 'f', "force", NULL },
	{ 'j', "json", NULL },
	{ 0 },
};

/* Fill o from the words; a usage status on bad input, else 0. */
static int profile_options(struct padrone_cmd_ctx *ctx, const struct padrone_args *args,
			   struct padrone_profile_opts *o)
{
	const char *backend = padrone_args_get(args, 'b');
	const char *secs = padrone_args_value(args, 0), *hz = padrone_args_value(args, 1);
	char why[160];
	unsigned long v;

	*o = (struct padrone_profile_opts){ .sz = sizeof(*o), .force = padrone_args_has(args, 'f') };
	if (backend && strcmp(backend, "ring") == 0)
		o->backend = PADRONE_BACKEND_RING;
	else if (backend && strcmp(backend, "bpf") == 0)
		o->backend = PADRONE_BACKEND_BPF;
	else if (backend)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE,
					 "unknown backend '%s': use ring or bpf", backend);
	if (secs && padrone_parse_double("SECONDS", secs, PADRONE_PROFILE_MIN_SECONDS,
					 PADRONE_PROFILE_MAX_SECONDS, &o->seconds, why,
					 sizeof(why)) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	if (hz && padrone_parse_ulong("HZ", hz, 1, PADRONE_PROFILE_MAX_HZ, &v, why, sizeof(why)) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	o->hz = hz ? (unsigned)v : 0;
	return 0;
}

int padrone_cmd_print_report(struct padrone_cmd_ctx *ctx, bool json, size_t max)
{
	const struct padrone_report *r = padrone_session__report(ctx->ctl->session);
	char *text = json ? padrone_report__json(r, max) : padrone_report__text(r, max);

	if (!text)
		return padrone_cmd_error(ctx, PADRONE_EXIT_FAILURE, "out of memory");
	fputs(text, ctx->out);
	if (json)
		fputc('\n', ctx->out);
	free(text);
	return PADRONE_EXIT_OK;
}

static int profile_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	struct padrone_session *s = ctx->ctl->session;
	struct padrone_profile_opts o;
	int st = profile_options(ctx, args, &o);

	if (st)
		return st;
	if (padrone_session__profile(s, &o) < 0) {
		/* The rate refused for want of a PMU: name the option here, as
		 * the library cannot (padroned's --force, profile's -f). */
		if (padrone_session__why(s) == PADRONE_BAD_REQUEST && !o.force &&
		    o.hz > PADRONE_PROFILE_SOFT_MAX_HZ)
			return padrone_cmd_error(ctx, padrone_session__exit_status(s),
						 "%s; -f (--force) samples at that rate anyway",
						 padrone_session__errmsg(s));
		return padrone_cmd_session_error(ctx);
	}
	const struct padrone_report *r = padrone_session__report(s);
	if (*padrone_report__fallback(r))
		padrone_cmd_error(ctx, 0, "note: %s", padrone_report__fallback(r));
	bool json = padrone_args_has(args, 'j');
	return padrone_cmd_print_report(ctx, json, json ? 0 : PROFILE_TEXT_TOP);
}

const struct padrone_cmd_entry padrone_cmd_profile_entry = {
	.name = "profile",
	.usage = "[-fj] [-b ring|bpf] [SECONDS [HZ]]",
	.summary = "sample the process, then show where its time went",
	.help = "Samples every thread for SECONDS (default 2) at HZ samples per second\n"
		"(default 999; above 10000 only with -f, --force) with the perf_event ring\n"
		"backend or, with -b bpf, in-kernel aggregation. Shows the 20 hottest\n"
		"functions, or with -j (--json) the whole report as JSON.",
	.opts = profile_opts,
	.lower = 0,
	.upper = 2,
	.flags = PADRONE_CMD_TARGET,
	.exec = profile_exec,
};
