/* Instruction relocation: decode at one address, re-emit to run at another.
 *
 * Every instruction is given a size that does not depend on the destination
 * (branches always rel32, rip-relative operands keep their disp32), so the
 * layout is computed once and encode only fills in displacements. Branches
 * and rewritten sequences are produced by Zydis' encoder; other instructions
 * are copied byte for byte, with a rip-relative disp32 patched in place, so
 * prefixes and VEX/EVEX forms survive exactly as the compiler wrote them.
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"

#include <Zydis/Zydis.h>
#include <inttypes.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum rkind {
	RK_COPY,	/* verbatim */
	RK_RIPREL,	/* verbatim, disp32 re-targeted */
	RK_JMP,		/* jmp rel8/rel32 -> jmp rel32 */
	RK_JCC,		/* jcc rel8/rel32 -> jcc rel32 */
	RK_CALL,	/* call rel32 */
	RK_LOOPLIKE,	/* jrcxz/jecxz/loop*: "op +2; jmp +5; jmp rel32 target" */
	RK_XBEGIN,	/* xbegin rel16/rel32 -> xbegin rel32 */
};

struct rinsn {
	uint64_t src;		/* original address */
	uint64_t target;	/* branch target / rip-relative operand address */
	uint32_t off;		/* offset in the copy */
	uint8_t len;		/* original length */
	uint8_t new_len;
	uint8_t kind;
	uint8_t disp_off;	/* RK_RIPREL: where the disp32 is */
	uint8_t addr32;		/* RK_LOOPLIKE: uses ecx (0x67 prefix) */
	ZydisMnemonic mnemonic;
	uint8_t bytes[ZYDIS_MAX_INSTRUCTION_LENGTH];
};

struct cc_reloc {
	uint64_t src;
	size_t src_len;
	size_t size;
	size_t n;
	bool jump_back;		/* a trailing jmp rel32 follows the copies */
	struct rinsn *in;
};

int cc__err(struct cc_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->err = code;
		err->no_symbol = false;
	}
	return code;
}

/* "lea rax, [rip+0x2f3c]" for messages. */
static void insn_text(const uint8_t *bytes, size_t len, uint64_t addr, char *buf, size_t size)
{
	ZydisDisassembledInstruction d;

	if (ZYAN_SUCCESS(ZydisDisassembleIntel(ZYDIS_MACHINE_MODE_LONG_64, addr, bytes, len, &d)))
		snprintf(buf, size, "%s", d.text);
	else
		snprintf(buf, size, "(undecodable)");
}

void cc_insn_text(const void *bytes, size_t len, uint64_t addr, char *buf, size_t size)
{
	insn_text(bytes, len, addr, buf, size);
}

static bool is_looplike(ZydisMnemonic m)
{
	return m == ZYDIS_MNEMONIC_JRCXZ || m == ZYDIS_MNEMONIC_JECXZ ||
	       m == ZYDIS_MNEMONIC_JCXZ || m == ZYDIS_MNEMONIC_LOOP ||
	       m == ZYDIS_MNEMONIC_LOOPE || m == ZYDIS_MNEMONIC_LOOPNE;
}

