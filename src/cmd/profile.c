/* profile [-fju] [-b ring|bpf] [-o FILE] [-F FORMAT] [SECONDS [HZ]]:
 * sample, then show the top, or write the profile for other tools. */
#include <stdlib.h>
#include <string.h>

#include "src/cmd.h"
#include "src/export.h"
#include "src/progress.h"

#define PROFILE_TEXT_TOP 20

static const struct padrone_opt profile_opts[] = {
	{ 'b', "backend", "BACKEND" },
	{ 'f', "force", NULL },
	{ 'j', "json", NULL },
	{ 'u', "user", NULL },
	{ 'o', "output", "FILE" },
	{ 'F', "format", "FORMAT" },
	{ 0 },
};

/* The format -F names, or else the one FILE's name suggests (pprof
 * unless it ends in .folded or .json). */
static int output_format(struct padrone_cmd_ctx *ctx, const struct padrone_args *args,
			 enum padrone_format *fmt)
{
	const char *name = padrone_args_get(args, 'F'), *file = padrone_args_get(args, 'o');
	size_t len = file ? strlen(file) : 0;

	if (name && padrone_format_parse(name, fmt) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE,
					 "unknown format '%s': use pprof, folded or json", name);
	if (name)
		return 0;
	*fmt = PADRONE_FORMAT_PPROF;
	if (len >= 7 && strcmp(file + len - 7, ".folded") == 0)
		*fmt = PADRONE_FORMAT_FOLDED;
	else if (len >= 5 && strcmp(file + len - 5, ".json") == 0)
		*fmt = PADRONE_FORMAT_JSON;
	return 0;
}

/* Fill o from the words; a usage status on bad input, else 0. */
static int profile_options(struct padrone_cmd_ctx *ctx, const struct padrone_args *args,
			   struct padrone_profile_opts *o)
{
	const char *backend = padrone_args_get(args, 'b');
	const char *secs = padrone_args_value(args, 0), *hz = padrone_args_value(args, 1);
	char why[160];
	unsigned long v;

	*o = (struct padrone_profile_opts){ .sz = sizeof(*o), .force = padrone_args_has(args, 'f'),
					    .user_only = padrone_args_has(args, 'u') };
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

int padrone_cmd_profile_if_none(struct padrone_cmd_ctx *ctx)
{
	struct padrone_session *s = ctx->ctl->session;
	struct padrone_profile_opts o = { .sz = sizeof(o) };
	struct padrone_progress progress;

	if (padrone_session__report(s))
		return PADRONE_EXIT_OK;
	padrone_progress_init(&progress, ctx->err, "profile", "samples");
	o.progress = padrone_progress_cb;
	o.progress_arg = &progress;
	int failed = padrone_session__profile(s, &o) < 0;
	padrone_progress_done(&progress);
	return failed ? padrone_cmd_session_error(ctx) : PADRONE_EXIT_OK;
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

/* -o or -F: the profile in that format on ctx->out (the command layer
 * has pointed it at -o's file, see PADRONE_CMD_OUTFILE). */
static int write_profile(struct padrone_cmd_ctx *ctx, enum padrone_format fmt)
{
	if (padrone_session_export(ctx->ctl->session, fmt, ctx->out) < 0)
		return padrone_cmd_session_error(ctx);
	return PADRONE_EXIT_OK;
}

/* Did the process exit or exec during the profile (which then kept what
 * it had sampled)? */
static bool gone_during_it(struct padrone_session *s)
{
	const struct padrone_report *r = padrone_session__report(s);
	enum padrone_why why = padrone_session__why(s);

	return r && padrone_report__ended(r) == why &&
	       (why == PADRONE_TARGET_EXITED || why == PADRONE_TARGET_EXECED);
}

/* The report of what was sampled until the process went (as a profile
 * that ran to its end shows it), then why it ended, with its status. */
static int show_partial(struct padrone_cmd_ctx *ctx, const struct padrone_args *args,
			enum padrone_format fmt)
{
	struct padrone_session *s = ctx->ctl->session;
	enum padrone_why why = padrone_session__why(s);
	char msg[512];
	int st;

	snprintf(msg, sizeof(msg), "%s", padrone_session__errmsg(s));
	if (padrone_args_has(args, 'o') || padrone_args_has(args, 'F'))
		st = write_profile(ctx, fmt);
	else
		st = padrone_cmd_print_report(ctx, padrone_args_has(args, 'j'),
					      padrone_args_has(args, 'j') ? 0 : PROFILE_TEXT_TOP);
	if (st)
		return st;
	fflush(ctx->out);
	return padrone_cmd_error(ctx, padrone_why_exit_status(why), "%s", msg);
}

static int profile_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	struct padrone_session *s = ctx->ctl->session;
	struct padrone_profile_opts o;
	struct padrone_progress progress;
	enum padrone_format fmt;
	int st = profile_options(ctx, args, &o);

	if (!st)
		st = output_format(ctx, args, &fmt);
	if (st)
		return st;
	padrone_progress_init(&progress, ctx->err, "profile", "samples");
	o.progress = padrone_progress_cb;
	o.progress_arg = &progress;
	int failed = padrone_session__profile(s, &o) < 0;
	padrone_progress_done(&progress);
	if (failed && gone_during_it(s))
		return show_partial(ctx, args, fmt);
	if (failed) {
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
	if (padrone_args_has(args, 'o') || padrone_args_has(args, 'F'))
		return write_profile(ctx, fmt);
	bool json = padrone_args_has(args, 'j');
	return padrone_cmd_print_report(ctx, json, json ? 0 : PROFILE_TEXT_TOP);
}

const struct padrone_cmd_entry padrone_cmd_profile_entry = {
	.name = "profile",
	.usage = "[-fju] [-b ring|bpf] [-o FILE] [-F pprof|folded|json] [SECONDS [HZ]]",
	.summary = "sample the process, then show where its time went",
	.help = "Samples every thread for SECONDS (default 2) at HZ samples per second\n"
		"(default 999; above 10000 only with -f, --force) with the perf_event ring\n"
		"backend or, with -b bpf, in-kernel aggregation. Shows the 20 hottest\n"
		"functions, or with -j (--json) the whole report as JSON. -u (--user)\n"
		"samples user code only; the report tells the kernel's share of the CPU\n"
		"time either way. -o FILE (--output) writes the profile to FILE instead,\n"
		"renamed into place when complete (- for standard output), in the format\n"
		"of -F (--format): pprof (gzipped protobuf for pprof, Parca, Pyroscope),\n"
		"folded (stacks for FlameGraph, speedscope, inferno) or json; without -F,\n"
		"FILE's name chooses (.folded, .json, else pprof). -F alone writes that\n"
		"format on standard output. On a terminal, a profile longer than a second\n"
		"shows its progress on standard error.",
	.opts = profile_opts,
	.lower = 0,
	.upper = 2,
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_OUTFILE | PADRONE_CMD_PROFILES,
	.exec = profile_exec,
};
