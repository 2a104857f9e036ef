/* replace [-nwfr] [-t MS] [-c CALLER,...] FUNC FILE[:SYMBOL]: live replacement. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/cmd.h"

static const struct padrone_opt replace_opts[] = {
	{ 'c', "callers", "CALLER,..." },
	{ 'C', "callsites-only", NULL },
	{ 'f', "force", NULL },
	{ 'n', "dry-run", NULL },
	{ 'r', "raw", NULL },
	{ 't', "timeout", "MS" },
	{ 'w', "wait", NULL },
	{ 0 },
};

struct callers {
	char **names;
	size_t n;
	char *buf;
};

static void callers_free(struct callers *c)
{
	free(c->names);
	free(c->buf);
	memset(c, 0, sizeof *c);
}

/* -c a,b,c into names; a status on failure, else 0. */
static int callers_parse(struct padrone_cmd_ctx *ctx, const char *list, struct callers *out)
{
	memset(out, 0, sizeof *out);
	if (!list)
		return 0;
	size_t commas = 1;
	for (const char *p = list; *p; p++)
		commas += *p == ',';
	out->buf = strdup(list);
	out->names = calloc(commas, sizeof *out->names);
	if (!out->buf || !out->names) {
		callers_free(out);
		return padrone_cmd_error(ctx, PADRONE_EXIT_FAILURE, "out of memory");
	}
	for (char *save = NULL, *w = strtok_r(out->buf, ",", &save); w;
	     w = strtok_r(NULL, ",", &save))
		out->names[out->n++] = w;
	if (!out->n) {
		callers_free(out);
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "-c needs CALLER[,CALLER...]");
	}
	return 0;
}

/* FILE[:SYMBOL]: the last ':' splits, unless the whole word is a file. */
static char *split_symbol(const char *word, const char **symbol)
{
	struct stat st;
	char *file = strdup(word), *colon;

	*symbol = NULL;
	if (file && stat(file, &st) < 0 && (colon = strrchr(file, ':')) && colon[1]) {
		*colon = '\0';
		*symbol = colon + 1;
	}
	return file;
}

static int replace_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	struct padrone_session *s = ctx->ctl->session;
	const char *func = padrone_args_value(args, 0);
	struct padrone_replace_opts o = {
		.sz = sizeof o, .raw = padrone_args_has(args, 'r'),
		.callsites_only = padrone_args_has(args, 'C'), .wait = padrone_args_has(args, 'w'),
		.force = padrone_args_has(args, 'f'), .dry_run = padrone_args_has(args, 'n'),
	};
	const char *timeout = padrone_args_get(args, 't');
	struct padrone_patch p;
	struct callers callers;
	unsigned long ms;
	char why[160];
	int st;

	if (timeout && padrone_parse_ulong("MS", timeout, 1, 3600000, &ms, why, sizeof why) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	o.timeout_ms = timeout ? (int)ms : 0;
	if ((st = callers_parse(ctx, padrone_args_get(args, 'c'), &callers)) != 0)
		return st;
	o.callers = (const char *const *)callers.names;
	o.ncallers = callers.n;
	char *file = split_symbol(padrone_args_value(args, 1), &o.symbol);
	if (!file) {
		callers_free(&callers);
		return padrone_cmd_error(ctx, PADRONE_EXIT_FAILURE, "out of memory");
	}
	int rc = padrone_session__replace(s, func, file, &o, &p);
	free(file);
	callers_free(&callers);
	if (rc < 0) {
		if (p.report[0])
			fputs(p.report, ctx->out);
		return padrone_cmd_session_error(ctx);
	}
	fputs(p.report, ctx->out);
	if (!o.dry_run)
		fprintf(ctx->out, "replaced %s (0x%llx): %u site%s, world stopped %.1f us\n", func,
			(unsigned long long)p.function, p.sites, p.sites == 1 ? "" : "s",
			(double)p.stop_ns / 1000.0);
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_replace_entry = {
	.name = "replace",
	.usage = "[-nwfrC] [-t MS] [-c CALLER,...] FUNC FILE[:SYMBOL]",
	.summary = "replace FUNC live by a function of FILE",
	.help = "FILE is a relocatable object (e.g. cc -O3 -mavx2 -fPIC -c), a shared object, or\n"
		"with -r raw position-independent code. SYMBOL defaults to FUNC's own name, else\n"
		"FILE's only function. FUNC may be sub_ADDR or the address (0x...) of its entry.\n"
		"The new code is linked against the process's own libraries and put in its code\n"
		"cache; calls go to it through a jump at FUNC's entry (and, with -c, re-targeted\n"
		"direct calls in the callers; -C: only those, and without -c the callers of FUNC\n"
		"in the last profile's call chains, hottest first). Threads inside FUNC finish their\n"
		"call in the original; -w waits until none is in it (-t MS, default 2000), -f\n"
		"then goes ahead anyway. A function whose first bytes (those the jump overwrites)\n"
		"code elsewhere in its module branches into -- a side entry, a jump table -- is\n"
		"refused, naming the branch, even with -f. FILE is refused if corrupt, if it has\n"
		"instructions this CPU lacks or constructors, or, in a C++ process and without -f,\n"
		"if the function calls other code an exception could unwind through. Registers\n"
		"that callers built with -fipa-ra keep across the call are saved around the new\n"
		"code by a gate. -n prints what would be done (after the same checks). The\n"
		"replacement stays after padrone detaches; restore FUNC undoes it.",
	.opts = replace_opts,
	.lower = 2,
	.upper = 2,
	.flags = PADRONE_CMD_TARGET,
	.exec = replace_exec,
};
