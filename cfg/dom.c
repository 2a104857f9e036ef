/* Dominators (Cooper, Harvey & Kennedy's iterative algorithm over reverse
 * postorder) and the loop forest (Havlak's algorithm, with Ramalingam's
 * correction for irreducible loops). Everything iterative: no recursion
 * on the depth of the graph. */
#include "cfg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int build_preds(struct cfg_function *f)
{
	size_t n = f->nblocks;
	f->pred_first = calloc(n + 1, sizeof(*f->pred_first));
	f->preds = malloc((f->nedges ? f->nedges : 1) * sizeof(*f->preds));
	if (!f->pred_first || !f->preds)
		return -ENOMEM;
	for (size_t e = 0; e < f->nedges; e++)
		if (f->edges[e].to >= 0)
			f->pred_first[f->edges[e].to + 1]++;
	for (size_t i = 0; i < n; i++)
		f->pred_first[i + 1] += f->pred_first[i];
	uint32_t *fill = malloc((n ? n : 1) * sizeof(*fill));
	if (!fill)
		return -ENOMEM;
	memcpy(fill, f->pred_first, n * sizeof(*fill));
	for (size_t e = 0; e < f->nedges; e++)
		if (f->edges[e].to >= 0)
			f->preds[fill[f->edges[e].to]++] = (uint32_t)e;
	free(fill);
	return 0;
}

/* Depth-first walk from the entry: preorder numbers, the last preorder
 * number in each subtree, and postorder. pre[] is -1 for unreachable. */
struct dfs {
	int32_t *pre, *last, *order_pre, *order_post;
	size_t count;
};

