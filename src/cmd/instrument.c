/* instrument [-m MODE] [--for SECONDS [-j|-o FILE]] FUNC...|--hot N,
 * report [-j], uninstrument [FUNC]: REP-recording copies of live
 * functions, streamed to recovery and cache simulation in padrone(d)
 * (src/instr.c). */
#include "src/cmd.h"
#include "src/progress.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void print_json(FILE *f, const struct padrone_ireport *r);
static void print_text(FILE *f, const struct padrone_ireport *r);
static void print_cachegrind(FILE *f, const struct padrone_ireport *r);

/* instrument --hot N: at most this many functions. */
#define HOT_MAX 64

static const struct padrone_opt instrument_opts[] = {
	{ 'm', "mode", "MODE" },
	{ 'a', "analyses", "LIST" },
	{ 'I', "I1", "S,A,L" },
	{ 'D', "D1", "S,A,L" },
	{ 'L', "LL", "S,A,L" },
	{ 'H', "hot", "N" },
	{ 't', "for", "SECONDS" },
	{ 'j', "json", NULL },
	{ 'o', "output", "FILE" },
	{ 'n', "on", NULL },
	{ 'f', "off", NULL },
	{ 'c', "duty", "ON_MS/OFF_MS" },
	{ 'B', "max-overhead", "PCT" },
	{ 0 },
};

/* What instrument was asked: the options checked, before the process is
 * touched. */
struct instrument_request {
	struct padrone_instrument_opts o;
	unsigned long hot;	/* --hot N, or 0 */
	double seconds;		/* --for SECONDS, or 0: stay instrumented */
	unsigned long duty_on_ms, duty_off_ms;	/* --duty ON_MS/OFF_MS, or 0 0 */
	double max_overhead;	/* --max-overhead PCT, or 0 */
};

/* A window of --duty: 1 ms to an hour. */
#define DUTY_MAX_MS 3600000ul

/* "ON_MS/OFF_MS": two whole numbers of milliseconds. */
static int parse_duty(const char *text, unsigned long *on, unsigned long *off, char *why,
		      size_t size)
{
	const char *slash = strchr(text, '/');
	char first[32];

	if (!slash || (size_t)(slash - text) >= sizeof first) {
		snprintf(why, size, "--duty wants ON_MS/OFF_MS (on 20 ms, off 180 ms: 20/180), "
			 "not '%s'", text);
		return -EINVAL;
	}
	memcpy(first, text, (size_t)(slash - text));
	first[slash - text] = '\0';
	if (padrone_parse_ulong("--duty's ON_MS", first, 1, DUTY_MAX_MS, on, why, size) < 0 ||
	    padrone_parse_ulong("--duty's OFF_MS", slash + 1, 1, DUTY_MAX_MS, off, why, size) < 0)
		return -EINVAL;
	return 0;
}

/* --on, --off: alone (they switch what is instrumented). */
static int switch_request(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	static const char others[] = { 'm', 'a', 'I', 'D', 'L', 'H', 't', 'j', 'o', 'c', 'B' };

	if (padrone_args_has(args, 'n') && padrone_args_has(args, 'f'))
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "--on and --off exclude each "
					 "other");
	for (size_t i = 0; i < sizeof others; i++)
		if (padrone_args_has(args, others[i]) || padrone_args_count(args))
			return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "--on and --off switch "
						 "what is instrumented: they take no FUNC and no "
						 "other option");
	return 0;
}

static int instrument_request(struct padrone_cmd_ctx *ctx, const struct padrone_args *args,
			      struct instrument_request *rq)
{
	const char *mode = padrone_args_get(args, 'm'), *hot = padrone_args_get(args, 'H');
	const char *secs = padrone_args_get(args, 't');
	char why[160];

	*rq = (struct instrument_request){ .o = { .sz = sizeof rq->o } };
	if (mode && strcmp(mode, "exhaustive") != 0 && strcmp(mode, "sample") != 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "MODE must be exhaustive or "
					 "sample, not '%s'", mode);
	if (hot && padrone_parse_ulong("--hot N", hot, 1, HOT_MAX, &rq->hot, why, sizeof why) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	if (hot && padrone_args_count(args))
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "FUNC... and --hot N exclude "
					 "each other");
	const char *duty = padrone_args_get(args, 'c');
	if (duty && parse_duty(duty, &rq->duty_on_ms, &rq->duty_off_ms, why, sizeof why) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	const char *budget = padrone_args_get(args, 'B');
	if (budget && duty)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "--duty and --max-overhead "
					 "exclude each other: --max-overhead chooses the duty cycle");
	if (budget && padrone_parse_double("--max-overhead PCT", budget, 0.1, 100,
					   &rq->max_overhead, why, sizeof why) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	if (!hot && !padrone_args_count(args) && ((!duty && !budget) || secs))
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "name the functions to "
					 "instrument (FUNC...) or ask for the hottest (--hot N)");
	if (secs && padrone_parse_double("--for SECONDS", secs, PADRONE_PROFILE_MIN_SECONDS,
					 PADRONE_PROFILE_MAX_SECONDS, &rq->seconds, why,
					 sizeof why) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	if (!secs && (padrone_args_has(args, 'j') || padrone_args_has(args, 'o')))
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "-j and -o print the report of "
					 "instrument --for SECONDS: without --for, use report");
	if (padrone_args_has(args, 'j') && padrone_args_has(args, 'o'))
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "-o writes Cachegrind's format, "
					 "not JSON: use -j or -o");
	rq->o.sampling = mode && strcmp(mode, "sample") == 0;
	const char *an = padrone_args_get(args, 'a');
	if (an && padrone_analyses_parse(an, &rq->o.analyses, why, sizeof why) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	rq->o.i1 = padrone_args_get(args, 'I');
	rq->o.d1 = padrone_args_get(args, 'D');
	rq->o.ll = padrone_args_get(args, 'L');
	return 0;
}

