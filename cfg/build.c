/* Function discovery by recursive traversal: instructions reached from the
 * entry, calls, jump tables, whether a path returns; build-blocks.c then
 * makes the basic blocks, edges and address ranges, dominators and the
 * loop forest. */
#include "cfg/build.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

void cfg__fb_error(struct fb *b, enum cfg_error e, uint64_t at, const char *fmt, ...)
{
	b->returns = true;	/* unknown code: assume it may return */
	if (b->err)
		return;
	b->err = e;
	b->err_at = at;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->err_msg, sizeof(b->err_msg), fmt, ap);
	va_end(ap);
}

static int push(struct fb *b, uint64_t addr, int32_t from, uint8_t taken, int32_t h,
		int32_t rbp_h)
{
	if (cfg__grow(&b->wv, &b->cw, b->nw + 1, sizeof(*b->wv)) < 0)
		return -ENOMEM;
	b->wv[b->nw++] = (struct work){ addr, from, h, rbp_h, taken };
	return 0;
}

/* ------------------------------------------------------------ targets */

/* Does the code of the FDE starting at t jump into our own FDE range? A
 * cold part of a leaf function starts in an entry state like a function
 * (no frame to describe), but goes back to the hot part. */
static bool jumps_back(struct fb *b, uint64_t t)
{
	const struct cfg_fde *f = cfg__reader_fde_at(b->r, t);
	char name[8];
	uint64_t start;
	if (!f || f->start != t || b->lo >= b->hi ||
	    (cfg_reader__symbolize(b->r, t, name, sizeof(name), &start) == 0 && start == t))
		return false;	/* a symbol says it is a function */
	uint64_t a = t;
	for (int i = 0; i < 256 && a < f->end; i++) {
		const struct cfg_insn *d = cfg__reader_insn(b->r, a);
		if (!d || d->kind == CFG_I_INVALID || d->kind == CFG_I_UNREADABLE)
			return false;
		if ((d->kind == CFG_I_JMP || d->kind == CFG_I_JCC) && in_own(b, d->target) &&
		    d->target != b->entry)
			return true;
		a += d->len;
	}
	return false;
}

/* A direct jump to t at stack height h: intra-function or tail call? */
static bool is_tail(struct fb *b, uint64_t t, int32_t h)
{
	if (t == b->entry || in_own(b, t))
		return false;
	bool torn_down = h == 0 || h == H_UNKNOWN;
	if (cfg__reader_stub(b->r, t, NULL, NULL))
		return true;
	if (cfg__reader_cold_parent(b->r, t, NULL))	/* never a function of its own */
		return false;
	if (cfg__reader_is_entry(b->r, t))
		return torn_down && !jumps_back(b, t);
	const struct cfg_fde *f = cfg__reader_fde_at(b->r, t);
	if (f && !f->entry)	/* a cold part: ours */
		return false;
	if (f && f->entry && b->lo < b->hi)	/* inside another function */
		return torn_down;
	return false;
}

/* May a jump-table entry be this function's code? */
static bool table_target_ok(struct fb *b, uint64_t t)
{
	if (!cfg__reader_is_code(b->r, t))
		return false;
	if (b->lo >= b->hi)
		return true;
	if (in_own(b, t))
		return true;
	const struct cfg_fde *f = cfg__reader_fde_at(b->r, t);
	return f && (!f->entry || cfg__reader_cold_parent(b->r, t, NULL));
}

static bool table_ok_cb(void *arg, uint64_t t)
{
	return table_target_ok(arg, t);
}

/* The instruction before i on a path (its fallthrough or a predecessor). */
static int32_t before(const struct fb *b, int32_t i)
{
	return b->iv[i].ft_prev >= 0 ? b->iv[i].ft_prev : b->iv[i].prev;
}

/* The constant in register reg (0-15) just before instruction i, looking
 * back a few instructions: mov reg, imm; xor reg, reg; copies between
 * registers; and, for -O0 code, a trip through a stack slot. */
