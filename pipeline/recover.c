/* recover.c: REP units back into <pc, addr, size, type> references, plus
 * per-block and per-edge execution counts. The hot loop allocates nothing:
 * references go into a fixed batch handed to the sink when full. */
#include "pipeline/rep-internal.h"
#include "pipeline/cab.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Executions of a block, and of the edges to its first two successors
 * (a block rarely has more); further edges go to the hash table. */
struct bcount {
	uint64_t n;
	uint32_t succ[2];	/* ids, 0 = none yet */
	uint64_t sn[2];
};

struct edge {
	uint64_t key;		/* from << 32 | to; 0: free */
	uint64_t n;
};

/* Fetches left out of the stream (rep_recover__set_fetch_line), per table
 * position, made the first time the block is recovered. */
struct fetch_plan {
	bool made;
	uint32_t nplan;			/* plan's entries */
	struct rep_plan_ref *plan;	/* the block's plan without them (fast path) */
	uint32_t nleft;			/* fetches left out of one execution */
	uint64_t *left;			/* their PCs */
	uint64_t pending;		/* executions whose FETCH_HITS are not sent */
	/* run again right after itself in one batch (a loop of one block),
	 * with its lines in sets of their own: every fetch hits a line most
	 * recent in its set, so those of one line go (a straddling one stays,
	 * as two accesses; rep_recover__set_fetch_sets) */
	uint32_t nrplan;
	struct rep_plan_ref *rplan;	/* the plan without them, or NULL: not so */
	uint32_t nrleft;
	uint64_t *rleft;		/* their PCs */
	uint64_t rpending;
};

struct rep_recover {
	const struct rep_table *t;
	rep_ref_sink sink;
	void *arg;
	struct rep_ref *batch;
	size_t nbatch;
	struct bcount *counts;	/* per table position */
	size_t ncounts;
	struct edge *edges;	/* other edges, open addressing: a key and its
				 * count side by side, one cache miss a lookup */
	size_t ecap, en;
	uint32_t prev;		/* table position + 1 of the previous unit's block, 0 after a gap */
	uint32_t head;		/* ... of the first unit counted after the last gap or begin */
	bool resync;		/* CAB spans: skip up to the next chunk's start */
	bool cut;		/* a spoiled unit since begin: head stays as it is
				 * (none if it came first), so the pool never
				 * joins an edge across it */
	bool general_only;	/* tests: no fast plans */
	bool runs;		/* the sink takes loops' runs (REP_REF_RUN) */
	unsigned fetch_bits;	/* log2 of the sink's I1 line; 0: every fetch sent */
	uint32_t fetch_sets;	/* the sink's I1 sets; 0: unknown */
	uint64_t nsent;		/* batches sent */
	uint64_t prev_batch;	/* the previous unit went whole into batch number
				 * prev_batch (nsent then) by the fast path;
				 * UINT64_MAX: not */
	struct fetch_plan *fp;	/* per table position (nfp) */
	uint32_t *dirty;	/* positions with FETCH_HITS pending (ndirty) */
	size_t nfp, ndirty;
	size_t reserve;		/* the batch's room their FETCH_HITS take */
	uint64_t off;		/* byte offset of the next word */
	uint64_t carry_off;
	size_t ncarry;
	struct rep_recover_stats st;
	uint64_t v[REP_MAX_SLOTS + 1];	/* the unit, with v[0] = 0 */
	uint64_t carry[REP_MAX_SLOTS + 1];
	/* the last whole unit recovered (a repeat unit takes the rest of its
	 * slots from it): in the words fed, carry, last_kept or repeated;
	 * NULL: none since begin */
	const uint64_t *last;
	uint64_t last_kept[REP_MAX_SLOTS + 1];	/* a copy outliving its feed */
	uint64_t repeated[REP_MAX_SLOTS + 1];	/* the last repeat unit, whole */
};

int rep_recover__new(const struct rep_table *t, rep_ref_sink sink, void *arg,
		     struct rep_recover **out)
{
	struct rep_recover *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return rep__fail(-ENOMEM, "out of memory");
	r->t = t;
	r->sink = sink;
	r->arg = arg;
	r->prev_batch = UINT64_MAX;
	r->batch = calloc(REP_BATCH, sizeof(*r->batch));
	r->ncounts = t->n ? t->n : 1;
	r->counts = calloc(r->ncounts, sizeof(*r->counts));
	r->ecap = 1024;
	r->edges = calloc(r->ecap, sizeof(*r->edges));
	if (!r->batch || !r->counts || !r->edges) {
		rep_recover__free(r);
		return rep__fail(-ENOMEM, "out of memory");
	}
	*out = r;
	return 0;
}

void rep_recover__free(struct rep_recover *r)
{
	if (!r)
		return;
	free(r->batch);
	for (size_t i = 0; i < r->nfp; i++) {
		free(r->fp[i].plan);
		free(r->fp[i].left);
		free(r->fp[i].rplan);
		free(r->fp[i].rleft);
	}
	free(r->fp);
	free(r->dirty);
	free(r->counts);
	free(r->edges);
	free(r);
}

/* The fetches left out of the units since the last batch, as FETCH_HITS
 * at the batch's end (the room they take is kept free: reserve). */
static void add_fetch_hits(struct rep_recover *r)
{
	for (size_t i = 0; i < r->ndirty; i++) {
		struct fetch_plan *f = &r->fp[r->dirty[i]];
		for (uint32_t k = 0; f->pending && k < f->nleft; k++)
			r->batch[r->nbatch++] = (struct rep_ref){ .pc = f->left[k], .addr = f->pending,
								  .type = REP_REF_FETCH_HITS };
		for (uint32_t k = 0; f->rpending && k < f->nrleft; k++)
			r->batch[r->nbatch++] = (struct rep_ref){ .pc = f->rleft[k], .addr = f->rpending,
								  .type = REP_REF_FETCH_HITS };
		f->pending = f->rpending = 0;
	}
	r->ndirty = 0;
	r->reserve = 0;
}

/* Hand the batch over and start the next. */
static void send_batch(struct rep_recover *r)
{
	if (r->ndirty)
		add_fetch_hits(r);
	if (r->nbatch && r->sink)
		r->sink(r->arg, r->batch, r->nbatch);	/* may give us another array */
	r->nbatch = 0;
	r->nsent++;
}

void rep_recover__flush(struct rep_recover *r)
{
	send_batch(r);
}

static inline void emit(struct rep_recover *r, uint64_t pc, uint64_t addr, uint32_t size,
			uint8_t type)
{
	struct rep_ref *o = &r->batch[r->nbatch];

	o->pc = pc;
	o->addr = addr;
	o->size = size;
	o->type = type;
	o->pad[0] = o->pad[1] = o->pad[2] = 0;
	if (++r->nbatch + r->reserve >= REP_BATCH)
		send_batch(r);
}

/* ------------------------------------------------------------ counts */

