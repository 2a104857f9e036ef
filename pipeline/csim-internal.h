/* csim-internal.h: what the simulator files share (not installed, not for
 * other rooms). The hot path lives here as static inline functions so the
 * standalone simulator (csim.c) and the split workers (split-worker.c) compile
 * the same code. */
#ifndef PADRONE_CSIM_INTERNAL_H
#define PADRONE_CSIM_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "pipeline/pipeline.h"

/* The per-reference helpers: always inlined (the compiler sometimes keeps
 * them out of line in the worker loop, at a measurable cost). */
#define CSIM_HOT static inline __attribute__((always_inline))

/* A tag that no line number can equal (line numbers are addresses shifted
 * right by at least four bits). */
#define CSIM_EMPTY UINT64_MAX

/* Cachegrind cuts dirty-helper accesses (fxsave, xsave, fnsave…) to its
 * minimum line size; plain loads and stores are vectors of 32 bytes (AVX,
 * what valgrind 3.19 knows) or 64 (AVX-512, in REP streams from real
 * hardware), which are kept. */
#define CSIM_CG_MAX_DIRTY 16u

/* Windows (csim__window_begin): a tag's top bits count the windows begun
 * since its line was last used (0: this one; at most CSIM_AGE_MAX), the
 * bits below them are the line (CSIM_EMPTY is never aged). */
#define CSIM_AGE_SHIFT 60
#define CSIM_AGE_MAX 7u
#define CSIM_LINE_MASK ((1ull << CSIM_AGE_SHIFT) - 1)

struct csim_cache {
	uint64_t *tags;		/* nsets_local * assoc, each set MRU first; 64-byte aligned */
	/* NULL until the first window: then the misses since, and the hits
	 * on lines aged g at way w at 1 + g * assoc + w (csim_set_ref_aged). */
	uint64_t *aged;
	uint64_t set_mask;	/* sets - 1 when pow2 */
	uint32_t assoc;
	uint32_t line_bits;
	bool direct;		/* pow2 and not compact: a set is line & set_mask */
	uint8_t simd;		/* enum csim_simd: the search for this assoc and CPU */
	bool pow2;
	uint64_t sets;		/* sets of the level */
	/* A split worker stores only the sets it owns, of levels whose tags
	 * take more than csim_compact_min bytes. The routing key is
	 * kbits of the set number above its low kshift bits (which only tell
	 * apart the lines of one routing block when lines are smaller than
	 * the largest); key k is owned when krank[k] >= 0 and the set stored
	 * at ((set >> (kshift + kbits)) * kowned + krank[k]) << kshift | low.
	 * When the owned keys are those alike in their low kdrop bits (a
	 * power-of-two number of workers), that is the set without those
	 * kdrop bits: one shift, no table. */
	bool compact;
	uint32_t kshift, kbits, kdrop;
	uint64_t low_mask, key_mask;	/* low kshift bits; kbits bits */
	uint64_t kowned;
	const int32_t *krank;
	uint64_t nsets_local;
};

/* A PC's row, split by how often it is touched. The hot part is two cache
 * lines, 128-byte aligned (CPUs fetch such pairs together): the first is all
 * a reference that hits touches, the second takes the last level, which
 * first-level misses reach. The cold part (same index in a parallel array)
 * takes L2 and per-line mode's extra first-level accesses.
 *
 * hot.refs counts accesses by kind (Ir, Dr, Dw: a modify adds to Dr, and
 * in per-line mode to Dw too). The first level's access count is refs plus
 * cold.access[first] (the extra lines of straddling accesses in per-line
 * mode, and parts that do not count their reference); its misses are
 * hot.miss1. csim_row_counts() assembles the public struct csim_counts. */
struct csim_hot {
	uint64_t pc;
	uint64_t refs[CSIM_NKINDS];
	uint64_t modifies;
	uint64_t miss1[CSIM_NKINDS];	/* I1 for instructions, D1 for data */
	uint64_t ll_access[CSIM_NKINDS];
	uint64_t ll_miss[CSIM_NKINDS];
} __attribute__((aligned(128)));