static bool const_before(const struct fb *b, int32_t i, int reg, int64_t *val)
{
	int slot_base = -1;	/* tracking [rbp/rsp + slot_disp] instead of reg */
	int64_t slot_disp = 0;
	for (int n = 0; n < 16 && i >= 0; n++) {
		i = before(b, i);
		if (i < 0)
			return false;
		const struct cfg_insn *d = b->iv[i].d;
		if (d->kind == CFG_I_CALL || d->kind == CFG_I_CALL_IND)
			return false;
		if (slot_base < 0 && d->const_reg == reg) {
			*val = d->const_val;
			return true;
		}
		if (d->mnemonic != ZYDIS_MNEMONIC_MOV)
			continue;
		ZydisDecodedInstruction zi;
		ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
		if (cfg__decode_full(&b->r->dec, d, &zi, op) < 0)
			return false;
		const ZydisDecodedOperand *o0 = &op[0], *o1 = &op[1];
		if (slot_base < 0 && o0->type == ZYDIS_OPERAND_TYPE_REGISTER) {
			ZydisRegister big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64,
									     o0->reg.value);
			if (ZydisRegisterGetClass(big) != ZYDIS_REGCLASS_GPR64 ||
			    (int)ZydisRegisterGetId(big) != reg)
				continue;
			if (o1->type == ZYDIS_OPERAND_TYPE_REGISTER) {
				big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64,
								       o1->reg.value);
				reg = (int)ZydisRegisterGetId(big);
			} else if (o1->type == ZYDIS_OPERAND_TYPE_MEMORY &&
				   (o1->mem.base == ZYDIS_REGISTER_RBP ||
				    o1->mem.base == ZYDIS_REGISTER_RSP) &&
				   o1->mem.index == ZYDIS_REGISTER_NONE) {
				slot_base = o1->mem.base;
				slot_disp = o1->mem.disp.value;
			} else {
				return false;
			}
		} else if (slot_base >= 0 && o0->type == ZYDIS_OPERAND_TYPE_MEMORY &&
			   o0->mem.base == (ZydisRegister)slot_base && o0->mem.disp.value == slot_disp &&
			   o0->mem.index == ZYDIS_REGISTER_NONE) {
			if (o1->type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
				return false;
			*val = o1->imm.value.s;
			return true;
		}
	}
	return false;
}

static bool exits_process(const struct fb *b, int32_t i)
{
	int64_t nr;
	return const_before(b, i, 0, &nr) && (nr == 60 || nr == 231);
}

/* The function a GOT slot of module home leads to in another module: the
 * address the slot holds once bound (a live process's), else -- the slot
 * still points at home's lazy-binding code -- the definition of the
 * slot's name in another module the reader knows. 0 when neither tells. */
static uint64_t slot_callee(struct fb *b, const struct cfg_module *home, uint64_t slot,
			    const char *name)
{
	struct cfg_reader *r = b->r;
	uint64_t v = 0;
	char err[sizeof r->err];

	if (cfg_reader__read(r, slot, &v, 8) == 8 && v && cfg_reader__is_code(r, v) &&
	    cfg__reader_module(r, v) != home)
		return v;
	if (!name || !*name)
		return 0;
	memcpy(err, r->err, sizeof err);	/* not finding it is no error */
	if (cfg_reader__lookup(r, name, &v) < 0 || cfg__reader_module(r, v) == home)
		v = 0;
	memcpy(r->err, err, sizeof err);
	return v;
}

/* Does a call through the GOT slot of module home (a PLT stub's, or a
 * -fno-plt call's) come back? A library's function the compiler knew does
 * not return is found so, where the caller has no FDE to tell. */
static bool slot_call_returns(struct fb *b, const struct cfg_module *home, uint64_t slot,
			      const char *name)
{
	uint64_t callee;

	if (b->o.no_callee_analysis || !home || !(callee = slot_callee(b, home, slot, name)))
		return true;
	return cfg__callee_returns(b->r, callee) != CFG_RET_NO;
}

/* Does a call to t (name known or not) come back? */
static bool call_returns(struct fb *b, int32_t i, uint64_t t, const char *name)
{
	uint64_t slot;
	size_t n = strcspn(name, "@");
	if ((n == 5 && strncmp(name, "error", 5) == 0) ||
	    (n == 13 && strncmp(name, "error_at_line", 13) == 0)) {
		int64_t status;	/* error(status, ...) exits when status != 0 */
		if (const_before(b, i, 7, &status) && status != 0)
			return false;
		/* glibc's returns otherwise; a program's own error() (zlib's
		 * minigzip: error(const char *msg), which exits) is analysed */
		if (!t || cfg__reader_stub(b->r, t, NULL, NULL))
			return true;
	} else if (cfg__noreturn_name(name)) {
		return false;
	}
	if (!t || b->o.no_callee_analysis)
		return true;
	if (cfg__reader_stub(b->r, t, &slot, &name))
		return slot_call_returns(b, cfg__reader_module(b->r, t), slot, name);
	return cfg__callee_returns(b->r, t) != CFG_RET_NO;
}

