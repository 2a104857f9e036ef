/* Redirection of live code, and undoing it.
 *
 * A function is redirected by a 5-byte jmp rel32 at its entry (after an
 * endbr64, which stays) and/or by re-targeting the direct calls to it in
 * given callers. Planning happens with the world running: the displaced
 * instructions are relocated (the detour a thread caught inside them is
 * moved to), functions shorter than the jump or whose body branches into the
 * bytes it covers are refused, call sites are found. Then the world is
 * stopped, every thread looked at (threads.c), the bytes written, threads
 * moved, the world resumed; the pause is recorded. Undoing writes the
 * original bytes back and frees the owned code after a per-thread grace
 * period. In this process (no target) nothing is stopped.
 *
 * This file stops, applies and undoes; planning is patch-plan.c's, the
 * directory's records patch-dir.c's.
 */
#include "codecache/patch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ----------------------------------------------------------------- report */

void cc__say(struct report *r, const char *fmt, ...)
{
	va_list ap;

	if (!r->buf || r->len + 1 >= r->size)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(r->buf + r->len, r->size - r->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	r->len += (size_t)n;
	if (r->len >= r->size - 1)
		r->len = r->size - 1;
	else
		r->buf[r->len++] = '\n', r->buf[r->len] = '\0';
}

/* "moved N threads ...", those in a signal handler said apart. */
static void say_moves(struct report *r, const struct cc_tcheck *k, const char *where)
{
	size_t n = k->nmoves + k->npokes;

	if (!n)
		return;
	if (!k->npokes)
		cc__say(r, "moved %zu thread%s %s", n, n == 1 ? "" : "s", where);
	else
		cc__say(r, "moved %zu thread%s %s (%zu in a signal handler: %s rewritten)", n,
		    n == 1 ? "" : "s", where, k->npokes,
		    k->npokes == 1 ? "its signal frame" : "their signal frames");
}

/* ------------------------------------------------- stop, check, write */

static int timeout_of(const struct cc_job *j)
{
	return j->o.timeout_ms > 0 ? j->o.timeout_ms : 2000;
}

#define NAP_MAX_US 16000u

static void sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };
	nanosleep(&ts, NULL);
}

static void nap(unsigned *us)
{
	sleep_us(*us);
	if (*us < NAP_MAX_US)
		*us *= 2;
}

/* One try, run on attach/'s tracer thread (where every ptrace request of
 * it is a plain call, not a hand-over between threads): stop, look, write,
 * move threads, resume. */
struct attempt {
	struct cc_job *j;
	struct cc_tcheck *k;
	const struct write *w;
	size_t nw;
	const struct cc_undo_stub *stub;	/* undoing: its stopped hook */
	bool wait_busy;
	bool blocked;		/* out: a thread is in the way */
	int resume_rc;
	uint64_t pause_ns, to_stop_ns;
	char why[400];
};

static int attempt(struct attach_target *t, void *arg)
{
	struct attempt *a = arg;
	struct cc_job *j = a->j;
	struct cc_tcheck *k = a->k;
	uint64_t t0 = util_now_ns();
	int rc;

	a->why[0] = '\0';
	bool outer = !attach_target__is_stopped(t);
	if ((rc = attach_target__stop(t)) < 0) {
		snprintf(a->why, sizeof a->why, "cannot stop process %d: %s", j->c->pid,
			 attach_target__errmsg(t));
		return rc;
	}
	const struct cc_undo_stub *s = a->stub;
	if (s && s->stopped && !j->o.dry_run && (rc = s->stopped(j->c, s->stopped_arg)) < 0)
		snprintf(a->why, sizeof a->why, "%s", cc_cache__errmsg(j->c));
	else
		rc = cc__tcheck(k);
	a->blocked = rc == 0 && (k->hard || (a->wait_busy && k->nbusy_threads && !j->o.force));
	if (rc == 0 && !a->blocked && !j->o.dry_run) {
		size_t done = 0;
		for (; done < a->nw; done++)
			if ((rc = cc__write(j->c, a->w[done].addr, a->w[done].bytes, a->w[done].len)) < 0)
				break;
		if (rc < 0)
			snprintf(a->why, sizeof a->why, "cannot write %u bytes at 0x%" PRIx64 ": %s",
				 a->w[done].len, a->w[done].addr, strerror(-rc));
		/* the pcs waiting in signal frames, once the code they go to is
		 * in place */
		size_t poked = 0;
		for (; rc == 0 && poked < k->npokes; poked++)
			if ((rc = cc__write(j->c, k->pokes[poked].addr, &k->pokes[poked].value, 8)) < 0)
				snprintf(a->why, sizeof a->why, "cannot rewrite the signal frame at 0x%"
					 PRIx64 ": %s", k->pokes[poked].addr, strerror(-rc));
		if (rc < 0) {	/* all or nothing */
			for (size_t i = 0; i < poked; i++)
				cc__write(j->c, k->pokes[i].addr, &k->pokes[i].old, 8);
			for (size_t i = 0; i < done; i++)
				cc__write(j->c, a->w[i].addr, j->undo[i].bytes, j->undo[i].len);
		}
		for (size_t i = 0; rc == 0 && i < k->nmoves; i++)
			rc = attach_target__set_regs(t, k->moves[i].tid, &k->moves[i].regs);
	}
	a->resume_rc = attach_target__resume(t);
	a->pause_ns = util_now_ns() - t0;
	a->to_stop_ns = 0;
	if (outer && a->resume_rc == 0) {
		/* attach/'s own count, from the first interrupt to the last
		 * resume: the pause the target saw, the same figure as a bare
		 * stop and resume */
		struct attach_pause_stats ps;
		attach_target__pause_stats(t, &ps);
		a->pause_ns = ps.last_ns;
		a->to_stop_ns = ps.last_stop_ns;
	}
	return rc;
}