struct csim_cold {
	uint64_t access[CSIM_LL][CSIM_NKINDS];	/* I1, D1, L2 */
	uint64_t miss[CSIM_LL][CSIM_NKINDS];	/* L2 (first levels: hot.miss1) */
};

/* Rows are dense, in the order their PCs first came, so that a row's size
 * does not multiply with the table's slack. An index of row numbers finds
 * them by open addressing on the PC (CSIM_NO_ROW marks a free slot): 4
 * bytes a slot, so that the index of a program's hot PCs stays in cache.
 * The row of pc CSIM_NO_PC is found through nopc_row, not the index. */
#define CSIM_NO_PC UINT64_MAX
#define CSIM_NO_ROW UINT32_MAX

/* The rows of the PCs seen last, direct-mapped by the PC's low bits: most
 * references find their row here with one load, and a loop's PCs rarely
 * collide. An empty entry holds a PC that maps elsewhere. */
#define CSIM_MEMO 256

struct csim_memo {
	uint64_t pc;
	uint64_t row;
};

struct csim_result {
	struct csim_memo memo[CSIM_MEMO];
	uint32_t *index;
	size_t cap;			/* slots: a power of two, or 0 */
	unsigned shift;			/* 64 - log2(cap) */
	struct csim_hot *hot;		/* rows: n used of nalloc */
	struct csim_cold *cold;
	size_t n, nalloc;
	size_t nopc_row;		/* the row of CSIM_NO_PC, or SIZE_MAX */
	bool cachegrind;		/* counting mode (how modifies count) */
	bool mode_set;
	struct csim_counts tot;
	bool tot_dirty;
};

/* Not found by csim_result_lookup: CSIM_NO_PC, or a new row. The rows may
 * move (as after any lookup). NULL when out of memory. */
struct csim_hot *csim_result_lookup_slow(struct csim_result *r, uint64_t pc);

/* The row of pc, created zero if new. A row found is valid until the next
 * lookup. */
CSIM_HOT struct csim_hot *csim_result_lookup_index(struct csim_result *r, uint64_t pc);

CSIM_HOT struct csim_hot *csim_result_lookup(struct csim_result *r, uint64_t pc)
{
	const struct csim_memo *m = &r->memo[pc & (CSIM_MEMO - 1)];

	if (__builtin_expect(m->pc == pc, 1))
		return &r->hot[m->row];
	struct csim_hot *h = csim_result_lookup_index(r, pc);
	if (__builtin_expect(h != NULL, 1) && pc != CSIM_NO_PC)
		r->memo[pc & (CSIM_MEMO - 1)] = (struct csim_memo){ pc, (uint64_t)(h - r->hot) };
	return h;
}

/* The row of pc by the index (csim_result_lookup's way past the memo). */
CSIM_HOT struct csim_hot *csim_result_lookup_index(struct csim_result *r, uint64_t pc)
{
	/* The index is at most a quarter full: a PC is nearly always in its
	 * home slot. No test of the last row found: an instruction fetch and
	 * its data accesses come in no predictable pattern, and its row is
	 * cached anyway. */
	if (__builtin_expect(r->cap != 0, 1)) {
		size_t mask = r->cap - 1;
		for (size_t i = (size_t)((pc * 0x9E3779B97F4A7C15ull) >> r->shift);; i = (i + 1) & mask) {
			uint32_t row = r->index[i];
			if (row == CSIM_NO_ROW)
				break;
			if (__builtin_expect(r->hot[row].pc == pc, 1))
				return &r->hot[row];
		}
	}
	return csim_result_lookup_slow(r, pc);
}

static inline struct csim_cold *csim_cold_of(struct csim_result *r, struct csim_hot *h)
{
	return r->cold + (h - r->hot);
}

/* A row's access and miss counters (by kind) at level lv: hot for the
 * last level, cold otherwise. */
CSIM_HOT uint64_t *csim_row_access(struct csim_result *r, struct csim_hot *h, int lv)
{
	return lv == CSIM_LL ? h->ll_access : csim_cold_of(r, h)->access[lv];
}

