/* check_csim-model.h: a deliberately naive cache model (timestamps, linear
 * search, modulo sets) and random reference streams, shared by the
 * simulator and splitter suites. The model is written from the rules, not
 * from csim's code, so that agreement means something. */
#ifndef PADRONE_CHECK_CSIM_MODEL_H
#define PADRONE_CHECK_CSIM_MODEL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

struct mcache {
	uint64_t sets, assoc, lbits;
	uint64_t *tag, *stamp;	/* stamp 0: invalid way */
	uint64_t clock;
	uint64_t mru_hits;	/* hits on the line the set used last */
};

#define MODEL_PCS 256

struct model {
	struct mcache lv[CSIM_NLEVELS];
	int next[CSIM_NLEVELS];
	bool cg;
	uint64_t pcs[MODEL_PCS];
	struct csim_counts rows[MODEL_PCS];
	size_t npcs;
	struct csim_counts tot;
};

static inline void model_init(struct model *m, const struct csim_config *cfg)
{
	memset(m, 0, sizeof(*m));
	m->cg = cfg->cachegrind;
	for (int i = 0; i < CSIM_NLEVELS; i++) {
		const struct csim_geom *g = &cfg->level[i];
		m->next[i] = -1;
		if (!g->size)
			continue;
		m->lv[i].assoc = g->assoc;
		m->lv[i].sets = g->size / g->assoc / g->line;
		m->lv[i].lbits = (uint64_t)__builtin_ctz(g->line);
		m->lv[i].tag = calloc(m->lv[i].sets * g->assoc, 8);
		m->lv[i].stamp = calloc(m->lv[i].sets * g->assoc, 8);
	}
	m->next[CSIM_I1] = m->next[CSIM_D1] = cfg->level[CSIM_L2].size ? CSIM_L2 : CSIM_LL;
	if (cfg->level[CSIM_L2].size)
		m->next[CSIM_L2] = CSIM_LL;
}

static inline void model_free(struct model *m)
{
	for (int i = 0; i < CSIM_NLEVELS; i++) {
		free(m->lv[i].tag);
		free(m->lv[i].stamp);
	}
}

/* true on a miss */
static inline bool mref(struct mcache *c, uint64_t line)
{
	uint64_t s = line % c->sets, *t = c->tag + s * c->assoc, *a = c->stamp + s * c->assoc;
	uint64_t victim = 0;
	for (uint64_t w = 0; w < c->assoc; w++)
		if (a[w] && t[w] == line) {
			bool last = true;
			for (uint64_t v = 0; v < c->assoc; v++)
				last &= a[v] <= a[w];
			c->mru_hits += last;
			a[w] = ++c->clock;
			return false;
		}
	for (uint64_t w = 0; w < c->assoc; w++) {
		if (!a[w]) {
			victim = w;
			break;
		}
		if (a[w] < a[victim])
			victim = w;
	}
	t[victim] = line;
	a[victim] = ++c->clock;
	return true;
}

static inline struct csim_counts *model_row(struct model *m, uint64_t pc)
{
	for (size_t i = 0; i < m->npcs; i++)
		if (m->pcs[i] == pc)
			return &m->rows[i];
	if (m->npcs == MODEL_PCS)
		abort();
	m->pcs[m->npcs] = pc;
	return &m->rows[m->npcs++];
}

/* Per-line rule: each line is an access; a miss brings that line's bytes
 * from the next level. */
static inline void model_lines(struct model *m, int lv, uint64_t lo, uint64_t hi, int kind,
			       struct csim_counts *c)
{
	struct mcache *mc = &m->lv[lv];
	for (uint64_t l = lo >> mc->lbits; l <= hi >> mc->lbits; l++) {
		c->access[lv][kind]++;
		if (mref(mc, l)) {
			c->miss[lv][kind]++;
			if (m->next[lv] >= 0)
				model_lines(m, m->next[lv], l << mc->lbits,
					    ((l + 1) << mc->lbits) - 1, kind, c);
		}
	}
}

static inline void model_ref(struct model *m, const struct rep_ref *r)
{
	struct csim_counts *c = model_row(m, r->pc);
	int first = r->type == REP_REF_INSTR ? CSIM_I1 : CSIM_D1;
	int kind = r->type == REP_REF_INSTR ? CSIM_INSTR
		   : r->type == REP_REF_WRITE ? CSIM_WRITE : CSIM_READ;
	uint64_t size = r->size;

	switch (r->type) {
	case REP_REF_INSTR: c->instr++; c->refs[CSIM_INSTR]++; break;
	case REP_REF_READ: c->reads++; c->refs[CSIM_READ]++; break;
	case REP_REF_WRITE: c->writes++; c->refs[CSIM_WRITE]++; break;
	default:
		c->modifies++;
		c->refs[CSIM_READ]++;
		if (!m->cg)
			c->refs[CSIM_WRITE]++;
	}
	if (!m->cg) {
		model_lines(m, first, r->addr, r->addr + size - 1, kind, c);
		if (r->type == REP_REF_MODIFY)
			model_lines(m, first, r->addr, r->addr + size - 1, CSIM_WRITE, c);
		return;
	}
	/* cachegrind: dirty-helper sizes cut to 16; one access per level;
	 * miss if any line missed; all lines updated; next level with the
	 * same address and size. */
	if (r->type != REP_REF_INSTR && size > 16 && size != 32 && size != 64)
		size = 16;
	for (int lv = first; lv >= 0; lv = m->next[lv]) {
		struct mcache *mc = &m->lv[lv];
		bool miss = false;
		c->access[lv][kind]++;
		for (uint64_t l = r->addr >> mc->lbits; l <= (r->addr + size - 1) >> mc->lbits; l++)
			miss |= mref(mc, l);
		if (!miss)
			break;
		c->miss[lv][kind]++;
	}
}

