/* instr-overhead: what live instrumentation costs the target (issue 10).
 *
 * For each workload -- the streaming kernel of tests/targets/instr_kernel
 * (axpy, o[i] = a*x[i] + y[i] on 1000 longs per call, one thread) and the
 * pointer chase of bench/instr-chase (chase, 1000 steps per call through
 * 16 MiB) -- the target's own work rate (calls/s from its "alive CALLS"
 * lines) in one run: native; instrumented with each analysis level (blocks
 * only: the copy records no addresses; record: REP units, the consumer only
 * counts them; refs: + recovery; cache: + full cache simulation, exhaustive
 * mode); cache in sample mode; after uninstrument; and the same program
 * under valgrind --tool=cachegrind and --tool=lackey --trace-mem=yes (the
 * native target stopped meanwhile); then the cache level against
 * cachegrind in interleaved rounds, the median of their ratios.
 * Ratios are to native (the mean of the native windows), of calls per
 * second and of calls per second of the target's own CPU time (what the
 * copy's code costs the thread, apart from waiting for the consumer and
 * from a busy machine's scheduling). Also the
 * pipeline's throughput: references recovered and simulated per second of
 * the pipeline's CPU (consumers' and simulator's; the refs and cache rows),
 * and units lost in sample mode.
 *
 * Last, the stop-the-world pauses of instrument and uninstrument with 8
 * threads in the function (p50, p99).
 *
 * usage: instr-overhead [SECONDS_PER_WINDOW [pauses|record|refs|cache|all [axpy|chase]]]
 * (default 2 s, all levels, both workloads; pauses: only those; record,
 * refs: only native and that level, in 5 rounds between native windows
 * (the median of their ratios and the range), for side-by-side runs of two
 * builds of the copy's code or of recovery; cache: only native, the cache levels and
 * cachegrind, for two builds of the pipeline; axpy or chase: that workload
 * alone)
 * Goals: record <= 2.0x, refs <= 3x, cache <= 8x and below cachegrind's,
 * after uninstrument >= 0.99 of native; sample mode never waits.
 */
#include "attach/attach.h"
#include "bench/alive.h"
#include "bench/median.h"
#include "bench/pause.h"
#include "codecache/codecache.h"
#include "src/padrone.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double window_s = 2;
/* "record", "refs": that level alone, no valgrind; "cache": the cache
 * levels, and cachegrind; 0: every level. */
static unsigned only;
static const char *only_workload;	/* "axpy" or "chase": that one alone */

/* The rate over one window of window_s (alive.h). */
static double rate(struct target *t, double *per_cpu)
{
	return rate_over(t, window_s, per_cpu);
}

static struct target cur;	/* the workload's target, native */

struct level {
	const char *name;
	unsigned analyses;
	bool sampling;
};

static const struct level levels[] = {
	{ "blocks only", PADRONE_ANALYZE_BLOCKS, false },
	{ "REP record, consumer counts", PADRONE_ANALYZE_RECORD, false },
	{ "+ recovery", PADRONE_ANALYZE_REFS, false },
	{ "+ cache simulation", PADRONE_ANALYZE_CACHE, false },
	{ "cache, sample mode", PADRONE_ANALYZE_CACHE, true },
};

static double native_cpu;	/* calls per CPU-second, native */

static void row(const char *name, double r, double per_cpu, double native, const char *extra)
{
	printf("  %-30s %9.0f calls/s %7.2fx | per target CPU-s %7.2fx%s\n", name, r, native / r,
	       per_cpu > 0 ? native_cpu / per_cpu : 0, extra);
	fflush(stdout);
}

/* One level: a fresh session (analyses are fixed per attachment). Returns
 * the rate, 0 if it could not be instrumented; its row if print. */
