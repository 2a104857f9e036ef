/* Callers that rely on -fipa-ra (GCC's default at -O2): when GCC compiles a
 * caller knowing the callee's code (same unit, or LTO), it keeps values in
 * "call-clobbered" registers across the call if the callee, and all it
 * calls, never write them. A replacement that follows the ABI may write
 * them and the caller then computes with garbage (a recursive fib replaced
 * by an iterative one: SIGSEGV within a second).
 *
 * So, before a function is replaced: what the original leaves intact
 * (its writes and, transitively, those of the functions it calls directly;
 * an indirect call or one through the PLT clobbers everything, as GCC
 * assumes), what the new code writes, and, for each direct caller in the
 * module, which of the registers at risk are live at the return address
 * (backward liveness over the caller's CFG; a return keeps live what the
 * caller itself leaves intact for its own callers). The registers found are
 * saved and restored around the new code by a gate (cc__gate_encode).
 *
 * Where anything is unknown (code that cannot be analysed, too much of it)
 * the analysis errs towards "intact" and "live": a gate too many costs a
 * few ns a call, a register too few costs the target.
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"
#include "cfg/cfg.h"

#include <Zydis/Zydis.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11 };
#define GPR(n) (1u << (n))
#define VEC_ALL 0xffff0000u
#define CLOBBERED (GPR(RAX) | GPR(RCX) | GPR(RDX) | GPR(RSI) | GPR(RDI) | GPR(R8) | GPR(R9) | \
		   GPR(R10) | GPR(R11) | VEC_ALL)
/* what a callee may read: argument registers (al: vector count of a
 * variadic call, r10: static chain) */
#define ARGS (GPR(RDI) | GPR(RSI) | GPR(RDX) | GPR(RCX) | GPR(R8) | GPR(R9) | GPR(RAX) | \
	      GPR(R10) | 0x00ff0000u)
#define RETURNS (GPR(RAX) | GPR(RDX) | CC_REG_VEC(0) | CC_REG_VEC(1))

#define MAX_FUNCS 4096		/* functions analysed for one replacement */
#define MAX_DEPTH 48		/* nesting of the transitive analysis */
#define MAX_FUNC_INSNS 20000
#define MAX_CALL_SITES 512	/* analysed; past them every register at risk counts */
#define STACK_ARGS 128		/* bytes of stack arguments a gate passes on */

/* ---------------------------------------------------------- instructions */

struct effect {
	uint32_t reads, writes, kills;
	bool call, ret, indirect_jmp;
	uint64_t target;	/* a direct call's or jmp's, else 0 */
	uint64_t at;
	uint8_t len;
	uint32_t defined;	/* a call: what the caller has set before it */
};

static uint32_t reg_bit(ZydisRegister r)
{
	ZydisRegisterClass k = ZydisRegisterGetClass(r);
	ZyanI8 id;

	switch (k) {
	case ZYDIS_REGCLASS_GPR8: case ZYDIS_REGCLASS_GPR16:
	case ZYDIS_REGCLASS_GPR32: case ZYDIS_REGCLASS_GPR64:
		id = ZydisRegisterGetId(ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r));
		return id >= 0 && id < 16 ? GPR(id) : 0;
	case ZYDIS_REGCLASS_XMM: case ZYDIS_REGCLASS_YMM: case ZYDIS_REGCLASS_ZMM:
		id = ZydisRegisterGetId(r);
		return id >= 0 && id < 16 ? CC_REG_VEC(id) : 0;
	default:
		return 0;
	}
}

/* A write that replaces all of the register (a 32- or 64-bit GPR, which
 * zero-extends, or a vector register), not merged into it. */
static bool whole(ZydisRegister r)
{
	ZydisRegisterClass k = ZydisRegisterGetClass(r);
	return k == ZYDIS_REGCLASS_GPR32 || k == ZYDIS_REGCLASS_GPR64 || k == ZYDIS_REGCLASS_XMM ||
	       k == ZYDIS_REGCLASS_YMM || k == ZYDIS_REGCLASS_ZMM;
}

