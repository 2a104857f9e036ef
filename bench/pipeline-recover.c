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
 * optimisations saved, and 1 vs 2 worker threads (two streams). */
#include "pipeline/rep.h"

#include <pthread.h>
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
	const struct rep_table *t;
	const uint64_t *w;
	size_t n;
	uint64_t sum;
	double cpu;	/* thread CPU seconds */
	struct rep_recover_stats st;
	int rc;
};

static void sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct work *k = arg;
	uint64_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += refs[i].addr ^ refs[i].size;
	k->sum += s;
}

static void *recover_all(void *arg)
{
	struct work *k = arg;
	struct rep_recover *r;

	struct timespec a, b;

	if ((k->rc = rep_recover__new(k->t, sink, k, &r)))
		return NULL;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	k->rc = rep_recover__feed(r, k->w, k->n, 0);
	rep_recover__flush(r);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	k->cpu = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	rep_recover__stats(r, &k->st);
	rep_recover__free(r);
	return NULL;
}

/* Best of REPS with nw workers, each recovering 1/nw of the units: wall
 * seconds, and in *cpu the CPU seconds of the busiest worker in that run. */
static double run(struct stream *s, int nw, struct work *total, double *cpu)
{
	double best = 1e9;
	*cpu = 1e9;
	for (int rep = 0; rep < REPS; rep++) {
		struct work k[2];
		pthread_t th[2];
		size_t cut = s->n;
		if (nw == 2)	/* at a unit boundary near the middle */
			for (cut = 0; cut < s->n / 2; cut += 1 + (s->w[cut] >> 48))
				;
		k[0] = (struct work){ .t = s->t, .w = s->w, .n = cut };
		k[1] = (struct work){ .t = s->t, .w = s->w + cut, .n = s->n - cut };
		double t0 = now();
		for (int i = 0; i < nw; i++)
			pthread_create(&th[i], NULL, recover_all, &k[i]);
		for (int i = 0; i < nw; i++)
			pthread_join(th[i], NULL);
		double t = now() - t0;
		memset(total, 0, sizeof(*total));
		for (int i = 0; i < nw; i++) {
			if (k[i].rc) {
				fprintf(stderr, "pipeline-recover: %s\n", rep_errmsg());
				exit(1);
			}
			total->st.units += k[i].st.units;
			total->st.refs += k[i].st.refs;
			total->st.instrs += k[i].st.instrs;
			total->st.bytes += k[i].st.bytes;
		}
		double c = k[0].cpu > k[nw - 1].cpu ? k[0].cpu : k[nw - 1].cpu;
		if (c < *cpu)
			*cpu = c;
		if (t < best)
			best = t;
	}
	return best;
}

int main(int argc, char **argv)
{
	size_t nunits = argc > 1 ? strtoull(argv[1], NULL, 0) : 4000000;
	struct stream s;
	struct work w1, w2;
	double loadavg[1] = { 0 };

	make_stream(&s, nunits);
	getloadavg(loadavg, 1);
	double c1, c2;
	double t1 = run(&s, 1, &w1, &c1), t2 = run(&s, 2, &w2, &c2);
	uint64_t all = w1.st.refs + w1.st.instrs;

	printf("REP recovery: %zu units of %d blocks (%.1f MB of REP), best of %d, load average %.1f on %ld CPUs\n",
	       nunits, NBLOCKS, (double)s.n * 8 / 1e6, REPS, loadavg[0], sysconf(_SC_NPROCESSORS_ONLN));
	printf("  per unit: %.2f data refs, %.2f instruction fetches, %.2f REP slots\n",
	       (double)w1.st.refs / (double)w1.st.units, (double)w1.st.instrs / (double)w1.st.units,
	       (double)(s.n - w1.st.units) / (double)w1.st.units);
	printf("  REP bytes per data reference: %.2f (recovered form: %zu bytes, %.1fx larger)\n",
	       (double)s.n * 8 / (double)w1.st.refs, sizeof(struct rep_ref),
	       (double)sizeof(struct rep_ref) * (double)w1.st.refs / ((double)s.n * 8));
	printf("  slots per block: plain %.2f, optimised (stack + base) %.2f: %.2fx fewer\n",
	       (double)s.slots_plain / NBLOCKS, (double)s.slots_opt / NBLOCKS,
	       (double)s.slots_plain / (double)s.slots_opt);
	printf("  %-9s %12s %14s %12s %11s   %s\n", "", "M refs/s", "M data refs/s", "M units/s",
	       "MB/s REP", "(per CPU-second of the busiest worker)");
	printf("  %-9s %12.1f %14.1f %12.1f %11.0f   %.1f M refs/s\n", "1 worker", (double)all / t1 / 1e6,
	       (double)w1.st.refs / t1 / 1e6, (double)w1.st.units / t1 / 1e6, (double)s.n * 8 / t1 / 1e6,
	       (double)all / c1 / 1e6);
	printf("  %-9s %12.1f %14.1f %12.1f %11.0f   %.1f M refs/s per worker\n", "2 workers",
	       (double)all / t2 / 1e6, (double)w2.st.refs / t2 / 1e6, (double)w2.st.units / t2 / 1e6,
	       (double)s.n * 8 / t2 / 1e6, (double)all / 2 / c2 / 1e6);
	printf("  1 -> 2 workers: %.2fx wall (needs two idle CPUs)\n", t1 / t2);
	rep_table__free(s.t);
	free(s.w);
	return 0;
}
