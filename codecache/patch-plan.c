/* Planning a redirection, with the world running: the displaced first
 * instructions relocated, functions too short for the jump or branching
 * into the bytes it covers refused (their CFG read from the process), the
 * direct calls to the function in given callers found. */
#include "codecache/patch.h"
#include "cfg/cfg.h"

#include <Zydis/Zydis.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		cc__say(&j->rep, "warning: the control flow of %s is incomplete (%s at 0x%" PRIx64
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
		cc__say(&j->rep, "%s: no symbol size; %" PRIu64 " bytes from its control flow", j->name,
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
	cc__say(&j->rep, "entry: jmp rel32 at 0x%" PRIx64 " over %zu bytes (%zu instructions)%s",
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
		cc__say(&p->j->rep, "%s: cannot retarget the short branch at 0x%" PRIx64, p->what, at);
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
		cc__say(&j->rep, "%s at 0x%" PRIx64 ": %zu direct call%s to %s", what, f->addr, p.found,
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
	if (!UTIL_OPTS_COPY(&j->o, opts)) {
		free(j);
		return cc__fail(c, CC_PHASE_REDIRECT, -EINVAL, UTIL_OPTS_UNKNOWN);
	}
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
