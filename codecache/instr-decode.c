/* instr-decode.c: one instruction of a function to instrument, as the
 * instrumenter needs it: how control leaves it (so branches inside the
 * function go to the copy) and its memory references as rep_build wants
 * them (struct rep_insn: operands with registers, rsp changes, clobbered
 * registers). Implicit stack references (push, pop, call, ret, leave) are
 * described here, not taken from Zydis' hidden operands, so that their
 * address is exact (push writes at rsp - 8).
 */
#include "codecache/instr.h"

#include <Zydis/Zydis.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The enum rep_reg of a general register (any width), or REP_REG_NONE. */
static uint8_t rep_reg_of(ZydisRegister r)
{
	static const ZydisRegister gpr[16] = {
		ZYDIS_REGISTER_RAX, ZYDIS_REGISTER_RCX, ZYDIS_REGISTER_RDX, ZYDIS_REGISTER_RBX,
		ZYDIS_REGISTER_RSP, ZYDIS_REGISTER_RBP, ZYDIS_REGISTER_RSI, ZYDIS_REGISTER_RDI,
		ZYDIS_REGISTER_R8, ZYDIS_REGISTER_R9, ZYDIS_REGISTER_R10, ZYDIS_REGISTER_R11,
		ZYDIS_REGISTER_R12, ZYDIS_REGISTER_R13, ZYDIS_REGISTER_R14, ZYDIS_REGISTER_R15,
	};
	ZydisRegister big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);

	for (int i = 0; i < 16; i++)
		if (big == gpr[i])
			return (uint8_t)(REP_REG_RAX + i);
	return REP_REG_NONE;
}

static int refuse(char *why, size_t size, uint64_t pc, const char *what)
{
	snprintf(why, size, "the instruction at 0x%" PRIx64 " %s", pc, what);
	return -ENOTSUP;
}

static void add_op(struct rep_insn *ri, uint8_t type, uint8_t base, int64_t disp, uint32_t size)
{
	ri->ops[ri->nops++] = (struct rep_operand){ .type = type, .base = base, .disp = disp,
						    .size = size, .scale = 1 };
}

/* The implicit stack reference and rsp change of push, pop, call, ret,
 * leave, pushf, popf; 1 if the instruction is one of them. */
static int stack_op(const ZydisDecodedInstruction *d, struct rep_insn *ri)
{
	uint32_t w = d->operand_width == 16 ? 2 : 8;

	switch (d->mnemonic) {
	case ZYDIS_MNEMONIC_PUSH:
	case ZYDIS_MNEMONIC_PUSHFQ:
	case ZYDIS_MNEMONIC_CALL:
		add_op(ri, REP_REF_WRITE, REP_REG_RSP, -(int64_t)w, w);
		ri->rsp_delta = -(int32_t)w;
		return 1;
	case ZYDIS_MNEMONIC_POP:
	case ZYDIS_MNEMONIC_POPFQ:
	case ZYDIS_MNEMONIC_RET:
		add_op(ri, REP_REF_READ, REP_REG_RSP, 0, w);
		ri->rsp_delta = (int32_t)w;
		return 1;
	case ZYDIS_MNEMONIC_LEAVE:
		add_op(ri, REP_REF_READ, REP_REG_RBP, 0, 8);
		ri->clobbers |= 1u << REP_REG_RSP | 1u << REP_REG_RBP;
		return 1;
	default:
		return 0;
	}
}

/* rsp += imm (add, sub, lea rsp, [rsp + d]): the known change, or 0 with
 * *known false. */
