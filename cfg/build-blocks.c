/* build-blocks.c: a function's explored instructions (build.c) made into
 * what cfg.h shows: basic blocks, edges, address ranges (with the dead
 * padding between them), sorted call and jump-table lists; then
 * dominators and the loop forest. */
#include "cfg/build.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the function */

static int u64cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int callcmp(const void *a, const void *b)
{
	const struct cfg_call *x = a, *y = b;
	return x->at < y->at ? -1 : x->at > y->at;
}

static int add_edge(struct cfg_function *f, size_t *cap, uint32_t from, int32_t to,
		    uint64_t to_addr, enum cfg_edge_kind k)
{
	/* one edge per (from, to, kind) */
	for (size_t e = f->blocks[from].first_succ; e < f->nedges; e++)
		if (f->edges[e].to_addr == to_addr && f->edges[e].kind == k)
			return 0;
	if (cfg__grow(&f->edges, cap, f->nedges + 1, sizeof(*f->edges)) < 0)
		return -ENOMEM;
	f->edges[f->nedges++] = (struct cfg_edge){ from, to, to_addr, k };
	f->blocks[from].succ_count++;
	return 0;
}

static int block_of(const struct fb *b, uint64_t addr)
{
	int32_t i = find(b, addr);
	return i >= 0 ? b->iv[i].block : -1;
}

static int make_edges(struct fb *b, struct cfg_function *f)
{
	size_t cap = 0;
	for (size_t k = 0; k < f->nblocks; k++) {
		struct cfg_block *bl = &f->blocks[k];
		bl->first_succ = (uint32_t)f->nedges;
		bl->succ_count = 0;
		const struct cfg_finsn *last = &f->insns[f->block_insn[k] + bl->insn_count - 1];
		int32_t i = find(b, last->addr);
		const struct bi *x = &b->iv[i];
		const struct cfg_insn *d = x->d;
		uint64_t next = d->addr + d->len;
		int err = 0;
		switch (d->kind) {
		case CFG_I_JCC:
			if (x->tail)
				err = add_edge(f, &cap, (uint32_t)k, -1, d->target, CFG_EDGE_TAIL_CALL);
			else if (block_of(b, d->target) >= 0)
				err = add_edge(f, &cap, (uint32_t)k, block_of(b, d->target), d->target,
					       CFG_EDGE_TAKEN);
			if (!err && block_of(b, next) >= 0)
				err = add_edge(f, &cap, (uint32_t)k, block_of(b, next), next,
					       CFG_EDGE_NOT_TAKEN);
			break;
		case CFG_I_JMP:
			if (x->tail)
				err = add_edge(f, &cap, (uint32_t)k, -1, d->target, CFG_EDGE_TAIL_CALL);
			else if (block_of(b, d->target) >= 0)
				err = add_edge(f, &cap, (uint32_t)k, block_of(b, d->target), d->target,
					       CFG_EDGE_JUMP);
			break;
		case CFG_I_JMP_IND:
			if (x->table >= 0) {
				const struct cfg_jt_result *t = &b->tv[x->table];
				for (uint32_t e = 0; !err && e < t->count; e++)
					if (block_of(b, t->targets[e]) >= 0)
						err = add_edge(f, &cap, (uint32_t)k,
							       block_of(b, t->targets[e]),
							       t->targets[e], CFG_EDGE_JUMP_TABLE);
			}
			break;
		case CFG_I_CALL:
		case CFG_I_CALL_IND:
			if (!x->noret && block_of(b, next) >= 0)
				err = add_edge(f, &cap, (uint32_t)k, block_of(b, next), next,
					       CFG_EDGE_CALL_RETURN);
			break;
		case CFG_I_PLAIN:
		case CFG_I_SYSCALL:
			if (x->ft_next >= 0 && !x->terminal)
				err = add_edge(f, &cap, (uint32_t)k, b->iv[x->ft_next].block,
					       b->iv[x->ft_next].d->addr, CFG_EDGE_FALLTHROUGH);
			break;
		default:
			break;
		}
		if (err)
			return err;
	}
	return 0;
}

