/* Instrumented copies of live functions (issue 10): every block of the
 * function's CFG is relocated into the code cache with the capture code of
 * its REP plan (rep_build), so that each execution writes one unit into the
 * executing thread's CAB ring, found through %gs.
 *
 * A unit is a CFG block, cut after every call (the callee may run other
 * instrumented code of the same thread, which reuses the state block's
 * slots). Before each instruction the plan names, `mov %reg, %gs:SLOT`
 * keeps the value (one instruction, no flags, no scratch register); rflags
 * (the direction of a rep string instruction) goes through pushf below the
 * red zone, and the fs base (thread-local storage, the stack protector's
 * canary) through rdfsbase into rax saved there. The commit code writes the unit: before the unit's last
 * instruction when that one transfers control, after it otherwise. It
 * reserves the record first (the pointer moved past it) and writes the
 * header last, over CAB's CLEAR sentinel, so the consumer never sees a unit
 * half written; it uses only mov, lea, push, pop, jrcxz and a call of the
 * ring stub (instr-stub.S) on the slow path, so the flags are never
 * touched. Dropped units (sample mode, a consumer gone, a thread with no
 * ring) go the same fast way into a junk area of the thread's block, which
 * the stub empties and counts when it is full: units still there when the
 * copy is undone (at most 8 KiB) are not counted as dropped.
 *
 * Signals: a handler may run the copy on the thread it interrupts, anywhere
 * (the kernel restores the registers after it, not the block's words).
 * The commit's reservation (read the pointer, check the word there, move
 * the pointer past the record) takes several instructions: it is a
 * restartable range (restart_ranges), so padrone, which sees every signal
 * before its thread does, first moves a thread inside it back to the read,
 * and the handler's units go where the interrupted one would have, which
 * then takes the next place. The ring stub runs with signals blocked but
 * while it sleeps, its scratch words on its own frame (instr-stub.S). So no
 * unit is lost, spoiled or half written, and the target's registers are
 * never touched. With padrone gone nobody moves threads back: a handler
 * run inside a reservation writes where the interrupted unit then writes
 * too (no longer read by anyone), and the pointer ends at most a unit past
 * the CLEAR word the interrupted commit read, which the guards
 * (IS_GUARD_WORDS) keep inside the junk area or the chunk.
 *
 * Known limits (refused or documented): a signal handler that runs
 * instrumented code between a capture and its commit overwrites the slots
 * of the interrupted unit (its addresses, or a rep instruction's count, are
 * then the handler's; the target's registers are not touched); threads
 * already inside the function are moved into
 * the copy and back out (instr-move.c); a jump table's jmp through a
 * register is re-pointed at the copy (instr-jt.c), one through memory is
 * refused; a thread cloned later gets a spare ring (one an exited thread
 * freed) or the sink, a forked child the sink. Functions instrumented at
 * once share the threads' state area (struct area): at most IS_SECTIONS,
 * with the rows (threads and spares) the first one made.
 */
#include "codecache/instr.h"
#include "codecache/instr-state.h"
#include "cfg/cfg.h"
#include "pipeline/cab.h"

#include <Zydis/Zydis.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

extern const uint8_t cc_istub_begin[], cc_istub_end[];

#define MAX_THREADS 256u

_Static_assert((IS_SIZE - IS_JUNK_END) / 8 == IS_GUARD_WORDS, "the junk area's guard");

/* A unit: instructions [first, first + n) of the function's list. */
struct unit {
	uint32_t first, n;
	uint32_t id;
	bool block_end;		/* the last one ends a CFG block */
	struct rep_built b;
	/* slots the commit writes straight from their register, which nothing
	 * between the capture point and the commit changes (no capture, no
	 * reload, and nothing a signal handler can spoil) */
	uint64_t direct;
	uint8_t direct_reg[IS_MAX_SLOTS + 1];
	uint64_t off;		/* in the copy */
	/* its commit's reservation, restartable (a signal's handler must not
	 * run between reading the pointer and moving it past the record): the
	 * read, the slow path's call of the stub (its return not included),
	 * the fast path's move, all offsets in the copy */
	uint64_t read_at, stub_ret, fast_at, fast_end;
};

struct ring {
	pid_t tid;		/* writing it now, or last (atomic: read by consumers) */
	int target_fd;
	uint64_t map, len;	/* in the target */
	struct cab_ring *r;
};

/* The threads' state area, shared by the functions instrumented at once (a
 * thread has one gs_base): a row per thread (its gs_base points at the
 * row), the sink row last, in each row a section per function
 * (instr-state.h). Function k's ring i is written by row i's thread. Rows
 * go to threads once, whichever functions come and go; the area is torn
 * down (gs_base cleared) when the last function is undone. */
struct area {
	unsigned refs;			/* cc_instr structs holding it */
	uint64_t addr, size;		/* in the target */
	size_t nrows;			/* threads' rows; the sink row after them */
	pid_t *tid;			/* per row: its thread (atomic) */
	uint64_t *owner;		/* per row: its thread's fs base (IS_OWNER) */
	bool *free;			/* per row: no live thread has it (tracer
					 * thread only, once published) */
	struct cc_instr *_Atomic member[IS_SECTIONS];	/* installed, not undone */
	bool taken[IS_SECTIONS];	/* installing, installed, or its copy kept */
	bool gone;			/* torn down in the target */
};

struct cc_instr {
	struct cc_cache *c;		/* the view it was made (or is undone) through */
	struct attach_target *t;
	struct cc_func fn;
	char name[96];
	struct cfg_function *cfg;
	struct ci_insn *insns;
	size_t ninsns;
	uint64_t *insn_at, *insn_off;	/* per instruction: where its captures and
					 * its relocated copy begin (instr-move.c) */
	bool *unit_start;
	struct unit *units;
	size_t nunits;
	struct rep_table *table;
	uint64_t code, code_size, stub_off;
	struct area *area;		/* NULL until it has one */
	unsigned section;		/* its blocks in each row of the area */
	struct ring *rings;		/* one per row of the area */
	size_t nrings;
	uint64_t rings_at, rings_size;	/* the range reserved for them in the target */
	uint64_t detour, detour_size;	/* the entry's relocated first bytes */
	uint64_t ring_stride;		/* ring i is mapped at rings_at + i * ring_stride */
	bool sampling;
	struct cc_instr_opts o;
	bool installed;
	bool removed;		/* the original's entry back (a copy kept until
				 * released: a thread may still run it) */
	bool restartable;	/* its commits' ranges given to attach/ */
	bool released;		/* its section and rings (release_state) */
	bool free_area;		/* the release took the area out: freed once the
				 * record is forgotten */
	uint64_t release_ns;	/* the pause that cleared the threads' gs_base */
	unsigned kill_points;	/* test_kill_point: reached so far */
};

/* For tests only (tests/codecache/instrument-torn.sh): with
 * PADRONE_TEST_KILL_AT=N in its environment, padrone SIGKILLs itself at
 * the N-th of these points of an install, as a kill from outside landing
 * just there would, so that each window between two changes of the target
 * is tried deterministically. */
static void test_kill_point(struct cc_instr *in, const char *what)
{
	const char *env = getenv("PADRONE_TEST_KILL_AT");

	(void)what;	/* names the point for the reader */
	if (env && strtoul(env, NULL, 10) == ++in->kill_points)
		kill(getpid(), SIGKILL);
}

/* ------------------------------------------------------------ the plan */

