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
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"
#include "cfg/cfg.h"

#include <Zydis/Zydis.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ENTRY_JMP 5

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ----------------------------------------------------------------- report */

struct report {
	char *buf;
	size_t size, len;
};

static void say(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct report *r, const char *fmt, ...)
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
		say(r, "moved %zu thread%s %s", n, n == 1 ? "" : "s", where);
	else
		say(r, "moved %zu thread%s %s (%zu in a signal handler: %s rewritten)", n,
		    n == 1 ? "" : "s", where, k->npokes,
		    k->npokes == 1 ? "its signal frame" : "their signal frames");
}

/* ----------------------------------------------------------------- job */

/* One redirection being planned and applied (or one being undone). */
struct cc_job {
	struct cc_cache *c;
	struct cc_func fn;
	char name[96];
	unsigned kind;			/* cc_redir_kind */
	struct cc_patch_opts o;
	struct report rep;
	struct cc_patch_stats stats;
	/* the entry jmp */
	bool entry;
	uint64_t site;			/* after endbr64 */
	struct cc_reloc *prefix;	/* the instructions it displaces */
	uint64_t stub_end;		/* MEASURE: the stub's code ends here */
	/* an instrumented copy's state area and rings' range (its record) */
	uint64_t area, area_size, rings, rings_size;
	/* planned writes, and the record made of them (cc__job_record) */
	struct write *w;
	size_t nw;
	uint32_t rid;
	bool would_wait;		/* dry run: said it would wait */
	/* call sites in callers: their current bytes */
	struct write *calls;
	size_t ncalls;
	/* the bytes each write replaces, to roll back a partial write */
	struct write *undo;
};

/* ------------------------------------------------- stop, check, write */

struct write {
	uint64_t addr;
	uint8_t len;
	uint8_t bytes[CC_SITE_MAX];
};

static int timeout_of(const struct cc_job *j)
{
	return j->o.timeout_ms > 0 ? j->o.timeout_ms : 2000;
}

static void nap(unsigned *us)
{
	struct timespec ts = { 0, (long)*us * 1000 };
	nanosleep(&ts, NULL);
	if (*us < 16000)
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
	uint64_t t0 = now_ns();
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
	a->pause_ns = now_ns() - t0;
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
	uint64_t deadline = now_ns() + (uint64_t)timeout_of(j) * 1000000u;
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
			say(&j->rep, "would wait (up to %d ms) because %s%s", timeout_of(j), reason,
			    k->hard ? "" : "; force would go ahead");
			j->would_wait = true;
			return 0;
		}
		if (now_ns() > deadline)
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

/* After an undo: wait until every thread has been seen once with no PC and
 * no frame in the busy ranges (no thread can enter them any more, so once
 * out is out for good), then they may be freed. -EBUSY when the timeout
 * passes first. */
static int grace(struct cc_job *j, struct cc_tcheck *k)
{
	struct attach_target *t = j->c->t;
	uint64_t deadline = now_ns() + (uint64_t)timeout_of(j) * 1000000u;
	pid_t *clear = NULL;
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
		size_t pending = 0;
		for (size_t i = 0; i < k->n; i++) {
			bool known = false;
			for (size_t q = 0; q < nclear && !known; q++)
				known = clear[q] == k->tids[i];
			if (known)
				continue;
			if (k->busy_of[i])
				pending++;
			else
				clear[nclear++] = k->tids[i];
		}
		if (!pending) {
			rc = 0;
			break;
		}
		if (now_ns() > deadline) {
			rc = -EBUSY;
			break;
		}
		nap(&us);
	}
	k->ignore = NULL;
	free(clear);
	return rc;
}

/* ---------------------------------------------------------------- plan */

static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };

static int read_code(struct cc_job *j, uint64_t addr, uint64_t size, const char *what,
		     uint8_t **out)
{
	if (size == 0 || size > (16u << 20))
		return cc__fail(j->c, CC_PHASE_REDIRECT, -EINVAL, "the size of %s (%" PRIu64 " bytes) "
				"is unknown or implausible", what, size);
	uint8_t *b = malloc(size);
	if (!b)
		return cc__fail(j->c, CC_PHASE_REDIRECT, -ENOMEM, "out of memory");
	int rc = cc__read(j->c, addr, b, size);
	if (rc < 0) {
		free(b);
		return cc__fail(j->c, CC_PHASE_REDIRECT, rc, "cannot read %s at 0x%" PRIx64 " in "
				"process %d: %s", what, addr, j->c->pid, strerror(-rc));
	}
	*out = b;
	return 0;
}