static int32_t rsp_change(const ZydisDecodedInstruction *d, const ZydisDecodedOperand *ops,
			  bool *known)
{
	*known = false;
	if (d->operand_count_visible < 2 || ops[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
	    ops[0].reg.value != ZYDIS_REGISTER_RSP)
		return 0;
	if ((d->mnemonic == ZYDIS_MNEMONIC_ADD || d->mnemonic == ZYDIS_MNEMONIC_SUB) &&
	    ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
		int64_t v = ops[1].imm.value.s;
		if (v > INT32_MAX / 2 || v < INT32_MIN / 2)
			return 0;
		*known = true;
		return (int32_t)(d->mnemonic == ZYDIS_MNEMONIC_ADD ? v : -v);
	}
	if (d->mnemonic == ZYDIS_MNEMONIC_LEA && ops[1].mem.base == ZYDIS_REGISTER_RSP &&
	    ops[1].mem.index == ZYDIS_REGISTER_NONE && d->address_width == 64) {
		*known = true;
		return (int32_t)ops[1].mem.disp.value;
	}
	return 0;
}

/* The steps a unit's captures can be taken across (instr-plan.c), kept
 * small so that their sum is a disp32. */
#define MAX_STEP (1 << 20)

/* reg += imm and nothing else but the flags: add or sub of an immediate,
 * inc, dec, lea reg,[reg + d], on a whole 64-bit register (a 32-bit write
 * zeroes the upper half), not rsp (rsp_change's). */
static void register_step(const ZydisDecodedInstruction *d, const ZydisDecodedOperand *ops,
			  struct ci_insn *in)
{
	int64_t v;

	if (d->operand_count_visible < 1 || ops[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
	    ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, ops[0].reg.value) != 64 ||
	    !rep_reg_of(ops[0].reg.value) || ops[0].reg.value == ZYDIS_REGISTER_RSP)
		return;
	switch (d->mnemonic) {
	case ZYDIS_MNEMONIC_ADD:
	case ZYDIS_MNEMONIC_SUB:
		if (d->operand_count_visible != 2 || ops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
			return;
		v = d->mnemonic == ZYDIS_MNEMONIC_ADD ? ops[1].imm.value.s : -ops[1].imm.value.s;
		break;
	case ZYDIS_MNEMONIC_INC:
	case ZYDIS_MNEMONIC_DEC:
		v = d->mnemonic == ZYDIS_MNEMONIC_INC ? 1 : -1;
		break;
	case ZYDIS_MNEMONIC_LEA:
		if (ops[1].mem.base != ops[0].reg.value || ops[1].mem.index != ZYDIS_REGISTER_NONE ||
		    d->address_width != 64)
			return;
		v = ops[1].mem.disp.value;
		break;
	default:
		return;
	}
	if (v > MAX_STEP || v < -MAX_STEP)
		return;
	in->step_reg = rep_reg_of(ops[0].reg.value);
	in->step = (int32_t)v;
}

/* An atomic read-modify-write other than cmpxchg (lock add, lock xadd,
 * lock inc..., xchg with memory): valgrind runs it as a load and then a
 * compare-and-swap, and its trace (lackey's) and counts (Cachegrind's Dr)
 * show a read, then the modify, of the same bytes. The recovered stream
 * shows them alike. */
static bool valgrind_loads_first(const ZydisDecodedInstruction *d)
{
	if (d->mnemonic == ZYDIS_MNEMONIC_CMPXCHG || d->mnemonic == ZYDIS_MNEMONIC_CMPXCHG8B ||
	    d->mnemonic == ZYDIS_MNEMONIC_CMPXCHG16B)
		return false;
	return (d->attributes & ZYDIS_ATTRIB_HAS_LOCK) || d->mnemonic == ZYDIS_MNEMONIC_XCHG;
}

/* An explicit memory operand as rep_build wants it. */
static int mem_op(const ZydisDecodedInstruction *d, const ZydisDecodedOperand *op,
		  uint64_t pc, struct rep_insn *ri, char *why, size_t size)
{
	struct rep_operand o = { .scale = 1 };
	bool rd = op->actions & ZYDIS_OPERAND_ACTION_MASK_READ;
	bool wr = op->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE;

	if (op->mem.type != ZYDIS_MEMOP_TYPE_MEM)
		return 0;	/* lea, bound and the like: no access */
	if (!rd && !wr)
		return 0;
	if (op->mem.segment == ZYDIS_REGISTER_GS)
		return refuse(why, size, pc, "uses gs, which instrumentation takes");
	/* fs: thread-local storage and the stack protector's canary; its base
	 * is captured like a register (rdfsbase, instr-emit.c) */
	if (op->mem.segment == ZYDIS_REGISTER_FS && op->mem.base == ZYDIS_REGISTER_RIP)
		return refuse(why, size, pc, "is relative to both fs and rip");
	if (op->mem.segment == ZYDIS_REGISTER_FS)
		o.seg = REP_REG_FSBASE;
	if (d->address_width != 64)
		return refuse(why, size, pc, "uses 32-bit addresses");
	if (op->mem.index != ZYDIS_REGISTER_NONE && !rep_reg_of(op->mem.index))
		return refuse(why, size, pc, "has a vector index (gather/scatter)");
	if (ri->nops == REP_MAX_OPERANDS)
		return refuse(why, size, pc, "has too many memory operands");
	o.type = rd && wr ? REP_REF_MODIFY : wr ? REP_REF_WRITE : REP_REF_READ;
	o.size = op->size / 8;
	if (!o.size)
		return refuse(why, size, pc, "has a memory operand of unknown size");
	if (op->mem.base == ZYDIS_REGISTER_RIP) {
		uint64_t abs;
		ZydisCalcAbsoluteAddress(d, op, pc, &abs);
		o.disp = (int64_t)abs;
	} else {
		if (op->mem.base != ZYDIS_REGISTER_NONE && !(o.base = rep_reg_of(op->mem.base)))
			return refuse(why, size, pc, "has an unusual base register");
		o.index = rep_reg_of(op->mem.index);
		o.scale = op->mem.scale ? op->mem.scale : 1;
		o.disp = op->mem.disp.value;
	}
	if (d->attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE)) {
		o.count = REP_REG_RCX;
		o.flags = REP_OPF_DF;
		if (d->mnemonic == ZYDIS_MNEMONIC_CMPSB || d->mnemonic == ZYDIS_MNEMONIC_CMPSW ||
		    d->mnemonic == ZYDIS_MNEMONIC_CMPSD || d->mnemonic == ZYDIS_MNEMONIC_CMPSQ ||
		    d->mnemonic == ZYDIS_MNEMONIC_SCASB || d->mnemonic == ZYDIS_MNEMONIC_SCASW ||
		    d->mnemonic == ZYDIS_MNEMONIC_SCASD || d->mnemonic == ZYDIS_MNEMONIC_SCASQ)
			o.flags |= REP_OPF_COUNT_DIFF;
	}
	if (o.type == REP_REF_MODIFY && valgrind_loads_first(d)) {
		if (ri->nops + 1 >= REP_MAX_OPERANDS)
			return refuse(why, size, pc, "has too many memory operands");
		struct rep_operand ld = o;
		ld.type = REP_REF_READ;
		ri->ops[ri->nops++] = ld;
	}
	ri->ops[ri->nops++] = o;
	return 0;
}

/* Registers the instruction writes (their whole 64 bits count as new), and
 * rflags when it writes any flag. */
static uint32_t clobbers(const ZydisDecodedInstruction *d, const ZydisDecodedOperand *ops)
{
	uint32_t m = 0;

	for (unsigned i = 0; i < d->operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)) {
			uint8_t r = rep_reg_of(ops[i].reg.value);
			if (r)
				m |= 1u << r;
		}
	if (d->cpu_flags && (d->cpu_flags->modified | d->cpu_flags->set_0 | d->cpu_flags->set_1 |
			     d->cpu_flags->undefined))
		m |= 1u << REP_REG_RFLAGS;
	return m;
}