static int read_blocks(struct cc_instr *in)
{
	size_t nb = cfg_function__block_count(in->cfg), cap = 0;
	char why[200];

	for (size_t i = 0; i < nb; i++) {
		const struct cfg_block *b = cfg_function__block(in->cfg, i);
		size_t len = b->end - b->start;
		uint8_t *buf = malloc(len + 16);
		if (!buf)
			return cc__fail(in->c, CC_PHASE_LOAD, -ENOMEM, "out of memory");
		memset(buf, 0, len + 16);
		int rc = cc__read(in->c, b->start, buf, len);
		for (size_t at = 0; rc == 0 && at < len;) {
			if ((rc = cc__grow(&in->insns, &cap, in->ninsns + 1, sizeof *in->insns, 256)))
				break;
			struct ci_insn *ci = &in->insns[in->ninsns];
			if ((rc = cc__instr_decode(buf + at, len - at, b->start + at, ci, why,
						   sizeof why)) < 0) {
				rc = cc__fail(in->c, CC_PHASE_LOAD, rc, "cannot instrument %s: %s",
					      in->name, why);
				break;
			}
			at += ci->len;
			in->ninsns++;
		}
		free(buf);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static bool ends_unit(const struct ci_insn *ci)
{
	return ci->kind == CI_CALL || ci->kind == CI_ICALL;
}

/* A unit that says only which block ran: its header, no slots; the
 * table still lists its instructions (the fetches are known). */
static void forget_addresses(struct rep_built *b)
{
	b->ncaps = 0;
	b->block.nslots = 0;
	b->block.nrefs = 0;
}

static bool transfers(const struct ci_insn *ci);

/* Can slot's one capture c be written at the commit from its register? Not
 * rax or rcx (the commit's own), rsp (moved below the red zone), rflags or
 * a segment base (no register to store from), nor a register any
 * instruction run between the capture and the commit writes. */
static bool direct_capture(const struct cc_instr *in, const struct unit *u,
			   const struct rep_capture *c)
{
	uint32_t last = u->n - 1;
	uint32_t start = c->after ? c->insn + 1 : c->insn;
	uint32_t end = transfers(&in->insns[u->first + last]) ? last : last + 1;

	if (c->reg < REP_REG_RDX || c->reg > REP_REG_R15 || c->reg == REP_REG_RSP ||
	    start > end)
		return false;
	for (uint32_t k = start; k < end; k++)
		if (in->insns[u->first + k].rep.clobbers & (1u << c->reg))
			return false;
	return true;
}

static void plan_direct(const struct cc_instr *in, struct unit *u)
{
	uint8_t captures[IS_MAX_SLOTS + 1] = { 0 };

	u->direct = 0;
	for (uint32_t c = 0; c < u->b.ncaps; c++)
		if (u->b.caps[c].slot <= IS_MAX_SLOTS)
			captures[u->b.caps[c].slot]++;
	for (uint32_t c = 0; c < u->b.ncaps; c++) {
		const struct rep_capture *cap = &u->b.caps[c];
		if (cap->slot > IS_MAX_SLOTS || captures[cap->slot] != 1 ||
		    !direct_capture(in, u, cap))
			continue;
		u->direct |= 1ull << cap->slot;
		u->direct_reg[cap->slot] = cap->reg;
	}
}

static bool captures_fs_base(const struct rep_built *b)
{
	for (uint32_t c = 0; c < b->ncaps; c++)
		if (b->caps[c].reg == REP_REG_FSBASE)
			return true;
	return false;
}

/* Units: the blocks, cut after calls; their plans and the table. */
static int plan_units(struct cc_instr *in)
{
	size_t cap = 0, nb = cfg_function__block_count(in->cfg), k = 0;
	int rc;

	if ((rc = rep_table__new(&in->table)) < 0)
		return cc__fail(in->c, CC_PHASE_LOAD, rc, "%s", rep_errmsg());
	for (size_t bi = 0; bi < nb; bi++) {
		const struct cfg_block *b = cfg_function__block(in->cfg, bi);
		while (k < in->ninsns && in->insns[k].pc < b->end) {
			uint32_t first = (uint32_t)k;
			while (k < in->ninsns && in->insns[k].pc < b->end && !ends_unit(&in->insns[k]))
				k++;
			if (k < in->ninsns && in->insns[k].pc < b->end)
				k++;	/* the call ends the unit */
			if ((rc = cc__grow(&in->units, &cap, in->nunits + 1, sizeof *in->units, 64)))
				return cc__fail(in->c, CC_PHASE_LOAD, rc, "out of memory");
			struct unit *u = &in->units[in->nunits];
			memset(u, 0, sizeof *u);
			u->first = first;
			u->n = (uint32_t)(k - first);
			u->id = (uint32_t)++in->nunits;
			u->block_end = k >= in->ninsns || in->insns[k].pc >= b->end;
			struct rep_insn *ri = malloc(u->n * sizeof *ri);
			if (!ri)
				return cc__fail(in->c, CC_PHASE_LOAD, -ENOMEM, "out of memory");
			for (uint32_t i = 0; i < u->n; i++)
				ri[i] = in->insns[first + i].rep;
			rc = rep_build(ri, u->n, u->id,
				       in->o.plain_plan ? 0 : REP_OPT_STACK | REP_OPT_BASE, &u->b);
			free(ri);
			if (rc < 0)
				return cc__fail(in->c, CC_PHASE_LOAD, rc, "cannot instrument %s: the "
						"block at 0x%" PRIx64 ": %s", in->name,
						in->insns[first].pc, rep_errmsg());
			if (in->o.blocks_only)
				forget_addresses(&u->b);
			if (captures_fs_base(&u->b) && !cc__user_fsgsbase())
				return cc__fail(in->c, CC_PHASE_LOAD, -ENOTSUP, "cannot instrument "
						"%s: the block at 0x%" PRIx64 " reads through fs "
						"(thread-local storage), whose base only rdfsbase can "
						"capture, which this kernel does not let user code run",
						in->name, in->insns[first].pc);
			plan_direct(in, u);
			if (u->b.block.nslots > IS_MAX_SLOTS)
				return cc__fail(in->c, CC_PHASE_LOAD, -E2BIG, "cannot instrument %s: "
						"the block at 0x%" PRIx64 " needs %u slots, more than "
						"the %d of a unit", in->name, in->insns[first].pc,
						u->b.block.nslots, IS_MAX_SLOTS);
			if ((rc = rep_table__add(in->table, &u->b.block)) < 0)
				return cc__fail(in->c, CC_PHASE_LOAD, rc, "%s", rep_errmsg());
		}
	}
	return 0;
}

/* The unit starting at pc, or NULL. */
static const struct unit *unit_at(const struct cc_instr *in, uint64_t pc)
{
	size_t lo = 0, hi = in->nunits;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		uint64_t at = in->insns[in->units[mid].first].pc;
		if (at == pc)
			return &in->units[mid];
		if (at < pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ------------------------------------------------------------ the code */

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

/* Reserve the record, copy the slots, write the header last. The
 * reservation reads the pointer and moves it in separate instructions: a
 * handler run in between would place its units where this one goes, so
 * that stretch is a restartable range (restart_ranges). */
static void emit_commit(struct out *o, const struct cc_instr *in, struct unit *u)
{
	static const uint8_t head[] = {
		0x48, 0x8d, 0x64, 0x24, 0x80,			/* lea -128(%rsp),%rsp */
		0x50, 0x51,					/* push %rax; push %rcx */
		0x65, 0x48, 0x8b, 0x04, 0x25,			/* mov %gs:IS_PTR,%rax */
	};
	static const uint8_t test[] = {
		0x48, 0x8b, 0x08,				/* mov (%rax),%rcx */
		0xe3, 0x0c,					/* jrcxz fast */
		0xb9,						/* mov $n,%ecx */
	};
	static const uint8_t tail[] = {
		0x48, 0x89, 0x08,				/* mov %rcx,(%rax) */
		0x59, 0x58,					/* pop %rcx; pop %rax */
		0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0,		/* lea 128(%rsp),%rsp */
	};
	uint32_t n = u->b.block.nslots;

	put(o, head, sizeof head);
	put32(o, o->gs + IS_PTR);
	uint64_t read_at = o->at - 9;				/* the mov %gs:IS_PTR,%rax */
	put(o, test, sizeof test);
	put32(o, n);
	put(o, (uint8_t[]){ 0xe8 }, 1);				/* call stub */
	rel32(o, in->code + in->stub_off);
	uint64_t stub_ret = o->at;
	put(o, (uint8_t[]){ 0xeb, 0x10 }, 2);			/* jmp write */
	uint64_t fast_at = o->at;
	put(o, (uint8_t[]){ 0x48, 0x8d, 0x88 }, 3);		/* fast: lea 8(1+n)(%rax),%rcx */
	put32(o, 8 * (1 + n));
	put(o, (uint8_t[]){ 0x65, 0x48, 0x89, 0x0c, 0x25 }, 5);	/* mov %rcx,%gs:IS_PTR */
	put32(o, o->gs + IS_PTR);
	if (!o->buf) {
		u->read_at = read_at;
		u->stub_ret = stub_ret;
		u->fast_at = fast_at;
		u->fast_end = o->at;
	}
	for (uint32_t k = 0; k < n; k++) {			/* write: */
		if (u->direct >> k & 1) {			/* mov %reg,8(1+k)(%rax) */
			unsigned code = u->direct_reg[k] - REP_REG_RAX;
			put(o, (uint8_t[]){ (uint8_t)(0x48 | (code >> 3) << 2), 0x89,
					    (uint8_t)(0x80 | (code & 7) << 3) }, 3);
			put32(o, 8 * (1 + k));
			continue;
		}
		put(o, (uint8_t[]){ 0x65, 0x48, 0x8b, 0x0c, 0x25 }, 5);
		put32(o, o->gs + IS_SLOTS + 8 * k);
		put(o, (uint8_t[]){ 0x48, 0x89, 0x88 }, 3);
		put32(o, 8 * (1 + k));
	}
	uint64_t hdr = REP_S_WORD(u->id, n);
	put(o, (uint8_t[]){ 0x48, 0xb9 }, 2);			/* movabs $hdr,%rcx */
	put(o, &hdr, 8);
	put(o, tail, sizeof tail);
}

static bool transfers(const struct ci_insn *ci)
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
		const struct unit *u = unit_at(in, jt->targets[i]);
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
		unit_at(in, ci->target) : NULL;
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

static void emit_unit(struct out *o, struct cc_instr *in, struct unit *u, const struct unit *next)
{
	const struct rep_built *b = &u->b;
	uint32_t c = 0;

	if (!o->buf)
		u->off = o->at;
	for (uint32_t i = 0; i < u->n; i++) {
		const struct ci_insn *ci = &in->insns[u->first + i];
		bool last = i + 1 == u->n;
		if (!o->buf)
			in->insn_at[u->first + i] = o->at;
		for (; c < b->ncaps && b->caps[c].insn == i && !b->caps[c].after; c++)
			if (!(u->direct >> b->caps[c].slot & 1))
				emit_capture(o, &b->caps[c]);
		if (last && transfers(ci))
			emit_commit(o, in, u);
		if (!o->buf)
			in->insn_off[u->first + i] = o->at;
		emit_insn(o, in, ci);
		for (; c < b->ncaps && b->caps[c].insn == i && b->caps[c].after; c++)
			if (!(u->direct >> b->caps[c].slot & 1))
				emit_capture(o, &b->caps[c]);
		if (last && !transfers(ci))
			emit_commit(o, in, u);
	}
	const struct ci_insn *ci = &in->insns[u->first + u->n - 1];
	uint64_t end = ci->pc + ci->len;
	if (!ci->falls || (next && in->insns[next->first].pc == end))
		return;
	const struct unit *to = unit_at(in, end);	/* fall through to a unit laid out elsewhere */
	put(o, (uint8_t[]){ 0xe9 }, 1);
	rel32(o, to ? in->code + to->off : end);
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

/* The copy: units in address order, then the ring stub. Twice: offsets
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
	in->code_size = o.at;
	if (o.err)
		return cc__fail(in->c, CC_PHASE_WRITE, o.err, "cannot lay out the instrumented "
				"copy of %s (error %d)", in->name, o.err);
	return 0;
}

/* ------------------------------------------------------------ the rings */

static int remote(struct cc_instr *in, long nr, uint64_t a0, uint64_t a1, uint64_t a2,
		  uint64_t a3, uint64_t a4, uint64_t a5, int64_t *ret, const char *what)
{
	const uint64_t args[6] = { a0, a1, a2, a3, a4, a5 };
	int rc = cc__syscall(in->c, nr, args, ret);

	if (rc < 0)
		return rc;
	if (*ret < 0 && *ret > -4096)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, (int)*ret, "%s in process %d: %s", what,
				in->c->pid, strerror((int)-*ret));
	return 0;
}

/* memfd_create, ftruncate (by padrone's cab_ring__create_fd), mmap in the
 * target; padrone maps the same file through /proc/PID/fd/N. */
static int make_ring(struct cc_instr *in, struct ring *rg, uint64_t name, uint64_t at,
		     bool kill_point)
{
	struct cab_opts co = { .sz = sizeof co, .mode = in->sampling ? CAB_SAMPLING : CAB_EXHAUSTIVE,
			       .chunk_bytes = in->o.chunk_bytes, .nchunks = in->o.nchunks,
			       .consumer_timeout_ms = in->o.consumer_timeout_ms,
			       .max_record_words = IS_GUARD_WORDS };
	char path[64];
	int64_t ret;
	int rc;

	rg->target_fd = -1;
	if ((rc = remote(in, SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING, 0, 0, 0, 0,
			 &ret, "memfd_create")) < 0)
		return rc;
	rg->target_fd = (int)ret;
	if (kill_point)
		test_kill_point(in, "a ring's memfd made");
	snprintf(path, sizeof path, "/proc/%d/fd/%d", in->c->pid, rg->target_fd);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -errno, "cannot open %s: %s", path,
				strerror(errno));
	rc = cab_ring__create_fd(fd, &co, &rg->r);
	close(fd);
	if (rc < 0)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, rc, "ring for thread %d: %s", rg->tid,
				cab_errmsg());
	struct cab_layout l;
	cab_ring__layout(rg->r, &l);
	if (l.total_bytes > in->ring_stride)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -EINVAL, "a ring of %" PRIu64 " bytes "
				"in a slot of %" PRIu64, l.total_bytes, in->ring_stride);
	/* over its slot of the range reserved (and recorded) for the rings */
	if ((rc = remote(in, SYS_mmap, at, l.total_bytes, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, (uint64_t)rg->target_fd, 0, &ret,
			 "mmap of a ring")) < 0)
		return rc;
	rg->map = (uint64_t)ret;
	rg->len = l.total_bytes;
	remote(in, SYS_close, (uint64_t)rg->target_fd, 0, 0, 0, 0, 0, &ret, "close");
	rg->target_fd = -1;
	return cab_ring__attach_producer(rg->r, in->c->pid) < 0 ?
		cc__fail(in->c, CC_PHASE_ALLOCATE, -EBUSY, "%s", cab_errmsg()) : 0;
}

/* The rings out of the target: a memfd still open closed, the whole
 * range reserved for them unmapped. */
static void unmap_rings(struct cc_instr *in)
{
	int64_t ret;

	for (size_t i = 0; i < in->nrings; i++) {
		struct ring *rg = &in->rings[i];
		if (rg->target_fd >= 0)
			remote(in, SYS_close, (uint64_t)rg->target_fd, 0, 0, 0, 0, 0, &ret, "close");
		rg->target_fd = -1;
		rg->map = 0;
	}
	if (in->rings_at)
		remote(in, SYS_munmap, in->rings_at, in->rings_size, 0, 0, 0, 0, &ret,
		       "munmap of the rings");
	in->rings_at = 0;
}

/* The range the rings go in, a slot (a ring's size in whole pages) per
 * row: reserved (PROT_NONE, no memory behind it) before the directory
 * records it, so that a later session unmaps whatever rings a padrone
 * killed inside the install had mapped there. */
static int reserve_rings(struct cc_instr *in)
{
	struct cab_opts co = { .sz = sizeof co, .mode = in->sampling ? CAB_SAMPLING : CAB_EXHAUSTIVE,
			       .chunk_bytes = in->o.chunk_bytes, .nchunks = in->o.nchunks,
			       .consumer_timeout_ms = in->o.consumer_timeout_ms };
	struct cab_ring *probe;
	struct cab_layout l;
	int64_t ret;
	int rc;

	if ((rc = cab_ring__create(&co, &probe)) < 0)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, rc, "rings for %s: %s", in->name,
				cab_errmsg());
	cab_ring__layout(probe, &l);
	cab_ring__close(probe);
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	in->ring_stride = (l.total_bytes + page - 1) / page * page;
	uint64_t size = in->ring_stride * in->area->nrows;
	if ((rc = remote(in, SYS_mmap, 0, size, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, (uint64_t)-1, 0, &ret,
			 "reserving room for the rings")) < 0)
		return rc;
	in->rings_at = (uint64_t)ret;
	in->rings_size = size;
	return 0;
}

