/* rep-build.c: from a block's decoded instructions to its table entry and
 * capture plan (plain, or with PiPA's slot-saving optimisations), and the
 * encoder that writes a unit for given register values. */
#include "pipeline/rep-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct builder {
	unsigned opts;
	uint32_t nslots;
	uint32_t ncaps, capcap;
	struct rep_capture *caps;
	/* Register -> slot holding its value since its capture, and how much
	 * rsp moved since (known statically), or -1. */
	int32_t slot[REP_NREGS];
	int64_t delta[REP_NREGS];
};

static bool reusable(const struct builder *b, uint8_t reg)
{
	return reg == REP_REG_RSP ? (b->opts & REP_OPT_STACK) : (b->opts & REP_OPT_BASE);
}

/* A new slot captured from reg before (or after) instruction insn. */
static int new_capture(struct builder *b, uint8_t reg, uint32_t insn, bool after, uint16_t *slot)
{
	if (b->nslots >= REP_MAX_SLOTS)
		return rep__fail(-E2BIG, "block needs more than %u slots; split it", REP_MAX_SLOTS);
	if (b->ncaps == b->capcap) {
		uint32_t cap = b->capcap ? 2 * b->capcap : 16;
		struct rep_capture *nc = realloc(b->caps, cap * sizeof(*nc));
		if (!nc)
			return rep__fail(-ENOMEM, "out of memory");
		b->caps = nc;
		b->capcap = cap;
	}
	*slot = (uint16_t)b->nslots++;
	b->caps[b->ncaps++] = (struct rep_capture){ .insn = insn, .slot = *slot, .reg = reg,
						    .after = after };
	return 0;
}

/* The slot for reg's value before instruction insn; *delta is what to add
 * to the slot to get that value. */
static int slot_for(struct builder *b, uint8_t reg, uint32_t insn, uint16_t *slot, int64_t *delta)
{
	*delta = 0;
	if (reg == REP_REG_NONE) {
		*slot = REP_NO_SLOT;
		return 0;
	}
	if (reusable(b, reg) && b->slot[reg] >= 0) {
		*slot = (uint16_t)b->slot[reg];
		*delta = b->delta[reg];
		return 0;
	}
	uint16_t s;
	int rc = new_capture(b, reg, insn, false, &s);
	if (rc)
		return rc;
	if (reusable(b, reg)) {
		b->slot[reg] = s;
		b->delta[reg] = 0;
	}
	*slot = s;
	return 0;
}

static bool gpr(uint8_t r)
{
	return r >= REP_REG_RAX && r <= REP_REG_R15;
}

static int check_operand(const struct rep_insn *in, uint32_t i, const struct rep_operand *o)
{
	if (o->type < REP_REF_READ || o->type > REP_REF_MODIFY)
		return rep__fail(-EINVAL, "instruction %u (%#llx): operand type %u", i,
				 (unsigned long long)in->pc, o->type);
	if (o->size == 0)
		return rep__fail(-EINVAL, "instruction %u (%#llx): operand size 0", i,
				 (unsigned long long)in->pc);
	if ((o->base && !gpr(o->base)) || (o->index && !gpr(o->index)) ||
	    (o->count && !gpr(o->count)))
		return rep__fail(-EINVAL, "instruction %u (%#llx): base, index and count must be general registers",
				 i, (unsigned long long)in->pc);
	if (o->index == REP_REG_RSP)
		return rep__fail(-EINVAL, "instruction %u (%#llx): rsp cannot be an index", i,
				 (unsigned long long)in->pc);
	if (o->seg && o->seg != REP_REG_FSBASE && o->seg != REP_REG_GSBASE)
		return rep__fail(-EINVAL, "instruction %u (%#llx): segment must be fs or gs base", i,
				 (unsigned long long)in->pc);
	if (o->count != in->ops[0].count || o->flags != in->ops[0].flags)
		return rep__fail(-EINVAL, "instruction %u (%#llx): operands disagree on the count register or its flags",
				 i, (unsigned long long)in->pc);
	if (o->flags & ~(unsigned)(REP_OPF_COUNT_DIFF | REP_OPF_DOWN | REP_OPF_DF))
		return rep__fail(-EINVAL, "instruction %u (%#llx): unknown operand flags %#x", i,
				 (unsigned long long)in->pc, o->flags);
	if (o->flags && !o->count)
		return rep__fail(-EINVAL, "instruction %u (%#llx): count and direction flags without a rep count",
				 i, (unsigned long long)in->pc);
	if ((o->flags & REP_OPF_DOWN) && (o->flags & REP_OPF_DF))
		return rep__fail(-EINVAL, "instruction %u (%#llx): direction both known and unknown", i,
				 (unsigned long long)in->pc);
	if (in->nops > REP_MAX_REP_REFS && o->count)
		return rep__fail(-EINVAL, "instruction %u (%#llx): more than %d operands with a rep count",
				 i, (unsigned long long)in->pc, REP_MAX_REP_REFS);
	if (o->index && o->scale != 1 && o->scale != 2 && o->scale != 4 && o->scale != 8)
		return rep__fail(-EINVAL, "instruction %u (%#llx): scale %u", i,
				 (unsigned long long)in->pc, o->scale);
	return 0;
}

/* first: the instruction's first reference with a count, NULL if none yet.
 * The count is the instruction's, captured once for all its references. */