static inline size_t ehash(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (cap - 1);
}

static int edge_add(struct rep_recover *r, uint64_t key, uint64_t n);

static int edge_grow(struct rep_recover *r)
{
	struct edge *old = r->edges;
	size_t ocap = r->ecap;

	r->edges = calloc(2 * ocap, sizeof(*r->edges));
	if (!r->edges) {
		r->edges = old;
		return rep__fail(-ENOMEM, "out of memory");
	}
	r->ecap = 2 * ocap;
	r->en = 0;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].key)
			edge_add(r, old[i].key, old[i].n);
	free(old);
	return 0;
}

static int edge_add(struct rep_recover *r, uint64_t key, uint64_t n)
{
	size_t i = ehash(key, r->ecap);

	while (r->edges[i].key && r->edges[i].key != key)
		i = (i + 1) & (r->ecap - 1);
	if (!r->edges[i].key) {
		if (2 * (r->en + 1) > r->ecap) {
			int rc = edge_grow(r);
			if (rc)
				return rc;
			return edge_add(r, key, n);
		}
		r->edges[i].key = key;
		r->en++;
	}
	r->edges[i].n += n;
	return 0;
}

static int grow_counts(struct rep_recover *r, size_t n)
{
	struct bcount *nc = realloc(r->counts, n * sizeof(*nc));

	if (!nc)
		return rep__fail(-ENOMEM, "out of memory");
	memset(nc + r->ncounts, 0, (n - r->ncounts) * sizeof(*nc));
	r->counts = nc;
	r->ncounts = n;
	return 0;
}

static int count_edge(struct rep_recover *r, struct bcount *from, uint32_t from_id, uint32_t id,
		      uint64_t n)
{
	for (int k = 0; k < 2; k++) {
		if (from->succ[k] == id) {
			from->sn[k] += n;
			return 0;
		}
		if (!from->succ[k]) {
			from->succ[k] = id;
			from->sn[k] = n;
			return 0;
		}
	}
	return edge_add(r, (uint64_t)from_id << 32 | id, n);
}

/* Any edge but the previous block's first successor: out of line. */
static int __attribute__((noinline)) count_other_edge(struct rep_recover *r, uint32_t p,
						      uint32_t id)
{
	return count_edge(r, &r->counts[p], r->t->blks[p].b.id, id, 1);
}

static inline int count_block(struct rep_recover *r, uint32_t pos_in_table, uint32_t id)
{
	int rc = 0;

	/* the table may have grown after we were made */
	if (pos_in_table >= r->ncounts && (rc = grow_counts(r, r->t->n)))
		return rc;
	r->counts[pos_in_table].n++;
	if (r->prev) {
		uint32_t p = r->prev - 1;
		if (r->counts[p].succ[0] == id)	/* as count_edge would, first */
			r->counts[p].sn[0]++;
		else
			rc = count_other_edge(r, p, id);
	} else if (!r->cut) {
		r->head = pos_in_table + 1;
	}
	r->prev = pos_in_table + 1;
	return rc;
}

/* ------------------------------------------------------------ recovery */

/* Do cnt iterations of size bytes from a, going down or up, stay in the
 * user address space? (Element i at a - i * size or a + i * size.) */
static bool in_user_space(uint64_t a, uint64_t cnt, uint32_t size, bool down)
{
	if (!cnt)
		return true;
	if (a >= REP_ADDR_LIMIT || size > REP_ADDR_LIMIT - a)
		return false;
	if (down)	/* the lowest element, at a - (cnt - 1) * size, at or above 0 */
		return cnt - 1 <= a / size;
	return cnt <= (REP_ADDR_LIMIT - a) / size;
}

/* A rep-prefixed instruction (op, a GROUP, and its nrefs references):
 * the iterations it executed, references interleaved, a fetch per
 * iteration and, as valgrind counts them (lackey's trace, Cachegrind's Ir:
 * the instruction runs once more to find rcx at 0), one more after the
 * last unless a repe/repne one stopped on its condition with rcx left
 * above 0. (One that stopped on its condition exactly as rcx reached 0 is
 * counted one fetch too many: which ended it is not captured.) The count
 * and direction are checked first, so nothing of a corrupt one is
 * delivered. */
static int run_group(struct rep_recover *r, const struct rep_blk *x, const struct rep_op *op,
		     uint64_t off, uint64_t *nref, uint64_t *nins)
{
	const uint64_t *v = r->v;
	const struct rep_op *g = op + 1, *gend = g + op->nrefs;
	/* Absent slots are position 0, which holds 0: no end count, DF clear. */
	uint64_t cnt = v[op->count] - v[op->count_end];
	bool down = op->down || (v[op->rflags] >> 10 & 1);
	uint64_t a[REP_MAX_REP_REFS];

	for (const struct rep_op *o = g; o < gend; o++) {
		a[o - g] = (uint64_t)o->disp + v[o->base] + (v[o->index] << o->shift) + v[o->seg];
		if (!in_user_space(a[o - g], cnt, o->size, down))
			return rep__fail(-EBADMSG,
					 "REP unit at offset %llu: block %u, instruction %#llx: %llu iterations of %u bytes %s from %#llx leave the user address space",
					 (unsigned long long)off, x->b.id, (unsigned long long)op->pc,
					 (unsigned long long)cnt, o->size, down ? "down" : "up",
					 (unsigned long long)a[o - g]);
	}
	for (uint64_t it = 0; it < cnt; it++) {
		if (op->type) {
			emit(r, op->pc, op->pc, op->size, REP_REF_INSTR);
			++*nins;
		}
		for (const struct rep_op *o = g; o < gend; o++) {
			uint64_t step = it * o->size;
			emit(r, o->pc, down ? a[o - g] - step : a[o - g] + step, o->size, o->type);
		}
		*nref += op->nrefs;
	}
	bool ran_out = !op->count_end || v[op->count_end] == 0;
	if (op->type && (ran_out || cnt == 0)) {
		emit(r, op->pc, op->pc, op->size, REP_REF_INSTR);
		++*nins;
	}
	return 0;
}

/* ------------------------------------------------- fetches left out */

/* The lines a fetch of [pc, pc + len) touches, first and last. */
static void fetch_lines(uint64_t pc, uint32_t len, unsigned bits, uint64_t *first, uint64_t *last)
{
	*first = pc >> bits;
	*last = (pc + (len ? len : 1) - 1) >> bits;
}

/* Does a fetch of [pc, pc + len) lie in the line *last, the one the block's
 * previous fetch ended on (UINT64_MAX: none)? Then it hits that line, most
 * recent in its set (also when the previous fetch straddled two lines of
 * one set). *last becomes the fetch's own last line. */
static bool fetch_hits_last(uint64_t pc, uint32_t len, unsigned bits, uint64_t *last)
{
	uint64_t first, end;
	fetch_lines(pc, len, bits, &first, &end);
	bool hit = first == end && first == *last;

	*last = end;
	return hit;
}