/* The functions to instrument: the arguments, or the n hottest of the last
 * profile (sampling first if there is none, as hot does). *names holds
 * pointers into args or the session's report; 0 or an exit status. */
static int instrument_targets(struct padrone_cmd_ctx *ctx, const struct padrone_args *args,
			      unsigned long hot, const char ***names, size_t *n)
{
	struct padrone_session *s = ctx->ctl->session;
	const struct padrone_report *r;
	size_t count = hot ? hot : (size_t)padrone_args_count(args);

	*n = 0;
	if (!(*names = calloc(count, sizeof **names)))
		return padrone_cmd_error(ctx, PADRONE_EXIT_FAILURE, "out of memory");
	if (!hot) {
		for (size_t i = 0; i < count; i++)
			(*names)[(*n)++] = padrone_args_value(args, (int)i);
		return 0;
	}
	int st = padrone_cmd_profile_if_none(ctx);
	if (st)
		return st;
	r = padrone_session__report(s);
	for (size_t i = 0; i < padrone_report__count(r) && *n < count; i++)
		(*names)[(*n)++] = padrone_report__function(r, i)->name;
	if (!*n)
		return padrone_cmd_error(ctx, PADRONE_EXIT_FAILURE, "the profile found no "
					 "function to instrument");
	return 0;
}

/* Instrument each name; one refused is noted with the reason and skipped.
 * The number instrumented; *status the first refusal's exit status. */
static size_t instrument_each(struct padrone_cmd_ctx *ctx, const char **names, size_t n,
			      const struct instrument_request *rq, bool *done, int *status)
{
	struct padrone_session *s = ctx->ctl->session;
	size_t ok = 0;

	*status = PADRONE_EXIT_OK;
	for (size_t i = 0; i < n; i++) {
		done[i] = padrone_session__instrument(s, names[i], &rq->o) == 0;
		if (done[i]) {
			ok++;
			if (!rq->seconds)	/* --for: the report says it */
				fprintf(ctx->out, "instrumented %s (%s)\n", names[i],
					rq->o.sampling ? "sample" : "exhaustive");
			continue;
		}
		if (!*status)
			*status = padrone_session__exit_status(s);
		if (n > 1)
			padrone_cmd_error(ctx, 0, "%s not instrumented: %s", names[i],
					  padrone_session__errmsg(s));
		else
			padrone_cmd_session_error(ctx);
	}
	if (ok && !rq->seconds)
		fprintf(ctx->out, "'report' shows what %s did, 'uninstrument' puts %s back\n",
			ok == 1 ? "it" : "they", ok == 1 ? "it" : "them");
	return ok;
}

/* Print the report in the format the options ask. */
static int print_report(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	struct padrone_ireport *r;

	if (padrone_session__instr_report(ctx->ctl->session, &r) < 0)
		return padrone_cmd_session_error(ctx);
	if (padrone_args_has(args, 'o') && !r->nevents) {
		padrone_ireport__free(r);
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "the record analysis measures no "
					 "events: nothing to write in Cachegrind's format (-a "
					 "blocks, refs or cache give them)");
	}
	if (padrone_args_has(args, 'o'))
		print_cachegrind(ctx->out, r);
	else if (padrone_args_has(args, 'j'))
		print_json(ctx->out, r);
	else
		print_text(ctx->out, r);
	padrone_ireport__free(r);
	return PADRONE_EXIT_OK;
}

/* --for: run instrumented for the time asked (or until ^C, a cancel, a
 * signal), print the report, put the originals back. The process's end
 * meanwhile keeps the report and gives its status. */