/* Does the call at addr end its FDE (next, its return address, is the
 * FDE's end)? Then the compiler knew the callee does not return, though
 * nothing here says so: a library's own noreturn function through the PLT
 * (libpng's png_error), unanalysable from this module. */
static bool ends_fde(struct fb *b, uint64_t addr, uint64_t next)
{
	const struct cfg_fde *f = cfg__reader_fde_at(b->r, addr);
	return f && f->end == next;
}

/* Keep a name in the pool; *off gets its offset (the pool may move). */
static int keep_name(struct fb *b, const char *name, size_t *off)
{
	size_t n = strlen(name) + 1;
	if (cfg__grow(&b->names, &b->cnames, b->nnames + n, 1) < 0)
		return -ENOMEM;
	memcpy(b->names + b->nnames, name, n);
	*off = b->nnames;
	b->nnames += n;
	return 0;
}

static int add_call(struct fb *b, uint64_t at, uint64_t target, const char *name, bool noret,
		    bool tail, bool indirect)
{
	if (b->summary)
		return 0;
	if (cfg__grow(&b->cv, &b->cc, b->nc + 1, sizeof(*b->cv)) < 0)
		return -ENOMEM;
	size_t off;
	if (keep_name(b, name, &off) < 0)
		return -ENOMEM;
	b->cv[b->nc++] = (struct cfg_call){ at, target, (const char *)(uintptr_t)off, noret, tail,
					    indirect };
	return 0;
}

static const char *target_name(struct fb *b, uint64_t t, char *buf, size_t size)
{
	const char *sn;
	buf[0] = '\0';
	if (cfg__reader_stub(b->r, t, NULL, &sn) && *sn) {
		snprintf(buf, size, "%s@plt", sn);
		return buf;
	}
	return cfg__reader_name_at(b->r, t, buf, size);
}

/* ------------------------------------------------------------ jump tables */

static int try_jump_table(struct fb *b, int32_t i, int32_t h, int32_t rbp_h)
{
	const struct cfg_insn *path[JT_PATH];
	uint8_t taken[JT_PATH];
	size_t n = 0;
	for (int32_t k = i; k >= 0 && n < JT_PATH; k = b->iv[k].prev) {
		path[n] = b->iv[k].d;
		taken[n] = b->iv[k].prev_taken;
		n++;
	}
	struct cfg_jt_result jt;
	if (cfg__jump_table(b->r, path, taken, n, table_ok_cb, b, &jt) < 0)
		return -ENOENT;
	if (cfg__grow(&b->tv, &b->ct, b->nt + 1, sizeof(*b->tv)) < 0) {
		free(jt.targets);
		return -ENOMEM;
	}
	b->iv[i].table = (int32_t)b->nt;
	b->tv[b->nt++] = jt;
	for (uint32_t k = 0; k < jt.count; k++)
		if (push(b, jt.targets[k], i, 1, h, rbp_h) < 0)
			return -ENOMEM;
	return 0;
}

/* ------------------------------------------------------------ traversal */

static int32_t new_insn(struct fb *b, const struct cfg_insn *d, int32_t prev, uint8_t taken,
			int32_t h)
{
	if (cfg__grow(&b->iv, &b->ci, b->ni + 1, sizeof(*b->iv)) < 0 ||
	    util_hmap__put(&b->at, d->addr, (uint32_t)b->ni) < 0)
		return -1;
	b->iv[b->ni] = (struct bi){ .d = d, .ft_prev = -1, .ft_next = -1, .prev = prev, .h = h,
				    .table = -1, .block = -1, .prev_taken = taken };
	return (int32_t)b->ni++;
}

/* A stack height from 64-bit arithmetic: beyond +-1 GiB it is nonsense
 * (data decoded as sub rsp, imm32 again and again) and must not overflow. */
static int32_t height(int64_t v)
{
	return v > (1 << 30) || v < -(1 << 30) ? H_UNKNOWN : (int32_t)v;
}

