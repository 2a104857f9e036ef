/* session-cc.c: the session's code-cache part (not codecache/'s cc_): the
 * verbs replace, restore, measure, and padrone.h's padrone_cc_* calls over
 * codecache/. Each call opens the target's
 * code cache afresh (finding what earlier sessions left there) and the
 * target's symbols, so a later session restores what an earlier one
 * replaced. */
#include "src/padrone.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/attach.h"
#include "codecache/codecache.h"
#include "elf/elf.h"
#include "profile/profile.h"
#include "src/session.h"
#include "util/util.h"

struct cc_ctx {
	struct padrone_session *s;
	struct cc_cache *c;
	struct cc_syms *sy;
};

/* The session's failure from codecache's: its message, a reason; or the
 * process's exit or exec, if that is why it failed. */
static int fail_cc(struct padrone_session *s, int rc, const char *msg)
{
	enum padrone_why why = PADRONE_SYSTEM;
	int gone = padrone_session_fail_if_left(s);

	if (gone < 0)
		return gone;
	switch (rc) {
	case -ENOENT: case -EEXIST: case -EINVAL: case -ENOTSUP: case -ENOSPC: case -ENOEXEC:
	case -ERANGE: case -EILSEQ: case -EALREADY: case -ESTALE: case -ENOTUNIQ:
		why = PADRONE_BAD_REQUEST;
		break;
	case -EBUSY: case -ETIMEDOUT:
		why = PADRONE_TIMEOUT;
		break;
	case -ESRCH:
		why = PADRONE_TARGET_EXITED;
		break;
	}
	return padrone_session_fail(s, why, rc, "%s", msg);
}

static int release_xref(struct padrone_session *s, void *data)
{
	(void)s;
	cc_xref__free(data);
	return 0;
}

/* The index of branches the side-entry check makes per module, kept for
 * the attachment (NULL if it cannot be: each patch then makes its own). */
static struct cc_xref *session_xref(struct padrone_session *s)
{
	struct cc_xref *x = padrone_session_ext(s, "cc.xref");

	if (!x && cc_xref__new(&x) == 0 &&
	    padrone_session_set_ext(s, "cc.xref", x, release_xref) < 0) {
		cc_xref__free(x);
		x = NULL;
	}
	return x;
}

static int open_ctx(struct padrone_session *s, struct cc_ctx *x)
{
	struct attach_target *t = padrone_session_target(s);
	struct cc_error err = { 0 };
	int rc;

	memset(x, 0, sizeof *x);
	x->s = s;
	if (!t)
		return padrone_session_fail(s, PADRONE_NOT_ATTACHED, -ENOENT,
					    "not attached to a process");
	if (attach_target__state(t) != ATTACH_OK)
		return padrone_session_fail_if_gone(s);
	struct cc_cache_opts co = { .sz = sizeof co, .xref = session_xref(s) };
	if ((rc = cc_cache__open(t, &co, &x->c, &err)) < 0)
		return fail_cc(s, rc, err.msg);
	struct elf_modules *ms;
	if ((rc = padrone_session_modules(s, &ms)) < 0) {
		cc_cache__close(x->c);
		x->c = NULL;
		return rc;
	}
	if ((rc = cc_syms__wrap(attach_target__pid(t), ms, &x->sy, &err)) == 0)
		padrone_session_pin_modules(s, true);
	if (rc < 0) {
		cc_cache__close(x->c);
		x->c = NULL;
		return fail_cc(s, rc, err.msg);
	}
	return 0;
}

/* A patch request's start: *out (the caller's, else scratch) cleared, the
 * session's code cache opened in x. */
static int open_patch(struct padrone_session *s, struct cc_ctx *x, struct padrone_patch **out,
		      struct padrone_patch *scratch)
{
	if (!*out)
		*out = scratch;
	memset(*out, 0, sizeof **out);
	return open_ctx(s, x);
}

static void close_ctx(struct cc_ctx *x)
{
	if (x->sy)
		padrone_session_pin_modules(x->s, false);
	cc_syms__free(x->sy);
	cc_cache__close(x->c);
}

/* A jump written anywhere but at a function's entry (inside a function, or
 * inside one of its instructions) would break the process: an address must
 * be in code, and at the start of whatever symbol or FDE covers it. */
