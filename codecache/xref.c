/* Branches from anywhere in a module into the bytes a patch overwrites.
 *
 * A jmp rel32 written at a function's entry replaces its first
 * instructions; code elsewhere that branches into them (glibc's mempcpy
 * variants end in `jmp memmove+3`; a hand-written side entry) would then
 * land inside the jmp. The function's own control flow is checked from its
 * CFG (patch.c); this file finds everyone else's: every direct branch
 * (call, jmp, jcc) of the module's executable code, found by a linear
 * sweep with the decoder that starts again at every function start its
 * unwind tables list (an FDE's start: an instruction decoded across one
 * was no instruction), and the targets of the jump tables of every
 * function holding an indirect jump (from its CFG; the function found by
 * its symbol, .symtab included, or FDE). The bytes padrone itself wrote
 * (its directory's sites) are swept as they were before, so the index
 * describes the module's own code whatever is patched. One index per
 * module, made the first time a patch needs it (libc: about 0.15 s of CPU,
 * bench/xref) and kept in a cc_xref for the session.
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"
#include "cfg/cfg.h"
#include "profile/profile.h"

#include <Zydis/Zydis.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct xbranch {
	uint64_t to;
	uint64_t from : 63;
	uint64_t table : 1;	/* a jump table's entry, not a direct branch */
};

struct xmod {
	char *path;		/* "" for anonymous code */
	uint64_t inode;
	unsigned dev_major, dev_minor;
	struct cc_range *ranges;	/* its executable mappings */
	size_t nranges;
	struct xbranch *br;	/* sorted by to */
	size_t nbr, capbr;
	uint64_t *starts;	/* function starts, sorted */
	size_t nstarts;
};

struct cc_xref {
	struct xmod *mods;
	size_t n, cap;
};

int cc_xref__new(struct cc_xref **out)
{
	*out = calloc(1, sizeof **out);
	return *out ? 0 : -ENOMEM;
}

static void xmod_free(struct xmod *m)
{
	free(m->path);
	free(m->ranges);
	free(m->br);
	free(m->starts);
}

void cc_xref__free(struct cc_xref *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->n; i++)
		xmod_free(&x->mods[i]);
	free(x->mods);
	free(x);
}

/* ------------------------------------------------------------- module */

/* Mappings of the same module as mp: the file's executable ones, or mp
 * alone (anonymous code). */
static bool same_module(const struct attach_map *mp, const struct attach_map *q)
{
	if (!mp->path[0])
		return q == mp;
	return !strcmp(q->path, mp->path) && q->inode == mp->inode &&
	       q->dev_major == mp->dev_major && q->dev_minor == mp->dev_minor;
}

/* The executable ranges of the module holding addr, in *m (path, ids,
 * ranges; nothing indexed yet). */
static int module_of(struct cc_cache *c, uint64_t addr, struct xmod *m)
{
	struct attach_maps *maps;
	int rc = attach_maps__read(c->pid, &maps);

	memset(m, 0, sizeof *m);
	if (rc < 0)
		return cc__fail(c, CC_PHASE_REDIRECT, rc, "cannot read the maps of process %d: %s",
				c->pid, strerror(-rc));
	const struct attach_map *mp = attach_maps__find(maps, addr);
	if (!mp || !(mp->prot & ATTACH_MAP_X)) {
		attach_maps__free(maps);
		return cc__fail(c, CC_PHASE_REDIRECT, -EFAULT, "0x%" PRIx64 " is not in executable "
				"memory of process %d", addr, c->pid);
	}
	m->path = strdup(mp->path);
	m->inode = mp->inode;
	m->dev_major = mp->dev_major;
	m->dev_minor = mp->dev_minor;
	m->ranges = calloc(attach_maps__count(maps), sizeof *m->ranges);
	for (size_t i = 0; m->path && m->ranges && i < attach_maps__count(maps); i++) {
		const struct attach_map *q = attach_maps__at(maps, i);
		if ((q->prot & ATTACH_MAP_X) && same_module(mp, q))
			m->ranges[m->nranges++] = (struct cc_range){ q->start, q->end };
	}
	attach_maps__free(maps);
	if (!m->path || !m->ranges) {
		xmod_free(m);
		return cc__fail(c, CC_PHASE_REDIRECT, -ENOMEM, "out of memory");
	}
	return 0;
}

static bool same_mapping(const struct xmod *a, const struct xmod *b)
{
	return !strcmp(a->path, b->path) && a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && a->nranges == b->nranges &&
	       !memcmp(a->ranges, b->ranges, a->nranges * sizeof *a->ranges);
}