static void apply_stack(const struct cfg_insn *d, int32_t *h, int32_t *rbp_h)
{
	switch (d->sp_op) {
	case CFG_SP_ADD:
		if (*h != H_UNKNOWN)
			*h = height((int64_t)*h - d->sp_delta);
		break;
	case CFG_SP_FRAME:
		*rbp_h = *h;
		break;
	case CFG_SP_LEAVE:
		*h = *rbp_h == H_UNKNOWN ? H_UNKNOWN : height((int64_t)*rbp_h - 8);
		break;
	case CFG_SP_LEA_RBP:
		*h = *rbp_h == H_UNKNOWN ? H_UNKNOWN : height((int64_t)*rbp_h - d->sp_delta);
		break;
	case CFG_SP_UNKNOWN:
		*h = H_UNKNOWN;
		break;
	}
}

/* Handle the control transfer at instruction i (h: height before it).
 * Returns 1 to continue decoding at the next address, 0 to stop, <0. */
static int transfer(struct fb *b, int32_t i, int32_t h, int32_t rbp_h)
{
	const struct cfg_insn *d = b->iv[i].d;
	uint64_t next = d->addr + d->len;
	char nbuf[256];
	const char *name;

	switch (d->kind) {
	case CFG_I_PLAIN:
		return 1;
	case CFG_I_SYSCALL:
		if (exits_process(b, i)) {
			b->iv[i].terminal = 1;
			return 0;
		}
		return 1;
	case CFG_I_UNREADABLE:
		cfg__fb_error(b, CFG_ERR_UNREADABLE, d->addr, "cannot read code at %#lx",
			 (unsigned long)d->addr);
		b->iv[i].terminal = 1;
		return 0;
	case CFG_I_INVALID:
		cfg__fb_error(b, CFG_ERR_INVALID, d->addr, "invalid instruction at %#lx",
			 (unsigned long)d->addr);
		b->iv[i].terminal = 1;
		return 0;
	case CFG_I_RET:
		b->returns = true;
		return 0;
	case CFG_I_HALT:
		return 0;
	case CFG_I_JCC:
	case CFG_I_JMP:
		if (is_tail(b, d->target, h)) {
			b->iv[i].tail = 1;
			name = target_name(b, d->target, nbuf, sizeof(nbuf));
			bool ret = call_returns(b, i, d->target, name);
			if (ret)
				b->returns = true;
			if (add_call(b, d->addr, d->target, name, !ret, true, false) < 0)
				return -ENOMEM;
		} else if (push(b, d->target, i, 1, h, rbp_h) < 0) {
			return -ENOMEM;
		}
		if (d->kind == CFG_I_JCC && push(b, next, i, 0, h, rbp_h) < 0)
			return -ENOMEM;
		return 0;
	case CFG_I_JMP_IND:
		if (d->rip_mem) {	/* through a pointer slot: a tail call */
			name = cfg__reader_slot_name(b->r, d->target);
			bool ret = !cfg__noreturn_name(name);
			if (ret)
				b->returns = true;
			b->iv[i].tail = 1;
			return add_call(b, d->addr, 0, name, !ret, true, true) < 0 ? -ENOMEM : 0;
		}
		if (try_jump_table(b, i, h, rbp_h) == 0)
			return 0;
		b->unresolved++;
		/* with the frame still live, not a tail call: a switch or a
		 * computed goto (glibc's vfprintf) whose targets are not known,
		 * so the CFG is incomplete there */
		if (h != 0 && h != H_UNKNOWN) {
			cfg__fb_error(b, CFG_ERR_UNRESOLVED, d->addr,
				 "indirect jump at %#lx with its targets unknown (frame live)",
				 (unsigned long)d->addr);
			return 0;
		}
		/* frame torn down: a tail call through a register; with rsp
		 * loaded from elsewhere, a context switch (longjmp) that does
		 * not come back */
		if (h == 0)
			b->returns = true;
		b->iv[i].tail = 1;
		return add_call(b, d->addr, 0, "", false, true, true) < 0 ? -ENOMEM : 0;
	case CFG_I_CALL:
	case CFG_I_CALL_IND: {
		uint64_t t = d->kind == CFG_I_CALL ? d->target : 0;
		if (d->kind == CFG_I_CALL)
			name = target_name(b, t, nbuf, sizeof(nbuf));
		else
			name = d->rip_mem ? cfg__reader_slot_name(b->r, d->target) : "";
		bool ret = call_returns(b, i, t, name) && !ends_fde(b, d->addr, next);
		if (ret && d->kind == CFG_I_CALL_IND && d->rip_mem)	/* -fno-plt */
			ret = slot_call_returns(b, cfg__reader_module(b->r, d->addr), d->target,
						name);
		b->iv[i].noret = !ret;
		if (add_call(b, d->addr, t, name, !ret, false, d->kind == CFG_I_CALL_IND) < 0)
			return -ENOMEM;
		/* the callee returns with rsp where it was before the call */
		if (ret && push(b, next, i, 0, h, rbp_h) < 0)
			return -ENOMEM;
		return 0;
	}
	}
	return 0;
}