static int check_entry(struct padrone_session *s, uint64_t addr, const char *name)
{
	pid_t pid = attach_target__pid(padrone_session_target(s));
	struct prof_symbolizer *sym;
	struct attach_maps *maps;
	struct prof_sym ps;
	int rc;

	if ((rc = attach_maps__read(pid, &maps)) < 0)
		return padrone_session_fail(s, PADRONE_SYSTEM, rc, "cannot read the maps of "
					    "process %d: %s", (int)pid, strerror(-rc));
	const struct attach_map *m = attach_maps__find(maps, addr);
	bool code = m && (m->prot & ATTACH_MAP_X);
	attach_maps__free(maps);
	if (!code)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EFAULT,
					    "no code at %s in process %d", name, (int)pid);
	if ((rc = padrone_session_symbolizer(s, &sym)) < 0)
		return rc;
	if (prof_symbolizer__lookup(sym, addr, &ps) < 0 || ps.bounds == PROF_BOUNDS_NONE ||
	    ps.start == addr)
		return 0;
	return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL,
				    "%s is inside %s (%#lx-%#lx), not at its entry: give %s or "
				    "%#lx", name, ps.name, (unsigned long)ps.start,
				    (unsigned long)ps.end, ps.name, (unsigned long)ps.start);
}

/* A function by name, by address ("0x401136"; its extent then comes from
 * its control flow), or by a name the session's resolver knows (the one
 * every command uses; sub_ and perf map names get their entry checked). */
int padrone_session_find_function(struct padrone_session *s, const char *name,
				   struct cc_func *f)
{
	struct padrone_named nm;
	char *end;

	if (!name || !*name)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "no function named");
	f->size = 0;
	f->name = name;
	if (name[0] == '0' && name[1] == 'x') {
		errno = 0;
		f->addr = strtoull(name, &end, 16);
		if (!*end && !errno && f->addr)
			return check_entry(s, f->addr, name);
	}
	int rc = padrone_session_resolve(s, name, &nm);
	if (rc == -ENOENT) {
		int gone = padrone_session_fail_if_left(s);	/* its modules went with it */
		if (gone < 0)
			return gone;
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, rc,
					    "process %d has no function named %s",
					    (int)attach_target__pid(padrone_session_target(s)),
					    name);
	}
	if (rc < 0)
		return rc;
	if (nm.ifunc)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOTSUP,
					    "%s in %s is an IFUNC: name the implementation it "
					    "selects", name, nm.module);
	f->addr = nm.addr;
	f->size = nm.size;
	return nm.module[0] ? 0 : check_entry(s, f->addr, name);
}

/* Does a GOT slot of module m that holds to still wait for lazy binding?
 * It then leads back into m's PLT (the stub's own push, or with IBT an
 * entry of .plt), where no function of m is named. */
static bool unbound(const struct elf_module *m, uint64_t to)
{
	const struct elf_fn *fn;

	if (to < m->lo || to >= m->hi || !m->file)
		return false;
	fn = elf_file__find(m->file, to - m->bias);
	return !fn || !fn->name || fn->bounds == ELF_BOUNDS_EH_FRAME ||
	       elf_module__plt_entry(m, fn->start + m->bias);
}

/* Where the GOT slot of PLT stub plt (in module m) leads now, for a
 * message: "now to libc.so.6:__strcasecmp_avx2", or not yet. */
static void slot_target(struct padrone_session *s, const struct elf_module *m,
			const struct elf_sym *plt, char *buf, size_t size)
{
	struct attach_target *t = padrone_session_target(s);
	uint64_t to = 0;
	struct prof_symbolizer *sym;
	struct prof_sym ps;
	int bare = (int)strcspn(plt->name, "@");	/* the symbol its slot is relocated with */

	snprintf(buf, size, "to %.*s", bare, plt->name);
	if (attach_target__read(t, plt->got + m->bias, &to, sizeof to) != (ssize_t)sizeof to)
		return;
	if (unbound(m, to))
		snprintf(buf, size, "not bound to %.*s yet (lazy binding)", bare, plt->name);
	else if (padrone_session_symbolizer(s, &sym) == 0 &&
		 prof_symbolizer__lookup(sym, to, &ps) == 0 && ps.bounds != PROF_BOUNDS_NONE) {
		const char *slash = strrchr(ps.module, '/');
		snprintf(buf, size, "now to %s:%s", slash ? slash + 1 : ps.module, ps.name);
	}
}

/* A PLT stub only jumps through its GOT slot: patched, it would change
 * just its own module's calls through it, and it has no return for measure
 * to time. Refused (by name or address), naming where it leads. */
