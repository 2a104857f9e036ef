/* measure [-jf] [-t SECONDS] FUNC [CALLS]: time calls inside the process. */
#include "src/cmd.h"
#include "src/progress.h"

static const struct padrone_opt measure_opts[] = {
	{ 'f', "force", NULL },
	{ 'j', "json", NULL },
	{ 't', "timeout", "SECONDS" },
	{ 0 },
};

/* A time in ns, or "<R" where it is below the clock's resolution R: the
 * clock cannot tell it from a shorter one. */
static const char *ns_text(char *buf, size_t len, double ns, double resolution)
{
	if (ns < resolution)
		snprintf(buf, len, "<%.1f ns", resolution);
	else
		snprintf(buf, len, "%.1f ns", ns);
	return buf;
}

static void print_json(FILE *f, const struct padrone_measurement *m)
{
	fprintf(f, "{\"function\":\"");
	for (const char *p = m->function; *p; p++)
		fprintf(f, *p == '"' || *p == '\\' ? "\\%c" : (unsigned char)*p < 0x20 ?
			"\\u%04x" : "%c", *p);
	fprintf(f, "\",\"calls\":%llu,", (unsigned long long)m->calls);
	/* no call timed: no figure (null), rather than a mean of 0 */
	const char *names[] = { "mean_ns", "p50_ns", "p99_ns", "min_ns", "max_ns" };
	const double v[] = { m->mean_ns, m->p50_ns, m->p99_ns, m->min_ns, m->max_ns };
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		fprintf(f, m->calls ? "\"%s\":%.1f," : "\"%s\":null,", names[i], v[i]);
	fprintf(f, "\"resolution_ns\":%.1f,\"ipc\":", m->resolution_ns);
	if (m->has_ipc)
		fprintf(f, "%.3f}\n", m->ipc);
	else
		fprintf(f, "null}\n");
}

static void print_text(FILE *f, const struct padrone_measurement *m)
{
	char t[5][32];
	const double r = m->resolution_ns;

	if (!m->calls) {
		fprintf(f, "%s: 0 calls timed: no figures\n", m->function);
		return;
	}
	char ipc[64] = "n/a (no PMU counts its instructions and cycles)";
	if (m->has_ipc)
		snprintf(ipc, sizeof ipc, "%.3f", m->ipc);
	fprintf(f, "%s: %llu calls, mean %s, p50 %s, p99 %s, min %s, max %s, IPC %s\n",
		m->function, (unsigned long long)m->calls, ns_text(t[0], 32, m->mean_ns, r),
		ns_text(t[1], 32, m->p50_ns, r), ns_text(t[2], 32, m->p99_ns, r),
		ns_text(t[3], 32, m->min_ns, r), ns_text(t[4], 32, m->max_ns, r), ipc);
}

static int measure_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *func = padrone_args_value(args, 0), *calls = padrone_args_value(args, 1);
	const char *timeout = padrone_args_get(args, 't');
	struct padrone_measure_opts o = { .sz = sizeof o, .force = padrone_args_has(args, 'f') };
	struct padrone_measurement m;
	unsigned long n;
	char why[160];

	if (calls && padrone_parse_ulong("CALLS", calls, 1, 16u << 20, &n, why, sizeof why) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	o.calls = calls ? n : 0;
	if (timeout && padrone_parse_double("SECONDS", timeout, 0.01, 86400, &o.timeout, why,
					    sizeof why) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	struct padrone_progress progress;
	padrone_progress_init(&progress, ctx->err, "measure", "calls");
	o.progress = padrone_progress_cb;
	o.progress_arg = &progress;
	int rc = padrone_session__measure(ctx->ctl->session, func, &o, &m);
	padrone_progress_done(&progress);
	if (rc < 0)
		return padrone_cmd_session_error(ctx);
	if (padrone_args_has(args, 'j')) {
		print_json(ctx->out, &m);
		return PADRONE_EXIT_OK;
	}
	print_text(ctx->out, &m);
	if (!m.complete)
		fprintf(ctx->out, "(only %llu of %llu calls came before the timeout or ^C)\n",
			(unsigned long long)m.calls, (unsigned long long)m.requested);
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_measure_entry = {
	.name = "measure",
	.usage = "[-jf] [-t SECONDS] FUNC [CALLS]",
	.summary = "time CALLS calls of FUNC inside the process",
	.help = "A measuring stub in the code cache takes the time stamp counter at FUNC's\n"
		"entry and return (no traps), keeps one sample per call, and is taken out\n"
		"after CALLS calls (default 1000), -t SECONDS (default 10) or ^C (on a terminal\n"
		"it shows its progress on standard error meanwhile). Prints calls,\n"
		"mean/p50/p99/min/max ns per call (\"<R ns\" below the clock's resolution R, no\n"
		"figures for 0 calls); -j as JSON: {\"function\":..,\"calls\":N,\"mean_ns\":x,\n"
		"\"p50_ns\":x,\"p99_ns\":x,\"min_ns\":x,\"max_ns\":x,\"resolution_ns\":x,\"ipc\":\n"
		"x|null}, figures null for 0 calls; ipc is null, as no PMU counts the\n"
		"function's instructions and cycles. Refused in a process with a C++ or\n"
		"unwinding runtime (an exception through a timed call would abort it) unless -f,\n"
		"and, as replace, a function whose first bytes code elsewhere branches into.",
	.opts = measure_opts,
	.lower = 1,
	.upper = 2,
	.flags = PADRONE_CMD_TARGET,
	.exec = measure_exec,
};