static int log2_exact(uint64_t v)
{
	int s = 0;

	while ((1ULL << s) < v)
		s++;
	return (1ULL << s) == v ? s : -1;
}

static void put_state(uint8_t *blk, size_t off, uint64_t v)
{
	memcpy(blk + off, &v, 8);
}

/* The function's state block in row i of its area (the sink row: nrows). */
static uint64_t block_of(const struct cc_instr *in, size_t i)
{
	return in->area->addr + i * IS_ROW + in->section * IS_SIZE;
}

/* The sink row's address: the gs_base of threads with no ring. */
static uint64_t sink_row(const struct area *a)
{
	return a->addr + a->nrows * IS_ROW;
}

/* Thread i's state block (the sink when rg is NULL); owner: the fs base
 * of the row's thread, 0 if none. */
static int fill_state(struct cc_instr *in, const struct ring *rg, uint64_t self, uint64_t owner,
		      uint8_t *blk)
{
	memset(blk, 0, IS_SIZE);
	put_state(blk, IS_SELF, self);
	put_state(blk, IS_MAGICW, CAB_MAGIC);
	put_state(blk, IS_AREA, in->area->addr);
	put_state(blk, IS_AREA_SIZE, in->area->size);
	put_state(blk, IS_SINK, sink_row(in->area));
	put_state(blk, IS_OWNER, owner);
	for (size_t off = IS_JUNK_END; off < IS_SIZE; off += 8)
		put_state(blk, off, CAB_MAGIC);
	if (!rg) {
		put_state(blk, IS_PTR, self + IS_JUNK);
		put_state(blk, IS_MODE, IS_MODE_SINK);
		return 0;
	}
	struct cab_layout l;
	cab_ring__layout(rg->r, &l);
	int shift = log2_exact((uint64_t)l.chunk_words * 8);
	if (shift < 0 || l.meta_gap != IS_META_GAP)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -EINVAL, "ring chunks of %u bytes: "
				"instrumentation needs a power of two", l.chunk_words * 8);
	put_state(blk, IS_PTR, rg->map + l.data_offset);
	put_state(blk, IS_DATA, rg->map + l.data_offset);
	put_state(blk, IS_SHIFT, (uint64_t)shift);
	put_state(blk, IS_NCHUNKS, l.nchunks);
	put_state(blk, IS_CHUNK_BYTES, (uint64_t)l.chunk_words * 8);
	put_state(blk, IS_META, rg->map + l.meta_offset);
	put_state(blk, IS_META_STRIDE, l.meta_stride);
	put_state(blk, IS_MODE, in->sampling ? IS_MODE_SAMPLING : IS_MODE_EXHAUSTIVE);
	put_state(blk, IS_WAIT_NS, (uint64_t)l.wait_ms * 1000000u);
	put_state(blk, IS_TIMEOUT_NS, (uint64_t)l.consumer_timeout_ms * 1000000u);
	static const struct { size_t is; size_t lay; } words[] = {
		{ IS_A_PROD_SEQ, offsetof(struct cab_layout, prod_seq) },
		{ IS_A_CONS_SLEEPING, offsetof(struct cab_layout, cons_sleeping) },
		{ IS_A_CONS_SEQ, offsetof(struct cab_layout, cons_seq) },
		{ IS_A_PROD_WAITING, offsetof(struct cab_layout, prod_waiting) },
		{ IS_A_CONS_STATE, offsetof(struct cab_layout, cons_state) },
		{ IS_A_HEARTBEAT, offsetof(struct cab_layout, cons_heartbeat_ns) },
		{ IS_A_PROD_DROPPING, offsetof(struct cab_layout, prod_dropping) },
		{ IS_A_DROPPED_RECORDS, offsetof(struct cab_layout, dropped_records) },
		{ IS_A_DROPPED_WORDS, offsetof(struct cab_layout, dropped_words) },
		{ IS_A_PROD_WAITS, offsetof(struct cab_layout, prod_waits) },
		{ IS_A_PROD_WAIT_NS, offsetof(struct cab_layout, prod_wait_ns) },
	};
	for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
		uint32_t off;
		memcpy(&off, (const char *)&l + words[i].lay, 4);
		put_state(blk, words[i].is, rg->map + off);
	}
	return 0;
}

