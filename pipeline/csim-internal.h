/* csim-internal.h: what the simulator files share (not installed, not for
 * other rooms). The hot path lives here as static inline functions so the
 * standalone simulator (csim.c) and the split workers (split.c) compile
 * the same code. */
#ifndef PADRONE_CSIM_INTERNAL_H
#define PADRONE_CSIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "pipeline/pipeline.h"

/* A tag that no line number can equal (line numbers are addresses shifted
 * right by at least four bits). */
#define CSIM_EMPTY UINT64_MAX

/* Cachegrind cuts dirty-helper accesses (fxsave, xsave, fnsave…) to its
 * minimum line size; plain loads and stores are at most 32 bytes (AVX). */
#define CSIM_CG_MAX_DIRTY 16u

struct csim_cache {
	uint64_t *tags;		/* nsets_local * assoc, each set MRU first */
	uint64_t sets;		/* sets of the level */
	uint64_t set_mask;	/* sets - 1 when pow2 */
	uint32_t assoc;
	uint32_t line_bits;
	bool pow2;
	/* A split worker stores only the sets it owns. The routing key is
	 * kbits of the set number above its low kshift bits (which only tell
	 * apart the lines of one routing block when lines are smaller than
	 * the largest); key k is owned when krank[k] >= 0 and the set stored
	 * at ((set >> (kshift + kbits)) * kowned + krank[k]) << kshift | low. */
	bool compact;
	uint32_t kshift, kbits;
	uint64_t kowned;
	const int32_t *krank;
	uint64_t nsets_local;
};

struct csim_rowtab;

/* Per-PC rows with stable addresses, found by open addressing. */
struct csim_result {
	struct csim_counts tot;
	bool tot_dirty;
	struct csim_pc_stats **chunks;	/* CSIM_ROW_CHUNK rows each */
	size_t nchunks, nrows;
	struct csim_slot_ent {
		uint64_t pc;
		struct csim_pc_stats *row;
	} *slots;
	size_t nslots;			/* power of two */
	unsigned slot_shift;		/* 64 - log2(nslots) */
	struct csim_pc_stats *last;	/* the row found last */
};

#define CSIM_ROW_CHUNK 1024

struct csim_pc_stats *csim_result_lookup_slow(struct csim_result *r, uint64_t pc);

static inline struct csim_pc_stats *csim_result_lookup(struct csim_result *r, uint64_t pc)
{
	/* An instruction fetch and its data accesses share a PC: one probe
	 * usually serves several references. */
	if (r->last && r->last->pc == pc)
		return r->last;
	if (r->nslots) {
		size_t mask = r->nslots - 1;
		size_t i = (size_t)((pc * 0x9E3779B97F4A7C15ull) >> r->slot_shift);
		for (;; i = (i + 1) & mask) {
			if (r->slots[i].row == NULL)
				break;
			if (r->slots[i].pc == pc)
				return r->last = r->slots[i].row;
		}
	}
	return csim_result_lookup_slow(r, pc);
}

/* One simulator's levels and chain. */
struct csim_levels {
	struct csim_cache lv[CSIM_NLEVELS];
	int next[CSIM_NLEVELS];		/* next level on a miss, -1 for none */
	bool cachegrind;
};

int csim_levels_init(struct csim_levels *L, const struct csim_config *cfg, uint32_t kbits,
		     const int32_t *krank, uint64_t kowned);
void csim_levels_free(struct csim_levels *L);
void csim_levels_flush(struct csim_levels *L);

static inline uint64_t csim_cache_set(const struct csim_cache *c, uint64_t line)
{
	return c->pow2 ? (line & c->set_mask) : (line % c->sets);
}

/* Where a set is stored: itself, or its place among a worker's sets. */
static inline uint64_t csim_cache_local_set(const struct csim_cache *c, uint64_t set)
{
	if (c->compact) {
		uint64_t low = set & ((1ull << c->kshift) - 1);
		uint64_t key = (set >> c->kshift) & ((1ull << c->kbits) - 1);
		uint64_t hi = set >> (c->kshift + c->kbits);
		set = ((hi * c->kowned + (uint64_t)c->krank[key]) << c->kshift) | low;
	}
	return set;
}

static inline uint64_t *csim_cache_set_ptr(const struct csim_cache *c, uint64_t set)
{
	return c->tags + csim_cache_local_set(c, set) * c->assoc;
}

/* Look line up in its set, make it most recently used (installing it on a
 * miss, dropping the least recently used). Returns true on a miss. */
