/* analysis-internal.h: helpers the analysis files share (room-internal). */
#ifndef PADRONE_ANALYSIS_INTERNAL_H
#define PADRONE_ANALYSIS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pipeline/pipeline.h"

/* A hash map from a pair of 64-bit keys to a 64-bit value, open
 * addressing; grows by doubling (allocation only then). */
struct pl_map_ent {
	uint64_t a, b, v;
	bool used;
};
struct pl_map {
	struct pl_map_ent *e;
	size_t cap, n;
};

/* The value of (a, b), created zero when create; NULL if absent (or out of
 * memory when create). */
uint64_t *pl_map_get(struct pl_map *m, uint64_t a, uint64_t b, bool create);
void pl_map_free(struct pl_map *m);
/* The used entries, sorted by value descending then (a, b); caller frees. */
struct pl_map_ent *pl_map_sorted(const struct pl_map *m, size_t *n);

/* A count map's report: its rows, most first (at most top; 0: all), as
 * text lines "  0xA -> 0xB  N" (pair) or "  0xA  N", after a header line
 * "TITLE (from SOURCE): N distinct, TOTAL TOTAL_NAME"; or as JSON
 * {"distinct":N,TOTAL_NAME:T,"top":[{"from","to"|"pc","count"}]}. */
int pl_map_write_text(FILE *out, const struct pl_map *m, size_t top, bool pair, const char *title,
		      bool explicit, const char *total_name, uint64_t total);
struct json_object *pl_map_to_json(const struct pl_map *m, size_t top, bool pair,
				   const char *total_name, uint64_t total);

/* Blocks from an instruction stream that carries no block table (a lackey
 * trace): a block starts at an instruction that does not follow the previous
 * one in memory, i.e. where control was transferred. Keyed by start PC. */
struct pl_flow {
	uint64_t expect;	/* address after the previous instruction */
	uint64_t cur;		/* start of the block being executed */
	bool have;
};

/* Feed one reference. true when an instruction starts a block: *start is its
 * PC, and *prev and *prev_end (valid when *has_prev) the previous block's
 * start and the end of what ran of it. */
static inline bool pl_flow_step(struct pl_flow *f, const struct rep_ref *r, uint64_t *start,
				uint64_t *prev, uint64_t *prev_end, bool *has_prev)
{
	if (r->type != REP_REF_INSTR)
		return false;
	bool new_block = !f->have || r->addr != f->expect;
	uint64_t end = f->expect;
	f->expect = r->addr + r->size;
	if (!new_block)
		return false;
	*has_prev = f->have;
	*prev = f->cur;
	*prev_end = end;
	*start = f->cur = r->addr;
	f->have = true;
	return true;
}

#endif