static int refuse_plt_stub(struct padrone_session *s, const struct cc_func *f)
{
	struct elf_modules *ms;
	const struct elf_module *m;
	const struct elf_sym *plt;
	char to[256];
	int rc;

	if ((rc = padrone_session_modules(s, &ms)) < 0)
		return rc;
	if (!(m = elf_modules__find(ms, f->addr)) || !(plt = elf_module__plt_entry(m, f->addr)))
		return 0;
	size_t nl = strlen(f->name), pl = strlen(plt->name);
	bool named_so = nl >= pl && !strcmp(f->name + nl - pl, plt->name);	/* [MODULE:]NAME@plt */
	slot_target(s, m, plt, to, sizeof to);
	return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOTSUP,
				    "%s%s%s%s is a PLT stub of %s: it only jumps through its GOT "
				    "slot, %s; name that function instead", f->name,
				    named_so ? "" : " (", named_so ? "" : plt->name,
				    named_so ? "" : ")", m->path, to);
}

int padrone_session_find_patchable(struct padrone_session *s, const char *name,
				   struct cc_func *f)
{
	int rc = padrone_session_find_function(s, name, f);

	return rc < 0 ? rc : refuse_plt_stub(s, f);
}

static int fail_cache(struct cc_ctx *x, int rc)
{
	return fail_cc(x->s, rc, cc_cache__errmsg(x->c));
}

static void fill_patch(struct padrone_patch *out, const struct cc_func *f,
		       const struct cc_patch_stats *st)
{
	out->function = f->addr;
	out->stop_ns = st->stop_ns;
	out->threads = st->threads;
	out->moved = st->moved;
	out->sites = st->sites;
	out->kept_code = st->kept_code;
}

/* The callers named in opts, looked up. */
static int find_callers(struct cc_ctx *x, const char *const *names, size_t n, struct cc_func **out)
{
	*out = NULL;
	if (!n)
		return 0;
	struct cc_func *f = calloc(n, sizeof *f);
	if (!f)
		return padrone_session_fail(x->s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		int rc = padrone_session_find_function(x->s, names[i], &f[i]);
		if (rc < 0) {
			free(f);
			return rc;
		}
	}
	*out = f;
	return 0;
}

#define PROFILE_CALLERS 8	/* kept */
#define PROFILE_CANDIDATES 48	/* looked at */

/* A function of the last profile that may call the one to replace. */
struct candidate {
	struct cc_func f;
	char name[96];
	uint64_t through;	/* samples of chains returning from FUNC into it */
	uint64_t self, inclusive;	/* from the report, when taken from it */
	size_t calls;		/* direct calls to FUNC in it */
};

struct candidates {
	struct candidate c[PROFILE_CANDIDATES];
	size_t n;
	struct cc_func kept[PROFILE_CALLERS];
	size_t nkept;
};

static struct candidate *cand_find(struct candidates *h, uint64_t start)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->c[i].f.addr == start)
			return &h->c[i];
	return NULL;
}

static struct candidate *cand_add(struct candidates *h, uint64_t start, uint64_t end,
				  const char *name)
{
	struct candidate *c = cand_find(h, start);

	if (c || h->n == PROFILE_CANDIDATES)
		return c;
	c = &h->c[h->n++];
	memset(c, 0, sizeof *c);
	snprintf(c->name, sizeof c->name, "%s", name);
	c->f = (struct cc_func){ start, end - start, c->name };
	return c;
}

static int by_through(const void *a, const void *b)
{
	const struct candidate *x = a, *y = b;
	return (x->through < y->through) - (x->through > y->through);
}

/* The user frames of a chain of the ranking: those after its kernel ones. */
static const struct prof_hot_frame *user_frames(const struct prof_hot_frame *f, size_t *n)
{
	while (*n && f->addr >= PROF_KERNEL_START) {
		f++;
		(*n)--;
	}
	return f;
}

/* The functions the last profile's call chains return to from FUNC (its
 * innermost frame, recursion skipped), with the samples of those chains. A
 * caller counts only when its symbols, not the call chain, bound it. */
