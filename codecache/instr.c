/* instr.c: instrumenting a live function (issue 10): the install, which
 * plans (instr-plan.c), emits (instr-emit.c), gives the threads their state
 * area (instr-area.c) and moves threads into the copy; the copy's accessors.
 * Undoing is instr-undo.c.
 *
 * Instrumented copies of live functions: every block of the
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
 * Repeat units: a unit that loops on itself alone (a loop of one block), all
 * of whose slots are written from their registers at the commit, writes the
 * slots whose registers it never changes (an array's base, a loop bound in
 * memory's pointer) or changes only by constant steps (its index: add $1,
 * lea 8(%rdi),%rdi) once per run of the loop: run again right after itself,
 * it writes a repeat unit (REP_S_REPEAT) with the other slots only, and
 * recovery takes the rest from the unit before, which is its own, plus the
 * steps of one run (the table's, rep.h). The copy
 * knows that from IS_LAST: every commit of a copy that has such a unit
 * writes there its id (such a unit, when it writes itself whole) or 0, so a
 * handler's run of the copy in between, or any other unit, sends the next
 * run of the loop to a whole unit; so does a ring's word that is not CLEAR,
 * so every chunk begins with whole units and recovery can start at any. The
 * loop's exit must be a unit of the copy (its commit comes before anything
 * else can run) and the loop not the entry (the gate commits nothing). The
 * test, the read and the move of the pointer are one restartable range. On
 * the streaming kernel this made recording 30% cheaper (2.1-2.3x of native
 * against 2.8-3.2x).
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
 * unit is lost to its placement or half written, and the target's
 * registers are never touched. With padrone gone nobody moves threads back: a handler
 * run inside a reservation writes where the interrupted unit then writes
 * too (no longer read by anyone), and the pointer ends at most a unit past
 * the CLEAR word the interrupted commit read, which the guards
 * (IS_GUARD_WORDS) keep inside the junk area or the chunk.
 *
 * Switching (issue 11): the original's entry jumps to the copy's gate,
 * `jmp *%gs:IS_GATE`, which goes on to the entry unit (on) or to the
 * detour, the original's displaced first bytes and then the original (off).
 * The two landings share all but their low byte, so cc_instr__switch
 * writes one byte per row, with no stop and no thread moved: a call under
 * way finishes the way it began, so units come from whole calls. Off, a
 * call pays four jumps and the gate's count (about 1.3 ns: 5% of a 21 ns
 * call); a stop-the-world entry flip (the other way) would
 * cost nothing while off but a pause of every thread per switch, and
 * moving the threads inside (instr-move.c) each time.
 *
 * A handler that runs instrumented code between a unit's captures and its
 * commit overwrites the slots of the interrupted unit (the target's
 * registers are not touched). That is detected, not prevented: a unit
 * keeping slots in the block sets the section's intact byte
 * (IS_INTACT) at its first capture, and its commit, once the slots are in
 * the record, reads and clears it; a handler's unit with slots clears it
 * too, so the interrupted commit finds it clear and writes its header
 * with REP_S_SPOILED, which recovery drops and counts (never the handler's
 * addresses under the interrupted unit's block). Cost: two byte stores, a
 * load and a jrcxz per unit keeping slots (instr-emit.c, emit_header).
 *
 * Known limits (refused or documented): a unit a handler spoiled is lost
 * (its block's events are not counted); threads
 * already inside the function are moved into
 * the copy and back out (instr-move.c); a jump table's jmp through a
 * register is re-pointed at the copy (instr-jt.c), one through memory is
 * refused; a thread cloned later gets a spare ring (one an exited thread
 * freed) or the sink, a forked child the sink. Functions instrumented at
 * once share the threads' state area (struct area): at most IS_SECTIONS,
 * with the rows (threads and spares) the first one made.
 */
#include "codecache/instr.h"
#include "cfg/cfg.h"
#include "pipeline/cab.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* For tests only (tests/codecache/instrument-torn.sh): with
 * PADRONE_TEST_KILL_AT=N in its environment, padrone SIGKILLs itself at
 * the N-th of these points of an install, as a kill from outside landing
 * just there would, so that each window between two changes of the target
 * is tried deterministically. */
void cc__instr_test_kill_point(struct cc_instr *in, const char *what)
{
	const char *env = getenv("PADRONE_TEST_KILL_AT");

	(void)what;	/* names the point for the reader */
	if (env && strtoul(env, NULL, 10) == ++in->kill_points)
		kill(getpid(), SIGKILL);
}

/* For tests only (check_instr): with PADRONE_TEST_SWAP_RINGS_FD in its
 * environment, padrone closes the target's fd of the rings' memfd between
 * the install's two stops and makes another memfd, which takes the lowest
 * free number, that one: as a target closing files and opening others
 * meanwhile could. */
