/* instr-emit.c: the code of an instrumented copy (issue 10; the design is
 * told in instr.c): each unit's captures, relocated instructions and commit,
 * jump tables' dispatches, then the ring stub pointed at the function's
 * section; laid out twice (offsets, then bytes) and written to the cache. */
#include "codecache/instr.h"
#include "cfg/cfg.h"

#include <Zydis/Zydis.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

extern const uint8_t cc_istub_begin[], cc_istub_end[];

struct out {
	uint8_t *buf;		/* NULL: only count */
	uint64_t at, base;	/* offset; the copy's address */
	uint32_t gs;		/* the function's section: its block at %gs:gs */
	int err;
};

static void put(struct out *o, const void *p, size_t n)
{
	if (o->buf)
		memcpy(o->buf + o->at, p, n);
	o->at += n;
}

static void put32(struct out *o, uint32_t v) { put(o, &v, 4); }

static void rel32(struct out *o, uint64_t target)
{
	int64_t d = (int64_t)(target - (o->base + o->at + 4));
	if (o->buf && (d < INT32_MIN || d > INT32_MAX))
		o->err = -ERANGE;
	put32(o, (uint32_t)(int32_t)d);
}

static void emit_capture(struct out *o, const struct rep_capture *cap)
{
	uint32_t slot = o->gs + IS_SLOTS + 8u * cap->slot;

	if (cap->reg == REP_REG_RFLAGS) {
		static const uint8_t pre[] = { 0x48, 0x8d, 0x64, 0x24, 0x80, 0x9c,
					       0x65, 0x8f, 0x04, 0x25 };
		static const uint8_t post[] = { 0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0 };
		put(o, pre, sizeof pre);
		put32(o, slot);
		put(o, post, sizeof post);
		return;
	}
	if (cap->reg == REP_REG_FSBASE) {
		/* lea -128(%rsp),%rsp; push %rax; rdfsbase %rax;
		 * mov %rax,%gs:slot; pop %rax; lea 128(%rsp),%rsp */
		static const uint8_t pre[] = { 0x48, 0x8d, 0x64, 0x24, 0x80, 0x50,
					       0xf3, 0x48, 0x0f, 0xae, 0xc0,
					       0x65, 0x48, 0x89, 0x04, 0x25 };
		static const uint8_t post[] = { 0x58, 0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0 };
		put(o, pre, sizeof pre);
		put32(o, slot);
		put(o, post, sizeof post);
		return;
	}
	unsigned code = cap->reg - REP_REG_RAX;
	uint8_t b[5] = { 0x65, (uint8_t)(0x48 | (code >> 3) << 2), 0x89,
			 (uint8_t)(0x04 | (code & 7) << 3), 0x25 };
	put(o, b, sizeof b);
	put32(o, slot);
}

/* Does the unit keep any slot in the block (captured into %gs:IS_SLOTS)
 * rather than writing it straight from its register at the commit? Only
 * those units can have their slots overwritten by a signal handler's. */
static bool keeps_slots(const struct unit *u)
{
	for (uint32_t c = 0; c < u->b.ncaps; c++)
		if (!(u->direct >> u->b.caps[c].slot & 1))
			return true;
	return false;
}

/* movb $v,%gs:IS_INTACT: a byte store, flags untouched. */
static void emit_intact(struct out *o, uint8_t v)
{
	put(o, (uint8_t[]){ 0x65, 0xc6, 0x04, 0x25 }, 4);
	put32(o, o->gs + IS_INTACT);
	put(o, &v, 1);
}

/* The header, marked spoiled when the slots were overwritten since the
 * unit's first capture: the intact byte is read after the slots were
 * copied into the record (a handler running later cannot change them) and
 * cleared for the next unit. A handler's unit sets it again at its first
 * capture and clears it at its commit, so the interrupted one then finds
 * it clear. Leaves the header in rcx. */