/* When x runs again right after itself: its plan without its fetches of
 * one line each (one straddling two lines is two accesses, which a
 * FETCH_HITS count does not give: it stays, and hits), and their PCs, if
 * its lines (consecutive) fall in sets of their own and those fetches are
 * at most a quarter of a batch. */
static int make_repeat_plan(struct rep_recover *r, const struct rep_blk *x, struct fetch_plan *f)
{
	uint64_t lo = UINT64_MAX, hi = 0, a, b;
	uint32_t n = 0;

	for (uint32_t i = 0; i < x->nops; i++) {
		const struct rep_op *op = &x->ops[i];
		if (op->kind != REP_OP_INSTR)
			continue;
		fetch_lines(op->pc, op->size, r->fetch_bits, &a, &b);
		lo = a < lo ? a : lo;
		hi = b > hi ? b : hi;
		n += a == b;
	}
	if (!n || !x->plan || n > REP_BATCH / 4 || hi - lo >= r->fetch_sets)
		return 0;
	f->rleft = malloc(n * sizeof(*f->rleft));
	f->rplan = malloc((x->nops - n + 1) * sizeof(*f->rplan));
	if (!f->rleft || !f->rplan)
		return rep__fail(-ENOMEM, "out of memory");
	for (uint32_t i = 0; i < x->nops; i++) {
		const struct rep_op *op = &x->ops[i];
		if (op->kind == REP_OP_INSTR)
			fetch_lines(op->pc, op->size, r->fetch_bits, &a, &b);
		if (op->kind == REP_OP_INSTR && a == b)
			f->rleft[f->nrleft++] = op->pc;
		else
			f->rplan[f->nrplan++] = x->plan[i];
	}
	return 0;
}

/* Which fetches of x to leave out, and x's plan without them. None for a
 * block with a rep-prefixed instruction (which may fail half way), nor for
 * one with more than a quarter of a batch of them. */
static int make_fetch_plan(struct rep_recover *r, const struct rep_blk *x, struct fetch_plan *f)
{
	uint64_t last = UINT64_MAX;
	uint32_t n = 0;
	int rc;

	f->made = true;
	if (x->has_group)
		return 0;
	if (r->fetch_sets && (rc = make_repeat_plan(r, x, f)))
		return rc;
	for (uint32_t i = 0; i < x->nops; i++)
		n += x->ops[i].kind == REP_OP_INSTR &&
		     fetch_hits_last(x->ops[i].pc, x->ops[i].size, r->fetch_bits, &last);
	if (!n || n > REP_BATCH / 4)
		return 0;
	f->left = malloc(n * sizeof(*f->left));
	f->plan = x->plan ? malloc((x->nops - n) * sizeof(*f->plan)) : NULL;
	if (!f->left || (x->plan && !f->plan))
		return rep__fail(-ENOMEM, "out of memory");
	last = UINT64_MAX;
	for (uint32_t i = 0; i < x->nops; i++) {
		const struct rep_op *op = &x->ops[i];
		if (op->kind == REP_OP_INSTR && fetch_hits_last(op->pc, op->size, r->fetch_bits, &last))
			f->left[f->nleft++] = op->pc;
		else if (f->plan)	/* a plan has an entry per op when there is no group */
			f->plan[f->nplan++] = x->plan[i];
	}
	return 0;
}

static int grow_fetch_plans(struct rep_recover *r, size_t n)
{
	struct fetch_plan *nf = realloc(r->fp, n * sizeof(*nf));
	if (nf)
		r->fp = nf;
	uint32_t *nd = nf ? realloc(r->dirty, n * sizeof(*nd)) : NULL;
	if (!nd)
		return rep__fail(-ENOMEM, "out of memory");
	memset(nf + r->nfp, 0, (n - r->nfp) * sizeof(*nf));
	r->dirty = nd;
	r->nfp = n;
	return 0;
}

/* The fetch plan of the block at table position pos, made if new. */
static inline int fetch_plan_of(struct rep_recover *r, const struct rep_blk *x, uint32_t pos,
				struct fetch_plan **out)
{
	int rc;

	/* the table may have grown after we were made */
	if (__builtin_expect(pos >= r->nfp, 0) && (rc = grow_fetch_plans(r, r->t->n)))
		return rc;
	*out = &r->fp[pos];
	return r->fp[pos].made ? 0 : make_fetch_plan(r, x, &r->fp[pos]);
}

/* May this execution of a block leave its fetches out? Only while the
 * batch has room for their counts and a reference more (a batch sent short
 * would be copied by a sink that keeps whole ones), unless they are
 * counted in this batch already. */
static inline bool may_leave_out(const struct rep_recover *r, const struct fetch_plan *f)
{
	return f->nleft && (f->pending || r->nbatch + r->reserve + f->nleft < REP_BATCH);
}

/* One more execution of a block that leaves nleft fetches out (pending:
 * such executions in this batch; other: those leaving the other set of its
 * fetches out), counted before its references go into the batch (which
 * keeps room for their FETCH_HITS). */
static inline void left_out(struct rep_recover *r, uint32_t pos, uint64_t *pending, uint64_t other,
			    uint32_t nleft)
{
	if ((*pending)++)
		return;
	if (!other)
		r->dirty[r->ndirty++] = pos;
	r->reserve += nleft;
}

/* Its fetches that hit the line of the one before, or (run again right
 * after itself) all those of one line. */
static inline void fetches_left_out(struct rep_recover *r, struct fetch_plan *f, uint32_t pos)
{
	left_out(r, pos, &f->pending, f->rpending, f->nleft);
}

static inline void all_fetches_left_out(struct rep_recover *r, struct fetch_plan *f, uint32_t pos)
{
	left_out(r, pos, &f->rpending, f->pending, f->nrleft);
}

void rep_recover__set_fetch_line(struct rep_recover *r, uint32_t line)
{
	r->fetch_bits = line > 1 && !(line & (line - 1)) ? (unsigned)__builtin_ctz(line) : 0;
}

void rep_recover__set_fetch_sets(struct rep_recover *r, uint32_t sets)
{
	r->fetch_sets = sets;
}

void rep_recover__set_runs(struct rep_recover *r, bool runs)
{
	r->runs = runs;
}

/* Run the block's ops over the unit's values (r->v), leaving out the
 * fetches its fetch plan does if leave_out. */