CSIM_HOT uint64_t *csim_row_miss(struct csim_result *r, struct csim_hot *h, int lv)
{
	return lv == CSIM_LL ? h->ll_miss : csim_cold_of(r, h)->miss[lv];
}

/* Set the counting mode of a result (first use) — false if it had
 * another. */
bool csim_result_set_mode(struct csim_result *r, bool cachegrind);

/* One simulator's levels and chain. */
struct csim_levels {
	struct csim_cache lv[CSIM_NLEVELS];
	int next[CSIM_NLEVELS];		/* next level on a miss, -1 for none */
	bool cachegrind;
	uint8_t simd;			/* the best of the levels': which loops to take */
};

/* Levels with more tags than this (bytes) are compact in split workers
 * (tests lower it to make every level compact). */
extern size_t csim_compact_min;

int csim_levels_init(struct csim_levels *L, const struct csim_config *cfg, uint32_t kbits,
		     const int32_t *krank, uint64_t kowned);
void csim_levels_free(struct csim_levels *L);
void csim_levels_flush(struct csim_levels *L);

CSIM_HOT uint64_t csim_cache_set(const struct csim_cache *c, uint64_t line)
{
	return c->pow2 ? (line & c->set_mask) : (line % c->sets);
}

/* Where a set is stored: itself, or its place among a worker's sets. */
CSIM_HOT uint64_t csim_cache_local_set(const struct csim_cache *c, uint64_t set)
{
	if (c->compact) {
		uint64_t low = set & c->low_mask;
		if (c->kdrop)
			return ((set >> (c->kshift + c->kdrop)) << c->kshift) | low;
		uint64_t key = (set >> c->kshift) & c->key_mask;
		uint64_t hi = set >> (c->kshift + c->kbits);
		set = ((hi * c->kowned + (uint64_t)c->krank[key]) << c->kshift) | low;
	}
	return set;
}

/* The tags of the set where line lives. */
CSIM_HOT uint64_t *csim_line_set(const struct csim_cache *c, uint64_t line)
{
	if (__builtin_expect(c->direct, 1))
		return c->tags + (line & c->set_mask) * c->assoc;
	return c->tags + csim_cache_local_set(c, csim_cache_set(c, line)) * c->assoc;
}

/* Vector set searches, chosen per level at run time (csim_cache.simd).
 * Functions compiled for AVX2 or AVX-512 run only on CPUs that have them:
 * the batch loops come in copies, plain, CSIM_AVX2 and CSIM_AVX512
 * (csim_levels.simd picks one), so that the searches are inlined into the
 * copy that may run them; plain code calls them out of line. */
enum csim_simd { CSIM_SCALAR, CSIM_SIMD_AVX2, CSIM_SIMD_AVX512 };

/* The best search new levels may use (tests lower it to try the others;
 * the CPU may allow less). */
extern enum csim_simd csim_simd_max;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CSIM_HAVE_SIMD 1
#define CSIM_AVX2 __attribute__((target("avx2")))
#define CSIM_AVX512 __attribute__((target("avx2,avx512f")))

/* The two searches below compare the line with every way at once, then
 * rewrite the set: the ways up to the one that matched (all of them on a
 * miss) take their left neighbour's tag, way 0 the line. No branch depends
 * on where the line was, which no predictor could guess. */