int cc_instr__stub_calls(const struct cc_instr *in, size_t i, uint64_t *out)
{
	if (i >= in->nrings)
		return -EINVAL;
	ssize_t n = attach_target__read(in->t, block_of(in, i) + IS_STUB_CALLS, out,
					sizeof *out);
	return n == (ssize_t)sizeof *out ? 0 : n < 0 ? (int)n : -EIO;
}

/* ------------------------------------------------------------ install */

/* Every thread's gs must be free: fs is glibc's TLS, gs normally 0. */
static int check_gs(struct cc_instr *in, const pid_t *tids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct user_regs_struct regs;
		int rc = attach_target__get_regs(in->c->t, tids[i], &regs);
		if (rc < 0)
			return cc__fail(in->c, CC_PHASE_REDIRECT, rc, "cannot read the registers of "
					"thread %d: %s", tids[i], attach_target__errmsg(in->c->t));
		if (regs.gs_base || regs.gs)
			return cc__fail(in->c, CC_PHASE_REDIRECT, -EBUSY, "thread %d of process %d "
					"uses gs (gs_base 0x%llx), which instrumentation needs; "
					"nothing was changed", tids[i], in->c->pid,
					(unsigned long long)regs.gs_base);
	}
	return 0;
}

/* Joining an area: every thread's gs_base is in it (a thread cloned
 * while instrumented got a row or the sink, before it ran). */
static int check_joined(struct cc_instr *in, const pid_t *tids, size_t n)
{
	const struct area *a = in->area;

	for (size_t i = 0; i < n; i++) {
		struct user_regs_struct regs;
		int rc = attach_target__get_regs(in->c->t, tids[i], &regs);
		if (rc < 0)
			return cc__fail(in->c, CC_PHASE_REDIRECT, rc, "cannot read the registers of "
					"thread %d: %s", tids[i], attach_target__errmsg(in->c->t));
		if (regs.gs_base < a->addr || regs.gs_base >= a->addr + a->size)
			return cc__fail(in->c, CC_PHASE_REDIRECT, -EBUSY, "thread %d of process %d "
					"uses gs (gs_base 0x%llx, not padrone's), which "
					"instrumentation needs; nothing was changed", tids[i],
					in->c->pid, (unsigned long long)regs.gs_base);
	}
	return 0;
}

/* World stopped: no thread's gs_base in the area any more (the sink's
 * threads' too). */
static void reset_gs(struct cc_cache *c, const struct area *a)
{
	pid_t tids[MAX_THREADS];
	int n = attach_target__threads(c->t, tids, MAX_THREADS);

	for (int i = 0; i < n && i < (int)MAX_THREADS; i++) {
		struct user_regs_struct regs;
		if (attach_target__get_regs(c->t, tids[i], &regs) == 0 &&
		    regs.gs_base >= a->addr && regs.gs_base < a->addr + a->size)
			attach_target__set_gs_base(c->t, tids[i], 0);
	}
}

static const struct ci_insn *insn_at(const struct cc_instr *in, uint64_t pc)
{
	for (size_t i = 0; i < in->ninsns; i++)
		if (in->insns[i].pc == pc)
			return &in->insns[i];
	return NULL;
}

/* Each jump table's jmp is re-pointed at the copy (instr-jt.c) when it
 * jumps through a register; through memory it cannot be. */
static int check_jump_tables(struct cc_instr *in)
{
	for (size_t i = 0; i < cfg_function__jump_table_count(in->cfg); i++) {
		const struct cfg_jump_table *jt = cfg_function__jump_table(in->cfg, i);
		const struct ci_insn *ci = insn_at(in, jt->at);
		if (!ci || ci_jmp_reg(ci) < 0)
			return cc__fail(in->c, CC_PHASE_LOAD, -ENOTSUP, "cannot instrument %s: the "
					"jump table's jmp at 0x%" PRIx64 " does not jump through "
					"a register, and only such a jmp is re-pointed at the copy",
					in->name, jt->at);
	}
	return 0;
}