static void emit_header(struct out *o, const struct unit *u)
{
	uint32_t n = u->b.block.nslots;
	uint64_t hdr = REP_S_WORD(u->id, n);

	if (keeps_slots(u)) {
		uint64_t spoiled = hdr | REP_S_SPOILED;
		put(o, (uint8_t[]){ 0x65, 0x0f, 0xb6, 0x0c, 0x25 }, 5);	/* movzbl %gs:INTACT,%ecx */
		put32(o, o->gs + IS_INTACT);
		emit_intact(o, 0);
		put(o, (uint8_t[]){ 0xe3, 0x0c }, 2);			/* jrcxz spoiled */
		put(o, (uint8_t[]){ 0x48, 0xb9 }, 2);			/* movabs $hdr,%rcx */
		put(o, &hdr, 8);
		put(o, (uint8_t[]){ 0xeb, 0x0a }, 2);			/* jmp store */
		put(o, (uint8_t[]){ 0x48, 0xb9 }, 2);			/* spoiled: movabs */
		put(o, &spoiled, 8);
		return;							/* store: */
	}
	put(o, (uint8_t[]){ 0x48, 0xb9 }, 2);				/* movabs $hdr,%rcx */
	put(o, &hdr, 8);
}

/* Where the commit moves rsp before it writes the record: below the red
 * zone, then rax and rcx pushed. */
#define COMMIT_RSP (128 + 16)

/* A slot written straight from register reg at the commit, less the steps
 * taken since its capture point, into disp(%rax): rax and rcx are read
 * where the commit pushed them (rcx at 0(%rsp), rax at 8(%rsp)), rsp is
 * its value before the commit's, a step is taken back by lea into rcx
 * (flags untouched), and the result stored. */
static void emit_direct(struct out *o, uint8_t reg, int32_t step, uint32_t disp)
{
	unsigned code = reg - REP_REG_RAX;

	if (reg == REP_REG_RSP) {
		put(o, (uint8_t[]){ 0x48, 0x8d, 0x8c, 0x24 }, 4);	/* lea d(%rsp),%rcx */
		put32(o, (uint32_t)(COMMIT_RSP - step));
		step = 0;
		code = 1;
	} else if (reg == REP_REG_RAX || reg == REP_REG_RCX) {
		if (reg == REP_REG_RAX)
			put(o, (uint8_t[]){ 0x48, 0x8b, 0x4c, 0x24, 0x08 }, 5);	/* mov 8(%rsp),%rcx */
		else
			put(o, (uint8_t[]){ 0x48, 0x8b, 0x0c, 0x24 }, 4);	/* mov (%rsp),%rcx */
		code = 1;
	}
	if (step) {						/* lea -step(%reg),%rcx */
		put(o, (uint8_t[]){ (uint8_t)(0x48 | (code >> 3)), 0x8d,
				    (uint8_t)(0x88 | (code & 7)) }, 3);
		if ((code & 7) == 4)
			put(o, (uint8_t[]){ 0x24 }, 1);		/* r12: a SIB byte, no index */
		put32(o, (uint32_t)-step);
		code = 1;
	}
	put(o, (uint8_t[]){ (uint8_t)(0x48 | (code >> 3) << 2), 0x89,	/* mov %reg,disp(%rax) */
			    (uint8_t)(0x80 | (code & 7) << 3) }, 3);
	put32(o, disp);
}

/* How far ahead of the unit being written the commit fetches ring lines. */
#define PREFETCH_AHEAD 2048

/* The commit's frame: rsp below the red zone, rax and rcx saved. */
static const uint8_t commit_save[] = {
	0x48, 0x8d, 0x64, 0x24, 0x80,				/* lea -128(%rsp),%rsp */
	0x50, 0x51,						/* push %rax; push %rcx */
};
static const uint8_t commit_restore[] = {
	0x59, 0x58,						/* pop %rcx; pop %rax */
	0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0,			/* lea 128(%rsp),%rsp */
};

