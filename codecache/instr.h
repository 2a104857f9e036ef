/* instr.h: what codecache/'s instrumentation files share. */
#ifndef PADRONE_CODECACHE_INSTR_H
#define PADRONE_CODECACHE_INSTR_H

#include "codecache/instr-state.h"
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
	/* reg += step is all it does to the registers but rflags (add or sub
	 * of an immediate, inc, dec, lea reg,[reg + d] on a 64-bit register
	 * other than rsp), or step_reg REP_REG_NONE */
	uint8_t step_reg;
	int32_t step;
	/* the status flags (CF PF AF ZF SF OF): it tests one, or it sets all
	 * six without testing any (what the gate's call count needs to know) */
	bool tests_flags, sets_flags;
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
	const bool *enters;	/* per instruction: cc_instr.enters */
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
 * NULL if unknown); a thread inside such a jump's bytes is moved out.
 * (None can be: a unit's first bytes are one instruction, instr-emit.c
 * pads with a nop one that begins shorter, and so no signal handler ever
 * returns into the middle of such a jump either.) */
#define CC_UNLINK_JMP 5
int ci_unlink(struct cc_cache *c, const struct ci_map *m, const struct cc_reloc *prefix,
	      uint64_t detour);

/* The rest is what instr.c, instr-plan.c, instr-emit.c, instr-area.c and
 * instr-undo.c share: the copy being made or undone and its helpers. */
#define CI_MAX_THREADS 256u

_Static_assert((IS_SIZE - IS_JUNK_END) / 8 == IS_GUARD_WORDS, "the junk area's guard");

/* A unit: instructions [first, first + n) of the function's list. */
struct unit {
	uint32_t first, n;
	uint32_t id;
	bool block_end;		/* the last one ends a CFG block */
	struct rep_built b;
	/* slots the commit writes straight from their register, which nothing
	 * between the capture point and the commit changes but by known steps
	 * (no capture, no reload, and nothing a signal handler can spoil): the
	 * slot is the register less direct_step (0 when the references using
	 * the slot take the steps off their displacements instead) */
	uint64_t direct;
	uint8_t direct_reg[IS_MAX_SLOTS + 1];
	int32_t direct_step[IS_MAX_SLOTS + 1];
	/* a loop of this one unit whose slots from nslots - carried on hold
	 * registers the loop never writes but by constant steps: run again
	 * right after itself, it writes a repeat unit without them
	 * (instr-emit.c, emit_repeat; their steps are in the table) */
	uint16_t carried;
	uint64_t off;		/* in the copy */
	/* its commit's reservation, restartable (a signal's handler must not
	 * run between reading the pointer and moving it past the record): the
	 * read, the slow path's call of the stub (its return not included),
	 * the fast path's move, all offsets in the copy; a repeat unit's,
	 * from the test of the last unit written to its move */
	uint64_t read_at, stub_ret, fast_at, fast_end;
	uint64_t repeat_at, repeat_end;
	uint64_t commit_end;	/* where the commit's frame is taken down */
	uint64_t full_off;	/* a repeat unit's whole record (emit_full) */
};

struct ring {
	pid_t tid;		/* writing it now, or last (atomic: read by consumers) */
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
	pid_t own_pid;			/* the target's own pid (IS_OWNER_PID) */
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
	bool *enters;		/* per instruction: a thread there in the original
				 * may go straight to its place in the copy
				 * (insn_at): no capture its unit keeps in the
				 * block comes before it, so the unit's commit
				 * writes the unit whole and right */
	struct unit *units;
	size_t nunits;
	bool repeats;		/* a unit has carried slots: every commit keeps
				 * IS_LAST */
	struct rep_table *table;
	uint64_t code, code_size, stub_off;
	uint64_t gate_off;		/* the gate (instr-emit.c): the entry jumps there */
	bool counts_calls;		/* the gate counts calls (IS_CALLS) */
	bool off;			/* its gate sends threads to the original */
	struct area *area;		/* NULL until it has one */
	unsigned section;		/* its blocks in each row of the area */
	struct ring *rings;		/* one per row of the area */
	size_t nrings;
	uint64_t rings_at, rings_size;	/* the range reserved for them in the target */
	uint64_t detour, detour_size;	/* the entry's relocated first bytes */
	uint64_t ring_stride;		/* ring i is at rings_at + i * ring_stride, and at
					 * i * ring_stride of their one memfd */
	int rings_fd;			/* the memfd's fd in the target, while open there */
	bool rings_fd_open;
	int rings_file;			/* padrone's own fd of it (-1: none) */
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

/* instr.c */
/* For tests only: SIGKILL padrone at the N-th point (PADRONE_TEST_KILL_AT). */
void cc__instr_test_kill_point(struct cc_instr *in, const char *what);
void cc__instr_copy_map(const struct cc_instr *in, struct ci_map *m);
int cc__instr_restart_ranges(struct cc_instr *in);
void cc__instr_forget_restart_ranges(struct cc_instr *in);
/* instr-plan.c */
int cc__instr_build_plan(struct cc_instr *in);
/* The unit starting at pc, or NULL. */
const struct unit *cc__instr_unit_at(const struct cc_instr *in, uint64_t pc);
/* instr-emit.c */
int cc__instr_place_code(struct cc_instr *in);
/* The gate's landings, from its start: on (the units), off (the detour). */
#define CI_GATE_ON 24
#define CI_GATE_OFF 32
#define CI_GATE_SIZE (CI_GATE_OFF + 5)	/* the off landing's jmp rel32 ends it */
uint64_t cc__instr_gate(const struct cc_instr *in, bool on);
bool cc__instr_transfers(const struct ci_insn *ci);
/* instr-area.c */
int cc__instr_check_gs(struct cc_instr *in, const pid_t *tids, size_t n);
int cc__instr_check_joined(struct cc_instr *in, const pid_t *tids, size_t n);
int cc__instr_new_area(struct cc_instr *in, size_t nlive);
size_t cc__instr_take_rows(struct cc_instr *in, const pid_t *tids, size_t nlive);
int cc__instr_join_area(struct cc_instr *in, const struct cc_instr *share);
int cc__instr_reserve_rings(struct cc_instr *in);
int cc__instr_open_rings(struct cc_instr *in);
int cc__instr_make_rings(struct cc_instr *in);
int cc__instr_map_rings(struct cc_instr *in);
int cc__instr_write_owners(struct cc_instr *in);
void cc__instr_unmap_rings(struct cc_instr *in);
int cc__instr_set_gs(struct cc_instr *in, const pid_t *tids, size_t nlive);
void cc__instr_reset_gs(struct cc_cache *c, const struct area *a);
uint64_t cc__instr_block_of(const struct cc_instr *in, size_t i);

#endif