static ssize_t self_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	int rc = cc__read(ctx, addr, buf, len);
	return rc < 0 ? rc : (ssize_t)len;
}

int cc__open_cfg(struct cc_cache *c, struct cfg_reader **r)
{
	static const struct cfg_reader_ops ops = { .sz = sizeof ops, .read = self_read };

	if (c->t)
		return cfg_reader__open_live(c->t, NULL, r);
	return cfg_reader__new(&ops, c, NULL, r);
}

/* The address of the last instruction of a block, for messages. */
static uint64_t last_insn(struct cfg_reader *r, const struct cfg_block *b, char *text, size_t size)
{
	uint8_t buf[256];
	size_t len = b->end - b->start < sizeof buf ? b->end - b->start : sizeof buf;
	uint64_t at = b->start, last = b->start;
	ZydisDecoder dec;
	ZydisDecodedInstruction d;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	if (cfg_reader__read(r, b->start, buf, len) != (ssize_t)len)
		len = 0;
	while (at < b->start + len &&
	       ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, buf + (at - b->start),
							  len - (at - b->start), &d))) {
		last = at;
		at += d.length;
	}
	cc_insn_text(buf + (last - b->start), len - (last - b->start), last, text, size);
	return last;
}

/* From the function's CFG (jump tables included): its extent when the
 * symbol gave none, and no branch of its own into [entry, end), the bytes the
 * jump covers (a return into them is handled as a stack check). */
static int check_cfg(struct cc_job *j, uint64_t end)
{
	struct cfg_build_opts bo = { .sz = sizeof bo, .no_callee_analysis = true };
	struct cfg_reader *r;
	struct cfg_function *f = NULL;
	const char *msg;
	uint64_t at;
	int rc;

	if ((rc = cc__open_cfg(j->c, &r)) < 0)
		return cc__fail(j->c, CC_PHASE_REDIRECT, rc, "cannot read the code of %s: %s",
				j->name, strerror(-rc));
	if ((rc = cfg_function__build(r, j->fn.addr, &bo, &f)) < 0) {
		cc__fail(j->c, CC_PHASE_REDIRECT, rc, "cannot build the control flow of %s: %s",
			 j->name, cfg_reader__errmsg(r));
		goto out;
	}
	enum cfg_error e = cfg_function__error(f, &at, &msg);
	if (e != CFG_ERR_NONE) {
		if (!j->o.force) {
			rc = cc__fail(j->c, CC_PHASE_REDIRECT, -EILSEQ, "the control flow of %s is "
				      "incomplete (%s at 0x%" PRIx64 "), so branches into its first "
				      "bytes cannot be ruled out; use force to go ahead", j->name,
				      msg ? msg : cfg_error_name(e), at);
			goto out;
		}
		say(&j->rep, "warning: the control flow of %s is incomplete (%s at 0x%" PRIx64
		    "); going ahead (forced)", j->name, msg ? msg : cfg_error_name(e), at);
	}
	size_t entry = cfg_function__entry_block(f);
	for (size_t i = 0; i < cfg_function__edge_count(f); i++) {
		const struct cfg_edge *ed = cfg_function__edge(f, i);
		if (ed->to < 0 || ed->kind == CFG_EDGE_CALL_RETURN)
			continue;
		const struct cfg_block *to = cfg_function__block(f, (size_t)ed->to);
		const struct cfg_block *from = cfg_function__block(f, ed->from);
		bool into = (size_t)ed->to == entry || (to->start > j->fn.addr && to->start < end);
		/* sequential flow (fall through, jcc not taken) into a block
		 * split inside the bytes is no branch: the edge that split it
		 * is the one to report */
		bool sequential = (ed->kind == CFG_EDGE_FALLTHROUGH || ed->kind == CFG_EDGE_NOT_TAKEN) &&
				  from->end == to->start;
		if (!into || sequential)
			continue;
		char text[96];
		uint64_t br = last_insn(r, from, text, sizeof text);
		rc = cc__fail(j->c, CC_PHASE_REDIRECT, -ENOTSUP, "%s branches into its own first "
			      "bytes (`%s` at 0x%" PRIx64 " goes to 0x%" PRIx64 "), which the jump "
			      "would overwrite", j->name, text, br, to->start);
		goto out;
	}
	if (!j->fn.size) {
		const struct cfg_range *rg = cfg_function__range_of(f, j->fn.addr);
		j->fn.size = rg ? rg->end - j->fn.addr : 0;
		say(&j->rep, "%s: no symbol size; %" PRIu64 " bytes from its control flow", j->name,
		    j->fn.size);
	}
	rc = 0;
out:
	cfg_function__free(f);
	cfg_reader__free(r);
	return rc;
}