/* The landing pads of the FDE covering addr (once per FDE): code the
 * unwinder resumes in, a cleanup or a catch, that no branch reaches (gcc's
 * stdio functions in libc jump from theirs to a .cold part). Entered with
 * the stack as at the call that threw, which is not tracked here. */
static int push_pads(struct fb *b, uint64_t addr)
{
	const struct cfg_fde *f = cfg__reader_fde_at(b->r, addr);
	if (!f || !f->lsda)
		return 0;
	for (size_t k = 0; k < b->nlsda; k++)
		if (b->lsda_seen[k] == f->start)
			return 0;
	if (b->nlsda == sizeof(b->lsda_seen) / sizeof(b->lsda_seen[0]))
		return 0;
	b->lsda_seen[b->nlsda++] = f->start;
	uint64_t *pads;
	size_t n;
	if (cfg__lsda_pads(b->r, f, &pads, &n) < 0)
		return -ENOMEM;
	int err = 0;
	for (size_t k = 0; k < n && !err; k++)
		if (cfg__reader_is_code(b->r, pads[k]))
			err = push(b, pads[k], -1, 0, H_UNKNOWN, H_UNKNOWN);
	free(pads);
	return err;
}

static int explore(struct fb *b)
{
	int err = push(b, b->entry, -1, 0, 0, H_UNKNOWN);
	while (err == 0 && b->nw) {
		struct work w = b->wv[--b->nw];
		if ((err = push_pads(b, w.addr)) < 0)
			return err;
		int32_t i = find(b, w.addr);
		if (i >= 0) {
			b->iv[i].leader = 1;
			continue;
		}
		if (!cfg__reader_is_code(b->r, w.addr)) {
			cfg__fb_error(b, CFG_ERR_NOT_CODE, w.addr, "branch to %#lx, outside code",
				 (unsigned long)w.addr);
			continue;
		}
		int32_t prev = w.from, h = w.h, rbp_h = w.rbp_h;
		uint8_t taken = w.taken;
		bool first = true;
		uint64_t addr = w.addr;
		for (;;) {
			if (b->ni >= b->o.max_insns) {
				cfg__fb_error(b, CFG_ERR_LIMIT, addr, "more than %u instructions",
					 b->o.max_insns);
				b->nw = 0;
				break;
			}
			if (b->summary && !b->r->callee_budget--) {
				b->r->callee_budget = 0;
				b->r->callee_cut = true;
				cfg__fb_error(b, CFG_ERR_LIMIT, addr, "callee analysis budget spent");
				b->nw = 0;
				break;
			}
			const struct cfg_insn *d = cfg__reader_insn(b->r, addr);
			if (!d)
				return -ENOMEM;
			i = new_insn(b, d, prev, taken, h);
			if (i < 0)
				return -ENOMEM;
			if (first) {
				b->iv[i].leader = 1;
			} else {
				b->iv[i].ft_prev = prev;
				b->iv[prev].ft_next = i;
			}
			int32_t h0 = h;
			apply_stack(d, &h, &rbp_h);
			int go = transfer(b, i, h0, rbp_h);
			if (go < 0)
				return go;
			if (b->summary && b->returns) {	/* all a summary asks */
				b->nw = 0;
				break;
			}
			if (!go)
				break;
			addr += d->len;
			int32_t j = find(b, addr);
			if (j >= 0) {	/* joined code decoded before */
				b->iv[i].ft_next = j;
				if (b->iv[j].ft_prev < 0)
					b->iv[j].ft_prev = i;
				else	/* two streams fall into it */
					b->iv[j].leader = 1;
				break;
			}
			prev = i;
			taken = 0;
			first = false;
		}
	}
	return err;
}

static void fb_fini(struct fb *b)
{
	free(b->iv);
	util_hmap__fini(&b->at);
	free(b->wv);
	for (size_t t = 0; t < b->nt; t++)
		free(b->tv[t].targets);
	free(b->tv);
	free(b->cv);
	free(b->names);
}