static int instrument_for(struct padrone_cmd_ctx *ctx, const struct padrone_args *args,
			  const struct instrument_request *rq, const char **names,
			  const bool *done, size_t n)
{
	struct padrone_session *s = ctx->ctl->session;
	struct padrone_instr_wait_opts w = { .sz = sizeof w, .seconds = rq->seconds };
	struct padrone_progress progress;
	int status;
	bool gone;

	padrone_progress_init(&progress, ctx->err, "instrument", "units");
	if (progress.tty) {	/* the units are counted for the line alone */
		w.progress = padrone_progress_cb;
		w.progress_arg = &progress;
	}
	gone = padrone_session__instr_wait(s, &w) < 0;
	padrone_progress_done(&progress);
	if (gone) {	/* the report first, then why it ended */
		int end = padrone_session__exit_status(s);
		char msg[512];
		snprintf(msg, sizeof msg, "%s", padrone_session__errmsg(s));
		if (print_report(ctx, args) == PADRONE_EXIT_OK)
			fflush(ctx->out);
		return padrone_cmd_error(ctx, end, "%s", msg);
	}
	status = print_report(ctx, args);
	for (size_t i = 0; i < n; i++)
		if (done[i] && padrone_session__uninstrument(s, names[i]) < 0 && !status)
			status = padrone_cmd_session_error(ctx);
	return status;
}

/* --on, --off: every function instrumented now. */
static int switch_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	bool on = padrone_args_has(args, 'n');
	int status = switch_request(ctx, args);

	if (status)
		return status;
	if (padrone_session__instr_switch(ctx->ctl->session, on) < 0)
		return padrone_cmd_session_error(ctx);
	fprintf(ctx->out, "instrumentation switched %s\n", on ? "on" : "off");
	return PADRONE_EXIT_OK;
}

/* --max-overhead: a cycle padrone chooses, over what is instrumented now. */
static int budget_start(struct padrone_cmd_ctx *ctx, const struct instrument_request *rq)
{
	if (padrone_session__instr_budget(ctx->ctl->session, rq->max_overhead) < 0)
		return padrone_cmd_session_error(ctx);
	if (!rq->seconds)
		fprintf(ctx->out, "overhead budget: %g%% (the share on is chosen from the busy "
			"time per call and samples: stats shows it)\n", rq->max_overhead);
	return PADRONE_EXIT_OK;
}

/* New functions join the switch of those instrumented before (the next
 * window takes them in): say so when that is not simply on. */
static void say_joined_switch(struct padrone_cmd_ctx *ctx, size_t n)
{
	const char *who = n == 1 ? "it joins" : "they join";
	struct padrone_istats *st;

	if (padrone_session__instr_stats(ctx->ctl->session, &st) < 0)
		return;
	if (st->max_overhead > 0)
		fprintf(ctx->out, "%s the overhead budget of %g%% kept now\n", who,
			st->max_overhead);
	else if (st->duty_on_ms)
		fprintf(ctx->out, "%s the duty cycle kept now (on %u ms, off %u ms)\n", who,
			st->duty_on_ms, st->duty_off_ms);
	else if (!st->on)
		fprintf(ctx->out, "instrumentation is switched off (as before): 'instrument --on' "
			"records\n");
	padrone_istats__free(st);
}

/* --duty or --max-overhead: the cycle, over what is instrumented now. */
static int duty_start(struct padrone_cmd_ctx *ctx, const struct instrument_request *rq)
{
	if (rq->max_overhead)
		return budget_start(ctx, rq);
	if (padrone_session__instr_duty(ctx->ctl->session, (unsigned)rq->duty_on_ms,
					(unsigned)rq->duty_off_ms) < 0)
		return padrone_cmd_session_error(ctx);
	if (!rq->seconds)	/* --for: the report says it */
		fprintf(ctx->out, "duty cycle: on %lu ms, off %lu ms (on %.1f%% of the time)\n",
			rq->duty_on_ms, rq->duty_off_ms,
			100.0 * (double)rq->duty_on_ms / (double)(rq->duty_on_ms + rq->duty_off_ms));
	return PADRONE_EXIT_OK;
}

static int instrument_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	struct instrument_request rq;
	const char **names = NULL;
	bool *done = NULL;
	size_t n = 0;

	if (padrone_args_has(args, 'n') || padrone_args_has(args, 'f'))
		return switch_exec(ctx, args);
	int status = instrument_request(ctx, args, &rq);
	bool cycle = rq.duty_on_ms || rq.max_overhead;
	if (!status && cycle && !rq.hot && !padrone_args_count(args))
		return duty_start(ctx, &rq);	/* over what is instrumented */
	if (!status)
		status = instrument_targets(ctx, args, rq.hot, &names, &n);
	if (!status && !(done = calloc(n, sizeof *done)))
		status = padrone_cmd_error(ctx, PADRONE_EXIT_FAILURE, "out of memory");
	if (!status) {
		int refused;
		size_t ok = instrument_each(ctx, names, n, &rq, done, &refused);
		if (!ok)
			status = refused;
		else if (cycle && (status = duty_start(ctx, &rq)) != 0)
			;	/* left instrumented, always on: uninstrument puts them back */
		else if (!cycle && !rq.seconds)
			say_joined_switch(ctx, ok);
		if (!status && ok && rq.seconds)
			status = instrument_for(ctx, args, &rq, names, done, n);
	}
	free(done);
	free(names);
	return status;
}

