/* Jump tables in instrumented copies (issue 10).
 *
 * The table itself stays where it is, and so does the code that reads it:
 * the copy computes the target exactly as the original does (an address in
 * the original function). Only the indirect jmp is replaced, by a dispatch
 * that compares that address with each of the table's targets and jumps to
 * the copy of the one it is; an address that is none of them (a table the
 * CFG read wrong, another program's change) leaves the copy for it, as the
 * original jmp would. The dispatch touches no flag (lea and jrcxz compare,
 * rcx and rdx saved below the red zone), so what the flags hold at the
 * targets is the original's.
 *
 *	lea -128(%rsp),%rsp; push %rcx; push %rdx; mov %REG,%rdx
 *	per target T:	movabs $-T,%rcx; lea (%rdx,%rcx),%rcx; jrcxz 1f; jmp 2f
 *		1:	pop %rdx; pop %rcx; lea 128(%rsp),%rsp; jmp COPY(T)
 *		2:
 *	pop %rdx; pop %rcx; lea 128(%rsp),%rsp; jmp *%REG	(the original bytes)
 *
 * Only the register form (jmp *%reg, GCC's and clang's for PIC tables) is
 * re-pointed; a jmp through memory is refused by the caller.
 */
#include "codecache/instr.h"

#include <errno.h>
#include <string.h>

/* The register of a `[notrack] jmp *%reg`, or -1. */
int ci_jmp_reg(const struct ci_insn *ci)
{
	size_t i = 0;
	int b = 0;

	if (ci->kind != CI_IJMP)
		return -1;
	if (i < ci->len && ci->bytes[i] == 0x3e)	/* notrack */
		i++;
	if (i < ci->len && (ci->bytes[i] & 0xf0) == 0x40) {
		b = ci->bytes[i] & 1;
		i++;
	}
	if (i + 2 != ci->len || ci->bytes[i] != 0xff)
		return -1;
	uint8_t m = ci->bytes[i + 1];
	if ((m & 0xc0) != 0xc0 || ((m >> 3) & 7) != 4)
		return -1;
	int reg = (m & 7) | b << 3;
	return reg == 4 ? -1 : reg;	/* not rsp: it moves here */
}

struct enc {
	uint8_t *buf;
	size_t at;
	uint64_t base;
	int err;
};

static void put(struct enc *e, const void *p, size_t n)
{
	if (e->buf)
		memcpy(e->buf + e->at, p, n);
	e->at += n;
}

static const uint8_t leave[] = {
	0x5a, 0x59,					/* pop %rdx; pop %rcx */
	0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0,		/* lea 128(%rsp),%rsp */
};

static void jmp_to(struct enc *e, uint64_t to)
{
	int64_t d = (int64_t)(to - (e->base + e->at + 5));

	if (e->buf && (d < INT32_MIN || d > INT32_MAX))
		e->err = -ERANGE;
	int32_t d32 = (int32_t)d;
	put(e, (uint8_t[]){ 0xe9 }, 1);
	put(e, &d32, 4);
}

size_t ci_dispatch_encode(uint8_t *buf, uint64_t at, const struct ci_insn *ci,
			  const uint64_t *targets, const uint64_t *copies, size_t n, int *err)
{
	struct enc e = { .buf = buf, .base = at };
	int reg = ci_jmp_reg(ci);

	*err = 0;
	if (reg < 0) {
		*err = -ENOTSUP;
		return 0;
	}
	put(&e, (uint8_t[]){ 0x48, 0x8d, 0x64, 0x24, 0x80, 0x51, 0x52 }, 7);
	/* mov %REG,%rdx */
	put(&e, (uint8_t[]){ (uint8_t)(0x48 | (reg >> 3) << 2), 0x89,
			     (uint8_t)(0xc2 | (reg & 7) << 3) }, 3);
	for (size_t i = 0; i < n; i++) {
		uint64_t neg = -targets[i];
		put(&e, (uint8_t[]){ 0x48, 0xb9 }, 2);			/* movabs $-T,%rcx */
		put(&e, &neg, 8);
		put(&e, (uint8_t[]){ 0x48, 0x8d, 0x0c, 0x0a }, 4);	/* lea (%rdx,%rcx),%rcx */
		put(&e, (uint8_t[]){ 0xe3, 0x02 }, 2);			/* jrcxz 1f */
		put(&e, (uint8_t[]){ 0xeb, (uint8_t)(sizeof leave + 5) }, 2);	/* jmp 2f */
		put(&e, leave, sizeof leave);				/* 1: */
		jmp_to(&e, copies[i]);
	}								/* 2: */
	put(&e, leave, sizeof leave);
	put(&e, ci->bytes, ci->len);
	*err = e.err;
	return e.at;
}
