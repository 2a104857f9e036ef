/* check_rep-gen.h: random REP blocks, their register values and the
 * references they really make (written from the instructions, not from
 * recovery's code), streams of random units with their truth, and helpers to
 * collect and compare references; shared by the REP and recovery-pool
 * suites. */
#ifndef PADRONE_CHECK_REP_GEN_H
#define PADRONE_CHECK_REP_GEN_H

#include "tests/lib/tu.h"
#include "pipeline/rep.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t seed_from_env(void)
{
	const char *s = getenv("PADRONE_SEED");
	return s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

static inline uint64_t rnd(uint64_t *s)	/* splitmix64 */
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static inline unsigned rnd_below(uint64_t *s, unsigned n)
{
	return (unsigned)(rnd(s) % n);
}

struct refvec {
	struct rep_ref *v;
	size_t n, cap;
};

static inline void refvec_push(struct refvec *rv, uint64_t pc, uint64_t addr, uint32_t size, uint8_t type)
{
	if (rv->n == rv->cap) {
		rv->cap = rv->cap ? 2 * rv->cap : 256;
		rv->v = realloc(rv->v, rv->cap * sizeof(*rv->v));
		ck_assert_ptr_nonnull(rv->v);
	}
	rv->v[rv->n++] = (struct rep_ref){ .pc = pc, .addr = addr, .size = size, .type = type };
}

static inline void sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct refvec *rv = arg;
	for (size_t i = 0; i < n; i++)
		refvec_push(rv, refs[i].pc, refs[i].addr, refs[i].size, refs[i].type);
}

static inline bool refvec_eq(const struct refvec *a, const struct refvec *b, size_t *where)
{
	size_t n = a->n < b->n ? a->n : b->n;
	for (size_t i = 0; i < n; i++)
		if (a->v[i].pc != b->v[i].pc || a->v[i].addr != b->v[i].addr ||
		    a->v[i].size != b->v[i].size || a->v[i].type != b->v[i].type) {
			*where = i;
			return false;
		}
	*where = n;
	return a->n == b->n;
}

/* Recover words with a fresh recoverer over t. */
static inline int recover_all(const struct rep_table *t, const uint64_t *w, size_t n, struct refvec *out)
{
	struct rep_recover *r;
	ck_assert_int_eq(rep_recover__new(t, sink, out, &r), 0);
	int rc = rep_recover__feed(r, w, n, 0);
	rep_recover__flush(r);
	rep_recover__free(r);
	return rc;
}

/* ------------------------------------------------------------ random blocks */

#define MAXI 24
struct rblock {
	struct rep_insn in[MAXI];
	uint32_t n;
};

static const uint8_t gprs[] = { REP_REG_RAX, REP_REG_RBX, REP_REG_RCX, REP_REG_RDX, REP_REG_RSI,
				REP_REG_RDI, REP_REG_RBP, REP_REG_R8, REP_REG_R12, REP_REG_R15 };

static inline uint8_t rnd_gpr(uint64_t *s)
{
	return gprs[rnd_below(s, sizeof gprs)];
}

static inline void gen_operand(uint64_t *s, struct rep_operand *o, uint8_t count)
{
	static const uint32_t sizes[] = { 1, 2, 4, 8, 16, 32 };
	memset(o, 0, sizeof(*o));
	o->type = (uint8_t)(1 + rnd_below(s, 3));
	o->size = sizes[rnd_below(s, 6)];
	o->count = count;
	unsigned k = rnd_below(s, 10);
	if (k < 4)
		o->base = REP_REG_RSP;	/* stack traffic: push/pop, spills */
	else if (k < 9)
		o->base = rnd_gpr(s);	/* else absolute / rip-relative */
	if (!count && rnd_below(s, 4) == 0) {
		o->index = rnd_gpr(s);
		o->scale = (uint8_t)(1u << rnd_below(s, 4));
	}
	if (!count && rnd_below(s, 12) == 0)
		o->seg = rnd_below(s, 2) ? REP_REG_FSBASE : REP_REG_GSBASE;
	o->disp = rnd_below(s, 3) == 0 ? (int64_t)rnd(s) : (int64_t)rnd_below(s, 512) - 256;
	if (count)	/* a string instruction runs over user addresses, up or down */
		o->disp = 4096 + (int64_t)rnd_below(s, 512);
}