/* Stop the world, look at every thread, write, move threads, resume; when
 * a thread is in the way (a return address inside the bytes to patch; with
 * wait_busy, a thread in the busy ranges), resume and retry until the
 * timeout, then refuse with nothing written. An undo's stub may change
 * more in the same stop (its stopped hook, first). In this process nothing
 * is stopped or checked. */
static int stop_and_patch(struct cc_job *j, struct cc_tcheck *k, const struct write *w, size_t nw,
			  enum cc_phase phase, bool wait_busy, const struct cc_undo_stub *stub)
{
	struct cc_cache *c = j->c;
	struct attach_target *t = c->t;
	uint64_t deadline = util_now_ns() + (uint64_t)timeout_of(j) * 1000000u;
	struct attempt a = { .j = j, .k = k, .w = w, .nw = nw, .stub = stub,
			     .wait_busy = wait_busy };
	unsigned us = 500;
	int rc;

	if (!t) {
		if (stub && stub->stopped && !j->o.dry_run && (rc = stub->stopped(c, stub->stopped_arg)) < 0)
			return rc;
		for (size_t i = 0; i < nw && !j->o.dry_run; i++)
			if ((rc = cc__write(c, w[i].addr, w[i].bytes, w[i].len)) < 0)
				return cc__fail(c, phase, rc, "cannot write %u bytes at 0x%" PRIx64 ": %s",
						w[i].len, w[i].addr, strerror(-rc));
		j->stats.sites = j->o.dry_run ? 0 : (unsigned)nw;
		return 0;
	}
	for (;;) {
		rc = attach_target__call(t, attempt, &a);
		j->stats.threads = (unsigned)k->n;
		if (rc < 0)
			return cc__fail(c, phase, rc, "%s", a.why[0] ? a.why : strerror(-rc));
		if (!a.blocked) {
			j->stats.stop_ns = a.pause_ns;
			j->stats.to_stop_ns = a.to_stop_ns;
			j->stats.moved = (unsigned)(k->nmoves + k->npokes);
			j->stats.sites = j->o.dry_run ? 0 : (unsigned)nw;
			if (a.resume_rc < 0)
				return cc__fail(c, phase, a.resume_rc, "patched, but could not resume "
						"process %d: %s", c->pid, attach_target__errmsg(t));
			return 0;
		}
		const char *reason = k->hard ? k->hard_why : k->busy_why;
		if (j->o.dry_run) {
			cc__say(&j->rep, "would wait (up to %d ms) because %s%s", timeout_of(j), reason,
			    k->hard ? "" : "; force would go ahead");
			j->would_wait = true;
			return 0;
		}
		if (util_now_ns() > deadline)
			return cc__fail(c, phase, -EBUSY, "%s: gave up after %d ms (%u tries): %s%s",
					j->name, timeout_of(j), j->stats.retries + 1, reason,
					k->hard ? "" : "; force goes ahead (that thread finishes in the "
					"code it is in)");
		j->stats.retries++;
		nap(&us);
	}
}

