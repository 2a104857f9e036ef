/* The verbs on a function: replace it by loaded code, redirect it to code
 * already in the cache, restore it, list what is redirected. Each is the
 * phases in order -- allocate, load, write (the new code, the detour), then
 * redirect (patch.c) -- and undoes its own earlier phases when a later one
 * fails, so a refusal leaves the target as it was.
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An exception thrown by code the replacement calls would unwind into it,
 * find no unwind information there (its .eh_frame is not registered with
 * the target's unwinder: that would mean calling into the target's libgcc
 * from a stop point) and abort the process. Code that calls nothing cannot
 * be unwound through. force: the user says nothing throws there. */
static int check_unwinding(struct cc_cache *c, const char *name, const struct cc_image *im,
			   bool force)
{
	char lib[256], why[320];
	int rc;

	if (force || !cc_image__calls_out(im, why, sizeof why))
		return 0;
	if ((rc = cc__maps_unwinder(c, lib, sizeof lib)) < 0)
		return cc__fail(c, CC_PHASE_LOAD, rc, "cannot read the maps of process %d", c->pid);
	if (rc == 0)
		return 0;
	return cc__fail(c, CC_PHASE_LOAD, -ENOTSUP, "process %d maps %s, and the replacement of %s "
			"calls other code (%s): an exception thrown from there through it would "
			"abort the process, since padrone does not make its unwind information "
			"known to the process's unwinder; use -f if nothing throws through %s",
			c->pid, lib, name, why, name);
}

/* What the code to load must pass before anything is allocated or written,
 * the same for a dry run. */
static int check_image(struct cc_cache *c, const char *name, const struct cc_image *im,
		       bool force)
{
	struct cc_error err;
	int rc;

	if ((rc = cc_image__check_cpu(im, &err)) < 0)
		return cc__fail(c, CC_PHASE_LOAD, rc, "%s", err.msg);
	return check_unwinding(c, name, im, force);
}

/* Registers the module's callers of fn keep across their calls, because fn
 * leaves them intact (-fipa-ra), and the new code (code, linked to run at
 * addr) would change: a gate saving them goes between fn and the new code's
 * entry. *gate: where it is (0: none needed); dry: only say so. */
static int place_gate(struct cc_cache *c, struct cc_job *j, const struct cc_func *fn,
		      const uint8_t *code, size_t size, uint64_t addr, uint64_t entry, bool dry,
		      uint64_t *gate, size_t *gsize)
{
	const char *name = fn->name ? fn->name : "the function";
	uint32_t need;
	char why[320], regs[160];
	int rc;

	*gate = 0;
	if ((rc = cc__ipara_need(c, fn, code, size, addr, entry, &need, why, sizeof why)) < 0 ||
	    !need)
		return rc;
	cc__regs_text(need, regs, sizeof regs);
	*gsize = cc__gate_encode(need, 0, 0, NULL);
	if (dry) {
		cc__job_say(j, "callers rely on %s leaving %s intact (-fipa-ra: %s): would put a gate "
			    "of %zu bytes saving them around the new code", name, regs, why, *gsize);
		return 0;
	}
	if ((rc = cc_cache__alloc(c, CC_CODE, *gsize, 16, fn->addr, gate)) < 0)
		return rc;
	uint8_t *buf = malloc(*gsize);
	if (!buf)
		rc = cc__fail(c, CC_PHASE_WRITE, -ENOMEM, "out of memory");
	else if (cc__gate_encode(need, *gate, entry, buf) != *gsize)
		rc = cc__fail(c, CC_PHASE_WRITE, -ERANGE, "the gate for %s at 0x%" PRIx64 " cannot "
			      "reach the new code at 0x%" PRIx64, name, *gate, entry);
	else
		rc = cc_cache__write(c, *gate, buf, *gsize);
	free(buf);
	if (rc < 0) {
		cc_cache__free(c, *gate, *gsize);
		*gate = 0;
		return rc;
	}
	cc__job_say(j, "callers rely on %s leaving %s intact (-fipa-ra: %s): a gate at 0x%" PRIx64
		    " saves them around the new code", name, regs, why, *gate);
	return 0;
}

/* A shared object's pages that are not executable, as zeros (which decode
 * to instructions writing no register), for the analysis of its code. */