static void chain_callers(struct cc_ctx *x, uint64_t lo, uint64_t hi, struct candidates *h)
{
	const struct prof_hot *hot = padrone_session_hot(x->s);
	size_t nch = hot ? prof_hot__stack_count(hot) : 0;

	for (size_t i = 0; i < nch; i++) {
		const struct prof_hot_frame *fr;
		size_t n, k = 0;
		uint64_t count;
		if (prof_hot__stack(hot, i, &fr, &n, &count) < 0)
			continue;
		fr = user_frames(fr, &n);
		/* fr[0] is an instruction, the others return addresses */
		while (k < n && !(fr[k].addr - (k > 0) >= lo && fr[k].addr - (k > 0) < hi))
			k++;
		while (++k < n && fr[k].addr - 1 >= lo && fr[k].addr - 1 < hi)
			;
		if (k >= n)
			continue;
		const struct prof_func *pf = prof_hot__at(hot, fr[k].func);
		if (pf->bounds == PROF_BOUNDS_NONE || pf->bounds == PROF_BOUNDS_CALLCHAIN ||
		    pf->end <= pf->start)
			continue;
		struct candidate *c = cand_add(h, pf->start, pf->end, pf->name);
		if (c)
			c->through += count;
	}
	qsort(h->c, h->n, sizeof h->c[0], by_through);
	for (size_t i = 0; i < h->n; i++)
		h->c[i].f.name = h->c[i].name;
}

/* replace -C without -c: FUNC's hot callers from the last profile, the
 * functions with a direct call to FUNC among (1) those its call chains
 * return to from FUNC, the most samples first, then (2) the profile's
 * hottest functions, for the callers chains miss: a leaf function without a
 * frame pointer hides its caller from frame-pointer chains. At most 8;
 * which, and why, in note. */
static int profile_callers(struct cc_ctx *x, const struct cc_func *fn, struct candidates *h,
			   char *note, size_t size)
{
	const struct padrone_report *r = padrone_session__report(x->s);
	struct prof_symbolizer *sym;
	struct prof_sym ps;
	int rc;

	memset(h, 0, sizeof *h);
	if (!r)
		return padrone_session_fail(x->s, PADRONE_BAD_REQUEST, -EINVAL, "-C without -c "
					    "takes %s's callers from the last profile, and there is "
					    "none: run profile first, or name them with -c",
					    fn->name);
	if ((rc = padrone_session_symbolizer(x->s, &sym)) < 0)
		return rc;
	uint64_t lo = fn->addr, hi = fn->addr + fn->size;
	if (!fn->size && prof_symbolizer__lookup(sym, fn->addr, &ps) == 0 && ps.start == fn->addr &&
	    ps.bounds != PROF_BOUNDS_NONE)
		hi = ps.end;
	chain_callers(x, lo, hi, h);
	for (size_t i = 0; i < padrone_report__count(r); i++) {
		const struct padrone_function *pf = padrone_report__function(r, i);
		if (pf->end <= pf->start || pf->start == fn->addr || pf->start >= PROF_KERNEL_START)
			continue;
		struct candidate *c = cand_add(h, pf->start, pf->end, pf->name);
		if (c && !c->through) {
			c->self = pf->self;
			c->inclusive = pf->inclusive;
		}
	}
	size_t len = (size_t)snprintf(note, size, "callers of %s in the last profile, hottest "
				      "first:", fn->name);
	for (size_t i = 0; i < h->n && h->nkept < PROFILE_CALLERS; i++) {
		struct candidate *c = &h->c[i];
		if (cc_cache__direct_calls(x->c, &c->f, fn->addr, &c->calls) < 0 || !c->calls)
			continue;
		h->kept[h->nkept] = c->f;
		if (len < size && c->through)
			len += (size_t)snprintf(note + len, size - len, "%s %s (%llu sample%s through "
						"it)", h->nkept ? "," : "", c->name,
						(unsigned long long)c->through,
						c->through == 1 ? "" : "s");
		else if (len < size)
			len += (size_t)snprintf(note + len, size - len, "%s %s (hot: %llu samples, not "
						"in %s's call chains)", h->nkept ? "," : "", c->name,
						(unsigned long long)c->inclusive, fn->name);
		h->nkept++;
	}
	if (!h->nkept)
		return padrone_session_fail(x->s, PADRONE_BAD_REQUEST, -ENOENT, "no function of the "
					    "last profile calls %s directly (%zu looked at: the callers "
					    "its call chains show, then the hottest): name the callers "
					    "with -c", fn->name, h->n);
	return 0;
}