/* AVX2: n4 groups of 4 ways. */
CSIM_AVX2 static inline __attribute__((always_inline)) bool csim_set_ref_x4(uint64_t *set,
									    uint64_t line,
									    const unsigned n4)
{
	__m256i t = _mm256_set1_epi64x((long long)line), v[4], prev = t;
	unsigned m = 0;

#pragma GCC unroll 4
	for (unsigned g = 0; g < n4; g++) {
		v[g] = _mm256_load_si256((const __m256i *)(const void *)(set + 4 * g));
		__m256i eq = _mm256_cmpeq_epi64(v[g], t);
		m |= (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(eq)) << (4 * g);
	}
	/* The way that matched, or the last one on a miss. */
	__m256i upto = _mm256_set1_epi64x(__builtin_ctz(m | 1u << (4 * n4 - 1)));
#pragma GCC unroll 4
	for (unsigned g = 0; g < n4; g++) {
		/* The last way of the previous group, then ways 0..2 of this. */
		__m256i sh = _mm256_alignr_epi8(v[g], _mm256_permute2x128_si256(prev, v[g], 0x21), 8);
		__m256i idx = _mm256_setr_epi64x(4 * g, 4 * g + 1, 4 * g + 2, 4 * g + 3);
		__m256i keep = _mm256_cmpgt_epi64(idx, upto);
		_mm256_store_si256((__m256i *)(void *)(set + 4 * g), _mm256_blendv_epi8(sh, v[g], keep));
		prev = v[g];
	}
	return m == 0;
}

/* 4, 8, 12 or 16 ways. */
CSIM_AVX2 static inline bool csim_set_ref_avx2(uint64_t *set, uint32_t a, uint64_t line)
{
	switch (a) {
	case 4:
		return csim_set_ref_x4(set, line, 1);
	case 8:
		return csim_set_ref_x4(set, line, 2);
	case 12:
		return csim_set_ref_x4(set, line, 3);
	default:
		return csim_set_ref_x4(set, line, 4);
	}
}

/* AVX-512: n8 groups of 8 ways, a cache line each. */
CSIM_AVX512 static inline __attribute__((always_inline)) bool csim_set_ref_x8(uint64_t *set,
									      uint64_t line,
									      const unsigned n8)
{
	__m512i t = _mm512_set1_epi64((long long)line), v[2], prev = t;
	unsigned m = 0;

#pragma GCC unroll 2
	for (unsigned g = 0; g < n8; g++) {
		v[g] = _mm512_load_si512((const void *)(set + 8 * g));
		m |= (unsigned)_mm512_cmpeq_epi64_mask(v[g], t) << (8 * g);
	}
	/* Ways 0 up to the match (m has at most one bit), or all of them. */
	unsigned upto = m ^ (m - 1);
#pragma GCC unroll 2
	for (unsigned g = 0; g < n8; g++) {
		/* Where upto says: the previous group's last way, then ways
		 * 0..6 of this one. */
		__m512i nv = _mm512_mask_alignr_epi64(v[g], (__mmask8)(upto >> (8 * g)), v[g], prev, 7);
		_mm512_store_si512((void *)(set + 8 * g), nv);
		prev = v[g];
	}
	return m == 0;
}

/* 8 or 16 ways. */
CSIM_AVX512 static inline bool csim_set_ref_avx512(uint64_t *set, uint32_t a, uint64_t line)
{
	return a == 8 ? csim_set_ref_x8(set, line, 1) : csim_set_ref_x8(set, line, 2);
}
#else
#define CSIM_HAVE_SIMD 0
#define CSIM_AVX2
#define CSIM_AVX512
#endif

/* csim_set_ref once windows began (c->aged): a line aged or not is the
 * same line, and each hit on an aged one is counted by its age and way. */
bool csim_set_ref_aged(const struct csim_cache *c, uint64_t *set, uint64_t line);

/* Look line up in set (assoc ways, most recently used first), make it
 * most recently used (installing it on a miss, dropping the least recently
 * used). Returns true on a miss. */
