/* rep.c: the static block table: checking blocks, copying them, and
 * compiling each into the op list recovery runs. */
#include "pipeline/rep-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread char rep_err[320];

const char *rep_errmsg(void)
{
	return rep_err;
}

int rep__fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rep_err, sizeof rep_err, fmt, ap);
	va_end(ap);
	return err;
}

int rep_table__new(struct rep_table **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : rep__fail(-ENOMEM, "out of memory");
}

static bool slot_ok(uint16_t s, uint16_t nslots)
{
	return s == REP_NO_SLOT || s < nslots;
}

static int check_ref(const struct rep_block *b, uint32_t j)
{
	const struct rep_mref *m = &b->refs[j];

	if (m->type < REP_REF_READ || m->type > REP_REF_MODIFY)
		return rep__fail(-EINVAL, "block %u reference %u: type %u is not read/write/modify",
				 b->id, j, m->type);
	if (m->size == 0)
		return rep__fail(-EINVAL, "block %u reference %u: size 0", b->id, j);
	if (m->scale != 1 && m->scale != 2 && m->scale != 4 && m->scale != 8)
		return rep__fail(-EINVAL, "block %u reference %u: scale %u is not 1, 2, 4 or 8",
				 b->id, j, m->scale);
	if (!slot_ok(m->base, b->nslots) || !slot_ok(m->index, b->nslots) ||
	    !slot_ok(m->seg, b->nslots) || !slot_ok(m->count, b->nslots) ||
	    ((m->flags & REP_MREF_COUNT_DIFF) &&
	     (m->count_end == REP_NO_SLOT || !slot_ok(m->count_end, b->nslots))) ||
	    ((m->flags & REP_MREF_DF_SLOT) &&
	     (m->rflags == REP_NO_SLOT || !slot_ok(m->rflags, b->nslots))))
		return rep__fail(-EINVAL, "block %u reference %u: names a slot beyond its %u slots",
				 b->id, j, b->nslots);
	if (m->flags & ~(unsigned)(REP_MREF_COUNT_DIFF | REP_MREF_DOWN | REP_MREF_DF_SLOT))
		return rep__fail(-EINVAL, "block %u reference %u: unknown flags %#x", b->id, j,
				 m->flags);
	if (m->flags && m->count == REP_NO_SLOT)
		return rep__fail(-EINVAL, "block %u reference %u: count and direction flags without a count slot",
				 b->id, j);
	if ((m->flags & REP_MREF_DOWN) && (m->flags & REP_MREF_DF_SLOT))
		return rep__fail(-EINVAL, "block %u reference %u: direction both known and read from rflags",
				 b->id, j);
	return 0;
}

/* The fields that only mean something with their flag, in one form. */
static void normalise(struct rep_mref *m)
{
	if (!(m->flags & REP_MREF_COUNT_DIFF))
		m->count_end = REP_NO_SLOT;
	if (!(m->flags & REP_MREF_DF_SLOT))
		m->rflags = REP_NO_SLOT;
	m->pad[0] = m->pad[1] = 0;
}

static bool same_iteration(const struct rep_mref *a, const struct rep_mref *b)
{
	struct rep_mref x = *a, y = *b;

	normalise(&x);
	normalise(&y);
	return x.count == y.count && x.flags == y.flags && x.count_end == y.count_end &&
	       x.rflags == y.rflags;
}

static int check_block(const struct rep_table *t, const struct rep_block *b)
{
	if (b->id == 0 || b->id > REP_MAX_BLOCK_ID)
		return rep__fail(-EINVAL, "block id %u not in 1..%u", b->id, REP_MAX_BLOCK_ID);
	if (rep__lookup(t, b->id))
		return rep__fail(-EEXIST, "block id %u is already in the table", b->id);
	if (b->nslots > REP_MAX_SLOTS)
		return rep__fail(-EINVAL, "block %u: %u slots, at most %u", b->id, b->nslots,
				 REP_MAX_SLOTS);
	if (b->flags)
		return rep__fail(-EINVAL, "block %u: unknown flags %#x", b->id, b->flags);
	if ((b->ninstrs && !b->instrs) || (b->nrefs && !b->refs))
		return rep__fail(-EINVAL, "block %u: missing instruction or reference array", b->id);
	for (uint32_t i = 0; i < b->ninstrs; i++)
		if (b->instrs[i].len == 0 || b->instrs[i].len > 15)
			return rep__fail(-EINVAL, "block %u instruction %u: length %u not in 1..15",
					 b->id, i, b->instrs[i].len);
	for (uint32_t j = 0; j < b->nrefs; j++) {
		int rc = check_ref(b, j);
		if (rc)
			return rc;
	}
	/* References sit on the listed instructions, in order; the references
	 * of one instruction share one count slot or have none. */
	uint32_t i = 0, run = 0;
	for (uint32_t j = 0; j < b->nrefs; j++) {
		const struct rep_mref *m = &b->refs[j];
		if (b->ninstrs) {
			while (i < b->ninstrs && b->instrs[i].pc != m->pc)
				i++;
			if (i == b->ninstrs)
				return rep__fail(-EINVAL,
						 "block %u reference %u: pc %#llx is not an instruction of the block (after the previous reference's)",
						 b->id, j, (unsigned long long)m->pc);
		}
		if (j > 0 && b->refs[j - 1].pc == m->pc && !same_iteration(&b->refs[j - 1], m))
			return rep__fail(-EINVAL,
					 "block %u reference %u: references of one instruction must share one count slot, its flags and slots",
					 b->id, j);
		run = j > 0 && b->refs[j - 1].pc == m->pc ? run + 1 : 1;
		if (m->count != REP_NO_SLOT && run > REP_MAX_REP_REFS)
			return rep__fail(-EINVAL,
					 "block %u reference %u: more than %d references on one rep-prefixed instruction",
					 b->id, j, REP_MAX_REP_REFS);
	}
	return 0;
}