/* Put line (and a newline) before the report's text. */
static void report_prepend(char *report, size_t size, const char *line)
{
	size_t n = strlen(line) + 1, have = strlen(report);

	if (n >= size)
		return;
	if (have + n >= size)
		have = size - n - 1;
	memmove(report + n, report, have);
	report[n + have] = '\0';
	memcpy(report, line, n - 1);
	report[n - 1] = '\n';
}

int padrone_session__replace(struct padrone_session *s, const char *function, const char *file,
			     const struct padrone_replace_opts *opts, struct padrone_patch *out)
{
	struct padrone_replace_opts o = { .sz = sizeof o };
	struct padrone_patch dummy;
	struct cc_ctx x;
	struct cc_func f, *callers = NULL;
	struct cc_image *im = NULL;
	struct cc_error err = { 0 };
	struct cc_patch_stats st = { 0 };
	struct candidates hot;
	char note[512] = "";
	int rc;

	if (!UTIL_OPTS_COPY(&o, opts))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, UTIL_OPTS_UNKNOWN);
	if ((rc = open_patch(s, &x, &out, &dummy)) < 0)
		return rc;
	if ((rc = padrone_session_find_patchable(s, function, &f)) < 0 ||
	    (rc = find_callers(&x, o.callers, o.ncallers, &callers)) < 0)
		goto out;
	const struct cc_func *callers_of = callers;
	size_t ncallers = o.ncallers;
	if (o.callsites_only && !o.ncallers) {
		if ((rc = profile_callers(&x, &f, &hot, note, sizeof note)) < 0)
			goto out;
		callers_of = hot.kept;
		ncallers = hot.nkept;
	}
	/* SYMBOL: as asked; else the function's own name if FILE has it,
	 * else FILE's only function */
	struct cc_image_opts io = { .sz = sizeof io, .symbol = o.symbol ? o.symbol : function,
				    .raw = o.raw };
	rc = cc_image__open(file, &io, &im, &err);
	if (rc == -ENOENT && err.no_symbol && !o.symbol && !o.raw) {
		io.symbol = NULL;
		rc = cc_image__open(file, &io, &im, &err);
	}
	if (rc < 0) {
		rc = fail_cc(s, rc, err.msg);
		goto out;
	}
	struct cc_patch_opts po = {
		.sz = sizeof po, .callers = callers_of, .ncallers = ncallers,
		.callsites_only = o.callsites_only, .wait = o.wait, .timeout_ms = o.timeout_ms,
		.force = o.force, .dry_run = o.dry_run, .report = out->report,
		.report_size = sizeof out->report, .stats = &st,
	};
	rc = cc_cache__replace(x.c, &f, im, cc_syms__resolve, x.sy, &po);
	fill_patch(out, &f, &st);
	if (note[0])
		report_prepend(out->report, sizeof out->report, note);
	if (rc < 0) {
		const char *why = cc_syms__errmsg(x.sy);
		if (why[0] && rc == -ENOTUNIQ)
			rc = padrone_session_fail(s, PADRONE_BAD_REQUEST, rc, "%s: %s",
						  cc_cache__errmsg(x.c), why);
		else
			rc = why[0] && rc == -ENOTSUP ? fail_cc(s, rc, why) : fail_cache(&x, rc);
		goto out;
	}
out:
	cc_image__free(im);
	free(callers);
	close_ctx(&x);
	return rc;
}

int padrone_session__restore(struct padrone_session *s, const char *function,
			     const struct padrone_restore_opts *opts, struct padrone_patch *out)
{
	struct padrone_restore_opts o = { .sz = sizeof o };
	struct padrone_patch dummy;
	struct cc_patch_stats st = { 0 };
	struct cc_ctx x;
	struct cc_func f;
	int rc;

	if (!UTIL_OPTS_COPY(&o, opts))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, UTIL_OPTS_UNKNOWN);
	if ((rc = open_patch(s, &x, &out, &dummy)) < 0)
		return rc;
	if ((rc = padrone_session_find_function(s, function, &f)) == 0) {
		struct cc_patch_opts po = {
			.sz = sizeof po, .timeout_ms = o.timeout_ms, .dry_run = o.dry_run,
			.report = out->report, .report_size = sizeof out->report, .stats = &st,
		};
		rc = cc_cache__restore(x.c, f.addr, function, &po);
		fill_patch(out, &f, &st);
		if (rc < 0)
			rc = fail_cache(&x, rc);
	}
	close_ctx(&x);
	return rc;
}