const struct padrone_cmd_entry padrone_cmd_instrument_entry = {
	.name = "instrument",
	.usage = "[-m MODE] [-a LIST] [--I1 S,A,L] [--D1 S,A,L] [--LL S,A,L] [--duty ON_MS/OFF_MS | "
		 "--max-overhead PCT] [--for SECONDS [-j | -o FILE]] FUNC... | --hot N | "
		 "--duty ON_MS/OFF_MS | --max-overhead PCT | --on | --off",
	.summary = "replace functions by copies that stream their memory references to padrone",
	.help = "Every block of FUNC's CFG is copied into the code cache with code that writes\n"
		"one REP unit per executed block into its thread's ring (shared memory, one\n"
		"per thread); padrone recovers the references and simulates the host's caches\n"
		"as Cachegrind does, until uninstrument or detach. MODE: exhaustive (default:\n"
		"a thread waits while its ring is full) or sample (it never waits; what finds\n"
		"the ring full is lost, and report counts it). LIST: what the consumers do,\n"
		"each including the ones before: blocks (units counted; the copy records no\n"
		"addresses), record (addresses recorded, only counted), refs (references\n"
		"recovered and counted), cache (simulated: the default). report gives Ir\n"
		"alone with blocks (from the blocks' executions), Ir Dr Dw with refs (as\n"
		"lackey counts them), no event with record. edges, loops: the edges'\n"
		"executions and the loops' entries and iterations, which all but record\n"
		"count (alone: blocks); with edges the text report lists the edges.\n"
		"--I1, --D1, --LL (-I, -D, -L)\n"
		"give a cache's size, associativity and line size in bytes, as cachegrind's\n"
		"options do; the first function instrumented fixes them until detach.\n"
		"--hot N (-H) instruments the N hottest functions of the last profile\n"
		"(sampling 2 seconds first if there is none). A function refused is named\n"
		"with the reason and skipped; the command fails only if all are refused.\n"
		"Up to 8 functions at once, named together or by later instrument\n"
		"commands (uninstrument one, and the others go on). Refused: a function\n"
		"already instrumented, replaced or measured, one with an indirect jump of\n"
		"unknown targets or a jump table reached through memory, code it cannot\n"
		"record (fs- or gs-relative), a process where a thread uses gs.\n"
		"--for SECONDS (-t) runs instrumented that long (^C ends it early), prints\n"
		"what report would (-j as report -j, -o FILE as report -o) and puts the\n"
		"originals back; on a terminal its progress shows on standard error.\n"
		"--off (-f) switches every instrumented function off: each runs its original\n"
		"from its next call on (a byte per thread that the copy's entry reads; the\n"
		"process is not stopped); the copies, rings and results stay. --on (-n)\n"
		"switches them on again. A call under way finishes as it began: every call\n"
		"is recorded whole or not at all. --duty ON_MS/OFF_MS (-c) keeps them on for\n"
		"ON_MS and off for OFF_MS in turn (padrone's clock, on padroned's thread),\n"
		"for FUNC... instrumented with it, or without FUNC for what is instrumented,\n"
		"until --on, --off, uninstrument or detach; report then gives the counts\n"
		"measured, the fraction of the time on they cover and estimates for the\n"
		"whole time (counts scaled; data miss ratios with the hits on lines that the\n"
		"time off would have evicted as misses). --max-overhead PCT (-B)\n"
		"keeps a duty cycle whose share on padrone chooses and keeps choosing as the\n"
		"load changes, so that the process loses about PCT% of its time (0.1 to 100):\n"
		"periods of 200 ms, the process sampled (cpu-clock, 499 Hz) to compare the\n"
		"functions' share of its CPU time on and off (padrone(1) gives the method);\n"
		"stats shows the share chosen, the overhead estimated and its samples.",
	.opts = instrument_opts,
	.lower = 0,
	.upper = -1,
	/* PROFILES: padroned lets read-only commands (report, stats, info) run
	 * during --for's wait and --hot's profile, as during a profile's */
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_OUTFILE | PADRONE_CMD_PROFILES,
	.exec = instrument_exec,
};

static const struct padrone_opt report_opts[] = {
	{ 'j', "json", NULL },
	{ 'o', "output", "FILE" },
	{ 0 },
};

/* A function's counts for the whole time it was instrumented, from the
 * fraction of it that they cover (switched on): counts scaled, so miss
 * ratios stay as measured. */
static void estimate(const struct padrone_ifunction *fn, uint64_t *est)
{
	for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
		est[e] = fn->fraction > 0 ? (uint64_t)((double)fn->ev[e] / fn->fraction + 0.5) : 0;
}

/* What the counts of a report switched off at times cover. */
static void print_sampled(FILE *f, const char *prefix, const struct padrone_ireport *r)
{
	fprintf(f, "%ssampled: switched on %.1f%% of the time instrumented, in %llu window%s; "
		"the counts are measured in those windows, estimates (counts / fraction on) "
		"cover the whole time\n", prefix, 100.0 * r->fraction,
		(unsigned long long)r->windows, r->windows == 1 ? "" : "s");
}

/* A data miss ratio (misses / data references, in %) with its level's
 * cold-start misses counted as hits, and as measured. */