/* One look for the grace period, on the tracer thread; its pause is
 * counted in the job's stats. */
struct look {
	struct cc_tcheck *k;
	struct cc_patch_stats *stats;
};

static int look(struct attach_target *t, void *arg)
{
	struct look *l = arg;
	bool outer = !attach_target__is_stopped(t);
	int rc = attach_target__stop(t);

	if (rc < 0)
		return rc;
	rc = cc__tcheck(l->k);
	int rrc = attach_target__resume(t);
	if (outer && rrc == 0) {
		struct attach_pause_stats ps;
		attach_target__pause_stats(t, &ps);
		l->stats->looks++;
		if (ps.last_ns > l->stats->look_max_ns)
			l->stats->look_max_ns = ps.last_ns;
	}
	return rc < 0 ? rc : rrc;
}

/* A thread the last look of the grace period found in the busy code: its
 * time on a CPU then, and whether it has had a CPU since. */
struct busy_thread {
	pid_t tid;
	uint64_t run_ns;
	bool ran;
};

#define RAN_POLL_US 500u

/* Its time on a CPU; false when nothing tells (gone, or a kernel without
 * schedstats, which shows 0). */
static bool run_ns_of(pid_t pid, pid_t tid, uint64_t *ns)
{
	return attach_thread_sched_ns(pid, tid, ns, NULL) == 0 && *ns;
}

static bool has_run(pid_t pid, struct busy_thread *b)
{
	uint64_t now;

	if (!b->ran)
		b->ran = !run_ns_of(pid, b->tid, &now) || now != b->run_ns;
	return b->ran;
}

/* Whether the code's owner knows the thread cannot leave before something
 * outside the target happens (an instrumented copy's thread waiting in its
 * ring stub for padrone's consumer): a look would find it where it was. */
static bool held(struct cc_cache *c, const struct cc_undo_stub *stub, pid_t tid)
{
	return stub && stub->held && stub->held(c, stub->release_arg, tid);
}

/* Between two looks, stopping nothing. A thread leaves the busy code by
 * running, and with more busy threads than CPUs a preempted one waits
 * milliseconds for its turn: a look before it has had one stops the world
 * for nothing (8 threads in axpy on 2 CPUs: 8 stops an uninstrument). So
 * the nap lasts until every thread the last look found busy has been on a
 * CPU since (the scheduler's count of its time there) and none is held;
 * at most NAP_MAX_US once none is held (one that does not run: asleep in a
 * call out of the code), at most the deadline while one is (producers
 * waiting for consumers that simulate caches, through padroned: 7-14 stops
 * an uninstrument when each was looked at as its consumer let it go, 4 in
 * sample mode, where none waits); and never less than the nap's own time,
 * which grows from look to look. */
static void nap_until_ran(struct cc_cache *c, const struct cc_undo_stub *stub,
			  struct busy_thread *b, size_t n, unsigned *us, uint64_t deadline)
{
	uint64_t t0 = util_now_ns();
	uint64_t least = t0 + (uint64_t)*us * 1000u, most = t0 + NAP_MAX_US * 1000ull;

	for (;;) {
		bool all = true, any_held = false;
		for (size_t i = 0; i < n; i++) {
			bool h = held(c, stub, b[i].tid);
			all &= has_run(c->pid, &b[i]) && !h;
			any_held |= h;
		}
		uint64_t now = util_now_ns();
		if ((all && now >= least) || (now >= most && !any_held) || now >= deadline)
			break;
		uint64_t until = all ? least : most > now ? most : deadline;
		sleep_us(until - now < RAN_POLL_US * 1000ull ? (unsigned)((until - now) / 1000) + 1
							     : RAN_POLL_US);
	}
	if (*us < NAP_MAX_US)
		*us *= 2;
}

/* After an undo: wait until every thread has been seen once with no PC and
 * no frame in the busy ranges (no thread can enter them any more, so once
 * out is out for good), then they may be freed. -EBUSY when the timeout
 * passes first. */