/* mov %gs:IS_PTR,%rax; prefetchw PREFETCH_AHEAD(%rax); mov (%rax),%rcx.
 * The prefetch: the ring's lines were last written by the consumer on
 * another CPU (it clears them); fetched for writing this far ahead, the
 * sentinel's load no longer waits for the line to come over (a fifth of
 * the copy's samples sat on the jrcxz after it). A hint: it never faults,
 * flags untouched. 2048 bytes (some 50 records of a loop's block) recorded
 * 5-10% faster than 512 on the streaming kernel; 4096 no faster. */
static void emit_read_ring(struct out *o)
{
	put(o, (uint8_t[]){ 0x65, 0x48, 0x8b, 0x04, 0x25 }, 5);
	put32(o, o->gs + IS_PTR);
	put(o, (uint8_t[]){ 0x0f, 0x0d, 0x88 }, 3);
	put32(o, PREFETCH_AHEAD);
	put(o, (uint8_t[]){ 0x48, 0x8b, 0x08 }, 3);
}

/* lea 8(1+n)(%rax),%rcx; mov %rcx,%gs:IS_PTR: the record of n slots reserved. */
static void emit_move_ptr(struct out *o, uint32_t n)
{
	put(o, (uint8_t[]){ 0x48, 0x8d, 0x88 }, 3);
	put32(o, 8 * (1 + n));
	put(o, (uint8_t[]){ 0x65, 0x48, 0x89, 0x0c, 0x25 }, 5);
	put32(o, o->gs + IS_PTR);
}

/* Slots 0..n-1 into the record at (%rax). */
static void emit_slots(struct out *o, const struct unit *u, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		if (u->direct >> k & 1) {
			emit_direct(o, u->direct_reg[k], u->direct_step[k], 8 * (1 + k));
			continue;
		}
		put(o, (uint8_t[]){ 0x65, 0x48, 0x8b, 0x0c, 0x25 }, 5);
		put32(o, o->gs + IS_SLOTS + 8 * k);
		put(o, (uint8_t[]){ 0x48, 0x89, 0x88 }, 3);
		put32(o, 8 * (1 + k));
	}
}

/* movl $v,%gs:IS_LAST (no register, no flags). */
static void emit_last(struct out *o, uint32_t v)
{
	put(o, (uint8_t[]){ 0x65, 0xc7, 0x04, 0x25 }, 4);
	put32(o, o->gs + IS_LAST);
	put32(o, v);
}

/* jmp to the copy's offset off (known from the first layout). */
static void emit_jmp(struct out *o, const struct cc_instr *in, uint64_t off)
{
	put(o, (uint8_t[]){ 0xe9 }, 1);
	rel32(o, in->code + off);
}

/* Reserve the whole record, copy the slots, write the header last, inside
 * the commit's frame. The reservation reads the pointer and moves it in
 * separate instructions: a handler run in between would place its units
 * where this one goes, so that stretch is a restartable range
 * (cc__instr_restart_ranges). */
static void emit_record(struct out *o, const struct cc_instr *in, struct unit *u)
{
	uint32_t n = u->b.block.nslots;
	uint64_t read_at = o->at;

	emit_read_ring(o);
	put(o, (uint8_t[]){ 0xe3, 0x0c, 0xb9 }, 3);		/* jrcxz fast; mov $n,%ecx */
	put32(o, n);
	put(o, (uint8_t[]){ 0xe8 }, 1);				/* call stub */
	rel32(o, in->code + in->stub_off);
	uint64_t stub_ret = o->at;
	put(o, (uint8_t[]){ 0xeb, 0x10 }, 2);			/* jmp write */
	uint64_t fast_at = o->at;
	emit_move_ptr(o, n);					/* fast: */
	if (!o->buf) {
		u->read_at = read_at;
		u->stub_ret = stub_ret;
		u->fast_at = fast_at;
		u->fast_end = o->at;
	}
	emit_slots(o, u, n);					/* write: */
	emit_header(o, u);
	put(o, (uint8_t[]){ 0x48, 0x89, 0x08 }, 3);		/* mov %rcx,(%rax) */
}