static void cold_range(uint64_t misses, uint64_t cold, uint64_t refs, double *lo, double *hi)
{
	*hi = 100.0 * (double)misses / (double)refs;
	*lo = misses > cold ? 100.0 * (double)(misses - cold) / (double)refs : 0;
}

/* What the cold-start misses leave open (padrone.h, struct
 * padrone_ireport): the data miss ratios of all functions, with them
 * counted as hits and as measured. An LL line filled by an instruction
 * fetch counts against the data too. Not a bound on the whole time's
 * ratio: a line kept from an earlier window hits, where the time off may
 * have evicted it (a reuse that spans more lines than the level holds,
 * fewer of them in the windows on). */
static void print_cold(FILE *f, const char *prefix, const struct padrone_ireport *r)
{
	uint64_t ev[PADRONE_NEVENTS] = { 0 };
	double d1_lo, d1_hi, ll_lo, ll_hi;

	for (size_t i = 0; i < r->nfunctions; i++)
		for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
			ev[e] += r->functions[i].ev[e];
	uint64_t refs = ev[3] + ev[6];	/* Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw */
	if (!refs)
		return;
	cold_range(ev[4] + ev[7], r->cold[1], refs, &d1_lo, &d1_hi);
	cold_range(ev[5] + ev[8], r->cold[2], refs, &ll_lo, &ll_hi);
	fprintf(f, "%scold start: %llu I1, %llu D1 and %llu LL misses filled an empty line (first "
		"touches), which a run of the whole time might have hit (and lines kept from "
		"an earlier window hit, which the time off may have evicted): data miss ratios "
		"with those misses as hits..as measured: D1 %.4f%%..%.4f%%, LL %.4f%%..%.4f%%\n",
		prefix, (unsigned long long)r->cold[0], (unsigned long long)r->cold[1],
		(unsigned long long)r->cold[2], d1_lo, d1_hi, ll_lo, ll_hi);
}

/* The whole time's data miss ratios the report estimates (padrone.h,
 * struct padrone_ireport), when it does. */
static void print_estimated_ratios(FILE *f, const char *prefix, const struct padrone_ireport *r)
{
	if (r->est_d1 < 0)
		return;
	fprintf(f, "%sestimated for the whole time: data miss ratios D1 %.4f%%, LL %.4f%% (as "
		"measured, with the hits on lines kept from before a gap (%s) that the gap would "
		"have evicted as misses: %.0f of %llu at D1, %.0f of %llu at LL, expected)\n",
		prefix, 100 * r->est_d1, 100 * r->est_ll,
		r->sampled ? "time switched off" : "units sampling left out", r->evicted[1],
		(unsigned long long)r->aged_hits[1], r->evicted[2],
		(unsigned long long)r->aged_hits[2]);
}

/* The analysis a report's counts come from, as -a names it. */
static const char *analysis_name(unsigned analysis)
{
	return analysis == PADRONE_ANALYZE_BLOCKS ? "blocks" : analysis == PADRONE_ANALYZE_RECORD ?
		"record" : analysis == PADRONE_ANALYZE_REFS ? "refs" : "cache";
}

/* What a report of an analysis short of cache measures, for its reader. */
static void print_analysis(FILE *f, const char *prefix, const struct padrone_ireport *r)
{
	if (r->nevents == PADRONE_NEVENTS)
		return;
	if (r->analysis == PADRONE_ANALYZE_REFS)
		fprintf(f, "%s%s analysis: Ir, Dr and Dw, counted from the blocks' executions and "
			"the references recovered; no cache simulated (-a cache does)\n", prefix,
			analysis_name(r->analysis));
	else if (r->nevents)
		fprintf(f, "%s%s analysis: Ir alone, counted from the blocks' executions; no cache "
			"simulated (-a cache does)\n", prefix, analysis_name(r->analysis));
	else
		fprintf(f, "%s%s analysis: units counted, nothing recovered: no events (-a blocks, "
			"refs or cache give them)\n", prefix, analysis_name(r->analysis));
}

static void print_events_json(FILE *f, const uint64_t *ev, const struct padrone_ireport *r)
{
	fputc('{', f);
	for (unsigned e = 0; e < r->nevents; e++)
		fprintf(f, "%s\"%s\":%llu", e ? "," : "", padrone_event_name(r->events[e]),
			(unsigned long long)ev[r->events[e]]);
	fputc('}', f);
}

/* Every analysis but record recovers the units, so counts the edges. */
static bool counts_edges(const struct padrone_ireport *r)
{
	return r->analysis != PADRONE_ANALYZE_RECORD;
}

static void print_edges_json(FILE *f, const struct padrone_ifunction *fn)
{
	fprintf(f, ",\"edges\":[");
	for (size_t k = 0; k < fn->nedges; k++) {
		const struct padrone_iedge *e = &fn->edges[k];
		fprintf(f, "%s{\"from\":\"0x%llx\",\"at\":\"0x%llx\",\"to\":\"0x%llx\",\"kind\":\"%s\","
			"\"count\":%llu}", k ? "," : "", (unsigned long long)e->from,
			(unsigned long long)e->at, (unsigned long long)e->to, e->kind,
			(unsigned long long)e->count);
	}
	fputc(']', f);
}

