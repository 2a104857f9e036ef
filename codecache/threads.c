/* The threads of a stopped target, against the code about to change.
 *
 * For each thread: a PC strictly inside the bytes to patch is moved to the
 * matching instruction of their relocated copy (or, when undoing, from the
 * copy back to the original; a thread inside a measuring stub is
 * single-stepped out of it); a return address inside them (possible only
 * when they hold a call) is reported as a hard obstacle. Each thread is also
 * marked busy when its PC, or any return address on its stack, is in the
 * busy ranges (the function, or the code to free). Stacks are walked by
 * profile/'s unwinder, as far as unwind information goes; where a walk ends
 * before the outermost frame (code without unwind information: a code
 * cache, JIT code, hand-written assembly; a module whose tables cannot be
 * read), the rest of that stack, from the last frame's stack pointer to the
 * end of its mapping, is scanned conservatively: every word that points
 * into the bytes to patch or the code to free counts as a return address.
 *
 * Two more places hold where a thread goes next. A thread stopped in a
 * system call that the kernel restarts when it resumes (rax -ERESTARTSYS,
 * -ERESTARTNOINTR, -ERESTARTNOHAND, -ERESTART_RESTARTBLOCK, as
 * arch_do_signal_or_restart reads them) re-executes the 2-byte syscall
 * before its pc: its pc may be just past the patched bytes while its
 * syscall is inside them; it is moved by where it restarts. A thread in a
 * signal handler returns to the pc saved in the signal frame (there the
 * kernel has already rewound a restarted call): when the process catches
 * any signal and some thread's stack holds a word inside the patched bytes
 * (a raw read of each stack, a few microseconds), every stack is walked,
 * through signal frames, and such a pc is moved by rewriting it in the
 * frame. (The walk costs tens of microseconds a thread in the pause, which
 * doubled the pause of a patch before the raw read kept it to the rare
 * stacks that need it. Undoing does not walk for it: such a
 * pc in the copy keeps the copy, as the grace period's walk sees it, until
 * it has left.)
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"

#include "profile/profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES 512
/* A stack walked only in part is scanned up to this far above its last
 * frame; deeper, what is beyond cannot be ruled out. */
#define STACK_SCAN_MAX (8u << 20)

static bool in(const struct cc_range *r, size_t n, uint64_t a)
{
	for (size_t i = 0; i < n; i++)
		if (a >= r[i].lo && a < r[i].hi)
			return true;
	return false;
}

static bool strictly_in(const struct cc_range *r, uint64_t a)
{
	return a > r->lo && a < r->hi;
}

void cc__tcheck_free(struct cc_tcheck *k)
{
	free(k->tids);
	free(k->busy_of);
	free(k->scan_from);
	free(k->moves);
	free(k->pokes);
	k->tids = NULL;
	k->busy_of = NULL;
	k->scan_from = NULL;
	k->moves = NULL;
	k->pokes = NULL;
	k->cap = k->poke_cap = 0;
}

/* Is the pc at which a thread goes on inside the bytes to change? Patching,
 * the first byte is where the jump starts, fine to be at; undoing, anywhere
 * in the copy goes back to the original. */
static bool must_move(const struct cc_tcheck *k, uint64_t pc)
{
	return k->reloc && (k->back ? in(&k->crit, 1, pc) : strictly_in(&k->crit, pc));
}

static int move_pc(const struct cc_tcheck *k, uint64_t pc, uint64_t *to)
{
	size_t off;
	uint64_t orig;

	if (!k->back) {
		if (cc_reloc__map(k->reloc, pc, &off) < 0)
			return -ENOENT;
		*to = k->copy + off;
		return 0;
	}
	if (cc_reloc__unmap(k->reloc, pc - k->copy, &orig) < 0)
		return -ENOENT;
	*to = orig;
	return 0;
}