static int grace(struct cc_job *j, struct cc_tcheck *k, const struct cc_undo_stub *stub)
{
	struct attach_target *t = j->c->t;
	uint64_t deadline = util_now_ns() + (uint64_t)timeout_of(j) * 1000000u;
	pid_t *clear = NULL;
	struct busy_thread *busy = NULL;
	size_t nclear = 0;
	unsigned us = 200;
	int rc;

	if (!t)
		return 0;
	k->frames = true;
	k->reloc = NULL;
	k->step_out = (struct cc_range){ 0, 0 };
	k->crit_returns = false;
	struct look l = { k, &j->stats };
	for (;;) {
		k->ignore = clear;
		k->nignore = nclear;
		if ((rc = attach_target__call(t, look, &l)) < 0)
			break;
		pid_t *more = realloc(clear, (nclear + k->n) * sizeof *clear);
		if (!more) {
			rc = -ENOMEM;
			break;
		}
		clear = more;
		struct busy_thread *bmore = realloc(busy, (k->n ? k->n : 1) * sizeof *busy);
		if (!bmore) {
			rc = -ENOMEM;
			break;
		}
		busy = bmore;
		size_t pending = 0;
		for (size_t i = 0; i < k->n; i++) {
			bool known = false;
			for (size_t q = 0; q < nclear && !known; q++)
				known = clear[q] == k->tids[i];
			if (known)
				continue;
			if (k->busy_of[i])
				busy[pending++] = (struct busy_thread){ .tid = k->tids[i] };
			else
				clear[nclear++] = k->tids[i];
		}
		if (!pending) {
			rc = 0;
			break;
		}
		if (util_now_ns() > deadline) {
			rc = -EBUSY;
			break;
		}
		for (size_t i = 0; i < pending; i++)	/* unknown: the nap's own time decides */
			busy[i].ran = !run_ns_of(j->c->pid, busy[i].tid, &busy[i].run_ns);
		nap_until_ran(j->c, stub, busy, pending, &us, deadline);
	}
	k->ignore = NULL;
	free(clear);
	free(busy);
	return rc;
}

/* ---------------------------------------------------------------- apply */

/* Whether any of the writes is in the target (a failure after the write,
 * such as a failed resume, leaves it there). */
static bool sites_written(struct cc_cache *c, const struct write *w, size_t nw)
{
	uint8_t cur[CC_SITE_MAX];

	for (size_t i = 0; i < nw; i++)
		if (cc__read(c, w[i].addr, cur, w[i].len) < 0 || memcmp(cur, w[i].bytes, w[i].len) == 0)
			return true;
	return false;
}

static int build_writes(struct cc_job *j, uint64_t dest, struct write **out, size_t *nw)
{
	struct cc_cache *c = j->c;
	size_t n = (j->entry ? 1 : 0) + j->ncalls;
	struct write *w = calloc(n ? n : 1, sizeof *w);
	int rc;

	free(j->undo);
	j->undo = calloc(n ? n : 1, sizeof *j->undo);
	if (!w || !j->undo) {
		free(w);
		return cc__fail(c, CC_PHASE_REDIRECT, -ENOMEM, "out of memory");
	}
	size_t k = 0;
	if (j->entry) {
		w[k].addr = j->undo[k].addr = j->site;
		w[k].len = j->undo[k].len = ENTRY_JMP;
		if ((rc = cc__read(c, j->site, j->undo[k].bytes, ENTRY_JMP)) < 0 ||
		    (rc = cc_encode_jmp(j->site, dest, w[k].bytes)) < 0) {
			free(w);
			return cc__fail(c, CC_PHASE_REDIRECT, rc, "%s: no 5-byte jump from 0x%" PRIx64
					" reaches 0x%" PRIx64, j->name, j->site, dest);
		}
		k++;
	}
	for (size_t i = 0; i < j->ncalls; i++, k++) {
		const struct write *cs = &j->calls[i];
		int64_t rel = (int64_t)(dest - (cs->addr + cs->len));
		j->undo[k] = *cs;
		w[k] = *cs;
		if (rel < INT32_MIN || rel > INT32_MAX) {
			free(w);
			return cc__fail(c, CC_PHASE_REDIRECT, -ERANGE, "the call at 0x%" PRIx64 " cannot "
					"reach 0x%" PRIx64 " with rel32", cs->addr, dest);
		}
		int32_t r32 = (int32_t)rel;
		memcpy(w[k].bytes + cs->len - 4, &r32, 4);
	}
	*out = w;
	*nw = n;
	return 0;
}