static void print_json(FILE *f, const struct padrone_ireport *r)
{
	fprintf(f, "{\"pid\":%d,\"seconds\":%.3f,\"mode\":\"%s\",\"analysis\":\"%s\","
		"\"geometry\":{\"I1\":\"%s\",\"D1\":\"%s\",\"LL\":\"%s\"},\"events\":[", r->pid,
		r->seconds, r->sampling ? "sample" : "exhaustive", analysis_name(r->analysis), r->i1,
		r->d1, r->ll);
	for (unsigned e = 0; e < r->nevents; e++)
		fprintf(f, "%s\"%s\"", e ? "," : "", padrone_event_name(r->events[e]));
	fprintf(f, "],\"threads\":[");
	for (size_t i = 0; i < r->nthreads; i++)
		fprintf(f, "%s{\"tid\":%d,\"units\":%llu,\"refs\":%llu,\"lost_units\":%llu}",
			i ? "," : "", r->threads[i].tid, (unsigned long long)r->threads[i].units,
			(unsigned long long)r->threads[i].refs,
			(unsigned long long)r->threads[i].lost_units);
	fprintf(f, "],\"functions\":[");
	for (size_t i = 0; i < r->nfunctions; i++) {
		const struct padrone_ifunction *fn = &r->functions[i];
		fprintf(f, "%s{\"name\":\"", i ? "," : "");
		for (const char *p = fn->name; *p; p++)
			fprintf(f, *p == '"' || *p == '\\' ? "\\%c" : (unsigned char)*p < 0x20 ?
				"\\u%04x" : "%c", *p);
		fprintf(f, "\",\"entry\":\"0x%llx\",\"active\":%s,\"events\":",
			(unsigned long long)fn->entry, fn->active ? "true" : "false");
		print_events_json(f, fn->ev, r);
		if (r->sampled) {
			uint64_t est[PADRONE_NEVENTS];
			estimate(fn, est);
			fprintf(f, ",\"fraction\":%.4f,\"estimate\":", fn->fraction);
			print_events_json(f, est, r);
		}
		fprintf(f, ",\"pcs\":[");
		for (size_t k = 0; k < fn->npcs; k++) {
			fprintf(f, "%s{\"pc\":\"0x%llx\",\"events\":", k ? "," : "",
				(unsigned long long)fn->pcs[k].pc);
			print_events_json(f, fn->pcs[k].ev, r);
			fputc('}', f);
		}
		fprintf(f, "],\"loops\":[");
		for (size_t k = 0; k < fn->nloops; k++) {
			const struct padrone_iloop *l = &fn->loops[k];
			fprintf(f, "%s{\"header\":\"0x%llx\",\"depth\":%u,\"parent\":%d,\"blocks\":%u,"
				"\"irreducible\":%s,\"events\":", k ? "," : "",
				(unsigned long long)l->header, l->depth, l->parent, l->blocks,
				l->irreducible ? "true" : "false");
			print_events_json(f, l->ev, r);
			if (counts_edges(r))
				fprintf(f, ",\"entries\":%llu,\"iterations\":%llu",
					(unsigned long long)l->entries, (unsigned long long)l->iterations);
			fputc('}', f);
		}
		fputc(']', f);
		if (counts_edges(r))
			print_edges_json(f, fn);
		fputc('}', f);
	}
	fprintf(f, "],\"lost_units\":%llu,\"gaps\":%llu", (unsigned long long)r->lost_units,
		(unsigned long long)r->gaps);
	fprintf(f, ",\"cold\":{\"I1\":%llu,\"D1\":%llu,\"LL\":%llu}",
		(unsigned long long)r->cold[0], (unsigned long long)r->cold[1],
		(unsigned long long)r->cold[2]);
	if (r->sampled)
		fprintf(f, ",\"sampled\":{\"fraction\":%.4f,\"windows\":%llu}", r->fraction,
			(unsigned long long)r->windows);
	if (r->est_d1 >= 0)
		fprintf(f, ",\"estimated\":{\"miss_ratio\":{\"D1\":%.6f,\"LL\":%.6f},\"aged_hits\":"
			"{\"I1\":%llu,\"D1\":%llu,\"LL\":%llu},\"evicted\":{\"I1\":%.1f,"
			"\"D1\":%.1f,\"LL\":%.1f}}", r->est_d1, r->est_ll,
			(unsigned long long)r->aged_hits[0], (unsigned long long)r->aged_hits[1],
			(unsigned long long)r->aged_hits[2], r->evicted[0], r->evicted[1], r->evicted[2]);
	fprintf(f, "}\n");
}

static void print_row(FILE *f, const uint64_t *ev, const struct padrone_ireport *r,
		      const char *what)
{
	for (unsigned e = 0; e < r->nevents; e++)
		fprintf(f, "%12llu ", (unsigned long long)ev[r->events[e]]);
	fprintf(f, "%s\n", what);
}

/* The edges, each from the last instruction of its block (the branch) to
 * the block it goes to. */
