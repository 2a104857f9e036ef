/* Jump tables: a small backward symbolic evaluation of the register an
 * indirect jmp goes through, over one path of predecessors, recognising
 *   jmp [T + idx*8]                                  (absolute, non-PIC)
 *   mov r, [T + idx*8]; jmp r
 *   lea b, [rip+T]; movsxd r, [b + idx*4]; add r, b; jmp r   (PIC, gcc/clang)
 * and the -O0 variants (lea d, [idx*4]; mov eax, [d + b]; cdqe; ...), then
 * the guarding cmp idx, N; ja/jae/jb/jbe for the number of entries (with
 * flag-neutral instructions allowed between the two; either side of the
 * branch, so a switch over negative values is bounded too). */
#include "cfg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define JT_MAX_UNBOUNDED 512
#define JT_MAX_ENTRIES 65536

enum { V_UNK, V_LIN, V_LOAD };

/* LIN: c + s*X. LOAD: ext(mem[c + s*X]) + k. X is the one unknown, the
 * switch index, identified by where it came from. */
struct val {
	int kind;
	int64_t c, s, k;
	uint8_t size;
	bool sext;
};

struct ev {
	struct cfg_reader *r;
	const struct cfg_insn *const *path;
	size_t n;
	ZydisDecodedInstruction zi[64];
	ZydisDecodedOperand ops[64][ZYDIS_MAX_OPERAND_COUNT];
	int8_t dec[64];		/* 0 not yet, 1 ok, -1 failed */
	bool have_x;
	size_t x_pos;
	int x_fam;
	int depth;
	/* X loaded from a byte table at byte_c + Y (the table of character
	 * classes glibc's printf indexes its jump tables with): Y's identity */
	bool byte_table;
	int64_t byte_c;
	size_t y_pos;
	int y_fam;
};

static const struct val UNK = { .kind = V_UNK };

/* Address arithmetic wraps as the CPU's does: random bytes and odd code
 * give any constants, and signed overflow must not follow from them. */
static int64_t wadd(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t wmul(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a * (uint64_t)b);
}

static struct val lin(int64_t c, int64_t s)
{
	return (struct val){ .kind = V_LIN, .c = c, .s = s };
}

static bool decoded(struct ev *e, size_t p)
{
	if (!e->dec[p])
		e->dec[p] = cfg__decode_full(&e->r->dec, e->path[p], &e->zi[p], e->ops[p]) == 0 ? 1 : -1;
	return e->dec[p] > 0;
}

/* 64-bit GPR family id 0..15, or -1. */
static int fam(ZydisRegister reg)
{
	ZydisRegister big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg);
	if (ZydisRegisterGetClass(big) != ZYDIS_REGCLASS_GPR64)
		return -1;
	return (int)ZydisRegisterGetId(big);
}

static bool call_clobbers(int f)
{
	/* rax rcx rdx rsi rdi r8-r11 */
	return f == 0 || f == 1 || f == 2 || f == 6 || f == 7 || (f >= 8 && f <= 11);
}

static bool writes(struct ev *e, size_t p, int f)
{
	const struct cfg_insn *in = e->path[p];
	if (in->kind == CFG_I_CALL || in->kind == CFG_I_CALL_IND)
		return call_clobbers(f);
	if (!decoded(e, p))
		return true;
	for (int i = 0; i < e->zi[p].operand_count; i++) {
		const ZydisDecodedOperand *o = &e->ops[p][i];
		if (o->type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) && fam(o->reg.value) == f)
			return true;
	}
	return false;
}

static struct val x_new(struct ev *e, size_t p, int f)
{
	if (!e->have_x) {
		e->have_x = true;
		e->x_pos = p;
		e->x_fam = f;
	} else if (e->x_pos != p || e->x_fam != f) {
		return UNK;
	}
	return lin(0, 1);
}

static struct val add(struct val a, struct val b)
{
	if (a.kind == V_LIN && b.kind == V_LIN)
		return lin(wadd(a.c, b.c), wadd(a.s, b.s));
	if (a.kind == V_LOAD && b.kind == V_LIN && b.s == 0) {
		a.k = wadd(a.k, b.c);
		return a;
	}
	if (b.kind == V_LOAD && a.kind == V_LIN && a.s == 0) {
		b.k = wadd(b.k, a.c);
		return b;
	}
	return UNK;
}

static struct val eval(struct ev *e, int f, size_t from);