static int make_blocks(struct fb *b, struct cfg_function *f)
{
	uint64_t *lead = malloc((b->ni + 1) * sizeof(*lead));
	if (!lead)
		return -ENOMEM;
	size_t nl = 0;
	for (size_t i = 0; i < b->ni; i++)
		if (b->iv[i].leader)
			lead[nl++] = b->iv[i].d->addr;
	qsort(lead, nl, sizeof(*lead), u64cmp);
	if (nl > b->o.max_blocks) {
		cfg__fb_error(b, CFG_ERR_LIMIT, lead[b->o.max_blocks], "more than %u blocks",
			 b->o.max_blocks);
		nl = b->o.max_blocks;
	}
	f->blocks = calloc(nl ? nl : 1, sizeof(*f->blocks));
	f->block_insn = calloc(nl ? nl : 1, sizeof(*f->block_insn));
	f->insns = malloc((b->ni ? b->ni : 1) * sizeof(*f->insns));
	if (!f->blocks || !f->block_insn || !f->insns) {
		free(lead);
		return -ENOMEM;
	}
	for (size_t k = 0; k < nl; k++) {
		int32_t i = find(b, lead[k]);
		struct cfg_block *bl = &f->blocks[k];
		bl->start = lead[k];
		bl->idom = -1;
		bl->loop = -1;
		f->block_insn[k] = (uint32_t)f->ninsns;
		while (i >= 0) {
			const struct cfg_insn *d = b->iv[i].d;
			b->iv[i].block = (int32_t)k;
			struct cfg_finsn *fi = &f->insns[f->ninsns++];
			fi->addr = d->addr;
			fi->len = d->len;
			memcpy(fi->bytes, d->bytes, sizeof(fi->bytes));
			bl->insn_count++;
			bl->end = d->addr + d->len;
			i = b->iv[i].ft_next;
			if (i >= 0 && b->iv[i].leader)
				break;
			/* an instruction already in a block (shared tail of
			 * overlapping streams) starts its own */
			if (i >= 0 && b->iv[i].block >= 0)
				break;
		}
		if (lead[k] == b->entry)
			f->entry_block = k;
	}
	f->nblocks = nl;
	free(lead);
	return 0;
}

/* Ranges: blocks merged when adjacent, overlapping, or separated only by
 * padding (nops, int3). */
static bool padding_only(struct cfg_reader *r, uint64_t from, uint64_t to)
{
	if (to - from > 64)
		return false;
	while (from < to) {
		const struct cfg_insn *d = cfg__reader_insn(r, from);
		if (!d || !d->nop || d->len == 0)
			return false;
		from += d->len;
	}
	return from == to;
}

static bool starts_function(struct cfg_reader *r, uint64_t addr)
{
	const struct cfg_fde *fde = cfg__reader_fde_at(r, addr);
	return fde && fde->start == addr;
}

/* Does block k end in a call that does not return, an exit system call or
 * a trap (code after it is dead, though compilers and authors put some
 * there: glibc's check_one_fd loops on hlt with a jmp back to it)? */
static bool ends_dead(struct fb *b, const struct cfg_function *f, size_t k)
{
	const struct cfg_block *bl = &f->blocks[k];
	if (bl->succ_count)
		return false;
	const struct cfg_finsn *li = &f->insns[f->block_insn[k] + bl->insn_count - 1];
	const struct cfg_insn *d = cfg__reader_insn(b->r, li->addr);
	return d && (d->kind == CFG_I_CALL || d->kind == CFG_I_CALL_IND ||
		     d->kind == CFG_I_SYSCALL || (d->kind == CFG_I_HALT && !d->nop));
}

/* Dead code after a dead end that runs to the end of the function's FDE
 * (the epilogue compilers keep after a call they do not know to be
 * noreturn, e.g. one of two mutually recursive functions that exit): the
 * FDE says it is the function's. */
static bool dead_tail(struct fb *b, uint64_t from)
{
	if (b->lo >= b->hi || from < b->lo || from >= b->hi || b->hi - from > 256)
		return false;
	while (from < b->hi) {
		const struct cfg_insn *d = cfg__reader_insn(b->r, from);
		if (!d || d->kind == CFG_I_INVALID || d->kind == CFG_I_UNREADABLE || !d->len ||
		    find(b, from) >= 0)
			return false;
		from += d->len;
	}
	return from == b->hi;
}

/* Where a block's code ends for the function's extent: after a dead end,
 * a trap (glibc's _start has a hlt) or a jump back into the function (a
 * loop around an exit system call) belongs to the function. */
static uint64_t extent_end(struct fb *b, const struct cfg_function *f, size_t k)
{
	const struct cfg_block *bl = &f->blocks[k];
	if (!ends_dead(b, f, k))
		return bl->end;
	const struct cfg_insn *nx = cfg__reader_insn(b->r, bl->end);
	if (!nx || find(b, bl->end) >= 0)
		return bl->end;
	if ((nx->kind == CFG_I_HALT && !nx->nop) || (nx->kind == CFG_I_JMP && find(b, nx->target) >= 0))
		return bl->end + nx->len;
	if (dead_tail(b, bl->end))
		return b->hi;
	return bl->end;
}

/* Dead code after a dead end that runs into the function's next block
 * (clang keeps what follows error(2, ...)): decodes cleanly up to it, and
 * no function starts in between. */