static int run_block(struct rep_recover *r, const struct rep_blk *x, uint64_t off, bool leave_out)
{
	const uint64_t *v = r->v;
	const struct rep_op *op = x->ops, *end = op + x->nops;
	uint64_t nref = 0, nins = 0, last = UINT64_MAX;

	while (op < end) {
		if (op->kind == REP_OP_REF) {
			uint64_t a = (uint64_t)op->disp + v[op->base] + (v[op->index] << op->shift) +
				     v[op->seg];
			emit(r, op->pc, a, op->size, op->type);
			nref++;
			op++;
		} else if (op->kind == REP_OP_INSTR) {
			if (!leave_out || !fetch_hits_last(op->pc, op->size, r->fetch_bits, &last))
				emit(r, op->pc, op->pc, op->size, REP_REF_INSTR);
			nins++;
			op++;
		} else {
			int rc = run_group(r, x, op, off, &nref, &nins);
			if (rc)
				return rc;
			op += 1 + op->nrefs;
		}
	}
	r->st.refs += nref;
	r->st.instrs += nins;
	return 0;
}

/* The block a header names, or an error naming the offset. */
static int check_header(struct rep_recover *r, uint64_t h, uint64_t off, const struct rep_blk **out)
{
	uint32_t id = (uint32_t)h;
	unsigned nd = (unsigned)(h >> 48), flags = (unsigned)(h >> 32 & 0xffff);
	bool repeat = flags == REP_S_REPEAT >> 32;

	if (h == 0 || (flags & ~(REP_S_SPOILED >> 32) && !repeat))
		return rep__fail(-EBADMSG, "REP unit at offset %llu: %#llx is not a unit header",
				 (unsigned long long)off, (unsigned long long)h);
	const struct rep_blk *x = rep__lookup(r->t, id);
	if (!x)
		return rep__fail(-EBADMSG, "REP unit at offset %llu: unknown block id %u",
				 (unsigned long long)off, id);
	if (repeat && nd >= x->b.nslots)
		return rep__fail(-EBADMSG, "REP unit at offset %llu: block %u has %u slots, a "
				 "repeat unit of it holds fewer, not %u",
				 (unsigned long long)off, id, x->b.nslots, nd);
	if (!repeat && nd != x->b.nslots)
		return rep__fail(-EBADMSG,
				 "REP unit at offset %llu: block %u has %u slots, the unit says %u",
				 (unsigned long long)off, id, x->b.nslots, nd);
	*out = x;
	return 0;
}

/* A unit of a block without a group, when nothing takes its references:
 * what it yields is known without reading its slots. */
static inline int count_unit(struct rep_recover *r, const struct rep_blk *x)
{
	r->st.refs += x->fixed_refs;
	r->st.instrs += x->fixed_instrs;
	r->st.units++;
	return count_block(r, (uint32_t)(x - r->t->blks), x->b.id);
}

/* run units of a block with no slots in a row (a loop's header, counted
 * alone: the blocks analysis): the first as count_unit, the others
 * executions of the block and of its edge to itself. */
static int count_run(struct rep_recover *r, const struct rep_blk *x, size_t run)
{
	uint32_t pos = (uint32_t)(x - r->t->blks);
	int rc = count_unit(r, x);

	if (rc || run == 1)
		return rc;
	r->st.refs += (run - 1) * x->fixed_refs;
	r->st.instrs += (run - 1) * x->fixed_instrs;
	r->st.units += run - 1;
	r->counts[pos].n += run - 1;
	return count_edge(r, &r->counts[pos], x->b.id, x->b.id, run - 1);
}

/* How many of w[0..n) repeat w[0], from w[0] on. */
static size_t run_of(const uint64_t *w, size_t n)
{
	size_t k = 1;

	while (k < n && w[k] == w[0])
		k++;
	return k;
}

static int do_unit(struct rep_recover *r, const struct rep_blk *x, const uint64_t *u, uint64_t off)
{
	if (u[0] & REP_S_SPOILED) {	/* its slots are another unit's */
		r->st.spoiled++;
		r->prev = 0;
		r->cut = true;
		return 0;
	}
	if (!r->sink && !x->has_group)	/* counts only: no address to compute */
		return count_unit(r, x);
	uint32_t pos = (uint32_t)(x - r->t->blks);
	struct fetch_plan *f = NULL;
	int rc;
	if (r->fetch_bits && (rc = fetch_plan_of(r, x, pos, &f)))
		return rc;
	r->v[0] = 0;
	for (uint32_t i = 1; i <= x->b.nslots; i++)	/* a few words: no memcpy call */
		r->v[i] = u[i];
	bool leave_out = f && may_leave_out(r, f);
	if (leave_out)	/* (no group: run_block cannot fail) */
		fetches_left_out(r, f, pos);
	if ((rc = run_block(r, x, off, leave_out)))
		return rc;
	r->st.units++;
	r->prev_batch = UINT64_MAX;
	return count_block(r, pos, x->b.id);
}

_Static_assert(offsetof(struct rep_ref, size) == 16 && sizeof(struct rep_ref) == 24,
	       "emit_plan moves size, type and padding as one word");

/* The block of an intact header (spoiled or not), or NULL: check_header
 * then says what is wrong. */
static inline const struct rep_blk *known_block(const struct rep_table *t, uint64_t h)
{
	const struct rep_blk *x = rep__lookup(t, (uint32_t)h);

	return x && x->hdr == (h & ~REP_S_SPOILED) ? x : NULL;
}

/* The references of a block without a group, from its plan: no branch per
 * reference. out is the batch, never the unit or the plan. */
static inline void emit_plan(const struct rep_plan_ref *p, uint32_t n, const uint64_t *u,
			     struct rep_ref *restrict out)
{
	for (uint32_t k = 0; k < n; k++) {
		out[k].pc = p[k].ref.pc;
		out[k].addr = p[k].ref.addr + u[p[k].a] + u[p[k].b] * p[k].scale;
		/* size, type and padding: one 8-byte move (a whole-record copy
		 * went through the stack) */
		memcpy(&out[k].size, &p[k].ref.size, 8);
	}
}

/* The common unit: not spoiled, no group, and all of it fits in the batch,
 * so it is written at once and the batch is sent only when exactly full
 * (as emit would). */
static inline bool fast_unit_fits(const struct rep_recover *r, const struct rep_blk *x,
				  uint64_t h)
{
	return x->plan && h == x->hdr && r->sink && r->nbatch + r->reserve + x->nops <= REP_BATCH &&
	       !r->general_only;
}

/* The common unit when only counts are kept (no sink): not spoiled, no
 * group. */
static inline bool fast_count_fits(const struct rep_recover *r, const struct rep_blk *x,
				   uint64_t h)
{
	return !r->sink && h == x->hdr && !x->has_group && !r->general_only;
}

/* (Always inlined: GCC kept it out of the feed loop once it grew, at a
 * cost.) */