static void fill_replacement(struct padrone_replacement *out, const struct cc_redirect_info *ri)
{
	*out = (struct padrone_replacement){
		.function = ri->func, .code = ri->dest, .stop_ns = ri->stop_ns,
		.measuring = ri->measure, .sites = ri->sites, .owner = ri->owner,
		.stale = ri->stale,
	};
	snprintf(out->name, sizeof out->name, "%s", ri->name);
	snprintf(out->source, sizeof out->source, "%s", ri->source);
}

int padrone_session__replacements(struct padrone_session *s,
				  struct padrone_replacement_list **out)
{
	struct padrone_replacement_list *l;
	struct cc_redirect_info *ri;
	struct cc_ctx x;
	int rc, n;

	*out = NULL;
	if ((rc = open_ctx(s, &x)) < 0)
		return rc;
	/* The directory as read when x was opened: counted, then copied. */
	n = cc_cache__redirects(x.c, NULL, 0);
	ri = calloc(n ? (size_t)n : 1, sizeof *ri);
	if (ri)
		n = cc_cache__redirects(x.c, ri, (size_t)n);
	close_ctx(&x);
	l = ri ? calloc(1, sizeof *l) : NULL;
	if (l)
		l->items = calloc(n ? (size_t)n : 1, sizeof *l->items);
	if (!l || !l->items) {
		free(ri);
		padrone_replacement_list__free(l);
		return padrone_session_fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	}
	l->count = (size_t)n;
	for (size_t i = 0; i < l->count; i++)
		fill_replacement(&l->items[i], &ri[i]);
	free(ri);
	*out = l;
	return 0;
}

void padrone_replacement_list__free(struct padrone_replacement_list *l)
{
	if (!l)
		return;
	free(l->items);
	free(l);
}

/* Wait for the calls, in slices, so that padrone_session__interrupt ends
 * the wait early (^C in padrone, a cancel in padroned): 0 when all came,
 * -ETIMEDOUT when the time ran out, -EINTR when interrupted, or an error of
 * cc_measure__wait. */
/* Wait for the calls or the timeout, ^C ending it early; o's progress
 * callback told how far it is. */
static int wait_calls(struct padrone_session *s, struct cc_measure *m,
		      const struct padrone_measure_opts *o, uint64_t *done)
{
	enum { SLICE_MS = 20, PROGRESS_MS = 50 };
	const double seconds = o->timeout > 0 ? o->timeout : 10;
	long total = (long)(seconds * 1000), waited = 0, told = 0;
	int rc;

	padrone_session_wait_begin(s);
	for (;;) {
		long slice = total - waited < SLICE_MS ? total - waited : SLICE_MS;
		rc = cc_measure__wait(m, (int)slice, done);
		waited += slice;
		if (rc != -ETIMEDOUT || waited >= total)
			break;
		if (padrone_session_wait_interrupted(s, 0)) {
			rc = -EINTR;
			break;
		}
		if (o->progress && waited - told >= PROGRESS_MS) {
			told = waited;
			o->progress(o->progress_arg, (double)waited / 1000, seconds, *done);
		}
	}
	padrone_session_wait_end(s);
	return rc;
}

int padrone_session__measure(struct padrone_session *s, const char *function,
			     const struct padrone_measure_opts *opts, struct padrone_measurement *out)
{
	struct padrone_measure_opts o = { .sz = sizeof o };
	struct cc_patch_stats st = { 0 };
	struct cc_measure *m = NULL;
	struct cc_measure_result r;
	struct cc_ctx x;
	struct cc_func f;
	uint64_t done = 0;
	int rc;

	if (!UTIL_OPTS_COPY(&o, opts))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, UTIL_OPTS_UNKNOWN);
	memset(out, 0, sizeof *out);
	if ((rc = open_ctx(s, &x)) < 0)
		return rc;
	if ((rc = padrone_session_find_patchable(s, function, &f)) < 0)
		goto out;
	struct cc_measure_opts mo = { .sz = sizeof mo, .calls = o.calls, .force = o.force,
				      .stats = &st };
	if ((rc = cc_measure__start(x.c, &f, &mo, &m)) < 0) {
		rc = fail_cache(&x, rc);
		goto out;
	}
	int wrc = wait_calls(s, m, &o, &done);
	if ((rc = cc_measure__finish(m, &r)) < 0) {
		rc = fail_cache(&x, rc);
		goto out;
	}
	snprintf(out->function, sizeof out->function, "%s", function);
	out->requested = cc_measure__calls(m);
	out->complete = wrc == 0;
	out->calls = r.calls;
	out->skipped = r.skipped;
	out->mean_ns = r.mean_ns;
	out->p50_ns = r.p50_ns;
	out->p99_ns = r.p99_ns;
	out->min_ns = r.min_ns;
	out->max_ns = r.max_ns;
	out->resolution_ns = r.resolution_ns;
	out->has_ipc = r.has_ipc;
	out->ipc = r.ipc;
	out->stop_ns = st.stop_ns;