/* Code elsewhere in the module that branches strictly inside the bytes the
 * jump overwrites (after the entry, where the jump begins) would land in
 * the middle of it: refused, naming the branch. Not even force goes ahead:
 * the branch would run garbage. */
static int check_side_entries(struct cc_job *j)
{
	size_t len = cc_reloc__src_len(j->prefix);
	struct cc_range own = { j->site, j->site + len };
	struct cc_xhit h;
	uint8_t insn[16];
	int rc = cc__xref_into(j->c, j->site + 1, j->site + len, &own, &h);

	if (rc <= 0)
		return rc;
	char text[96] = "";
	if (cc__read(j->c, h.from, insn, sizeof insn) == 0)
		cc_insn_text(insn, sizeof insn, h.from, text, sizeof text);
	char more[64] = "";
	if (h.count > 1)
		snprintf(more, sizeof more, " (and %zu more branch%s)", h.count - 1,
			 h.count > 2 ? "es" : "");
	if (h.table)
		return cc__fail(j->c, CC_PHASE_REDIRECT, -ENOTSUP, "%s cannot be patched: the jump "
				"table of `%s` at 0x%" PRIx64 " (%s) goes to 0x%" PRIx64 ", inside the %zu "
				"bytes at its entry that the jump would overwrite%s", j->name, text,
				h.from, h.where, h.to, len, more);
	return cc__fail(j->c, CC_PHASE_REDIRECT, -ENOTSUP, "%s cannot be patched: `%s` at 0x%"
			PRIx64 " (%s) branches to 0x%" PRIx64 ", inside the %zu bytes at its entry "
			"that the jump would overwrite%s", j->name, text, h.from, h.where, h.to, len,
			more);
}

static int plan_entry(struct cc_job *j)
{
	struct cc_reloc_opts ro = { .sz = sizeof ro, .min_len = ENTRY_JMP, .jump_back = true };
	struct cc_error err;
	uint8_t *code;
	int rc;

	if (!j->fn.size && (rc = check_cfg(j, j->fn.addr)) < 0)
		return rc;	/* the extent first, from the CFG */
	if ((rc = read_code(j, j->fn.addr, j->fn.size, j->name, &code)) < 0)
		return rc;
	size_t skip = j->fn.size >= 4 && memcmp(code, endbr64, 4) == 0 ? 4 : 0;
	j->site = j->fn.addr + skip;
	if (j->fn.size < skip + ENTRY_JMP) {
		rc = cc__fail(j->c, CC_PHASE_REDIRECT, -ENOSPC, "%s is %" PRIu64 " bytes long, too "
			      "short for a %d-byte jump%s", j->name, j->fn.size, ENTRY_JMP,
			      skip ? " after its endbr64" : "");
		goto out;
	}
	rc = cc_reloc__new(code + skip, j->fn.size - skip, j->site, &ro, &j->prefix, &err);
	if (rc < 0) {
		cc__fail(j->c, CC_PHASE_REDIRECT, rc, "the first bytes of %s cannot be moved: %s",
			 j->name, err.msg);
		goto out;
	}
	if ((rc = check_cfg(j, j->site + cc_reloc__src_len(j->prefix))) < 0 ||
	    (rc = check_side_entries(j)) < 0)
		goto out;
	say(&j->rep, "entry: jmp rel32 at 0x%" PRIx64 " over %zu bytes (%zu instructions)%s",
	    j->site, cc_reloc__src_len(j->prefix), cc_reloc__count(j->prefix),
	    skip ? ", after endbr64, which stays" : "");
out:
	free(code);
	return rc;
}

