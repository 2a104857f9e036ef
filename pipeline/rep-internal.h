/* rep-internal.h: what rep.c, rep-build.c, recover.c and rep-file.c share; not a
 * public header. */
#ifndef PADRONE_PIPELINE_REP_INTERNAL_H
#define PADRONE_PIPELINE_REP_INTERNAL_H

#include "pipeline/rep.h"

/* A block compiled for recovery: one op per instruction fetch, per data
 * reference, and a group header before the references of a rep-prefixed
 * instruction. Slot positions are indexes into the unit with the header
 * word replaced by 0 (so 0 means "no slot"). */
enum { REP_OP_INSTR = 1, REP_OP_REF = 2, REP_OP_GROUP = 3 };

struct rep_op {
	uint64_t pc;
	int64_t disp;
	uint32_t size;		/* INSTR/GROUP: instruction length; REF: bytes */
	uint8_t kind;
	uint8_t type;		/* REF: type; GROUP: 1 if the fetch is emitted */
	uint8_t shift;		/* log2 scale */
	uint8_t down;		/* GROUP: DF known to be 1 */
	uint16_t base, index, seg;
	uint16_t count;		/* GROUP: position of the count; REF: 0 */
	uint16_t count_end;	/* GROUP: position of the count after, 0: none */
	uint16_t rflags;	/* GROUP: position of rflags (DF: bit 10), 0: none */
	uint32_t nrefs;		/* GROUP: references in the group */
};

/* The fast plan of a block without a rep-prefixed group whose references
 * each add at most two slots (base, index, fs/gs base: all three is rare):
 * one entry per reference it yields, fetches included, in order. Recovery
 * copies ref and adds the unit's words at a and at b (times scale) to
 * ref.addr, with no branch: positions index the unit as it lies in the
 * stream (word 0 is the header). An absent slot is position 0, so it reads
 * the header, whose value a unit on the fast path is known to have
 * (rep_blk.hdr); ref.addr has that much taken off for every absent slot,
 * which cancels exactly (modulo 2^64). A fetch is a reference of addr = pc
 * with no slot at all. */
struct rep_plan_ref {
	struct rep_ref ref;	/* addr: the displacement less the absent slots' header values */
	uint16_t a, b;
	uint16_t scale;		/* a multiply: one micro-op where a shift by cl is three */
	uint16_t pad;
};

struct rep_blk {
	struct rep_block b;	/* owned copies of instrs and refs */
	struct rep_op *ops;
	uint32_t nops;
	/* what one execution yields when it has no rep-prefixed group (whose
	 * count is dynamic): counting needs no address then */
	bool has_group;
	uint32_t fixed_refs, fixed_instrs;
	uint64_t hdr;		/* the header of a unit of this block, not spoiled */
	/* NULL, or b.steps by word of a unit (word 1 + k is slot k; word 0
	 * is 0): b.steps points into it */
	int64_t *word_step;
	struct rep_plan_ref *plan;	/* fixed_refs + fixed_instrs entries, or NULL */
};

struct rep_table {
	struct rep_blk *blks;
	size_t n, cap;
	uint32_t *idx;		/* id -> position in blks + 1, 0 if none */
	uint32_t nidx;		/* entries in idx */
};

int rep__fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline const struct rep_blk *rep__lookup(const struct rep_table *t, uint32_t id)
{
	return id < t->nidx && t->idx[id] ? &t->blks[t->idx[id] - 1] : NULL;
}

/* A stream section ended at end_off: a unit cut there is an error. */
int rep__recover_section_end(struct rep_recover *r, uint64_t end_off);

/* Recovery delivers references in batches of REP_BATCH. */
#define REP_BATCH REP_RECOVER_BATCH

/* For the recovery pool (rep-pool.c), which recovers a stream in chunks on
 * several threads and joins the chunks' counts afterwards. */
/* A chunk starts: no edge into its first unit (the pool adds it), nothing
 * held; unlike rep_recover__gap, not counted as a gap. */
void rep__recover_begin(struct rep_recover *r);
/* Table position + 1 of the first and of the last unit counted since the
 * last begin or gap; 0 if none. */
uint32_t rep__recover_head(const struct rep_recover *r);
uint32_t rep__recover_tail(const struct rep_recover *r);
/* One more edge between table positions + 1. */
int rep__recover_add_edge(struct rep_recover *r, uint32_t from, uint32_t to);
/* Units in w[0..n) by their headers' lengths (the rest of a feed after bad
 * data, whose units were not recovered: a header that says nothing true
 * still ends the walk, within n). */
uint64_t rep__units_in(const uint64_t *w, size_t n);
/* For the tests: recover every unit through the general path (the one that
 * handles rep-prefixed groups and batch ends one reference at a time), so
 * the fast plans can be compared with it. */
void rep__recover_general_only(struct rep_recover *r);
/* Units that could not be recovered: counted as corrupt. */
void rep__recover_lost(struct rep_recover *r, uint64_t units);
/* Take back the counts of nunits whole units at w (as recovered in one go,
 * edges between them) and the stats delta they added. */
int rep__recover_uncount(struct rep_recover *r, const uint64_t *w, uint64_t nunits,
			 const struct rep_recover_stats *delta);

#endif