static double instrumented(pid_t pid, const char *func, const struct level *l, double native,
			   bool print)
{
	struct padrone_session *s = padrone_session__new(NULL);
	struct padrone_instrument_opts o = { .sz = sizeof o, .sampling = l->sampling,
					     .analyses = l->analyses };
	char extra[160] = "";
	if (!s || padrone_session__attach(s, pid) < 0 ||
	    padrone_session__instrument(s, func, &o) < 0) {
		printf("  %-30s failed: %s\n", l->name, s ? padrone_session__errmsg(s) : "no memory");
		padrone_session__free(s);
		return 0;
	}
	struct padrone_istats *st0 = NULL, *st1 = NULL;
	padrone_session__instr_stats(s, &st0);
	double per_cpu, r = rate(&cur, &per_cpu);
	padrone_session__instr_stats(s, &st1);
	if (st0 && st1) {
		double cpu = st1->cpu_s - st0->cpu_s, refs = (double)(st1->refs - st0->refs);
		uint64_t waits = 0;
		for (size_t i = 0; i < st1->nthreads; i++)
			waits += st1->threads[i].producer_waits;
		snprintf(extra, sizeof extra, "  (pipeline %.0f%% CPU, %.1f M refs/s per CPU, "
			 "lost %llu, waits %llu)", 100 * cpu / window_s, cpu > 0 ? refs / cpu / 1e6 : 0,
			 (unsigned long long)(st1->lost_units - st0->lost_units),
			 (unsigned long long)waits);
	}
	padrone_istats__free(st0);
	padrone_istats__free(st1);
	if (print)
		row(l->name, r, per_cpu, native, extra);
	padrone_session__uninstrument(s, NULL);
	padrone_session__free(s);
	return r;
}

/* Returns the rate, 0 if valgrind is not there; its row if print. */
static double under_valgrind(const char *tool, char *const argv[], double native, bool print)
{
	/* --fair-sched: under lackey's tracing the thread that prints the
	 * target's "alive" lines never got valgrind's lock back from the
	 * busy one, and the row waited forever. */
	char *vargv[16] = { "valgrind", (char *)tool, "--fair-sched=yes", "--log-file=/dev/null" };
	size_t n = 4;
	char name[64];

	if (strcmp(tool, "--tool=lackey") == 0)
		vargv[n++] = "--trace-mem=yes";
	for (size_t i = 0; argv[i] && n < 15; i++)
		vargv[n++] = argv[i];
	vargv[n] = NULL;
	struct target t;
	if (system("command -v valgrind >/dev/null") != 0 || start(&t, vargv) < 0) {
		printf("  valgrind %s: not available\n", tool);
		return 0;
	}
	next_calls(&t);	/* started */
	snprintf(name, sizeof name, "valgrind %s", tool);
	double per_cpu, r = rate(&t, &per_cpu);
	if (print)
		row(name, r, 0, native, "");
	stop(&t);
	return r;
}

/* The median of v[0..n) (which it sorts), its least and greatest. */
static double median_range(double *v, int n, double *lo, double *hi)
{
	*lo = *hi = v[0];
	for (int i = 1; i < n; i++) {
		*lo = v[i] < *lo ? v[i] : *lo;
		*hi = v[i] > *hi ? v[i] : *hi;
	}
	return bench_median(v, n);
}

/* The cache simulation's calls/s against cachegrind's in interleaved
 * rounds, the native target stopped while cachegrind runs: a machine whose
 * speed drifts from one window to the next (the pointer chase's rate moved
 * by 20% between native windows) weighs on both sides of a round alike. */
static void against_cachegrind(char *const argv[], const char *func, double native)
{
	enum { ROUNDS = 3 };
	static const struct level cache = { "cache", PADRONE_ANALYZE_CACHE, false };
	double ratio[ROUNDS];
	int n = 0;

	for (int i = 0; i < ROUNDS; i++) {
		double c = instrumented(cur.pid, func, &cache, native, false);
		kill(cur.pid, SIGSTOP);
		double g = under_valgrind("--tool=cachegrind", argv, native, false);
		kill(cur.pid, SIGCONT);
		if (c > 0 && g > 0)
			ratio[n++] = c / g;
	}
	if (!n)
		return;
	double lo, hi, mid = median_range(ratio, n, &lo, &hi);
	printf("  cache simulation against cachegrind, %d interleaved rounds: %.2fx its calls/s "
	       "(median; %.2f..%.2f; goal >= 1)\n", n, mid, lo, hi);
}