/* A unit that may repeat (u->carried): when the last unit written to the
 * ring is its own (IS_LAST holds its id: no other unit's commit, and so no
 * signal handler's run of the copy, came between), its carried slots are
 * that unit's, and it writes a repeat unit without them. Else, or when the
 * ring's word is not CLEAR (a chunk's end: every chunk begins with a whole
 * unit, so recovery can start at any), it writes the whole unit out of
 * line (emit_full). From the test to the pointer's move is one
 * restartable range: a handler run inside it starts it again, test
 * included. */
static void emit_repeat(struct out *o, const struct cc_instr *in, struct unit *u)
{
	uint32_t held = u->b.block.nslots - u->carried;
	uint64_t hdr = REP_S_WORD(u->id, held) | REP_S_REPEAT;
	uint64_t repeat_at = o->at;

	put(o, (uint8_t[]){ 0x65, 0x8b, 0x0c, 0x25 }, 4);	/* mov %gs:IS_LAST,%ecx */
	put32(o, o->gs + IS_LAST);
	put(o, (uint8_t[]){ 0x8d, 0x89 }, 2);			/* lea -id(%rcx),%ecx */
	put32(o, -u->id);
	put(o, (uint8_t[]){ 0xe3, 0x05 }, 2);			/* jrcxz mine */
	emit_jmp(o, in, u->full_off);
	emit_read_ring(o);					/* mine: */
	put(o, (uint8_t[]){ 0xe3, 0x05 }, 2);			/* jrcxz clear */
	emit_jmp(o, in, u->full_off);
	emit_move_ptr(o, held);					/* clear: */
	if (!o->buf) {
		u->repeat_at = repeat_at;
		u->repeat_end = o->at;
	}
	emit_slots(o, u, held);
	put(o, (uint8_t[]){ 0x48, 0xb9 }, 2);			/* movabs $hdr,%rcx */
	put(o, &hdr, 8);
	put(o, (uint8_t[]){ 0x48, 0x89, 0x08 }, 3);		/* mov %rcx,(%rax) */
}

/* A repeating unit's whole record, after its relocated instructions: its
 * id into IS_LAST first (a handler run after that sets it back to another
 * unit's or 0 by its own commits), then as any unit, and back. */
static void emit_full(struct out *o, const struct cc_instr *in, struct unit *u)
{
	if (!o->buf)
		u->full_off = o->at;
	emit_last(o, u->id);
	emit_record(o, in, u);
	emit_jmp(o, in, u->commit_end);
}

/* The unit's commit: its record reserved and written in a frame of its
 * own. Where some unit of the copy may repeat, every other one clears
 * IS_LAST first. */
static void emit_commit(struct out *o, const struct cc_instr *in, struct unit *u)
{
	put(o, commit_save, sizeof commit_save);
	if (u->carried) {
		emit_repeat(o, in, u);
	} else {
		if (in->repeats)
			emit_last(o, 0);
		emit_record(o, in, u);
	}
	if (!o->buf)
		u->commit_end = o->at;
	put(o, commit_restore, sizeof commit_restore);
}

bool cc__instr_transfers(const struct ci_insn *ci)
{
	return ci->kind != CI_PLAIN || !ci->falls;
}

static const struct cfg_jump_table *jump_table_at(const struct cc_instr *in, uint64_t pc)
{
	for (size_t i = 0; i < cfg_function__jump_table_count(in->cfg); i++)
		if (cfg_function__jump_table(in->cfg, i)->at == pc)
			return cfg_function__jump_table(in->cfg, i);
	return NULL;
}