static inline __attribute__((always_inline)) int fast_unit(struct rep_recover *r,
							    const struct rep_blk *x,
							    const uint64_t *u)
{
	uint32_t pos = (uint32_t)(x - r->t->blks), n = x->nops;
	const struct rep_plan_ref *plan = x->plan;

	if (r->fetch_bits) {
		struct fetch_plan *f;
		int rc = fetch_plan_of(r, x, pos, &f);
		if (rc)
			return rc;
		/* (the batch has room for all of x's) */
		if (f->rplan && r->prev == pos + 1 && r->prev_batch == r->nsent) {
			plan = f->rplan;
			n = f->nrplan;
			all_fetches_left_out(r, f, pos);
		} else if (f->nleft) {
			plan = f->plan;
			n = f->nplan;
			fetches_left_out(r, f, pos);
		}
	}
	emit_plan(plan, n, u, r->batch + r->nbatch);
	r->nbatch += n;
	r->prev_batch = r->nsent;
	if (r->nbatch + r->reserve >= REP_BATCH)
		send_batch(r);
	r->st.refs += x->fixed_refs;
	r->st.instrs += x->fixed_instrs;
	r->st.units++;
	return count_block(r, pos, x->b.id);
}

static inline int recover_whole_unit(struct rep_recover *r, const struct rep_blk *x,
				     const uint64_t *u, uint64_t off)
{
	r->last = u;
	return fast_unit_fits(r, x, u[0]) ? fast_unit(r, x, u) : do_unit(r, x, u, off);
}

/* Can a repeat unit of x be rebuilt: is the unit before it x's? */
static inline bool repeat_known(const struct rep_recover *r, const struct rep_blk *x)
{
	return r->prev == (uint32_t)(x - r->t->blks) + 1 && r->last && r->last[0] == x->hdr;
}

/* The whole unit a repeat unit u of x stands for, in r->repeated (now the
 * last unit): its slots, then the rest of the unit before it, each plus
 * its step. */
static inline const uint64_t *fill_repeated(struct rep_recover *r, const struct rep_blk *x,
					    const uint64_t *u)
{
	size_t held = (size_t)(u[0] >> 48);

	r->repeated[0] = x->hdr;
	for (size_t i = 1; i <= held; i++)
		r->repeated[i] = u[i];
	if (x->word_step)
		for (size_t i = held + 1; i <= x->b.nslots; i++)
			r->repeated[i] = r->last[i] + (uint64_t)x->word_step[i];
	else if (r->last != r->repeated)
		for (size_t i = held + 1; i <= x->b.nslots; i++)
			r->repeated[i] = r->last[i];
	r->last = r->repeated;
	return r->repeated;
}

/* The common repeat unit, rebuilt and written by the fast plans. */
static inline bool repeat_fits(const struct rep_recover *r, const struct rep_blk *x)
{
	return repeat_known(r, x) && fast_unit_fits(r, x, x->hdr);
}

/* A repeat unit: the slots it does not hold are those of the unit before
 * it, which must be its block's (nothing else in between: no gap, no
 * spoiled unit, no other block); else it is counted as spoiled. */
static int repeat_unit(struct rep_recover *r, const struct rep_blk *x, const uint64_t *u,
		       uint64_t off)
{
	if (!repeat_known(r, x)) {
		r->st.spoiled++;
		r->prev = 0;
		r->cut = true;
		return 0;
	}
	if (!r->sink && !x->has_group && !r->general_only)	/* counts only: no slot read */
		return count_unit(r, x);
	return recover_whole_unit(r, x, fill_repeated(r, x, u), off);
}

static inline int recover_unit(struct rep_recover *r, const struct rep_blk *x, const uint64_t *u,
			       uint64_t off)
{
	return u[0] & REP_S_REPEAT ? repeat_unit(r, x, u, off) : recover_whole_unit(r, x, u, off);
}

/* The block of a repeat unit's header that holds fewer slots than its
 * block has, or NULL (check_header then says what is wrong). */
static inline const struct rep_blk *repeat_block(const struct rep_table *t, uint64_t h)
{
	const struct rep_blk *x = rep__lookup(t, (uint32_t)h);

	return x && (h & ~(0xffffULL << 48)) == ((x->hdr & 0xffffffffu) | REP_S_REPEAT) &&
	       (h >> 48) < x->b.nslots ? x : NULL;
}

/* The last unit copied where the next feed cannot overwrite it. */
static void keep_last(struct rep_recover *r)
{
	if (r->last && r->last != r->last_kept && r->last != r->repeated) {
		memcpy(r->last_kept, r->last, REP_S_WORDS(r->last[0]) * 8);
		r->last = r->last_kept;
	}
}

void rep__recover_general_only(struct rep_recover *r)
{
	r->general_only = true;
}

static int fail_flush(struct rep_recover *r, int rc)
{
	rep_recover__flush(r);
	return rc;
}

/* The plan fast_unit takes for x's next unit, if it is x's again in this
 * batch (and the fetches it leaves out are counted already: its pending
 * count is not 0), else NULL. */
static const struct rep_plan_ref *steady_plan(struct rep_recover *r, const struct rep_blk *x,
					      uint32_t *m, uint64_t **pending)
{
	struct fetch_plan *f = r->fetch_bits ? &r->fp[x - r->t->blks] : NULL;	/* made */
	const struct rep_plan_ref *plan = x->plan;

	*pending = NULL;
	*m = x->nops;
	if (f && f->rplan) {
		plan = f->rplan;
		*m = f->nrplan;
		*pending = &f->rpending;
	} else if (f && f->nleft) {
		plan = f->plan;
		*m = f->nplan;
		*pending = &f->pending;
	}
	if (r->prev_batch != r->nsent || (*pending && !**pending))
		return NULL;
	return plan;
}

/* The units h from w[at] on, each its held slots and the plan's m
 * references, as long as they fit in room: the entries they took. */
static size_t plain_run(struct rep_recover *r, const struct rep_blk *x,
			const struct rep_plan_ref *plan, uint32_t m, uint64_t h, const uint64_t *w,
			size_t *at, size_t n, size_t room)
{
	const size_t len = REP_S_WORDS(h);
	struct rep_ref *out = r->batch + r->nbatch;
	size_t took = 0;

	while (*at + len <= n && w[*at] == h && room - took >= x->nops) {
		for (size_t j = 1; j < len; j++)
			r->repeated[j] = w[*at + j];
		for (size_t j = len; x->word_step && j <= x->b.nslots; j++)
			r->repeated[j] += (uint64_t)x->word_step[j];
		emit_plan(plan, m, r->repeated, out + took);
		took += m;
		*at += len;
	}
	return took;
}

/* A plan's reference over the repeat units h of a run: its address is
 * addr + u[a] + u[b] * scale over the unit u as it lies in the stream
 * (u[0] = h), the slots the units do not hold folded into addr, which
 * grows by inc (their steps) from one unit to the next. */
struct run_ref {
	uint64_t addr, scale, inc;
	uint16_t a, b;
};

/* The references' rows for the units after the last whole one (for the
 * first of them: addr already has one inc). Whether any inc is not 0. */