static int dfs_run(const struct cfg_function *f, struct dfs *d)
{
	size_t n = f->nblocks;
	d->pre = malloc(n * sizeof(int32_t));
	d->last = malloc(n * sizeof(int32_t));
	d->order_pre = malloc(n * sizeof(int32_t));
	d->order_post = malloc(n * sizeof(int32_t));
	uint32_t *stack = malloc(n * sizeof(uint32_t)), *next = malloc(n * sizeof(uint32_t));
	if (!d->pre || !d->last || !d->order_pre || !d->order_post || !stack || !next) {
		free(stack);
		free(next);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		d->pre[i] = -1;
	size_t sp = 0, npre = 0, npost = 0;
	uint32_t s = (uint32_t)f->entry_block;
	d->pre[s] = (int32_t)npre;
	d->order_pre[npre++] = (int32_t)s;
	stack[sp++] = s;
	next[s] = 0;
	while (sp) {
		uint32_t v = stack[sp - 1];
		const struct cfg_block *b = &f->blocks[v];
		if (next[v] < b->succ_count) {
			const struct cfg_edge *e = &f->edges[b->first_succ + next[v]++];
			if (e->to >= 0 && d->pre[e->to] < 0) {
				uint32_t w = (uint32_t)e->to;
				d->pre[w] = (int32_t)npre;
				d->order_pre[npre++] = (int32_t)w;
				next[w] = 0;
				stack[sp++] = w;
			}
			continue;
		}
		sp--;
		d->last[v] = (int32_t)npre - 1;
		d->order_post[npost++] = (int32_t)v;
	}
	d->count = npre;
	free(stack);
	free(next);
	return 0;
}

static void dfs_free(struct dfs *d)
{
	free(d->pre);
	free(d->last);
	free(d->order_pre);
	free(d->order_post);
}

int cfg__dominators(struct cfg_function *f)
{
	size_t n = f->nblocks;
	int err = build_preds(f);
	if (err < 0)
		return err;
	struct dfs d = { 0 };
	if ((err = dfs_run(f, &d)) < 0) {
		dfs_free(&d);
		return err;
	}
	/* postorder numbers; idom in postorder-number space */
	int32_t *po = malloc(n * sizeof(int32_t)), *idom = malloc(n * sizeof(int32_t));
	if (!po || !idom) {
		free(po);
		free(idom);
		dfs_free(&d);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		po[i] = -1;
		idom[i] = -1;
	}
	for (size_t i = 0; i < d.count; i++)
		po[d.order_post[i]] = (int32_t)i;
	int32_t root = po[f->entry_block];
	idom[root] = root;
	for (bool changed = true; changed;) {
		changed = false;
		for (size_t k = d.count; k-- > 0;) {	/* reverse postorder */
			int32_t b = (int32_t)k;
			if (b == root)
				continue;
			uint32_t blk = (uint32_t)d.order_post[k];
			int32_t nid = -1;
			for (uint32_t p = f->pred_first[blk]; p < f->pred_first[blk + 1]; p++) {
				int32_t q = po[f->edges[f->preds[p]].from];
				if (q < 0 || idom[q] < 0)
					continue;
				if (nid < 0) {
					nid = q;
					continue;
				}
				int32_t x = q, y = nid;
				while (x != y) {
					while (x < y)
						x = idom[x];
					while (y < x)
						y = idom[y];
				}
				nid = x;
			}
			if (nid >= 0 && idom[b] != nid) {
				idom[b] = nid;
				changed = true;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		int32_t p = po[i];
		f->blocks[i].idom = (p < 0 || p == root) ? -1 : d.order_post[idom[p]];
	}
	free(po);
	free(idom);
	dfs_free(&d);

	/* dominator tree intervals, for O(1) dominance queries */
	f->dom_pre = calloc(n, sizeof(uint32_t));
	f->dom_post = calloc(n, sizeof(uint32_t));
	uint32_t *first = calloc(n + 1, sizeof(uint32_t)), *kids = malloc(n * sizeof(uint32_t));
	uint32_t *stack = malloc(n * sizeof(uint32_t)), *next = malloc(n * sizeof(uint32_t));
	if (!f->dom_pre || !f->dom_post || !first || !kids || !stack || !next) {
		free(first);
		free(kids);
		free(stack);
		free(next);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		if (f->blocks[i].idom >= 0)
			first[f->blocks[i].idom + 1]++;
	for (size_t i = 0; i < n; i++)
		first[i + 1] += first[i];
	memcpy(next, first, n * sizeof(uint32_t));
	for (size_t i = 0; i < n; i++)
		if (f->blocks[i].idom >= 0)
			kids[next[f->blocks[i].idom]++] = (uint32_t)i;
	uint32_t clock = 1;
	size_t sp = 0;
	stack[sp++] = (uint32_t)f->entry_block;
	next[f->entry_block] = first[f->entry_block];
	f->dom_pre[f->entry_block] = clock++;
	while (sp) {
		uint32_t v = stack[sp - 1];
		if (next[v] < first[v + 1]) {
			uint32_t w = kids[next[v]++];
			f->dom_pre[w] = clock++;
			next[w] = first[w];
			stack[sp++] = w;
			continue;
		}
		f->dom_post[v] = clock++;
		sp--;
	}
	free(first);
	free(kids);
	free(stack);
	free(next);
	return 0;
}

bool cfg_function__dominates(const struct cfg_function *f, size_t a, size_t b)
{
	if (a >= f->nblocks || b >= f->nblocks || !f->dom_pre || !f->dom_pre[a] || !f->dom_pre[b])
		return false;
	return f->dom_pre[a] <= f->dom_pre[b] && f->dom_post[b] <= f->dom_post[a];
}

/* ------------------------------------------------------------ loops */

/* union-find over preorder numbers */
static int32_t uf_find(int32_t *parent, int32_t x)
{
	int32_t r = x;
	while (parent[r] != r)
		r = parent[r];
	while (parent[x] != r) {
		int32_t nx = parent[x];
		parent[x] = r;
		x = nx;
	}
	return r;
}

/* A growable list of uint32 per node, in one pool. */
struct lists {
	uint32_t *v;
	size_t n, cap;
	int32_t *head;		/* per node: first cell, -1 */
	int32_t *link;		/* per cell: next cell */
	size_t lcap;
};

static int list_add(struct lists *l, uint32_t node, uint32_t val)
{
	if (cfg__grow(&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0 ||
	    cfg__grow(&l->link, &l->lcap, l->n + 1, sizeof(*l->link)) < 0)
		return -ENOMEM;
	l->v[l->n] = val;
	l->link[l->n] = l->head[node];
	l->head[node] = (int32_t)l->n++;
	return 0;
}

enum { T_NONE, T_SELF, T_REDUCIBLE, T_IRREDUCIBLE };

static bool in_loop(const struct cfg_function *f, int32_t blk, uint32_t l)
{
	if (blk < 0)
		return false;
	int32_t x = f->blocks[blk].loop;
	while (x >= 0 && f->loops[x].depth > f->loops[l].depth)
		x = f->loops[x].parent;
	return x == (int32_t)l;
}

static bool is_entry_of(const struct cfg_loop *L, uint32_t blk)
{
	for (uint32_t i = 0; i < L->entry_count; i++)
		if (L->entries[i] == blk)
			return true;
	return false;
}

/* Fill each loop's blocks, entries, back edges and exits. */
static int loop_members(struct cfg_function *f)
{
	size_t total = 0;
	for (size_t b = 0; b < f->nblocks; b++)
		for (int32_t x = f->blocks[b].loop; x >= 0; x = f->loops[x].parent)
			f->loops[x].block_count++;
	/* upper bounds: entries <= blocks, edges <= all edges */
	for (size_t l = 0; l < f->nloops; l++)
		total += 2 * (size_t)f->loops[l].block_count;
	/* back edges and exits are counted exactly first */
	size_t nedge = 0;
	for (size_t l = 0; l < f->nloops; l++) {
		for (size_t e = 0; e < f->nedges; e++) {
			const struct cfg_edge *E = &f->edges[e];
			if (!in_loop(f, (int32_t)E->from, (uint32_t)l))
				continue;
			nedge++;	/* a back edge, an exit, or neither */
		}
	}
	f->loop_data = malloc((total + nedge + 1) * sizeof(uint32_t));
	if (!f->loop_data)
		return -ENOMEM;
	uint32_t *p = f->loop_data;
	for (size_t l = 0; l < f->nloops; l++) {
		struct cfg_loop *L = &f->loops[l];
		uint32_t *blocks = p, nb = 0;
		blocks[nb++] = L->header;
		for (size_t b = 0; b < f->nblocks; b++)
			if (b != L->header && in_loop(f, (int32_t)b, (uint32_t)l))
				blocks[nb++] = (uint32_t)b;
		L->blocks = blocks;
		L->block_count = nb;
		p += nb;
		uint32_t *entries = p, ne = 0;
		for (uint32_t i = 0; i < nb; i++) {
			uint32_t b = blocks[i];
			bool entered = b == f->entry_block;
			for (uint32_t q = f->pred_first[b]; !entered && q < f->pred_first[b + 1]; q++)
				if (!in_loop(f, (int32_t)f->edges[f->preds[q]].from, (uint32_t)l))
					entered = true;
			if (entered)
				entries[ne++] = b;
		}
		if (ne == 0)	/* unreachable from outside: say the header */
			entries[ne++] = L->header;
		L->entries = entries;
		L->entry_count = ne;
		p += ne;
		uint32_t *back = p, nbk = 0;
		for (size_t e = 0; e < f->nedges; e++) {
			const struct cfg_edge *E = &f->edges[e];
			if (E->to >= 0 && in_loop(f, (int32_t)E->from, (uint32_t)l) &&
			    (L->irreducible ? is_entry_of(L, (uint32_t)E->to)
					    : (uint32_t)E->to == L->header))
				back[nbk++] = (uint32_t)e;
		}
		L->back_edges = back;
		L->back_edge_count = nbk;
		p += nbk;
		uint32_t *exits = p, nx = 0;
		for (size_t e = 0; e < f->nedges; e++) {
			const struct cfg_edge *E = &f->edges[e];
			if (in_loop(f, (int32_t)E->from, (uint32_t)l) &&
			    (E->to < 0 || !in_loop(f, E->to, (uint32_t)l)))
				exits[nx++] = (uint32_t)e;
		}
		L->exits = exits;
		L->exit_count = nx;
		p += nx;
	}
	return 0;
}

int cfg__loops(struct cfg_function *f)
{
	size_t n = f->nblocks;
	struct dfs d = { 0 };
	int err = dfs_run(f, &d);
	size_t m = d.count;	/* reachable blocks, by preorder number w */
	int32_t *header = malloc(m * sizeof(int32_t)), *uf = malloc(m * sizeof(int32_t));
	uint8_t *type = calloc(m, 1), *inP = calloc(m, 1);
	uint32_t *P = malloc(m * sizeof(uint32_t)), *work = malloc(m * sizeof(uint32_t));
	struct lists back = { 0 }, nonback = { 0 };
	back.head = malloc(m * sizeof(int32_t));
	nonback.head = malloc(m * sizeof(int32_t));
	int32_t *loop_of = malloc(m * sizeof(int32_t));
	if (err < 0 || !header || !uf || !type || !inP || !P || !work || !back.head ||
	    !nonback.head || !loop_of) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t w = 0; w < m; w++) {
		header[w] = -1;
		uf[w] = (int32_t)w;
		back.head[w] = nonback.head[w] = -1;
		loop_of[w] = -1;
	}
	/* split each node's predecessors into back and other edges */
	for (size_t w = 0; w < m; w++) {
		uint32_t blk = (uint32_t)d.order_pre[w];
		for (uint32_t p = f->pred_first[blk]; p < f->pred_first[blk + 1]; p++) {
			int32_t v = d.pre[f->edges[f->preds[p]].from];
			if (v < 0)
				continue;
			bool ancestor = (int32_t)w <= v && v <= d.last[blk];
			if ((err = list_add(ancestor ? &back : &nonback, (uint32_t)w, (uint32_t)v)) < 0)
				goto out;
		}
	}
	for (size_t wi = m; wi-- > 0;) {
		uint32_t w = (uint32_t)wi, blk = (uint32_t)d.order_pre[w];
		size_t np = 0, nw = 0;
		for (int32_t c = back.head[w]; c >= 0; c = back.link[c]) {
			uint32_t v = back.v[c];
			if (v == w) {
				type[w] = T_SELF;
				continue;
			}
			uint32_t x = (uint32_t)uf_find(uf, (int32_t)v);
			if (!inP[x]) {
				inP[x] = 1;
				P[np++] = x;
				work[nw++] = x;
			}
		}
		if (np)
			type[w] = T_REDUCIBLE;
		while (nw) {
			uint32_t x = work[--nw];
			for (int32_t c = nonback.head[x]; c >= 0; c = nonback.link[c]) {
				uint32_t y = (uint32_t)uf_find(uf, (int32_t)nonback.v[c]);
				bool anc = w <= y && (int32_t)y <= d.last[blk];
				if (!anc) {
					type[w] = T_IRREDUCIBLE;
					if ((err = list_add(&nonback, w, y)) < 0)
						goto out;
				} else if (!inP[y] && y != w) {
					inP[y] = 1;
					P[np++] = y;
					work[nw++] = y;
				}
			}
		}
		for (size_t i = 0; i < np; i++) {
			header[P[i]] = (int32_t)w;
			uf[P[i]] = (int32_t)w;
			inP[P[i]] = 0;
		}
	}
	err = 0;
	/* loops in preorder of their headers: outer before inner */
	size_t nl = 0;
	for (size_t w = 0; w < m; w++)
		if (type[w] != T_NONE)
			loop_of[w] = (int32_t)nl++;
	f->loops = calloc(nl ? nl : 1, sizeof(*f->loops));
	if (!f->loops) {
		err = -ENOMEM;
		goto out;
	}
	f->nloops = nl;
	for (size_t w = 0; w < m; w++) {
		if (type[w] == T_NONE)
			continue;
		struct cfg_loop *L = &f->loops[loop_of[w]];
		L->header = (uint32_t)d.order_pre[w];
		L->irreducible = type[w] == T_IRREDUCIBLE;
		L->parent = -1;
		/* the enclosing loop: the nearest header above w */
		if (header[w] >= 0)
			L->parent = loop_of[header[w]];
		L->depth = L->parent >= 0 ? f->loops[L->parent].depth + 1 : 1;
	}
	/* innermost loop of each block */
	for (size_t w = 0; w < m; w++) {
		int32_t l = loop_of[w] >= 0 ? loop_of[w] : (header[w] >= 0 ? loop_of[header[w]] : -1);
		f->blocks[d.order_pre[w]].loop = l;
	}
	err = 0;
out:
	free(header);
	free(uf);
	free(type);
	free(inP);
	free(P);
	free(work);
	free(back.v);
	free(back.link);
	free(back.head);
	free(nonback.v);
	free(nonback.link);
	free(nonback.head);
	free(loop_of);
	dfs_free(&d);
	if (err < 0)
		return err;
	(void)n;
	return loop_members(f);
}