#define STATUS_FLAGS (ZYDIS_CPUFLAG_CF | ZYDIS_CPUFLAG_PF | ZYDIS_CPUFLAG_AF | ZYDIS_CPUFLAG_ZF | \
		      ZYDIS_CPUFLAG_SF | ZYDIS_CPUFLAG_OF)

static void flag_use(const ZydisDecodedInstruction *d, struct ci_insn *in)
{
	const ZydisAccessedFlags *f = d->cpu_flags;

	if (!f)
		return;
	in->tests_flags = (f->tested & STATUS_FLAGS) != 0;
	in->sets_flags = !in->tests_flags &&
			 ((f->modified | f->set_0 | f->set_1 | f->undefined) & STATUS_FLAGS) ==
			 STATUS_FLAGS;
}

static void classify(const ZydisDecodedInstruction *d, const ZydisDecodedOperand *ops,
		     struct ci_insn *in)
{
	bool rel = d->operand_count_visible >= 1 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
		   ops[0].imm.is_relative;

	in->kind = CI_PLAIN;
	in->falls = true;
	if (rel)
		ZydisCalcAbsoluteAddress(d, &ops[0], in->pc, &in->target);
	switch (d->meta.category) {
	case ZYDIS_CATEGORY_UNCOND_BR:
		in->kind = rel ? CI_JMP : CI_IJMP;
		in->falls = false;
		break;
	case ZYDIS_CATEGORY_COND_BR:
		in->kind = d->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT && d->opcode >= 0x70 &&
			d->opcode <= 0x7f ? CI_JCC : d->opcode_map == ZYDIS_OPCODE_MAP_0F &&
			d->opcode >= 0x80 && d->opcode <= 0x8f ? CI_JCC : CI_LOOPLIKE;
		in->cc = d->opcode & 0xf;
		break;
	case ZYDIS_CATEGORY_CALL:
		in->kind = rel ? CI_CALL : CI_ICALL;
		break;
	case ZYDIS_CATEGORY_RET:
		in->kind = CI_RET;
		in->falls = false;
		break;
	default:
		if (d->mnemonic == ZYDIS_MNEMONIC_UD2 || d->mnemonic == ZYDIS_MNEMONIC_HLT)
			in->falls = false;
		break;
	}
}