static bool run_plan(const struct rep_recover *r, const struct rep_blk *x,
		     const struct rep_plan_ref *plan, uint32_t m, uint64_t h, struct run_ref *out)
{
	const uint64_t *v = r->repeated;	/* the last unit whole, v[0] its block's header */
	const int64_t *step = x->word_step;	/* step[0] is 0 */
	const size_t held = (size_t)(h >> 48);
	bool stepped = false;

	for (uint32_t q = 0; q < m; q++) {
		const struct rep_plan_ref *p = &plan[q];
		out[q] = (struct run_ref){ .addr = p->ref.addr, .scale = p->scale, .a = p->a,
					   .b = p->b };
		if (!p->a || p->a > held) {
			out[q].addr += v[p->a] - h;
			out[q].inc += step ? (uint64_t)step[p->a] : 0;
			out[q].a = 0;
		}
		if (!p->b || p->b > held) {
			out[q].addr += (v[p->b] - h) * p->scale;
			out[q].inc += step ? (uint64_t)step[p->b] * p->scale : 0;
			out[q].b = 0;
		}
		out[q].addr += out[q].inc;
		stepped |= out[q].inc != 0;
	}
	return stepped;
}

/* Do all of a run's references take the same slots (each its own
 * displacement): arrays walked by one index, say? */
static bool one_offset(const struct run_ref *rp, uint32_t m)
{
	for (uint32_t q = 1; q < m; q++)
		if (rp[q].a != rp[0].a || rp[q].b != rp[0].b || rp[q].scale != rp[0].scale)
			return false;
	return true;
}

/* Units h from w[*at] on, at most most of them, whose m references all add
 * the same offset from the unit's slots to their own displacements: the
 * offset is computed once a unit. m is a constant where it is inlined with
 * one, so the inner loop unrolls; so is stepped (the displacements grow
 * by their inc, kept here where the stores to addrs cannot alias them).
 * The units taken. */
static inline __attribute__((always_inline)) uint64_t
one_offset_units(const struct run_ref *rp, const uint32_t m, const bool stepped, uint64_t h,
		 size_t len, const uint64_t *w, size_t *at, size_t n, uint64_t most,
		 unsigned char *addrs)
{
	const uint16_t a = rp[0].a, b = rp[0].b;
	const uint64_t scale = rp[0].scale;
	uint64_t disp[REP_RUN_MAX_REFS], inc[REP_RUN_MAX_REFS], k = 0;
	size_t pos = *at;

	for (uint32_t q = 0; q < m; q++) {
		disp[q] = rp[q].addr;
		inc[q] = rp[q].inc;
	}
	for (; k < most && pos + len <= n && w[pos] == h; k++, pos += len) {
		const uint64_t *u = w + pos, off = u[a] + u[b] * scale;
#pragma GCC unroll 4
		for (uint32_t q = 0; q < m; q++, addrs += 8) {
			uint64_t x = disp[q] + off;
			memcpy(addrs, &x, 8);
			if (stepped)
				disp[q] += inc[q];
		}
	}
	*at = pos;
	return k;
}

/* The same, each reference computing its own address. */
static uint64_t own_offset_units(struct run_ref *rp, uint32_t m, uint64_t h, size_t len,
				 const uint64_t *w, size_t *at, size_t n, uint64_t most,
				 unsigned char *addrs)
{
	uint64_t k = 0;

	for (; k < most && *at + len <= n && w[*at] == h; k++, *at += len) {
		const uint64_t *u = w + *at;
		for (uint32_t q = 0; q < m; q++, addrs += 8) {
			uint64_t x = rp[q].addr + u[rp[q].a] + u[rp[q].b] * rp[q].scale;
			memcpy(addrs, &x, 8);
			rp[q].addr += rp[q].inc;
		}
	}
	return k;
}

/* The units of one header in a row, without a stepped slot (most) or with,
 * into a run's addresses: the units taken. */
static uint64_t run_units(struct run_ref *rp, uint32_t m, bool stepped, uint64_t h, size_t len,
			  const uint64_t *w, size_t *at, size_t n, uint64_t most,
			  unsigned char *addrs)
{
	if (!one_offset(rp, m))
		return own_offset_units(rp, m, h, len, w, at, n, most, addrs);
	switch (m * 2 + stepped) {	/* the common (m, stepped) as constants */
	case 2:
		return one_offset_units(rp, 1, false, h, len, w, at, n, most, addrs);
	case 3:
		return one_offset_units(rp, 1, true, h, len, w, at, n, most, addrs);
	case 4:
		return one_offset_units(rp, 2, false, h, len, w, at, n, most, addrs);
	case 5:
		return one_offset_units(rp, 2, true, h, len, w, at, n, most, addrs);
	case 6:
		return one_offset_units(rp, 3, false, h, len, w, at, n, most, addrs);
	case 7:
		return one_offset_units(rp, 3, true, h, len, w, at, n, most, addrs);
	default:
		return stepped ? one_offset_units(rp, m, true, h, len, w, at, n, most, addrs)
			       : one_offset_units(rp, m, false, h, len, w, at, n, most, addrs);
	}
}

/* The same as a loop's run (rep.h), if at least one unit and its header fit
 * in room: the entries it took, or 0. The addresses come straight from the
 * units' words; the last unit's go to r->repeated at the end. */
static size_t loop_run(struct rep_recover *r, const struct rep_blk *x,
		       const struct rep_plan_ref *plan, uint32_t m, uint64_t h, const uint64_t *w,
		       size_t *at, size_t n, size_t room)
{
	const size_t len = REP_S_WORDS(h);
	struct rep_ref *run = r->batch + r->nbatch;
	unsigned char *addrs = (unsigned char *)(run + 1 + m);
	struct run_ref rp[REP_RUN_MAX_REFS];
	uint64_t k;

	if (m > REP_RUN_MAX_REFS || room < rep_run_entries(m, 1))
		return 0;
	bool stepped = run_plan(r, x, plan, m, h, rp);
	k = run_units(rp, m, stepped, h, len, w, at, n, (room - 1 - m) * 3 / m, addrs);
	if (!k)
		return 0;
	addrs += 8 * k * m;
	memset(addrs, 0, 8 * ((3 - k * m % 3) % 3));	/* the last reference's rest */
	for (size_t j = 1; j < len; j++)
		r->repeated[j] = w[*at - len + j];
	for (size_t j = len; x->word_step && j <= x->b.nslots; j++)
		r->repeated[j] += k * (uint64_t)x->word_step[j];
	run[0] = (struct rep_ref){ .addr = k, .size = m, .type = REP_REF_RUN };
	for (uint32_t q = 0; q < m; q++) {
		run[1 + q].pc = plan[q].ref.pc;
		run[1 + q].addr = 0;
		memcpy(&run[1 + q].size, &plan[q].ref.size, 8);
	}
	return rep_run_entries(m, k);
}

/* The repeat units h of x from w[at] on, right after one of
 * them that fast_unit wrote, as many as fit in the batch: a loop of one
 * block in its steady state. What fast_unit checks holds for each of them
 * as for the first, so each is its held slots and the plan's references
 * (as a loop's run, to a sink that takes them), and their counts are added
 * at the end. The words taken. */