/* The checks, the writes planned and, unless a dry run, the record. */
int cc__job_record(struct cc_job *j, uint64_t dest, uint64_t copy, const struct cc_dir_block *owned,
		   size_t nowned, uint64_t state)
{
	struct cc_cache *c = j->c;
	int rc;

	if (j->entry && cc__site_overlap(c, j->site, ENTRY_JMP) && !(j->kind == CC_REDIR_MEASURE &&
	    cc__redir_find(c, j->fn.addr, CC_REDIR_REPLACE)))
		return cc__fail(c, CC_PHASE_REDIRECT, -EALREADY, "the entry of %s is already patched",
				j->name);
	for (size_t i = 0; i < j->ncalls; i++)
		if (cc__site_overlap(c, j->calls[i].addr, j->calls[i].len))
			return cc__fail(c, CC_PHASE_REDIRECT, -EALREADY, "the call at 0x%" PRIx64 " is "
					"already patched", j->calls[i].addr);
	if (!cc__redir_by_id(c, 0) || cc__free_sites(c) < (j->entry ? 1 : 0) + j->ncalls)
		return cc__fail(c, CC_PHASE_REDIRECT, -ENOSPC, "the code cache's directory is full");
	free(j->w);
	j->w = NULL;
	if ((rc = build_writes(j, dest, &j->w, &j->nw)) < 0)
		return rc;
	/* recorded before the bytes are written: a padrone killed in between
	 * leaves a record that restore can act on, never a patch nobody knows */
	if (!j->o.dry_run && (rc = cc__redir_record(j, j->w, j->nw, dest, copy, owned, nowned,
						    state, &j->rid)) < 0) {
		cc__redir_forget(c, j->rid);
		j->rid = 0;
	}
	return rc;
}

void cc__job_unrecord(struct cc_job *j)
{
	if (!j->rid || sites_written(j->c, j->w, j->nw))
		return;
	cc__redir_forget(j->c, j->rid);
	cc__dir_save(j->c);
	j->rid = 0;
}

int cc__job_apply(struct cc_job *j, uint64_t dest, uint64_t copy, const struct cc_dir_block *owned,
		  size_t nowned, uint64_t state, uint32_t *id)
{
	struct cc_cache *c = j->c;
	struct cc_tcheck k = { .c = c };
	int rc;

	/* recorded by the caller: it takes the record out itself on failure,
	 * once what the record names is gone (cc__job_unrecord) */
	bool own_record = !j->w;
	if (own_record && (rc = cc__job_record(j, dest, copy, owned, nowned, state)) < 0)
		return rc;
	struct write *w = j->w;
	size_t nw = j->nw;
	uint32_t rid = j->rid;
	if (j->entry) {
		k.crit = (struct cc_range){ j->site, j->site + cc_reloc__src_len(j->prefix) };
		k.crit_returns = cc_reloc__has_inner_return(j->prefix);
		k.reloc = j->prefix;
		k.copy = copy;
	}
	/* threads in the function: looked at (frames too when asked to wait) */
	k.busy[k.nbusy++] = (struct cc_range){ j->fn.addr, j->fn.addr + j->fn.size };
	k.frames = j->o.wait;
	snprintf(k.busy_what, sizeof k.busy_what, "%s", j->name);
	for (size_t i = 0; i < nw; i++)
		cc__say(&j->rep, "%s %u bytes at 0x%" PRIx64 " to go to 0x%" PRIx64,
		    j->o.dry_run ? "would write" : "write", w[i].len, w[i].addr, dest);
	rc = stop_and_patch(j, &k, w, nw, CC_PHASE_REDIRECT, j->o.wait, NULL);
	/* a thread in the function: said once, as it was (or would be) */
	if (rc == 0 && k.nbusy_threads && !j->would_wait) {
		if (j->o.dry_run && j->o.wait)
			cc__say(&j->rep, "would wait (up to %d ms) because %s, then go ahead (forced): its "
			    "current call would finish in the original code", timeout_of(j), k.busy_why);
		else if (j->o.dry_run)
			cc__say(&j->rep, "%s: its current call would finish in the original code",
			    k.busy_why);
		else
			cc__say(&j->rep, "%s%s: its current call finishes in the original code", k.busy_why,
			    j->o.wait ? " (forced after waiting)" : "");
	}
	if (rc == 0 && !j->o.dry_run) {
		say_moves(&j->rep, &k, "out of the patched bytes");
		if (c->t)
			cc__say(&j->rep, "stopped the world for %.1f us (%u threads, %u retries)",
			    (double)j->stats.stop_ns / 1000.0, j->stats.threads, j->stats.retries);
		cc__redir_by_id(c, rid)->stop_ns = j->stats.stop_ns;
		rc = cc__dir_save(c);
		if (id)
			*id = rid;
	} else if (own_record && !j->o.dry_run && !sites_written(c, w, nw)) {
		cc__redir_forget(c, rid);
		cc__dir_save(c);
		j->rid = 0;
	}
	if (j->o.stats)
		*j->o.stats = j->stats;
	cc__tcheck_free(&k);
	return rc;
}

