/* instrument [-m MODE] FUNC, report [-j], uninstrument [FUNC]: REP-recording
 * copies of live functions, streamed to recovery and cache simulation in
 * padrone(d) (src/instr.c). */
#include "src/cmd.h"

#include <string.h>

static const struct padrone_opt instrument_opts[] = {
	{ 'm', "mode", "MODE" },
	{ 'a', "analyses", "LIST" },
	{ 'I', "I1", "S,A,L" },
	{ 'D', "D1", "S,A,L" },
	{ 'L', "LL", "S,A,L" },
	{ 0 },
};

static int instrument_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	const char *func = padrone_args_value(args, 0), *mode = padrone_args_get(args, 'm');
	struct padrone_instrument_opts o = { .sz = sizeof o };

	if (mode && strcmp(mode, "exhaustive") != 0 && strcmp(mode, "sample") != 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "MODE must be exhaustive or "
					 "sample, not '%s'", mode);
	o.sampling = mode && strcmp(mode, "sample") == 0;
	const char *an = padrone_args_get(args, 'a');
	char why[128];
	if (an && padrone_analyses_parse(an, &o.analyses, why, sizeof why) < 0)
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "%s", why);
	o.i1 = padrone_args_get(args, 'I');
	o.d1 = padrone_args_get(args, 'D');
	o.ll = padrone_args_get(args, 'L');
	if (padrone_session__instrument(ctx->ctl->session, func, &o) < 0)
		return padrone_cmd_session_error(ctx);
	fprintf(ctx->out, "instrumented %s (%s): 'report' shows what it did, 'uninstrument' "
		"puts it back\n", func, o.sampling ? "sample" : "exhaustive");
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_instrument_entry = {
	.name = "instrument",
	.usage = "[-m MODE] [-a LIST] [--I1 S,A,L] [--D1 S,A,L] [--LL S,A,L] FUNC",
	.summary = "replace FUNC by a copy that streams its memory references to padrone",
	.help = "Every block of FUNC's CFG is copied into the code cache with code that writes\n"
		"one REP unit per executed block into its thread's ring (shared memory, one\n"
		"per thread); padrone recovers the references and simulates the host's caches\n"
		"as Cachegrind does, until uninstrument or detach. MODE: exhaustive (default:\n"
		"a thread waits while its ring is full) or sample (it never waits; what finds\n"
		"the ring full is lost, and report counts it). LIST: what the consumers do,\n"
		"each including the ones before: blocks (units counted; the copy records no\n"
		"addresses), record (addresses recorded, only counted), refs (references\n"
		"recovered and counted), cache (simulated: the default; report's events).\n"
		"--I1, --D1, --LL (-I, -D, -L)\n"
		"give a cache's size, associativity and line size in bytes, as cachegrind's\n"
		"options do; the first function instrumented fixes them until detach.\n"
		"One function at a time; refused for a function already replaced or measured,\n"
		"one with a jump table, code it cannot record (fs- or gs-relative), or a\n"
		"process where a thread uses gs.",
	.opts = instrument_opts,
	.lower = 1,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET,
	.exec = instrument_exec,
};

static const struct padrone_opt report_opts[] = {
	{ 'j', "json", NULL },
	{ 'o', "output", "FILE" },
	{ 0 },
};

static void print_events_json(FILE *f, const uint64_t *ev)
{
	fputc('{', f);
	for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
		fprintf(f, "%s\"%s\":%llu", e ? "," : "", padrone_event_name(e),
			(unsigned long long)ev[e]);
	fputc('}', f);
}

static void print_json(FILE *f, const struct padrone_ireport *r)
{
	fprintf(f, "{\"pid\":%d,\"seconds\":%.3f,\"mode\":\"%s\",\"geometry\":{\"I1\":\"%s\","
		"\"D1\":\"%s\",\"LL\":\"%s\"},\"events\":[", r->pid, r->seconds,
		r->sampling ? "sample" : "exhaustive", r->i1, r->d1, r->ll);
	for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
		fprintf(f, "%s\"%s\"", e ? "," : "", padrone_event_name(e));
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
		print_events_json(f, fn->ev);
		fprintf(f, ",\"pcs\":[");
		for (size_t k = 0; k < fn->npcs; k++) {
			fprintf(f, "%s{\"pc\":\"0x%llx\",\"events\":", k ? "," : "",
				(unsigned long long)fn->pcs[k].pc);
			print_events_json(f, fn->pcs[k].ev);
			fputc('}', f);
		}
		fprintf(f, "],\"loops\":[");
		for (size_t k = 0; k < fn->nloops; k++) {
			const struct padrone_iloop *l = &fn->loops[k];
			fprintf(f, "%s{\"header\":\"0x%llx\",\"depth\":%u,\"parent\":%d,\"blocks\":%u,"
				"\"irreducible\":%s,\"events\":", k ? "," : "",
				(unsigned long long)l->header, l->depth, l->parent, l->blocks,
				l->irreducible ? "true" : "false");
			print_events_json(f, l->ev);
			fputc('}', f);
		}
		fprintf(f, "]}");
	}
	fprintf(f, "],\"lost_units\":%llu,\"gaps\":%llu}\n", (unsigned long long)r->lost_units,
		(unsigned long long)r->gaps);
}