static bool gen_no_rep;	/* corrupt-file tests: a flipped count would run for ages */

static inline void gen_block(uint64_t *s, struct rblock *b)
{
	uint64_t pc = 0x400000 + (rnd(s) & 0xfffff);

	b->n = 1 + rnd_below(s, MAXI);
	for (uint32_t i = 0; i < b->n; i++) {
		struct rep_insn *in = &b->in[i];
		memset(in, 0, sizeof(*in));
		in->pc = pc;
		in->len = 1 + rnd_below(s, 15);
		pc += in->len;
		unsigned kind = rnd_below(s, 10);
		if (kind < 3) {		/* push or pop */
			in->rsp_delta = rnd_below(s, 2) ? -8 : 8;
			in->nops = 1;
			gen_operand(s, &in->ops[0], 0);
			in->ops[0].base = REP_REG_RSP;
			in->ops[0].index = 0;
			in->ops[0].seg = 0;
			in->ops[0].disp = in->rsp_delta < 0 ? -8 : 0;
		} else if (kind == 3 && !gen_no_rep) {
			/* rep movs / stos, or repe / repne cmps / scas (they stop
			 * early: rcx after as well); the direction known, unknown
			 * (rflags captured) or clear. */
			static const uint8_t dir[] = { 0, REP_OPF_DOWN, REP_OPF_DF };
			uint8_t fl = (uint8_t)((rnd_below(s, 2) ? REP_OPF_COUNT_DIFF : 0) |
					       dir[rnd_below(s, 3)]);
			in->nops = 1 + rnd_below(s, 2);
			for (uint32_t k = 0; k < in->nops; k++) {
				gen_operand(s, &in->ops[k], REP_REG_RCX);
				in->ops[k].flags = fl;
			}
			in->clobbers = 1u << REP_REG_RCX | 1u << REP_REG_RSI | 1u << REP_REG_RDI;
		} else {
			in->nops = rnd_below(s, REP_MAX_OPERANDS + 1);
			for (uint32_t k = 0; k < in->nops; k++)
				gen_operand(s, &in->ops[k], 0);
			if (rnd_below(s, 4) == 0)
				in->rsp_delta = 8 * ((int32_t)rnd_below(s, 9) - 4);
		}
		if (rnd_below(s, 3) == 0)
			in->clobbers |= 1u << rnd_gpr(s);
		if (rnd_below(s, 40) == 0)
			in->clobbers |= 1u << REP_REG_RSP;	/* mov rsp, rbp */
		if (rnd_below(s, 4) == 0)
			in->clobbers |= 1u << REP_REG_RFLAGS;	/* std, cld, popf */
	}
}

static inline bool count_diff(const struct rep_insn *in)
{
	return in->nops && in->ops[0].count && (in->ops[0].flags & REP_OPF_COUNT_DIFF);
}

static inline uint64_t reg_value(uint64_t *s, unsigned r)
{
	/* rcx stays small: it counts rep iterations; others are user addresses
	 * (string instructions run over them) or flags. */
	return r == REP_REG_RCX ? rnd_below(s, 4) : rnd(s) >> 17;
}

/* Register values before each instruction, as a run of the block, and
 * after the last (regs[n]). A repe/repne instruction ran some of its rcx
 * iterations: rcx after it is that much lower. */
static inline void gen_regs(uint64_t *s, const struct rblock *b, uint64_t (*regs)[REP_NREGS])
{
	for (unsigned r = 1; r < REP_NREGS; r++)
		regs[0][r] = reg_value(s, r);
	for (uint32_t i = 0; i < b->n; i++) {
		memcpy(regs[i + 1], regs[i], sizeof regs[i]);
		regs[i + 1][REP_REG_RSP] += (uint64_t)(int64_t)b->in[i].rsp_delta;
		for (unsigned r = 1; r < REP_NREGS; r++)
			if (b->in[i].clobbers & (1u << r))
				regs[i + 1][r] = reg_value(s, r);
		if (count_diff(&b->in[i]))
			regs[i + 1][REP_REG_RCX] =
				regs[i][REP_REG_RCX] - rnd_below(s, (unsigned)regs[i][REP_REG_RCX] + 1);
	}
}