CSIM_HOT bool csim_set_ref(const struct csim_cache *c, uint64_t *set, uint64_t line)
{
	uint32_t a = c->assoc, i;

	/* The line used last in its set, as most references are (the next
	 * instruction of a line, the next element of an array): a hit that
	 * changes nothing, found with one compare (as cachegrind's cg_sim.c
	 * checks first). */
	if (__builtin_expect(set[0] == line, 1))
		return false;
#if CSIM_HAVE_SIMD
	if (c->simd == CSIM_SIMD_AVX512)
		return csim_set_ref_avx512(set, a, line);
	if (c->simd == CSIM_SIMD_AVX2)
		return csim_set_ref_avx2(set, a, line);
#endif
	if (__builtin_expect(c->aged != NULL, 0))	/* (its levels search as scalars) */
		return csim_set_ref_aged(c, set, line);
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

CSIM_HOT bool csim_cache_ref(const struct csim_cache *c, uint64_t line)
{
	return csim_set_ref(c, csim_line_set(c, line), line);
}

/* The lines [first, last] an access covers at a level. */
CSIM_HOT void csim_cache_lines(const struct csim_cache *c, uint64_t addr, uint32_t size,
				    uint64_t *first, uint64_t *last)
{
	uint64_t end = addr + (size ? size : 1) - 1;
	if (end < addr)
		end = UINT64_MAX;
	*first = addr >> c->line_bits;
	*last = end >> c->line_bits;
}

/* Cachegrind's access: every line updated, one miss if any line missed. */
CSIM_HOT bool csim_cache_access(const struct csim_cache *c, uint64_t addr, uint32_t size)
{
	uint64_t l, first, last;
	bool miss = false;

	csim_cache_lines(c, addr, size, &first, &last);
	if (__builtin_expect(first == last, 1))
		return csim_cache_ref(c, first);
	for (l = first;; l++) {
		miss |= csim_cache_ref(c, l);
		if (l == last)
			break;
	}
	return miss;
}

/* Size as cachegrind simulates it (CSIM_CG_MAX_DIRTY). */
CSIM_HOT uint32_t csim_cg_size(uint8_t type, uint32_t size)
{
	size = size ? size : 1;
	/* & rather than &&: no branches on sizes of no consequence. */
	bool cut = (type != REP_REF_INSTR) & (size > CSIM_CG_MAX_DIRTY) & (size != 32) & (size != 64);
	return cut ? CSIM_CG_MAX_DIRTY : size;
}

/* Type (validated, 1..4) to first level and access kind. */
CSIM_HOT int csim_first_level(uint8_t type)
{
	return type == REP_REF_INSTR ? CSIM_I1 : CSIM_D1;
}

CSIM_HOT int csim_kind_of(uint8_t type)
{
	static const uint8_t kinds[8] = { CSIM_READ, CSIM_READ, CSIM_WRITE, CSIM_READ, CSIM_INSTR,
					  CSIM_READ, CSIM_READ, CSIM_READ };
	return kinds[type & 7];
}

/* A reference that only counts (rep_ref_is_count): addr fetches at pc that
 * hit their line, most recent in its set (FETCH_HITS), or addr reads or
 * writes (READS, WRITES): counted, no cache touched. -ENOMEM if the row
 * cannot be made. */
static inline int csim_count_only(struct csim_result *res, const struct rep_ref *r)
{
	struct csim_hot *h = csim_result_lookup(res, r->pc);
	if (!h)
		return -ENOMEM;
	h->refs[r->type == REP_REF_FETCH_HITS ? CSIM_INSTR : r->type == REP_REF_READS ?
		CSIM_READ : CSIM_WRITE] += r->addr;
	return 0;
}

/* Count a reference (not its accesses). Without branches: reference
 * types come in no predictable order. */
CSIM_HOT void csim_count_ref(struct csim_hot *h, uint8_t type, bool cachegrind)
{
	bool modify = type == REP_REF_MODIFY;

	h->refs[csim_kind_of(type)]++;
	h->modifies += modify;
	if (!cachegrind)
		h->refs[CSIM_WRITE] += modify;
}

CSIM_HOT bool csim_ref_type_valid(uint8_t type)
{
	return type >= REP_REF_READ && type <= REP_REF_INSTR;
}

/* Cachegrind mode: deeper levels from lv on, after a first-level miss. */
static inline void csim_cg_deep(const struct csim_levels *L, int lv, uint64_t addr, uint32_t size,
				int kind, struct csim_result *res, struct csim_hot *h)
{
	for (; lv >= 0; lv = L->next[lv]) {
		csim_row_access(res, h, lv)[kind]++;
		if (!csim_cache_access(&L->lv[lv], addr, size))
			return;
		csim_row_miss(res, h, lv)[kind]++;
	}
}

/* Cachegrind mode, a whole reference of a valid type and cachegrind's
 * size (by value: the counters written here could alias a rep_ref's type
 * byte): count it and access its first level. Returns true on a miss,
 * which is to go on to the deeper levels. */
CSIM_HOT bool csim_cg_first(const struct csim_levels *L, struct csim_hot *h, uint8_t type,
			    uint64_t addr, uint32_t size)
{
	const struct csim_cache *c = &L->lv[csim_first_level(type)];
	uint64_t line = addr >> c->line_bits;
	bool miss;

	csim_count_ref(h, type, true);
	if (__builtin_expect((addr + size - 1) >> c->line_bits == line, 1))
		miss = csim_set_ref(c, csim_line_set(c, line), line);
	else
		miss = csim_cache_access(c, addr, size);
	h->miss1[csim_kind_of(type)] += miss;
	return miss;
}

/* Per-line mode: each line of [lo, hi] at level lv is its own access; a miss
 * brings that line's bytes from the next level. At the first level the
 * first line's access is the reference's own (hot.refs) when counted;
 * csim_line_deeper starts at a deeper level. */
void csim_line_first(const struct csim_levels *L, int lv, uint64_t lo, uint64_t hi, int kind,
		     bool counted, struct csim_result *res, struct csim_hot *h);
void csim_line_deeper(const struct csim_levels *L, int lv, uint64_t lo, uint64_t hi, int kind,
		      struct csim_result *res, struct csim_hot *h);

/* Per-line mode: line missed at level lv, so its bytes come from the levels
 * below. Inline while each is one line there (lines no smaller). */
CSIM_HOT void csim_line_below(const struct csim_levels *L, int lv, uint64_t line, int kind,
			      struct csim_result *res, struct csim_hot *h)
{
	for (int nx = L->next[lv]; nx >= 0; lv = nx, nx = L->next[nx]) {
		const struct csim_cache *c = &L->lv[lv], *d = &L->lv[nx];
		uint64_t base = line << c->line_bits;
		if (d->line_bits < c->line_bits) {
			csim_line_deeper(L, nx, base, base + (1ull << c->line_bits) - 1, kind, res, h);
			return;
		}
		line = base >> d->line_bits;
		csim_row_access(res, h, nx)[kind]++;
		if (!csim_set_ref(d, csim_line_set(d, line), line))
			return;
		csim_row_miss(res, h, nx)[kind]++;
	}
}

/* Per-line mode: one whole reference into its row. */
CSIM_HOT void csim_line_ref(const struct csim_levels *L, const struct rep_ref *r,
			    struct csim_result *res, struct csim_hot *h)
{
	uint8_t type = r->type;
	uint64_t addr = r->addr, end = addr + (r->size ? r->size : 1) - 1;
	int first = csim_first_level(type), kind = csim_kind_of(type);
	const struct csim_cache *c = &L->lv[first];
	uint64_t line = addr >> c->line_bits;

	csim_count_ref(h, type, false);
	if (__builtin_expect(end >> c->line_bits == line && end >= addr, 1)) {
		/* One line, the reference's own access. A modify's write then
		 * hits the line just made most recent, which changes nothing. */
		if (__builtin_expect(csim_set_ref(c, csim_line_set(c, line), line), 0)) {
			h->miss1[kind]++;
			csim_line_below(L, first, line, kind, res, h);
		}
		return;
	}
	if (end < addr)
		end = UINT64_MAX;
	csim_line_first(L, first, addr, end, kind, true, res, h);
	if (type == REP_REF_MODIFY)
		csim_line_first(L, first, addr, end, CSIM_WRITE, true, res, h);
}

void csim_counts_add(struct csim_counts *dst, const struct csim_counts *src);

/* The public counts of a row. */
void csim_row_counts(const struct csim_result *r, const struct csim_hot *h,
		     const struct csim_cold *c, struct csim_counts *out);

#endif