static void workload(const char *title, char *const argv[], const char *func)
{
	printf("%s\n", title);
	if (start(&cur, argv) < 0) {
		perror("instr-overhead: start");
		exit(1);
	}
	double native = rate(&cur, &native_cpu);
	row("native", native, native_cpu, native, "");
	for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
		if (only && levels[i].analyses != only)
			continue;
		/* A level alone (record, refs) runs rounds of an instrumented
		 * window between native ones: its slowdown is the median of
		 * theirs, each to the mean of the native windows around it
		 * (native's rate drifted by a quarter between windows). */
		enum { LEVEL_ROUNDS = 5 };
		int nrounds = only && only != PADRONE_ANALYZE_CACHE ? LEVEL_ROUNDS : 1;
		double ratio[LEVEL_ROUNDS], last = native;
		for (int k = 0; k < nrounds; k++) {
			double r = instrumented(cur.pid, func, &levels[i], native, k == 0);
			double again_cpu, again = rate(&cur, &again_cpu);
			ratio[k] = r > 0 ? (last + again) / 2 / r : 0;
			last = again;
			/* drifts of a busy machine fall on both sides */
			native = (native + again) / 2;
			native_cpu = (native_cpu + again_cpu) / 2;
			if (i + 1 == sizeof levels / sizeof levels[0])
				row("after uninstrument", again, again_cpu, native, "");
		}
		if (nrounds > 1) {
			double lo, hi, mid = median_range(ratio, nrounds, &lo, &hi);
			printf("  %s, %d rounds between native windows: %.2fx (median; %.2f..%.2f)\n",
			       levels[i].name, nrounds, mid, lo, hi);
		}
	}
	if (!only || only == PADRONE_ANALYZE_CACHE) {
		kill(cur.pid, SIGSTOP);
		under_valgrind("--tool=cachegrind", argv, native, true);
		if (!only)
			under_valgrind("--tool=lackey", argv, native, true);
		kill(cur.pid, SIGCONT);
		/* The ratios above divide by the mean of the native windows so
		 * far, which drifts between rows on a busy machine: the goal
		 * "never slower than Cachegrind" is read from rounds of both. */
		against_cachegrind(argv, func, native);
	}
	stop(&cur);
}

/* Stop-the-world pauses of instrument and uninstrument with 8 threads in
 * the function: p50 and p99 over rounds, the target checked after. The
 * goal is on the longest pause of each command, from attach/'s figures: an
 * instrument stops the world twice (the prepare: its copy, area and the
 * rings' range and memfd; the install: the rings mapped, the threads' rows
 * and gs_base, the threads moved in and the entry written), an uninstrument
 * more (the stop that puts the original back, the grace period's looks,
 * the release of the rings). */
static uint64_t count_pct(uint64_t *v, size_t n, double p)
{
	return n ? (uint64_t)(pause_pct_ms(v, n, p) * 1e6 + 0.5) : 0;	/* (sorts v) */
}