static void effect_of(const ZydisDecodedInstruction *d, const ZydisDecodedOperand *ops, uint64_t pc,
		      struct effect *e)
{
	memset(e, 0, sizeof *e);
	e->at = pc;
	e->len = d->length;
	for (unsigned i = 0; i < d->operand_count; i++) {
		const ZydisDecodedOperand *o = &ops[i];
		if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
			e->reads |= reg_bit(o->mem.base) | reg_bit(o->mem.index);
			continue;
		}
		if (o->type != ZYDIS_OPERAND_TYPE_REGISTER)
			continue;
		uint32_t bit = reg_bit(o->reg.value);
		if (o->actions & ZYDIS_OPERAND_ACTION_MASK_READ)
			e->reads |= bit;
		if (o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)
			e->writes |= bit;
		if (o->actions == ZYDIS_OPERAND_ACTION_WRITE && whole(o->reg.value))
			e->kills |= bit;
	}
	if (d->mnemonic == ZYDIS_MNEMONIC_VZEROUPPER || d->mnemonic == ZYDIS_MNEMONIC_VZEROALL)
		e->writes |= VEC_ALL;
	e->call = d->meta.category == ZYDIS_CATEGORY_CALL;
	e->ret = d->meta.category == ZYDIS_CATEGORY_RET;
	ZyanU64 to;
	if ((e->call || d->meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
	     d->meta.category == ZYDIS_CATEGORY_COND_BR) && d->raw.imm[0].is_relative &&
	    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(d, &ops[0], pc, &to)))
		e->target = to;
	e->indirect_jmp = d->meta.category == ZYDIS_CATEGORY_UNCOND_BR && !e->target;
}

/* The effects of the instructions in [lo, hi); their count, or -1. */
static ssize_t decode_range(struct cfg_reader *r, uint64_t lo, uint64_t hi, struct effect **out)
{
	size_t len = hi - lo, n = 0;
	uint8_t *buf = malloc(len ? len : 1);
	struct effect *e = calloc(len ? len : 1, sizeof *e);
	ZydisDecoder dec;

	*out = e;
	if (!buf || !e || cfg_reader__read(r, lo, buf, len) != (ssize_t)len) {
		free(buf);
		return -1;
	}
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t pos = 0; pos < len;) {
		ZydisDecodedInstruction d;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, buf + pos, len - pos, &d, ops)))
			break;
		effect_of(&d, ops, lo + pos, &e[n++]);
		pos += d.length;
	}
	free(buf);
	return (ssize_t)n;
}

/* ------------------------------------------------------------- analysis */

struct memo {
	uint64_t entry;
	uint32_t clob;
	uint32_t uses;		/* argument registers it reads before writing */
	enum { USES_UNKNOWN, USES_PENDING, USES_KNOWN } uses_state;
	bool done;
};

struct ana {
	struct cfg_reader *r;
	struct memo *m;
	size_t n, cap;
	int depth;		/* of uses_of within itself */
};

static struct memo *memo_find(struct ana *a, uint64_t entry)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->m[i].entry == entry)
			return &a->m[i];
	return NULL;
}

static int build(struct ana *a, uint64_t entry, struct cfg_function **f)
{
	struct cfg_build_opts o = { .sz = sizeof o, .max_insns = MAX_FUNC_INSNS,
				    .no_callee_analysis = true };

	if (cfg_function__build(a->r, entry, &o, f) < 0)
		return -1;
	if (cfg_function__error(*f, NULL, NULL) != CFG_ERR_NONE &&
	    cfg_function__error(*f, NULL, NULL) != CFG_ERR_UNRESOLVED) {
		cfg_function__free(*f);
		return -1;
	}
	return 0;
}

static uint32_t clobbers(struct ana *a, uint64_t entry, int depth);

/* What the function a->m[k] writes of the call-clobbered registers,
 * itself and through what it calls. Unknown: nothing (the safe side).
 * a->m moves as it grows: indexed again after each call. */