static int add_operand(struct builder *b, const struct rep_insn *in, uint32_t i,
		       const struct rep_operand *o, struct rep_mref *m, const struct rep_mref *first)
{
	int64_t d;
	int rc;

	memset(m, 0, sizeof(*m));
	m->pc = in->pc;
	m->type = o->type;
	m->size = o->size;
	m->scale = o->index ? o->scale : 1;
	m->disp = o->disp;
	if ((rc = slot_for(b, o->base, i, &m->base, &d)))
		return rc;
	m->disp = (int64_t)((uint64_t)m->disp + (uint64_t)d);
	if ((rc = slot_for(b, o->index, i, &m->index, &d)))
		return rc;
	m->disp = (int64_t)((uint64_t)m->disp + (uint64_t)d * m->scale);
	if ((rc = slot_for(b, o->seg, i, &m->seg, &d)))
		return rc;
	m->disp = (int64_t)((uint64_t)m->disp + (uint64_t)d);
	if (first) {
		m->count = first->count;
		m->flags = first->flags;
		m->count_end = first->count_end;
		m->rflags = first->rflags;
		return 0;
	}
	m->count_end = m->rflags = REP_NO_SLOT;
	if ((rc = slot_for(b, o->count, i, &m->count, &d)))
		return rc;
	if (d)	/* only rsp moves by known amounts, and rsp is never a count */
		return rep__fail(-EINVAL, "instruction %u: count register moved", i);
	if (o->flags & REP_OPF_DOWN)
		m->flags |= REP_MREF_DOWN;
	/* rflags (captured before) ahead of the count after: the plan stays
	 * in instruction order, each instruction's captures before it ahead
	 * of those after it, as the instrumenter lays them out */
	if (o->flags & REP_OPF_DF) {
		if ((rc = slot_for(b, REP_REG_RFLAGS, i, &m->rflags, &d)))
			return rc;
		m->flags |= REP_MREF_DF_SLOT;
	}
	if (o->flags & REP_OPF_COUNT_DIFF) {
		/* Never reused: the register's value after, not before. */
		if ((rc = new_capture(b, o->count, i, true, &m->count_end)))
			return rc;
		m->flags |= REP_MREF_COUNT_DIFF;
	}
	return 0;
}

/* What the instruction does to the registers after it executes. */
static void after(struct builder *b, const struct rep_insn *in)
{
	for (unsigned r = 1; r < REP_NREGS; r++)
		if (in->clobbers & (1u << r))
			b->slot[r] = -1;
	if (in->rsp_delta && b->slot[REP_REG_RSP] >= 0) {
		if (b->opts & REP_OPT_STACK)
			b->delta[REP_REG_RSP] += in->rsp_delta;
		else
			b->slot[REP_REG_RSP] = -1;
	}
}

int rep_build(const struct rep_insn *insns, uint32_t n, uint32_t id, unsigned opts,
	      struct rep_built *out)
{
	struct builder b = { .opts = opts };
	uint32_t nrefs = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (opts & ~(unsigned)(REP_OPT_STACK | REP_OPT_BASE))
		return rep__fail(-EINVAL, "unknown build options %#x", opts);
	for (unsigned r = 0; r < REP_NREGS; r++)
		b.slot[r] = -1;
	for (uint32_t i = 0; i < n; i++) {
		if (insns[i].nops > REP_MAX_OPERANDS)
			return rep__fail(-EINVAL, "instruction %u: %u memory operands, at most %d", i,
					 insns[i].nops, REP_MAX_OPERANDS);
		for (uint32_t k = 0; k < insns[i].nops; k++)
			if ((rc = check_operand(&insns[i], i, &insns[i].ops[k])))
				return rc;
		nrefs += insns[i].nops;
	}
	out->instrs = calloc(n + 1, sizeof(*out->instrs));
	out->refs = calloc(nrefs + 1, sizeof(*out->refs));
	if (!out->instrs || !out->refs) {
		rc = rep__fail(-ENOMEM, "out of memory");
		goto err;
	}
	uint32_t j = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct rep_insn *in = &insns[i];
		out->instrs[i] = (struct rep_instr){ .pc = in->pc, .len = in->len };
		const struct rep_mref *first = NULL;
		for (uint32_t k = 0; k < in->nops; k++, j++) {
			if ((rc = add_operand(&b, in, i, &in->ops[k], &out->refs[j], first)))
				goto err;
			if (!first && in->ops[k].count)
				first = &out->refs[j];
		}
		after(&b, in);
	}
	out->caps = b.caps;
	out->ncaps = b.ncaps;
	out->block = (struct rep_block){
		.id = id, .nslots = (uint16_t)b.nslots, .pc = n ? insns[0].pc : 0,
		.ninstrs = n, .nrefs = nrefs, .instrs = out->instrs, .refs = out->refs,
	};
	return 0;
err:
	free(b.caps);
	rep_built__free(out);
	return rc;
}

void rep_built__free(struct rep_built *b)
{
	free(b->instrs);
	free(b->refs);
	free(b->caps);
	memset(b, 0, sizeof(*b));
}

int rep_encode(const struct rep_built *b, const uint64_t (*regs)[REP_NREGS], uint64_t *out,
	       size_t cap)
{
	size_t len = 1 + (size_t)b->block.nslots;

	if (cap < len)
		return rep__fail(-ENOSPC, "unit of %zu words, room for %zu", len, cap);
	out[0] = REP_S_WORD(b->block.id, b->block.nslots);
	for (uint32_t c = 0; c < b->ncaps; c++)
		out[1 + b->caps[c].slot] = regs[b->caps[c].insn + b->caps[c].after][b->caps[c].reg];
	return (int)len;
}
