/* Threads already inside a function when its instrumented copy goes in,
 * and inside the copy when it comes out (issue 10).
 *
 * A thread stopped in the original (a loop that never returns, or just a
 * call in progress) would otherwise finish there, unrecorded, for as long
 * as it stays. It is moved at the stop that installs the copy, to the copy
 * of its very instruction when no capture its unit keeps in the state
 * block comes before that instruction (cc_instr.enters): the unit's commit
 * then writes it whole and right, its other slots taken from registers the
 * original changed only as the copy would have. Past such a capture,
 * entering would leave a stale slot (the unit written as spoiled, lost): the
 * thread is first single-stepped in the original to where its next unit
 * begins, a few steps. Stepping costs the stop about 60 us a step (and the
 * first arms the step guard), against nothing for a move: 8 threads in
 * axpy's loop took 1.3 ms of the install's stop when all were stepped.
 * System calls are never stepped (one may block): a thread in one, or
 * about to make one mid-unit, is moved to the copy of its very
 * instruction, and only that first unit may be partial.
 *
 * Taking the copy out, it is first unlinked: the first bytes of every unit
 * become a jump to the original instruction the unit begins with, so a
 * thread anywhere in the copy (in a commit, in the ring stub waiting for the
 * consumer, in a callee that returns into it) writes its current unit whole
 * and leaves at the next one; nothing is lost and no thread waits for a
 * lucky stop. The entry unit jumps to the detour (the relocated first
 * bytes) instead, as the original's first bytes still jump to the copy
 * until the restore. A thread stopped strictly inside a unit's first 5
 * bytes is stepped to the next point where the copy holds exactly the
 * original's registers (where an instruction's capture code begins, or the
 * relocated instruction itself: never inside a commit, which has pushed
 * registers and moved rsp below the red zone) and moved to that original
 * instruction, as the grace period's looks do with any thread found at
 * such a point. (None is: instr-emit.c makes a unit's first bytes one
 * instruction, which matters most for the thread no step can move, one
 * in a signal handler, which goes back to the pc saved in its signal
 * frame.)
 */
#include "codecache/instr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A commit copies up to 63 slots, two instructions each. */
#define MAX_STEPS 512

static long insn_index(const struct ci_map *m, uint64_t pc)
{
	if (pc < m->func || pc >= m->func + m->size)
		return -1;
	for (size_t i = 0; i < m->n; i++)
		if (m->insns[i].pc == pc)
			return (long)i;
	return -1;
}

/* The instruction whose capture code or relocated copy begins at off. */
static long clean_index(const struct ci_map *m, uint64_t off)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->at[i] == off || m->insn[i] == off)
			return (long)i;
	return -1;
}

static bool makes_syscall(const struct ci_insn *ci)
{
	const uint8_t *b = ci->bytes;

	return ci->len >= 2 && ((b[0] == 0x0f && (b[1] == 0x05 || b[1] == 0x34)) ||
				(b[0] == 0xcd && b[1] == 0x80));
}

static bool in_syscall(const struct user_regs_struct *r)
{
	return (long)r->orig_rax >= 0;
}

/* Will the kernel run the system call again, 2 bytes before the pc? */
static bool restarts(const struct user_regs_struct *r)
{
	long ax = (long)r->rax;

	return in_syscall(r) && (ax == -512 || ax == -513 || ax == -514 || ax == -516);
}

static int step(struct attach_target *t, pid_t tid, struct user_regs_struct *regs)
{
	int rc = attach_target__step(t, tid);

	return rc < 0 ? rc : attach_target__get_regs(t, tid, regs);
}

int ci_move_in(struct attach_target *t, const struct ci_map *m, pid_t tid,
	       struct user_regs_struct *regs, bool *moved)
{
	long i;
	int rc;

	*moved = false;
	if (restarts(regs)) {
		if ((i = insn_index(m, regs->rip - 2)) >= 0) {
			regs->rip = m->code + m->insn[i] + 2;
			*moved = true;
		}
		return 0;
	}
	if ((i = insn_index(m, regs->rip)) < 0)
		return 0;
	for (int s = 0; !m->enters[i] && !in_syscall(regs) && !makes_syscall(&m->insns[i]); s++) {
		if (s == MAX_STEPS)
			return 0;	/* a loop inside one unit: cannot be */
		if ((rc = step(t, tid, regs)) < 0)
			return rc;
		if ((i = insn_index(m, regs->rip)) < 0)
			return 0;	/* it left the function (a call, a ret) */
	}
	regs->rip = m->code + m->at[i];
	*moved = true;
	return 0;
}

int ci_move_out(struct attach_target *t, const struct ci_map *m, pid_t tid,
		struct user_regs_struct *regs, bool *moved)
{
	long i;
	int rc;