static uint32_t clobbers_of(struct ana *a, size_t k, int depth)
{
	struct cfg_function *f;
	uint32_t clob = 0;


	if (build(a, a->m[k].entry, &f) < 0)
		return 0;
	if (cfg_function__unresolved_count(f))	/* a tail call through a pointer */
		clob = CLOBBERED;
	for (size_t b = 0; b < cfg_function__block_count(f) && clob != CLOBBERED; b++) {
		const struct cfg_block *bl = cfg_function__block(f, b);
		struct effect *e;
		ssize_t n = decode_range(a->r, bl->start, bl->end, &e);
		for (ssize_t i = 0; i < n; i++)
			clob |= e[i].writes & CLOBBERED;
		free(e);
	}
	a->m[k].clob = clob;	/* seen by its recursive calls */
	for (size_t i = 0; i < cfg_function__call_count(f) && clob != CLOBBERED; i++) {
		const struct cfg_call *cl = cfg_function__call(f, i);
		clob |= cl->indirect || !cl->target ? CLOBBERED : clobbers(a, cl->target, depth + 1);
		a->m[k].clob = clob;
	}
	cfg_function__free(f);
	return clob;
}

static uint32_t clobbers(struct ana *a, uint64_t entry, int depth)
{
	struct memo *me = memo_find(a, entry);

	if (me)		/* done, or recursion: what is known so far */
		return me->clob;
	if (depth > MAX_DEPTH || a->n == MAX_FUNCS ||
	    cc__grow(&a->m, &a->cap, a->n + 1, sizeof *a->m, 64) < 0)
		return 0;
	size_t k = a->n++;
	a->m[k] = (struct memo){ .entry = entry };
	uint32_t clob = clobbers_of(a, k, depth);
	a->m[k].clob = clob;
	a->m[k].done = true;
	return clob;
}

/* Live at a return of the caller: its results, and what it leaves intact
 * for its own callers, who may rely on that as well. */
static uint32_t live_at_return(struct ana *a, uint64_t caller)
{
	return RETURNS | (CLOBBERED & ~clobbers(a, caller, 0));
}

static uint32_t call_clobbers(struct ana *a, const struct effect *e)
{
	return e->target ? clobbers(a, e->target, 0) : CLOBBERED;
}

/* A callee reads the argument registers the caller has set: a value the
 * caller never wrote (or that an earlier call clobbered) is no argument,
 * whatever the callee's prototype (possible_args); nor one a callee
 * analysed never reads.
 * The caller's own arguments count as set at its entry. */
static uint32_t uses_of(struct ana *a, uint64_t entry);

static uint32_t call_uses(struct ana *a, const struct effect *e)
{
	return e->target ? uses_of(a, e->target) : ARGS;
}

/* Of the registers the caller has set, those that can be arguments: the
 * ABI hands them out in order (rdi, rsi, rdx, rcx, r8, r9; xmm0 to xmm7),
 * so one is only if all before it are set too; al counts vector
 * arguments of a variadic call, r10 is a static chain. */
static uint32_t possible_args(uint32_t defined)
{
	static const uint8_t gpr[] = { RDI, RSI, RDX, RCX, R8, R9 };
	uint32_t args = defined & (GPR(RAX) | GPR(R10));

	for (size_t i = 0; i < sizeof gpr && defined >> gpr[i] & 1; i++)
		args |= GPR(gpr[i]);
	for (unsigned i = 0; i < 8 && defined & CC_REG_VEC(i); i++)
		args |= CC_REG_VEC(i);
	return args;
}

static uint32_t through_call(struct ana *a, const struct effect *e, uint32_t live_after)
{
	return (live_after & ~call_clobbers(a, e)) | (call_uses(a, e) & possible_args(e->defined)) |
	       e->reads;
}

/* Forward: what the caller has set after e, given what before. */
static uint32_t define(struct ana *a, struct effect *e, uint32_t defined)
{
	if (!e->call)
		return defined | e->writes;
	e->defined = defined;
	return (defined & ~call_clobbers(a, e)) | RETURNS;
}