static void blank_data(const struct cc_image *im, uint8_t *code, size_t size)
{
	struct cc_image_layout lay;

	cc_image__layout(im, &lay);
	for (size_t i = 0; lay.fixed && i < lay.nsegs; i++)
		if (!(lay.segs[i].prot & CC_PROT_X) && lay.segs[i].off < size)
			memset(code + lay.segs[i].off, 0, lay.segs[i].off + lay.segs[i].size > size ?
			       size - lay.segs[i].off : lay.segs[i].size);
}

/* place_gate for code loaded in the target: read back as written. */
static int place_gate_loaded(struct cc_cache *c, struct cc_job *j, const struct cc_func *fn,
			     const struct cc_image *im, const struct cc_loaded *l, uint64_t *gate,
			     size_t *gsize)
{
	uint8_t *code = malloc(l->code_size);
	int rc;

	if (!code)
		return cc__fail(c, CC_PHASE_LOAD, -ENOMEM, "out of memory");
	rc = cc__read(c, l->code, code, l->code_size);
	blank_data(im, code, l->code_size);
	if (rc < 0)
		rc = cc__fail(c, CC_PHASE_LOAD, rc, "cannot read back the code loaded at 0x%" PRIx64,
			      l->code);
	else
		rc = place_gate(c, j, fn, code, l->code_size, l->code, l->entry, false, gate, gsize);
	free(code);
	return rc;
}

int cc_cache__replace(struct cc_cache *c, const struct cc_func *fn, const struct cc_image *im,
		      cc_resolve_fn resolve, void *arg, const struct cc_patch_opts *opts)
{
	struct cc_patch_opts o = { .sz = sizeof o };
	struct cc_dir_redir *r;
	struct cc_job *j;
	struct cc_loaded l = { 0 };
	uint64_t copy = 0, gate = 0;
	size_t dsize = 0, gsize = 0;
	char source[160];
	int rc;

	if (!UTIL_OPTS_COPY(&o, opts))
		return cc__fail(c, CC_PHASE_REDIRECT, -EINVAL, UTIL_OPTS_UNKNOWN);
	const char *name = fn->name ? fn->name : "the function";
	if ((r = cc__redir_find(c, fn->addr, CC_REDIR_REPLACE)))
		return cc__fail(c, CC_PHASE_REDIRECT, -EEXIST, "%s is already replaced (by %s); "
				"restore it first", name, r->source[0] ? r->source : "other code");
	if ((r = cc__redir_find(c, fn->addr, CC_REDIR_MEASURE)))
		return cc__redir_stale(r) ? cc__fail_stale(c, CC_PHASE_REDIRECT, r, name) :
			cc__fail(c, CC_PHASE_REDIRECT, -EBUSY, "%s is being measured (by padrone "
				 "process %d)", name, (int)r->owner_pid);
	if (!o.source) {
		snprintf(source, sizeof source, "%s:%s", cc_image__path(im), cc_image__symbol(im));
		o.source = source;
	}
	if ((rc = check_image(c, name, im, o.force)) < 0)
		return rc;
	if ((rc = cc__job_new(c, fn, CC_REDIR_REPLACE, &o, &j)) < 0)
		return rc;
	if (o.dry_run) {
		/* link at stand-in addresses: the symbols must resolve */
		struct cc_image_layout lay;
		struct cc_error err;
		cc_image__layout(im, &lay);
		uint8_t *cb = calloc(1, lay.code_size + 1), *db = calloc(1, lay.data_size + 1);
		uint64_t entry;
		rc = cb && db ? cc_image__link(im, fn->addr + (64 << 20), fn->addr + (128 << 20),
					       resolve, arg, cb, db, &entry, &err) : -ENOMEM;
		if (rc < 0) {
			free(cb);
			free(db);
			cc__fail(c, CC_PHASE_LOAD, rc, "%s", rc == -ENOMEM ? "out of memory" : err.msg);
			goto out;
		}
		cc__job_say(j, "would load %s (%zu bytes of code, %zu of data) within +-2 GiB of %s",
		    o.source, lay.code_size, lay.data_size, name);
		blank_data(im, cb, lay.code_size);
		rc = place_gate(c, j, fn, cb, lay.code_size, fn->addr + (64 << 20), entry, true,
				&gate, &gsize);
		free(cb);
		free(db);
		if (rc < 0)
			goto out;
		rc = cc__job_apply(j, fn->addr + (64 << 20), 0, NULL, 0, 0, NULL);
		goto out;
	}
	if ((rc = cc_cache__load(c, im, fn->addr, resolve, arg, &l)) < 0)
		goto out;
	if (l.data_size)
		cc__job_say(j, "loaded %s: entry 0x%" PRIx64 ", %" PRIu64 " bytes of code at 0x%" PRIx64
		    ", %" PRIu64 " of data at 0x%" PRIx64, o.source, l.entry, l.code_size, l.code,
		    l.data_size, l.data);
	else
		cc__job_say(j, "loaded %s: entry 0x%" PRIx64 ", %" PRIu64 " bytes of code at 0x%" PRIx64
		    ", no data", o.source, l.entry, l.code_size, l.code);
	if ((rc = place_gate_loaded(c, j, fn, im, &l, &gate, &gsize)) < 0)
		goto out;
	if ((rc = cc__job_place_detour(j, &copy, &dsize)) < 0)
		goto out;
	struct cc_dir_block owned[4];
	size_t n = 0;
	owned[n++] = (struct cc_dir_block){ l.code, l.code_size, CC_CODE, 0 };
	if (l.data)
		owned[n++] = (struct cc_dir_block){ l.data, l.data_size, CC_DATA, 0 };
	if (copy)
		owned[n++] = (struct cc_dir_block){ copy, dsize, CC_CODE, 0 };
	if (gate)
		owned[n++] = (struct cc_dir_block){ gate, gsize, CC_CODE, 0 };
	rc = cc__job_apply(j, gate ? gate : l.entry, copy, owned, n, 0, NULL);
out:
	if (rc < 0 || o.dry_run) {
		if (copy)
			cc_cache__free(c, copy, dsize);
		if (gate)
			cc_cache__free(c, gate, gsize);
		cc_cache__unload(c, &l);
	}
	cc__job_free(j);
	return rc;
}

