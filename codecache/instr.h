/* instr.h: what codecache/'s instrumentation files share. */
#ifndef PADRONE_CODECACHE_INSTR_H
#define PADRONE_CODECACHE_INSTR_H

#include "codecache/internal.h"
#include "pipeline/rep.h"

#include <stdbool.h>
#include <stdint.h>

/* How control leaves an instruction. */
enum ci_kind {
	CI_PLAIN,	/* falls through (or stops: ud2, hlt) */
	CI_JMP,		/* jmp rel */
	CI_JCC,		/* jcc rel (cc: the condition) */
	CI_LOOPLIKE,	/* jrcxz, jecxz, loop, loope, loopne */
	CI_CALL,	/* call rel */
	CI_ICALL,	/* call through a register or memory */
	CI_IJMP,	/* jmp through a register or memory */
	CI_RET,
};

struct ci_insn {
	uint64_t pc;
	uint64_t target;	/* of a relative branch or call */
	uint8_t len, cc;
	bool falls;		/* the next instruction may run after it */
	enum ci_kind kind;
	uint8_t bytes[16];
	struct rep_insn rep;	/* memory references, rsp change, clobbers */
};

/* Decode the instruction at pc (bytes: up to len of them). 0, or
 * -ENOTSUP with the reason in why ("the instruction at 0x... ..."). */
int cc__instr_decode(const uint8_t *bytes, size_t len, uint64_t pc, struct ci_insn *in,
		     char *why, size_t size);

/* instr-move.c: threads between a function and its instrumented copy.
 * Per instruction i of the function (sorted by pc): where its capture code
 * begins in the copy (at), where the relocated instruction itself is
 * (insn), and whether a unit (a REP record) begins with it. Between those
 * points the copy holds exactly the original's registers, so a thread there
 * maps to the original instruction and back. */
struct ci_map {
	uint64_t func, size;		/* the original */
	uint64_t code, units_end;	/* the copy; the ring stub follows its units */
	const struct ci_insn *insns;
	size_t n;
	const uint64_t *at, *insn;	/* offsets in the copy */
	const bool *unit_start;
};
/* World stopped. A thread in the original function is moved to the copy:
 * stepped first (never over a system call) to where its unit begins, so
 * the unit it writes is whole. *moved says whether regs changed. */
int ci_move_in(struct attach_target *t, const struct ci_map *m, pid_t tid,
	       struct user_regs_struct *regs, bool *moved);
/* World stopped. A thread in the copy's units is stepped to a point that
 * maps to the original and moved there; one in the ring stub (maybe
 * waiting) is left for a later look. */
int ci_move_out(struct attach_target *t, const struct ci_map *m, pid_t tid,
		struct user_regs_struct *regs, bool *moved);
/* instr-jt.c: the register of a `[notrack] jmp *%reg` (not rsp), or -1. */
int ci_jmp_reg(const struct ci_insn *ci);
/* The dispatch that replaces a jump table's jmp in the copy (at: where it
 * goes; buf NULL: its size only): targets[i] goes to copies[i], anything
 * else where the original jmp would. Its size; *err -ERANGE when a jump
 * does not reach. */
size_t ci_dispatch_encode(uint8_t *buf, uint64_t at, const struct ci_insn *ci,
			  const uint64_t *targets, const uint64_t *copies, size_t n, int *err);

/* World stopped. Every unit of the copy jumps to where its original
 * instruction is (prefix and detour: the function's relocated first bytes,
 * NULL if unknown); a thread inside such a jump's bytes is moved out. */
#define CC_UNLINK_JMP 5
int ci_unlink(struct cc_cache *c, const struct ci_map *m, const struct cc_reloc *prefix,
	      uint64_t detour);

#endif