/* Live before the instructions e[from..n) given what is live after. */
static uint32_t transfer(struct ana *a, const struct effect *e, ssize_t from, ssize_t n,
			 uint32_t live)
{
	for (ssize_t i = n - 1; i >= from; i--)
		live = e[i].call ? through_call(a, &e[i], live) : (live & ~e[i].kills) | e[i].reads;
	return live;
}

struct blk {
	struct effect *e;
	ssize_t n;
	uint32_t in;			/* live at its start */
	uint32_t def_in, def_out;	/* set by the caller, may-analysis */
};

/* What the caller has set, at each call (effect.defined) and block end. */
static void find_defined(struct ana *a, const struct cfg_function *f, struct blk *bk, size_t nb)
{
	bk[cfg_function__entry_block(f)].def_in = ARGS;
	for (bool changed = true; changed;) {
		changed = false;
		for (size_t b = 0; b < nb; b++) {
			uint32_t d = bk[b].def_in;
			for (ssize_t i = 0; i < bk[b].n; i++)
				d = define(a, &bk[b].e[i], d);
			bk[b].def_out = d;
			const struct cfg_block *bl = cfg_function__block(f, b);
			for (uint32_t k = 0; k < bl->succ_count; k++) {
				const struct cfg_edge *ed = cfg_function__edge(f, bl->first_succ + k);
				if (ed->to >= 0 && (d & ~bk[ed->to].def_in)) {
					bk[ed->to].def_in |= d;
					changed = true;
				}
			}
		}
	}
}

/* Live after block b: what its successors need. */
static uint32_t live_out(struct ana *a, const struct cfg_function *f, const struct blk *bk,
			 size_t b, uint32_t at_return)
{
	const struct cfg_block *bl = cfg_function__block(f, b);
	const struct effect *last = bk[b].n > 0 ? &bk[b].e[bk[b].n - 1] : NULL;
	uint32_t out = 0;

	if (!bl->succ_count) {
		if (last && last->ret)
			return at_return;
		return last && last->indirect_jmp ? CLOBBERED : 0;	/* noreturn: nothing */
	}
	for (uint32_t k = 0; k < bl->succ_count; k++) {
		const struct cfg_edge *ed = cfg_function__edge(f, bl->first_succ + k);
		if (ed->kind == CFG_EDGE_TAIL_CALL) {
			uint32_t clob = ed->to_addr ? clobbers(a, ed->to_addr, 0) : CLOBBERED;
			out |= (at_return & ~clob) | possible_args(bk[b].def_out);
		} else if (ed->to >= 0) {
			out |= bk[ed->to].in;
		} else {
			out |= CLOBBERED;
		}
	}
	return out;
}

/* A function's liveness solved: blocks decoded, what it has set at each
 * call, what is live at each block's start, with at_return live at its
 * returns. */
struct solved {
	struct cfg_function *f;
	struct blk *bk;
	size_t nb;
	uint32_t at_return;
};

static void solved_free(struct solved *s)
{
	for (size_t b = 0; s->bk && b < s->nb; b++)
		free(s->bk[b].e);
	free(s->bk);
	cfg_function__free(s->f);
}

static int solve(struct ana *a, uint64_t entry, uint32_t at_return, struct solved *s)
{
	memset(s, 0, sizeof *s);
	if (build(a, entry, &s->f) < 0)
		return -1;
	s->at_return = at_return;
	s->nb = cfg_function__block_count(s->f);
	if (!(s->bk = calloc(s->nb ? s->nb : 1, sizeof *s->bk)))
		goto err;
	for (size_t b = 0; b < s->nb; b++) {
		const struct cfg_block *bl = cfg_function__block(s->f, b);
		if ((s->bk[b].n = decode_range(a->r, bl->start, bl->end, &s->bk[b].e)) < 0)
			goto err;
	}
	find_defined(a, s->f, s->bk, s->nb);
	/* to a fixed point; sets only grow, 32 bits each */
	for (bool changed = true; changed;) {
		changed = false;
		for (size_t b = s->nb; b-- > 0;) {
			uint32_t in = transfer(a, s->bk[b].e, 0, s->bk[b].n,
					       live_out(a, s->f, s->bk, b, at_return));
			changed |= (in & ~s->bk[b].in) != 0;
			s->bk[b].in |= in;
		}
	}
	return 0;
err:
	solved_free(s);
	return -1;
}