static void test_swap_rings_fd(struct cc_instr *in)
{
	const uint64_t close_args[6] = { (uint64_t)in->rings_fd };
	const uint64_t make_args[6] = { in->area->addr + (in->area->nrows + 1) * IS_ROW,
					MFD_CLOEXEC };
	int64_t ret;

	if (!getenv("PADRONE_TEST_SWAP_RINGS_FD"))
		return;
	cc__syscall(in->c, SYS_close, close_args, &ret);
	cc__syscall(in->c, SYS_memfd_create, make_args, &ret);
}

/* ------------------------------------------------------------ threads */

void cc__instr_copy_map(const struct cc_instr *in, struct ci_map *m)
{
	*m = (struct ci_map){ .func = in->fn.addr, .size = in->fn.size, .code = in->code,
			      .units_end = in->stub_off, .insns = in->insns, .n = in->ninsns,
			      .at = in->insn_at, .insn = in->insn_off,
			      .unit_start = in->unit_start, .enters = in->enters };
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

	cc__instr_copy_map(in, &m);
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

	cc__instr_copy_map(in, &m);
	for (size_t i = 0; i < n; i++) {
		bool did;
		move_thread(in, &m, moved[i], true, &did);
	}
}

/* Each unit's reservation as two restartable ranges, both restarting at
 * the read of the pointer: from it to the slow path's call of the stub
 * (included: the stub reads the pointer again), and the fast path's move. A
 * handler then never runs inside a reservation while padrone is attached;
 * the stub blocks signals itself. */
int cc__instr_restart_ranges(struct cc_instr *in)
{
	struct attach_restart *r = calloc(3 * in->nunits + 1, sizeof *r);
	size_t n = 0;
	int rc;

	if (!r)
		return cc__fail(in->c, CC_PHASE_REDIRECT, -ENOMEM, "out of memory");
	for (size_t i = 0; i < in->nunits; i++) {
		const struct unit *u = &in->units[i];
		uint64_t restart = in->code + u->read_at;
		r[n++] = (struct attach_restart){ restart, in->code + u->stub_ret, restart };
		r[n++] = (struct attach_restart){ in->code + u->fast_at, in->code + u->fast_end,
						  restart };
		if (u->carried)
			r[n++] = (struct attach_restart){ in->code + u->repeat_at,
							  in->code + u->repeat_end,
							  in->code + u->repeat_at };
	}
	rc = attach_target__restart_add(in->c->t, r, n);
	free(r);
	if (rc < 0)
		return cc__fail(in->c, CC_PHASE_REDIRECT, rc, "%s",
				attach_target__errmsg(in->c->t));
	in->restartable = true;
	return 0;
}

/* Once no thread can run the copy (or it failed to go in). */
void cc__instr_forget_restart_ranges(struct cc_instr *in)
{
	if (!in->restartable)
		return;
	attach_target__restart_remove(in->c->t, in->code, in->code + in->code_size);
	in->restartable = false;
}

/* The threads now (world stopped), at most CI_MAX_THREADS. */
static int list_threads(struct cc_instr *in, pid_t *tids)
{
	int n = attach_target__threads(in->c->t, tids, CI_MAX_THREADS);

	if (n < 0)
		return cc__fail(in->c, CC_PHASE_REDIRECT, n, "cannot list the threads of process %d",
				in->c->pid);
	if (n > (int)CI_MAX_THREADS)
		return cc__fail(in->c, CC_PHASE_REDIRECT, -E2BIG, "process %d has %d threads; "
				"instrumentation handles at most %u", in->c->pid, n, CI_MAX_THREADS);
	return n;
}

/* Every thread's gs free (a new area) or in the area joined. */
static int check_gs(struct cc_instr *in, bool fresh, const pid_t *tids, size_t n)
{
	return fresh ? cc__instr_check_gs(in, tids, n) : cc__instr_check_joined(in, tids, n);
}

/* The cache blocks the directory's record owns, and where the entry goes. */
static size_t owned_blocks(const struct cc_instr *in, struct cc_dir_block owned[2], uint64_t *dest)
{
	owned[0] = (struct cc_dir_block){ in->code, in->code_size, CC_CODE, 0 };
	owned[1] = (struct cc_dir_block){ in->detour, in->detour_size, CC_CODE, 0 };
	*dest = in->code + in->gate_off;	/* on or off, as the threads' gate says */
	return in->detour ? 2 : 1;
}

