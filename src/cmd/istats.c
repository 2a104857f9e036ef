/* stats [-j]: how the instrumentation pipeline keeps up (src/instr-report.c):
 * per thread's ring, units and references recovered, their rates, the
 * ring's fill, what was lost, and the consumers' CPU time. */
#include "src/cmd.h"

static const struct padrone_opt stats_opts[] = {
	{ 'j', "json", NULL },
	{ 0 },
};

static void print_thread_json(FILE *f, const struct padrone_istat_thread *t)
{
	fprintf(f, "{\"tid\":%d,\"function\":\"", t->tid);
	for (const char *p = t->function; *p; p++)
		fprintf(f, *p == '"' || *p == '\\' ? "\\%c" : (unsigned char)*p < 0x20 ?
			"\\u%04x" : "%c", *p);
	fprintf(f, "\",\"active\":%s,\"units\":%llu,\"refs\":%llu,\"lost_units\":%llu,"
		"\"gaps\":%llu,\"producer_waits\":%llu,\"interval_s\":%.3f,\"units_per_s\":%.1f,"
		"\"refs_per_s\":%.1f,\"ring_fill_pct\":%.1f,\"cpu_s\":%.3f}",
		t->active ? "true" : "false", (unsigned long long)t->units,
		(unsigned long long)t->refs, (unsigned long long)t->lost_units,
		(unsigned long long)t->gaps, (unsigned long long)t->producer_waits, t->seconds,
		t->units_per_s, t->refs_per_s, t->ring_fill, t->cpu_s);
}

/* The estimate's two measures, each null when unknown. */
static void print_measures_json(FILE *f, const struct padrone_istats *r)
{
	fprintf(f, ",\"per_call\":");
	if (r->by_calls)
		fprintf(f, "{\"overhead_pct\":%.2f,\"ns\":%.1f,\"ns_off\":%.1f,\"calls\":%.0f}",
			r->overhead_calls, r->ns_per_call, r->ns_per_call_off, r->recent_calls);
	else
		fprintf(f, "null");
	fprintf(f, ",\"shares\":");
	if (r->by_samples)
		fprintf(f, "{\"overhead_pct\":%.2f,\"share_copy\":%.4f,\"slowdown\":%.3f,"
			"\"share_on\":%.4f,\"share_off\":%.4f}", r->overhead_samples, r->share_copy,
			r->slowdown, r->share_on, r->share_off);
	else
		fprintf(f, "null");
}

/* --max-overhead: the budget, the fraction chosen, the estimate (null
 * when unknown) and the samples behind it; null without a budget. */
static void print_budget_json(FILE *f, const struct padrone_istats *r)
{
	if (!r->max_overhead) {
		fprintf(f, "null");
		return;
	}
	fprintf(f, "{\"max_overhead_pct\":%g,\"fraction\":%.4f,\"estimate\":",
		r->max_overhead, r->budget_fraction);
	if (r->estimated) {
		fprintf(f, "{\"overhead_pct\":%.2f,\"spread_pct\":%.2f,\"off_pct\":%.2f",
			r->overhead, r->spread, r->overhead_off);
		print_measures_json(f, r);
		fprintf(f, "}");
	} else {
		fprintf(f, "null");
	}
	fprintf(f, ",\"note\":\"%s\",\"calls_note\":\"%s\",\"samples\":{\"on\":%llu,"
		"\"off\":%llu,\"recent_on\":%.0f,\"recent_off\":%.0f}}", r->note, r->calls_note,
		(unsigned long long)r->samples_on, (unsigned long long)r->samples_off,
		r->recent_on, r->recent_off);
}