static size_t steady_run(struct rep_recover *r, const struct rep_blk *x, uint64_t h,
			 const uint64_t *w, size_t at, size_t n, int *rc)
{
	uint64_t *pending;
	uint32_t m;
	const struct rep_plan_ref *plan = steady_plan(r, x, &m, &pending);
	const size_t len = REP_S_WORDS(h), from = at;
	size_t room = REP_BATCH - r->reserve - r->nbatch, took = 0;

	if (!plan)
		return 0;
	if (r->runs && m)
		took = loop_run(r, x, plan, m, h, w, &at, n, room);
	if (!took)
		took = plain_run(r, x, plan, m, h, w, &at, n, room);
	uint64_t k = (at - from) / len;
	uint32_t pos = (uint32_t)(x - r->t->blks);
	if (!k)
		return 0;
	r->nbatch += took;
	if (pending)
		*pending += k;
	if (r->nbatch + r->reserve >= REP_BATCH)
		send_batch(r);
	r->st.refs += k * x->fixed_refs;
	r->st.instrs += k * x->fixed_instrs;
	r->st.units += k;
	r->counts[pos].n += k;
	*rc = count_edge(r, &r->counts[pos], x->b.id, x->b.id, k);
	return at - from;
}

/* Repeat units of one block in a row from w[i] on, each rebuilt and
 * written by the block's plan (a loop of one block running on): the words
 * they took, 0 when the first cannot go that way. Out of the whole units'
 * loop, whose code it would slow down. */
static size_t __attribute__((noinline)) repeat_run(struct rep_recover *r, const uint64_t *w,
						    size_t n, size_t i, int *rc)
{
	const struct rep_blk *x = repeat_block(r->t, w[i]);
	size_t at = i, len = REP_S_WORDS(w[i]);

	while (x && at + len <= n && w[at] == w[i] && repeat_fits(r, x)) {
		if ((*rc = fast_unit(r, x, fill_repeated(r, x, w + at))))
			break;
		at += len;
		at += steady_run(r, x, w[i], w, at, n, rc);
		if (*rc)
			break;
	}
	return at - i;
}

/* Whole units from w[i..n), a unit cut at n kept for the next call. The
 * offset and byte count are brought up to date once, at the end (on an
 * error: to the bad unit's start). The last unit is kept in a register
 * here, in r->last for what is called. */
static int feed_units(struct rep_recover *r, const uint64_t *w, size_t n, size_t i)
{
	const size_t i0 = i;
	const uint64_t off0 = r->off;
	const uint64_t *last = r->last;
	int rc = 0;

	while (i < n) {
		const uint64_t *u = w + i;
		const struct rep_blk *x = known_block(r->t, u[0]);
		if (x && i + 1 + x->b.nslots <= n && fast_unit_fits(r, x, u[0])) {
			last = u;
			if ((rc = fast_unit(r, x, u)))
				break;
			i += 1 + (size_t)x->b.nslots;
			continue;
		}
		if (x && i + 1 + x->b.nslots <= n && fast_count_fits(r, x, u[0])) {
			size_t run = x->b.nslots ? 1 : run_of(u, n - i);
			last = u;
			if ((rc = count_run(r, x, run)))
				break;
			i += run * (1 + (size_t)x->b.nslots);
			continue;
		}
		r->last = last;
		if (!x && (u[0] & REP_S_REPEAT)) {	/* a loop's body again */
			size_t took = repeat_run(r, w, n, i, &rc);
			last = r->last;
			if (rc)
				break;
			if (took) {
				i += took;
				continue;
			}
		}
		uint64_t off = off0 + 8 * (uint64_t)(i - i0);
		if (!x && (rc = check_header(r, u[0], off, &x)))
			break;
		size_t len = REP_S_WORDS(u[0]);
		if (i + len > n) {
			keep_last(r);
			last = r->last;
			r->ncarry = n - i;
			r->carry_off = off;
			memcpy(r->carry, u, r->ncarry * 8);
			i = n;
			break;
		}
		rc = recover_unit(r, x, u, off);
		last = r->last;
		if (rc)
			break;
		i += len;
	}
	r->last = last;
	keep_last(r);
	r->off = off0 + 8 * (uint64_t)(i - i0);
	r->st.bytes += 8 * (uint64_t)(i - i0);
	return rc ? fail_flush(r, rc) : 0;
}

int rep_recover__feed(struct rep_recover *r, const uint64_t *w, size_t n, uint64_t offset)
{
	const struct rep_blk *x;
	size_t i = 0;
	int rc;

	if (offset != UINT64_MAX)
		r->off = offset;
	if (r->ncarry) {	/* finish the unit the last call cut */
		if ((rc = check_header(r, r->carry[0], r->carry_off, &x)))
			return fail_flush(r, rc);
		size_t need = REP_S_WORDS(r->carry[0]) - r->ncarry, take = need < n ? need : n;
		memcpy(r->carry + r->ncarry, w, take * 8);
		r->ncarry += take;
		i = take;
		r->off += take * 8;
		r->st.bytes += take * 8;
		if (take < need)
			return 0;
		r->ncarry = 0;
		if ((rc = recover_unit(r, x, r->carry, r->carry_off)))
			return fail_flush(r, rc);
	}
	return feed_units(r, w, n, i);
}

int rep__recover_section_end(struct rep_recover *r, uint64_t end_off)
{
	if (!r->ncarry)
		return 0;
	int rc = rep__fail(-EBADMSG,
			   "REP unit at offset %llu runs past the end of its section at offset %llu",
			   (unsigned long long)r->carry_off, (unsigned long long)end_off);
	r->ncarry = 0;
	return fail_flush(r, rc);
}

int rep_recover__gap(struct rep_recover *r)
{
	r->prev = 0;
	r->st.gaps++;
	if (!r->ncarry)
		return 0;
	size_t have = r->ncarry;
	r->ncarry = 0;
	return fail_flush(r, rep__fail(-EBADMSG,
				       "truncated REP unit at offset %llu: %zu of %zu words",
				       (unsigned long long)r->carry_off, have,
				       REP_S_WORDS(r->carry[0])));
}

/* Records in w[0..n), by their headers' lengths, as the CAB consumer that
 * delivered them walked them. */
uint64_t rep__units_in(const uint64_t *w, size_t n)
{
	uint64_t k = 0;

	for (size_t i = 0; i < n; i += 1 + CAB_HDR_LEN(w[i]))
		k++;
	return k;
}

/* The unit at words[at] could not be recovered: it and the span's rest
 * are lost (the next spans too, up to a chunk's start), with a gap. */