static void print_edges(FILE *f, const struct padrone_ifunction *fn)
{
	fprintf(f, "# edges of %s: executions, from the last instruction of a block to the "
		"next block, kind\n", fn->name);
	for (size_t k = 0; k < fn->nedges; k++) {
		const struct padrone_iedge *e = &fn->edges[k];
		fprintf(f, "%12llu   0x%llx -> 0x%llx %s\n", (unsigned long long)e->count,
			(unsigned long long)(e->at ? e->at : e->from), (unsigned long long)e->to,
			e->kind);
	}
}

static void print_text(FILE *f, const struct padrone_ireport *r)
{
	fprintf(f, "# pid %d: %.2f s instrumented (%s), I1 %s D1 %s LL %s, %llu units lost\n",
		r->pid, r->seconds, r->sampling ? "sample" : "exhaustive", r->i1, r->d1, r->ll,
		(unsigned long long)r->lost_units);
	print_analysis(f, "# ", r);
	if (r->sampled) {
		print_sampled(f, "# ", r);
		print_cold(f, "# ", r);
	}
	print_estimated_ratios(f, "# ", r);
	for (unsigned e = 0; e < r->nevents; e++)
		fprintf(f, "%12s ", padrone_event_name(r->events[e]));
	fprintf(f, "where\n");
	for (size_t i = 0; i < r->nfunctions; i++) {
		const struct padrone_ifunction *fn = &r->functions[i];
		char what[160];
		snprintf(what, sizeof what, "%s%s", fn->name, fn->active ? "" : " (uninstrumented)");
		print_row(f, fn->ev, r, what);
		if (r->sampled) {
			uint64_t est[PADRONE_NEVENTS];
			estimate(fn, est);
			snprintf(what, sizeof what, "%s: estimate for the whole time (on %.1f%%)",
				 fn->name, 100.0 * fn->fraction);
			print_row(f, est, r, what);
		}
		for (size_t k = 0; k < fn->npcs; k++) {
			snprintf(what, sizeof what, "  0x%llx", (unsigned long long)fn->pcs[k].pc);
			print_row(f, fn->pcs[k].ev, r, what);
		}
		for (size_t k = 0; k < fn->nloops; k++) {
			const struct padrone_iloop *l = &fn->loops[k];
			int n = snprintf(what, sizeof what, "  loop 0x%llx depth %u, %u blocks%s",
					 (unsigned long long)l->header, l->depth, l->blocks,
					 l->irreducible ? ", irreducible" : "");
			if (counts_edges(r) && n > 0 && (size_t)n < sizeof what)
				snprintf(what + n, sizeof what - (size_t)n, ", entered %llu, %llu "
					 "iterations (%.1f a time)", (unsigned long long)l->entries,
					 (unsigned long long)l->iterations, l->entries ?
					 (double)l->iterations / (double)l->entries : 0.0);
			print_row(f, l->ev, r, what);
		}
		if (counts_edges(r) && (r->asked & PADRONE_ANALYZE_EDGES))
			print_edges(f, fn);
	}
}

/* The target's command line, spaces between its words, for "cmd:". */
static void command_line(int pid, char *buf, size_t size)
{
	char path[64];
	size_t n = 0;

	snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
	FILE *f = fopen(path, "re");
	if (f) {
		n = fread(buf, 1, size - 1, f);
		fclose(f);
	}
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0' || buf[i] == '\n')
			buf[i] = ' ';
	while (n && buf[n - 1] == ' ')
		n--;
	buf[n] = '\0';
	if (!n)
		snprintf(buf, size, "pid %d", pid);
}

/* "SIZE,ASSOC,LINE" as Cachegrind's desc: line says it. */
static void print_cache_desc(FILE *f, const char *name, const char *geom)
{
	unsigned long long size = 0;
	unsigned assoc = 0, line = 0;

	sscanf(geom, "%llu,%u,%u", &size, &assoc, &line);
	fprintf(f, "desc: %s cache:         %llu B, %u B, %u-way associative\n", name, size,
		line, assoc);
}

static void print_counts(FILE *f, const uint64_t *ev, const struct padrone_ireport *r)
{
	for (unsigned e = 0; e < r->nevents; e++)
		fprintf(f, " %llu", (unsigned long long)ev[r->events[e]]);
	fputc('\n', f);
}

/* Cachegrind's output file (cg_annotate reads it). With no source lines,
 * fl= is "???" as Cachegrind writes it for code without debug info (a
 * file name would make cg_annotate print the binary as "source"), a desc:
 * line names each function's module, and a "line" is the instruction's
 * address in that file (PC minus where the file's offset 0 is mapped), in
 * decimal. */