/* What the block really touched, straight from the registers: a string
 * instruction ran (rcx before - rcx after) iterations, DF (bit 10 of
 * rflags, or known) sending it down, and was fetched as valgrind counts. */
static inline void truth(const struct rblock *b, const uint64_t (*regs)[REP_NREGS], struct refvec *out)
{
	for (uint32_t i = 0; i < b->n; i++) {
		const struct rep_insn *in = &b->in[i];
		const uint64_t *v = regs[i];
		bool rep = in->nops && in->ops[0].count;
		uint64_t cnt = rep ? v[in->ops[0].count] : 1;
		if (count_diff(in))
			cnt -= regs[i + 1][in->ops[0].count];
		bool down = rep && ((in->ops[0].flags & REP_OPF_DOWN) ||
				    ((in->ops[0].flags & REP_OPF_DF) && (v[REP_REG_RFLAGS] & 0x400)));
		for (uint64_t it = 0; it < cnt; it++) {
			refvec_push(out, in->pc, in->pc, in->len, REP_REF_INSTR);
			for (uint32_t k = 0; k < in->nops; k++) {
				const struct rep_operand *o = &in->ops[k];
				uint64_t a = (uint64_t)o->disp + (o->base ? v[o->base] : 0) +
					     (o->index ? v[o->index] * o->scale : 0) +
					     (o->seg ? v[o->seg] : 0);
				a = down ? a - it * o->size : a + it * o->size;
				refvec_push(out, in->pc, a, o->size, o->type);
			}
		}
		/* as valgrind counts: once more to find rcx at 0, unless a
		 * repe/repne one stopped on its condition with rcx above 0 */
		if (rep && (cnt == 0 || !count_diff(in) || regs[i + 1][in->ops[0].count] == 0))
			refvec_push(out, in->pc, in->pc, in->len, REP_REF_INSTR);
	}
}

/* A stream of many random units of a random table, and its truth. */
struct corpus {
	struct rep_table *t;
	uint64_t *w;
	size_t n;
	struct refvec want;
};

static inline void make_corpus(uint64_t *s, struct corpus *c, int nblocks, int nunits)
{
	uint64_t regs[MAXI + 1][REP_NREGS];
	struct rblock *bs = calloc((size_t)nblocks, sizeof(*bs));
	struct rep_built *built = calloc((size_t)nblocks, sizeof(*built));

	memset(c, 0, sizeof(*c));
	ck_assert_int_eq(rep_table__new(&c->t), 0);
	for (int i = 0; i < nblocks; i++) {
		gen_block(s, &bs[i]);
		ck_assert_int_eq(rep_build(bs[i].in, bs[i].n, (uint32_t)i + 1,
					   REP_OPT_STACK | REP_OPT_BASE, &built[i]), 0);
		ck_assert_int_eq(rep_table__add(c->t, &built[i].block), 0);
	}
	c->w = malloc((size_t)nunits * (1 + MAXI * REP_MAX_OPERANDS * 4) * 8);
	for (int u = 0; u < nunits; u++) {
		int i = (int)rnd_below(s, (unsigned)nblocks);
		gen_regs(s, &bs[i], regs);
		truth(&bs[i], (const uint64_t (*)[REP_NREGS])regs, &c->want);
		c->n += (size_t)rep_encode(&built[i], (const uint64_t (*)[REP_NREGS])regs, c->w + c->n,
					   1 + MAXI * REP_MAX_OPERANDS * 4);
	}
	for (int i = 0; i < nblocks; i++)
		rep_built__free(&built[i]);
	free(built);
	free(bs);
}

static inline void free_corpus(struct corpus *c)
{
	rep_table__free(c->t);
	free(c->w);
	free(c->want.v);
}

/* A unit boundary near the middle of the corpus. */
static inline size_t unit_boundary(const struct corpus *c)
{
	size_t at = 0;
	while (at < c->n / 2)
		at += 1 + (c->w[at] >> 48);
	return at;
}

#endif