static struct val lin_mem(struct ev *e, size_t p, const ZydisDecodedOperand *o)
{
	const struct cfg_insn *in = e->path[p];
	if (o->mem.segment == ZYDIS_REGISTER_FS || o->mem.segment == ZYDIS_REGISTER_GS)
		return UNK;
	struct val v = lin(o->mem.disp.has_displacement ? o->mem.disp.value : 0, 0);
	if (o->mem.base == ZYDIS_REGISTER_RIP) {
		v.c = wadd(v.c, (int64_t)(in->addr + in->len));
	} else if (o->mem.base != ZYDIS_REGISTER_NONE) {
		struct val b = eval(e, fam(o->mem.base), p + 1);
		if (b.kind != V_LIN)
			return UNK;
		v = add(v, b);
	}
	if (o->mem.index != ZYDIS_REGISTER_NONE) {
		struct val x = eval(e, fam(o->mem.index), p + 1);
		if (x.kind != V_LIN)
			return UNK;
		x.c = wmul(x.c, o->mem.scale);
		x.s = wmul(x.s, o->mem.scale);
		v = add(v, x);
	}
	return v;
}

/* A load of size bytes: a table entry if its address is c + size*X with
 * the index scaled by the entry size; else the loaded value is X itself
 * (-O0 reloads the switch variable from its stack slot). */
static struct val load(struct ev *e, size_t p, const ZydisDecodedOperand *o, unsigned size,
		       bool sext, int dest)
{
	bool hx = e->have_x;
	size_t xp = e->x_pos;
	int xf = e->x_fam;
	struct val a = lin_mem(e, p, o);
	if (a.kind == V_LIN && a.s == (int64_t)size && (size == 4 || size == 8) && a.c)
		return (struct val){ .kind = V_LOAD, .c = a.c, .s = a.s, .size = (uint8_t)size,
				     .sext = sext };
	if (a.kind == V_LIN && size == 1 && !sext && a.s == 1 && a.c && !hx && e->have_x) {
		e->byte_table = true;
		e->byte_c = a.c;
		e->y_pos = e->x_pos;
		e->y_fam = e->x_fam;
	}
	e->have_x = hx;
	e->x_pos = xp;
	e->x_fam = xf;
	return x_new(e, p, dest);
}