static void pauses(const char *kernel)
{
	enum { ROUNDS = 100 };	/* a p99 that is not just the largest */
	char *argv[] = { (char *)kernel, "8", "1000", NULL };
	uint64_t in_ns[ROUNDS], in_all[ROUNDS], in_stops[ROUNDS], in_write[ROUNDS];
	uint64_t in_prep[ROUNDS], in_inst[ROUNDS];
	uint64_t out_ns[ROUNDS], look_ns[ROUNDS], out_max[ROUNDS], all_ns[ROUNDS], stops[ROUNDS];
	struct attach_target *t = NULL;
	struct attach_error aerr;
	struct cc_cache *c = NULL;
	struct cc_syms *sy = NULL;
	struct cc_error err;
	struct cc_func f;
	size_t n = 0;

	if (start(&cur, argv) < 0)
		return;
	next_calls(&cur);
	if (attach_seize(cur.pid, NULL, &t, &aerr) < 0 || cc_cache__open(t, NULL, &c, &err) < 0 ||
	    cc_syms__open(cur.pid, &sy, &err) < 0 || cc_syms__func(sy, "axpy", &f, &err) < 0) {
		printf("  pauses: cannot set up\n");
		goto out;
	}
	for (; n < ROUNDS; n++) {
		struct cc_patch_stats si = { 0 }, so = { 0 };
		struct cc_instr_opts io = { .sz = sizeof io, .stats = &si };
		struct cc_patch_opts po = { .sz = sizeof po, .stats = &so };
		struct attach_pause_stats i0, i1, p0, p1;
		struct cc_instr *in;
		attach_target__pause_stats(t, &i0);
		if (cc_cache__instrument(c, &f, &io, &in) < 0)
			break;
		attach_target__pause_stats(t, &i1);
		pause_nap_ms(50);
		attach_target__pause_stats(t, &p0);
		int rc = cc_cache__uninstrument(c, in, &po);
		attach_target__pause_stats(t, &p1);
		cc_instr__free(in);
		if (rc < 0)
			break;
		in_stops[n] = i1.count - i0.count;
		in_all[n] = i1.total_ns - i0.total_ns;
		in_ns[n] = si.prepare_ns > si.install_ns ? si.prepare_ns : si.install_ns;
		in_prep[n] = si.prepare_ns;
		in_inst[n] = si.install_ns;
		in_write[n] = si.stop_ns;
		out_ns[n] = so.stop_ns;
		look_ns[n] = so.look_max_ns;
		out_max[n] = out_ns[n] > look_ns[n] ? out_ns[n] : look_ns[n];
		all_ns[n] = p1.total_ns - p0.total_ns;
		stops[n] = p1.count - p0.count;
	}
	if (n < ROUNDS)
		printf("  pauses: failed after %zu rounds: %s\n", n, cc_cache__errmsg(c));
	double load = pause_loadavg();
	printf("  instrument (8 threads in axpy, %zu rounds): its longest pause p50 %.2f ms  p99 %.2f ms"
	       "  (goal p99 <= 2 ms)\n", n, pause_pct_ms(in_ns, n, 0.5), pause_pct_ms(in_ns, n, 0.99));
	printf("    the prepare's stop p50 %.2f ms  p99 %.2f ms; the install's p50 %.2f ms  p99 %.2f ms,"
	       " of which the entry's write p50 %.2f ms  p99 %.2f ms\n", pause_pct_ms(in_prep, n, 0.5),
	       pause_pct_ms(in_prep, n, 0.99), pause_pct_ms(in_inst, n, 0.5),
	       pause_pct_ms(in_inst, n, 0.99), pause_pct_ms(in_write, n, 0.5),
	       pause_pct_ms(in_write, n, 0.99));
	printf("    stops per instrument p50 %.0f  max %.0f; all its pauses summed p50 %.2f ms  p99 %.2f ms\n",
	       (double)count_pct(in_stops, n, 0.5), (double)count_pct(in_stops, n, 1),
	       pause_pct_ms(in_all, n, 0.5), pause_pct_ms(in_all, n, 0.99));
	printf("  uninstrument: its longest pause p50 %.2f ms  p99 %.2f ms  (goal p99 <= 2 ms)\n",
	       pause_pct_ms(out_max, n, 0.5), pause_pct_ms(out_max, n, 0.99));
	printf("    the entry's stop p50 %.2f ms  p99 %.2f ms; the looks' and release's longest "
	       "p50 %.2f ms  p99 %.2f ms\n", pause_pct_ms(out_ns, n, 0.5),
	       pause_pct_ms(out_ns, n, 0.99), pause_pct_ms(look_ns, n, 0.5),
	       pause_pct_ms(look_ns, n, 0.99));
	printf("    stops per uninstrument p50 %.0f  max %.0f; all its pauses summed p50 %.2f ms"
	       "  p99 %.2f ms  (load %.1f)\n", (double)count_pct(stops, n, 0.5),
	       (double)count_pct(stops, n, 1), pause_pct_ms(all_ns, n, 0.5),
	       pause_pct_ms(all_ns, n, 0.99), load);
out:
	cc_syms__free(sy);
	cc_cache__close(c);
	if (t)
		attach_target__detach(t);
	next_calls(&cur);	/* and it computes right (next_calls exits otherwise) */
	stop(&cur);
}

int main(int argc, char **argv)
{
	bench_name = "instr-overhead";
	char dir[4096];
	const char *b = getenv("top_builddir") ? getenv("top_builddir") : ".";
	sigset_t set;

	if (argc > 1)
		window_s = atof(argv[1]);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	snprintf(dir, sizeof dir, "%s/tests/targets/instr_kernel", b);
	if (argc > 2 && strcmp(argv[2], "pauses") == 0) {
		pauses(dir);
		return 0;
	}
	if (argc > 2)
		only = strcmp(argv[2], "record") == 0 ? PADRONE_ANALYZE_RECORD
		       : strcmp(argv[2], "refs") == 0 ? PADRONE_ANALYZE_REFS
		       : strcmp(argv[2], "cache") == 0 ? PADRONE_ANALYZE_CACHE : 0;
	only_workload = argc > 3 ? argv[3] : NULL;
	char *kernel[] = { dir, "1", "1000", NULL };
	if (!only_workload || strcmp(only_workload, "axpy") == 0)
		workload("streaming kernel: axpy, 1000 longs per call, 1 thread", kernel, "axpy");
	char chase[4096];
	snprintf(chase, sizeof chase, "%s/bench/instr-chase", b);
	char *ch[] = { chase, NULL };
	if (!only_workload || strcmp(only_workload, "chase") == 0)
		workload("pointer chase: chase, 1000 steps per call through 16 MiB", ch, "chase");
	if (only || only_workload)
		return 0;
	printf("stop-the-world\n");
	pauses(dir);
	return 0;
}