static bool in_module(const struct xmod *m, uint64_t a)
{
	for (size_t i = 0; i < m->nranges; i++)
		if (a >= m->ranges[i].lo && a < m->ranges[i].hi)
			return true;
	return false;
}

static int add_branch(struct xmod *m, uint64_t from, uint64_t to, bool table)
{
	if (!in_module(m, to))
		return 0;	/* calls out of it, through the PLT... */
	if (cc__grow(&m->br, &m->capbr, m->nbr + 1, sizeof *m->br, 4096) < 0)
		return -ENOMEM;
	m->br[m->nbr++] = (struct xbranch){ .to = to, .from = from, .table = table };
	return 0;
}

/* ---------------------------------------------------------- the sweep */

#define WINDOW (64u << 10)	/* code read at a time */

/* The module's bytes at [lo, hi), with padrone's own patches undone. */
static int original_code(struct cc_cache *c, uint64_t lo, uint64_t hi, uint8_t *b)
{
	int rc = cc__read(c, lo, b, hi - lo);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < CC_MAX_SITES; i++) {
		const struct cc_dir_site *s = &c->dir.sites[i];
		for (size_t k = 0; s->redir && k < s->len; k++)
			if (s->addr + k >= lo && s->addr + k < hi)
				b[s->addr + k - lo] = s->orig[k];
	}
	return 0;
}

/* An indirect jmp through a register or memory that is not a GOT slot
 * (rip-relative: a tail call through the PLT's slot). */
static bool indirect_jump(const ZydisDecodedInstruction *d)
{
	return d->mnemonic == ZYDIS_MNEMONIC_JMP && !d->raw.imm[0].is_relative &&
	       !(d->raw.modrm.mod == 0 && d->raw.modrm.rm == 5);
}

struct sweep {
	struct xmod *m;
	uint64_t *jumps;	/* indirect jmps seen */
	size_t njumps, capjumps;
};

static int note_jump(struct sweep *s, uint64_t pc)
{
	if (cc__grow(&s->jumps, &s->capjumps, s->njumps + 1, sizeof *s->jumps, 64) < 0)
		return -ENOMEM;
	s->jumps[s->njumps++] = pc;
	return 0;
}

/* Decode [lo, hi) from its start, and again from each function start
 * within it (an instruction decoded across one was not one), a window of
 * its code at a time. */
static int sweep_range(struct cc_cache *c, struct sweep *s, uint64_t lo, uint64_t hi)
{
	const struct xmod *m = s->m;
	uint8_t *buf = malloc(WINDOW);
	uint64_t at = 0, end = 0;	/* buf holds [at, end) */
	ZydisDecoder dec;
	size_t k = 0;
	int rc = 0;

	if (!buf)
		return cc__fail(c, CC_PHASE_REDIRECT, -ENOMEM, "out of memory");
	/* lengths, mnemonics and raw fields are all it needs */
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	ZydisDecoderEnableMode(&dec, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
	while (k < m->nstarts && m->starts[k] < lo)
		k++;
	for (uint64_t pc = lo; pc < hi && rc == 0;) {
		if (k < m->nstarts && m->starts[k] <= pc) {
			pc = m->starts[k];
			while (k < m->nstarts && m->starts[k] <= pc)
				k++;
		}
		if (pc < at || pc + ZYDIS_MAX_INSTRUCTION_LENGTH > end) {
			if (end < hi || pc < at) {
				at = pc;
				end = hi - at < WINDOW ? hi : at + WINDOW;
				if ((rc = original_code(c, at, end, buf)) < 0) {
					cc__fail(c, CC_PHASE_REDIRECT, rc, "cannot read the code of %s at "
						 "0x%" PRIx64 ": %s", *m->path ? m->path : "the process",
						 at, strerror(-rc));
					break;
				}
			}
		}
		ZydisDecodedInstruction d;
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, buf + (pc - at), end - pc,
								 &d))) {
			pc++;
			continue;
		}
		if (d.raw.imm[0].is_relative) {	/* call, jmp, jcc, loop, jrcxz, xbegin */
			uint64_t to = pc + d.length + (uint64_t)d.raw.imm[0].value.s;
			rc = add_branch(s->m, pc, to, false);
		} else if (indirect_jump(&d)) {
			rc = note_jump(s, pc);
		}
		pc += d.length;
	}
	if (rc == -ENOMEM)
		cc__fail(c, CC_PHASE_REDIRECT, rc, "out of memory");
	free(buf);
	return rc;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The function holding pc: its symbol or FDE (prof_symbolizer: .symtab
 * too, for hand-written code without unwind information), else what the
 * reader knows; 0 if nothing does. */