/* A jump table's jmp: its targets that are units go to their copies. */
static void emit_dispatch(struct out *o, struct cc_instr *in, const struct ci_insn *ci,
			  const struct cfg_jump_table *jt)
{
	uint64_t *from = calloc(jt->target_count + 1, sizeof *from);
	uint64_t *to = calloc(jt->target_count + 1, sizeof *to);
	size_t n = 0;
	int err = 0;

	if (!from || !to)
		err = -ENOMEM;
	for (uint32_t i = 0; !err && i < jt->target_count; i++) {
		const struct unit *u = cc__instr_unit_at(in, jt->targets[i]);
		bool dup = false;
		for (size_t k = 0; k < n && !dup; k++)
			dup = from[k] == jt->targets[i];
		if (u && !dup) {
			from[n] = jt->targets[i];
			to[n++] = in->code + u->off;
		}
	}
	size_t len = err ? 0 : ci_dispatch_encode(o->buf ? o->buf + o->at : NULL, o->base + o->at,
						  ci, from, to, n, &err);
	if (err && !o->err)
		o->err = err;
	o->at += len;
	free(from);
	free(to);
}

/* One original instruction, relocated; branches to a unit go to its copy. */
static void emit_insn(struct out *o, struct cc_instr *in, const struct ci_insn *ci)
{
	const struct cfg_jump_table *jt = ci->kind == CI_IJMP ? jump_table_at(in, ci->pc) : NULL;
	if (jt) {
		emit_dispatch(o, in, ci, jt);
		return;
	}
	const struct unit *to = (ci->kind == CI_JMP || ci->kind == CI_JCC) ?
		cc__instr_unit_at(in, ci->target) : NULL;
	struct cc_reloc *r;
	struct cc_error err;

	if (to && ci->kind == CI_JMP) {
		put(o, (uint8_t[]){ 0xe9 }, 1);
		rel32(o, in->code + to->off);
		return;
	}
	if (to) {
		put(o, (uint8_t[]){ 0x0f, (uint8_t)(0x80 | ci->cc) }, 2);
		rel32(o, in->code + to->off);
		return;
	}
	if (cc_reloc__new(ci->bytes, ci->len, ci->pc, NULL, &r, &err) < 0) {
		o->err = err.err;
		return;
	}
	size_t n = cc_reloc__size(r);
	if (o->buf && cc_reloc__encode(r, o->base + o->at, o->buf + o->at, n, &err) < 0)
		o->err = err.err;
	o->at += n;
	cc_reloc__free(r);
}

/* A capture into the block, the first one of its unit preceded by setting
 * the intact byte (as late as can be: a handler's unit that commits before
 * it spoils nothing of this one). */
static void emit_kept_capture(struct out *o, const struct rep_capture *cap, bool *marked)
{
	if (!*marked)
		emit_intact(o, 1);
	*marked = true;
	emit_capture(o, cap);
}

/* Does the unit begin with its first instruction relocated, shorter than
 * the jump that unlinking writes over a unit's first bytes? (A capture
 * begins with a gs-relative store of 8 bytes or more, a commit with its
 * 5-byte lea.) */
static bool starts_short(const struct out *o, struct cc_instr *in, const struct unit *u)
{
	const struct rep_built *b = &u->b;
	const struct ci_insn *ci = &in->insns[u->first];

	for (uint32_t c = 0; c < b->ncaps && b->caps[c].insn == 0 && !b->caps[c].after; c++)
		if (!(u->direct >> b->caps[c].slot & 1))
			return false;
	if (u->n == 1 && cc__instr_transfers(ci))
		return false;
	struct out probe = { .at = o->at, .base = o->base, .gs = o->gs };
	emit_insn(&probe, in, ci);
	return probe.at - o->at < CC_UNLINK_JMP;
}