static void print_row(FILE *f, const uint64_t *ev, const char *what)
{
	for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
		fprintf(f, "%12llu ", (unsigned long long)ev[e]);
	fprintf(f, "%s\n", what);
}

static void print_text(FILE *f, const struct padrone_ireport *r)
{
	fprintf(f, "# pid %d: %.2f s instrumented (%s), I1 %s D1 %s LL %s, %llu units lost\n",
		r->pid, r->seconds, r->sampling ? "sample" : "exhaustive", r->i1, r->d1, r->ll,
		(unsigned long long)r->lost_units);
	for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
		fprintf(f, "%12s ", padrone_event_name(e));
	fprintf(f, "where\n");
	for (size_t i = 0; i < r->nfunctions; i++) {
		const struct padrone_ifunction *fn = &r->functions[i];
		char what[160];
		snprintf(what, sizeof what, "%s%s", fn->name, fn->active ? "" : " (uninstrumented)");
		print_row(f, fn->ev, what);
		for (size_t k = 0; k < fn->npcs; k++) {
			snprintf(what, sizeof what, "  0x%llx", (unsigned long long)fn->pcs[k].pc);
			print_row(f, fn->pcs[k].ev, what);
		}
		for (size_t k = 0; k < fn->nloops; k++) {
			const struct padrone_iloop *l = &fn->loops[k];
			snprintf(what, sizeof what, "  loop 0x%llx depth %u, %u blocks%s",
				 (unsigned long long)l->header, l->depth, l->blocks,
				 l->irreducible ? ", irreducible" : "");
			print_row(f, l->ev, what);
		}
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

static void print_counts(FILE *f, const uint64_t *ev)
{
	for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
		fprintf(f, " %llu", (unsigned long long)ev[e]);
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
	command_line(r->pid, cmd, sizeof cmd);
	fprintf(f, "cmd: %s\nevents:", cmd);
	for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
		fprintf(f, " %s", padrone_event_name(e));
	fputc('\n', f);
	for (size_t i = 0; i < r->nfunctions; i++) {
		const struct padrone_ifunction *fn = &r->functions[i];
		fprintf(f, "fl=???\nfn=%s\n", fn->name);
		for (size_t k = 0; k < fn->npcs; k++) {
			fprintf(f, "%llu", (unsigned long long)(fn->pcs[k].pc - fn->module_base));
			print_counts(f, fn->pcs[k].ev);
		}
		for (unsigned e = 0; e < PADRONE_NEVENTS; e++)
			total[e] += fn->ev[e];
	}
	fprintf(f, "summary:");
	print_counts(f, total);
}

static int report_exec(struct padrone_cmd_ctx *ctx, const struct padrone_args *args)
{
	struct padrone_ireport *r;

	if (padrone_args_has(args, 'j') && padrone_args_has(args, 'o'))
		return padrone_cmd_error(ctx, PADRONE_EXIT_USAGE, "-o writes Cachegrind's format, "
					 "not JSON: use -j or -o");
	if (padrone_session__instr_report(ctx->ctl->session, &r) < 0)
		return padrone_cmd_session_error(ctx);
	if (padrone_args_has(args, 'o'))
		print_cachegrind(ctx->out, r);
	else if (padrone_args_has(args, 'j'))
		print_json(ctx->out, r);
	else
		print_text(ctx->out, r);
	padrone_ireport__free(r);
	return PADRONE_EXIT_OK;
}

const struct padrone_cmd_entry padrone_cmd_report_entry = {
	.name = "report",
	.usage = "[-j] [-o FILE]",
	.summary = "show what instrumented functions did: Cachegrind's events per PC and loop",
	.help = "Per instrumented function and per instruction (PC): Ir I1mr ILmr Dr D1mr DLmr\n"
		"Dw D1mw DLmw, as Cachegrind names them, simulated with the host's cache\n"
		"geometry; also after uninstrument, until detach. -j as JSON: {\"pid\",\n"
		"\"seconds\",\"mode\",\"geometry\":{\"I1\",\"D1\",\"LL\"},\"events\":[names],\n"
		"\"threads\":[{\"tid\",\"units\",\"refs\",\"lost_units\"}],\"functions\":[{\"name\",\n"
		"\"entry\",\"active\",\"events\":{..},\"pcs\":[{\"pc\",\"events\":{..}}],\"loops\":\n"
		"[{\"header\",\"depth\",\"parent\",\"blocks\",\"irreducible\",\"events\":{..}}]}],\n"
		"\"lost_units\",\"gaps\"}. A loop (from the CFG's loop forest, outer first;\n"
		"parent is an index in loops or -1) counts its instructions' events, nested\n"
		"loops' included; text shows it as \"loop HEADER\" after the PCs. -o FILE writes Cachegrind's output format instead\n"
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
		"and unmapped from the process once no thread can be in the copy. What was\n"
		"found stays for report until detach.",
	.lower = 0,
	.upper = 1,
	.flags = PADRONE_CMD_TARGET,
	.exec = uninstrument_exec,
};