/* Classify one decoded instruction; returns 0 or a refusal. */
static int classify(struct rinsn *ri, const ZydisDecodedInstruction *d,
		    const ZydisDecodedOperand *ops, struct cc_error *err)
{
	char text[96];

	ri->kind = RK_COPY;
	ri->new_len = d->length;
	if (d->attributes & ZYDIS_ATTRIB_IS_RELATIVE) {
		bool has_rel_imm = false;
		for (unsigned i = 0; i < d->operand_count_visible; i++) {
			const ZydisDecodedOperand *op = &ops[i];
			if (op->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op->imm.is_relative) {
				ZyanU64 abs;
				ZydisCalcAbsoluteAddress(d, op, ri->src, &abs);
				ri->target = abs;
				has_rel_imm = true;
			} else if (op->type == ZYDIS_OPERAND_TYPE_MEMORY &&
				   op->mem.base == ZYDIS_REGISTER_RIP) {
				ZyanU64 abs;
				ZydisCalcAbsoluteAddress(d, op, ri->src, &abs);
				ri->target = abs;
				if (d->raw.disp.size != 32) {
					insn_text(ri->bytes, ri->len, ri->src, text, sizeof text);
					return cc__err(err, -ENOTSUP,
						    "cannot relocate `%s` at 0x%" PRIx64
						    ": rip-relative displacement of %u bits",
						    text, ri->src, d->raw.disp.size);
				}
				ri->kind = RK_RIPREL;
				ri->disp_off = d->raw.disp.offset;
			}
		}
		if (has_rel_imm) {
			switch (d->meta.category) {
			case ZYDIS_CATEGORY_UNCOND_BR:
				ri->kind = RK_JMP;
				ri->new_len = 5;
				break;
			case ZYDIS_CATEGORY_CALL:
				ri->kind = RK_CALL;
				ri->new_len = 5;
				break;
			case ZYDIS_CATEGORY_COND_BR:
				if (is_looplike(d->mnemonic)) {
					ri->kind = RK_LOOPLIKE;
					ri->addr32 = d->address_width == 32;
					ri->new_len = (uint8_t)(2 + ri->addr32 + 2 + 5);
				} else {
					ri->kind = RK_JCC;
					ri->new_len = 6;
				}
				break;
			default:
				if (d->mnemonic == ZYDIS_MNEMONIC_XBEGIN) {
					ri->kind = RK_XBEGIN;
					ri->new_len = 6;
					break;
				}
				insn_text(ri->bytes, ri->len, ri->src, text, sizeof text);
				return cc__err(err, -ENOTSUP,
					    "cannot relocate `%s` at 0x%" PRIx64
					    ": unsupported relative operand", text, ri->src);
			}
		}
	}
	ri->mnemonic = d->mnemonic;
	return 0;
}

static bool falls_through(const struct rinsn *ri)
{
	return !(ri->kind == RK_JMP || ri->mnemonic == ZYDIS_MNEMONIC_RET ||
		 ri->mnemonic == ZYDIS_MNEMONIC_JMP || ri->mnemonic == ZYDIS_MNEMONIC_UD2 ||
		 ri->mnemonic == ZYDIS_MNEMONIC_HLT);
}

int cc_reloc__new(const void *code, size_t len, uint64_t src, const struct cc_reloc_opts *opts,
		  struct cc_reloc **out, struct cc_error *err)
{
	struct cc_reloc_opts o = { .sz = sizeof o };
	ZydisDecoder dec;
	const uint8_t *p = code;

	*out = NULL;
	if (!UTIL_OPTS_COPY(&o, opts))
		return cc__err(err, -EINVAL, UTIL_OPTS_UNKNOWN);
	if (!code || len == 0)
		return cc__err(err, -EINVAL, "nothing to relocate at 0x%" PRIx64, src);
	if (o.min_len > len)
		return cc__err(err, -EINVAL,
			    "asked to relocate %zu bytes at 0x%" PRIx64 " but only %zu are given",
			    o.min_len, src, len);
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);

	struct cc_reloc *r = calloc(1, sizeof *r);
	size_t cap = 16;
	if (!r || !(r->in = calloc(cap, sizeof *r->in))) {
		free(r);
		return cc__err(err, -ENOMEM, "out of memory");
	}
	r->src = src;
	size_t want = o.min_len ? o.min_len : len;
	size_t pos = 0;
	int rc;
	while (pos < want) {
		ZydisDecodedInstruction d;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, p + pos, len - pos, &d, ops))) {
			rc = cc__err(err, -EILSEQ, "cannot relocate the bytes at 0x%" PRIx64
				  ": %s", src + pos,
				  len - pos < ZYDIS_MAX_INSTRUCTION_LENGTH ?
				  "no valid instruction before the end of the code given" :
				  "not a valid instruction");
			goto err;
		}
		if (r->n == cap) {
			struct rinsn *in = realloc(r->in, 2 * cap * sizeof *in);
			if (!in) {
				rc = cc__err(err, -ENOMEM, "out of memory");
				goto err;
			}
			r->in = in;
			cap *= 2;
		}
		struct rinsn *ri = &r->in[r->n];
		memset(ri, 0, sizeof *ri);
		ri->src = src + pos;
		ri->len = d.length;
		memcpy(ri->bytes, p + pos, d.length);
		if ((rc = classify(ri, &d, ops, err)) < 0)
			goto err;
		ri->off = (uint32_t)r->size;
		r->size += ri->new_len;
		r->n++;
		pos += d.length;
	}
	r->src_len = pos;
	r->jump_back = o.jump_back && falls_through(&r->in[r->n - 1]);
	if (r->jump_back)
		r->size += 5;

	/* Branches landing inside the relocated bytes must land on an
	 * instruction start: they will be pointed at its copy. */
	for (size_t i = 0; i < r->n; i++) {
		struct rinsn *ri = &r->in[i];
		size_t off;
		if (ri->kind == RK_COPY || ri->kind == RK_RIPREL)
			continue;
		if (ri->target >= src && ri->target < src + r->src_len &&
		    cc_reloc__map(r, ri->target, &off) < 0) {
			char text[96];
			insn_text(ri->bytes, ri->len, ri->src, text, sizeof text);
			rc = cc__err(err, -ENOTSUP, "cannot relocate `%s` at 0x%" PRIx64
				  ": it branches into the middle of an instruction (0x%" PRIx64 ")",
				  text, ri->src, ri->target);
			goto err;
		}
	}
	*out = r;
	return 0;
