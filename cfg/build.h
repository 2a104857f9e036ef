/* build.h: what the files of function discovery share (build.c: the
 * traversal from the entry, jump tables, calls and whether they return;
 * build-blocks.c: the explored instructions made into blocks, edges and
 * address ranges). Not part of cfg.h. */
#ifndef PADRONE_CFG_BUILD_H
#define PADRONE_CFG_BUILD_H

#include "cfg/internal.h"

#include <stdbool.h>
#include <stdint.h>

#define H_UNKNOWN INT32_MIN
#define JT_PATH 64

struct bi {			/* an instruction while building */
	const struct cfg_insn *d;
	int32_t ft_prev;	/* the instruction falling into this one */
	int32_t ft_next;	/* the next one when this one falls through */
	int32_t prev;		/* a predecessor, for backward slices */
	int32_t h;		/* stack height at this instruction */
	int32_t table;		/* jump table index, or -1 */
	int32_t block;
	uint8_t leader, prev_taken, tail, noret, terminal;
};

struct work {
	uint64_t addr;
	int32_t from;
	int32_t h, rbp_h;
	uint8_t taken;
};

struct fb {
	struct cfg_reader *r;
	struct cfg_build_opts o;
	bool summary;		/* only: does it return? */
	uint64_t entry, lo, hi;	/* [lo, hi): the entry's FDE, if any */
	struct bi *iv;
	size_t ni, ci;
	struct util_hmap at;
	struct work *wv;
	size_t nw, cw;
	struct cfg_jt_result *tv;
	size_t nt, ct;
	struct cfg_call *cv;
	size_t nc, cc;
	char *names;
	size_t nnames, cnames;
	enum cfg_error err;
	uint64_t err_at;
	char err_msg[160];
	bool returns;		/* a path reaches a return */
	size_t unresolved;
	uint64_t lsda_seen[16];	/* FDEs whose landing pads were pushed */
	size_t nlsda;
};

/* Records the first error (later ones are dropped); unknown code may return. */
void cfg__fb_error(struct fb *b, enum cfg_error e, uint64_t at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Fills f from the explored instructions of b (build-blocks.c). */
int cfg__fb_fill(struct fb *b, struct cfg_function *f);

/* The index of the instruction at addr, or -1. */
static inline int32_t find(const struct fb *b, uint64_t addr)
{
	uint32_t *ix = util_hmap__get(&b->at, addr);
	return ix ? (int32_t)*ix : -1;
}

/* Is t inside the entry's own FDE? */
static inline bool in_own(const struct fb *b, uint64_t t)
{
	return b->lo < b->hi && t >= b->lo && t < b->hi;
}

#endif