static int build_plan(struct cc_instr *in)
{
	struct cfg_reader *rd;
	const char *msg = NULL;
	uint64_t at = 0;
	int rc;

	if ((rc = cc__open_cfg(in->c, &rd)) < 0)
		return cc__fail(in->c, CC_PHASE_LOAD, rc, "cannot read the code of process %d",
				in->c->pid);
	rc = cfg_function__build(rd, in->fn.addr, NULL, &in->cfg);
	cfg_reader__free(rd);
	if (rc < 0)
		return cc__fail(in->c, CC_PHASE_LOAD, rc, "cannot build the CFG of %s", in->name);
	if (cfg_function__error(in->cfg, &at, &msg) != CFG_ERR_NONE)
		return cc__fail(in->c, CC_PHASE_LOAD, -ENOTSUP, "cannot instrument %s: its CFG is "
				"incomplete at 0x%" PRIx64 " (%s)", in->name, at, msg ? msg : "?");
	if (cfg_function__unresolved_count(in->cfg))
		return cc__fail(in->c, CC_PHASE_LOAD, -ENOTSUP, "cannot instrument %s: it has an "
				"indirect jump whose targets are unknown", in->name);
	if (!in->fn.size) {
		size_t nr = cfg_function__range_count(in->cfg);
		const struct cfg_range *last = cfg_function__range(in->cfg, nr - 1);
		in->fn.size = last->end - in->fn.addr;
	}
	if ((rc = read_blocks(in)) < 0 || (rc = plan_units(in)) < 0 ||
	    (rc = check_jump_tables(in)) < 0)
		return rc;
	in->insn_at = calloc(in->ninsns, sizeof *in->insn_at);
	in->insn_off = calloc(in->ninsns, sizeof *in->insn_off);
	in->unit_start = calloc(in->ninsns, sizeof *in->unit_start);
	if (!in->insn_at || !in->insn_off || !in->unit_start)
		return cc__fail(in->c, CC_PHASE_LOAD, -ENOMEM, "out of memory");
	for (size_t i = 0; i < in->nunits; i++)
		in->unit_start[in->units[i].first] = true;
	for (size_t i = 0; i < in->ninsns; i++)
		if (in->insns[i].kind == CI_LOOPLIKE && cfg_function__block_at(in->cfg,
								   in->insns[i].target) >= 0)
			return cc__fail(in->c, CC_PHASE_LOAD, -ENOTSUP, "cannot instrument %s: the "
					"loop/jrcxz at 0x%" PRIx64 " branches inside it", in->name,
					in->insns[i].pc);
	return 0;
}

static int place_code(struct cc_instr *in)
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

/* A stopped thread's fs base (its thread pointer), 0 if unknown: the
 * owner its row records, which the stub checks (instr-stub.S). */
static uint64_t fs_base_of(struct attach_target *t, pid_t tid)
{
	struct user_regs_struct regs;

	return attach_target__get_regs(t, tid, &regs) == 0 ? regs.fs_base : 0;
}

/* A new area: a row for each of these threads and the spares, the sink
 * row, the rings' name (world stopped). */
static int new_area(struct cc_instr *in, const pid_t *tids, size_t nlive)
{
	static const char name[] = "padrone-ring";
	size_t n = nlive + (in->o.spare_rings ? in->o.spare_rings : 4);
	struct area *a = calloc(1, sizeof *a);
	int rc;

	if (!a || !(a->tid = calloc(n, sizeof *a->tid)) || !(a->free = calloc(n, sizeof *a->free)) ||
	    !(a->owner = calloc(n, sizeof *a->owner))) {
		if (a) {
			free(a->tid);
			free(a->free);
		}
		free(a);
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -ENOMEM, "out of memory");
	}
	a->refs = 1;
	a->nrows = n;
	a->size = (n + 1) * IS_ROW + 64;
	a->taken[0] = true;
	for (size_t i = 0; i < n; i++) {
		a->tid[i] = i < nlive ? tids[i] : 0;
		a->free[i] = i >= nlive;
		a->owner[i] = i < nlive ? fs_base_of(in->c->t, tids[i]) : 0;
	}
	in->area = a;
	in->section = 0;
	if ((rc = cc_cache__alloc(in->c, CC_DATA, a->size, 64, in->fn.addr, &a->addr)) < 0)
		return rc;
	return cc_cache__write(in->c, a->addr + (n + 1) * IS_ROW, name, sizeof name);
}

/* Joining the area of share: a free section. */
static int join_area(struct cc_instr *in, const struct cc_instr *share)
{
	struct area *a = share->area;

	if (!cc_instr__active(share) || share->t != in->c->t || a->gone)
		return cc__fail(in->c, CC_PHASE_REDIRECT, -EINVAL, "the instrumentation to share "
				"the threads' state with is not active in process %d", in->c->pid);
	for (unsigned k = 0; k < IS_SECTIONS; k++)
		if (!a->taken[k]) {
			a->taken[k] = true;
			a->refs++;
			in->area = a;
			in->section = k;
			return 0;
		}
	return cc__fail(in->c, CC_PHASE_REDIRECT, -ENOSPC, "%d functions are instrumented, "
			"the most at once; uninstrument one first", IS_SECTIONS);
}

/* The function's rings, one per row, and its state blocks in every row
 * (world stopped). */
static int place_rings(struct cc_instr *in)
{
	const struct area *a = in->area;
	size_t n = a->nrows;
	uint64_t name_at = a->addr + (n + 1) * IS_ROW;
	int rc = 0;

	if (!(in->rings = calloc(n, sizeof *in->rings)))
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		in->rings[i].tid = __atomic_load_n(&a->tid[i], __ATOMIC_ACQUIRE);
		in->rings[i].target_fd = -1;
		in->nrings++;
		bool edge = i == 0 || i + 1 == n;	/* the first and last ring are tried */
		if ((rc = make_ring(in, &in->rings[i], name_at, in->rings_at + i * in->ring_stride,
				    edge)) < 0)
			return rc;
		if (edge)
			test_kill_point(in, "a ring mapped");
	}
	uint8_t *blk = malloc(IS_SIZE);
	if (!blk)
		return cc__fail(in->c, CC_PHASE_ALLOCATE, -ENOMEM, "out of memory");
	for (size_t i = 0; i <= n && rc == 0; i++)
		if ((rc = fill_state(in, i < n ? &in->rings[i] : NULL, block_of(in, i),
				     i < n ? a->owner[i] : 0, blk)) == 0)
			rc = cc_cache__write(in->c, block_of(in, i), blk, IS_SIZE);
	free(blk);
	return rc;
}

/* A new area: each thread's gs_base to its row. */
static int set_gs(struct cc_instr *in)
{
	const struct area *a = in->area;

	for (size_t i = 0; i < a->nrows; i++) {
		if (a->free[i])
			continue;
		int rc = attach_target__set_gs_base(in->c->t, a->tid[i], a->addr + i * IS_ROW);
		if (rc < 0)
			return cc__fail(in->c, CC_PHASE_REDIRECT, rc, "cannot set gs_base of thread "
					"%d: %s", a->tid[i], attach_target__errmsg(in->c->t));
	}
	return 0;
}

/* ------------------------------------------------------------ threads */

static void copy_map(const struct cc_instr *in, struct ci_map *m)
{
	*m = (struct ci_map){ .func = in->fn.addr, .size = in->fn.size, .code = in->code,
			      .units_end = in->stub_off, .insns = in->insns, .n = in->ninsns,
			      .at = in->insn_at, .insn = in->insn_off,
			      .unit_start = in->unit_start };
}

static int move_thread(struct cc_instr *in, const struct ci_map *m, pid_t tid, bool back,
		       bool *moved)
{
	struct attach_target *t = in->c->t;
	struct user_regs_struct regs;
	int rc = attach_target__get_regs(t, tid, &regs);

	if (rc == 0)
		rc = back ? ci_move_out(t, m, tid, &regs, moved) : ci_move_in(t, m, tid, &regs, moved);
	if (rc == 0 && *moved)
		rc = attach_target__set_regs(t, tid, &regs);
	return rc;
}

/* World stopped, the copy written: the threads inside the function go
 * into it (moved: which did). */
static int move_threads_in(struct cc_instr *in, const pid_t *tids, size_t n, pid_t *moved,
			   size_t *nmoved)
{
	struct ci_map m;

	copy_map(in, &m);
	*nmoved = 0;
	for (size_t i = 0; i < n; i++) {
		bool did = false;
		int rc = move_thread(in, &m, tids[i], false, &did);
		if (rc < 0)
			return cc__fail(in->c, CC_PHASE_REDIRECT, rc, "cannot move thread %d into the "
					"instrumented copy of %s: %s", tids[i], in->name,
					attach_target__errmsg(in->c->t));
		if (did)
			moved[(*nmoved)++] = tids[i];
	}
	return 0;
}

/* The install failed: the threads moved in go back (each is where the
 * copy holds the original's registers). */
static void move_threads_back(struct cc_instr *in, const pid_t *moved, size_t n)
{
	struct ci_map m;

	copy_map(in, &m);
	for (size_t i = 0; i < n; i++) {
		bool did;
		move_thread(in, &m, moved[i], true, &did);
	}
}

/* World stopped: threads, gs, rings, state, the redirection. */
/* Each unit's reservation as two restartable ranges, both restarting at
 * the read of the pointer: from it to the slow path's call of the stub
 * (included: the stub reads the pointer again), and the fast path's move. A
 * handler then never runs inside a reservation while padrone is attached;
 * the stub blocks signals itself. */