static int add_call(struct cc_job *j, uint64_t addr, const uint8_t *bytes, uint8_t len)
{
	struct write *w = realloc(j->calls, (j->ncalls + 1) * sizeof *w);
	if (!w)
		return cc__fail(j->c, CC_PHASE_REDIRECT, -ENOMEM, "out of memory");
	j->calls = w;
	w = &j->calls[j->ncalls++];
	w->addr = addr;
	w->len = len;
	memcpy(w->bytes, bytes, len);
	return 0;
}

/* Each direct branch (call, jmp, jcc) to target in the size bytes of code
 * at addr, decoded from the start: fn(arg, where, its bytes, its length,
 * whether its displacement is a trailing rel32, which can be re-targeted). */
typedef int (*branch_fn)(void *arg, uint64_t at, const uint8_t *bytes, uint8_t len, bool rel32);

static int each_branch_to(const uint8_t *code, uint64_t addr, uint64_t size, uint64_t target,
			  branch_fn fn, void *arg)
{
	ZydisDecoder dec;
	int rc;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t pos = 0; pos < size;) {
		ZydisDecodedInstruction d;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + pos, size - pos, &d, ops)))
			break;
		ZyanU64 to;
		if (d.raw.imm[0].is_relative &&
		    ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d, &ops[0], addr + pos, &to)) &&
		    to == target &&
		    (rc = fn(arg, addr + pos, code + pos, d.length,
			     d.raw.imm[0].size == 32 && d.raw.imm[0].offset + 4 == d.length)) < 0)
			return rc;
		pos += d.length;
	}
	return 0;
}

struct plan_caller {
	struct cc_job *j;
	const char *what;
	size_t found;
};

static int plan_one(void *arg, uint64_t at, const uint8_t *bytes, uint8_t len, bool rel32)
{
	struct plan_caller *p = arg;
	int rc;

	if (!rel32) {
		say(&p->j->rep, "%s: cannot retarget the short branch at 0x%" PRIx64, p->what, at);
		return 0;
	}
	if ((rc = add_call(p->j, at, bytes, len)) == 0)
		p->found++;
	return rc;
}

/* Direct calls (and rel32 tail jumps) to the function in each caller. */
static int plan_calls(struct cc_job *j)
{
	int rc;

	for (size_t i = 0; i < j->o.ncallers; i++) {
		const struct cc_func *f = &j->o.callers[i];
		char what[128];
		uint8_t *code;
		snprintf(what, sizeof what, "caller %s", f->name ? f->name : "?");
		struct plan_caller p = { j, what, 0 };
		if ((rc = read_code(j, f->addr, f->size, what, &code)) < 0)
			return rc;
		rc = each_branch_to(code, f->addr, f->size, j->fn.addr, plan_one, &p);
		free(code);
		if (rc < 0)
			return rc;
		say(&j->rep, "%s at 0x%" PRIx64 ": %zu direct call%s to %s", what, f->addr, p.found,
		    p.found == 1 ? "" : "s", j->name);
	}
	return 0;
}

static int count_one(void *arg, uint64_t at, const uint8_t *bytes, uint8_t len, bool rel32)
{
	(void)at;
	(void)bytes;
	(void)len;
	*(size_t *)arg += rel32;
	return 0;
}

int cc_cache__direct_calls(struct cc_cache *c, const struct cc_func *caller, uint64_t func,
			   size_t *n)
{
	uint8_t *code;
	int rc;

	*n = 0;
	if (!caller->size || caller->size > (16u << 20))
		return cc__fail(c, CC_PHASE_REDIRECT, -EINVAL, "the size of %s (%" PRIu64 " bytes) is "
				"unknown or implausible", caller->name ? caller->name : "the caller",
				caller->size);
	if (!(code = malloc(caller->size)))
		return cc__fail(c, CC_PHASE_REDIRECT, -ENOMEM, "out of memory");
	if ((rc = cc__read(c, caller->addr, code, caller->size)) < 0)
		rc = cc__fail(c, CC_PHASE_REDIRECT, rc, "cannot read %s at 0x%" PRIx64 ": %s",
			      caller->name ? caller->name : "the caller", caller->addr, strerror(-rc));
	else
		rc = each_branch_to(code, caller->addr, caller->size, func, count_one, n);
	free(code);
	return rc;
}