static void emit_unit(struct out *o, struct cc_instr *in, struct unit *u, const struct unit *next)
{
	const struct rep_built *b = &u->b;
	uint32_t c = 0;
	bool marked = false;	/* the intact byte set, at the first slot kept */

	if (!o->buf)
		u->off = o->at;
	for (uint32_t i = 0; i < u->n; i++) {
		const struct ci_insn *ci = &in->insns[u->first + i];
		bool last = i + 1 == u->n;
		if (!o->buf)
			in->insn_at[u->first + i] = o->at;
		/* a unit's first bytes are one instruction, which unlinking
		 * replaces whole: no thread, running or back from a signal
		 * handler, ever resumes inside the jump written there */
		if (i == 0 && starts_short(o, in, u))
			put(o, (uint8_t[]){ 0x0f, 0x1f, 0x44, 0x00, 0x00 }, 5);	/* nopl 0(%rax,%rax) */
		for (; c < b->ncaps && b->caps[c].insn == i && !b->caps[c].after; c++)
			if (!(u->direct >> b->caps[c].slot & 1))
				emit_kept_capture(o, &b->caps[c], &marked);
		if (last && cc__instr_transfers(ci))
			emit_commit(o, in, u);
		if (!o->buf)
			in->insn_off[u->first + i] = o->at;
		emit_insn(o, in, ci);
		for (; c < b->ncaps && b->caps[c].insn == i && b->caps[c].after; c++)
			if (!(u->direct >> b->caps[c].slot & 1))
				emit_kept_capture(o, &b->caps[c], &marked);
		if (last && !cc__instr_transfers(ci))
			emit_commit(o, in, u);
	}
	const struct ci_insn *ci = &in->insns[u->first + u->n - 1];
	uint64_t end = ci->pc + ci->len;
	/* the next unit follows, unless a whole record is laid out in between */
	bool next_follows = next && in->insns[next->first].pc == end && !u->carried;
	if (ci->falls && !next_follows) {
		const struct unit *to = cc__instr_unit_at(in, end);	/* fall through to a unit laid out elsewhere */
		put(o, (uint8_t[]){ 0xe9 }, 1);
		rel32(o, to ? in->code + to->off : end);
	}
	if (u->carried)
		emit_full(o, in, u);
}

/* The stub's %gs:OFF operands to the function's section, %gs:(gs + OFF):
 * each is an absolute disp32 (no base, no index), checked. */
static int stub_to_section(uint8_t *p, size_t len, uint32_t gs)
{
	ZydisDecoder dec;
	ZydisDecodedInstruction d;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t at = 0; at < len; at += d.length) {
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, p + at, len - at, &d, ops)))
			return -EINVAL;
		for (unsigned i = 0; i < d.operand_count; i++) {
			const ZydisDecodedOperand *op = &ops[i];
			if (op->type != ZYDIS_OPERAND_TYPE_MEMORY || op->mem.segment != ZYDIS_REGISTER_GS)
				continue;
			if (op->mem.base != ZYDIS_REGISTER_NONE || op->mem.index != ZYDIS_REGISTER_NONE ||
			    d.raw.disp.size != 32)
				return -EINVAL;
			int32_t disp;
			memcpy(&disp, p + at + d.raw.disp.offset, 4);
			disp += (int32_t)gs;
			memcpy(p + at + d.raw.disp.offset, &disp, 4);
		}
	}
	return 0;
}

/* The status flags are dead where the function is entered: nothing from
 * its entry on tests one before an instruction sets them all (straight-line
 * code only, at most 32 instructions). */
static bool entry_flags_dead(const struct cc_instr *in)
{
	size_t i = 0;

	while (i < in->ninsns && in->insns[i].pc < in->fn.addr)
		i++;
	for (size_t n = 0; i < in->ninsns && n < 32; i++, n++) {
		const struct ci_insn *ci = &in->insns[i];
		if (ci->tests_flags)
			return false;
		if (ci->sets_flags)
			return true;
		if (ci->kind != CI_PLAIN || !ci->falls ||
		    (i + 1 < in->ninsns && in->insns[i + 1].pc != ci->pc + ci->len))
			return false;	/* not followed further */
	}
	return false;
}