/* xorshift64* */
static inline uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* A stream with loops of instructions (some crossing lines) and data
 * accesses of every type and size, many unaligned (crossing lines), over a
 * working set of about span bytes; npcs distinct instruction addresses. */
static inline void make_stream(struct rep_ref *out, size_t n, uint64_t seed, uint64_t span,
			       unsigned npcs)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1, pc = 0x400000;
	size_t i = 0;
	static const uint32_t dsizes[] = { 1, 2, 4, 8, 16, 32, 10, 64, 512, 3 };

	while (i < n) {
		uint32_t ilen = 1 + (uint32_t)(rnd(&s) % 15);
		uint64_t k = rnd(&s) % npcs;
		pc = 0x400000 + k * 13;	/* odd stride: some cross lines */
		out[i++] = (struct rep_ref){ .pc = pc, .addr = pc, .size = ilen, .type = REP_REF_INSTR };
		unsigned nd = (unsigned)(rnd(&s) % 3);
		for (unsigned d = 0; d < nd && i < n; d++) {
			uint64_t x = rnd(&s);
			uint64_t base = 0x10000000 + (x % span);
			if (x & 0x100000)	/* aligned half of the time */
				base &= ~7ull;
			uint32_t size = dsizes[(x >> 32) % 10];
			uint8_t type = (uint8_t)(1 + (x >> 40) % 3);
			out[i++] = (struct rep_ref){ .pc = pc, .addr = base, .size = size, .type = type };
		}
	}
}

/* A stream shaped like a program's hot loops, where most references hit
 * the line their set used last (csim's fast path). 16 loops, as a
 * program's code, each of 2..12 instructions at consecutive PCs (some
 * crossing lines), each instruction making 0..2 data references with a
 * stride of its own (0: the same address each time, 1..64 bytes, or
 * backwards), size and type. A run of a loop takes 1..300 iterations over
 * fresh arrays anywhere in span, some unaligned (crossing lines); now and
 * then a reference lands anywhere instead. At most 16 * 12 PCs. */
struct loop_walk {
	int64_t stride;
	uint32_t size;
	uint8_t type;
};

struct loop_code {
	uint64_t pc;
	unsigned ninstr;
	uint32_t ilen[12];
	unsigned nd[12];
	struct loop_walk walk[12][2];
};

static inline void make_loop_code(struct loop_code *l, unsigned which, uint64_t *s)
{
	static const int64_t strides[] = { 0, 1, 4, 8, 8, 16, 64, -8, 24, 3 };
	static const uint32_t dsizes[] = { 1, 2, 4, 8, 8, 8, 16, 32, 64, 10 };

	l->pc = 0x400000 + which * 0x100 + rnd(s) % 64;
	l->ninstr = 2 + (unsigned)(rnd(s) % 11);
	for (unsigned k = 0; k < l->ninstr; k++) {
		l->ilen[k] = 1 + (uint32_t)(rnd(s) % 15);
		l->nd[k] = (unsigned)(rnd(s) % 3);
		for (unsigned d = 0; d < l->nd[k]; d++) {
			uint64_t x = rnd(s);
			l->walk[k][d] = (struct loop_walk){ strides[x % 10], dsizes[(x >> 8) % 10],
							    (uint8_t)(1 + (x >> 16) % 3) };
		}
	}
}

static inline void make_loop_stream(struct rep_ref *out, size_t n, uint64_t seed, uint64_t span)
{
	struct loop_code code[16];
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1, base[12][2];
	size_t i = 0;

	for (unsigned k = 0; k < 16; k++)
		make_loop_code(&code[k], k, &s);
	while (i < n) {
		const struct loop_code *l = &code[rnd(&s) % 16];
		unsigned iters = 1 + (unsigned)(rnd(&s) % 300);
		for (unsigned k = 0; k < l->ninstr; k++)
			for (unsigned d = 0; d < l->nd[k]; d++) {
				uint64_t x = rnd(&s);
				base[k][d] = 0x10000000 + x % span;
				if (x & (1ull << 63))	/* aligned half of the time */
					base[k][d] &= ~7ull;
			}
		for (unsigned it = 0; it < iters && i < n; it++) {
			uint64_t pc = l->pc;
			for (unsigned k = 0; k < l->ninstr && i < n; pc += l->ilen[k], k++) {
				out[i++] = (struct rep_ref){ .pc = pc, .addr = pc, .size = l->ilen[k],
							     .type = REP_REF_INSTR };
				for (unsigned d = 0; d < l->nd[k] && i < n; d++) {
					const struct loop_walk *w = &l->walk[k][d];
					uint64_t a = base[k][d] + (uint64_t)(w->stride * (int64_t)it);
					if (rnd(&s) % 64 == 0)
						a = 0x10000000 + rnd(&s) % span;
					out[i++] = (struct rep_ref){ .pc = pc, .addr = a, .size = w->size,
								     .type = w->type };
				}
			}
		}
	}
}

#endif
