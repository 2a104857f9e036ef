/* Zydis 4 wrapper: classify an instruction for control flow without
 * decoding its operands; operands only on request (jump tables, text). */
#include "cfg/internal.h"

#include <errno.h>
#include <string.h>

void cfg__decoder_init(struct cfg_decoder *d)
{
	ZydisDecoderInit(&d->zd, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	ZydisFormatterInit(&d->fmt, ZYDIS_FORMATTER_STYLE_INTEL);
}

static bool legacy_rex_b(const ZydisDecodedInstruction *zi)
{
	return zi->encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY && zi->raw.rex.B;
}

/* Does the ModRM name rsp (register form) as r/m? */
static bool modrm_rm_is_rsp(const ZydisDecodedInstruction *zi)
{
	return (zi->attributes & ZYDIS_ATTRIB_HAS_MODRM) && zi->raw.modrm.mod == 3 &&
	       zi->raw.modrm.rm == 4 && !legacy_rex_b(zi) &&
	       zi->encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY;
}

static bool modrm_reg_is_rsp(const ZydisDecodedInstruction *zi)
{
	return (zi->attributes & ZYDIS_ATTRIB_HAS_MODRM) && zi->raw.modrm.reg == 4 &&
	       zi->encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY && !zi->raw.rex.R;
}

/* The instruction's effect on rsp, from its encoding. */
static void stack_effect(const ZydisDecodedInstruction *zi, const uint8_t *b,
			 struct cfg_insn *out)
{
	out->sp_op = CFG_SP_NONE;
	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_PUSH:
	case ZYDIS_MNEMONIC_PUSHFQ:
		out->sp_op = CFG_SP_ADD;
		out->sp_delta = zi->operand_width == 16 ? -2 : -8;
		return;
	case ZYDIS_MNEMONIC_POP:
	case ZYDIS_MNEMONIC_POPFQ:
		out->sp_op = CFG_SP_ADD;
		out->sp_delta = zi->operand_width == 16 ? 2 : 8;
		/* pop rsp */
		if (zi->opcode == 0x5c && !legacy_rex_b(zi))
			out->sp_op = CFG_SP_UNKNOWN;
		return;
	case ZYDIS_MNEMONIC_LEAVE:
		out->sp_op = CFG_SP_LEAVE;
		return;
	case ZYDIS_MNEMONIC_ADD:
	case ZYDIS_MNEMONIC_SUB:
		if (modrm_rm_is_rsp(zi) && (zi->opcode == 0x81 || zi->opcode == 0x83) &&
		    zi->operand_width == 64) {
			int64_t v = zi->raw.imm[0].value.s;
			out->sp_op = CFG_SP_ADD;
			out->sp_delta = (int32_t)(zi->mnemonic == ZYDIS_MNEMONIC_ADD ? v : -v);
		} else if (modrm_rm_is_rsp(zi) && zi->opcode != 0x03 && zi->opcode != 0x2b) {
			out->sp_op = CFG_SP_UNKNOWN;
		} else if ((zi->opcode == 0x03 || zi->opcode == 0x2b) && modrm_reg_is_rsp(zi)) {
			out->sp_op = CFG_SP_UNKNOWN;
		}
		return;
	case ZYDIS_MNEMONIC_MOV:
		/* mov rbp, rsp: 48 89 e5 or 48 8b ec */
		if (zi->length == 3 && b[0] == 0x48 &&
		    ((b[1] == 0x89 && b[2] == 0xe5) || (b[1] == 0x8b && b[2] == 0xec))) {
			out->sp_op = CFG_SP_FRAME;
			return;
		}
		if ((zi->opcode == 0x89 && modrm_rm_is_rsp(zi)) ||
		    (zi->opcode == 0x8b && modrm_reg_is_rsp(zi)))
			out->sp_op = CFG_SP_UNKNOWN;
		return;
	case ZYDIS_MNEMONIC_LEA:
		if (modrm_reg_is_rsp(zi)) {
			/* lea rsp, [rbp+disp] */
			if (zi->raw.modrm.rm == 5 && zi->raw.modrm.mod != 0 && !legacy_rex_b(zi)) {
				out->sp_op = CFG_SP_LEA_RBP;
				out->sp_delta = (int32_t)zi->raw.disp.value;
			} else {
				out->sp_op = CFG_SP_UNKNOWN;
			}
		}
		return;
	case ZYDIS_MNEMONIC_AND:
	case ZYDIS_MNEMONIC_OR:
	case ZYDIS_MNEMONIC_XCHG:
		if (modrm_rm_is_rsp(zi))
			out->sp_op = CFG_SP_UNKNOWN;
		return;
	default:
		return;
	}
}

/* A register set to a constant: mov r32, imm32 / mov r64, simm32 /
 * xor r32, r32. Used to see exit syscalls and error(status, ...). */
static void constant_set(const ZydisDecodedInstruction *zi, const uint8_t *b,
			 struct cfg_insn *out)
{
	out->const_reg = -1;
	if (zi->encoding != ZYDIS_INSTRUCTION_ENCODING_LEGACY)
		return;
	int rexb = zi->raw.rex.B ? 8 : 0;
	if (zi->mnemonic == ZYDIS_MNEMONIC_MOV && zi->opcode >= 0xb8 && zi->opcode <= 0xbf &&
	    zi->operand_width >= 32) {
		out->const_reg = (int8_t)((zi->opcode - 0xb8) + rexb);
		out->const_val = (int64_t)zi->raw.imm[0].value.s;
	} else if (zi->mnemonic == ZYDIS_MNEMONIC_MOV && zi->opcode == 0xc7 &&
		   zi->raw.modrm.mod == 3 && zi->operand_width >= 32) {
		out->const_reg = (int8_t)(zi->raw.modrm.rm + rexb);
		out->const_val = (int64_t)zi->raw.imm[0].value.s;
	} else if (zi->mnemonic == ZYDIS_MNEMONIC_XOR && (zi->opcode == 0x31 || zi->opcode == 0x33) &&
		   zi->raw.modrm.mod == 3 && zi->raw.modrm.rm == zi->raw.modrm.reg &&
		   zi->raw.rex.B == zi->raw.rex.R) {
		out->const_reg = (int8_t)(zi->raw.modrm.rm + rexb);
		out->const_val = 0;
	}
	(void)b;
}