static unsigned log2_scale(uint8_t s)
{
	return s == 8 ? 3 : s == 4 ? 2 : s == 2 ? 1 : 0;
}

static uint16_t pos(uint16_t slot)
{
	return slot == REP_NO_SLOT ? 0 : (uint16_t)(slot + 1);
}

static void op_ref(struct rep_op *o, const struct rep_mref *m)
{
	memset(o, 0, sizeof(*o));
	o->kind = REP_OP_REF;
	o->pc = m->pc;
	o->disp = m->disp;
	o->size = m->size;
	o->type = m->type;
	o->shift = (uint8_t)log2_scale(m->scale);
	o->base = pos(m->base);
	o->index = pos(m->index);
	o->seg = pos(m->seg);
}

/* Emit the ops of one instruction: refs[j0..j1) all have its pc. */
static uint32_t ops_for(struct rep_op *ops, uint32_t k, const struct rep_block *b,
			const struct rep_instr *in, uint32_t j0, uint32_t j1)
{
	bool grouped = j1 > j0 && b->refs[j0].count != REP_NO_SLOT;

	if (grouped) {
		struct rep_op *g = &ops[k++];
		memset(g, 0, sizeof(*g));
		g->kind = REP_OP_GROUP;
		g->pc = in ? in->pc : b->refs[j0].pc;
		g->size = in ? in->len : 0;
		g->type = in != NULL;
		g->count = pos(b->refs[j0].count);
		g->count_end = pos(b->refs[j0].count_end);	/* normalised: NO_SLOT if unused */
		g->rflags = pos(b->refs[j0].rflags);
		g->down = (b->refs[j0].flags & REP_MREF_DOWN) != 0;
		g->nrefs = j1 - j0;
	} else if (in) {
		struct rep_op *o = &ops[k++];
		memset(o, 0, sizeof(*o));
		o->kind = REP_OP_INSTR;
		o->pc = in->pc;
		o->size = in->len;
	}
	for (uint32_t j = j0; j < j1; j++)
		op_ref(&ops[k++], &b->refs[j]);
	return k;
}

/* The entry of one op: its record and the (at most two) slots it adds. */
static bool plan_entry(const struct rep_op *o, uint64_t hdr, struct rep_plan_ref *p)
{
	bool fetch = o->kind == REP_OP_INSTR;
	uint16_t base = fetch ? 0 : o->base, index = fetch ? 0 : o->index, seg = fetch ? 0 : o->seg;

	if (base && index && seg)
		return false;
	p->a = index ? (base ? base : seg) : base;
	p->b = index ? index : seg;
	p->scale = (uint16_t)(index ? 1u << o->shift : 1u);
	p->ref.pc = o->pc;
	/* an absent slot reads the header: take it off beforehand */
	p->ref.addr = (fetch ? o->pc : (uint64_t)o->disp) - (p->a ? 0 : hdr) -
		      (p->b ? 0 : hdr * p->scale);
	p->ref.size = o->size;
	p->ref.type = fetch ? REP_REF_INSTR : o->type;
	return true;
}

/* The fast plan (rep-internal.h) of a block without a group, from its ops;
 * none if a reference needs three slots. */
static int compile_plan(struct rep_blk *x)
{
	x->plan = calloc((size_t)x->nops + 1, sizeof(*x->plan));
	if (!x->plan)
		return rep__fail(-ENOMEM, "out of memory");
	for (uint32_t i = 0; i < x->nops; i++)
		if (!plan_entry(&x->ops[i], x->hdr, &x->plan[i])) {
			free(x->plan);
			x->plan = NULL;
			break;
		}
	return 0;
}

