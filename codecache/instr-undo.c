/* instr-undo.c: taking instrumented copies out (issue 10; the design is
 * told in instr.c): the original's entry put back, threads moved out of the
 * copy, the function's section and rings released, the area torn down with
 * the last one, and the copies another padrone left in the target undone. */
#include "codecache/instr.h"
#include "pipeline/cab.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
		cc__instr_reset_gs(r->c, r->in->area);
	cc__instr_unmap_rings(r->in);
	if ((rc = attach_target__resume(t)) == 0 && outer) {
		struct attach_pause_stats ps;
		attach_target__pause_stats(t, &ps);
		r->pause_ns = ps.last_ns;
	}
	return rc;
}

/* Past the grace period no thread can reach the rings: their producers
 * end, and once a consumer has drained its ring, the ring's pages go back
 * to the kernel while the target runs. The munmap inside the release's
 * stop then has no page to take out of the target's page tables (for 8
 * rings of 1 MiB, about 1 ms of that stop). A ring without a consumer, or
 * not drained within DRAIN_WAIT_MS, is left whole for the munmap. */
#define DRAIN_WAIT_MS 200u

static void free_ring_pages(struct cc_instr *in)
{
	uint64_t deadline = util_now_ns() + DRAIN_WAIT_MS * 1000000ull;

	for (size_t i = 0; i < in->nrings; i++)
		cab_ring__end_producer(in->rings[i].r);
	for (;;) {
		size_t draining = 0;
		for (size_t i = 0; i < in->nrings; i++) {
			struct cab_ring *r = in->rings[i].r;
			if (cab_ring__release_data(r) == -EBUSY && cab_ring__has_consumer(r))
				draining++;
		}
		if (!draining || util_now_ns() > deadline)
			return;
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
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
	free_ring_pages(in);
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
	cc__instr_forget_restart_ranges(in);
	cc__instr_test_kill_point(in, "released, its record not yet forgotten");
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

/* A thread waiting in the copy's ring stub for its consumer to free a
 * chunk: it leaves the copy only once the consumer has. */
static bool waits_for_consumer(struct cc_cache *c, void *arg, pid_t tid)
{
	const struct cc_instr *in = arg;

	(void)c;
	for (size_t i = 0; i < in->nrings; i++)
		if (__atomic_load_n(&in->rings[i].tid, __ATOMIC_ACQUIRE) == tid)
			return cab_ring__producer_waiting(in->rings[i].r);
	return false;
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
	cc__instr_copy_map(in, &u.m);
	struct cc_undo_stub back = { .prefix = prefix, .copy = prefix ? r->detour : 0,
				      .release = release_state, .release_arg = in,
				      .forgotten = free_area, .keep_busy = true,
				      .stopped = unlink_copy, .stopped_arg = &u,
				      .held = waits_for_consumer };
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
	cc__instr_forget_restart_ranges(in);
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
			cc_cache__write(c, cc__instr_block_of(in, i) + IS_QUIT, &one, sizeof one);
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
	pid_t tids[CI_MAX_THREADS];
	int nt = last ? attach_target__threads(c->t, tids, CI_MAX_THREADS) : 0;
	int64_t ret;

	for (int i = 0; i < nt && i < (int)CI_MAX_THREADS; i++) {
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

/* Nobody consumes a left copy's rings: its threads drop from now on,
 * never wait in the stub for a consumer's timeout (which would keep them
 * in the copy past the restore's grace period). In every row, the record's
 * section only. */
static void quit_left(struct cc_cache *c, const struct cc_dir_redir *r)
{
	const uint64_t one = 1;

	if (!r->area_size || r->state < r->area || r->state - r->area >= IS_ROW)
		return;
	for (uint64_t row = r->area; row + IS_ROW <= r->area + r->area_size; row += IS_ROW)
		cc__write(c, row + (r->state - r->area) + IS_QUIT, &one, sizeof one);
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
	if (!o.dry_run)
		quit_left(c, r);
	struct cc_patch_stats *user = o.stats;
	o.stats = &st;
	int rc = cc__undo(c, r->id, &o, &back);
	if (user)
		*user = st;
	return rc;
}