static void skip_to_next_chunk(struct rep_recover *r, const uint64_t *words, size_t at,
			       size_t nwords)
{
	r->st.corrupt += rep__units_in(words + at, nwords - at);
	r->off += (nwords - at) * 8;
	r->ncarry = 0;
	r->resync = true;
	r->prev = 0;
	r->st.gaps++;
}

int rep_recover__cab_fn(void *arg, const uint64_t *words, size_t nwords, unsigned flags)
{
	struct rep_recover *r = arg;
	int rc;

	if (r->resync && !(flags & CAB_SPAN_CHUNK)) {	/* the bad chunk's rest */
		r->st.corrupt += rep__units_in(words, nwords);
		r->off += nwords * 8;
		return 0;
	}
	if (!r->resync && (flags & CAB_SPAN_GAP) && (rc = rep_recover__gap(r)))
		return rc;
	r->resync = false;
	uint64_t start = r->off;
	rc = rep_recover__feed(r, words, nwords, UINT64_MAX);
	if (rc != -EBADMSG)
		return rc;
	/* feed stops at the bad unit: the offset is still its start */
	skip_to_next_chunk(r, words, (size_t)(r->off - start) / 8, nwords);
	return 0;
}

/* ------------------------------------------------------------ results */

uint64_t rep_recover__block_count(const struct rep_recover *r, uint32_t id)
{
	const struct rep_blk *x = rep__lookup(r->t, id);
	size_t p = x ? (size_t)(x - r->t->blks) : SIZE_MAX;

	return p < r->ncounts ? r->counts[p].n : 0;
}

uint64_t rep_recover__edge_count(const struct rep_recover *r, uint32_t from, uint32_t to)
{
	const struct rep_blk *x = rep__lookup(r->t, from);
	size_t p = x ? (size_t)(x - r->t->blks) : SIZE_MAX;
	uint64_t key = (uint64_t)from << 32 | to;
	size_t i = ehash(key, r->ecap);

	if (!to || p >= r->ncounts)
		return 0;
	for (int k = 0; k < 2; k++)
		if (r->counts[p].succ[k] == to)
			return r->counts[p].sn[k];
	while (r->edges[i].key) {
		if (r->edges[i].key == key)
			return r->edges[i].n;
		i = (i + 1) & (r->ecap - 1);
	}
	return 0;
}

int rep_recover__foreach_count(const struct rep_recover *r, rep_count_fn fn, void *arg)
{
	int rc;

	for (size_t p = 0; p < r->ncounts; p++) {
		const struct bcount *b = &r->counts[p];
		uint32_t id = r->t->blks[p].b.id;
		if (b->n && (rc = fn(arg, 0, id, b->n)))
			return rc;
		/* A zero count is an edge taken back (rep__recover_uncount). */
		for (int k = 0; k < 2; k++)
			if (b->succ[k] && b->sn[k] && (rc = fn(arg, id, b->succ[k], b->sn[k])))
				return rc;
	}
	for (size_t i = 0; i < r->ecap; i++)
		if (r->edges[i].key && r->edges[i].n &&
		    (rc = fn(arg, (uint32_t)(r->edges[i].key >> 32), (uint32_t)r->edges[i].key,
			     r->edges[i].n)))
			return rc;
	return 0;
}

int rep_recover__merge(struct rep_recover *dst, const struct rep_recover *src)
{
	int rc;

	if (dst->t != src->t)
		return rep__fail(-EINVAL, "merging recoveries of different block tables");
	if (src->ncounts > dst->ncounts && (rc = grow_counts(dst, src->ncounts)))
		return rc;
	for (size_t p = 0; p < src->ncounts; p++) {
		const struct bcount *b = &src->counts[p];
		uint32_t id = src->t->blks[p].b.id;
		dst->counts[p].n += b->n;
		for (int k = 0; k < 2; k++)
			if (b->succ[k] && (rc = count_edge(dst, &dst->counts[p], id, b->succ[k], b->sn[k])))
				return rc;
	}
	for (size_t i = 0; i < src->ecap; i++) {
		if (!src->edges[i].key)
			continue;
		uint32_t from = (uint32_t)(src->edges[i].key >> 32), to = (uint32_t)src->edges[i].key;
		const struct rep_blk *x = rep__lookup(dst->t, from);
		if ((rc = count_edge(dst, &dst->counts[x - dst->t->blks], from, to, src->edges[i].n)))
			return rc;
	}
	dst->st.units += src->st.units;
	dst->st.refs += src->st.refs;
	dst->st.instrs += src->st.instrs;
	dst->st.bytes += src->st.bytes;
	dst->st.gaps += src->st.gaps;
	dst->st.corrupt += src->st.corrupt;
	dst->st.spoiled += src->st.spoiled;
	return 0;
}

void rep_recover__stats(const struct rep_recover *r, struct rep_recover_stats *st)
{
	*st = r->st;
}

/* ------------------------------------------------- for the recovery pool */

void rep__recover_begin(struct rep_recover *r)
{
	r->prev = 0;
	r->last = NULL;
	r->head = 0;
	r->cut = false;
	r->ncarry = 0;
}

uint32_t rep__recover_head(const struct rep_recover *r)
{
	return r->head;
}

uint32_t rep__recover_tail(const struct rep_recover *r)
{
	return r->prev;
}

void rep_recover__set_batch(struct rep_recover *r, struct rep_ref *batch)
{
	r->batch = batch;
}

int rep__recover_add_edge(struct rep_recover *r, uint32_t from, uint32_t to)
{
	return count_edge(r, &r->counts[from - 1], r->t->blks[from - 1].b.id,
			  r->t->blks[to - 1].b.id, 1);
}

void rep__recover_lost(struct rep_recover *r, uint64_t units)
{
	r->st.corrupt += units;
}

/* Counts wrap: adding 2^64 - 1 takes one away, whatever order the additions
 * and the merges come in. */
int rep__recover_uncount(struct rep_recover *r, const uint64_t *w, uint64_t nunits,
			 const struct rep_recover_stats *delta)
{
	uint32_t prev = 0;
	size_t at = 0;
	int rc;

	for (uint64_t u = 0; u < nunits; u++) {
		const struct rep_blk *x = rep__lookup(r->t, (uint32_t)w[at]);
		while (w[at] & REP_S_SPOILED) {	/* never counted */
			prev = 0;
			at += REP_S_WORDS(w[at]);
			x = rep__lookup(r->t, (uint32_t)w[at]);
		}
		uint32_t p = (uint32_t)(x - r->t->blks);
		r->counts[p].n--;
		if (prev && (rc = count_edge(r, &r->counts[prev - 1], r->t->blks[prev - 1].b.id,
					     x->b.id, UINT64_MAX)))
			return rc;
		prev = p + 1;
		at += REP_S_WORDS(w[at]);
	}
	r->st.units -= delta->units;
	r->st.spoiled -= delta->spoiled;
	r->st.refs -= delta->refs;
	r->st.instrs -= delta->instrs;
	r->st.bytes -= delta->bytes;
	return 0;
}