/* ----------------------------------------------------------------- undo */

/* Put the original bytes back (phase restore), then free the code it owned
 * once no thread is in it; a thread that stays past the timeout leaves the
 * code in the cache (reported, stats.kept_code), and with stub->keep_busy
 * the record too. Undoing a record whose bytes are back already (kept)
 * writes nothing: it waits and releases again. */
int cc__undo(struct cc_cache *c, uint32_t id, const struct cc_patch_opts *opts,
	     const struct cc_undo_stub *stub)
{
	struct cc_dir_redir *r = cc__redir_by_id(c, id);
	struct cc_tcheck k = { .c = c };
	struct cc_job j = { .c = c };
	struct write *w = NULL;
	size_t nw = 0;
	int rc;

	if (!r || !id)
		return cc__fail(c, CC_PHASE_RESTORE, -ENOENT, "no such redirection");
	j.o = (struct cc_patch_opts){ .sz = sizeof j.o };
	if (!UTIL_OPTS_COPY(&j.o, opts))
		return cc__fail(c, CC_PHASE_RESTORE, -EINVAL, UTIL_OPTS_UNKNOWN);
	j.rep = (struct report){ j.o.report, j.o.report_size, 0 };
	if (j.rep.buf && j.rep.size)
		j.rep.buf[0] = '\0';
	snprintf(j.name, sizeof j.name, "%s", r->name);
	for (size_t i = 0; i < CC_MAX_SITES; i++)
		nw += c->dir.sites[i].redir == id;
	w = calloc(nw ? nw : 1, sizeof *w);
	j.undo = calloc(nw ? nw : 1, sizeof *j.undo);
	if (!w || !j.undo) {
		rc = cc__fail(c, CC_PHASE_RESTORE, -ENOMEM, "out of memory");
		goto out;
	}
	nw = 0;
	for (size_t i = 0; i < CC_MAX_SITES; i++) {
		const struct cc_dir_site *s = &c->dir.sites[i];
		uint8_t cur[CC_SITE_MAX];
		if (s->redir != id)
			continue;
		if ((rc = cc__read(c, s->addr, cur, s->len)) < 0) {
			if (rc == -ESRCH)
				cc__fail(c, CC_PHASE_RESTORE, rc, "process %d has exited", c->pid);
			else
				cc__fail(c, CC_PHASE_RESTORE, rc, "cannot read 0x%" PRIx64 ": %s",
					 s->addr, strerror(-rc));
			goto out;
		}
		/* a padrone killed between its record and its write: nothing to put back */
		if (memcmp(cur, s->orig, s->len) == 0)
			continue;
		if (memcmp(cur, s->now, s->len) != 0) {
			rc = cc__fail(c, CC_PHASE_RESTORE, -ESTALE, "the code at 0x%" PRIx64 " (%s) "
				      "changed since padrone patched it; not touching it", s->addr,
				      r->name);
			goto out;
		}
		w[nw] = (struct write){ .addr = s->addr, .len = s->len };
		memcpy(w[nw].bytes, s->orig, s->len);
		j.undo[nw] = (struct write){ .addr = s->addr, .len = s->len };
		memcpy(j.undo[nw].bytes, s->now, s->len);
		nw++;
	}
	if (stub) {	/* out of the stub, out of its copy of the first bytes */
		k.step_out = (struct cc_range){ stub->lo, stub->hi };
		if (stub->prefix) {
			k.crit = (struct cc_range){ stub->copy, stub->copy + cc_reloc__size(stub->prefix) };
			k.reloc = stub->prefix;
			k.copy = stub->copy;
			k.back = true;
		}
	}
	for (size_t i = 0; i < nw; i++)
		cc__say(&j.rep, "%s the original %u bytes at 0x%" PRIx64, j.o.dry_run ? "would put back" :
		    "put back", w[i].len, w[i].addr);
	if ((rc = stop_and_patch(&j, &k, w, nw, CC_PHASE_RESTORE, false, stub)) < 0 || j.o.dry_run)
		goto out;
	say_moves(&j.rep, &k, "out of the code taken out");
	if (c->t)
		cc__say(&j.rep, "stopped the world for %.1f us (%u threads)",
		    (double)j.stats.stop_ns / 1000.0, j.stats.threads);
	/* the code it owned: freed once no thread is in it */
	k.nbusy = 0;
	for (size_t i = 0; i < r->nowned; i++)
		if (r->owned[i].kind == CC_CODE && k.nbusy < CC_MAX_OWNED + 2)
			k.busy[k.nbusy++] = (struct cc_range){ r->owned[i].addr,
							       r->owned[i].addr + r->owned[i].size };
	snprintf(k.busy_what, sizeof k.busy_what, "the code cache's code for %s", r->name);
	struct cc_dir_block owned[CC_MAX_OWNED];
	size_t nowned = 0;
	bool released = false;
	if ((rc = grace(&j, &k, stub)) == 0 && stub && stub->release &&
	    (rc = stub->release(c, stub->release_arg)) < 0)
		cc__say(&j.rep, "kept the code cache's code for %s: %s", r->name, cc_cache__errmsg(c));
	else if (rc < 0)
		cc__say(&j.rep, "kept the code cache's code for %s: after %d ms %s", r->name,
		    timeout_of(&j), k.busy_why[0] ? k.busy_why : "a thread was still in it");
	if (rc < 0) {
		j.stats.kept_code = true;
		rc = 0;
		if (stub && stub->keep_busy)	/* a later undo of it tries again */
			goto out;
	} else {
		released = true;
		nowned = r->nowned;
		memcpy(owned, r->owned, nowned * sizeof *owned);
	}
	cc__redir_forget(c, id);
	rc = cc__dir_save(c);
	if (rc == 0 && released && stub && stub->forgotten)
		stub->forgotten(c, stub->release_arg);
	/* freed once no record names them: a padrone killed in between leaks
	 * them, where freeing first would have a later restore free them again
	 * (and the cache hand the same bytes out twice) */
	for (size_t i = 0; rc == 0 && i < nowned; i++)
		cc_cache__free(c, owned[i].addr, owned[i].size);
out:
	if (j.o.stats)
		*j.o.stats = j.stats;
	free(w);
	free(j.undo);
	cc__tcheck_free(&k);
	return rc;
}

