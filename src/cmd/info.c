/* info threads|modules|stops|replacements: the attached process's threads,
 * its executable modules with their build-ids, how long padrone has held it
 * stopped, and the functions replaced or measured in it. */
#include <stdlib.h>
#include <string.h>

#include "src/cmd.h"
#include "src/report.h"

static int info_threads(struct padrone_cmd_ctx *ctx)
{
	struct padrone_session *s = ctx->ctl->session;
	struct padrone_thread_list *l;

	if (padrone_session__threads(s, &l) < 0)
		return padrone_cmd_session_error(ctx);
	fprintf(ctx->out, "%-8s %-16s %-5s %9s %9s  %-18s  %s\n", "TID", "NAME", "STATE",
		"USER ms", "SYS ms", "PC", "FUNCTION");
	for (size_t i = 0; i < l->count; i++) {
		const struct padrone_thread *t = &l->items[i];
		char plain[512];
		fprintf(ctx->out, "%-8d %-16s %-5c %9llu %9llu  0x%016llx  %s\n", (int)t->tid,
			t->name, t->state ? t->state : '?',
			(unsigned long long)t->user_ms, (unsigned long long)t->system_ms,
			(unsigned long long)t->pc,
			t->function[0] ? padrone_demangle(t->function, plain, sizeof plain) : "??");
	}
	padrone_thread_list__free(l);
	return PADRONE_EXIT_OK;
}

static int info_modules(struct padrone_cmd_ctx *ctx)
{
	struct padrone_module_list *l;

	if (padrone_session__modules(ctx->ctl->session, &l) < 0)
		return padrone_cmd_session_error(ctx);
	fprintf(ctx->out, "%-18s  %-40s  %s\n", "BASE", "BUILD-ID", "MODULE");
	for (size_t i = 0; i < l->count; i++) {
		const struct padrone_module *m = &l->items[i];
		fprintf(ctx->out, "0x%016llx  %-40s  %s\n", (unsigned long long)m->base,
			*m->build_id ? m->build_id : "-", m->path);
	}
	padrone_module_list__free(l);
	return PADRONE_EXIT_OK;
}

static int info_stops(struct padrone_cmd_ctx *ctx)
{
	struct padrone_pause_stats st;

	padrone_session__pause_stats(ctx->ctl->session, &st);
	if (!st.count) {
		fprintf(ctx->out, "process %d has not been stopped by padrone since it attached\n",
			(int)padrone_session__pid(ctx->ctl->session));
		return PADRONE_EXIT_OK;
	}
	fprintf(ctx->out, "process %d stopped %llu time%s by padrone since it attached: "
		"%.1f us in all, %.1f us on average, %.1f us at most; the last %.1f us "
		"(%.1f us to stop every thread)\n",
		(int)padrone_session__pid(ctx->ctl->session), (unsigned long long)st.count,
		st.count == 1 ? "" : "s", (double)st.total_ns / 1e3,
		(double)st.total_ns / 1e3 / (double)st.count, (double)st.max_ns / 1e3,
		(double)st.last_ns / 1e3, (double)st.last_stop_ns / 1e3);
	return PADRONE_EXIT_OK;
}

/* The functions this session has instrumented and not yet put back: mode,
 * how long, where the copy is. None when nothing was ever instrumented. */
static void info_instrumented(struct padrone_cmd_ctx *ctx)
{
	struct padrone_ireport *r;
	bool header = false;

	if (padrone_session__instr_report(ctx->ctl->session, &r) < 0)
		return;
	for (size_t i = 0; i < r->nfunctions; i++) {
		const struct padrone_ifunction *f = &r->functions[i];
		if (!f->active)
			continue;
		if (!header)
			fprintf(ctx->out, "%-24s %-12s %-18s  %-18s  %s\n", "INSTRUMENTED", "MODE",
				"ENTRY", "COPY", "SINCE");
		header = true;
		fprintf(ctx->out, "%-24s %-12s 0x%016llx  0x%016llx  %.1f s ago\n", f->name,
			r->sampling ? "sample" : "exhaustive", (unsigned long long)f->entry,
			(unsigned long long)f->copy, f->seconds);
	}
	padrone_ireport__free(r);
}

/* What the code cache's directory records, whichever session made it, and
 * what this session instruments. */
static int info_replacements(struct padrone_cmd_ctx *ctx)
{
	struct padrone_session *s = ctx->ctl->session;
	struct padrone_replacement_list *l;

	if (padrone_session__replacements(s, &l) < 0)
		return padrone_cmd_session_error(ctx);
	if (l->count == 0)
		fprintf(ctx->out, "no function is replaced or measured\n");
	else
		fprintf(ctx->out, "%-24s %-9s %-18s  %5s %10s  %s\n", "FUNCTION", "KIND", "ENTRY",
			"SITES", "STOP us", "SOURCE");
	for (size_t i = 0; i < l->count; i++) {
		const struct padrone_replacement *r = &l->items[i];
		char source[256];
		if (r->measuring)
			snprintf(source, sizeof(source), "%s (padrone process %d%s)", r->source,
				 (int)r->owner, r->stale ? ", gone: restore takes it out" : "");
		else
			snprintf(source, sizeof(source), "%s", r->source);
		fprintf(ctx->out, "%-24s %-9s 0x%016llx  %5u %10.1f  %s\n", r->name,
			r->measuring ? "measuring" : "replaced", (unsigned long long)r->function,
			r->sites, (double)r->stop_ns / 1000.0, source);
	}
	padrone_replacement_list__free(l);
	info_instrumented(ctx);
	return PADRONE_EXIT_OK;
}

static int info_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *what = padrone_args_value(args, 0);
	size_t len = strlen(what);

	/* Subjects match by prefix too, like commands. */
	if (len && strncmp("threads", what, len) == 0)
		return info_threads(ctx);
	if (len && strncmp("modules", what, len) == 0)
		return info_modules(ctx);
	if (len && strncmp("stops", what, len) == 0)
		return info_stops(ctx);
	if (len && strncmp("replacements", what, len) == 0)
		return info_replacements(ctx);
	padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "info: unknown subject: %s", what);
	padrone_cmd_print_usage(ctx->err, ctx->entry);
	return PADRONE_EXIT_USAGE;
}

const struct padrone_cmd_entry padrone_cmd_info_entry = {
	.name = "info",
	.alias = "i",		/* gdb's; a prefix no more (instrument) */
	.usage = "threads|modules|stops|replacements",
	.summary = "list the threads, the modules, the stops, or the functions replaced or instrumented",
	.help = "threads: tid, name, state, CPU time, and where each thread is (from /proc,\n"
		"stopping nothing, unless a thread keeps running: then the process is\n"
		"stopped for a moment to read its program counter).\n"
		"modules: every executable file mapped (and [vdso]): base address, build-id.\n"
		"stops: how often and how long padrone has held every thread stopped.\n"
		"replacements: each function replaced or being measured, by any session:\n"
		"its name, entry, the places written (its entry, call sites), the\n"
		"stop-the-world time of its patch and what replaced it; a measuring stub\n"
		"whose padrone is gone is marked, restore takes it out; then each function\n"
		"instrumented in this session: its mode, entry, the instrumented copy's\n"
		"address, and since when.",
	.lower = 1,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_READ_ONLY,
	.exec = info_exec,
};