err:
	cc_reloc__free(r);
	return rc;
}

void cc_reloc__free(struct cc_reloc *r)
{
	if (!r)
		return;
	free(r->in);
	free(r);
}

size_t cc_reloc__count(const struct cc_reloc *r) { return r->n; }
size_t cc_reloc__src_len(const struct cc_reloc *r) { return r->src_len; }
size_t cc_reloc__size(const struct cc_reloc *r) { return r->size; }

static const struct rinsn *find_src(const struct cc_reloc *r, uint64_t pc)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->in[mid].src < pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->n && r->in[lo].src == pc ? &r->in[lo] : NULL;
}

int cc_reloc__map(const struct cc_reloc *r, uint64_t pc, size_t *off)
{
	const struct rinsn *ri = find_src(r, pc);

	if (!ri)
		return -ENOENT;
	*off = ri->off;
	return 0;
}

int cc_reloc__unmap(const struct cc_reloc *r, size_t off, uint64_t *pc)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->in[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == r->n || r->in[lo].off != off)
		return -ENOENT;
	*pc = r->in[lo].src;
	return 0;
}

bool cc_reloc__has_inner_return(const struct cc_reloc *r)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct rinsn *ri = &r->in[i];
		bool is_call = ri->kind == RK_CALL || ri->mnemonic == ZYDIS_MNEMONIC_CALL;
		if (is_call && ri->src + ri->len < r->src + r->src_len)
			return true;
	}
	return false;
}

/* Where a branch to target goes from the copy at dst. */
static uint64_t dest_of(const struct cc_reloc *r, uint64_t dst, uint64_t target)
{
	const struct rinsn *ri;

	if (target >= r->src && target < r->src + r->src_len && (ri = find_src(r, target)))
		return dst + ri->off;
	return target;
}

static bool fits_rel32(uint64_t from_end, uint64_t to)
{
	int64_t d = (int64_t)(to - from_end);
	return d >= INT32_MIN && d <= INT32_MAX;
}

/* Encode one branch with an explicit relative immediate (rel != absolute). */
static int enc_rel(ZydisMnemonic m, ZydisBranchWidth width, int64_t rel, bool addr32,
		   uint8_t *buf, size_t *len)
{
	ZydisEncoderRequest req;

	memset(&req, 0, sizeof req);
	req.machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
	req.mnemonic = m;
	req.branch_type = ZYDIS_BRANCH_TYPE_NONE;
	req.branch_width = width;
	if (addr32)
		req.address_size_hint = ZYDIS_ADDRESS_SIZE_HINT_32;
	req.operand_count = 1;
	req.operands[0].type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	req.operands[0].imm.s = rel;
	return ZYAN_SUCCESS(ZydisEncoderEncodeInstruction(&req, buf, len)) ? 0 : -EINVAL;
}

/* Encode a near branch to the absolute address target, as the instruction
 * at runtime address at; its size must come out as want. */