static inline bool csim_cache_ref(const struct csim_cache *c, uint64_t line)
{
	uint64_t *set = csim_cache_set_ptr(c, csim_cache_set(c, line));
	uint32_t a = c->assoc, i;

	if (set[0] == line)
		return false;
	for (i = 1; i < a; i++)
		if (set[i] == line)
			break;
	bool miss = i == a;
	if (miss)
		i = a - 1;
	for (; i > 0; i--)
		set[i] = set[i - 1];
	set[0] = line;
	return miss;
}

/* The lines [first, last] an access covers at a level. */
static inline void csim_cache_lines(const struct csim_cache *c, uint64_t addr, uint32_t size,
				    uint64_t *first, uint64_t *last)
{
	uint64_t end = addr + (size ? size : 1) - 1;
	if (end < addr)
		end = UINT64_MAX;
	*first = addr >> c->line_bits;
	*last = end >> c->line_bits;
}

/* Cachegrind's access: every line updated, one miss if any line missed. */
static inline bool csim_cache_access(const struct csim_cache *c, uint64_t addr, uint32_t size)
{
	uint64_t l, first, last;
	bool miss = false;

	csim_cache_lines(c, addr, size, &first, &last);
	for (l = first;; l++) {
		miss |= csim_cache_ref(c, l);
		if (l == last)
			break;
	}
	return miss;
}

/* Size as cachegrind simulates it (CSIM_CG_MAX_DIRTY). */
static inline uint32_t csim_cg_size(const struct rep_ref *r)
{
	uint32_t size = r->size ? r->size : 1;
	if (r->type != REP_REF_INSTR && size > CSIM_CG_MAX_DIRTY && size != 32)
		size = CSIM_CG_MAX_DIRTY;
	return size;
}

/* Count a reference (not its accesses) in row. */
static inline void csim_count_ref(struct csim_counts *c, uint8_t type, bool cachegrind)
{
	switch (type) {
	case REP_REF_INSTR:
		c->instr++;
		c->refs[CSIM_INSTR]++;
		break;
	case REP_REF_READ:
		c->reads++;
		c->refs[CSIM_READ]++;
		break;
	case REP_REF_WRITE:
		c->writes++;
		c->refs[CSIM_WRITE]++;
		break;
	default:
		c->modifies++;
		c->refs[CSIM_READ]++;
		if (!cachegrind)
			c->refs[CSIM_WRITE]++;
	}
}

/* Cachegrind mode: the chain from level lv down, for the whole access. */
static inline void csim_cg_chain(const struct csim_levels *L, int lv, uint64_t addr,
				 uint32_t size, int kind, struct csim_counts *c)
{
	while (lv >= 0) {
		c->access[lv][kind]++;
		if (!csim_cache_access(&L->lv[lv], addr, size))
			return;
		c->miss[lv][kind]++;
		lv = L->next[lv];
	}
}

/* Per-line mode: each line of [lo, hi] at lv is its own access; a miss
 * fetches that line's bytes from the next level. */
void csim_line_chain(const struct csim_levels *L, int lv, uint64_t lo, uint64_t hi, int kind,
		     struct csim_counts *c);

static inline int csim_first_level(uint8_t type)
{
	return type == REP_REF_INSTR ? CSIM_I1 : CSIM_D1;
}

static inline int csim_kind_of(uint8_t type)
{
	return type == REP_REF_INSTR ? CSIM_INSTR : type == REP_REF_WRITE ? CSIM_WRITE : CSIM_READ;
}

/* Simulate one whole reference; counts go to row. */
static inline void csim_sim_ref(const struct csim_levels *L, const struct rep_ref *r,
				struct csim_counts *row)
{
	int first = csim_first_level(r->type);

	csim_count_ref(row, r->type, L->cachegrind);
	if (L->cachegrind) {
		csim_cg_chain(L, first, r->addr, csim_cg_size(r), csim_kind_of(r->type), row);
		return;
	}
	uint64_t end = r->addr + (r->size ? r->size : 1) - 1;
	if (end < r->addr)
		end = UINT64_MAX;
	if (r->type == REP_REF_MODIFY) {
		csim_line_chain(L, first, r->addr, end, CSIM_READ, row);
		csim_line_chain(L, first, r->addr, end, CSIM_WRITE, row);
	} else {
		csim_line_chain(L, first, r->addr, end, csim_kind_of(r->type), row);
	}
}

void csim_counts_add(struct csim_counts *dst, const struct csim_counts *src);
bool csim_ref_type_valid(uint8_t type);

#endif