/* The detour: the relocated first bytes, where a thread caught inside them
 * is moved (phases allocate and write). */
int cc__job_place_detour(struct cc_job *j, uint64_t *copy, size_t *size)
{
	struct cc_cache *c = j->c;
	struct cc_error err;
	uint8_t buf[256];
	int rc;

	*copy = 0;
	*size = j->prefix ? cc_reloc__size(j->prefix) : 0;
	if (!*size)
		return 0;
	if (*size > sizeof buf)
		return cc__fail(c, CC_PHASE_REDIRECT, -E2BIG, "the relocated first bytes of %s are "
				"too large", j->name);
	if ((rc = cc_cache__alloc(c, CC_CODE, *size, 16, j->fn.addr, copy)) < 0)
		return rc;
	if ((rc = cc_reloc__encode(j->prefix, *copy, buf, sizeof buf, &err)) < 0)
		rc = cc__fail(c, CC_PHASE_REDIRECT, rc, "%s", err.msg);
	else
		rc = cc_cache__write(c, *copy, buf, *size);
	if (rc < 0) {
		cc_cache__free(c, *copy, *size);
		*copy = 0;
	}
	return rc;
}

void cc__job_set_stub_end(struct cc_job *j, uint64_t end)
{
	j->stub_end = end;
}

void cc__job_set_instr(struct cc_job *j, uint64_t area, uint64_t area_size, uint64_t rings,
		       uint64_t rings_size)
{
	j->area = area;
	j->area_size = area_size;
	j->rings = rings;
	j->rings_size = rings_size;
}

void cc__job_add_moved(struct cc_job *j, unsigned n)
{
	j->stats.moved += n;
}

void cc__job_say(struct cc_job *j, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	cc__say(&j->rep, "%s", line);
}
