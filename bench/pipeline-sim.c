/* pipeline-sim: cache simulator throughput. One simulator thread on an
 * in-memory stream (goal: >= 100 M refs/s for an 8-way L1), then the
 * splitter with 1 and 2 worker threads (scaling), in both counting modes.
 * The stream is synthetic but shaped like a program's: instruction fetches
 * in loops, 1-2 data accesses per instruction, mostly hits, some misses;
 * then the stream of the live bench's streaming kernel (axpy). */
#include "pipeline/pipeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of this thread: what one simulator thread costs, whatever else
 * the machine is running. */
static double cpu(void)
{
	return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* Loops over 4 KiB of code; data: a 16 KiB stack-like hot region (most
 * accesses), a 4 MiB array walked with stride 8, and random 64 MiB
 * scatter (1%): a D1 miss rate of a few percent. */
static void make_stream(struct rep_ref *out, size_t n)
{
	uint64_t s = 42, pc = 0x400000, walk = 0;
	size_t i = 0;

	while (i < n) {
		uint64_t x = rnd(&s);
		uint32_t len = 2 + (uint32_t)(x % 6);
		pc = (x & 0xff) < 16 ? 0x400000 + (x >> 8) % 4096 : pc + len;
		if (pc >= 0x401000)
			pc = 0x400000;
		out[i++] = (struct rep_ref){ .pc = pc, .addr = pc, .size = len, .type = REP_REF_INSTR };
		for (unsigned d = 0; d < 1 + (x >> 60) % 2 && i < n; d++) {
			uint64_t y = rnd(&s), addr;
			unsigned pick = (unsigned)(y % 100);
			if (pick < 75)
				addr = 0x7ff000000000ull + (y >> 8) % 16384;
			else if (pick < 99)
				addr = 0x10000000 + (walk += 8) % (4 << 20);
			else
				addr = 0x20000000 + (y >> 8) % (64 << 20);
			uint8_t type = (uint8_t)(1 + (y >> 40) % 3);
			out[i++] = (struct rep_ref){ .pc = pc, .addr = addr & ~7ull, .size = 8, .type = type };
		}
	}
}

/* The stream of the live bench's streaming kernel (bench/instr-overhead:
 * tests/targets/instr_kernel's axpy, o[i] = a*x[i] + y[i] on 1000 longs
 * per call), as recovery hands it to the simulator: per iteration its 7
 * loop instructions, the first reading x[i], the third y[i], the fourth
 * writing o[i]; the three arrays are 8000-byte heap blocks. */
static void make_axpy_stream(struct rep_ref *out, size_t n)
{
	static const struct {
		uint16_t off;
		uint8_t len, array, type;	/* array: 0 none, 1 x, 2 y, 3 o */
	} loop[] = { { 0x50, 4, 1, REP_REF_READ }, { 0x54, 4, 0, 0 },
		     { 0x58, 4, 2, REP_REF_READ }, { 0x5c, 4, 3, REP_REF_WRITE },
		     { 0x60, 4, 0, 0 }, { 0x64, 3, 0, 0 }, { 0x67, 2, 0, 0 } };
	const uint64_t code = 0x555555555a00ull, heap = 0x5555555592a0ull;
	size_t i = 0;

	for (uint64_t k = 0; i < n; k = (k + 1) % 1000)
		for (size_t j = 0; j < sizeof loop / sizeof loop[0] && i < n; j++) {
			uint64_t pc = code + loop[j].off;
			out[i++] = (struct rep_ref){ .pc = pc, .addr = pc, .size = loop[j].len,
						     .type = REP_REF_INSTR };
			if (loop[j].array && i < n)
				out[i++] = (struct rep_ref){
					.pc = pc, .addr = heap + (loop[j].array - 1) * 8016 + 8 * k,
					.size = 8, .type = loop[j].type };
		}
}

static struct csim_config geometry(bool cg)
{
	struct csim_config c = { .cachegrind = cg };
	c.level[CSIM_I1] = (struct csim_geom){ 32768, 8, 64 };
	c.level[CSIM_D1] = (struct csim_geom){ 32768, 8, 64 };
	c.level[CSIM_LL] = (struct csim_geom){ 8 << 20, 16, 64 };
	return c;
}

static double run_csim(const struct csim_config *cfg, const struct rep_ref *refs, size_t n,
		       uint64_t *d1_misses)
{
	struct csim *s;
	if (csim__new(cfg, &s))
		exit(1);
	double t = cpu();
	if (csim__refs(s, refs, n))
		exit(1);
	t = cpu() - t;
	const struct csim_counts *c = csim_result__totals(csim__result(s));
	*d1_misses = c->miss[CSIM_D1][CSIM_READ] + c->miss[CSIM_D1][CSIM_WRITE];
	csim__free(s);
	return (double)n / t;
}

struct split_run {
	double wall;		/* refs/s, wall clock */
	double capacity;	/* refs / busiest worker's CPU time simulating */
	double per_worker;	/* mean of each worker's refs / CPU time simulating */
	double splitter;	/* refs / splitter CPU time */
	double imbalance;
	uint64_t d1_misses;
};

static struct split_run run_split(const struct csim_config *cfg, unsigned workers,
				  const struct rep_ref *refs, size_t n)
{
	struct csim_split_opts o = { .sz = sizeof(o), .workers = workers };
	struct csim_split *sp;
	struct csim_split_stats st;
	struct split_run r = { 0 };
	if (csim_split__new(cfg, &o, &sp))
		exit(1);
	double t = now();
	for (size_t i = 0; i < n; i += 65536)
		if (csim_split__push(sp, refs + i, n - i < 65536 ? n - i : 65536))
			exit(1);
	if (csim_split__finish(sp))
		exit(1);
	t = now() - t;
	csim_split__stats(sp, &st);
	double busiest = 0;
	for (unsigned i = 0; i < st.workers; i++) {
		if (st.worker_busy[i] > busiest)
			busiest = st.worker_busy[i];
		r.per_worker += (double)st.per_worker[i] / st.worker_busy[i] / st.workers;
	}
	r.wall = (double)n / t;
	r.capacity = (double)n / busiest;
	r.splitter = (double)n / st.splitter_cpu;
	r.imbalance = st.imbalance;
	const struct csim_counts *c = csim_result__totals(csim_split__result(sp));
	r.d1_misses = c->miss[CSIM_D1][CSIM_READ] + c->miss[CSIM_D1][CSIM_WRITE];
	csim_split__free(sp);
	return r;
}

/* Best of three, against noise from the other jobs on this machine. */
#define BEST3(var, expr)                         \
	do {                                     \
		var = 0;                         \
		for (int _k = 0; _k < 3; _k++) { \
			double _v = (expr);      \
			if (_v > var)            \
				var = _v;        \
		}                                \
	} while (0)

/* Best of three by wall time. */
static struct split_run best_split(const struct csim_config *cfg, unsigned workers,
				   const struct rep_ref *refs, size_t n)
{
	struct split_run best = { 0 };
	for (int k = 0; k < 3; k++) {
		struct split_run r = run_split(cfg, workers, refs, n);
		if (r.wall > best.wall)
			best = r;
	}
	return best;
}

struct loaded {
	struct rep_ref *refs;
	size_t n, cap;
};

static int load_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct loaded *l = arg;
	if (l->n + n > l->cap) {
		size_t cap = (l->cap ? l->cap * 2 : 1 << 20) + n;
		struct rep_ref *r = realloc(l->refs, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		l->refs = r;
		l->cap = cap;
	}
	memcpy(l->refs + l->n, refs, n * sizeof(*refs));
	l->n += n;
	return 0;
}

/* One line per mode for a stream: the simulator thread, then the splitter
 * with 1 and 2 workers. */
static void measure(const char *what, const struct rep_ref *refs, size_t n)
{
	for (int cg = 1; cg >= 0; cg--) {
		struct csim_config cfg = geometry(cg);
		const char *mode = cg ? "cachegrind" : "per-line";
		double one;
		uint64_t m0;
		BEST3(one, run_csim(&cfg, refs, n, &m0));
		struct split_run w1 = best_split(&cfg, 1, refs, n), w2 = best_split(&cfg, 2, refs, n);
		printf("pipeline-sim %s %-10s one simulator (D1 miss rate %.2f%%): %6.1f CPU  goal 100  "
		       "ratio %.2fx\n",
		       what, mode, 100.0 * (double)m0 / (double)n, one / 1e6, one / 1e8);
		printf("pipeline-sim %s %-10s splitter+1 worker:  worker %6.1f CPU (%.2fx of one "
		       "simulator)  splitter %6.1f CPU  wall %6.1f\n",
		       what, mode, w1.per_worker / 1e6, w1.per_worker / one, w1.splitter / 1e6,
		       w1.wall / 1e6);
		printf("pipeline-sim %s %-10s splitter+2 workers: per worker %6.1f CPU  splitter %6.1f "
		       "CPU  wall %6.1f  scaling 1->2: capacity %.2fx wall %.2fx  imbalance %.3f  "
		       "counts %s\n",
		       what, mode, w2.per_worker / 1e6, w2.splitter / 1e6, w2.wall / 1e6,
		       w2.capacity / w1.capacity, w2.wall / w1.wall, w2.imbalance,
		       m0 == w1.d1_misses && m0 == w2.d1_misses ? "identical" : "DIFFER");
	}
}

/* pipeline-sim [NREFS [LACKEY-TRACE...]] */
int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000000;
	struct rep_ref *refs = malloc(n * sizeof(*refs));
	if (!refs)
		return 1;
	make_stream(refs, n);
	/* The set search csim picks for 8 and 16 ways on this CPU. */
	const char *search = "scalar";
#if defined(__x86_64__)
	search = __builtin_cpu_supports("avx512f") ? "AVX-512"
		 : __builtin_cpu_supports("avx2") ? "AVX2" : search;
#endif
	printf("pipeline-sim: geometry I1/D1 32K 8-way, LL 8M 16-way, 64 B lines (%s set search); "
	       "%ld CPUs online; rates in M refs/s; CPU = per thread CPU time (a worker's: while "
	       "simulating), wall = elapsed\n",
	       search, sysconf(_SC_NPROCESSORS_ONLN));
	char what[64];
	snprintf(what, sizeof what, "synthetic(%zuM)", n / 1000000);
	measure(what, refs, n);
	make_axpy_stream(refs, n);
	snprintf(what, sizeof what, "axpy(%zuM)", n / 1000000);
	measure(what, refs, n);
	free(refs);
	for (int i = 2; i < argc; i++) {
		struct loaded l = { 0 };
		struct csim_lackey *lk;
		FILE *f = fopen(argv[i], "re");
		if (!f || csim_lackey__open(f, argv[i], &lk)) {
			fprintf(stderr, "pipeline-sim: cannot read %s\n", argv[i]);
			return 1;
		}
		int rc = csim_lackey__run(lk, 65536, load_sink, &l);
		csim_lackey__close(lk);
		fclose(f);
		if (rc) {
			fprintf(stderr, "pipeline-sim: %s: %s\n", argv[i], strerror(-rc));
			return 1;
		}
		const char *base = strrchr(argv[i], '/');
		snprintf(what, sizeof what, "%s(%.1fM)", base ? base + 1 : argv[i], (double)l.n / 1e6);
		measure(what, l.refs, l.n);
		free(l.refs);
	}
	return 0;
}