/* The argument registers the function at entry reads before it writes
 * them (itself or through its callees); all of them when unknown. */
static uint32_t uses_of(struct ana *a, uint64_t entry)
{
	struct solved s;

	clobbers(a, entry, 0);
	struct memo *me = memo_find(a, entry);
	if (!me || me->uses_state == USES_PENDING || a->depth > MAX_DEPTH)
		return ARGS;
	if (me->uses_state == USES_KNOWN)
		return me->uses;
	me->uses_state = USES_PENDING;
	a->depth++;
	uint32_t uses = ARGS;
	if (solve(a, entry, 0, &s) == 0) {
		uses = s.bk[cfg_function__entry_block(s.f)].in & ARGS;
		solved_free(&s);
	}
	a->depth--;
	me = memo_find(a, entry);	/* a->m may have moved */
	me->uses = uses;
	me->uses_state = USES_KNOWN;
	return uses;
}

/* Of the registers in mask, those live at address at of the function at
 * caller (the return address of a call, or the branch of a tail call). */
static uint32_t live_at(struct ana *a, uint64_t caller, uint64_t at, bool tail, uint32_t mask)
{
	struct solved s;

	if (!caller)
		return mask;
	uint32_t at_return = live_at_return(a, caller);
	if (tail)
		return at_return & mask;
	if (solve(a, caller, at_return, &s) < 0)
		return mask;
	ssize_t here = cfg_function__block_at(s.f, at);
	uint32_t live = mask;
	if (here >= 0) {
		const struct blk *b = &s.bk[here];
		ssize_t from = 0;
		while (from < b->n && b->e[from].at < at)
			from++;
		live = transfer(a, b->e, from, b->n, live_out(a, s.f, s.bk, (size_t)here,
							       at_return)) & mask;
	}
	solved_free(&s);
	return live;
}

/* What the new code may write, from its entry: its own writes and those
 * of the code it reaches in the block (followed through branches and
 * calls); everything if it calls or jumps out or through a pointer (the
 * over-estimate is the safe side here). */
static uint32_t new_code_clobbers(const uint8_t *code, size_t size, uint64_t addr, uint64_t entry)
{
	uint8_t *seen = calloc(size ? size : 1, 1);
	/* offsets still to follow: one per instruction at most, and the entry */
	uint64_t *pending = malloc((size + 1) * sizeof *pending);
	size_t npending = 0;
	uint32_t clob = 0;
	ZydisDecoder dec;

	if (!seen || !pending || entry < addr || entry >= addr + size) {
		clob = CLOBBERED;
		goto out;
	}
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	pending[npending++] = entry - addr;
	while (npending && clob != CLOBBERED) {
		for (size_t pos = pending[--npending]; pos < size && !seen[pos];) {
			ZydisDecodedInstruction d;
			ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
			struct effect e;
			seen[pos] = 1;
			if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + pos, size - pos, &d, ops))) {
				clob = CLOBBERED;	/* what runs there is unknown */
				break;
			}
			effect_of(&d, ops, addr + pos, &e);
			clob |= e.writes & CLOBBERED;
			bool inside = e.target >= addr && e.target < addr + size;
			if (e.indirect_jmp || ((e.call || e.target) && !inside) ||
			    (e.call && !e.target)) {
				clob = CLOBBERED;
				break;
			}
			if (e.target && !seen[e.target - addr])
				pending[npending++] = e.target - addr;
			if (e.ret || d.meta.category == ZYDIS_CATEGORY_UNCOND_BR)
				break;
			pos += d.length;
		}
	}
out:
	free(seen);
	free(pending);
	return clob;
}

struct callers {
	struct ana *a;
	struct cc_cache *c;
	uint32_t at_risk, need;
	char *why;
	size_t why_size;
	size_t sites;
};

/* The instruction at from: a call (its return address in *ret) or a
 * branch; false if it cannot be read. */