out:
	cc_measure__free(m);
	close_ctx(&x);
	return rc;
}

/* ------------------------------------------------- PADRONE's calls */

/* near 0: the program's own code (its executable's first mapping). */
static uint64_t near_program(struct cc_ctx *x, uint64_t near)
{
	struct attach_maps *m;
	char link[64], exe[4096];
	pid_t pid = attach_target__pid(padrone_session_target(x->s));

	if (near)
		return near;
	snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(link, exe, sizeof exe - 1);
	if (n <= 0 || attach_maps__read(pid, &m) < 0)
		return 0;
	exe[n] = '\0';
	const struct attach_map *first = attach_maps__first_of(m, exe);
	near = first ? first->start : 0;
	attach_maps__free(m);
	return near;
}

int padrone_cc_create(struct padrone_session *s, uint64_t near, uint64_t *addr)
{
	struct cc_ctx x;
	uint64_t a;
	int rc;

	if ((rc = open_ctx(s, &x)) < 0)
		return rc;
	/* one byte of code makes the areas (and the directory) exist */
	if ((rc = cc_cache__alloc(x.c, CC_CODE, 1, 1, near_program(&x, near), &a)) == 0) {
		cc_cache__free(x.c, a, 1);
		if (addr)
			*addr = a;
	} else {
		rc = fail_cache(&x, rc);
	}
	close_ctx(&x);
	return rc;
}

int padrone_cc_insert(struct padrone_session *s, const void *code, size_t len, uint64_t near,
		      uint64_t *addr)
{
	struct cc_ctx x;
	int rc;

	if ((rc = open_ctx(s, &x)) < 0)
		return rc;
	if ((rc = cc_cache__alloc(x.c, CC_CODE, len, 16, near_program(&x, near), addr)) < 0) {
		rc = fail_cache(&x, rc);
	} else if ((rc = cc_cache__write(x.c, *addr, code, len)) < 0) {
		rc = fail_cache(&x, rc);
		cc_cache__free(x.c, *addr, len);	/* nothing of it stays */
		*addr = 0;
	}
	close_ctx(&x);
	return rc;
}

int padrone_cc_redirect(struct padrone_session *s, const char *function, uint64_t code,
			struct padrone_patch *out)
{
	struct padrone_patch dummy;
	struct cc_patch_stats st = { 0 };
	struct cc_ctx x;
	struct cc_func f;
	int rc;

	if ((rc = open_patch(s, &x, &out, &dummy)) < 0)
		return rc;
	if ((rc = padrone_session_find_patchable(s, function, &f)) == 0) {
		struct cc_patch_opts po = { .sz = sizeof po, .report = out->report,
					    .report_size = sizeof out->report, .stats = &st };
		rc = cc_cache__redirect(x.c, &f, code, &po);
		fill_patch(out, &f, &st);
		rc = rc < 0 ? fail_cache(&x, rc) : 0;
	}
	close_ctx(&x);
	return rc;
}

void padrone_cc_name_frames(struct padrone_session *s, const struct prof_frame *raw,
			    struct padrone_frame *frames, size_t n, char (*names)[PADRONE_CC_NAME])
{
	struct attach_target *t = padrone_session_target(s);
	struct cc_cache *c = NULL;
	struct cc_error err = { 0 };

	for (size_t i = 0; i < n; i++) {
		uint64_t start;
		if (raw[i].sym.bounds != PROF_BOUNDS_NONE)
			continue;	/* a symbol, an FDE, a perf map line names it */
		if (!c && (!t || cc_cache__open(t, NULL, &c, &err) < 0 || !cc_cache__exists(c)))
			break;
		if (cc_cache__describe(c, raw[i].pc, names[i], PADRONE_CC_NAME, &start) < 0)
			continue;
		frames[i].name = names[i];
		frames[i].offset = raw[i].pc - start;
		frames[i].module = "[code cache]";
	}
	cc_cache__close(c);
}