static int enc_abs(ZydisMnemonic m, uint64_t target, uint64_t at, uint8_t *buf, size_t want)
{
	ZydisEncoderRequest req;
	size_t len = want;

	memset(&req, 0, sizeof req);
	req.machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
	req.mnemonic = m;
	req.branch_type = ZYDIS_BRANCH_TYPE_NEAR;
	req.branch_width = ZYDIS_BRANCH_WIDTH_32;
	req.operand_count = 1;
	req.operands[0].type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
	req.operands[0].imm.u = target;
	if (!ZYAN_SUCCESS(ZydisEncoderEncodeInstructionAbsolute(&req, buf, &len, at)) || len != want)
		return -EINVAL;
	return 0;
}

int cc_encode_jmp(uint64_t at, uint64_t target, uint8_t buf[5])
{
	if (!fits_rel32(at + 5, target))
		return -ERANGE;
	return enc_abs(ZYDIS_MNEMONIC_JMP, target, at, buf, 5);
}

int cc_encode_call(uint64_t at, uint64_t target, uint8_t buf[5])
{
	if (!fits_rel32(at + 5, target))
		return -ERANGE;
	return enc_abs(ZYDIS_MNEMONIC_CALL, target, at, buf, 5);
}

static int enc_one(const struct cc_reloc *r, const struct rinsn *ri, uint64_t dst, uint8_t *out,
		   struct cc_error *err)
{
	uint64_t at = dst + ri->off;
	uint64_t to = dest_of(r, dst, ri->target);
	char text[96];
	int32_t disp;
	size_t n;

	if (ri->kind != RK_COPY && !fits_rel32(at + ri->new_len, to)) {
		insn_text(ri->bytes, ri->len, ri->src, text, sizeof text);
		return cc__err(err, -ERANGE, "cannot relocate `%s` at 0x%" PRIx64 " to 0x%" PRIx64
			    ": its target 0x%" PRIx64 " is out of the +-2 GiB reach of rel32",
			    text, ri->src, at, to);
	}
	switch (ri->kind) {
	case RK_COPY:
		memcpy(out, ri->bytes, ri->len);
		return 0;
	case RK_RIPREL:
		memcpy(out, ri->bytes, ri->len);
		disp = (int32_t)(int64_t)(to - (at + ri->len));
		memcpy(out + ri->disp_off, &disp, 4);
		return 0;
	case RK_JMP:
	case RK_JCC:
	case RK_CALL:
	case RK_XBEGIN:
		if (enc_abs(ri->mnemonic, to, at, out, ri->new_len) == 0)
			return 0;
		break;
	case RK_LOOPLIKE:
		/* op L_take; jmp L_skip; L_take: jmp rel32 to; L_skip: */
		n = 2 + ri->addr32;
		if (enc_rel(ri->mnemonic, ZYDIS_BRANCH_WIDTH_8, 2, ri->addr32, out, &n) == 0 &&
		    n == 2u + ri->addr32) {
			size_t m = 2;
			if (enc_rel(ZYDIS_MNEMONIC_JMP, ZYDIS_BRANCH_WIDTH_8, 5, false, out + n, &m) == 0 &&
			    m == 2 &&
			    enc_abs(ZYDIS_MNEMONIC_JMP, to, at + n + 2, out + n + 2, 5) == 0)
				return 0;
		}
		break;
	}
	insn_text(ri->bytes, ri->len, ri->src, text, sizeof text);
	return cc__err(err, -EINVAL, "cannot relocate `%s` at 0x%" PRIx64 ": the encoder refused it",
		    text, ri->src);
}

int cc_reloc__encode(const struct cc_reloc *r, uint64_t dst, void *buf, size_t size,
		     struct cc_error *err)
{
	uint8_t *out = buf;
	int rc;

	if (size < r->size)
		return cc__err(err, -ENOSPC, "relocating %zu bytes needs %zu, the buffer has %zu",
			    r->src_len, r->size, size);
	for (size_t i = 0; i < r->n; i++)
		if ((rc = enc_one(r, &r->in[i], dst, out + r->in[i].off, err)) < 0)
			return rc;
	if (r->jump_back) {
		uint64_t at = dst + r->size - 5;
		uint64_t to = r->src + r->src_len;
		if (cc_encode_jmp(at, to, out + r->size - 5) < 0)
			return cc__err(err, -ERANGE, "cannot jump back from 0x%" PRIx64 " to 0x%" PRIx64
				    ": out of the +-2 GiB reach of rel32", at, to);
	}
	return 0;
}