static void print_json(FILE *f, const struct padrone_istats *r)
{
	fprintf(f, "{\"pid\":%d,\"seconds\":%.3f,\"mode\":\"%s\",\"units\":%llu,\"refs\":%llu,"
		"\"lost_units\":%llu,\"gaps\":%llu,\"cpu_s\":%.3f,\"cpu_pct\":%.1f,"
		"\"sim_cpu_s\":%.3f,\"threads\":[",
		r->pid, r->seconds, r->sampling ? "sample" : "exhaustive",
		(unsigned long long)r->units, (unsigned long long)r->refs,
		(unsigned long long)r->lost_units, (unsigned long long)r->gaps, r->cpu_s,
		r->seconds > 0 ? 100.0 * r->cpu_s / r->seconds : 0.0, r->sim_cpu_s);
	for (size_t i = 0; i < r->nthreads; i++) {
		if (i)
			fputc(',', f);
		print_thread_json(f, &r->threads[i]);
	}
	fprintf(f, "],\"switch\":{\"on\":%s,\"on_fraction\":%.4f,\"windows\":%llu,"
		"\"duty_on_ms\":%u,\"duty_off_ms\":%u,\"budget\":", r->on ? "true" : "false",
		r->on_fraction, (unsigned long long)r->windows, r->duty_on_ms, r->duty_off_ms);
	print_budget_json(f, r);
	fprintf(f, "}}\n");
}

/* Switched on or off, how, and the share of the time on. */
static void print_switch(FILE *f, const struct padrone_istats *r)
{
	fprintf(f, "# switched %s, on %.1f%% of the time instrumented (%llu window%s); ",
		r->on ? "on" : "off", 100.0 * r->on_fraction, (unsigned long long)r->windows,
		r->windows == 1 ? "" : "s");
	if (r->duty_on_ms)
		fprintf(f, "duty cycle on %u ms, off %u ms\n", r->duty_on_ms, r->duty_off_ms);
	else
		fprintf(f, "no duty cycle\n");
}

/* --max-overhead: what was chosen and on what it rests. */
static void print_budget(FILE *f, const struct padrone_istats *r)
{
	if (!r->max_overhead)
		return;
	fprintf(f, "# overhead budget %g%%: on %.1f%% of the time; ", r->max_overhead,
		100.0 * r->budget_fraction);
	if (r->estimated)
		fprintf(f, "estimated overhead %.1f%% (+-%.1f): %.1f%% switched off (the gates' "
			"and detours' share of the samples off), plus the larger of:\n",
			r->overhead, r->spread, r->overhead_off);
	else
		fprintf(f, "overhead unknown:\n");
	if (r->by_calls)
		fprintf(f, "#   busy time per call %.1f%% more than off (%.0f ns against %.0f ns; "
			"%.0f calls, the last seconds')\n", r->overhead_calls, r->ns_per_call,
			r->ns_per_call_off, r->recent_calls);
	else
		fprintf(f, "#   busy time per call: %s\n", r->calls_note);
	if (r->by_samples)
		fprintf(f, "#   samples %.1f%% (%.1f%% of the time in the copies, whose code is "
			"%.2fx slower: %.1f%% of the CPU time on, %.1f%% off)", r->overhead_samples,
			100.0 * r->share_copy, r->slowdown, 100.0 * r->share_on,
			100.0 * r->share_off);
	else
		fprintf(f, "#   samples: %s", r->note);
	fprintf(f, "; from %.0f samples on, %.0f off (the last seconds'; %llu and %llu in "
		"all)\n", r->recent_on, r->recent_off, (unsigned long long)r->samples_on,
		(unsigned long long)r->samples_off);
}