static uint64_t entry_of(struct prof_symbolizer *sym, struct cfg_reader *r, uint64_t pc)
{
	struct prof_sym ps;
	uint64_t entry;

	if (sym && prof_symbolizer__lookup(sym, pc, &ps) == 0 && ps.bounds != PROF_BOUNDS_CALLCHAIN &&
	    pc >= ps.start && pc < ps.end)
		return ps.start;
	return cfg_reader__function_at(r, pc, &entry) == 0 && entry != pc ? entry : 0;
}

/* The jump tables of the functions the sweep saw an indirect jmp in. */
static int add_tables(struct cc_cache *c, struct cfg_reader *r, struct sweep *s)
{
	struct cfg_build_opts bo = { .sz = sizeof bo, .no_callee_analysis = true };
	struct prof_symbolizer *sym = NULL;
	struct prof_error err;
	size_t n = 0;
	int rc = 0;

	if (prof_symbolizer__new(c->pid, &sym, &err) < 0)
		sym = NULL;	/* the reader's FDEs and dynamic symbols, then */
	for (size_t i = 0; i < s->njumps; i++) {
		uint64_t e = entry_of(sym, r, s->jumps[i]);
		if (e)
			s->jumps[n++] = e;
	}
	prof_symbolizer__free(sym);
	qsort(s->jumps, n, sizeof *s->jumps, u64_cmp);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct cfg_function *f;
		if ((i && s->jumps[i] == s->jumps[i - 1]) ||
		    cfg_function__build(r, s->jumps[i], &bo, &f) < 0)
			continue;
		for (size_t t = 0; t < cfg_function__jump_table_count(f) && rc == 0; t++) {
			const struct cfg_jump_table *jt = cfg_function__jump_table(f, t);
			for (uint32_t e = 0; e < jt->target_count && rc == 0; e++)
				rc = add_branch(s->m, jt->at, jt->targets[e], true);
		}
		cfg_function__free(f);
	}
	if (rc < 0)
		cc__fail(c, CC_PHASE_REDIRECT, rc, "out of memory");
	return rc;
}

static int by_target(const void *a, const void *b)
{
	const struct xbranch *x = a, *y = b;
	return x->to != y->to ? (x->to > y->to) - (x->to < y->to) : (x->from > y->from) -
		(x->from < y->from);
}

/* Where its functions start: the FDEs its unwind tables list (cfg/'s own
 * list also looks for cold parts, which costs a sweep of every function);
 * none for anonymous code: each mapping is swept from its start. */
static void function_starts(struct cc_cache *c, struct cfg_reader *r, struct xmod *m,
			    uint64_t addr)
{
	struct prof_error err;

	if (c->t && (c->uw || prof_unwinder__new(c->t, &c->uw, &err) == 0) &&
	    prof_unwinder__sync(c->uw) == 0 &&
	    prof_unwinder__fde_starts(c->uw, addr, &m->starts, &m->nstarts) == 0)
		return;
	cfg_reader__function_starts(r, addr, &m->starts, &m->nstarts);
}

static int index_module(struct cc_cache *c, struct xmod *m, uint64_t addr)
{
	struct sweep s = { .m = m };
	struct cfg_reader *r;
	int rc;

	if ((rc = cc__open_cfg(c, &r)) < 0)
		return cc__fail(c, CC_PHASE_REDIRECT, rc, "cannot read the code of process %d: %s",
				c->pid, strerror(-rc));
	function_starts(c, r, m, addr);
	for (size_t i = 0; i < m->nranges && rc == 0; i++)
		rc = sweep_range(c, &s, m->ranges[i].lo, m->ranges[i].hi);
	if (rc == 0)
		rc = add_tables(c, r, &s);
	free(s.jumps);
	cfg_reader__free(r);
	if (rc == 0)
		qsort(m->br, m->nbr, sizeof *m->br, by_target);
	return rc;
}

/* The index of the module holding addr: kept, or made now. */
static int module_index(struct cc_cache *c, uint64_t addr, struct xmod **out)
{
	struct cc_xref *x = c->xref;
	struct xmod m;
	int rc;

	if ((rc = module_of(c, addr, &m)) < 0)
		return rc;
	for (size_t i = 0; i < x->n; i++)
		if (same_mapping(&x->mods[i], &m)) {
			xmod_free(&m);
			*out = &x->mods[i];
			return 0;
		}
	if ((rc = index_module(c, &m, addr)) < 0) {
		xmod_free(&m);
		return rc;
	}
	if (cc__grow(&x->mods, &x->cap, x->n + 1, sizeof *x->mods, 8) < 0) {
		xmod_free(&m);
		return cc__fail(c, CC_PHASE_REDIRECT, -ENOMEM, "out of memory");
	}
	x->mods[x->n] = m;
	*out = &x->mods[x->n++];
	return 0;
}