static bool branch_at(struct cfg_reader *r, uint64_t from, bool *call, uint64_t *ret)
{
	uint8_t insn[ZYDIS_MAX_INSTRUCTION_LENGTH];
	ZydisDecoder dec;
	ZydisDecodedInstruction d;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t len = sizeof insn; len >= 2; len--)	/* the end of a mapping may be near */
		if (cfg_reader__read(r, from, insn, len) == (ssize_t)len &&
		    ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, insn, len, &d))) {
			*call = d.meta.category == ZYDIS_CATEGORY_CALL;
			*ret = from + d.length;
			return true;
		}
	return false;
}

static int one_caller(void *arg, uint64_t from, uint64_t func)
{
	struct callers *cs = arg;
	bool call = false;
	uint64_t ret = 0;
	uint32_t live = cs->at_risk;

	if (cs->sites++ < MAX_CALL_SITES && branch_at(cs->a->r, from, &call, &ret))
		live = live_at(cs->a, func, call ? ret : from, !call, cs->at_risk);
	if (live & ~cs->need && cs->why[0] == '\0') {
		char regs[160], name[128];
		cc__regs_text(live, regs, sizeof regs);
		cc__code_name(cs->c, from, name, sizeof name);
		snprintf(cs->why, cs->why_size, "the %s at %s may keep %s in %s across it",
			 call ? "call" : "jump", name, live & ~cs->need & (live - 1) ? "values" : "a value",
			 regs);
	}
	cs->need |= live;
	return 0;
}

int cc__ipara_need(struct cc_cache *c, const struct cc_func *fn, const uint8_t *new_code,
		   size_t size, uint64_t new_addr, uint64_t new_entry, uint32_t *need, char *why,
		   size_t why_size)
{
	struct ana a = { 0 };
	int rc;

	*need = 0;
	why[0] = '\0';
	uint32_t at_risk = new_code_clobbers(new_code, size, new_addr, new_entry);
	if (!at_risk)
		return 0;
	if ((rc = cc__open_cfg(c, &a.r)) < 0)
		return cc__fail(c, CC_PHASE_REDIRECT, rc, "cannot read the code of process %d: %s",
				c->pid, strerror(-rc));
	at_risk &= ~clobbers(&a, fn->addr, 0);
	struct callers cs = { &a, c, at_risk, 0, why, why_size, 0 };
	rc = at_risk ? cc__xref_each_to(c, fn->addr, one_caller, &cs) : 0;
	*need = cs.need;
	free(a.m);
	cfg_reader__free(a.r);
	return rc;
}

void cc__regs_text(uint32_t regs, char *buf, size_t size)
{
	static const char *const gpr[16] = { "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
					     "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15" };
	size_t len = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < 32 && len < size; i++)
		if (regs >> i & 1)
			len += (size_t)snprintf(buf + len, size - len, "%s%s%.0u", len ? ", " : "",
						i < 16 ? gpr[i] : "ymm", i < 16 ? 0 : i - 16);
}

/* ----------------------------------------------------------------- gate */

static size_t put_rsp_disp(uint8_t *p, uint8_t rex, uint8_t op0, uint8_t op1, unsigned reg,
			   int32_t disp)
{
	size_t n = 0;
	if (rex)
		p[n++] = rex;
	p[n++] = op0;
	if (op1)
		p[n++] = op1;
	p[n++] = (uint8_t)(0x84 | (reg & 7) << 3);	/* mod 10, rm 100: [rsp + disp32] */
	p[n++] = 0x24;
	memcpy(p + n, &disp, 4);
	return n + 4;
}

/* vmovdqu ymmN, [rsp + disp] (load) or the store: VEX.256.F3.0F 6F / 7F */
static size_t put_ymm(uint8_t *p, unsigned n, int32_t disp, bool store)
{
	p[0] = 0xc5;
	p[1] = (uint8_t)((n < 8 ? 0x80 : 0) | 0x78 | 0x04 | 0x02);	/* ~R, vvvv=1111, L=1, pp=F3 */
	p[2] = store ? 0x7f : 0x6f;
	p[3] = (uint8_t)(0x84 | (n & 7) << 3);
	p[4] = 0x24;
	memcpy(p + 5, &disp, 4);
	return 9;
}