static void print_text(FILE *f, const struct padrone_istats *r)
{
	fprintf(f, "# pid %d: %.2f s instrumented (%s); pipeline's CPU %.2f s (%.1f%% of one "
		"CPU; the simulator thread's %.2f s); %llu units lost, %llu gaps\n", r->pid,
		r->seconds, r->sampling ? "sample" : "exhaustive", r->cpu_s,
		r->seconds > 0 ? 100.0 * r->cpu_s / r->seconds : 0.0, r->sim_cpu_s,
		(unsigned long long)r->lost_units, (unsigned long long)r->gaps);
	print_switch(f, r);
	print_budget(f, r);
	fprintf(f, "%8s %14s %12s %14s %14s %6s %10s %6s %8s %8s %s\n", "tid", "units",
		"units/s", "refs", "refs/s", "fill%", "lost", "gaps", "waits", "cpu_s", "function");
	for (size_t i = 0; i < r->nthreads; i++) {
		const struct padrone_istat_thread *t = &r->threads[i];
		fprintf(f, "%8d %14llu %12.0f %14llu %14.0f %6.1f %10llu %6llu %8llu %8.3f %s%s\n",
			t->tid, (unsigned long long)t->units, t->units_per_s,
			(unsigned long long)t->refs, t->refs_per_s, t->ring_fill,
			(unsigned long long)t->lost_units, (unsigned long long)t->gaps,
			(unsigned long long)t->producer_waits, t->cpu_s, t->function,
			t->active ? "" : " (ended)");
	}
}

static int stats_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	struct padrone_istats *r;

	if (padrone_session__instr_stats(ctx->ctl->session, &r) < 0)
		return padrone_cmd_session_error(ctx);
	if (padrone_args_has(args, 'j'))
		print_json(ctx->out, r);
	else
		print_text(ctx->out, r);
	padrone_istats__free(r);
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_stats_entry = {
	.name = "stats",
	.usage = "[-j]",
	.summary = "show how instrumentation keeps up: units, rates, ring fill, losses, CPU",
	.help = "Per thread's ring of each function instrumented in this attachment (its\n"
		"earlier times in one row per thread): REP\n"
		"units (executed blocks) and references recovered, their rates since the\n"
		"previous stats (or instrument), how full the ring is now (% of its chunks\n"
		"holding unconsumed units), units lost (sample mode; 0 in exhaustive mode,\n"
		"where the thread waits instead), gaps the recovery saw, how often the thread\n"
		"found its ring full and waited, and the consumer\n"
		"thread's CPU time (it simulates its references itself unless another does);\n"
		"in the header, the pipeline's CPU time (all consumers' and the simulator\n"
		"thread's, which takes the batches handed over while another consumer\n"
		"simulates) and its share of one CPU over the time instrumented. -j as JSON:\n"
		"{\"pid\",\"seconds\",\"mode\",\"units\",\"refs\",\"lost_units\",\"gaps\",\"cpu_s\",\n"
		"\"cpu_pct\",\"sim_cpu_s\",\"threads\":[{\"tid\",\n"
		"\"function\",\"active\",\"units\",\"refs\",\"lost_units\",\"gaps\",\"producer_waits\",\n"
		"\"interval_s\",\"units_per_s\",\"refs_per_s\",\"ring_fill_pct\",\"cpu_s\"}],\n"
		"\"switch\":{\"on\",\"on_fraction\",\"windows\",\"duty_on_ms\",\"duty_off_ms\",\n"
		"\"budget\":null|{\"max_overhead_pct\",\"fraction\",\"estimate\":null|{\"overhead_pct\",\n"
		"\"per_call\":null|{\"overhead_pct\",\"ns\",\"ns_off\",\"calls\"},\"shares\":null|\n"
		"{\"overhead_pct\",\"share_copy\",\"slowdown\",\"share_on\",\"share_off\"}},\"note\",\n"
		"\"calls_note\",\"samples\":{\"on\",\"off\",\"recent_on\",\"recent_off\"}}}}.\n"
		"The second header line says whether instrumentation is switched on or off\n"
		"(instrument --on, --off, --duty), the share of the time instrumented it was\n"
		"on, in how many windows, and the duty cycle kept, if any. With an overhead\n"
		"budget (instrument --max-overhead), the next three say the budget, the share\n"
		"on chosen and the overhead estimated, the larger of two measures: the\n"
		"threads' busy time per call against the off windows', and the functions'\n"
		"samples on against off (each, or why it is unknown, and what it rests on).",
	.opts = stats_opts,
	.lower = 0,
	.upper = 0,
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_READ_ONLY,
	.exec = stats_exec,
};