static int compile(struct rep_blk *x)
{
	const struct rep_block *b = &x->b;
	uint32_t k = 0, j = 0;

	x->ops = calloc((size_t)b->ninstrs + 2 * (size_t)b->nrefs + 1, sizeof(*x->ops));
	if (!x->ops)
		return rep__fail(-ENOMEM, "out of memory");
	if (b->ninstrs) {
		for (uint32_t i = 0; i < b->ninstrs; i++) {
			uint32_t j1 = j;
			while (j1 < b->nrefs && b->refs[j1].pc == b->instrs[i].pc)
				j1++;
			k = ops_for(x->ops, k, b, &b->instrs[i], j, j1);
			j = j1;
		}
	} else {
		while (j < b->nrefs) {
			uint32_t j1 = j + 1;
			while (j1 < b->nrefs && b->refs[j1].pc == b->refs[j].pc)
				j1++;
			k = ops_for(x->ops, k, b, NULL, j, j1);
			j = j1;
		}
	}
	x->nops = k;
	x->has_group = false;
	x->fixed_refs = x->fixed_instrs = 0;
	for (uint32_t i = 0; i < k; i++) {
		x->has_group |= x->ops[i].kind == REP_OP_GROUP;
		x->fixed_refs += x->ops[i].kind == REP_OP_REF;
		x->fixed_instrs += x->ops[i].kind == REP_OP_INSTR;
	}
	x->hdr = REP_S_WORD(b->id, b->nslots);
	return x->has_group ? 0 : compile_plan(x);
}

static int grow(struct rep_table *t, uint32_t id)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct rep_blk *nb = realloc(t->blks, cap * sizeof(*nb));
		if (!nb)
			return rep__fail(-ENOMEM, "out of memory");
		t->blks = nb;
		t->cap = cap;
	}
	if (id >= t->nidx) {
		uint32_t nidx = t->nidx ? t->nidx : 256;
		while (nidx <= id)
			nidx *= 2;
		uint32_t *ni = realloc(t->idx, (size_t)nidx * sizeof(*ni));
		if (!ni)
			return rep__fail(-ENOMEM, "out of memory");
		memset(ni + t->nidx, 0, (size_t)(nidx - t->nidx) * sizeof(*ni));
		t->idx = ni;
		t->nidx = nidx;
	}
	return 0;
}

/* The block's steps, if any is not 0, as word_step (b.steps then points
 * into it). */
static int copy_steps(struct rep_blk *x)
{
	const int64_t *steps = x->b.steps;
	uint32_t n = x->b.nslots, k = 0;

	x->b.steps = NULL;
	x->word_step = NULL;
	while (steps && k < n && !steps[k])
		k++;
	if (!steps || k == n)
		return 0;
	x->word_step = calloc((size_t)n + 1, sizeof(*x->word_step));
	if (!x->word_step)
		return rep__fail(-ENOMEM, "out of memory");
	memcpy(x->word_step + 1, steps, n * sizeof(*steps));
	x->b.steps = x->word_step + 1;
	return 0;
}

int rep_table__add(struct rep_table *t, const struct rep_block *b)
{
	int rc = check_block(t, b);

	if (rc || (rc = grow(t, b->id)))
		return rc;
	struct rep_blk *x = &t->blks[t->n];
	memset(x, 0, sizeof(*x));
	x->b = *b;
	struct rep_instr *in = calloc(b->ninstrs + 1, sizeof(*in));
	struct rep_mref *rf = calloc(b->nrefs + 1, sizeof(*rf));
	if (!in || !rf) {
		free(in);
		free(rf);
		return rep__fail(-ENOMEM, "out of memory");
	}
	if (b->ninstrs)
		memcpy(in, b->instrs, b->ninstrs * sizeof(*in));
	if (b->nrefs)
		memcpy(rf, b->refs, b->nrefs * sizeof(*rf));
	for (uint32_t j = 0; j < b->nrefs; j++)
		normalise(&rf[j]);
	x->b.instrs = in;
	x->b.refs = rf;
	if ((rc = copy_steps(x)) || (rc = compile(x))) {
		free(in);
		free(rf);
		free(x->word_step);
		free(x->ops);
		return rc;
	}
	t->n++;
	t->idx[b->id] = (uint32_t)t->n;
	return 0;
}

size_t rep_table__size(const struct rep_table *t)
{
	return t->n;
}

const struct rep_block *rep_table__block(const struct rep_table *t, uint32_t id)
{
	const struct rep_blk *x = rep__lookup(t, id);

	return x ? &x->b : NULL;
}

const struct rep_block *rep_table__nth(const struct rep_table *t, size_t i)
{
	return i < t->n ? &t->blks[i].b : NULL;
}

void rep_table__free(struct rep_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		free((void *)t->blks[i].b.instrs);
		free((void *)t->blks[i].b.refs);
		free(t->blks[i].ops);
		free(t->blks[i].plan);
		free(t->blks[i].word_step);
	}
	free(t->blks);
	free(t->idx);
	free(t);
}