static int restart_ranges(struct cc_instr *in)
{
	struct attach_restart *r = calloc(2 * in->nunits + 1, sizeof *r);
	int rc;

	if (!r)
		return cc__fail(in->c, CC_PHASE_REDIRECT, -ENOMEM, "out of memory");
	for (size_t i = 0; i < in->nunits; i++) {
		const struct unit *u = &in->units[i];
		uint64_t restart = in->code + u->read_at;
		r[2 * i] = (struct attach_restart){ restart, in->code + u->stub_ret, restart };
		r[2 * i + 1] = (struct attach_restart){ in->code + u->fast_at,
							in->code + u->fast_end, restart };
	}
	rc = attach_target__restart_add(in->c->t, r, 2 * in->nunits);
	free(r);
	if (rc < 0)
		return cc__fail(in->c, CC_PHASE_REDIRECT, rc, "%s",
				attach_target__errmsg(in->c->t));
	in->restartable = true;
	return 0;
}

/* Once no thread can run the copy (or it failed to go in). */
static void forget_restart_ranges(struct cc_instr *in)
{
	if (!in->restartable)
		return;
	attach_target__restart_remove(in->c->t, in->code, in->code + in->code_size);
	in->restartable = false;
}

/* World stopped: threads, gs, rings, state, the redirection. The code,
 * the area and the rings' (empty) range are made first and recorded in the
 * directory before any ring is mapped or any gs_base set, so that a padrone
 * killed at any point leaves either nothing in the target but free cache
 * blocks, or a record a later session's restore undoes whole
 * (cc__instr_undo_left). */
static int install(struct cc_instr *in, struct cc_job *j)
{
	pid_t tids[MAX_THREADS], moved[MAX_THREADS];
	size_t nmoved = 0;
	uint64_t detour = 0;
	size_t dsize = 0;
	int n = attach_target__threads(in->c->t, tids, MAX_THREADS), rc;

	if (n < 0)
		return cc__fail(in->c, CC_PHASE_REDIRECT, n, "cannot list the threads of process %d",
				in->c->pid);
	if (n > (int)MAX_THREADS)
		return cc__fail(in->c, CC_PHASE_REDIRECT, -E2BIG, "process %d has %d threads; "
				"instrumentation handles at most %u", in->c->pid, n, MAX_THREADS);
	bool fresh = !in->area;	/* else joining (its section taken) */
	if ((rc = fresh ? check_gs(in, tids, (size_t)n) : check_joined(in, tids, (size_t)n)) < 0 ||
	    (rc = place_code(in)) < 0 || (rc = restart_ranges(in)) < 0 ||
	    (fresh && (rc = new_area(in, tids, (size_t)n)) < 0) ||
	    (rc = cc__job_place_detour(j, &detour, &dsize)) < 0)
		return rc;
	in->detour = detour;
	in->detour_size = dsize;
	if ((rc = reserve_rings(in)) < 0)
		return rc;
	test_kill_point(in, "code, area and the rings' range made");
	/* the area is freed with the last function, not with this one; the
	 * record names it, and the rings' range, for a later session */
	struct cc_dir_block owned[2] = {
		{ in->code, in->code_size, CC_CODE, 0 },
		{ detour, dsize, CC_CODE, 0 },
	};
	uint64_t dest = in->code + unit_at(in, in->fn.addr)->off;
	cc__job_set_instr(j, in->area->addr, in->area->size, in->rings_at, in->rings_size);
	if ((rc = cc__job_record(j, dest, detour, owned, detour ? 2 : 1, block_of(in, 0))) < 0)
		return rc;
	test_kill_point(in, "recorded");
	if ((rc = place_rings(in)) == 0) {
		test_kill_point(in, "rings and state blocks written");
		rc = fresh ? set_gs(in) : 0;
	}
	if (rc == 0) {
		test_kill_point(in, "gs_base set");
		rc = move_threads_in(in, tids, (size_t)n, moved, &nmoved);
	}
	if (rc == 0) {
		test_kill_point(in, "threads moved in");
		rc = cc__job_apply(j, dest, detour, owned, detour ? 2 : 1, block_of(in, 0), NULL);
	}
	if (rc == 0 && nmoved) {
		cc__job_add_moved(j, (unsigned)nmoved);
		cc__job_say(j, "moved %zu thread%s inside %s into its instrumented copy", nmoved,
			    nmoved == 1 ? "" : "s", in->name);
	}
	if (rc == 0) {
		in->installed = true;
		atomic_store(&in->area->member[in->section], in);
		for (size_t i = 0; i < in->nrings; i++)	/* rows given while it was made */
			__atomic_store_n(&in->rings[i].tid,
					 __atomic_load_n(&in->area->tid[i], __ATOMIC_ACQUIRE),
					 __ATOMIC_RELEASE);
		if (in->o.publish)
			atomic_store(in->o.publish, in);
		test_kill_point(in, "installed");
	}
	if (rc < 0) {
		move_threads_back(in, moved, nmoved);
		forget_restart_ranges(in);
		if (fresh && in->area)
			reset_gs(in->c, in->area);
	}
	return rc;
}

/* A failed install undone (gs_base already reset): the rings out of the
 * target, then its record, then the cache blocks the record names (a
 * padrone killed on the way leaves the record, or free blocks only). */
static void undo_alloc(struct cc_instr *in, struct cc_job *j)
{
	unmap_rings(in);
	for (size_t i = 0; i < in->nrings; i++) {
		cab_ring__close(in->rings[i].r);
		in->rings[i].r = NULL;
	}
	in->nrings = 0;
	if (j)
		cc__job_unrecord(j);
	if (in->detour)
		cc_cache__free(in->c, in->detour, in->detour_size);
	in->detour = 0;
	if (in->code)
		cc_cache__free(in->c, in->code, in->code_size);
	in->code = 0;
	struct area *a = in->area;
	if (a && a->refs == 1 && a->addr)	/* its own, made for it */
		cc_cache__free(in->c, a->addr, a->size);
	if (a)
		a->taken[in->section] = false;
}

int cc_cache__instrument(struct cc_cache *c, const struct cc_func *fn,
			 const struct cc_instr_opts *opts, struct cc_instr **out)
{
	struct cc_instr *in;
	struct cc_dir_redir *r;
	struct cc_job *j = NULL;
	int rc;

	*out = NULL;
	const char *name = fn->name ? fn->name : "the function";
	if (!c->t)
		return cc__fail(c, CC_PHASE_REDIRECT, -EINVAL, "instrumentation needs a seized "
				"target (threads' gs_base)");
	if ((r = cc__redir_find(c, fn->addr, 0)))
		return cc__fail(c, CC_PHASE_REDIRECT, -EEXIST, "%s is already %s; restore it first",
				name, r->kind == CC_REDIR_MEASURE ? "being measured" :
				strncmp(r->source, "instrumented", 12) == 0 ? "instrumented" :
				"replaced");
	if (!(in = calloc(1, sizeof *in)))
		return cc__fail(c, CC_PHASE_LOAD, -ENOMEM, "out of memory");
	in->c = c;
	in->t = c->t;
	in->o = (struct cc_instr_opts){ .sz = sizeof in->o };
	if (opts)
		memcpy(&in->o, opts, opts->sz < sizeof in->o ? opts->sz : sizeof in->o);
	in->sampling = in->o.sampling;
	in->fn = *fn;
	snprintf(in->name, sizeof in->name, "%s", name);
	in->fn.name = in->name;
	if ((in->o.share && (rc = join_area(in, in->o.share)) < 0) || (rc = build_plan(in)) < 0)
		goto err;
	char source[160];
	snprintf(source, sizeof source, "instrumented copy (padrone %d)", (int)getpid());
	struct cc_patch_opts po = { .sz = sizeof po, .timeout_ms = in->o.timeout_ms, .force = true,
				    .report = in->o.report, .report_size = in->o.report_size,
				    .source = source, .stats = in->o.stats };
	if ((rc = cc__job_new(c, &in->fn, CC_REDIR_REPLACE, &po, &j)) < 0)
		goto err;
	if ((rc = attach_target__stop(c->t)) < 0) {
		rc = cc__fail(c, CC_PHASE_REDIRECT, rc, "cannot stop process %d: %s", c->pid,
			      attach_target__errmsg(c->t));
		goto err;
	}
	rc = install(in, j);
	attach_target__resume(c->t);
	if (rc < 0)
		goto err;
	cc__job_free(j);
	*out = in;
	return 0;
err:
	undo_alloc(in, j);
	cc__job_free(j);
	cc_instr__free(in);
	return rc;
}

