/* pipeline-recover: REP recovery throughput.
 *
 * A synthetic program: NBLOCKS blocks of 3..12 instructions, most with a
 * memory operand (stack pushes/pops and spills, fields of structures,
 * indexed arrays), built with PiPA's optimisations; a stream of executions
 * following two successors per block (one unit in ten jumps anywhere),
 * with random register values. Recovery runs over the stream in
 * memory into a sink that reads every reference. Reported: references per
 * second (data and instruction fetches), units per second, REP bytes per
 * data reference against the 24-byte recovered form, the slots the
 * optimisations saved; recovery on this thread alone, then through the
 * recovery pool (pipeline.h) with 1 and 2 recovery threads handing the
 * references, in order, to a sink on this thread, and the 2/1 ratio. */
#include "pipeline/pipeline.h"
#include "pipeline/rep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NBLOCKS 2000
#define MAXI 12
#define REPS 3

static uint64_t rs = 0x1234567;

static uint64_t rnd(void)
{
	uint64_t z = (rs += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct block {
	struct rep_insn in[MAXI];
	uint32_t n;
};

static void gen_block(struct block *b, uint64_t pc)
{
	static const uint8_t bases[] = { REP_REG_RBX, REP_REG_RBP, REP_REG_RDI, REP_REG_RSI,
					 REP_REG_R12, REP_REG_RAX };
	uint8_t obj = bases[rnd() % 6];

	memset(b, 0, sizeof(*b));
	b->n = 3 + (uint32_t)(rnd() % (MAXI - 2));
	for (uint32_t i = 0; i < b->n; i++) {
		struct rep_insn *in = &b->in[i];
		in->pc = pc;
		in->len = 2 + (uint32_t)(rnd() % 6);
		pc += in->len;
		unsigned k = (unsigned)(rnd() % 10);
		struct rep_operand *o = &in->ops[0];
		if (k < 2) {		/* push/pop */
			in->nops = 1;
			in->rsp_delta = k ? -8 : 8;
			*o = (struct rep_operand){ .type = k ? REP_REF_WRITE : REP_REF_READ,
						   .base = REP_REG_RSP, .size = 8, .disp = k ? -8 : 0 };
		} else if (k < 4) {	/* spill/reload */
			in->nops = 1;
			*o = (struct rep_operand){ .type = k == 2 ? REP_REF_WRITE : REP_REF_READ,
						   .base = REP_REG_RSP, .size = 8,
						   .disp = 8 * (int64_t)(rnd() % 8) };
		} else if (k < 7) {	/* a field of a structure */
			in->nops = 1;
			*o = (struct rep_operand){ .type = (uint8_t)(1 + rnd() % 3), .base = obj,
						   .size = 4 << (rnd() % 2), .disp = 8 * (int64_t)(rnd() % 16) };
		} else if (k < 8) {	/* an array element */
			in->nops = 1;
			*o = (struct rep_operand){ .type = REP_REF_READ, .base = REP_REG_RDX,
						   .index = REP_REG_RCX, .scale = 8, .size = 8 };
			in->clobbers = 1u << REP_REG_RCX;
		} else {		/* arithmetic */
			in->clobbers = 1u << REP_REG_RAX;
		}
	}
}

struct stream {
	struct rep_table *t;
	uint64_t *w;
	size_t n;
	uint64_t slots_plain, slots_opt;
};

static void make_stream(struct stream *s, size_t nunits)
{
	static struct block blocks[NBLOCKS];
	static struct rep_built built[NBLOCKS];
	uint64_t regs[MAXI][REP_NREGS];

	memset(s, 0, sizeof(*s));
	rep_table__new(&s->t);
	for (uint32_t i = 0; i < NBLOCKS; i++) {
		struct rep_built plain;
		gen_block(&blocks[i], 0x400000 + 64 * (uint64_t)i);
		if (rep_build(blocks[i].in, blocks[i].n, i + 1, REP_OPT_STACK | REP_OPT_BASE, &built[i]) ||
		    rep_build(blocks[i].in, blocks[i].n, i + 1, 0, &plain) ||
		    rep_table__add(s->t, &built[i].block)) {
			fprintf(stderr, "pipeline-recover: %s\n", rep_errmsg());
			exit(1);
		}
		s->slots_plain += plain.block.nslots;
		s->slots_opt += built[i].block.nslots;
		rep_built__free(&plain);
	}
	/* Control flow: each block has two successors (branch taken or not),
	 * mostly within a hot set; one unit in ten jumps anywhere (calls,
	 * returns, indirect jumps). */
	static uint32_t succ[NBLOCKS][2];
	for (uint32_t i = 0; i < NBLOCKS; i++)
		for (int k = 0; k < 2; k++)
			succ[i][k] = (uint32_t)(rnd() % (rnd() % 8 ? 64 : NBLOCKS));
	s->w = malloc(nunits * (1 + MAXI) * 8);
	uint32_t cur = 0;
	for (size_t u = 0; u < nunits; u++) {
		cur = rnd() % 10 ? succ[cur][rnd() & 1] : (uint32_t)(rnd() % NBLOCKS);
		uint32_t i = cur;
		for (unsigned r = 1; r < REP_NREGS; r++)
			regs[0][r] = r == REP_REG_RCX ? rnd() % 1024 : rnd() >> 16;
		for (uint32_t k = 1; k < blocks[i].n; k++) {
			memcpy(regs[k], regs[k - 1], sizeof regs[k]);
			regs[k][REP_REG_RSP] += (uint64_t)(int64_t)blocks[i].in[k - 1].rsp_delta;
		}
		s->n += (size_t)rep_encode(&built[i], (const uint64_t (*)[REP_NREGS])regs, s->w + s->n,
					   1 + MAXI);
	}
	for (uint32_t i = 0; i < NBLOCKS; i++)
		rep_built__free(&built[i]);
}

struct work {
	uint64_t sum;
	struct rep_recover_stats st;
};

static inline uint64_t read_refs(const struct rep_ref *refs, size_t n)
{
	uint64_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += refs[i].addr ^ refs[i].size;
	return s;
}

static void sink(void *arg, const struct rep_ref *refs, size_t n)
{
	((struct work *)arg)->sum += read_refs(refs, n);
}

static int pool_sink(void *arg, uint64_t stream, const struct rep_ref *refs, size_t n)
{
	(void)stream;
	((struct work *)arg)->sum += read_refs(refs, n);
	return 0;
}

static double thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Recovery on this thread alone: best wall seconds of REPS. */
static double run_direct(const struct stream *s, struct work *out)
{
	double best = 1e9;
	for (int rep = 0; rep < REPS; rep++) {
		struct rep_recover *r;
		struct work k = { 0 };
		if (rep_recover__new(s->t, sink, &k, &r)) {
			fprintf(stderr, "pipeline-recover: %s\n", rep_errmsg());
			exit(1);
		}
		double t0 = now();
		int rc = rep_recover__feed(r, s->w, s->n, 0);
		rep_recover__flush(r);
		double t = now() - t0;
		if (rc) {
			fprintf(stderr, "pipeline-recover: %s\n", rep_errmsg());
			exit(1);
		}
		rep_recover__stats(r, &k.st);
		rep_recover__free(r);
		*out = k;
		if (t < best)
			best = t;
	}
	return best;
}

/* Through the pool with nw recovery threads: best wall seconds of REPS; in
 * *cpu the busiest recovery thread's CPU seconds and in *ccpu this thread's
 * (feeding and reading every reference) in that run. */
static double run_pool(const struct stream *s, unsigned nw, struct work *out, double *cpu,
		       double *ccpu)
{
	double best = 1e9;
	for (int rep = 0; rep < REPS; rep++) {
		/* nw 0: on the caller's thread */
		struct rep_pool_opts o = { .sz = sizeof(o), .workers = nw, .on_caller = !nw };
		struct rep_pool *p;
		struct rep_pool_stats st;
		struct work k = { 0 };
		if (rep_pool__new(s->t, &o, pool_sink, &k, &p)) {
			fprintf(stderr, "pipeline-recover: cannot start the pool\n");
			exit(1);
		}
		double t0 = now(), c0 = thread_cpu();
		int rc = rep_pool__feed(p, 1, s->w, s->n, 0, REP_POOL_BORROW | REP_POOL_GAP);
		if (!rc)
			rc = rep_pool__finish(p);
		double t = now() - t0, c = thread_cpu() - c0;
		if (rc) {
			fprintf(stderr, "pipeline-recover: %s\n", rep_pool__errmsg(p));
			exit(1);
		}
		rep_recover__stats(rep_pool__counts(p), &k.st);
		rep_pool__stats(p, &st);
		rep_pool__free(p);
		*out = k;
		if (t < best) {
			best = t;
			*cpu = 0;
			for (unsigned i = 0; i < (nw ? nw : 1); i++)
				if (st.worker_cpu[i] > *cpu)
					*cpu = st.worker_cpu[i];
			*ccpu = c;
		}
	}
	return best;
}

int main(int argc, char **argv)
{
	size_t nunits = argc > 1 ? strtoull(argv[1], NULL, 0) : 4000000;
	struct stream s;
	double loadavg[1] = { 0 };

	make_stream(&s, nunits);
	getloadavg(loadavg, 1);
	struct work wd, w0, w1, w2;
	double c0, c1, c2, cc0, cc1, cc2;
	double td = run_direct(&s, &wd);
	double t0 = run_pool(&s, 0, &w0, &c0, &cc0);
	double t1 = run_pool(&s, 1, &w1, &c1, &cc1), t2 = run_pool(&s, 2, &w2, &c2, &cc2);
	uint64_t all = wd.st.refs + wd.st.instrs;

	if (w0.sum != wd.sum || w1.sum != wd.sum || w2.sum != wd.sum ||
	    w0.st.units != wd.st.units || w1.st.units != wd.st.units ||
	    w2.st.refs != wd.st.refs) {
		fprintf(stderr, "pipeline-recover: the pool recovered something else\n");
		return 1;
	}
	printf("REP recovery: %zu units of %d blocks (%.1f MB of REP), best of %d, load average %.1f on %ld CPUs\n",
	       nunits, NBLOCKS, (double)s.n * 8 / 1e6, REPS, loadavg[0], sysconf(_SC_NPROCESSORS_ONLN));
	printf("  per unit: %.2f data refs, %.2f instruction fetches, %.2f REP slots\n",
	       (double)wd.st.refs / (double)wd.st.units, (double)wd.st.instrs / (double)wd.st.units,
	       (double)(s.n - wd.st.units) / (double)wd.st.units);
	printf("  REP bytes per data reference: %.2f (recovered form: %zu bytes, %.1fx larger)\n",
	       (double)s.n * 8 / (double)wd.st.refs, sizeof(struct rep_ref),
	       (double)sizeof(struct rep_ref) * (double)wd.st.refs / ((double)s.n * 8));
	printf("  slots per block: plain %.2f, optimised (stack + base) %.2f: %.2fx fewer\n",
	       (double)s.slots_plain / NBLOCKS, (double)s.slots_opt / NBLOCKS,
	       (double)s.slots_plain / (double)s.slots_opt);
	printf("  %-22s %10s %14s %11s %10s   %s\n", "", "M refs/s", "M data refs/s", "M units/s",
	       "MB/s REP", "CPU s: busiest recovery thread / this thread");
	printf("  %-22s %10.1f %14.1f %11.1f %10.0f\n", "this thread alone", (double)all / td / 1e6,
	       (double)wd.st.refs / td / 1e6, (double)wd.st.units / td / 1e6,
	       (double)s.n * 8 / td / 1e6);
	printf("  %-22s %10.1f %14.1f %11.1f %10.0f   %.2f / %.2f\n", "pool, on this thread",
	       (double)all / t0 / 1e6, (double)w0.st.refs / t0 / 1e6, (double)w0.st.units / t0 / 1e6,
	       (double)s.n * 8 / t0 / 1e6, c0, cc0);
	printf("  %-22s %10.1f %14.1f %11.1f %10.0f   %.2f / %.2f\n", "pool, 1 recovery thread",
	       (double)all / t1 / 1e6, (double)w1.st.refs / t1 / 1e6, (double)w1.st.units / t1 / 1e6,
	       (double)s.n * 8 / t1 / 1e6, c1, cc1);
	printf("  %-22s %10.1f %14.1f %11.1f %10.0f   %.2f / %.2f\n", "pool, 2 recovery threads",
	       (double)all / t2 / 1e6, (double)w2.st.refs / t2 / 1e6, (double)w2.st.units / t2 / 1e6,
	       (double)s.n * 8 / t2 / 1e6, c2, cc2);
	printf("  2 / 1 recovery threads: %.2fx (the references reach the sink in order, on this thread;\n"
	       "  2 threads and this one want 3 idle CPUs)\n", t1 / t2);
	rep_table__free(s.t);
	free(s.w);
	return 0;
}
