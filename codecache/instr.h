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

#endif