static void mark_busy(struct cc_tcheck *k, size_t i, int frame, uint64_t ip)
{
	if (k->busy_of[i])
		return;
	k->busy_of[i] = true;
	if (k->nbusy_threads++)
		return;
	if (frame < 0)
		snprintf(k->busy_why, sizeof k->busy_why, "thread %d may have %s on its stack (a "
			 "return address 0x%" PRIx64 " found by scanning it)", k->tids[i],
			 k->busy_what, ip);
	else if (frame == 0)
		snprintf(k->busy_why, sizeof k->busy_why, "thread %d is executing %s (pc 0x%" PRIx64
			 ")", k->tids[i], k->busy_what, ip);
	else
		snprintf(k->busy_why, sizeof k->busy_why, "thread %d has %s on its stack (frame #%d, "
			 "return address 0x%" PRIx64 ")", k->tids[i], k->busy_what, frame, ip);
}

static void look_at_return(struct cc_tcheck *k, size_t i, int frame, uint64_t ip)
{
	if (k->crit_returns && !k->hard && strictly_in(&k->crit, ip)) {
		k->hard = true;
		snprintf(k->hard_why, sizeof k->hard_why, "thread %d would return to 0x%" PRIx64
			 " (%s), inside the bytes to patch", k->tids[i], ip,
			 frame < 0 ? "found by scanning its stack" : "a frame of its stack");
	}
	/* scanning, a word may as well be a pc saved in a signal frame that
	 * the unwinder did not reach */
	if (frame < 0 && k->sig && !k->hard && must_move(k, ip)) {
		k->hard = true;
		snprintf(k->hard_why, sizeof k->hard_why, "thread %d may resume at 0x%" PRIx64
			 " when a signal handler returns (found by scanning its stack), inside "
			 "the bytes to %s", k->tids[i], ip, k->back ? "take out" : "patch");
	}
	if (in(k->busy, k->nbusy, ip - 1))
		mark_busy(k, i, frame, ip);
}

static int add_poke(struct cc_tcheck *k, uint64_t addr, uint64_t value, uint64_t old)
{
	if (cc__grow(&k->pokes, &k->poke_cap, k->npokes + 1, sizeof *k->pokes, 8) < 0)
		return -ENOMEM;
	k->pokes[k->npokes++] = (struct cc_poke){ addr, value, old };
	return 0;
}

/* The pc a signal handler returns to, saved at pc_at in its signal frame:
 * inside the bytes to change, it is moved by rewriting it there, checked to
 * hold it. */
static void look_at_interrupted(struct cc_tcheck *k, size_t i, int frame, uint64_t pc,
				uint64_t pc_at)
{
	if (must_move(k, pc) && !k->hard) {
		uint64_t to, saved = 0;
		if (move_pc(k, pc, &to) < 0 || !pc_at ||
		    attach_target__read(k->c->t, pc_at, &saved, 8) != 8 || saved != pc ||
		    add_poke(k, pc_at, to, pc) < 0) {
			k->hard = true;
			snprintf(k->hard_why, sizeof k->hard_why, "thread %d resumes at 0x%" PRIx64
				 " when its signal handler returns, inside the bytes to %s, and its "
				 "signal frame cannot be rewritten", k->tids[i], pc,
				 k->back ? "take out" : "patch");
		}
	}
	if (in(k->busy, k->nbusy, pc))
		mark_busy(k, i, frame, pc);
}

static bool ignored(const struct cc_tcheck *k, pid_t tid)
{
	for (size_t i = 0; i < k->nignore; i++)
		if (k->ignore[i] == tid)
			return true;
	return false;
}

/* Does thread i need its stack walked? */
static bool wants_walk(const struct cc_tcheck *k, size_t i)
{
	if (ignored(k, k->tids[i]))
		return false;
	return k->crit_returns || (k->sig && k->reloc) || (k->frames && k->nbusy && !k->busy_of[i]);
}

void cc__unwinder_free(struct cc_cache *c)
{
	prof_unwinder__free(c->uw);
	c->uw = NULL;
	free(c->frames);
	c->frames = NULL;
}