static int fb_init(struct fb *b, struct cfg_reader *r, uint64_t entry,
		   const struct cfg_build_opts *opts)
{
	memset(b, 0, sizeof(*b));
	b->r = r;
	if (!UTIL_OPTS_COPY(&b->o, opts))
		return -EINVAL;
	if (!b->o.max_insns)
		b->o.max_insns = CFG_DEFAULT_MAX_INSNS;
	if (!b->o.max_blocks)
		b->o.max_blocks = CFG_DEFAULT_MAX_BLOCKS;
	if (!b->o.max_callee_insns)
		b->o.max_callee_insns = CFG_DEFAULT_MAX_CALLEE_INSNS;
	b->entry = entry;
	const struct cfg_fde *fde = cfg__reader_fde_at(r, entry);
	if (fde && fde->entry && fde->start == entry) {
		b->lo = fde->start;
		b->hi = fde->end;
	} else {
		struct cfg_module *m = cfg__reader_module(r, entry);
		const struct cfg_sym *s = m ? cfg__module_sym_at(m, entry) : NULL;
		if (s && s->addr == entry && s->size) {
			b->lo = s->addr;
			b->hi = s->addr + s->size;
		}
	}
	return util_hmap__init(&b->at, 256);
}

/* Explores the function at entry only as far as needed to tell whether a
 * path returns (its callees through cfg_callee_returns, in returns.c). */
bool cfg__may_return(struct cfg_reader *r, uint64_t entry)
{
	struct fb b;
	bool returns = true;

	if (fb_init(&b, r, entry, NULL) == 0) {
		b.summary = true;	/* explore() spends the budget */
		if (explore(&b) == 0 && !b.returns)
			returns = false;
	}
	fb_fini(&b);
	return returns;
}

int cfg_function__build(struct cfg_reader *r, uint64_t addr, const struct cfg_build_opts *opts,
			struct cfg_function **out)
{
	if (!r || !out)
		return -EINVAL;
	*out = NULL;
	if (opts && opts->find_entry)
		cfg_reader__function_at(r, addr, &addr);
	struct cfg_function *f = calloc(1, sizeof(*f));
	if (!f)
		return cfg__reader_err(r, -ENOMEM, "out of memory");
	f->entry = addr;
	f->dec = r->dec;
	/* code no symbol names is sub_ADDR, as profile, bt and the name
	 * resolver call it */
	if (!cfg__reader_name_at(r, addr, f->name, sizeof(f->name))[0])
		snprintf(f->name, sizeof(f->name), "sub_%lx", (unsigned long)addr);
	cfg__reader_trim(r);
	/* the function's own answer is what callers will be told: it is the
	 * first frame of the noreturn analysis (built again if recursion
	 * assumed wrongly that it does not return) */
	struct fb b;
	int err = fb_init(&b, r, addr, opts);
	r->callee_budget = b.o.max_callee_insns;
	r->callee_cut = false;
	r->depth = 0;
	r->nprov = 0;
	enum cfg_ret known;
	bool framed = !cfg__ret_known(r, addr, &known);
	if (framed && err == 0)
		err = cfg__ret_push(r, addr);
	else
		framed = false;
	while (err == 0 && (err = explore(&b)) == 0 && framed &&
	       cfg__ret_again(r, b.returns ? CFG_RET_YES : CFG_RET_NO)) {
		fb_fini(&b);
		err = fb_init(&b, r, addr, opts);
	}
	if (framed)
		cfg__ret_pop(r, err == 0 && !b.returns ? CFG_RET_NO : CFG_RET_YES);
	if (err == 0)
		err = cfg__fb_fill(&b, f);
	fb_fini(&b);
	if (err < 0) {
		cfg_function__free(f);
		return cfg__reader_err(r, err, "building the CFG at %#lx: %s", (unsigned long)addr,
				      strerror(-err));
	}
	*out = f;
	return 0;
}

void cfg_function__free(struct cfg_function *f)
{
	if (!f)
		return;
	free(f->blocks);
	free(f->block_insn);
	free(f->insns);
	free(f->edges);
	free(f->preds);
	free(f->pred_first);
	free(f->ranges);
	free(f->tables);
	free(f->table_targets);
	free(f->calls);
	free(f->names);
	free(f->dom_pre);
	free(f->dom_post);
	free(f->loops);
	free(f->loop_data);
	free(f);
}