	*moved = false;
	if (restarts(regs)) {
		uint64_t off = regs->rip - 2 - m->code;
		for (size_t k = 0; k < m->n; k++)
			if (regs->rip - 2 >= m->code && m->insn[k] == off) {
				regs->rip = m->insns[k].pc + 2;
				*moved = true;
				return 0;
			}
	}
	for (int s = 0; s < MAX_STEPS; s++) {
		if (regs->rip < m->code || regs->rip >= m->code + m->units_end)
			return 0;	/* out (or in the stub: later) */
		if ((i = clean_index(m, regs->rip - m->code)) >= 0) {
			regs->rip = m->insns[i].pc;
			*moved = true;
			return 0;
		}
		if (in_syscall(regs))
			return 0;
		if ((rc = step(t, tid, regs)) < 0)
			return rc;
	}
	return 0;
}

/* Where a thread leaving the copy at instruction i goes: the original, or
 * for the function's first bytes (the jump to the copy until the restore),
 * their relocated copy. */
static int exit_of(const struct ci_map *m, size_t i, const struct cc_reloc *prefix,
		   uint64_t detour, uint64_t *to)
{
	uint64_t pc = m->insns[i].pc;
	size_t off;

	*to = pc;
	if (pc >= m->func + CC_UNLINK_JMP)
		return 0;
	if (!prefix || pc >= m->func + cc_reloc__src_len(prefix) || cc_reloc__map(prefix, pc, &off) < 0)
		return -ENOENT;
	*to = detour + off;
	return 0;
}

/* Is a thread at pc strictly inside the first bytes of a unit? */
static bool in_window(const struct ci_map *m, uint64_t pc)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->unit_start[i] && pc > m->code + m->at[i] && pc < m->code + m->at[i] + CC_UNLINK_JMP)
			return true;
	return false;
}

/* World stopped: threads strictly inside a unit's first bytes moved out. */
static int clear_windows(struct cc_cache *c, const struct ci_map *m)
{
	struct attach_target *t = c->t;
	pid_t tids[1024];
	int n = attach_target__threads(t, tids, 1024), rc;

	if (n < 0 || n > 1024)
		return cc__fail(c, CC_PHASE_RESTORE, n < 0 ? n : -E2BIG, "cannot list the threads "
				"of process %d", c->pid);
	for (int k = 0; k < n; k++) {
		struct user_regs_struct regs;
		bool moved = false;
		if ((rc = attach_target__get_regs(t, tids[k], &regs)) < 0)
			return cc__fail(c, CC_PHASE_RESTORE, rc, "cannot read the registers of thread "
					"%d", tids[k]);
		if (!in_window(m, regs.rip))
			continue;
		if ((rc = ci_move_out(t, m, tids[k], &regs, &moved)) < 0 ||
		    (moved && (rc = attach_target__set_regs(t, tids[k], &regs)) < 0))
			return cc__fail(c, CC_PHASE_RESTORE, rc, "cannot move thread %d out of the "
					"instrumented copy", tids[k]);
		if (in_window(m, regs.rip))
			return cc__fail(c, CC_PHASE_RESTORE, -EBUSY, "thread %d is stopped at 0x%"
					PRIx64 " in the instrumented copy and cannot be moved",
					tids[k], (uint64_t)regs.rip);
	}
	return 0;
}

/* The units' jumps go in with one read and one write of the whole copy
 * (the world is stopped: nothing else changes it meanwhile), not one
 * /proc/PID/mem write per unit: each costs microseconds inside the pause. */
int ci_unlink(struct cc_cache *c, const struct ci_map *m, const struct cc_reloc *prefix,
	      uint64_t detour)
{
	uint8_t *buf = malloc(m->units_end ? m->units_end : 1);
	int rc;

	if (!buf)
		return cc__fail(c, CC_PHASE_RESTORE, -ENOMEM, "out of memory");
	if ((rc = clear_windows(c, m)) < 0)
		goto out;
	if ((rc = cc__read(c, m->code, buf, m->units_end)) < 0) {
		cc__fail(c, CC_PHASE_RESTORE, rc, "cannot read the instrumented copy at 0x%" PRIx64
			 ": %s", m->code, strerror(-rc));
		goto out;
	}
	for (size_t i = 0; i < m->n; i++) {
		uint64_t at = m->code + m->at[i], to;
		if (!m->unit_start[i] || exit_of(m, i, prefix, detour, &to) < 0)
			continue;	/* (the entry without its detour: left at the next unit) */
		if ((rc = cc_encode_jmp(at, to, buf + m->at[i])) < 0) {
			cc__fail(c, CC_PHASE_RESTORE, rc, "cannot unlink the instrumented copy at 0x%"
				 PRIx64 ": no jump reaches 0x%" PRIx64, at, to);
			goto out;
		}
	}
	rc = cc_cache__write(c, m->code, buf, m->units_end);
out:
	free(buf);
	return rc;
}