/* Thread i's stack, as far as its unwind information goes; from where it
 * ends, scanned (scan_from: that frame's sp, 1 for the thread's own). */
static void walk_one(struct cc_tcheck *k, size_t i)
{
	struct prof_walk_frame *f = k->c->frames;
	struct prof_walk_stop stop;
	size_t n = prof_unwinder__walk(k->c->uw, k->tids[i], f, MAX_FRAMES, &stop);

	for (size_t j = 1; j < n; j++)
		if (f[j].interrupted)
			look_at_interrupted(k, i, (int)j, f[j].pc, f[j].pc_at);
		else
			look_at_return(k, i, (int)j, f[j].pc);
	if (stop.why == PROF_WALK_COMPLETE)
		k->scan_from[i] = 0;
	else
		k->scan_from[i] = n && stop.sp ? stop.sp : 1;
}

/* With the world stopped (on attach/'s tracer thread: no hand-over per
 * register read). The unwinder is kept from one stop to the next: what it
 * learnt of the code stays valid until its mappings change. */
static int walk_all(struct attach_target *t, void *arg)
{
	struct cc_tcheck *k = arg;
	struct cc_cache *c = k->c;
	struct prof_error err;
	int rc;

	if (!c->uw && (rc = prof_unwinder__new(t, &c->uw, &err)) < 0)
		return rc;
	if (!c->frames && !(c->frames = calloc(MAX_FRAMES, sizeof *c->frames)))
		return -ENOMEM;
	if ((rc = prof_unwinder__sync(c->uw)) < 0)
		return rc;
	for (size_t i = 0; i < k->n; i++)
		if (wants_walk(k, i))
			walk_one(k, i);
	return 0;
}

/* Part of a stack cannot be looked at: whatever it is looked at for
 * cannot be ruled out there. */
static void unsure(struct cc_tcheck *k, size_t i, uint64_t from)
{
	if ((k->crit_returns || k->sig) && !k->hard) {
		k->hard = true;
		snprintf(k->hard_why, sizeof k->hard_why, "thread %d's stack could not be walked to "
			 "its end, and is deeper than %u MiB above 0x%" PRIx64 ": a return into the "
			 "bytes to patch cannot be ruled out", k->tids[i], STACK_SCAN_MAX >> 20, from);
	}
	if (k->frames && k->nbusy && !k->busy_of[i] && !k->nbusy_threads++)
		snprintf(k->busy_why, sizeof k->busy_why, "thread %d may have %s on its stack (it "
			 "could not be walked to its end, and is deeper than %u MiB)", k->tids[i],
			 k->busy_what, STACK_SCAN_MAX >> 20);
	if (k->frames && k->nbusy)
		k->busy_of[i] = true;
}

static int scan_stack(struct cc_tcheck *k, size_t i, uint64_t sp)
{
	struct attach_maps *m;
	int rc = attach_maps__read(k->c->pid, &m);

	if (rc < 0)
		return rc;
	const struct attach_map *mp = attach_maps__find(m, sp);
	uint64_t end = mp ? mp->end : sp;
	attach_maps__free(m);
	if (end - sp > STACK_SCAN_MAX) {
		unsure(k, i, sp);
		end = sp + STACK_SCAN_MAX;
	}
	size_t len = (size_t)(end - sp) & ~7UL;
	if (!len)
		return 0;
	uint64_t *w = malloc(len);
	if (!w)
		return -ENOMEM;
	ssize_t got = attach_target__read(k->c->t, sp, w, len);
	for (size_t j = 0; got > 0 && j < (size_t)got / 8; j++)
		look_at_return(k, i, -1, w[j]);
	free(w);
	return 0;
}

static int grow(struct cc_tcheck *k, size_t n)
{
	if (n <= k->cap)
		return 0;
	size_t cap = n + 16;
	pid_t *t = realloc(k->tids, cap * sizeof *t);
	if (t)
		k->tids = t;
	bool *b = realloc(k->busy_of, cap * sizeof *b);
	if (b)
		k->busy_of = b;
	uint64_t *s = realloc(k->scan_from, cap * sizeof *s);
	if (s)
		k->scan_from = s;
	struct cc_move *m = realloc(k->moves, cap * sizeof *m);
	if (m)
		k->moves = m;
	if (!t || !b || !s || !m)
		return -ENOMEM;
	k->cap = cap;
	return 0;
}