static struct val interpret(struct ev *e, size_t p, int f)
{
	const ZydisDecodedInstruction *zi = &e->zi[p];
	const ZydisDecodedOperand *o0 = &e->ops[p][0], *o1 = &e->ops[p][1];
	bool two = zi->operand_count_visible >= 2;
	bool dst = o0->type == ZYDIS_OPERAND_TYPE_REGISTER && fam(o0->reg.value) == f;

	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_MOV:
	case ZYDIS_MNEMONIC_MOVSXD:
	case ZYDIS_MNEMONIC_MOVZX:
	case ZYDIS_MNEMONIC_MOVSX:
		if (!dst || !two)
			break;
		if (o1->type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
			return lin(o1->imm.value.s, 0);
		if (o1->type == ZYDIS_OPERAND_TYPE_REGISTER)
			return eval(e, fam(o1->reg.value), p + 1);
		if (o1->type == ZYDIS_OPERAND_TYPE_MEMORY)
			return load(e, p, o1, o1->size / 8,
				    zi->mnemonic == ZYDIS_MNEMONIC_MOVSXD ||
					    zi->mnemonic == ZYDIS_MNEMONIC_MOVSX,
				    f);
		break;
	case ZYDIS_MNEMONIC_LEA:
		if (dst && two && o1->type == ZYDIS_OPERAND_TYPE_MEMORY)
			return lin_mem(e, p, o1);
		break;
	case ZYDIS_MNEMONIC_CDQE: {
		struct val v = eval(e, f, p + 1);
		if (v.kind == V_LOAD && v.size == 4)
			v.sext = true;
		return v;
	}
	case ZYDIS_MNEMONIC_ADD:
	case ZYDIS_MNEMONIC_SUB: {
		if (!dst || !two)
			break;
		struct val a = eval(e, f, p + 1), b;
		if (o1->type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
			b = lin(o1->imm.value.s, 0);
		else if (o1->type == ZYDIS_OPERAND_TYPE_REGISTER)
			b = eval(e, fam(o1->reg.value), p + 1);
		else
			break;
		if (zi->mnemonic == ZYDIS_MNEMONIC_SUB) {
			if (b.kind != V_LIN)
				break;
			b.c = wmul(b.c, -1);
			b.s = wmul(b.s, -1);
		}
		struct val v = add(a, b);
		if (v.kind != V_UNK)
			return v;
		break;
	}
	case ZYDIS_MNEMONIC_SHL:
		if (dst && two && o1->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && o1->imm.value.u < 8) {
			struct val v = eval(e, f, p + 1);
			if (v.kind == V_LIN) {
				v.c = wmul(v.c, (int64_t)1 << o1->imm.value.u);
				v.s = wmul(v.s, (int64_t)1 << o1->imm.value.u);
				return v;
			}
		}
		break;
	case ZYDIS_MNEMONIC_XOR:
		if (dst && two && o1->type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    o1->reg.value == o0->reg.value)
			return lin(0, 0);
		break;
	default:
		break;
	}
	/* anything else defines a value we cannot follow: the index? */
	return x_new(e, p, f);
}

/* The value of register family f just before path[from - 1] executes. */
static struct val eval(struct ev *e, int f, size_t from)
{
	if (f < 0 || ++e->depth > 64) {
		e->depth--;
		return UNK;
	}
	size_t p = from;
	while (p < e->n && !writes(e, p, f))
		p++;
	struct val v;
	bool call = p < e->n && (e->path[p]->kind == CFG_I_CALL ||
				  e->path[p]->kind == CFG_I_CALL_IND);
	if (p >= e->n)
		v = x_new(e, e->n, f);
	else if (call)	/* rax: the callee's result, switched on (glibc's iconv) */
		v = f == 0 ? x_new(e, p, f) : UNK;
	else if (!decoded(e, p))
		v = UNK;
	else
		v = interpret(e, p, f);
	e->depth--;
	return v;
}

/* The instruction that set the flags a conditional jump at path[from - 1]
 * tests: compilers schedule moves between the cmp and the jcc (gcc:
 * cmp ebp, 8; mov r9d, [rsp+8]; mov r10, rax; ja ...). e->n if none is
 * found nearby or one on the way cannot be decoded. */
static size_t flags_set_at(struct ev *e, size_t from)
{
	for (size_t q = from; q < e->n && q < from + 8; q++) {
		const struct cfg_insn *in = e->path[q];
		if (in->kind != CFG_I_PLAIN || !decoded(e, q))
			return e->n;
		const ZydisAccessedFlags *fl = e->zi[q].cpu_flags;
		if (fl && (fl->modified | fl->set_0 | fl->set_1 | fl->undefined))
			return q;
	}
	return e->n;
}

/* The number of entries from the guard: cmp R, K; ja/jae (not taken) or
 * jbe/jb (taken) with R = c1 + X, R in [0, K]; or the other way round
 * (jb not taken, jae taken...), R in [K, 2^w) for a w-bit compare: a switch
 * over negative values, e.g. zlib's zpipe on Z_ERRNO..Z_VERSION_ERROR
 * (cmp ebx, -6; jb default; lea eax, [rbx+6]; ...), whose w-bit index
 * arithmetic runs from K - 2^w, signed. *c1 gets the offset of the first
 * entry's R from X = 0 (c1 - R at the first entry, so the first entry is
 * at X = -*c1). */
static int64_t find_bound(struct ev *e, const uint8_t *taken, int64_t *c1)
{
	for (size_t p = 1; p + 1 < e->n; p++) {
		const struct cfg_insn *j = e->path[p];
		if (j->kind == CFG_I_JCC && p >= 1) {
			bool tk = taken[p - 1], above;	/* valid: R above K (or at) */
			int64_t extra;
			switch (j->mnemonic) {
			case ZYDIS_MNEMONIC_JNBE: above = tk; extra = 1; break;
			case ZYDIS_MNEMONIC_JNB: above = tk; extra = 0; break;
			case ZYDIS_MNEMONIC_JBE: above = !tk; extra = 1; break;
			case ZYDIS_MNEMONIC_JB: above = !tk; extra = 0; break;
			default: continue;
			}
			size_t q = flags_set_at(e, p + 1);
			if (q >= e->n || e->zi[q].mnemonic != ZYDIS_MNEMONIC_CMP)
				continue;
			const ZydisDecodedOperand *o0 = &e->ops[q][0], *o1 = &e->ops[q][1];
			if (o0->type != ZYDIS_OPERAND_TYPE_REGISTER ||
			    o1->type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
				continue;
			struct val v = eval(e, fam(o0->reg.value), q + 1);
			if (v.kind != V_LIN || v.s != 1)
				continue;
			int64_t k = o1->imm.value.s;
			unsigned w = o0->size;
			if (w == 32)
				k = (int64_t)(uint32_t)k;
			else if (w == 8)
				k = (int64_t)(uint8_t)k;
			else if (w == 16)
				k = (int64_t)(uint16_t)k;
			if (!above) {
				*c1 = v.c;
				return k == INT64_MAX ? -1 : k + extra;
			}
			/* R in [K, 2^w) past jb/jae, in (K, 2^w) past jbe/ja */
			uint64_t first = (uint64_t)k + (uint64_t)extra;
			uint64_t count = w >= 64 ? (uint64_t)0 - first : ((uint64_t)1 << w) - first;
			if (w < 64 && first >= ((uint64_t)1 << w))
				continue;
			if (count == 0 || count > 4096)
				continue;
			int64_t lo = (int64_t)(first - (w >= 64 ? 0 : ((uint64_t)1 << w)));
			*c1 = (int64_t)((uint64_t)v.c - (uint64_t)lo);
			return (int64_t)count;
		}
	}
	return -1;
}

/* The index is a byte loaded from a table at byte_c + Y, Y bounded by a
 * guard: the largest byte in the guarded range bounds the index. */
static int64_t byte_table_bound(struct ev *e, const uint8_t *taken, int64_t *c1)
{
	bool hx = e->have_x;
	size_t xp = e->x_pos;
	int xf = e->x_fam;
	e->have_x = true;
	e->x_pos = e->y_pos;
	e->x_fam = e->y_fam;
	int64_t cy = 0, ny = find_bound(e, taken, &cy);
	e->have_x = hx;
	e->x_pos = xp;
	e->x_fam = xf;
	if (ny <= 0 || ny > 4096)
		return -1;
	uint8_t *bytes = malloc((size_t)ny);
	int64_t max = -1;
	if (bytes && cfg_reader__read(e->r, (uint64_t)e->byte_c - (uint64_t)cy, bytes, (size_t)ny) == ny)
		for (int64_t i = 0; i < ny; i++)
			if (bytes[i] > max)
				max = bytes[i];
	free(bytes);
	*c1 = 0;
	return max + 1;
}

/* Without a guard the table's end is a guess: an entry past it usually
 * points into the middle of an instruction, and a few instructions decoded
 * from there soon turn invalid. */
static bool plausible_code(struct cfg_reader *r, uint64_t a)
{
	for (int i = 0; i < 8; i++) {
		const struct cfg_insn *d = cfg__reader_insn(r, a);
		if (!d || d->kind == CFG_I_INVALID || d->kind == CFG_I_UNREADABLE)
			return false;
		if (d->kind != CFG_I_PLAIN)
			return true;
		a += d->len;
	}
	return true;
}

int cfg__jump_table(struct cfg_reader *r, const struct cfg_insn *const *path,
		   const uint8_t *taken, size_t n, bool (*valid)(void *arg, uint64_t target),
		   void *arg, struct cfg_jt_result *out)
{
	memset(out, 0, sizeof(*out));
	if (n == 0 || n > 64)
		return -ENOENT;
	struct ev *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->r = r;
	e->path = path;
	e->n = n;
	int err = -ENOENT;
	struct val v = UNK;
	if (decoded(e, 0)) {
		const ZydisDecodedOperand *o = &e->ops[0][0];
		if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
			struct val a = lin_mem(e, 0, o);
			if (a.kind == V_LIN && a.s == 8 && a.c)
				v = (struct val){ .kind = V_LOAD, .c = a.c, .s = 8, .size = 8 };
		} else if (o->type == ZYDIS_OPERAND_TYPE_REGISTER) {
			v = eval(e, fam(o->reg.value), 1);
		}
	}
	if (v.kind != V_LOAD || !(v.size == 8 || (v.size == 4 && (v.sext || v.k == 0))))
		goto out;
	int64_t c1 = 0;
	int64_t count = find_bound(e, taken, &c1);
	if (count <= 0 && e->byte_table)
		count = byte_table_bound(e, taken, &c1);
	bool bounded = count > 0;
	if (!bounded)
		count = JT_MAX_UNBOUNDED;
	if (count > JT_MAX_ENTRIES)
		goto out;
	out->targets = malloc((size_t)count * sizeof(uint64_t));
	if (!out->targets) {
		err = -ENOMEM;
		goto out;
	}
	out->entry_size = v.size;
	out->base = (uint64_t)v.k;
	out->table = (uint64_t)v.c - (uint64_t)v.s * (uint64_t)c1;
	for (int64_t i = 0; i < count; i++) {
		uint64_t at = out->table + (uint64_t)i * (uint64_t)v.s, t;
		uint8_t b[8];
		if (cfg_reader__read(r, at, b, v.size) != v.size)
			break;
		if (v.size == 8) {
			memcpy(&t, b, 8);
		} else {
			int32_t x;
			memcpy(&x, b, 4);
			t = v.sext ? (uint64_t)(int64_t)x + (uint64_t)v.k : (uint64_t)(uint32_t)x;
		}
		if (!valid(arg, t) || (!bounded && !plausible_code(r, t)))
			break;
		out->targets[out->count++] = t;
	}
	err = out->count ? 0 : -ENOENT;
out:
	if (err < 0) {
		free(out->targets);
		out->targets = NULL;
		out->count = 0;
	}
	free(e);
	return err;
}