/* An install takes two stops of the world, and between them the rings
 * are made with the target running (12 rings cost a stop of 10 ms when
 * made inside it; a stop now costs about 1 ms).
 *
 * The first (prepare): the checks, the code, the area and the rings'
 * (empty) range, recorded in the directory, then the rings' memfd, so that
 * a padrone killed at any point leaves either nothing in the target but
 * free cache blocks, or a record a later session's restore undoes whole
 * (cc__instr_undo_left). No thread can reach any of it yet. */
static int prepare(struct cc_instr *in, struct cc_job *j)
{
	pid_t tids[CI_MAX_THREADS];
	int n = list_threads(in, tids), rc;
	bool fresh = !in->area;	/* else joining (its section taken) */
	uint64_t detour = 0, dest;
	size_t dsize = 0;
	struct cc_dir_block owned[2];

	if (n < 0 || (rc = check_gs(in, fresh, tids, (size_t)n)) < 0 ||
	    (rc = cc__job_place_detour(j, &detour, &dsize)) < 0)
		return n < 0 ? n : rc;
	in->detour = detour;	/* before the code: the gate's off landing goes there */
	in->detour_size = dsize;
	if ((rc = cc__instr_place_code(in)) < 0 || (rc = cc__instr_restart_ranges(in)) < 0 ||
	    (fresh && (rc = cc__instr_new_area(in, (size_t)n)) < 0) ||
	    (rc = cc__instr_reserve_rings(in)) < 0)
		return rc;
	cc__instr_test_kill_point(in, "code, area and the rings' range made");
	/* the area is freed with the last function, not with this one; the
	 * record names it, and the rings' range, for a later session */
	size_t nowned = owned_blocks(in, owned, &dest);
	cc__job_set_instr(j, in->area->addr, in->area->size, in->rings_at, in->rings_size);
	if ((rc = cc__job_record(j, dest, detour, owned, nowned, cc__instr_block_of(in, 0))) < 0)
		return rc;
	cc__instr_test_kill_point(in, "recorded");
	if ((rc = cc__instr_open_rings(in)) == 0)
		cc__instr_test_kill_point(in, "the rings' memfd made");
	return rc;
}

/* The threads inside, their rows and gs_base, the entry: all or nothing. */
static int install_threads(struct cc_instr *in, struct cc_job *j, bool fresh, const pid_t *tids,
			   size_t n)
{
	pid_t moved[CI_MAX_THREADS];
	size_t nmoved = 0;
	struct cc_dir_block owned[2];
	uint64_t dest;
	size_t nowned = owned_blocks(in, owned, &dest);
	int rc = 0;

	if (fresh && cc__instr_take_rows(in, tids, n) < n)
		cc__job_say(j, "%zu thread%s born since the state area was made have no ring: "
			    "their units are not recorded", n - in->area->nrows,
			    n - in->area->nrows == 1 ? "" : "s");
	if ((rc = cc__instr_write_owners(in)) == 0 && fresh)
		rc = cc__instr_set_gs(in, tids, n);
	if (rc == 0) {
		cc__instr_test_kill_point(in, "gs_base set");
		rc = move_threads_in(in, tids, n, moved, &nmoved);
	}
	if (rc == 0) {
		cc__instr_test_kill_point(in, "threads moved in");
		rc = cc__job_apply(j, dest, in->detour, owned, nowned, cc__instr_block_of(in, 0), NULL);
	}
	if (rc < 0) {
		move_threads_back(in, moved, nmoved);
		if (fresh)
			cc__instr_reset_gs(in->c, in->area);
		return rc;
	}
	if (nmoved) {
		cc__job_add_moved(j, (unsigned)nmoved);
		cc__job_say(j, "moved %zu thread%s inside %s into its instrumented copy", nmoved,
			    nmoved == 1 ? "" : "s", in->name);
	}
	return 0;
}

/* The second stop (install): the rings mapped, then the threads' rows and
 * gs_base, the threads inside moved in and the entry written. */
static int install(struct cc_instr *in, struct cc_job *j)
{
	pid_t tids[CI_MAX_THREADS];
	int n = list_threads(in, tids), rc;
	bool fresh = !in->o.share;	/* the area made by prepare, not joined */

	if (n < 0 || (rc = check_gs(in, fresh, tids, (size_t)n)) < 0)
		return n < 0 ? n : rc;
	if ((rc = cc__instr_map_rings(in)) < 0)
		return rc;
	cc__instr_test_kill_point(in, "the rings mapped");
	if ((rc = install_threads(in, j, fresh, tids, (size_t)n)) < 0)
		return rc;
	in->installed = true;
	atomic_store(&in->area->member[in->section], in);
	for (size_t i = 0; i < in->nrings; i++)	/* rows given while it was made */
		__atomic_store_n(&in->rings[i].tid, __atomic_load_n(&in->area->tid[i], __ATOMIC_ACQUIRE),
				 __ATOMIC_RELEASE);
	if (in->o.publish)
		atomic_store(in->o.publish, in);
	cc__instr_test_kill_point(in, "installed");
	return 0;
}