static int step_out(struct cc_tcheck *k, pid_t tid, struct user_regs_struct *regs)
{
	for (int i = 0; i < 100000; i++) {
		if (!in(&k->step_out, 1, regs->rip))
			return 0;
		int rc = attach_target__step(k->c->t, tid);
		if (rc < 0 || (rc = attach_target__get_regs(k->c->t, tid, regs)) < 0)
			return rc;
	}
	return -ETIMEDOUT;
}

/* Will the kernel restart the system call the thread is stopped in, 2
 * bytes before its pc, when it resumes? */
static bool restarts(const struct user_regs_struct *r)
{
	long ax = (long)r->rax;

	return (long)r->orig_rax >= 0 && (ax == -512 || ax == -513 || ax == -514 || ax == -516);
}

/* A thread's PC: stepped out of a stub, moved out of the patched bytes. */
static int place_thread(struct cc_tcheck *k, size_t i)
{
	struct attach_target *t = k->c->t;
	struct user_regs_struct regs;
	pid_t tid = k->tids[i];
	bool moved = false;
	uint64_t to;
	int rc;

	if ((rc = attach_target__get_regs(t, tid, &regs)) < 0)
		return rc;
	if (k->step_out.hi && in(&k->step_out, 1, regs.rip)) {
		if (step_out(k, tid, &regs) < 0) {
			k->hard = true;
			snprintf(k->hard_why, sizeof k->hard_why, "thread %d could not be stepped out "
				 "of 0x%" PRIx64 "-0x%" PRIx64, tid, k->step_out.lo, k->step_out.hi);
			return 0;
		}
		moved = true;
	}
	uint64_t pc = regs.rip;
	if (restarts(&regs) && must_move(k, pc - 2)) {
		/* moved by its syscall, which it executes again */
		if (move_pc(k, pc - 2, &to) < 0) {
			k->hard = true;
			snprintf(k->hard_why, sizeof k->hard_why, "thread %d restarts a system call "
				 "at 0x%" PRIx64 ", inside the bytes to %s, and cannot be moved", tid,
				 pc - 2, k->back ? "take out" : "patch");
			return 0;
		}
		regs.rip = to + 2;
		moved = true;
	} else if (must_move(k, pc)) {
		if (move_pc(k, pc, &to) == 0) {
			regs.rip = to;
		} else if (!(k->back && attach_target__step(t, tid) == 0 &&
			     attach_target__get_regs(t, tid, &regs) == 0 &&
			     !in(&k->crit, 1, regs.rip))) {
			/* (the copy's trailing jmp back: one step leaves it) */
			k->hard = true;
			snprintf(k->hard_why, sizeof k->hard_why, "thread %d is stopped at 0x%" PRIx64
				 ", inside the bytes to patch, and cannot be moved", tid, pc);
			return 0;
		}
		moved = true;
	}
	if (moved)
		k->moves[k->nmoves++] = (struct cc_move){ tid, regs };
	if (!ignored(k, tid) && in(k->busy, k->nbusy, regs.rip))
		mark_busy(k, i, 0, regs.rip);
	return 0;
}

/* Has the process a handler for any signal (SigCgt of /proc/PID/status)?
 * Only then can a thread be inside one. Unreadable: assume so. */
static bool catches_signals(pid_t pid)
{
	char path[64], line[256];
	bool caught = true;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return true;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "SigCgt:", 7) == 0) {
			caught = strtoull(line + 7, NULL, 16) != 0;
			break;
		}
	fclose(f);
	return caught;
}

/* Does thread i's stack hold a word that a signal frame could resume at
 * inside the bytes to patch? A thread in a handler has its interrupted pc in
 * the signal frame above its stack pointer (on whichever stack the handler
 * runs), so a stack without such a word needs no walk for it. */