/* The gate, where the original's entry jumps: a count of the calls, then
 * `jmp *%gs:IS_GATE` to one of two landings, on (the entry unit) or off
 * (the detour: the original's displaced first bytes, then the rest of the
 * original). It begins a 64-byte line of the copy (which is 64-aligned), so
 * the landings' addresses differ in their low byte alone: padrone switches
 * a thread by writing that byte of its block (cc_instr__switch), which the
 * thread reads whole, old or new, never torn. The count (`incq
 * %gs:IS_CALLS`, a thread's own word: no lock) changes the flags, so it is
 * there only where they are dead at the entry (else a nop of its size):
 * the overhead budget weighs the thread's busy time per call with it
 * (src/instr-budget.c). Neither way touches a register; off, the count is
 * the only work a call does besides four jumps. */
static void emit_gate(struct out *o, struct cc_instr *in)
{
	const struct unit *entry = cc__instr_unit_at(in, in->fn.addr);

	o->at = (o->at + 63) & ~63ULL;
	if (!o->buf) {
		in->gate_off = o->at;
		in->counts_calls = entry_flags_dead(in);
	}
	if (in->counts_calls) {
		put(o, (uint8_t[]){ 0x65, 0x48, 0xff, 0x04, 0x25 }, 5);	/* incq %gs:IS_CALLS */
		put32(o, o->gs + IS_CALLS);
	} else {
		put(o, (uint8_t[]){ 0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0 }, 9);
	}
	put(o, (uint8_t[]){ 0x65, 0xff, 0x24, 0x25 }, 4);	/* jmp *%gs:IS_GATE */
	put32(o, o->gs + IS_GATE);
	while (o->at - in->gate_off < CI_GATE_ON)
		put(o, (uint8_t[]){ 0xcc }, 1);
	put(o, (uint8_t[]){ 0xe9 }, 1);				/* on: jmp entry unit */
	rel32(o, in->code + (entry ? entry->off : 0));
	while (o->at - in->gate_off < CI_GATE_OFF)
		put(o, (uint8_t[]){ 0xcc }, 1);
	put(o, (uint8_t[]){ 0xe9 }, 1);				/* off: jmp detour */
	rel32(o, in->detour);
	if (o->buf && (!entry || !in->detour) && !o->err)
		o->err = -ENOENT;
}

uint64_t cc__instr_gate(const struct cc_instr *in, bool on)
{
	return in->code + in->gate_off + (on ? CI_GATE_ON : CI_GATE_OFF);
}

/* The copy: units in address order, then the ring stub, then the gate. Twice: offsets
 * first (buf NULL), then the bytes. */
static int emit_all(struct cc_instr *in, uint8_t *buf)
{
	struct out o = { .buf = buf, .base = in->code, .gs = in->section * IS_SIZE };

	for (size_t i = 0; i < in->nunits; i++)
		emit_unit(&o, in, &in->units[i], i + 1 < in->nunits ? &in->units[i + 1] : NULL);
	o.at = (o.at + 63) & ~63ULL;
	in->stub_off = o.at;
	put(&o, cc_istub_begin, (size_t)(cc_istub_end - cc_istub_begin));
	if (buf && !o.err)
		o.err = stub_to_section(buf + in->stub_off, o.at - in->stub_off, o.gs);
	emit_gate(&o, in);
	in->code_size = o.at;
	if (o.err)
		return cc__fail(in->c, CC_PHASE_WRITE, o.err, "cannot lay out the instrumented "
				"copy of %s (error %d)", in->name, o.err);
	return 0;
}

int cc__instr_place_code(struct cc_instr *in)
{
	int rc;

	if ((rc = emit_all(in, NULL)) < 0)
		return rc;
	if ((rc = cc_cache__alloc(in->c, CC_CODE, in->code_size, 64, in->fn.addr, &in->code)) < 0)
		return rc;
	uint8_t *buf = calloc(1, in->code_size);
	if (!buf)
		return cc__fail(in->c, CC_PHASE_WRITE, -ENOMEM, "out of memory");
	rc = emit_all(in, buf);
	if (rc == 0)
		rc = cc_cache__write(in->c, in->code, buf, in->code_size);
	free(buf);
	return rc;
}