/* For tests only (tests/codecache/instrument-kept.sh): with
 * PADRONE_TEST_UNDO_FAIL=K[,K...] in its environment, the K-th of this
 * process's stops that would take an instrumented copy out (counted from
 * 1) fails, as a stop timing out on a loaded machine does, before anything
 * is changed. */
static int test_undo_fail(struct cc_cache *c)
{
	static _Atomic unsigned tries;
	const char *env = getenv("PADRONE_TEST_UNDO_FAIL");
	unsigned k = atomic_fetch_add(&tries, 1) + 1;

	for (char *end; env && *env; env = *end ? end + 1 : end)
		if (strtoul(env, &end, 10) == k)
			return cc__fail(c, CC_PHASE_RESTORE, -ETIMEDOUT, "process %d did not "
					"stop (PADRONE_TEST_UNDO_FAIL)", c->pid);
	return 0;
}

/* The copy's unlinking, in the stop that puts the original's first bytes
 * back (one pause, not two; on the tracer thread, which runs real-time
 * during a pause where a caller's thread may lose its CPU). Once done, no
 * thread can be strictly inside a unit's jump, so a retry of that stop
 * need not do it again. */
struct unlinking {
	struct ci_map m;
	const struct cc_reloc *prefix;
	uint64_t detour;
	bool done;
};

static int unlink_copy(struct cc_cache *c, void *arg)
{
	struct unlinking *u = arg;
	int rc;

	if (u->done)
		return 0;
	if ((rc = test_undo_fail(c)) < 0)
		return rc;
	if ((rc = ci_unlink(c, &u->m, u->prefix, u->detour)) == 0)
		u->done = true;
	return rc;
}

/* Is the function's section the area's last taken? Then the area goes with
 * it (no other function's copy can run: gs_base cleared, then freed). */
static bool last_of_area(const struct cc_instr *in)
{
	const struct area *a = in->area;

	for (unsigned k = 0; k < IS_SECTIONS; k++)
		if (a->taken[k] && k != in->section)
			return false;
	return !a->gone;
}

/* On the tracer thread, real-time inside the pause (as patch.c's stops):
 * the threads' gs_base out of the area and every ring unmapped, in one
 * stop, where a remote system call each would stop the world twice a
 * ring. */
struct releasing {
	struct cc_cache *c;
	struct cc_instr *in;
	bool clear;
	uint64_t pause_ns;
};

static int release_in_stop(struct attach_target *t, void *arg)
{
	struct releasing *r = arg;
	bool outer = !attach_target__is_stopped(t);
	int rc = attach_target__stop(t);

	if (rc < 0)
		return rc;
	if (r->clear)
		reset_gs(r->c, r->in->area);
	unmap_rings(r->in);
	if ((rc = attach_target__resume(t)) == 0 && outer) {
		struct attach_pause_stats ps;
		attach_target__pause_stats(t, &ps);
		r->pause_ns = ps.last_ns;
	}
	return rc;
}

/* No thread can run the copy any more (the grace period passed): its
 * section of the area free (the threads' gs_base back to 0 with the last
 * one) and its rings unmapped from the target. Before the directory
 * forgets the copy, so that a padrone killed on the way leaves a record a
 * later session undoes whole (cc__instr_undo_left), never rings nobody
 * knows. A stop that fails changes nothing here: the record stays
 * (keep_busy) and a later uninstrument or restore releases it. */
static int release_state(struct cc_cache *c, void *arg)
{
	struct cc_instr *in = arg;

	if (in->released)
		return 0;
	struct releasing r = { .c = c, .in = in, .clear = last_of_area(in) };
	int rc = attach_target__call(c->t, release_in_stop, &r);
	if (rc < 0)
		return cc__fail(c, CC_PHASE_RESTORE, rc, "cannot take the instrumentation of %s "
				"out of process %d: %s", in->name, c->pid,
				attach_target__errmsg(c->t));
	in->release_ns = r.pause_ns;
	in->released = in->removed = true;	/* no clone event gives a row of it any more */
	atomic_store(&in->area->member[in->section], NULL);
	in->area->taken[in->section] = false;
	in->area->gone = r.clear;
	in->free_area = r.clear;
	forget_restart_ranges(in);
	test_kill_point(in, "released, its record not yet forgotten");
	return 0;
}

/* Once the record is forgotten: the area, if the release took it out. */
static void free_area(struct cc_cache *c, void *arg)
{
	struct cc_instr *in = arg;

	if (in->free_area)
		cc_cache__free(c, in->area->addr, in->area->size);
	in->free_area = false;
}

/* The original back: the copy unlinked (each thread in it leaves at its
 * next unit, its current one written whole: instr-move.c) and the entry
 * restored in one stop; the copy is freed once no thread is in it and no
 * stack returns into it (the grace period, as for a replacement), its
 * state released just before. Past the timeout the copy, its state and its
 * record stay (kept): undoing the record again waits and releases. */
static int restore_moving_out(struct cc_cache *c, struct cc_instr *in,
			      const struct cc_patch_opts *o)
{
	struct cc_dir_redir *r = cc__redir_find(c, in->fn.addr, CC_REDIR_REPLACE);
	struct cc_reloc *prefix = NULL;
	char keep[sizeof c->errmsg];

	if (!r || cc__redir_find(c, in->fn.addr, CC_REDIR_MEASURE))
		return cc_cache__restore(c, in->fn.addr, in->name, o);
	memcpy(keep, c->errmsg, sizeof keep);
	if (r->detour && cc__redir_prefix(c, r, &prefix) < 0)
		memcpy(c->errmsg, keep, sizeof keep);	/* its threads wait instead */
	struct unlinking u = { .prefix = prefix, .detour = r->detour };
	copy_map(in, &u.m);
	struct cc_undo_stub back = { .prefix = prefix, .copy = prefix ? r->detour : 0,
				      .release = release_state, .release_arg = in,
				      .forgotten = free_area, .keep_busy = true,
				      .stopped = unlink_copy, .stopped_arg = &u };
	int rc = cc__undo(c, r->id, o, &back);
	cc_reloc__free(prefix);
	return rc;
}

/* Restored meanwhile by another view of the cache (a restore from the
 * record alone, cc__instr_undo_left, which took the gs_base and rings out
 * too): only padrone's side is left. */
static bool restored_elsewhere(struct cc_cache *c, struct cc_instr *in)
{
	if (cc__redir_find(c, in->fn.addr, CC_REDIR_REPLACE))
		return false;
	in->released = in->removed = true;
	atomic_store(&in->area->member[in->section], NULL);
	in->area->taken[in->section] = false;
	forget_restart_ranges(in);
	return true;
}

int cc_cache__uninstrument(struct cc_cache *c, struct cc_instr *in,
			   const struct cc_patch_opts *opts)
{
	struct cc_patch_stats st = { 0 };
	struct cc_patch_opts o = { .sz = sizeof o };
	int rc;

	if (opts)
		memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
	in->c = c;	/* the view of this session's command, not the one it was made by */
	if (!in->installed || in->released)
		return cc__fail(c, CC_PHASE_RESTORE, -ENOENT, "%s is not instrumented", in->name);
	if (restored_elsewhere(c, in))
		goto ended;
	/* a thread waiting for a consumer that is not there would keep the
	 * copy busy past the restore's timeout: it drops from now on */
	const uint64_t one = 1;
	for (size_t i = 0; i < in->nrings; i++)
		if (!cab_ring__has_consumer(in->rings[i].r))
			cc_cache__write(c, block_of(in, i) + IS_QUIT, &one, sizeof one);
	struct cc_patch_stats *user = o.stats;
	o.stats = &st;
	if ((rc = restore_moving_out(c, in, &o)) < 0)
		return rc;	/* the entry still goes to the copy: nothing changed */
	if (in->release_ns) {	/* a brief stop after the restore, as the grace period's */
		st.looks++;
		if (in->release_ns > st.look_max_ns)
			st.look_max_ns = in->release_ns;
	}
	if (user)
		*user = st;
	in->removed = true;	/* kept, unless released */
ended:	/* the entry is back: the producers end (again is harmless) */
	for (size_t i = 0; i < in->nrings; i++)
		cab_ring__end_producer(in->rings[i].r);
	return 0;
}

bool cc_instr__released(const struct cc_instr *in)
{
	return in->released;
}