/* ------------------------------------------------------------- query */

/* The function start at or before a (0: none known). */
static uint64_t function_of(const struct xmod *m, uint64_t a)
{
	size_t lo = util_upper_bound(m->starts, m->nstarts, sizeof *m->starts, 0, a);

	return lo ? m->starts[lo - 1] : 0;
}

/* "F+0xN" for a branch at a, F its symbol (or sub_ADDR, as reports name
 * code without one). */
static void name_of(struct cc_cache *c, const struct xmod *m, uint64_t a, char *buf, size_t size)
{
	struct prof_symbolizer *sym;
	struct prof_error err;
	struct prof_sym ps;
	uint64_t func = function_of(m, a);

	if (prof_symbolizer__new(c->pid, &sym, &err) == 0) {
		bool named = prof_symbolizer__lookup(sym, a, &ps) == 0 &&
			     ps.bounds != PROF_BOUNDS_CALLCHAIN && a >= ps.start && a < ps.end;
		if (named)
			snprintf(buf, size, "%s+0x%" PRIx64, ps.name, a - ps.start);
		prof_symbolizer__free(sym);
		if (named)
			return;
	}
	if (func)
		snprintf(buf, size, "sub_%" PRIx64 "+0x%" PRIx64, func, a - func);
	else
		snprintf(buf, size, "code at 0x%" PRIx64, a);
}

int cc__xref_into(struct cc_cache *c, uint64_t lo, uint64_t hi, const struct cc_range *skip,
		  struct cc_xhit *hit)
{
	struct xmod *m = NULL;
	int rc;

	memset(hit, 0, sizeof *hit);
	if (!c->xref) {
		if ((rc = cc_xref__new(&c->xref)) < 0)
			return cc__fail(c, CC_PHASE_REDIRECT, rc, "out of memory");
		c->own_xref = true;
	}
	if ((rc = module_index(c, lo, &m)) < 0)
		return rc;
	size_t a = 0, b = m->nbr;
	while (a < b) {		/* the first branch to lo or beyond */
		size_t mid = a + (b - a) / 2;
		if (m->br[mid].to < lo)
			a = mid + 1;
		else
			b = mid;
	}
	for (; a < m->nbr && m->br[a].to < hi; a++) {
		const struct xbranch *br = &m->br[a];
		if (br->from >= skip->lo && br->from < skip->hi)
			continue;	/* moves with the bytes it branches within */
		if (!hit->count++) {
			hit->from = br->from;
			hit->to = br->to;
			hit->table = br->table;
			name_of(c, m, br->from, hit->where, sizeof hit->where);
		}
	}
	return hit->count > 0;
}

int cc__xref_each_to(struct cc_cache *c, uint64_t to, cc_xref_fn fn, void *arg)
{
	struct xmod *m = NULL;
	int rc;

	if (!c->xref) {
		if ((rc = cc_xref__new(&c->xref)) < 0)
			return cc__fail(c, CC_PHASE_REDIRECT, rc, "out of memory");
		c->own_xref = true;
	}
	if ((rc = module_index(c, to, &m)) < 0)
		return rc;
	size_t a = 0, b = m->nbr;
	while (a < b) {		/* the first branch to `to` */
		size_t mid = a + (b - a) / 2;
		if (m->br[mid].to < to)
			a = mid + 1;
		else
			b = mid;
	}
	for (; a < m->nbr && m->br[a].to == to; a++)
		if (!m->br[a].table && (rc = fn(arg, m->br[a].from, function_of(m, m->br[a].from))))
			return rc;
	return 0;
}

void cc__code_name(struct cc_cache *c, uint64_t a, char *buf, size_t size)
{
	struct prof_symbolizer *sym;
	struct prof_error err;
	struct prof_sym ps;

	snprintf(buf, size, "0x%" PRIx64, a);
	if (prof_symbolizer__new(c->pid, &sym, &err) < 0)
		return;
	if (prof_symbolizer__lookup(sym, a, &ps) == 0 && ps.bounds != PROF_BOUNDS_CALLCHAIN &&
	    a >= ps.start && a < ps.end)
		snprintf(buf, size, "%s+0x%" PRIx64, ps.name, a - ps.start);
	prof_symbolizer__free(sym);
}