int cc_cache__redirect(struct cc_cache *c, const struct cc_func *fn, uint64_t dest,
		       const struct cc_patch_opts *opts)
{
	struct cc_patch_opts o = { .sz = sizeof o };
	struct cc_dir_redir *r;
	struct cc_job *j;
	uint64_t copy = 0;
	size_t dsize = 0;
	int rc;

	if (!UTIL_OPTS_COPY(&o, opts))
		return cc__fail(c, CC_PHASE_REDIRECT, -EINVAL, UTIL_OPTS_UNKNOWN);
	const char *name = fn->name ? fn->name : "the function";
	if ((r = cc__redir_find(c, fn->addr, CC_REDIR_MEASURE)) && cc__redir_stale(r))
		return cc__fail_stale(c, CC_PHASE_REDIRECT, r, name);
	if ((r = cc__redir_find(c, fn->addr, 0)))
		return cc__fail(c, CC_PHASE_REDIRECT, -EEXIST, "%s is already %s; restore it first",
				name, r->kind == CC_REDIR_MEASURE ? "being measured" : "replaced");
	if ((rc = cc__job_new(c, fn, CC_REDIR_REPLACE, &o, &j)) < 0)
		return rc;
	if ((rc = cc__job_place_detour(j, &copy, &dsize)) == 0) {
		struct cc_dir_block owned = { copy, dsize, CC_CODE, 0 };
		rc = cc__job_apply(j, dest, copy, &owned, copy ? 1 : 0, 0, NULL);
	}
	if (rc < 0 && copy)
		cc_cache__free(c, copy, dsize);
	cc__job_free(j);
	return rc;
}

/* The sum of two undos' figures (a stale stub, then the replacement). */
static void add_stats(struct cc_patch_stats *to, const struct cc_patch_stats *a,
		      const struct cc_patch_stats *b)
{
	to->stop_ns = a->stop_ns + b->stop_ns;
	to->to_stop_ns = a->to_stop_ns + b->to_stop_ns;
	to->threads = a->threads > b->threads ? a->threads : b->threads;
	to->moved = a->moved + b->moved;
	to->retries = a->retries + b->retries;
	to->sites = a->sites + b->sites;
	to->kept_code = a->kept_code || b->kept_code;
	to->looks = a->looks + b->looks;
	to->look_max_ns = a->look_max_ns > b->look_max_ns ? a->look_max_ns : b->look_max_ns;
}

/* Where the next undo's report lines go: after those already there. */
static void report_rest(struct cc_patch_opts *o, char *buf, size_t size)
{
	size_t used = buf ? strlen(buf) : 0;

	o->report = buf ? buf + used : NULL;
	o->report_size = buf ? size - used : 0;
}