/* Detaching from a process whose copy could not be taken out: the record
 * stays in the directory for a later restore, and every thread keeps its
 * gs_base past the detach (the copy reaches its state through it). */
int cc_instr__leave(struct cc_instr *in)
{
	if (!in->installed || in->released)
		return 0;
	return attach_target__keep_gs_bases(in->t);
}

/* ------------------------------------------------- left by another padrone */

bool cc__redir_is_instr(const struct cc_dir_redir *r)
{
	return strncmp(r->source, "instrumented", 12) == 0;
}

/* Another instrumented function's record names the same area. */
static bool area_shared(const struct cc_cache *c, const struct cc_dir_redir *r)
{
	for (size_t i = 0; i < CC_MAX_REDIRS; i++) {
		const struct cc_dir_redir *o = &c->dir.redirs[i];
		if (o->id && o->id != r->id && cc__redir_is_instr(o) && o->area == r->area)
			return true;
	}
	return false;
}

/* A ring's memfd a killed padrone had made and not closed yet (padrone
 * closes each right after mapping it, in the same stop): closed. */
static void close_left_fds(struct cc_cache *c)
{
	char dir[64], path[600], link[256];
	struct dirent *d;
	DIR *fds;

	snprintf(dir, sizeof dir, "/proc/%d/fd", c->pid);
	if (!(fds = opendir(dir)))
		return;
	while ((d = readdir(fds))) {
		snprintf(path, sizeof path, "%s/%s", dir, d->d_name);
		ssize_t n = readlink(path, link, sizeof link - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		int64_t ret;
		if (strncmp(link, "/memfd:padrone-ring", 19) == 0)
			cc__syscall(c, SYS_close, (const uint64_t[6]){ strtoull(d->d_name, NULL, 10) },
				    &ret);
	}
	closedir(fds);
}

/* World stopped: what the record r names taken out of the target: its
 * rings' range unmapped, a ring's memfd left open closed; with last, no
 * thread's gs_base in the area any more. */
static void forget_left(struct cc_cache *c, const struct cc_dir_redir *r, bool last)
{
	pid_t tids[MAX_THREADS];
	int nt = last ? attach_target__threads(c->t, tids, MAX_THREADS) : 0;
	int64_t ret;

	for (int i = 0; i < nt && i < (int)MAX_THREADS; i++) {
		struct user_regs_struct regs;
		if (attach_target__get_regs(c->t, tids[i], &regs) == 0 && regs.gs_base >= r->area &&
		    regs.gs_base < r->area + r->area_size)
			attach_target__clear_gs_base(c->t, tids[i]);
	}
	if (r->rings_size)
		cc__syscall(c, SYS_munmap, (const uint64_t[6]){ r->rings, r->rings_size }, &ret);
	close_left_fds(c);
}

/* What a killed padrone's function left, as its record names it (copied:
 * the record goes after), and whether no other function shares the area. */
struct left {
	struct cc_dir_redir r;
	bool last;
};

static int release_left(struct cc_cache *c, void *arg)
{
	struct left *l = arg;
	int rc;

	if (!c->t)
		return 0;
	if ((rc = attach_target__stop(c->t)) < 0)
		return cc__fail(c, CC_PHASE_RESTORE, rc, "cannot stop process %d: %s", c->pid,
				attach_target__errmsg(c->t));
	forget_left(c, &l->r, l->last);
	attach_target__resume(c->t);
	return 0;
}

/* Once the record is forgotten: the area, if no other record names it. */
static void free_left_area(struct cc_cache *c, void *arg)
{
	struct left *l = arg;

	if (c->t && l->last && l->r.area_size)
		cc_cache__free(c, l->r.area, l->r.area_size);
}

/* The gs_base and rings go before the record does (release_left), the
 * area after it, as in cc_cache__uninstrument; a copy still busy keeps all
 * of it, record included, for the next restore. */
int cc__instr_undo_left(struct cc_cache *c, struct cc_dir_redir *r,
			const struct cc_patch_opts *opts, const struct cc_undo_stub *stub)
{
	struct cc_patch_stats st = { 0 };
	struct cc_patch_opts o = { .sz = sizeof o };
	struct left l = { .r = *r, .last = r->area_size && !area_shared(c, r) };
	struct cc_undo_stub back = { 0 };

	if (opts)
		memcpy(&o, opts, opts->sz < sizeof o ? opts->sz : sizeof o);
	if (stub)
		back = *stub;
	back.release = release_left;
	back.release_arg = &l;
	back.forgotten = free_left_area;
	back.keep_busy = true;
	struct cc_patch_stats *user = o.stats;
	o.stats = &st;
	int rc = cc__undo(c, r->id, &o, &back);
	if (user)
		*user = st;
	return rc;
}

/* Row i's owner, in every installed function's block of the row. */
static void set_owner(struct cc_instr *in, size_t i, uint64_t fs)
{
	struct area *a = in->area;

	a->owner[i] = fs;
	for (unsigned k = 0; k < IS_SECTIONS; k++)
		if (atomic_load(&a->member[k]))
			attach_target__write(in->t, a->addr + i * IS_ROW + k * IS_SIZE + IS_OWNER,
					     &fs, sizeof fs);
}

/* A row no live thread has, for every function of the area: the new
 * thread's units follow the last ones of the thread that had it before, if
 * any. */
int cc_instr__thread_new(struct cc_instr *in, pid_t tid)
{
	struct area *a = in->area;

	if (!in->installed || in->removed)
		return 0;
	for (size_t i = 0; i < a->nrows; i++) {
		if (!a->free[i])
			continue;
		set_owner(in, i, fs_base_of(in->t, tid));
		int rc = attach_target__set_gs_base(in->t, tid, a->addr + i * IS_ROW);
		if (rc < 0)
			return rc;
		a->free[i] = false;
		__atomic_store_n(&a->tid[i], tid, __ATOMIC_RELEASE);
		for (unsigned k = 0; k < IS_SECTIONS; k++) {
			struct cc_instr *m = atomic_load(&a->member[k]);
			if (m)
				__atomic_store_n(&m->rings[i].tid, tid, __ATOMIC_RELEASE);
		}
		return 0;
	}
	return cc_instr__fork_child(in, tid);
}

/* (At its exit event the thread runs no more user code: it is out of any
 * unit, its last one visible.) Any function of the area does it for all;
 * again is harmless. */
void cc_instr__thread_exit(struct cc_instr *in, pid_t tid)
{
	struct area *a = in->area;

	for (size_t i = 0; a && i < a->nrows; i++)
		if (!a->free[i] && __atomic_load_n(&a->tid[i], __ATOMIC_ACQUIRE) == tid)
			a->free[i] = true;
}

int cc_instr__fork_child(struct cc_instr *in, pid_t tid)
{
	if (!in->installed || in->removed)
		return 0;
	return attach_target__set_gs_base(in->t, tid, in->area->addr + in->area->nrows * IS_ROW);
}
void cc_instr__function(const struct cc_instr *in, uint64_t *addr, uint64_t *size)
{
	*addr = in->fn.addr;
	*size = in->fn.size;
}

bool cc_instr__active(const struct cc_instr *in)
{
	return in->installed && !in->removed;
}

size_t cc_instr__thread_count(const struct cc_instr *in) { return in->nrings; }

struct cab_ring *cc_instr__ring(const struct cc_instr *in, size_t i, pid_t *tid)
{
	if (i >= in->nrings)
		return NULL;
	if (tid)
		*tid = __atomic_load_n(&in->rings[i].tid, __ATOMIC_ACQUIRE);
	return in->rings[i].r;
}

const struct rep_table *cc_instr__table(const struct cc_instr *in) { return in->table; }

void cc_instr__copy(const struct cc_instr *in, uint64_t *addr, uint64_t *size)
{
	*addr = in->code;
	*size = in->code_size;
}

void cc_instr__free(struct cc_instr *in)
{
	if (!in)
		return;
	for (size_t i = 0; i < in->nrings; i++)
		cab_ring__close(in->rings[i].r);
	free(in->rings);
	if (in->area && --in->area->refs == 0) {
		free(in->area->owner);
		free(in->area->tid);
		free(in->area->free);
		free(in->area);
	}
	for (size_t i = 0; i < in->nunits; i++)
		rep_built__free(&in->units[i].b);
	free(in->units);
	free(in->insns);
	free(in->insn_at);
	free(in->insn_off);
	free(in->unit_start);
	rep_table__free(in->table);
	cfg_function__free(in->cfg);
	free(in);
}