static bool dead_gap(struct fb *b, uint64_t from, uint64_t to, uint64_t limit)
{
	if (to - from > limit)
		return false;
	while (from < to) {
		const struct cfg_insn *d = cfg__reader_insn(b->r, from);
		if (!d || d->kind == CFG_I_INVALID || d->kind == CFG_I_UNREADABLE)
			return false;
		from += d->len;
		if (from < to && starts_function(b->r, from))
			return false;
	}
	return from == to && !starts_function(b->r, to);
}

static int make_ranges(struct fb *b, struct cfg_function *f)
{
	f->ranges = malloc((f->nblocks ? f->nblocks : 1) * sizeof(*f->ranges));
	if (!f->ranges)
		return -ENOMEM;
	size_t last_k = 0;	/* the block that ends the last range */
	for (size_t k = 0; k < f->nblocks; k++) {
		const struct cfg_block *bl = &f->blocks[k];
		uint64_t end = extent_end(b, f, k);
		struct cfg_range *last = f->nranges ? &f->ranges[f->nranges - 1] : NULL;
		/* padding between two parts joins them, unless a function
		 * (or a cold part with its own FDE) starts after it; so does
		 * code no path reaches inside the function's own FDE (what
		 * glibc's _exit keeps after its exit_group) */
		if (last && (bl->start <= last->end ||
			     (padding_only(b->r, last->end, bl->start) &&
			      !starts_function(b->r, bl->start)) ||
			     (ends_dead(b, f, last_k) && dead_gap(b, last->end, bl->start, 256)) ||
			     (in_own(b, last->end) && in_own(b, bl->start) &&
			      dead_gap(b, last->end, bl->start, 4096)))) {
			if (end >= last->end) {
				last->end = end;
				last_k = k;
			}
			continue;
		}
		f->ranges[f->nranges++] = (struct cfg_range){ bl->start, end };
		last_k = k;
	}
	return 0;
}

static int finish_lists(struct fb *b, struct cfg_function *f)
{
	size_t total = 0;
	for (size_t t = 0; t < b->nt; t++)
		total += b->tv[t].count;
	f->tables = calloc(b->nt ? b->nt : 1, sizeof(*f->tables));
	f->table_targets = malloc((total ? total : 1) * sizeof(uint64_t));
	f->calls = malloc((b->nc ? b->nc : 1) * sizeof(*f->calls));
	f->names = malloc(b->nnames ? b->nnames : 1);
	if (!f->tables || !f->table_targets || !f->calls || !f->names)
		return -ENOMEM;
	size_t pos = 0;
	for (size_t i = 0; i < b->ni; i++) {
		if (b->iv[i].table < 0)
			continue;
		const struct cfg_jt_result *t = &b->tv[b->iv[i].table];
		struct cfg_jump_table *o = &f->tables[f->ntables++];
		o->at = b->iv[i].d->addr;
		o->table = t->table;
		o->base = t->base;
		o->entry_size = t->entry_size;
		o->target_count = t->count;
		o->targets = &f->table_targets[pos];
		memcpy(&f->table_targets[pos], t->targets, t->count * sizeof(uint64_t));
		pos += t->count;
	}
	for (size_t i = 1; i < f->ntables; i++)	/* by address */
		for (size_t j = i; j > 0 && f->tables[j].at < f->tables[j - 1].at; j--) {
			struct cfg_jump_table x = f->tables[j];
			f->tables[j] = f->tables[j - 1];
			f->tables[j - 1] = x;
		}
	if (b->nnames)
		memcpy(f->names, b->names, b->nnames);
	f->ncalls = b->nc;
	for (size_t i = 0; i < b->nc; i++) {
		f->calls[i] = b->cv[i];
		f->calls[i].name = f->names + (uintptr_t)b->cv[i].name;
	}
	qsort(f->calls, f->ncalls, sizeof(*f->calls), callcmp);
	return 0;
}

int cfg__fb_fill(struct fb *b, struct cfg_function *f)
{
	int err;
	if ((err = make_blocks(b, f)) < 0 || (err = make_edges(b, f)) < 0 ||
	    (err = make_ranges(b, f)) < 0 || (err = finish_lists(b, f)) < 0)
		return err;
	f->err = b->err;
	f->err_at = b->err_at;
	memcpy(f->err_msg, b->err_msg, sizeof(f->err_msg));
	f->noreturn = !b->returns;
	f->unresolved = b->unresolved;
	if (f->nblocks && (err = cfg__dominators(f)) < 0)
		return err;
	if (f->nblocks && (err = cfg__loops(f)) < 0)
		return err;
	return 0;
}
