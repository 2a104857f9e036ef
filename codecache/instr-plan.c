/* instr-plan.c: the plan of an instrumented copy (issue 10; the design is
 * told in instr.c): the function's CFG, its instructions decoded, cut into
 * units with their REP capture plans and table, and the checks that refuse
 * what the copy cannot do. Nothing here touches the target. */
#include "codecache/instr.h"
#include "cfg/cfg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int read_blocks(struct cc_instr *in)
{
	size_t nb = cfg_function__block_count(in->cfg), cap = 0;
	char why[200];

	for (size_t i = 0; i < nb; i++) {
		const struct cfg_block *b = cfg_function__block(in->cfg, i);
		size_t len = b->end - b->start;
		uint8_t *buf = malloc(len + 16);
		if (!buf)
			return cc__fail(in->c, CC_PHASE_LOAD, -ENOMEM, "out of memory");
		memset(buf, 0, len + 16);
		int rc = cc__read(in->c, b->start, buf, len);
		for (size_t at = 0; rc == 0 && at < len;) {
			if ((rc = cc__grow(&in->insns, &cap, in->ninsns + 1, sizeof *in->insns, 256)))
				break;
			struct ci_insn *ci = &in->insns[in->ninsns];
			if ((rc = cc__instr_decode(buf + at, len - at, b->start + at, ci, why,
						   sizeof why)) < 0) {
				rc = cc__fail(in->c, CC_PHASE_LOAD, rc, "cannot instrument %s: %s",
					      in->name, why);
				break;
			}
			at += ci->len;
			in->ninsns++;
		}
		free(buf);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static bool ends_unit(const struct ci_insn *ci)
{
	return ci->kind == CI_CALL || ci->kind == CI_ICALL;
}

/* A unit that says only which block ran: its header, no slots; the
 * table still lists its instructions (the fetches are known). */
static void forget_addresses(struct rep_built *b)
{
	b->ncaps = 0;
	b->block.nslots = 0;
	b->block.nrefs = 0;
}

/* The most the steps taken across by a capture may add up to: a disp32
 * (instr-emit.c steps the register back with lea). */
#define MAX_STEPS (1 << 30)

/* Can slot's one capture c be written at the commit from its register? Not
 * rflags or a segment base (no register to store from), nor a register that
 * an instruction run between the capture and the commit writes, unless by a
 * known step (add $1 of a loop's index, a push's rsp - 8): then *step is
 * what they add, for the commit to take back. rax, rcx and rsp, which the
 * commit moves, it reads where it saved them or steps back. */
static bool direct_capture(const struct cc_instr *in, const struct unit *u,
			   const struct rep_capture *c, int32_t *step)
{
	uint32_t last = u->n - 1;
	uint32_t start = c->after ? c->insn + 1 : c->insn;
	uint32_t end = cc__instr_transfers(&in->insns[u->first + last]) ? last : last + 1;
	int64_t sum = 0;

	if (c->reg < REP_REG_RAX || c->reg > REP_REG_R15 || start > end)
		return false;
	for (uint32_t k = start; k < end; k++) {
		const struct ci_insn *ci = &in->insns[u->first + k];
		if (c->reg == REP_REG_RSP && !(ci->rep.clobbers & (1u << c->reg)))
			sum += ci->rep.rsp_delta;
		else if (!(ci->rep.clobbers & (1u << c->reg)))
			continue;
		else if (ci->step_reg == c->reg)
			sum += ci->step;
		else
			return false;
		if (sum > MAX_STEPS || sum < -MAX_STEPS)
			return false;
	}
	*step = (int32_t)sum;
	return true;
}

/* Is slot only a base or an index of addresses (not a count, the rflags
 * or a segment base, which the table reads as they are)? */
static bool slot_only_addresses(const struct rep_built *b, uint16_t slot)
{
	for (uint32_t i = 0; i < b->block.nrefs; i++) {
		const struct rep_mref *m = &b->refs[i];
		if (m->seg == slot || m->count == slot || m->count_end == slot || m->rflags == slot)
			return false;
	}
	return true;
}

/* A direct slot used only in addresses holds its register as the commit
 * finds it: the steps taken since the capture come off the displacements
 * of the references using it (mod 2^64, as recovery adds), not off the
 * value, which saves the commit a lea. */
static void fold_step(struct unit *u, uint16_t slot)
{
	struct rep_built *b = &u->b;
	uint64_t step = (uint64_t)(int64_t)u->direct_step[slot];

	if (!step || !slot_only_addresses(b, slot))
		return;
	for (uint32_t i = 0; i < b->block.nrefs; i++) {
		struct rep_mref *m = &b->refs[i];
		if (m->base == slot)
			m->disp = (int64_t)((uint64_t)m->disp - step);
		if (m->index == slot)
			m->disp = (int64_t)((uint64_t)m->disp - step * m->scale);
	}
	u->direct_step[slot] = 0;
}

static void plan_direct(const struct cc_instr *in, struct unit *u)
{
	uint8_t captures[IS_MAX_SLOTS + 1] = { 0 };

	u->direct = 0;
	for (uint32_t c = 0; c < u->b.ncaps; c++)
		if (u->b.caps[c].slot <= IS_MAX_SLOTS)
			captures[u->b.caps[c].slot]++;
	for (uint32_t c = 0; c < u->b.ncaps; c++) {
		const struct rep_capture *cap = &u->b.caps[c];
		int32_t step;
		if (cap->slot > IS_MAX_SLOTS || captures[cap->slot] != 1 ||
		    !direct_capture(in, u, cap, &step))
			continue;
		u->direct |= 1ull << cap->slot;
		u->direct_reg[cap->slot] = cap->reg;
		u->direct_step[cap->slot] = step;
		fold_step(u, cap->slot);
	}
}

/* Does the unit loop on itself alone (its last instruction jumps back to
 * its first; the unit ends its block), and where else it goes is a unit of
 * the copy, whose commit comes before anything else can run? Not the
 * entry unit: a call enters it from the gate, which commits nothing. */
static bool loops_alone(const struct cc_instr *in, const struct unit *u)
{
	const struct ci_insn *first = &in->insns[u->first], *last = &in->insns[u->first + u->n - 1];

	if (!u->block_end || first->pc == in->fn.addr ||
	    (last->kind != CI_JMP && last->kind != CI_JCC) || last->target != first->pc)
		return false;
	return last->kind == CI_JMP || cc__instr_unit_at(in, last->pc + last->len);
}

/* Renumber the slots: new[old] for every capture, reference and direct
 * slot. */
static void renumber_slots(struct unit *u, const uint16_t *new)
{
	struct rep_built *b = &u->b;
	uint64_t direct = 0;
	uint8_t reg[IS_MAX_SLOTS + 1];
	int32_t step[IS_MAX_SLOTS + 1];

	for (uint32_t c = 0; c < b->ncaps; c++)
		b->caps[c].slot = new[b->caps[c].slot];
	for (uint32_t i = 0; i < b->block.nrefs; i++) {
		uint16_t *slots[] = { &b->refs[i].base, &b->refs[i].index, &b->refs[i].seg,
				      &b->refs[i].count, &b->refs[i].count_end, &b->refs[i].rflags };
		for (size_t k = 0; k < sizeof slots / sizeof *slots; k++)
			if (*slots[k] != REP_NO_SLOT)
				*slots[k] = new[*slots[k]];
	}
	for (uint32_t k = 0; k < b->block.nslots; k++) {
		direct |= (u->direct >> k & 1) << new[k];
		reg[new[k]] = u->direct_reg[k];
		step[new[k]] = u->direct_step[k];
	}
	u->direct = direct;
	memcpy(u->direct_reg, reg, sizeof reg);
	memcpy(u->direct_step, step, sizeof step);
}

/* A unit that loops alone, every slot written from its register at the
 * commit (so never spoiled): the slots whose registers no instruction of
 * it writes but by known steps (an index's add $1) are in every run of the
 * loop those of the run before plus the steps of one run (0 for a base it
 * never writes). They go last (u->carried of them), for a repeat unit to
 * leave out, and their steps into steps (by slot, from u's table entry). */
static void plan_repeat(struct cc_instr *in, struct unit *u, int64_t *steps)
{
	uint32_t n = u->b.block.nslots, written = 0;
	int64_t reg_step[REP_NREGS] = { 0 };
	uint16_t new[IS_MAX_SLOTS + 1];
	uint32_t kept = 0, carried = 0;

	u->carried = 0;
	if (in->o.plain_plan || !n || n > IS_MAX_SLOTS || u->direct != (2ull << (n - 1)) - 1 ||
	    !loops_alone(in, u))
		return;
	for (uint32_t i = 0; i < u->n; i++) {
		const struct ci_insn *ci = &in->insns[u->first + i];
		if (ci->step_reg != REP_REG_NONE)	/* all it writes but the flags */
			reg_step[ci->step_reg] += ci->step;
		else
			written |= ci->rep.clobbers | (ci->rep.rsp_delta ? 1u << REP_REG_RSP : 0);
	}
	for (uint32_t k = 0; k < n; k++)
		carried += !(written >> u->direct_reg[k] & 1);
	if (!carried)
		return;
	for (uint32_t k = 0; k < n; k++) {
		new[k] = written >> u->direct_reg[k] & 1 ? (uint16_t)kept++ :
			 (uint16_t)(n - carried + (k - kept));
		steps[new[k]] = reg_step[u->direct_reg[k]];
	}
	renumber_slots(u, new);
	u->carried = (uint16_t)carried;
	in->repeats = true;
}

static bool captures_fs_base(const struct rep_built *b)
{
	for (uint32_t c = 0; c < b->ncaps; c++)
		if (b->caps[c].reg == REP_REG_FSBASE)
			return true;
	return false;
}

/* Units: the blocks, cut after calls; their plans and the table. */
static int plan_units(struct cc_instr *in)
{
	size_t cap = 0, nb = cfg_function__block_count(in->cfg), k = 0;
	int rc;

	if ((rc = rep_table__new(&in->table)) < 0)
		return cc__fail(in->c, CC_PHASE_LOAD, rc, "%s", rep_errmsg());
	for (size_t bi = 0; bi < nb; bi++) {
		const struct cfg_block *b = cfg_function__block(in->cfg, bi);
		while (k < in->ninsns && in->insns[k].pc < b->end) {
			uint32_t first = (uint32_t)k;
			while (k < in->ninsns && in->insns[k].pc < b->end && !ends_unit(&in->insns[k]))
				k++;
			if (k < in->ninsns && in->insns[k].pc < b->end)
				k++;	/* the call ends the unit */
			if ((rc = cc__grow(&in->units, &cap, in->nunits + 1, sizeof *in->units, 64)))
				return cc__fail(in->c, CC_PHASE_LOAD, rc, "out of memory");
			struct unit *u = &in->units[in->nunits];
			memset(u, 0, sizeof *u);
			u->first = first;
			u->n = (uint32_t)(k - first);
			u->id = (uint32_t)++in->nunits;
			u->block_end = k >= in->ninsns || in->insns[k].pc >= b->end;
			struct rep_insn *ri = malloc(u->n * sizeof *ri);
			if (!ri)
				return cc__fail(in->c, CC_PHASE_LOAD, -ENOMEM, "out of memory");
			for (uint32_t i = 0; i < u->n; i++)
				ri[i] = in->insns[first + i].rep;
			rc = rep_build(ri, u->n, u->id,
				       in->o.plain_plan ? 0 : REP_OPT_STACK | REP_OPT_BASE, &u->b);
			free(ri);
			if (rc < 0)
				return cc__fail(in->c, CC_PHASE_LOAD, rc, "cannot instrument %s: the "
						"block at 0x%" PRIx64 ": %s", in->name,
						in->insns[first].pc, rep_errmsg());
			if (in->o.blocks_only)
				forget_addresses(&u->b);
			if (captures_fs_base(&u->b) && !cc__user_fsgsbase())
				return cc__fail(in->c, CC_PHASE_LOAD, -ENOTSUP, "cannot instrument "
						"%s: the block at 0x%" PRIx64 " reads through fs "
						"(thread-local storage), whose base only rdfsbase can "
						"capture, which this kernel does not let user code run",
						in->name, in->insns[first].pc);
			plan_direct(in, u);
			if (u->b.block.nslots > IS_MAX_SLOTS)
				return cc__fail(in->c, CC_PHASE_LOAD, -E2BIG, "cannot instrument %s: "
						"the block at 0x%" PRIx64 " needs %u slots, more than "
						"the %d of a unit", in->name, in->insns[first].pc,
						u->b.block.nslots, IS_MAX_SLOTS);
		}
	}
	for (size_t i = 0; i < in->nunits; i++) {	/* (a loop's exit may come after it) */
		struct rep_block *b = &in->units[i].b.block;
		int64_t steps[IS_MAX_SLOTS + 1] = { 0 };
		plan_repeat(in, &in->units[i], steps);
		b->steps = steps;	/* (copied) */
		rc = rep_table__add(in->table, b);
		b->steps = NULL;
		if (rc < 0)
			return cc__fail(in->c, CC_PHASE_LOAD, rc, "%s", rep_errmsg());
	}
	return 0;
}

/* The unit starting at pc, or NULL. */
const struct unit *cc__instr_unit_at(const struct cc_instr *in, uint64_t pc)
{
	size_t lo = 0, hi = in->nunits;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		uint64_t at = in->insns[in->units[mid].first].pc;
		if (at == pc)
			return &in->units[mid];
		if (at < pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static const struct ci_insn *insn_at(const struct cc_instr *in, uint64_t pc)
{
	for (size_t i = 0; i < in->ninsns; i++)
		if (in->insns[i].pc == pc)
			return &in->insns[i];
	return NULL;
}

/* Where in the unit a thread of the original can go straight into the
 * copy: up to the instruction of its first capture kept in the block,
 * included. Past it the commit would write a slot the copy never
 * captured, a stale one. Slots the commit
 * writes from their registers are right from anywhere: the steps taken
 * since their capture point are the same in the original and the copy. */
static void mark_entries(const struct unit *u, bool *enters)
{
	uint32_t upto = u->n;	/* the first instruction past a kept capture */

	for (uint32_t c = 0; c < u->b.ncaps; c++) {
		const struct rep_capture *cap = &u->b.caps[c];
		if (u->direct >> cap->slot & 1)
			continue;
		uint32_t past = cap->insn + 1;
		if (past < upto)
			upto = past;
	}
	for (uint32_t j = 0; j < u->n; j++)
		enters[u->first + j] = j < upto;
}

/* Each jump table's jmp is re-pointed at the copy (instr-jt.c) when it
 * jumps through a register; through memory it cannot be. */
static int check_jump_tables(struct cc_instr *in)
{
	for (size_t i = 0; i < cfg_function__jump_table_count(in->cfg); i++) {
		const struct cfg_jump_table *jt = cfg_function__jump_table(in->cfg, i);
		const struct ci_insn *ci = insn_at(in, jt->at);
		if (!ci || ci_jmp_reg(ci) < 0)
			return cc__fail(in->c, CC_PHASE_LOAD, -ENOTSUP, "cannot instrument %s: the "
					"jump table's jmp at 0x%" PRIx64 " does not jump through "
					"a register, and only such a jmp is re-pointed at the copy",
					in->name, jt->at);
	}
	return 0;
}

int cc__instr_build_plan(struct cc_instr *in)
{
	struct cfg_reader *rd;
	const char *msg = NULL;
	uint64_t at = 0;
	int rc;

	if ((rc = cc__open_cfg(in->c, &rd)) < 0)
		return cc__fail(in->c, CC_PHASE_LOAD, rc, "cannot read the code of process %d",
				in->c->pid);
	rc = cfg_function__build(rd, in->fn.addr, NULL, &in->cfg);
	cfg_reader__free(rd);
	if (rc < 0)
		return cc__fail(in->c, CC_PHASE_LOAD, rc, "cannot build the CFG of %s", in->name);
	if (cfg_function__error(in->cfg, &at, &msg) != CFG_ERR_NONE)
		return cc__fail(in->c, CC_PHASE_LOAD, -ENOTSUP, "cannot instrument %s: its CFG is "
				"incomplete at 0x%" PRIx64 " (%s)", in->name, at, msg ? msg : "?");
	if (cfg_function__unresolved_count(in->cfg))
		return cc__fail(in->c, CC_PHASE_LOAD, -ENOTSUP, "cannot instrument %s: it has an "
				"indirect jump whose targets are unknown", in->name);
	if (!in->fn.size) {
		size_t nr = cfg_function__range_count(in->cfg);
		const struct cfg_range *last = cfg_function__range(in->cfg, nr - 1);
		in->fn.size = last->end - in->fn.addr;
	}
	if ((rc = read_blocks(in)) < 0 || (rc = plan_units(in)) < 0 ||
	    (rc = check_jump_tables(in)) < 0)
		return rc;
	in->insn_at = calloc(in->ninsns, sizeof *in->insn_at);
	in->insn_off = calloc(in->ninsns, sizeof *in->insn_off);
	in->unit_start = calloc(in->ninsns, sizeof *in->unit_start);
	in->enters = calloc(in->ninsns, sizeof *in->enters);
	if (!in->insn_at || !in->insn_off || !in->unit_start || !in->enters)
		return cc__fail(in->c, CC_PHASE_LOAD, -ENOMEM, "out of memory");
	for (size_t i = 0; i < in->nunits; i++) {
		in->unit_start[in->units[i].first] = true;
		mark_entries(&in->units[i], in->enters);
	}
	for (size_t i = 0; i < in->ninsns; i++)
		if (in->insns[i].kind == CI_LOOPLIKE && cfg_function__block_at(in->cfg,
								   in->insns[i].target) >= 0)
			return cc__fail(in->c, CC_PHASE_LOAD, -ENOTSUP, "cannot instrument %s: the "
					"loop/jrcxz at 0x%" PRIx64 " branches inside it", in->name,
					in->insns[i].pc);
	return 0;
}