static void print_cachegrind(FILE *f, const struct padrone_ireport *r)
{
	char cmd[1024];
	uint64_t total[PADRONE_NEVENTS] = { 0 };

	print_cache_desc(f, "I1", r->i1);
	print_cache_desc(f, "D1", r->d1);
	print_cache_desc(f, "LL", r->ll);
	for (size_t i = 0; i < r->nfunctions; i++)
		fprintf(f, "desc: %s is in %s; its lines are addresses in that file\n",
			r->functions[i].name, r->functions[i].module);
	print_analysis(f, "desc: ", r);
	if (r->sampled) {	/* the format's free text: the counts are measured ones */
		print_sampled(f, "desc: ", r);
		print_cold(f, "desc: ", r);
	}
	print_estimated_ratios(f, "desc: ", r);
	command_line(r->pid, cmd, sizeof cmd);
	fprintf(f, "cmd: %s\nevents:", cmd);
	for (unsigned e = 0; e < r->nevents; e++)
		fprintf(f, " %s", padrone_event_name(r->events[e]));
	fputc('\n', f);
	for (size_t i = 0; i < r->nfunctions; i++) {
		const struct padrone_ifunction *fn = &r->functions[i];
		fprintf(f, "fl=???\nfn=%s\n", fn->name);
		for (size_t k = 0; k < fn->npcs; k++) {
			fprintf(f, "%llu", (unsigned long long)(fn->pcs[k].pc - fn->module_base));
			print_counts(f, fn->pcs[k].ev, r);
		}
		for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
			total[e] += fn->ev[e];
	}
	fprintf(f, "summary:");
	print_counts(f, total, r);
}

static int report_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	if (padrone_args_has(args, 'j') && padrone_args_has(args, 'o'))
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "-o writes Cachegrind's format, "
					 "not JSON: use -j or -o");
	return print_report(ctx, args);
}

const struct padrone_cmd_entry padrone_cmd_report_entry = {
	.name = "report",
	.usage = "[-j] [-o FILE]",
	.summary = "show what instrumented functions did: Cachegrind's events per PC and loop",
	.help = "Per instrumented function and per instruction (PC): Ir I1mr ILmr Dr D1mr DLmr\n"
		"Dw D1mw DLmw, as Cachegrind names them, simulated with the host's cache\n"
		"geometry (only Ir with instrument -a blocks or refs: the header says so);\n"
		"also after uninstrument, until detach. -j as JSON: {\"pid\",\"seconds\",\n"
		"\"mode\",\"analysis\",\"geometry\":{\"I1\",\"D1\",\"LL\"},\"events\":[names],\n"
		"\"threads\":[{\"tid\",\"units\",\"refs\",\"lost_units\"}],\"functions\":[{\"name\",\n"
		"\"entry\",\"active\",\"events\":{..},\"pcs\":[{\"pc\",\"events\":{..}}],\"loops\":\n"
		"[{\"header\",\"depth\",\"parent\",\"blocks\",\"irreducible\",\"events\":{..}}]}],\n"
		"\"lost_units\",\"gaps\",\"cold\":{\"I1\",\"D1\",\"LL\"}}: cold counts the misses that\n"
		"filled an empty line (first touches, which a run that began earlier might\n"
		"have hit); switched off at times, the text gives each data miss ratio with\n"
		"those misses counted as hits and as measured (a hit on a line kept from an\n"
		"earlier window may have missed in the time off: not a bound). Sampled (in\n"
		"time, or -m sample), \"estimated\":{\"miss_ratio\":{\"D1\",\"LL\"},\"aged_hits\",\n"
		"\"evicted\"} gives the data miss ratios estimated for the whole time: the hits\n"
		"on lines kept from before a gap that the gap would have evicted (expected,\n"
		"by the level's rate of new lines per set) counted as misses. A loop (from the\n"
		"CFG's loop forest, outer first; parent is an index in loops or -1) counts\n"
		"its instructions' events, nested loops' included; text shows it as\n"
		"\"loop HEADER\" after the PCs. -o FILE writes Cachegrind's output format instead\n"
		"(cg_annotate FILE reads it; written whole or not at all). With no source\n"
		"lines, the file is ??? (as Cachegrind's without debug info), a desc: line\n"
		"names each function's module, and an instruction's \"line\" is its address\n"
		"in that module in decimal (its PC minus where the file's offset 0 is\n"
		"mapped: for a PIE or shared library, the address objdump shows).",
	.opts = report_opts,
	.lower = 0,
	.upper = 0,
	.flags = PADRONE_CMD_TARGET | PADRONE_CMD_READ_ONLY | PADRONE_CMD_OUTFILE,
	.exec = report_exec,
};

static int uninstrument_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *func = padrone_args_value(args, 0);

	if (padrone_session__uninstrument(ctx->ctl->session, func) < 0)
		return padrone_cmd_session_error(ctx);
	fprintf(ctx->out, "uninstrumented %s\n", func ? func : "everything");
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_uninstrument_entry = {
	.name = "uninstrument",
	.usage = "[FUNC]",
	.summary = "put back the original of an instrumented function (all: no FUNC)",
	.help = "The original code goes back, the threads' gs_base to 0, the rings are drained\n"
		"and unmapped from the process once no thread can be in the copy. A thread\n"
		"still in it keeps them until the next instrument, uninstrument or detach\n"
		"(at detach they stay, for a later restore). What was found stays for\n"
		"report until detach.",
	.lower = 0,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET,
	.exec = uninstrument_exec,
};