static int may_resume_inside(struct cc_tcheck *k, const struct attach_maps *m, size_t i,
			     uint64_t **buf, size_t *cap, bool *found)
{
	struct user_regs_struct regs;
	int rc = attach_target__get_regs(k->c->t, k->tids[i], &regs);

	if (rc < 0)
		return rc;
	uint64_t sp = regs.rsp & ~7ull;
	const struct attach_map *mp = attach_maps__find(m, sp);
	uint64_t end = mp ? mp->end : sp;
	size_t len = end - sp > STACK_SCAN_MAX ? STACK_SCAN_MAX : (size_t)(end - sp);
	if (len > *cap) {
		uint64_t *b = realloc(*buf, len);
		if (!b)
			return -ENOMEM;
		*buf = b;
		*cap = len;
	}
	ssize_t got = len ? attach_target__read(k->c->t, sp, *buf, len) : 0;
	if (got < 0) {		/* unreadable: walk it to be sure */
		*found = true;
		return 0;
	}
	for (size_t j = 0; j < (size_t)got / 8 && !*found; j++)
		*found = must_move(k, (*buf)[j]);
	return 0;
}

/* Walking every stack through signal frames costs tens of microseconds a
 * thread, inside the pause; a raw read of the stacks a few. Walk only when
 * some stack may hold an interrupted pc inside the bytes to patch. */
static int needs_signal_walk(struct cc_tcheck *k, bool *need)
{
	struct attach_maps *m;
	uint64_t *buf = NULL;
	size_t cap = 0;
	int rc = 0;

	*need = false;
	if (attach_maps__read(k->c->pid, &m) < 0) {
		*need = true;	/* maps unreadable: walk */
		return 0;
	}
	for (size_t i = 0; rc == 0 && i < k->n && !*need; i++)
		if (!ignored(k, k->tids[i]))
			rc = may_resume_inside(k, m, i, &buf, &cap, need);
	attach_maps__free(m);
	free(buf);
	return rc;
}

int cc__tcheck(struct cc_tcheck *k)
{
	struct attach_target *t = k->c->t;
	int rc, n;

	k->hard = false;
	k->hard_why[0] = k->busy_why[0] = '\0';
	k->nbusy_threads = 0;
	k->nmoves = 0;
	k->npokes = 0;
	/* patching only: when undoing, a pc waiting in a signal frame in the
	 * copy makes the grace period keep the copy until it has left */
	k->sig = k->reloc && !k->back && catches_signals(k->c->pid);
	for (;;) {
		n = attach_target__threads(t, k->tids, k->cap);
		if (n < 0)
			return n;
		if ((size_t)n <= k->cap)
			break;
		if ((rc = grow(k, (size_t)n)) < 0)
			return rc;
	}
	k->n = (size_t)n;
	bool walk = false;
	for (size_t i = 0; i < k->n; i++) {
		k->busy_of[i] = false;
		if ((rc = place_thread(k, i)) < 0)
			return rc;
		if (k->hard)
			return 0;
	}
	if (k->sig && (rc = needs_signal_walk(k, &k->sig)) < 0)
		return rc;
	for (size_t i = 0; i < k->n; i++)
		walk |= wants_walk(k, i);
	if (!walk)
		return 0;
	for (size_t i = 0; i < k->n; i++)
		k->scan_from[i] = 0;
	if ((rc = attach_target__call(t, walk_all, k)) < 0)
		return rc;
	for (size_t i = 0; i < k->n && !k->hard; i++) {
		uint64_t sp = k->scan_from[i];
		if (!sp)
			continue;
		if (sp == 1) {
			struct user_regs_struct regs;
			if ((rc = attach_target__get_regs(t, k->tids[i], &regs)) < 0)
				return rc;
			sp = regs.rsp;
		}
		if ((rc = scan_stack(k, i, sp)) < 0)
			return rc;
	}
	return 0;
}
