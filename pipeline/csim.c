/* csim.c: cache geometry, the set-associative LRU levels, and the
 * standalone (one thread) simulator. The per-reference code is in
 * csim-internal.h, shared with the split workers. */
#include "pipeline/csim-internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ geometry */

static const char *const level_names[CSIM_NLEVELS] = { "I1", "D1", "L2", "LL" };

const char *csim_level_name(enum csim_level lv)
{
	return (unsigned)lv < CSIM_NLEVELS ? level_names[lv] : "?";
}

static bool is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

static unsigned log2u(uint64_t x)
{
	return 63u - (unsigned)__builtin_clzll(x);
}

uint64_t csim_geom_sets(const struct csim_geom *g)
{
	if (!g->size || !g->assoc || !g->line)
		return 0;
	return g->size / ((uint64_t)g->assoc * g->line);
}

/* One decimal field of "SIZE,ASSOC,LINE", ended by stop. */
static int parse_field(const char **p, char stop, uint64_t max, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		if (x > (max - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	if (*s != stop)
		return -EINVAL;
	*p = stop ? s + 1 : s;
	*v = x;
	return 0;
}

int csim_geom_parse(const char *text, struct csim_geom *g, char *err, size_t errlen)
{
	const char *p = text;
	uint64_t size, assoc, line;
	int rc;

	if ((rc = parse_field(&p, ',', UINT64_MAX / 2, &size)) ||
	    (rc = parse_field(&p, ',', UINT32_MAX, &assoc)) ||
	    (rc = parse_field(&p, '\0', UINT32_MAX, &line))) {
		snprintf(err, errlen, "bad cache geometry '%s': %s", text,
			 rc == -ERANGE ? "a number is too large"
				       : "expected SIZE,ASSOC,LINE in bytes, e.g. 32768,8,64");
		return -EINVAL;
	}
	g->size = size;
	g->assoc = (uint32_t)assoc;
	g->line = (uint32_t)line;
	return 0;
}

void csim_config_fallback(struct csim_config *cfg)
{
	cfg->level[CSIM_I1] = (struct csim_geom){ 65536, 2, 64 };
	cfg->level[CSIM_D1] = (struct csim_geom){ 65536, 2, 64 };
	cfg->level[CSIM_L2] = (struct csim_geom){ 0, 0, 0 };
	cfg->level[CSIM_LL] = (struct csim_geom){ 262144, 8, 64 };
}

bool csim_geom_cachegrind_tweak(struct csim_geom *g)
{
	uint64_t sets = csim_geom_sets(g), nsets, assoc;

	if (!sets)
		return false;
	if (is_pow2(sets)) {
		/* Only make the size divide exactly between the sets. */
		nsets = sets;
		assoc = g->assoc;
	} else {
		nsets = 1ull << log2u(sets);
		/* cachegrind: (UInt)(0.5 + factor * assoc) */
		assoc = (uint64_t)(0.5 + (double)sets / (double)nsets * (double)g->assoc);
	}
	uint64_t size = (uint64_t)g->line * assoc * nsets;
	if (size == g->size && assoc == g->assoc)
		return false;
	g->size = size;
	g->assoc = (uint32_t)assoc;
	return true;
}

static int check_level(const struct csim_geom *g, const char *name, bool cg, char *err,
		       size_t errlen)
{
	uint64_t sets;

	if (!g->assoc || !g->line) {
		snprintf(err, errlen, "%s: associativity and line size must be positive", name);
		return -EINVAL;
	}
	if (!is_pow2(g->line)) {
		snprintf(err, errlen, "%s: line size %" PRIu32 " is not a power of two", name, g->line);
		return -EINVAL;
	}
	if (g->line < (cg ? 16u : 4u)) {
		snprintf(err, errlen, "%s: line size %" PRIu32 " is below the minimum %u%s", name,
			 g->line, cg ? 16u : 4u, cg ? " (as in cachegrind)" : "");
		return -EINVAL;
	}
	if (g->size <= g->line || g->size % ((uint64_t)g->assoc * g->line)) {
		snprintf(err, errlen,
			 "%s: size %" PRIu64 " is not a multiple of associativity x line size "
			 "(%" PRIu32 " x %" PRIu32 ") larger than one line",
			 name, g->size, g->assoc, g->line);
		return -EINVAL;
	}
	sets = csim_geom_sets(g);
	if (cg && !is_pow2(sets)) {
		struct csim_geom t = *g;
		csim_geom_cachegrind_tweak(&t);
		snprintf(err, errlen,
			 "%s: %" PRIu64 " sets is not a power of two, which cachegrind refuses "
			 "(it simulates a detected cache like this one as %" PRIu64 ",%" PRIu32
			 ",%" PRIu32 ")",
			 name, sets, t.size, t.assoc, t.line);
		return -EINVAL;
	}
	if (sets > (1ull << 32) || g->assoc > 4096) {
		snprintf(err, errlen, "%s: too large to simulate (%" PRIu64 " sets of %" PRIu32 ")",
			 name, sets, g->assoc);
		return -EINVAL;
	}
	return 0;
}

int csim_config_check(const struct csim_config *cfg, char *err, size_t errlen)
{
	for (int i = 0; i < CSIM_NLEVELS; i++) {
		const struct csim_geom *g = &cfg->level[i];
		if (i == CSIM_L2 && !g->size && !g->assoc && !g->line)
			continue;
		if (!g->size) {
			snprintf(err, errlen, "%s: a size of zero (only L2 may be absent)",
				 level_names[i]);
			return -EINVAL;
		}
		int rc = check_level(g, level_names[i], cfg->cachegrind, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

unsigned csim_config_split_bits(const struct csim_config *cfg)
{
	unsigned maxline = 0;
	int bits = 63;

	for (int i = 0; i < CSIM_NLEVELS; i++)
		if (cfg->level[i].size && log2u(cfg->level[i].line) > maxline)
			maxline = log2u(cfg->level[i].line);
	for (int i = 0; i < CSIM_NLEVELS; i++) {
		const struct csim_geom *g = &cfg->level[i];
		uint64_t sets = csim_geom_sets(g);
		if (!g->size || !sets)
			continue;
		int b = (int)log2u(g->line) + __builtin_ctzll(sets) - (int)maxline;
		if (b < bits)
			bits = b;
	}
	return bits < 0 ? 0 : (unsigned)bits;
}

/* -------------------------------------------------------------- levels */

enum csim_simd csim_simd_max = CSIM_SIMD_AVX512;

/* The vector search for sets of assoc ways on this CPU, if any. */
static uint8_t simd_for(uint32_t assoc)
{
#if CSIM_HAVE_SIMD
	if (csim_simd_max >= CSIM_SIMD_AVX512 && (assoc == 8 || assoc == 16) &&
	    __builtin_cpu_supports("avx512f"))
		return CSIM_SIMD_AVX512;
	if (csim_simd_max >= CSIM_SIMD_AVX2 && assoc % 4 == 0 && assoc <= 16 &&
	    __builtin_cpu_supports("avx2"))
		return CSIM_SIMD_AVX2;
#endif
	(void)assoc;
	return CSIM_SCALAR;
}

size_t csim_compact_min = 256u << 10;

/* The d of csim_cache.kdrop: every owned key has the same low d bits and
 * its rank is the key without them. 0 when the table is needed. */
static uint32_t key_drop_bits(uint32_t kbits, const int32_t *krank, uint64_t kowned)
{
	uint64_t nkeys = 1ull << kbits, first = nkeys;

	if (!kowned || !is_pow2(kowned) || kowned >= nkeys)
		return 0;
	uint32_t d = log2u(nkeys / kowned);
	for (uint64_t k = 0; k < nkeys && first == nkeys; k++)
		if (krank[k] >= 0)
			first = k;
	for (uint64_t k = 0; k < nkeys; k++) {
		bool alike = ((k ^ first) & ((1ull << d) - 1)) == 0;
		if (alike != (krank[k] >= 0) || (alike && (uint64_t)krank[k] != k >> d))
			return 0;
	}
	return d;
}

int csim_levels_init(struct csim_levels *L, const struct csim_config *cfg, uint32_t kbits,
		     const int32_t *krank, uint64_t kowned)
{
	unsigned maxline = 0;

	memset(L, 0, sizeof(*L));
	L->cachegrind = cfg->cachegrind;
	for (int i = 0; i < CSIM_NLEVELS; i++)
		if (cfg->level[i].size && log2u(cfg->level[i].line) > maxline)
			maxline = log2u(cfg->level[i].line);
	for (int i = 0; i < CSIM_NLEVELS; i++) {
		const struct csim_geom *g = &cfg->level[i];
		struct csim_cache *c = &L->lv[i];
		L->next[i] = -1;
		if (!g->size)
			continue;
		c->sets = csim_geom_sets(g);
		c->assoc = g->assoc;
		c->line_bits = log2u(g->line);
		c->pow2 = is_pow2(c->sets);
		c->set_mask = c->sets - 1;
		c->nsets_local = c->sets;
		/* A worker stores only its own sets where that saves memory
		 * worth the arithmetic (the sets it does not own are never
		 * touched, so never cached, either way). */
		c->compact = krank && c->sets * c->assoc * sizeof(*c->tags) > csim_compact_min;
		c->direct = c->pow2 && !c->compact;
		if (c->compact) {
			/* The key bits sit above the bits that only tell apart
			 * the lines of one routing block (larger lines
			 * elsewhere). */
			c->kshift = maxline - c->line_bits;
			c->kbits = kbits;
			c->kowned = kowned;
			c->krank = krank;
			c->kdrop = key_drop_bits(kbits, krank, kowned);
			c->low_mask = (1ull << c->kshift) - 1;
			c->key_mask = (1ull << kbits) - 1;
			c->nsets_local = ((c->sets >> (c->kshift + kbits)) * kowned) << c->kshift;
		}
		size_t n = (size_t)c->nsets_local * c->assoc;
		/* Sets of 8 ways are then one cache line each. */
		c->tags = aligned_alloc(64, (n * sizeof(*c->tags) + 63) & ~(size_t)63);
		c->simd = simd_for(c->assoc);
		if (!c->tags) {
			csim_levels_free(L);
			return -ENOMEM;
		}
	}
	L->next[CSIM_I1] = L->next[CSIM_D1] = cfg->level[CSIM_L2].size ? CSIM_L2 : CSIM_LL;
	if (cfg->level[CSIM_L2].size)
		L->next[CSIM_L2] = CSIM_LL;
	for (int i = 0; i < CSIM_NLEVELS; i++)
		if (L->lv[i].simd > L->simd)
			L->simd = L->lv[i].simd;
	csim_levels_flush(L);
	return 0;
}

void csim_levels_flush(struct csim_levels *L)
{
	for (int i = 0; i < CSIM_NLEVELS; i++) {
		struct csim_cache *c = &L->lv[i];
		size_t n = (size_t)c->nsets_local * c->assoc;
		for (size_t k = 0; c->tags && k < n; k++)
			c->tags[k] = CSIM_EMPTY;
	}
}

void csim_levels_free(struct csim_levels *L)
{
	for (int i = 0; i < CSIM_NLEVELS; i++) {
		free(L->lv[i].tags);
		free(L->lv[i].aged);
		L->lv[i].tags = NULL;
		L->lv[i].aged = NULL;
	}
}

bool csim_set_ref_aged(const struct csim_cache *c, uint64_t *set, uint64_t line)
{
	uint32_t a = c->assoc, i;

	for (i = 0; i < a; i++)
		if ((set[i] & CSIM_LINE_MASK) == line && set[i] != CSIM_EMPTY)
			break;
	bool miss = i == a;
	if (miss) {
		i = a - 1;
		c->aged[0]++;
	} else if (set[i] >> CSIM_AGE_SHIFT) {
		c->aged[1 + (set[i] >> CSIM_AGE_SHIFT) * a + i]++;
	}
	for (; i > 0; i--)
		set[i] = set[i - 1];
	set[0] = line;
	return miss;
}

/* Per-line mode at level lv: a first level (whose first line's access is
 * the reference's own when counted, and whose misses are hot.miss1), or a
 * deeper one. */
static void line_level(const struct csim_levels *L, int lv, bool is_first, uint64_t lo, uint64_t hi,
		       int kind, bool counted, struct csim_result *res, struct csim_hot *h)
{
	const struct csim_cache *cc = &L->lv[lv];
	uint64_t first = lo >> cc->line_bits, last = hi >> cc->line_bits;

	for (uint64_t l = first;; l++) {
		if (!is_first || l != first || !counted)
			csim_row_access(res, h, lv)[kind]++;
		if (csim_cache_ref(cc, l)) {
			if (is_first)
				h->miss1[kind]++;
			else
				csim_row_miss(res, h, lv)[kind]++;
			if (L->next[lv] >= 0) {
				uint64_t base = l << cc->line_bits;
				line_level(L, L->next[lv], false, base,
					   base + (1ull << cc->line_bits) - 1, kind, false, res, h);
			}
		}
		if (l == last)
			break;
	}
}

void csim_line_first(const struct csim_levels *L, int lv, uint64_t lo, uint64_t hi, int kind,
		     bool counted, struct csim_result *res, struct csim_hot *h)
{
	line_level(L, lv, true, lo, hi, kind, counted, res, h);
}

void csim_line_deeper(const struct csim_levels *L, int lv, uint64_t lo, uint64_t hi, int kind,
		      struct csim_result *res, struct csim_hot *h)
{
	line_level(L, lv, false, lo, hi, kind, false, res, h);
}

/* ---------------------------------------------------------- simulator */

struct csim {
	struct csim_config cfg;
	struct csim_levels L;
	struct csim_result *res;
	struct csim_windows *win;	/* NULL before csim__window_begin */
	bool run_ahead;			/* the last loop's run mostly missed (run_cg) */
};

/* What the windows closed so far add up to, per level, and the gaps
 * between the last of them. */
struct csim_windows {
	uint64_t begun;
	double on_s;			/* the windows' closed since the first began */
	double gap_s[CSIM_AGE_MAX];	/* the last gaps, the latest first */
	double off_s[CSIM_AGE_MAX + 1];	/* off_s[g]: the g latest gaps' time */
	uint64_t misses[CSIM_NLEVELS], hits[CSIM_NLEVELS];
	double evicted[CSIM_NLEVELS];
};

int csim__new(const struct csim_config *cfg, struct csim **out)
{
	char err[256];
	struct csim *s;
	int rc;

	*out = NULL;
	if (csim_config_check(cfg, err, sizeof err))
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->res = csim_result__new();
	if (s->res)
		csim_result_set_mode(s->res, cfg->cachegrind);
	if (!s->res) {
		free(s);
		return -ENOMEM;
	}
	rc = csim_levels_init(&s->L, cfg, 0, NULL, 0);
	if (rc) {
		csim_result__free(s->res);
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void csim__free(struct csim *s)
{
	if (!s)
		return;
	free(s->win);
	csim_levels_free(&s->L);
	csim_result__free(s->res);
	free(s);
}

/* A first level's geometry, copied out of the levels: the compiler then
 * keeps it in registers across the counters' stores (which, as far as it
 * knows, could change the levels). */
struct first_geom {
	const uint64_t *tags;
	uint64_t set_mask;
	uint32_t line_bits, assoc;
};

static inline struct first_geom first_geom_of(const struct csim_cache *c)
{
	return (struct first_geom){ c->tags, c->set_mask, c->line_bits, c->assoc };
}

/* Cachegrind mode: an access that stays in one line, which its set at the
 * first level f used last: a hit that changes no tag (the next instruction
 * of a line, the next element of an array: most of them). */
CSIM_HOT bool mru_hit(const struct first_geom *f, uint64_t addr, uint32_t size)
{
	uint64_t line = addr >> f->line_bits;

	return __builtin_expect((addr + size - 1) >> f->line_bits == line, 1) &&
	       __builtin_expect(f->tags[(line & f->set_mask) * f->assoc] == line, 1);
}

/* Cachegrind mode, the part of a reference after its count when it is not
 * a hit on its set's most recent line: the first level's access, then the
 * deeper levels on a miss. Kept out of the batch loop (one copy per set
 * search, below), so that the loop's few registers go to the common case. */
CSIM_HOT void cg_rest(const struct csim_levels *L, struct csim_result *res, struct csim_hot *h,
		      uint8_t type, uint64_t addr, uint32_t size)
{
	int first = csim_first_level(type), kind = csim_kind_of(type);

	if (!csim_cache_access(&L->lv[first], addr, size))
		return;
	h->miss1[kind]++;
	csim_cg_deep(L, L->next[first], addr, size, kind, res, h);
}

static __attribute__((noinline)) void cg_rest_plain(const struct csim_levels *L,
						     struct csim_result *res, struct csim_hot *h,
						     uint8_t type, uint64_t addr, uint32_t size)
{
	cg_rest(L, res, h, type, addr, size);
}

CSIM_AVX2 __attribute__((noinline, flatten)) static void
cg_rest_avx2(const struct csim_levels *L, struct csim_result *res, struct csim_hot *h, uint8_t type,
	     uint64_t addr, uint32_t size)
{
	cg_rest(L, res, h, type, addr, size);
}

CSIM_AVX512 __attribute__((noinline, flatten)) static void
cg_rest_avx512(const struct csim_levels *L, struct csim_result *res, struct csim_hot *h,
	       uint8_t type, uint64_t addr, uint32_t size)
{
	cg_rest(L, res, h, type, addr, size);
}

/* cg_rest out of line, in the copy of the searches simd names. */
CSIM_HOT void cg_rest_out(const enum csim_simd simd, const struct csim_levels *L,
			  struct csim_result *res, struct csim_hot *h, uint8_t type, uint64_t addr,
			  uint32_t size)
{
	if (simd == CSIM_SIMD_AVX512)
		cg_rest_avx512(L, res, h, type, addr, size);
	else if (simd == CSIM_SIMD_AVX2)
		cg_rest_avx2(L, res, h, type, addr, size);
	else
		cg_rest_plain(L, res, h, type, addr, size);
}

/* The references of a run that begins at run, checked against the n
 * left in its batch (rep.h), or 0 if it is malformed. */
static size_t run_length(const struct rep_ref *run, size_t n)
{
	uint32_t m = run->size;
	uint64_t k = run->addr;

	/* (a run of k iterations takes more than k / 3 references) */
	if (!m || m > REP_RUN_MAX_REFS || !k || k > 3 * (uint64_t)n || rep_run_entries(m, k) > n)
		return 0;
	for (uint32_t j = 1; j <= m; j++)
		if (!csim_ref_type_valid(run[j].type))
			return 0;
	return rep_run_entries(m, k);
}

/* The rows of a run's m references, h[j] for run[1 + j]: a second pass
 * finds each without making one, so that none moves after. */
static int run_rows(struct csim *s, const struct rep_ref *run, uint32_t m, struct csim_hot **h)
{
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t j = 0; j < m; j++)
			if (!(h[j] = csim_result_lookup(s->res, run[1 + j].pc)))
				return -ENOMEM;
	return 0;
}

/* How far ahead (references) a loop that mostly misses fetches the sets
 * of a later reference. */
#define RUN_AHEAD 8

/* The sets that the data reference whose address is at at will search at
 * the first level and the next: in a loop that misses (a pointer chase),
 * the searches of several references then wait for memory at once, not
 * one after the other. Out of line: the loop keeps its registers. */
static __attribute__((noinline)) void run_prefetch(const struct csim_levels *L,
						   const unsigned char *at)
{
	uint64_t addr;

	memcpy(&addr, at, 8);
	for (int lv = CSIM_D1, n = 0; lv >= 0 && n < 2 && L->lv[lv].direct; lv = L->next[lv], n++) {
		const struct csim_cache *c = &L->lv[lv];
		__builtin_prefetch(c->tags + ((addr >> c->line_bits) & c->set_mask) * c->assoc);
	}
}

/* run_cg's loop when every reference goes to one first level (a loop's
 * data references, its fetches left out): the level's geometry in
 * registers. ahead: a data reference that misses its set's most recent
 * line fetches the sets of the one RUN_AHEAD on (a copy of its own, as
 * the test and the registers it takes slowed a loop that hits by a
 * fifth). The references that missed it. */
CSIM_HOT uint64_t run_one_level(const struct csim_levels *L, struct csim_result *res,
				const struct rep_ref *run, struct csim_hot *const *h,
				const uint32_t *size, const struct first_geom f,
				const enum csim_simd simd, const bool ahead)
{
	const uint32_t m = run->size;
	const unsigned char *at = (const unsigned char *)(run + 1 + m);
	const unsigned char *end = at + 8 * (run->addr * m);
	uint64_t missed = 0;

	for (uint64_t i = 0; i < run->addr; i++)
		for (uint32_t j = 0; j < m; j++, at += 8) {
			uint64_t addr;
			memcpy(&addr, at, 8);
			if (mru_hit(&f, addr, size[j]))
				continue;
			if (ahead && at + 8 * RUN_AHEAD < end)
				run_prefetch(L, at + 8 * RUN_AHEAD);
			cg_rest_out(simd, L, res, h[j], run[1 + j].type, addr, size[j]);
			missed++;
		}
	return missed;
}

/* A loop's run in Cachegrind mode: each of its references as refs_cg
 * takes one, but the rows looked up and the references counted once per
 * reference of an iteration. (In copies, as refs_cg: the rest of an access
 * out of line, so that the loop keeps its registers.) */
CSIM_HOT int run_cg(struct csim *s, const struct rep_ref *run, const enum csim_simd simd)
{
	const struct csim_levels *L = &s->L;
	const uint32_t m = run->size;
	const uint64_t k = run->addr;
	const unsigned char *at = (const unsigned char *)(run + 1 + m);
	struct csim_hot *h[REP_RUN_MAX_REFS];
	struct first_geom f[REP_RUN_MAX_REFS];
	uint32_t size[REP_RUN_MAX_REFS];
	int rc = run_rows(s, run, m, h);

	if (rc)
		return rc;
	bool direct = L->lv[CSIM_I1].direct && L->lv[CSIM_D1].direct, one = direct;
	for (uint32_t j = 0; j < m; j++) {
		f[j] = first_geom_of(&L->lv[csim_first_level(run[1 + j].type)]);
		size[j] = csim_cg_size(run[1 + j].type, run[1 + j].size);
		one = one && f[j].tags == f[0].tags;
	}
	bool ahead = one && f[0].tags == L->lv[CSIM_D1].tags && s->run_ahead;
	if (one)	/* (two copies: ahead a constant in each) */
		s->run_ahead = 2 * (ahead ? run_one_level(L, s->res, run, h, size, f[0], simd, true) :
				    run_one_level(L, s->res, run, h, size, f[0], simd, false)) > k * m;
	else
		for (uint64_t i = 0; i < k; i++)
			for (uint32_t j = 0; j < m; j++, at += 8) {
				uint64_t addr;
				memcpy(&addr, at, 8);
				if (!direct || !mru_hit(&f[j], addr, size[j]))
					cg_rest_out(simd, L, s->res, h[j], run[1 + j].type, addr,
						    size[j]);
			}
	for (uint32_t j = 0; j < m; j++) {
		h[j]->refs[csim_kind_of(run[1 + j].type)] += k;
		h[j]->modifies += run[1 + j].type == REP_REF_MODIFY ? k : 0;
	}
	return 0;
}

static __attribute__((noinline)) int run_cg_plain(struct csim *s, const struct rep_ref *run)
{
	return run_cg(s, run, CSIM_SCALAR);
}

static __attribute__((noinline)) int run_cg_avx2(struct csim *s, const struct rep_ref *run)
{
	return run_cg(s, run, CSIM_SIMD_AVX2);
}

static __attribute__((noinline)) int run_cg_avx512(struct csim *s, const struct rep_ref *run)
{
	return run_cg(s, run, CSIM_SIMD_AVX512);
}

/* A loop's run in per-line mode: each of its references as refs_line
 * takes one. */
static int run_line(struct csim *s, const struct rep_ref *run)
{
	const uint32_t m = run->size;

	for (uint64_t i = 0, a = 0; i < run->addr; i++)
		for (uint32_t j = 0; j < m; j++, a++) {
			const struct rep_ref *t = &run[1 + j];
			struct rep_ref r = { .pc = t->pc, .addr = rep_run_addr(run, a),
					     .size = t->size, .type = t->type };
			struct csim_hot *h = csim_result_lookup(s->res, r.pc);
			if (!h)
				return -ENOMEM;
			csim_line_ref(&s->L, &r, s->res, h);
		}
	return 0;
}

static int run_ref(struct csim *s, const struct rep_ref *run)
{
	if (!s->L.cachegrind)
		return run_line(s, run);
	switch (s->L.simd) {
	case CSIM_SIMD_AVX512:
		return run_cg_avx512(s, run);
	case CSIM_SIMD_AVX2:
		return run_cg_avx2(s, run);
	default:
		return run_cg_plain(s, run);
	}
}

/* A reference of no cache type: one that only counts (fetches that hit
 * their line, most recent in its set, or data references of the refs
 * analysis: no tag changes), a loop's run, or an error. *took: the
 * references it took of the n left. */
static __attribute__((noinline)) int other_ref(struct csim *s, const struct rep_ref *r, size_t n,
					       size_t *took)
{
	*took = 1;
	if (rep_ref_is_count(r->type))
		return csim_count_only(s->res, r);
	if (r->type != REP_REF_RUN || !(*took = run_length(r, n)))
		return -EINVAL;
	return run_ref(s, r);
}

/* A batch in Cachegrind mode, with the set search simd. A reference that
 * stays in one line which its set used last (the next instruction of a
 * line, the next element of an array: most of them) is a hit that changes
 * no tag: it costs its row's lookup and count, one shift, one mask and one
 * compare. Levels stored other than directly (not in csim.c) take the
 * general path. */
CSIM_HOT int refs_cg(struct csim *s, const struct rep_ref *refs, size_t n, const enum csim_simd simd)
{
	const struct csim_levels *L = &s->L;
	struct first_geom f[2];

	for (int lv = CSIM_I1; lv <= CSIM_D1; lv++)
		f[lv] = first_geom_of(&L->lv[lv]);
	bool direct = L->lv[CSIM_I1].direct && L->lv[CSIM_D1].direct;
	for (size_t i = 0; i < n; i++) {
		const struct rep_ref *r = &refs[i];
		/* 1.5 KiB ahead: little work per reference, so the hardware
		 * prefetcher alone falls behind the stream. */
		__builtin_prefetch(r + 64);
		uint8_t type = r->type;
		if (__builtin_expect(!csim_ref_type_valid(type), 0)) {
			size_t took;
			int rc = other_ref(s, r, n - i, &took);
			if (rc)
				return rc;
			i += took - 1;
			continue;
		}
		struct csim_hot *h = csim_result_lookup(s->res, r->pc);
		if (__builtin_expect(!h, 0))
			return -ENOMEM;
		uint64_t addr = r->addr;
		uint32_t size = csim_cg_size(type, r->size);
		csim_count_ref(h, type, true);
		if (__builtin_expect(direct, 1) && mru_hit(&f[csim_first_level(type)], addr, size))
			continue;
		cg_rest_out(simd, L, s->res, h, type, addr, size);
	}
	return 0;
}

/* A batch in per-line mode: the body of the copies below. */
CSIM_HOT int refs_line(struct csim *s, const struct rep_ref *refs, size_t n)
{
	const struct csim_levels *L = &s->L;

	for (size_t i = 0; i < n; i++) {
		const struct rep_ref *r = &refs[i];
		__builtin_prefetch(r + 64);	/* as in refs_cg */
		if (__builtin_expect(!csim_ref_type_valid(r->type), 0)) {
			size_t took;
			int rc = other_ref(s, r, n - i, &took);
			if (rc)
				return rc;
			i += took - 1;
			continue;
		}
		struct csim_hot *h = csim_result_lookup(s->res, r->pc);
		if (__builtin_expect(!h, 0))
			return -ENOMEM;
		csim_line_ref(L, r, s->res, h);
	}
	return 0;
}

static int refs_plain(struct csim *s, const struct rep_ref *refs, size_t n)
{
	return s->L.cachegrind ? refs_cg(s, refs, n, CSIM_SCALAR) : refs_line(s, refs, n);
}

CSIM_AVX2 __attribute__((flatten)) static int refs_avx2(struct csim *s, const struct rep_ref *refs,
							 size_t n)
{
	return s->L.cachegrind ? refs_cg(s, refs, n, CSIM_SIMD_AVX2) : refs_line(s, refs, n);
}

CSIM_AVX512 __attribute__((flatten)) static int refs_avx512(struct csim *s,
							   const struct rep_ref *refs, size_t n)
{
	return s->L.cachegrind ? refs_cg(s, refs, n, CSIM_SIMD_AVX512) : refs_line(s, refs, n);
}

int csim__refs(struct csim *s, const struct rep_ref *refs, size_t n)
{
	s->res->tot_dirty = true;
	switch (s->L.simd) {
	case CSIM_SIMD_AVX512:
		return refs_avx512(s, refs, n);
	case CSIM_SIMD_AVX2:
		return refs_avx2(s, refs, n);
	default:
		return refs_plain(s, refs, n);
	}
}

struct csim_result *csim__result(struct csim *s)
{
	return s->res;
}

void csim__flush_caches(struct csim *s)
{
	csim_levels_flush(&s->L);
}

void csim__lines_held(const struct csim *s, uint64_t held[CSIM_NLEVELS])
{
	for (int i = 0; i < CSIM_NLEVELS; i++) {
		const struct csim_cache *c = &s->L.lv[i];
		size_t n = (size_t)c->nsets_local * c->assoc;
		held[i] = 0;
		for (size_t k = 0; c->tags && k < n; k++)
			held[i] += c->tags[k] != CSIM_EMPTY;
	}
}

/* The counters of a level's window (csim_cache.aged). */
static size_t aged_len(const struct csim_cache *c)
{
	return 1 + (CSIM_AGE_MAX + 1) * (size_t)c->assoc;
}

/* The window's hits on aged lines. */
static uint64_t aged_hits(const struct csim_cache *c)
{
	uint64_t n = 0;

	for (size_t k = 1; c->aged && k < aged_len(c); k++)
		n += c->aged[k];
	return n;
}

/* A level's first window: its counters, and the scalar search that fills
 * them. */
static int start_windows(struct csim_cache *c)
{
	if (c->aged)
		return 0;
	c->aged = calloc(aged_len(c), sizeof *c->aged);
	if (!c->aged)
		return -ENOMEM;
	c->simd = CSIM_SCALAR;
	return 0;
}

/* tail[r] = P(X >= r) for r = 0..n, X of Poisson's law with mean m. */
static void poisson_tails(double m, uint32_t n, double *tail)
{
	double term = exp(-m), below = 0;

	for (uint32_t r = 0; r <= n; r++) {
		tail[r] = below < 1 ? 1 - below : 0;
		below += term;
		term *= m / (r + 1);
	}
}

/* The window's hits on aged lines of c evicted, expected, when each set
 * takes rate new lines per second off (tail: room for assoc + 1). */
static double weigh_aged_hits(const struct csim_cache *c, const struct csim_windows *w,
			      double rate, double *tail)
{
	double evicted = 0;

	for (uint32_t g = 1; g <= CSIM_AGE_MAX; g++) {
		poisson_tails(rate * w->off_s[g], c->assoc, tail);
		for (uint32_t way = 0; way < c->assoc; way++)
			evicted += (double)c->aged[1 + g * c->assoc + way] * tail[c->assoc - way];
	}
	return evicted;
}

/* The window's hits on aged lines of level lv that a simulation of the
 * whole time would have missed, expected, the window on for on_s.
 *
 * A line found aged g at way w had w lines used after it in the windows;
 * in the g gaps since (off_s[g]), its set took new lines at the level's
 * rate of misses per set and second on: it was evicted when those were at
 * least assoc - w. The rate counts the misses those evictions stand for
 * too: where most misses of the whole time are hits on aged lines in the
 * windows (a loop through more lines than the level holds, of which the
 * windows see a part), the windows' own misses are too few to tell. So it
 * is found by iteration, from the misses measured up to the fixed point
 * (bounded: no more than every hit on an aged line). */
static double window_evicted(const struct csim *s, int lv, double on_s)
{
	const struct csim_cache *c = &s->L.lv[lv];
	const struct csim_windows *w = s->win;

	if (!w || !c->aged || w->on_s + on_s <= 0)
		return 0;
	double *tail = malloc((c->assoc + 1) * sizeof *tail);
	if (!tail)
		return 0;
	double per_set_s = 1 / ((double)c->sets * (w->on_s + on_s)), evicted = 0;
	double before = (double)(w->misses[lv] + c->aged[0]) + w->evicted[lv];
	for (int i = 0; i < 200; i++) {
		double e = weigh_aged_hits(c, w, (before + evicted) * per_set_s, tail);
		bool settled = e - evicted <= 1e-6 * e;
		evicted = e;
		if (settled)
			break;
	}
	free(tail);
	return evicted;
}

/* The window that ran on_s ends: its counts go to the totals. */
static void close_window(struct csim *s, double on_s)
{
	struct csim_windows *w = s->win;

	for (int lv = 0; lv < CSIM_NLEVELS; lv++) {
		struct csim_cache *c = &s->L.lv[lv];
		if (!c->aged)
			continue;
		w->evicted[lv] += window_evicted(s, lv, on_s);
		w->misses[lv] += c->aged[0];
		w->hits[lv] += aged_hits(c);
		memset(c->aged, 0, aged_len(c) * sizeof *c->aged);
	}
	w->on_s += on_s;
}

/* A gap of off_s: the latest, and the time of the g latest. */
static void add_gap(struct csim_windows *w, double off_s)
{
	memmove(w->gap_s + 1, w->gap_s, (CSIM_AGE_MAX - 1) * sizeof *w->gap_s);
	w->gap_s[0] = off_s;
	for (unsigned g = 1; g <= CSIM_AGE_MAX; g++)
		w->off_s[g] = w->off_s[g - 1] + w->gap_s[g - 1];	/* off_s[0]: 0 */
}

static void age_lines(struct csim_cache *c)
{
	size_t n = (size_t)c->nsets_local * c->assoc;

	for (size_t k = 0; k < n; k++) {
		uint64_t t = c->tags[k];
		if (t != CSIM_EMPTY && (t >> CSIM_AGE_SHIFT) < CSIM_AGE_MAX)
			c->tags[k] = t + (1ull << CSIM_AGE_SHIFT);
	}
}

int csim__window_begin(struct csim *s, double on_s, double off_s)
{
	if (!s->win && !(s->win = calloc(1, sizeof *s->win)))
		return -ENOMEM;
	for (int i = 0; i < CSIM_NLEVELS; i++)
		if (s->L.lv[i].tags && start_windows(&s->L.lv[i]) < 0)
			return -ENOMEM;
	if (s->win->begun++)	/* the first window's counts are exact */
		close_window(s, on_s);
	add_gap(s->win, off_s);
	for (int i = 0; i < CSIM_NLEVELS; i++)
		if (s->L.lv[i].tags)
			age_lines(&s->L.lv[i]);
	return 0;
}

double csim__window_evicted(const struct csim *s, int lv, double on_s)
{
	return s->win ? s->win->evicted[lv] + window_evicted(s, lv, on_s) : 0;
}

uint64_t csim__window_aged_hits(const struct csim *s, int lv)
{
	return (s->win ? s->win->hits[lv] : 0) + aged_hits(&s->L.lv[lv]);
}