static size_t save_or_restore(uint8_t *p, uint32_t need, bool save, bool ymm)
{
	size_t n = 0;
	int32_t off = 0;

	for (unsigned i = 0; i < 32; i++) {
		if (!(need >> i & 1))
			continue;
		if (i < 16) {
			uint8_t rex = (uint8_t)(0x48 | (i >= 8 ? 0x04 : 0));
			n += put_rsp_disp(p ? p + n : (uint8_t[16]){ 0 }, rex, save ? 0x89 : 0x8b, 0, i,
					  off);
			off += 8;
		} else if (ymm) {
			n += put_ymm(p ? p + n : (uint8_t[16]){ 0 }, i - 16, off, save);
			off += 32;
		} else {	/* movups xmmN, [rsp + disp] / the store */
			uint8_t rex = i - 16 >= 8 ? 0x44 : 0;
			n += put_rsp_disp(p ? p + n : (uint8_t[16]){ 0 }, rex, 0x0f, save ? 0x11 : 0x10,
					  i - 16, off);
			off += 16;
		}
	}
	return n;
}

/* The save area: 8 bytes a GPR, 32 a vector register (16 without AVX),
 * sized so that rsp is 16-aligned at the call (8 mod 16 at the gate's
 * entry, the return address just pushed). */
static uint32_t save_size(uint32_t need, bool ymm)
{
	uint32_t s = 0;

	for (unsigned i = 0; i < 32; i++)
		if (need >> i & 1)
			s += i < 16 ? 8 : ymm ? 32 : 16;
	return s % 16 == 8 ? s : s + 8;
}

static bool cpu_has_avx(void)
{
	char buf[64];
	return !cc__isa_lacking("AVX", false, buf, sizeof buf);
}

static void emit(uint8_t *buf, size_t *n, const uint8_t *bytes, size_t len)
{
	if (buf)
		memcpy(buf + *n, bytes, len);
	*n += len;
}

/* lea rsp, [rsp + disp]: moves the stack, leaves the flags */
static void emit_lea_rsp(uint8_t *buf, size_t *n, int32_t disp)
{
	uint8_t b[8] = { 0x48, 0x8d, 0xa4, 0x24 };
	memcpy(b + 4, &disp, 4);
	emit(buf, n, b, sizeof b);
}

/*	lea   rsp, [rsp - S]		save area, flags intact
 *	mov   [rsp + k], reg ...	(vmovdqu / movups for vector registers)
 *	push  qword [rsp + S + 128]	x16: the caller's stack arguments, so
 *					the new code finds them where it expects
 *	call  target
 *	lea   rsp, [rsp + 128]
 *	mov   reg, [rsp + k] ...
 *	lea   rsp, [rsp + S]
 *	ret
 */
size_t cc__gate_encode(uint32_t need, uint64_t at, uint64_t target, uint8_t *buf)
{
	bool ymm = cpu_has_avx();
	int32_t S = (int32_t)save_size(need, ymm);
	uint8_t call[5] = { 0 };
	size_t n = 0;

	emit_lea_rsp(buf, &n, -S);
	n += save_or_restore(buf ? buf + n : NULL, need, true, ymm);
	for (int k = 0; k < STACK_ARGS / 8; k++) {
		uint8_t push[7] = { 0xff, 0xb4, 0x24 };	/* push qword [rsp + disp32] */
		int32_t d = S + STACK_ARGS;
		memcpy(push + 3, &d, 4);
		emit(buf, &n, push, sizeof push);
	}
	if (buf && cc_encode_call(at + n, target, call) < 0)
		return 0;
	emit(buf, &n, call, sizeof call);
	emit_lea_rsp(buf, &n, STACK_ARGS);
	n += save_or_restore(buf ? buf + n : NULL, need, false, ymm);
	emit_lea_rsp(buf, &n, S);
	emit(buf, &n, (const uint8_t[]){ 0xc3 }, 1);
	return n;
}