/* Threads in the detour (the relocated first bytes) go back to the
 * original, so that it can be freed at once; if the map cannot be made
 * again, they finish there and it is freed once they have left. */
static int undo_replacement(struct cc_cache *c, struct cc_dir_redir *r,
			    const struct cc_patch_opts *o)
{
	struct cc_reloc *prefix = NULL;
	char keep[sizeof c->errmsg];

	memcpy(keep, c->errmsg, sizeof keep);
	if (r->detour && cc__redir_prefix(c, r, &prefix) < 0)
		memcpy(c->errmsg, keep, sizeof keep);	/* not a failure */
	struct cc_undo_stub back = { 0, 0, prefix, r->detour };
	int rc = cc__redir_is_instr(r) ? cc__instr_undo_left(c, r, o, prefix ? &back : NULL) :
		cc__undo(c, r->id, o, prefix ? &back : NULL);
	cc_reloc__free(prefix);
	return rc;
}

/* A replacement, and a measuring stub whose padrone is gone (killed while
 * measuring; the stub was put over the replacement if both are there): the
 * stub first, then the replacement. A live measurement is left alone. */
int cc_cache__restore(struct cc_cache *c, uint64_t func, const char *name,
		      const struct cc_patch_opts *opts)
{
	struct cc_dir_redir *r = cc__redir_find(c, func, CC_REDIR_REPLACE);
	struct cc_dir_redir *m = cc__redir_find(c, func, CC_REDIR_MEASURE);
	struct cc_patch_opts o = { .sz = sizeof o };
	struct cc_patch_stats st[2] = { { 0 }, { 0 } };
	char label[96];
	int rc = 0;

	if (!UTIL_OPTS_COPY(&o, opts))
		return cc__fail(c, CC_PHASE_RESTORE, -EINVAL, UTIL_OPTS_UNKNOWN);
	snprintf(label, sizeof label, "%s", name ? name : r ? r->name : m ? m->name : "the function");
	if (!r && !m)
		return cc__fail(c, CC_PHASE_RESTORE, -ENOENT, "%s (0x%" PRIx64 ") is not replaced",
				label, func);
	if (m && !cc__redir_stale(m))
		return cc__fail(c, CC_PHASE_RESTORE, -EBUSY, "%s is being measured (by padrone "
				"process %d)", label, (int)m->owner_pid);
	char *buf = o.report_size ? o.report : NULL;
	size_t size = o.report_size;
	struct cc_patch_stats *stats = o.stats;
	if (buf)
		buf[0] = '\0';
	if (m) {
		if (buf)
			snprintf(buf, size, "%s %s to a measuring stub of padrone process %d, which is "
				 "gone: taking it out\n", label, r ? "is also redirected" :
				 "is redirected", (int)m->owner_pid);
		report_rest(&o, buf, size);
		o.stats = &st[0];
		rc = cc__measure_undo_stale(c, m, &o);
	}
	if (rc == 0 && r && m && o.dry_run) {
		report_rest(&o, buf, size);
		if (buf)
			snprintf(o.report, o.report_size, "would then put back the code %s replaced\n",
				 r->source[0] ? r->source : "other code");
	} else if (rc == 0 && r) {
		report_rest(&o, buf, size);
		o.stats = &st[1];
		rc = undo_replacement(c, r, &o);
	}
	if (stats)
		add_stats(stats, &st[0], &st[1]);
	return rc;
}

int cc_cache__redirects(struct cc_cache *c, struct cc_redirect_info *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < CC_MAX_REDIRS; i++) {
		const struct cc_dir_redir *r = &c->dir.redirs[i];
		if (!r->id)
			continue;
		if (n < max) {
			struct cc_redirect_info *o = &out[n];
			memset(o, 0, sizeof *o);
			o->measure = r->kind == CC_REDIR_MEASURE;
			o->func = r->func;
			o->func_size = r->func_size;
			o->dest = r->dest;
			o->stop_ns = r->stop_ns;
			snprintf(o->name, sizeof o->name, "%s", r->name);
			snprintf(o->source, sizeof o->source, "%s", r->source);
			o->owner = r->owner_pid;
			o->stale = cc__redir_stale(r);
			for (size_t k = 0; k < CC_MAX_SITES; k++)
				o->sites += c->dir.sites[k].redir == r->id;
		}
		n++;
	}
	return (int)n;
}