int cc__job_new(struct cc_cache *c, const struct cc_func *fn, unsigned kind,
		const struct cc_patch_opts *opts, struct cc_job **out)
{
	struct cc_job *j = calloc(1, sizeof *j);
	int rc;

	*out = NULL;
	if (!j)
		return cc__fail(c, CC_PHASE_REDIRECT, -ENOMEM, "out of memory");
	j->c = c;
	j->fn = *fn;
	j->kind = kind;
	j->o = (struct cc_patch_opts){ .sz = sizeof j->o };
	if (opts)
		memcpy(&j->o, opts, opts->sz < sizeof j->o ? opts->sz : sizeof j->o);
	j->rep = (struct report){ j->o.report, j->o.report_size, 0 };
	if (j->rep.buf && j->rep.size)
		j->rep.buf[0] = '\0';
	if (fn->name)
		snprintf(j->name, sizeof j->name, "%s", fn->name);
	else
		snprintf(j->name, sizeof j->name, "the function at 0x%" PRIx64, fn->addr);
	j->fn.name = j->name;
	j->entry = !j->o.callsites_only;
	if (!j->entry && j->o.ncallers == 0) {
		rc = cc__fail(c, CC_PHASE_REDIRECT, -EINVAL, "only call sites were asked for, but "
			      "no caller was given");
		goto err;
	}
	if ((j->entry && (rc = plan_entry(j)) < 0) || (rc = plan_calls(j)) < 0)
		goto err;
	if (!j->entry && !j->ncalls) {
		char list[256] = "";
		for (size_t i = 0, len = 0; i < j->o.ncallers && len < sizeof list; i++)
			len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "",
						j->o.callers[i].name ? j->o.callers[i].name : "?");
		rc = cc__fail(c, CC_PHASE_REDIRECT, -ENOENT, "only call sites were asked for, but "
			      "no direct call to %s was found in %s", j->name, list);
		goto err;
	}
	*out = j;
	return 0;
err:
	cc__job_free(j);
	return rc;
}

const struct cc_reloc *cc__job_prefix(const struct cc_job *j)
{
	return j->prefix;
}

void cc__job_free(struct cc_job *j)
{
	if (!j)
		return;
	if (j->o.stats)
		*j->o.stats = j->stats;
	cc_reloc__free(j->prefix);
	free(j->w);
	free(j->calls);
	free(j->undo);
	free(j);
}

/* ------------------------------------------------------------- directory */

struct cc_dir_redir *cc__redir_find(struct cc_cache *c, uint64_t func, unsigned kind)
{
	for (size_t i = 0; i < CC_MAX_REDIRS; i++) {
		struct cc_dir_redir *r = &c->dir.redirs[i];
		if (r->id && r->func == func && (!kind || r->kind == kind))
			return r;
	}
	return NULL;
}

/* A process's start time (field 22 of /proc/PID/stat, clock ticks since
 * boot), which tells it from a later process given the same pid; -ESRCH
 * when it is gone or a zombie. */
static int proc_start(pid_t pid, uint64_t *start)
{
	char path[64], buf[1024];
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return -ESRCH;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* after "pid (comm)", which may hold spaces and parentheses: the
	 * state, then fields 4 to 21, then the start time */
	char *p = strrchr(buf, ')'), state;
	unsigned long long st;
	if (!p || sscanf(p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
			 "%*s %*s %*s %*s %llu", &state, &st) != 2 || state == 'Z' || state == 'X')
		return -ESRCH;
	*start = st;
	return 0;
}

