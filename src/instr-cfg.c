/* instr-cfg.c: an instrumented function's CFG as its report needs it
 * (issue 10's edges and loops): the loop forest and the edges inside the
 * function, read before the copy goes in, and how often the edges ran.
 *
 * The recoverer counts every pair of consecutive units of a thread's
 * stream (pipeline/rep.h). An edge of the CFG is the pair of the unit that
 * ends where its source block ends and the unit that starts its target:
 * a block the copy cut into several units ends with its last one. Pairs
 * that are no edge of the CFG (a return followed by the next call's entry,
 * a signal handler's units in between) are left out. Each consumer
 * publishes its counts of the edges, and of the entry unit's executions,
 * now and then (the recoverer is its own thread's, so they are of one
 * moment), and once it ended they are added into the function's, which
 * outlive the copy.
 *
 * A loop is entered by the edges from outside it into it, and by the
 * function's calls when it holds the entry block; it iterates once per
 * entry and once per execution of a back edge (for a reducible loop, the
 * executions of its header).
 */
#include "src/instr-state.h"
#include "attach/attach.h"
#include "cfg/cfg.h"
#include "pipeline/rep.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The edges from outside the loop into it, and its back edges (indices
 * into f->edges, which are the CFG's in its order). */
static int loop_edges(const struct cfg_function *cf, const struct cfg_loop *l,
		      struct loop_span *out)
{
	size_t nb = cfg_function__block_count(cf), ne = cfg_function__edge_count(cf);
	bool *in = calloc(nb + 1, sizeof *in);

	out->enter = calloc(ne + 1, sizeof *out->enter);
	out->back = calloc(l->back_edge_count + 1, sizeof *out->back);
	if (!in || !out->enter || !out->back) {
		free(in);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < l->block_count; i++)
		in[l->blocks[i]] = true;
	for (size_t k = 0; k < ne; k++) {
		const struct cfg_edge *e = cfg_function__edge(cf, k);
		if (e->to >= 0 && in[e->to] && !in[e->from])
			out->enter[out->nenter++] = (uint32_t)k;
	}
	for (uint32_t i = 0; i < l->back_edge_count; i++)
		out->back[out->nback++] = l->back_edges[i];
	out->holds_entry = in[cfg_function__entry_block(cf)];
	free(in);
	return 0;
}

static int loop_of(const struct cfg_function *cf, const struct cfg_loop *l, struct loop_span *out)
{
	if (!(out->ranges = calloc(l->block_count ? l->block_count : 1, sizeof *out->ranges)))
		return -ENOMEM;
	for (uint32_t i = 0; i < l->block_count; i++) {
		const struct cfg_block *b = cfg_function__block(cf, l->blocks[i]);
		out->ranges[out->nranges++] = (struct cfg_range){ b->start, b->end };
	}
	out->info = (struct padrone_iloop){
		.header = cfg_function__block(cf, l->header)->start, .parent = l->parent,
		.depth = l->depth, .blocks = l->block_count, .irreducible = l->irreducible,
	};
	return loop_edges(cf, l, out);
}

/* The edges that stay inside the function, in the CFG's order (a tail
 * call leaves it: no unit follows). */
static int edges_of(const struct cfg_function *cf, struct func *f)
{
	size_t ne = cfg_function__edge_count(cf);

	if (!(f->edges = calloc(ne + 1, sizeof *f->edges)))
		return -ENOMEM;
	for (size_t k = 0; k < ne; k++) {
		const struct cfg_edge *e = cfg_function__edge(cf, k);
		const struct cfg_block *from = cfg_function__block(cf, e->from);
		f->edges[k] = (struct func_edge){ .from = from->start, .from_end = from->end,
						  .kind = (uint8_t)e->kind };
		if (e->to >= 0)
			f->edges[k].to = cfg_function__block(cf, (size_t)e->to)->start;
	}
	f->nedges = ne;
	return 0;
}

void instr__read_cfg(struct attach_target *t, uint64_t entry, struct func *f)
{
	struct cfg_build_opts bo = { .sz = sizeof bo };
	struct cfg_function *cf;
	struct cfg_reader *r;

	if (cfg_reader__open_live(t, NULL, &r) < 0)
		return;
	if (cfg_function__build(r, entry, &bo, &cf) == 0) {
		size_t n = cfg_function__loop_count(cf);
		f->loops = calloc(n ? n : 1, sizeof *f->loops);
		for (size_t i = 0; f->loops && i < n; i++)
			if (loop_of(cf, cfg_function__loop(cf, i), &f->loops[f->nloops++]) < 0)
				break;
		edges_of(cf, f);
		cfg_function__free(cf);
	}
	cfg_reader__free(r);
}

void instr__free_cfg(struct func *f)
{
	for (size_t i = 0; i < f->nloops; i++) {
		free(f->loops[i].ranges);
		free(f->loops[i].enter);
		free(f->loops[i].back);
	}
	free(f->loops);
	free(f->edges);
	free(f->edge_ids);
	f->loops = NULL;
	f->edges = NULL;
	f->edge_ids = NULL;
	f->nloops = f->nedges = 0;
}