static void classify(const ZydisDecodedInstruction *zi, struct cfg_insn *out)
{
	uint64_t next = out->addr + zi->length;
	bool rel = zi->raw.imm[0].is_relative;
	bool ripmem = (zi->attributes & ZYDIS_ATTRIB_HAS_MODRM) && zi->raw.modrm.mod == 0 &&
		      zi->raw.modrm.rm == 5;

	/* outside a transaction a no-op; inside one it goes where xbegin
	 * said, an edge xbegin already has (Zydis files it as a branch) */
	if (zi->mnemonic == ZYDIS_MNEMONIC_XABORT)
		return;
	switch (zi->meta.category) {
	case ZYDIS_CATEGORY_COND_BR:
		out->kind = CFG_I_JCC;
		out->target = next + (uint64_t)zi->raw.imm[0].value.s;
		return;
	case ZYDIS_CATEGORY_UNCOND_BR:
		if (rel) {
			out->kind = CFG_I_JMP;
			out->target = next + (uint64_t)zi->raw.imm[0].value.s;
		} else {
			out->kind = CFG_I_JMP_IND;
			if (ripmem) {
				out->rip_mem = 1;
				out->target = next + (uint64_t)zi->raw.disp.value;
			}
		}
		return;
	case ZYDIS_CATEGORY_CALL:
		if (rel) {
			out->kind = CFG_I_CALL;
			out->target = next + (uint64_t)zi->raw.imm[0].value.s;
		} else {
			out->kind = CFG_I_CALL_IND;
			if (ripmem) {
				out->rip_mem = 1;
				out->target = next + (uint64_t)zi->raw.disp.value;
			}
		}
		return;
	case ZYDIS_CATEGORY_RET:
		out->kind = CFG_I_RET;
		return;
	default:
		break;
	}
	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_XBEGIN:	/* a transaction's abort goes to the target */
		out->kind = CFG_I_JCC;
		out->target = next + (uint64_t)zi->raw.imm[0].value.s;
		return;
	case ZYDIS_MNEMONIC_SYSCALL:
		out->kind = CFG_I_SYSCALL;
		return;
	case ZYDIS_MNEMONIC_HLT:
	case ZYDIS_MNEMONIC_UD0:
	case ZYDIS_MNEMONIC_UD1:
	case ZYDIS_MNEMONIC_UD2:
		out->kind = CFG_I_HALT;
		return;
	case ZYDIS_MNEMONIC_INT3:
		out->kind = CFG_I_HALT;
		out->nop = 1;	/* also padding */
		return;
	case ZYDIS_MNEMONIC_NOP:
		out->nop = 1;
		return;
	case ZYDIS_MNEMONIC_IRETQ:
	case ZYDIS_MNEMONIC_IRETD:
	case ZYDIS_MNEMONIC_IRET:
	case ZYDIS_MNEMONIC_SYSRET:
	case ZYDIS_MNEMONIC_SYSEXIT:
		out->kind = CFG_I_RET;
		return;
	default:
		return;
	}
}

void cfg__decode_bytes(const struct cfg_decoder *d, uint64_t addr, const uint8_t *bytes,
		      size_t n, struct cfg_insn *out)
{
	ZydisDecodedInstruction zi;
	ZydisDecoderContext ctx;

	memset(out, 0, sizeof(*out));
	out->addr = addr;
	out->const_reg = -1;
	if (n == 0) {
		out->kind = CFG_I_UNREADABLE;
		out->len = 1;
		return;
	}
	ZyanStatus st = ZydisDecoderDecodeInstruction(&d->zd, &ctx, bytes, n, &zi);
	if (!ZYAN_SUCCESS(st)) {
		out->len = 1;
		/* out of bytes before the instruction ended: the next page is
		 * unreadable */
		out->kind = st == ZYDIS_STATUS_NO_MORE_DATA && n < ZYDIS_MAX_INSTRUCTION_LENGTH ?
				    CFG_I_UNREADABLE : CFG_I_INVALID;
		return;
	}
	out->len = zi.length;
	out->mnemonic = (uint16_t)zi.mnemonic;
	memcpy(out->bytes, bytes, zi.length);
	out->kind = CFG_I_PLAIN;
	classify(&zi, out);
	stack_effect(&zi, bytes, out);
	constant_set(&zi, bytes, out);
}

int cfg__decode_full(const struct cfg_decoder *d, const struct cfg_insn *in,
		    ZydisDecodedInstruction *zi, ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT])
{
	ZyanStatus st = ZydisDecoderDecodeFull(&d->zd, in->bytes, in->len, zi, ops);
	return ZYAN_SUCCESS(st) ? 0 : -EINVAL;
}

void cfg__format_insn(const struct cfg_decoder *d, const struct cfg_insn *in, char *buf,
		     size_t size)
{
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

	if (in->kind == CFG_I_UNREADABLE || in->kind == CFG_I_INVALID || in->len == 0 ||
	    cfg__decode_full(d, in, &zi, ops) < 0) {
		snprintf(buf, size, "(bad)");
		return;
	}
	if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&d->fmt, &zi, ops,
							   zi.operand_count_visible, buf, size,
							   in->addr, NULL)))
		snprintf(buf, size, "(bad)");
}