/* Each stop runs on the tracer thread, where the ptrace requests of the
 * many steps inside it go without a round trip to another thread (and at
 * its real-time priority). */
struct stopped {
	struct cc_instr *in;
	struct cc_job *j;
	int (*fn)(struct cc_instr *, struct cc_job *);
	uint64_t *pause_ns;	/* the stop's, whole, if not inside another */
	bool ran;
};

static int run_stopped(struct attach_target *t, void *arg)
{
	struct stopped *s = arg;
	bool outer = !attach_target__is_stopped(t);
	int rc = attach_target__stop(t);

	s->ran = true;
	if (rc < 0)
		return cc__fail(s->in->c, CC_PHASE_REDIRECT, rc, "cannot stop process %d: %s",
				s->in->c->pid, attach_target__errmsg(t));
	rc = s->fn(s->in, s->j);
	if (attach_target__resume(t) == 0 && outer) {
		struct attach_pause_stats ps;
		attach_target__pause_stats(t, &ps);
		*s->pause_ns = ps.last_ns;
	}
	return rc;
}

static int in_one_stop(struct cc_instr *in, struct cc_job *j,
		       int (*fn)(struct cc_instr *, struct cc_job *), uint64_t *pause_ns)
{
	struct stopped s = { in, j, fn, pause_ns, false };
	int rc = attach_target__call(in->c->t, run_stopped, &s);

	if (rc < 0 && !s.ran)	/* padrone no longer attached */
		return cc__fail(in->c, CC_PHASE_REDIRECT, rc, "%s", attach_target__errmsg(in->c->t));
	return rc;
}

/* A failed install undone (gs_base already reset): the rings out of the
 * target, then its record, then the cache blocks the record names (a
 * padrone killed on the way leaves the record, or free blocks only). */
static void undo_alloc(struct cc_instr *in, struct cc_job *j)
{
	cc__instr_unmap_rings(in);
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
	in->rings_fd = in->rings_file = -1;
	in->o = (struct cc_instr_opts){ .sz = sizeof in->o };
	if (opts)
		memcpy(&in->o, opts, opts->sz < sizeof in->o ? opts->sz : sizeof in->o);
	in->sampling = in->o.sampling;
	in->fn = *fn;
	snprintf(in->name, sizeof in->name, "%s", name);
	in->fn.name = in->name;
	if ((in->o.share && (rc = cc__instr_join_area(in, in->o.share)) < 0) || (rc = cc__instr_build_plan(in)) < 0)
		goto err;
	char source[160];
	snprintf(source, sizeof source, "instrumented copy (padrone %d)", (int)getpid());
	struct cc_patch_opts po = { .sz = sizeof po, .timeout_ms = in->o.timeout_ms, .force = true,
				    .report = in->o.report, .report_size = in->o.report_size,
				    .source = source, .stats = in->o.stats };
	if ((rc = cc__job_new(c, &in->fn, CC_REDIR_REPLACE, &po, &j)) < 0)
		goto err;
	uint64_t prepare_ns = 0, install_ns = 0;
	if ((rc = in_one_stop(in, j, prepare, &prepare_ns)) < 0 ||
	    (rc = cc__instr_make_rings(in)) < 0)
		goto err;
	cc__instr_test_kill_point(in, "rings and state blocks written");
	test_swap_rings_fd(in);
	if ((rc = in_one_stop(in, j, install, &install_ns)) < 0)
		goto err;
	cc__job_free(j);	/* (its stats: the entry's write) */
	if (in->o.stats) {
		in->o.stats->prepare_ns = prepare_ns;
		in->o.stats->install_ns = install_ns;
	}
	*out = in;
	return 0;
err:
	cc__instr_forget_restart_ranges(in);	/* no thread runs the copy */
	undo_alloc(in, j);
	cc__job_free(j);
	cc_instr__free(in);
	return rc;
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

void cc_instr__off_path(const struct cc_instr *in, uint64_t gate[2], uint64_t detour[2])
{
	gate[0] = in->code + in->gate_off;
	gate[1] = CI_GATE_SIZE;
	detour[0] = in->detour;
	detour[1] = in->detour ? in->detour_size : 0;
}

void cc_instr__free(struct cc_instr *in)
{
	if (!in)
		return;
	if (in->rings_file >= 0)
		close(in->rings_file);
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
	free(in->enters);
	rep_table__free(in->table);
	cfg_function__free(in->cfg);
	free(in);
}