/* The unit of the copy's table that starts at pc, or that ends at end. */
static const struct rep_block *unit_at(const struct rep_table *t, uint64_t pc, uint64_t end)
{
	for (size_t i = 0; i < rep_table__size(t); i++) {
		const struct rep_block *b = rep_table__nth(t, i);
		if (!b->ninstrs)
			continue;
		const struct rep_instr *last = &b->instrs[b->ninstrs - 1];
		if (pc ? b->pc == pc : last->pc + last->len == end)
			return b;
	}
	return NULL;
}

int instr__map_edges(struct func *f, const struct rep_table *t)
{
	uint32_t *ids = realloc(f->edge_ids, 2 * (f->nedges + 1) * sizeof *ids);
	const struct rep_block *entry = unit_at(t, f->entry, 0);

	if (!ids)
		return -ENOMEM;
	f->edge_ids = ids;
	ids[2 * f->nedges] = entry ? entry->id : 0;	/* its executions: calls and more */
	ids[2 * f->nedges + 1] = 0;
	for (size_t k = 0; k < f->nedges; k++) {
		struct func_edge *e = &f->edges[k];
		const struct rep_block *from = unit_at(t, 0, e->from_end);
		const struct rep_block *to = e->to ? unit_at(t, e->to, 0) : NULL;
		ids[2 * k] = from && to ? from->id : 0;
		ids[2 * k + 1] = from && to ? to->id : 0;
		if (from)
			e->at = from->instrs[from->ninstrs - 1].pc;
	}
	return 0;
}

/* Slot k of a worker's counts: edge k, or (k = nedges) the entry unit. */
void instr__publish_edges(struct worker *w)
{
	for (size_t k = 0; w->rec && w->edge_n && k <= w->nedges; k++) {
		uint32_t from = w->edge_ids[2 * k], to = w->edge_ids[2 * k + 1];
		if (from)
			atomic_store_explicit(&w->edge_n[k], k < w->nedges ?
					      rep_recover__edge_count(w->rec, from, to) :
					      rep_recover__block_count(w->rec, from),
					      memory_order_relaxed);
	}
}

void instr__fold_edges(struct func *f, struct worker *w)
{
	for (size_t k = 0; w->edge_n && k <= w->nedges && k <= f->nedges; k++) {
		uint64_t n = atomic_load_explicit(&w->edge_n[k], memory_order_relaxed);
		if (k < f->nedges)
			f->edges[k].done += n;
		else
			f->entry_runs_done += n;
	}
	free(w->edge_n);
	w->edge_n = NULL;
	w->nedges = 0;
}

/* Slot k's count: the ended consumers' and the running ones' so far. */
static uint64_t slot_count(const struct func *f, size_t k)
{
	uint64_t n = k < f->nedges ? f->edges[k].done : f->entry_runs_done;

	for (size_t i = 0; i < f->nw; i++)
		if (f->w[i].edge_n && k <= f->w[i].nedges)
			n += atomic_load_explicit(&f->w[i].edge_n[k], memory_order_relaxed);
	return n;
}

/* The function's calls: its entry unit's executions less those of edges
 * into the entry block. */
static uint64_t calls_of(const struct func *f, const uint64_t *counts)
{
	uint64_t runs = counts[f->nedges], inner = 0;

	for (size_t k = 0; k < f->nedges; k++)
		if (f->edges[k].to == f->entry)
			inner += counts[k];
	return runs > inner ? runs - inner : 0;
}

int instr__report_cfg(const struct func *f, struct padrone_ifunction *pf)
{
	uint64_t *counts = calloc(f->nedges + 1, sizeof *counts);

	if (!counts || !(pf->edges = calloc(f->nedges + 1, sizeof *pf->edges))) {
		free(counts);
		return -ENOMEM;
	}
	for (size_t k = 0; k <= f->nedges; k++)
		counts[k] = slot_count(f, k);
	for (size_t k = 0; k < f->nedges; k++) {
		const struct func_edge *e = &f->edges[k];
		if (!e->to)
			continue;
		pf->edges[pf->nedges++] = (struct padrone_iedge){
			.from = e->from, .at = e->at, .to = e->to, .count = counts[k],
			.kind = cfg_edge_kind_name((enum cfg_edge_kind)e->kind),
		};
	}
	uint64_t calls = calls_of(f, counts);
	for (size_t i = 0; i < pf->nloops && i < f->nloops; i++) {
		const struct loop_span *l = &f->loops[i];
		struct padrone_iloop *pl = &pf->loops[i];
		pl->entries = l->holds_entry ? calls : 0;
		for (uint32_t k = 0; k < l->nenter; k++)
			pl->entries += counts[l->enter[k]];
		pl->iterations = pl->entries;
		for (uint32_t k = 0; k < l->nback; k++)
			pl->iterations += counts[l->back[k]];
	}
	free(counts);
	return 0;
}