bool cc__redir_stale(const struct cc_dir_redir *r)
{
	uint64_t start;

	if (r->kind != CC_REDIR_MEASURE)
		return false;
	return r->owner_pid <= 0 || proc_start(r->owner_pid, &start) < 0 || start != r->owner_start;
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

static struct cc_dir_redir *redir_by_id(struct cc_cache *c, uint32_t id)
{
	for (size_t i = 0; i < CC_MAX_REDIRS; i++)
		if (c->dir.redirs[i].id == id)
			return &c->dir.redirs[i];
	return NULL;
}

int cc__redir_prefix(struct cc_cache *c, const struct cc_dir_redir *r, struct cc_reloc **out)
{
	const struct cc_dir_site *s = NULL;
	uint8_t code[256], want[256], have[256];
	struct cc_error err;
	int rc;

	*out = NULL;
	for (size_t i = 0; i < CC_MAX_SITES && !s; i++)
		if (c->dir.sites[i].redir == r->id && c->dir.sites[i].kind == CC_SITE_ENTRY)
			s = &c->dir.sites[i];
	uint64_t end = r->func + r->func_size;
	size_t len = s && end > s->addr ? (size_t)(end - s->addr) : 0;
	if (len > sizeof code)
		len = sizeof code;
	if (!s || len < s->len || r->detour_size > sizeof want)
		return cc__fail(c, CC_PHASE_RESTORE, -ESTALE, "the directory's record of the "
				"redirection of %s is inconsistent; not touching it", r->name);
	if ((rc = cc__read(c, s->addr, code, len)) < 0)
		return cc__fail(c, CC_PHASE_RESTORE, rc, "cannot read %s at 0x%" PRIx64 ": %s",
				r->name, s->addr, strerror(-rc));
	memcpy(code, s->orig, s->len);
	struct cc_reloc_opts ro = { .sz = sizeof ro, .min_len = s->len, .jump_back = true };
	if ((rc = cc_reloc__new(code, len, s->addr, &ro, out, &err)) < 0)
		return cc__fail(c, CC_PHASE_RESTORE, rc, "the first bytes of %s: %s", r->name, err.msg);
	size_t size = cc_reloc__size(*out);
	if (size != r->detour_size ||
	    cc_reloc__encode(*out, r->detour, want, sizeof want, &err) < 0 ||
	    cc__read(c, r->detour, have, size) < 0 || memcmp(want, have, size) != 0) {
		cc_reloc__free(*out);
		*out = NULL;
		return cc__fail(c, CC_PHASE_RESTORE, -ESTALE, "the relocated first bytes of %s at "
				"0x%" PRIx64 " are not what padrone wrote there; not touching them",
				r->name, r->detour);
	}
	return 0;
}

static bool holds(uint64_t lo, uint64_t size, uint64_t addr)
{
	return addr >= lo && addr - lo < size;
}

int cc_cache__describe(struct cc_cache *c, uint64_t addr, char *name, size_t size,
		       uint64_t *start)
{
	for (size_t i = 0; i < CC_MAX_REDIRS; i++) {
		const struct cc_dir_redir *r = &c->dir.redirs[i];
		if (!r->id)
			continue;
		if (r->detour && holds(r->detour, r->detour_size, addr)) {
			snprintf(name, size, "relocated first bytes of %s", r->name);
			*start = r->detour;
			return 0;
		}
		if (r->kind == CC_REDIR_MEASURE && addr >= r->dest && addr < r->stub_end) {
			snprintf(name, size, "measuring stub of %s", r->name);
			*start = r->dest;
			return 0;
		}
		for (size_t k = 0; r->kind == CC_REDIR_REPLACE && k < r->nowned; k++) {
			const struct cc_dir_block *b = &r->owned[k];
			if (b->kind != CC_CODE || !holds(b->addr, b->size, addr))
				continue;
			snprintf(name, size, "replacement of %s", r->name);
			*start = addr >= r->dest && holds(b->addr, b->size, r->dest) ? r->dest : b->addr;
			return 0;
		}
	}
	return -ENOENT;
}

/* Another redirection's site overlapping [addr, addr+len), or NULL. */
static const struct cc_dir_site *site_overlap(struct cc_cache *c, uint64_t addr, size_t len)
{
	for (size_t i = 0; i < CC_MAX_SITES; i++) {
		const struct cc_dir_site *s = &c->dir.sites[i];
		if (s->redir && s->addr < addr + len && addr < s->addr + s->len)
			return s;
	}
	return NULL;
}

static size_t free_sites(const struct cc_cache *c)
{
	size_t n = 0;
	for (size_t i = 0; i < CC_MAX_SITES; i++)
		n += !c->dir.sites[i].redir;
	return n;
}

static int record(struct cc_job *j, const struct write *w, size_t nw, uint64_t dest, uint64_t copy,
		  const struct cc_dir_block *owned, size_t nowned, uint64_t state, uint32_t *id)
{
	struct cc_cache *c = j->c;
	struct cc_dir_redir *r = redir_by_id(c, 0);

	r->id = c->dir.next_id++;
	if (!c->dir.next_id)
		c->dir.next_id = 1;
	r->kind = j->kind;
	r->func = j->fn.addr;
	r->func_size = j->fn.size;
	r->dest = dest;
	r->detour = copy;
	r->detour_size = j->prefix ? cc_reloc__size(j->prefix) : 0;
	r->state = state;
	r->stop_ns = j->stats.stop_ns;
	r->stub_end = j->stub_end;
	r->area = j->area;
	r->area_size = j->area_size;
	r->rings = j->rings;
	r->rings_size = j->rings_size;
	r->owner_pid = (int32_t)getpid();
	if (proc_start(getpid(), &r->owner_start) < 0)
		r->owner_start = 0;
	r->nowned = (uint32_t)nowned;
	memcpy(r->owned, owned, nowned * sizeof *owned);
	snprintf(r->name, sizeof r->name, "%s", j->name);
	snprintf(r->source, sizeof r->source, "%s", j->o.source ? j->o.source : "");
	size_t k = 0;
	for (size_t i = 0; i < nw; i++) {
		while (c->dir.sites[k].redir)
			k++;
		struct cc_dir_site *s = &c->dir.sites[k];
		s->addr = w[i].addr;
		s->redir = r->id;
		s->kind = j->entry && i == 0 ? CC_SITE_ENTRY : CC_SITE_CALL;
		s->len = w[i].len;
		memcpy(s->orig, j->undo[i].bytes, w[i].len);
		memcpy(s->now, w[i].bytes, w[i].len);
	}
	if (id)
		*id = r->id;
	return cc__dir_save(c);
}

static void forget(struct cc_cache *c, uint32_t id)
{
	for (size_t i = 0; i < CC_MAX_SITES; i++)
		if (c->dir.sites[i].redir == id)
			memset(&c->dir.sites[i], 0, sizeof c->dir.sites[i]);
	struct cc_dir_redir *r = redir_by_id(c, id);
	if (r)
		memset(r, 0, sizeof *r);
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

	if (j->entry && site_overlap(c, j->site, ENTRY_JMP) && !(j->kind == CC_REDIR_MEASURE &&
	    cc__redir_find(c, j->fn.addr, CC_REDIR_REPLACE)))
		return cc__fail(c, CC_PHASE_REDIRECT, -EALREADY, "the entry of %s is already patched",
				j->name);
	for (size_t i = 0; i < j->ncalls; i++)
		if (site_overlap(c, j->calls[i].addr, j->calls[i].len))
			return cc__fail(c, CC_PHASE_REDIRECT, -EALREADY, "the call at 0x%" PRIx64 " is "
					"already patched", j->calls[i].addr);
	if (!redir_by_id(c, 0) || free_sites(c) < (j->entry ? 1 : 0) + j->ncalls)
		return cc__fail(c, CC_PHASE_REDIRECT, -ENOSPC, "the code cache's directory is full");
	free(j->w);
	j->w = NULL;
	if ((rc = build_writes(j, dest, &j->w, &j->nw)) < 0)
		return rc;
	/* recorded before the bytes are written: a padrone killed in between
	 * leaves a record that restore can act on, never a patch nobody knows */
	if (!j->o.dry_run && (rc = record(j, j->w, j->nw, dest, copy, owned, nowned, state,
					  &j->rid)) < 0) {
		forget(c, j->rid);
		j->rid = 0;
	}
	return rc;
}

void cc__job_unrecord(struct cc_job *j)
{
	if (!j->rid || sites_written(j->c, j->w, j->nw))
		return;
	forget(j->c, j->rid);
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
		say(&j->rep, "%s %u bytes at 0x%" PRIx64 " to go to 0x%" PRIx64,
		    j->o.dry_run ? "would write" : "write", w[i].len, w[i].addr, dest);
	rc = stop_and_patch(j, &k, w, nw, CC_PHASE_REDIRECT, j->o.wait, NULL);
	/* a thread in the function: said once, as it was (or would be) */
	if (rc == 0 && k.nbusy_threads && !j->would_wait) {
		if (j->o.dry_run && j->o.wait)
			say(&j->rep, "would wait (up to %d ms) because %s, then go ahead (forced): its "
			    "current call would finish in the original code", timeout_of(j), k.busy_why);
		else if (j->o.dry_run)
			say(&j->rep, "%s: its current call would finish in the original code",
			    k.busy_why);
		else
			say(&j->rep, "%s%s: its current call finishes in the original code", k.busy_why,
			    j->o.wait ? " (forced after waiting)" : "");
	}
	if (rc == 0 && !j->o.dry_run) {
		say_moves(&j->rep, &k, "out of the patched bytes");
		if (c->t)
			say(&j->rep, "stopped the world for %.1f us (%u threads, %u retries)",
			    (double)j->stats.stop_ns / 1000.0, j->stats.threads, j->stats.retries);
		redir_by_id(c, rid)->stop_ns = j->stats.stop_ns;
		rc = cc__dir_save(c);
		if (id)
			*id = rid;
	} else if (own_record && !j->o.dry_run && !sites_written(c, w, nw)) {
		forget(c, rid);
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
 * code in the cache (reported, stats.kept_code). */
int cc__undo(struct cc_cache *c, uint32_t id, const struct cc_patch_opts *opts,
	     const struct cc_undo_stub *stub)
{
	struct cc_dir_redir *r = redir_by_id(c, id);
	struct cc_tcheck k = { .c = c };
	struct cc_job j = { .c = c };
	struct write *w = NULL;
	size_t nw = 0;
	int rc;

	if (!r || !id)
		return cc__fail(c, CC_PHASE_RESTORE, -ENOENT, "no such redirection");
	j.o = (struct cc_patch_opts){ .sz = sizeof j.o };
	if (opts)
		memcpy(&j.o, opts, opts->sz < sizeof j.o ? opts->sz : sizeof j.o);
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
		say(&j.rep, "%s the original %u bytes at 0x%" PRIx64, j.o.dry_run ? "would put back" :
		    "put back", w[i].len, w[i].addr);
	if ((rc = stop_and_patch(&j, &k, w, nw, CC_PHASE_RESTORE, false, stub)) < 0 || j.o.dry_run)
		goto out;
	say_moves(&j.rep, &k, "out of the code taken out");
	if (c->t)
		say(&j.rep, "stopped the world for %.1f us (%u threads)",
		    (double)j.stats.stop_ns / 1000.0, j.stats.threads);
	/* the code it owned: freed once no thread is in it */
	k.nbusy = 0;
	for (size_t i = 0; i < r->nowned; i++)
		if (r->owned[i].kind == CC_CODE && k.nbusy < CC_MAX_OWNED + 2)
			k.busy[k.nbusy++] = (struct cc_range){ r->owned[i].addr,
							       r->owned[i].addr + r->owned[i].size };
	snprintf(k.busy_what, sizeof k.busy_what, "the code cache's code for %s", r->name);
	if (grace(&j, &k) == 0) {
		if (stub && stub->release)
			stub->release(c, stub->release_arg);
		for (size_t i = 0; i < r->nowned; i++)
			cc_cache__free(c, r->owned[i].addr, r->owned[i].size);
	} else {
		j.stats.kept_code = true;
		say(&j.rep, "kept the code cache's code for %s: after %d ms %s", r->name,
		    timeout_of(&j), k.busy_why[0] ? k.busy_why : "a thread was still in it");
	}
	forget(c, id);
	rc = cc__dir_save(c);
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
	say(&j->rep, "%s", line);
}