int cc__instr_decode(const uint8_t *bytes, size_t len, uint64_t pc, struct ci_insn *in,
		     char *why, size_t size)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction d;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	int rc;

	memset(in, 0, sizeof *in);
	in->pc = pc;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, bytes, len, &d, ops)))
		return refuse(why, size, pc, "cannot be decoded");
	in->len = d.length;
	memcpy(in->bytes, bytes, d.length);
	classify(&d, ops, in);
	flag_use(&d, in);
	struct rep_insn *ri = &in->rep;
	ri->pc = pc;
	ri->len = d.length;
	if (d.mnemonic == ZYDIS_MNEMONIC_ENTER || d.mnemonic == ZYDIS_MNEMONIC_XBEGIN)
		return refuse(why, size, pc, "is not handled by instrumentation (enter, xbegin)");
	bool stack = stack_op(&d, ri);
	if (stack && d.mnemonic == ZYDIS_MNEMONIC_POP && d.operand_count_visible &&
	    ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY)
		return refuse(why, size, pc, "pops into memory");
	if (d.mnemonic != ZYDIS_MNEMONIC_NOP && d.meta.category != ZYDIS_CATEGORY_PREFETCH)
		for (unsigned i = 0; i < d.operand_count_visible; i++)
			if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
			    (rc = mem_op(&d, &ops[i], pc, ri, why, size)) < 0)
				return rc;
	/* string instructions' operands are hidden */
	if (d.meta.category == ZYDIS_CATEGORY_STRINGOP)
		for (unsigned i = d.operand_count_visible; i < d.operand_count; i++)
			if (ops[i].type == ZYDIS_OPERAND_TYPE_MEMORY &&
			    (rc = mem_op(&d, &ops[i], pc, ri, why, size)) < 0)
				return rc;
	uint32_t clob = clobbers(&d, ops);
	bool known;
	int32_t delta = rsp_change(&d, ops, &known);
	bool pops_rsp = d.mnemonic == ZYDIS_MNEMONIC_POP && ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
			ops[0].reg.value == ZYDIS_REGISTER_RSP;
	if ((stack || known) && !pops_rsp) {
		clob &= ~(1u << REP_REG_RSP);
		if (known)
			ri->rsp_delta = delta;
	}
	if (d.mnemonic == ZYDIS_MNEMONIC_LEAVE)
		clob |= 1u << REP_REG_RSP | 1u << REP_REG_RBP;
	ri->clobbers |= clob;
	register_step(&d, ops, in);
	return 0;
}
