/* check_csim: the cache simulator, its geometry, results and the lackey
 * reader. */
#include "tests/lib/tu.h"
#include "tests/pipeline/check_csim-model.h"
#include "pipeline/csim-internal.h"	/* csim_simd_max */

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* D1: 2 sets x 2 ways of 64 B; I1 the same; LL: 4 sets x 4 ways. */
static struct csim_config tiny(bool cg)
{
	struct csim_config c = { .cachegrind = cg };
	c.level[CSIM_I1] = (struct csim_geom){ 256, 2, 64 };
	c.level[CSIM_D1] = (struct csim_geom){ 256, 2, 64 };
	c.level[CSIM_LL] = (struct csim_geom){ 1024, 4, 64 };
	return c;
}

static struct rep_ref R(uint64_t pc, uint64_t addr, uint32_t size, uint8_t type)
{
	return (struct rep_ref){ .pc = pc, .addr = addr, .size = size, .type = type };
}

static const struct csim_counts *run(struct csim **s, const struct csim_config *cfg,
				     const struct rep_ref *refs, size_t n)
{
	ck_assert_int_eq(csim__new(cfg, s), 0);
	ck_assert_int_eq(csim__refs(*s, refs, n), 0);
	return csim_result__totals(csim__result(*s));
}

/* Lines 0x40, 0x42, 0x44 (addresses 0x1000, 0x1080, 0x1100) share D1 set 0. */
START_TEST(lru_evicts_least_recently_used)
{
	struct csim_config cfg = tiny(true);
	struct rep_ref refs[] = {
		R(1, 0x1000, 8, REP_REF_READ),	/* A miss */
		R(1, 0x1080, 8, REP_REF_READ),	/* B miss */
		R(1, 0x1000, 8, REP_REF_READ),	/* A hit: B is now LRU */
		R(1, 0x1100, 8, REP_REF_READ),	/* C miss, evicts B */
		R(1, 0x1000, 8, REP_REF_READ),	/* A hit */
		R(1, 0x1080, 8, REP_REF_READ),	/* B miss, evicts C */
		R(1, 0x1100, 8, REP_REF_READ),	/* C miss, evicts A */
		R(1, 0x1000, 8, REP_REF_READ),	/* A miss */
	};
	struct csim *s;
	const struct csim_counts *t = run(&s, &cfg, refs, 8);

	ck_assert_uint_eq(t->refs[CSIM_READ], 8);
	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], 6);
	/* LL (4 ways per set) holds all three: only the first touches miss. */
	ck_assert_uint_eq(t->access[CSIM_LL][CSIM_READ], 6);
	ck_assert_uint_eq(t->miss[CSIM_LL][CSIM_READ], 3);
	csim__free(s);
}
END_TEST

/* The cold-start misses: those that filled an empty way. D1 set 0 fills
 * its 2 ways with A and B (C, and the misses after, evict); LL holds all
 * three, set 1 of D1 and I1 nothing. After a flush, none. */
START_TEST(lines_held_are_the_misses_that_filled_an_empty_way)
{
	struct csim_config cfg = tiny(true);
	struct rep_ref refs[] = {
		R(1, 0x1000, 8, REP_REF_READ), R(1, 0x1080, 8, REP_REF_READ),
		R(1, 0x1100, 8, REP_REF_READ), R(1, 0x1000, 8, REP_REF_READ),
		R(1, 0x1080, 8, REP_REF_READ), R(1, 0x1100, 8, REP_REF_READ),
	};
	uint64_t held[CSIM_NLEVELS];
	struct csim *s;
	const struct csim_counts *t = run(&s, &cfg, refs, 6);

	csim__lines_held(s, held);
	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], 6);
	ck_assert_uint_eq(held[CSIM_D1], 2);
	ck_assert_uint_eq(t->miss[CSIM_LL][CSIM_READ], 3);
	ck_assert_uint_eq(held[CSIM_LL], 3);
	ck_assert_uint_eq(held[CSIM_I1], 0);
	csim__flush_caches(s);
	csim__lines_held(s, held);
	ck_assert_uint_eq(held[CSIM_D1] + held[CSIM_LL], 0);
	csim__free(s);
}
END_TEST

START_TEST(associativity_holds_assoc_lines_per_set)
{
	/* 4 ways: 4 lines of one set cycle without misses after the first
	 * round; 5 lines thrash (LRU). */
	struct csim_config cfg = tiny(false);
	cfg.level[CSIM_D1] = (struct csim_geom){ 1024, 4, 64 };	/* 4 sets */
	struct rep_ref refs[50];
	for (int ways = 4; ways <= 5; ways++) {
		for (int i = 0; i < 50; i++)
			refs[i] = R(1, 0x10000 + (uint64_t)(i % ways) * 4 * 64, 4, REP_REF_READ);
		struct csim *s;
		const struct csim_counts *t = run(&s, &cfg, refs, 50);
		ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], ways == 4 ? 4 : 50);
		csim__free(s);
	}
}
END_TEST

START_TEST(straddle_counts_once_in_cachegrind_mode)
{
	struct csim_config cfg = tiny(true);
	struct rep_ref refs[] = {
		R(1, 0x103c, 8, REP_REF_READ),	/* lines 0x40 and 0x41: one miss */
		R(2, 0x1040, 4, REP_REF_READ),	/* line 0x41 was filled: hit */
		R(3, 0x1000, 4, REP_REF_READ),	/* line 0x40 too: hit */
	};
	struct csim *s;
	const struct csim_counts *t = run(&s, &cfg, refs, 3);

	ck_assert_uint_eq(t->refs[CSIM_READ], 3);
	ck_assert_uint_eq(t->access[CSIM_D1][CSIM_READ], 3);
	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], 1);
	/* LL consulted once, for both lines, one miss. */
	ck_assert_uint_eq(t->access[CSIM_LL][CSIM_READ], 1);
	ck_assert_uint_eq(t->miss[CSIM_LL][CSIM_READ], 1);
	csim__free(s);
}
END_TEST

START_TEST(straddle_with_one_line_cached_is_one_miss_and_updates_both)
{
	struct csim_config cfg = tiny(true);
	struct rep_ref refs[] = {
		R(1, 0x1040, 4, REP_REF_READ),	/* line 0x41 in D1 and LL */
		R(2, 0x103c, 8, REP_REF_READ),	/* 0x40 misses, 0x41 hits: one miss;
						 * LL gets both lines: 0x41 hits
						 * there, 0x40 misses: one LL miss */
		R(3, 0x1000, 4, REP_REF_READ),	/* hit */
	};
	struct csim *s;
	const struct csim_counts *t = run(&s, &cfg, refs, 3);

	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], 2);
	ck_assert_uint_eq(t->access[CSIM_LL][CSIM_READ], 2);
	ck_assert_uint_eq(t->miss[CSIM_LL][CSIM_READ], 2);
	struct csim_pc_stats row;
	ck_assert(csim_result__get(csim__result(s), 2, &row));
	ck_assert_uint_eq(row.c.miss[CSIM_D1][CSIM_READ], 1);
	ck_assert_uint_eq(row.c.miss[CSIM_LL][CSIM_READ], 1);
	ck_assert(!csim_result__get(csim__result(s), 77, &row));
	csim__free(s);
}
END_TEST

START_TEST(straddle_is_two_accesses_per_line_mode)
{
	struct csim_config cfg = tiny(false);
	struct rep_ref refs[] = { R(1, 0x103c, 8, REP_REF_READ) };
	struct csim *s;
	const struct csim_counts *t = run(&s, &cfg, refs, 1);

	ck_assert_uint_eq(t->refs[CSIM_READ], 1);
	ck_assert_uint_eq(t->access[CSIM_D1][CSIM_READ], 2);
	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], 2);
	ck_assert_uint_eq(t->miss[CSIM_LL][CSIM_READ], 2);
	csim__free(s);
}
END_TEST

START_TEST(modify_is_one_read_in_cachegrind_mode)
{
	struct rep_ref refs[] = { R(1, 0x2000, 8, REP_REF_MODIFY), R(1, 0x2000, 8, REP_REF_MODIFY) };
	for (int cg = 1; cg >= 0; cg--) {
		struct csim_config cfg = tiny(cg);
		struct csim *s;
		const struct csim_counts *t = run(&s, &cfg, refs, 2);
		ck_assert_uint_eq(t->modifies, 2);
		ck_assert_uint_eq(t->refs[CSIM_READ], 2);
		/* per-line mode: a read then a write, which hits */
		ck_assert_uint_eq(t->refs[CSIM_WRITE], cg ? 0 : 2);
		ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], 1);
		ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_WRITE], 0);
		ck_assert_uint_eq(t->access[CSIM_D1][CSIM_WRITE], cg ? 0 : 2);
		csim__free(s);
	}
}
END_TEST

/* FETCH_HITS, READS and WRITES add their counts to their PC's Ir, Dr and
 * Dw, as hits, and touch no cache: the read after them misses, the first
 * to fill a line. */
START_TEST(count_only_references_touch_no_cache)
{
	struct rep_ref refs[] = { R(7, 5, 0, REP_REF_FETCH_HITS), R(7, 3, 0, REP_REF_READS),
				  R(7, 4, 0, REP_REF_WRITES), R(9, 6, 0, REP_REF_READS),
				  R(9, 0x2000, 8, REP_REF_READ) };
	for (int cg = 1; cg >= 0; cg--) {
		struct csim_config cfg = tiny(cg);
		struct csim *s;
		const struct csim_counts *t = run(&s, &cfg, refs, 5);
		struct csim_pc_stats row;
		ck_assert(csim_result__get(csim__result(s), 7, &row));
		ck_assert_uint_eq(row.c.refs[CSIM_INSTR], 5);
		ck_assert_uint_eq(row.c.refs[CSIM_READ], 3);
		ck_assert_uint_eq(row.c.refs[CSIM_WRITE], 4);
		ck_assert(csim_result__get(csim__result(s), 9, &row));
		ck_assert_uint_eq(row.c.refs[CSIM_READ], 7);
		ck_assert_uint_eq(t->refs[CSIM_READ], 10);
		ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], 1);
		ck_assert_uint_eq(t->miss[CSIM_I1][CSIM_INSTR], 0);
		csim__free(s);
	}
}
END_TEST

/* A loop's run of k iterations of m references into refs (room for
 * rep_run_entries(m, k)): the template, then addr(i, j) packed. */
static size_t make_run(struct rep_ref *refs, const struct rep_ref *tpl, uint32_t m, uint64_t k,
		       uint64_t (*addr)(uint64_t i, uint32_t j))
{
	refs[0] = (struct rep_ref){ .addr = k, .size = m, .type = REP_REF_RUN };
	for (uint32_t j = 0; j < m; j++)
		refs[1 + j] = tpl[j];
	unsigned char *at = (unsigned char *)(refs + 1 + m);
	for (uint64_t i = 0; i < k; i++)
		for (uint32_t j = 0; j < m; j++, at += 8) {
			uint64_t a = addr(i, j);
			memcpy(at, &a, 8);
		}
	return rep_run_entries(m, k);
}

/* Three streams, a straddling one among them, and the fetch of a line that
 * conflicts with none of them. */
static uint64_t run_addr(uint64_t i, uint32_t j)
{
	return j == 3 ? 0x400 : 0x10000 * (j + 1) + 8 * i + (j == 2 ? 60 : 0);
}

/* A loop's run counts, row by row, what the references it stands for do
 * (with other references before and after it), in both counting modes,
 * its references to one first level or to both, after a run that mostly
 * missed too; a run that is malformed or does not fit in the batch is
 * -EINVAL. */
START_TEST(a_loops_run_is_the_references_it_stands_for)
{
	enum { K = 100, M = 4 };
	const struct rep_ref tpl[M] = { R(0x10, 0, 8, REP_REF_READ), R(0x14, 0, 4, REP_REF_MODIFY),
					R(0x18, 0, 8, REP_REF_WRITE), R(0x400, 0, 4, REP_REF_INSTR) };
	struct rep_ref whole[K * M + 2], packed[1 + M + (K * M + 2) / 3 + 2];

	for (uint32_t m = M - 1; m <= M; m++) {	/* data alone, then a fetch too */
		size_t n = 0;
		packed[0] = whole[0] = R(0x20, 0x10008, 8, REP_REF_WRITE);
		for (uint64_t i = 0; i < K; i++)
			for (uint32_t j = 0; j < m; j++, n++)
				whole[1 + n] = R(tpl[j].pc, run_addr(i, j), tpl[j].size, tpl[j].type);
		whole[1 + n] = R(0x24, 0x20000, 8, REP_REF_READ);
		size_t np = 1 + make_run(packed + 1, tpl, m, K, run_addr);
		packed[np++] = whole[1 + n];
		for (int cg = 1; cg >= 0; cg--) {
			struct csim_config cfg = tiny(cg);
			struct csim *a, *b;
			run(&a, &cfg, whole, K * m + 2);
			run(&b, &cfg, packed, np);
			/* again: a run after one that mostly missed fetches ahead */
			ck_assert_int_eq(csim__refs(a, whole, K * m + 2), 0);
			ck_assert_int_eq(csim__refs(b, packed, np), 0);
			size_t na, nb;
			struct csim_pc_stats *ra = csim_result__sorted(csim__result(a), CSIM_BY_PC, &na);
			struct csim_pc_stats *rb = csim_result__sorted(csim__result(b), CSIM_BY_PC, &nb);
			ck_assert_uint_eq(na, m + 2);
			ck_assert_uint_eq(na, nb);
			for (size_t i = 0; i < na; i++) {
				ck_assert_uint_eq(ra[i].pc, rb[i].pc);
				ck_assert_msg(!memcmp(&ra[i].c, &rb[i].c, sizeof ra[i].c), "m %u cg %d: "
					      "pc %#" PRIx64 " differs", m, cg, ra[i].pc);
			}
			free(ra);
			free(rb);
			csim__free(a);
			csim__free(b);
		}
	}
	struct csim_config cfg = tiny(true);
	struct csim *s;
	ck_assert_int_eq(csim__new(&cfg, &s), 0);
	struct rep_ref bad[1 + M + 2];
	make_run(bad, tpl, M, 1, run_addr);
	ck_assert_int_eq(csim__refs(s, bad, rep_run_entries(M, 1) - 1), -EINVAL);	/* cut */
	bad[0].size = 0;
	ck_assert_int_eq(csim__refs(s, bad, rep_run_entries(M, 1)), -EINVAL);
	bad[0].size = REP_RUN_MAX_REFS + 1;
	ck_assert_int_eq(csim__refs(s, bad, rep_run_entries(M, 1)), -EINVAL);
	bad[0].size = M;
	bad[0].addr = 0;
	ck_assert_int_eq(csim__refs(s, bad, rep_run_entries(M, 1)), -EINVAL);
	bad[0].addr = UINT64_MAX / 2;
	ck_assert_int_eq(csim__refs(s, bad, rep_run_entries(M, 1)), -EINVAL);
	bad[0].addr = 1;
	bad[2].type = REP_REF_READS;	/* counts only: no reference of an iteration */
	ck_assert_int_eq(csim__refs(s, bad, rep_run_entries(M, 1)), -EINVAL);
	bad[2].type = REP_REF_READ;
	ck_assert_int_eq(csim__refs(s, bad, rep_run_entries(M, 1)), 0);
	csim__free(s);
}
END_TEST

START_TEST(write_allocates)
{
	struct csim_config cfg = tiny(true);
	struct rep_ref refs[] = { R(1, 0x3000, 8, REP_REF_WRITE), R(2, 0x3008, 8, REP_REF_READ) };
	struct csim *s;
	const struct csim_counts *t = run(&s, &cfg, refs, 2);

	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_WRITE], 1);
	ck_assert_uint_eq(t->miss[CSIM_LL][CSIM_WRITE], 1);
	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], 0);
	ck_assert_uint_eq(t->access[CSIM_LL][CSIM_READ], 0);
	csim__free(s);
}
END_TEST

START_TEST(instructions_go_through_i1)
{
	struct csim_config cfg = tiny(true);
	struct rep_ref refs[] = {
		R(0x4000, 0x4000, 4, REP_REF_INSTR),
		R(0x4004, 0x4004, 4, REP_REF_INSTR),
		R(0x403e, 0x403e, 5, REP_REF_INSTR),	/* crosses into the next line */
		R(0x4040, 0x4040, 2, REP_REF_INSTR),
		R(0x4040, 0x4000, 8, REP_REF_READ),	/* data: D1, not I1; LL hit */
	};
	struct csim *s;
	const struct csim_counts *t = run(&s, &cfg, refs, 5);

	ck_assert_uint_eq(t->instr, 4);
	ck_assert_uint_eq(t->miss[CSIM_I1][CSIM_INSTR], 2);
	ck_assert_uint_eq(t->miss[CSIM_LL][CSIM_INSTR], 2);
	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], 1);
	ck_assert_uint_eq(t->miss[CSIM_LL][CSIM_READ], 0);
	csim__free(s);
}
END_TEST

START_TEST(dirty_helper_sizes_are_cut_to_16_in_cachegrind_mode)
{
	/* A 512-byte fxsave-like access at a line start touches one line in
	 * cachegrind; 32-byte AVX accesses are not cut. */
	struct csim_config cfg = tiny(true);
	struct rep_ref refs[] = {
		R(1, 0x5000, 512, REP_REF_WRITE),
		R(2, 0x5040, 4, REP_REF_READ),	/* next line: not touched, miss */
		R(3, 0x60f0, 32, REP_REF_READ),	/* two lines */
		R(4, 0x6100, 4, REP_REF_READ),	/* hit */
	};
	struct csim *s;
	const struct csim_counts *t = run(&s, &cfg, refs, 4);

	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_WRITE], 1);
	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ], 2);
	csim__free(s);
}
END_TEST

START_TEST(per_pc_rows_attribute_misses)
{
	struct csim_config cfg = tiny(true);
	struct rep_ref refs[] = {
		R(0xa, 0x7000, 8, REP_REF_READ), R(0xb, 0x7000, 8, REP_REF_WRITE),
		R(0xa, 0x8000, 8, REP_REF_READ), R(0xc, 0x9000, 4, REP_REF_WRITE),
	};
	struct csim *s;
	run(&s, &cfg, refs, 4);
	struct csim_result *r = csim__result(s);

	ck_assert_uint_eq(csim_result__npcs(r), 3);
	struct csim_pc_stats a, b;
	ck_assert(csim_result__get(r, 0xa, &a) && csim_result__get(r, 0xb, &b));
	ck_assert_uint_eq(a.c.refs[CSIM_READ], 2);
	ck_assert_uint_eq(a.c.reads, 2);
	ck_assert_uint_eq(a.c.miss[CSIM_D1][CSIM_READ], 2);
	ck_assert_uint_eq(b.c.refs[CSIM_WRITE], 1);
	ck_assert_uint_eq(b.c.writes, 1);
	ck_assert_uint_eq(b.c.miss[CSIM_D1][CSIM_WRITE], 0);
	size_t n;
	struct csim_pc_stats *rows = csim_result__sorted(r, CSIM_BY_DMISSES, &n);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(rows[0].pc, 0xa);
	ck_assert_uint_eq(rows[1].pc, 0xc);
	ck_assert_uint_eq(rows[2].pc, 0xb);
	free(rows);
	csim__free(s);
}
END_TEST

START_TEST(rows_for_many_pcs_and_extreme_pcs)
{
	/* Enough PCs to grow the row index and the rows many times, pc 0 and
	 * the all-ones pc (not in the index), each with its own count. */
	enum { NPC = 70000 };
	struct csim_config cfg = tiny(true);
	static struct rep_ref refs[3 * NPC];
	size_t n = 0;
	for (uint64_t k = 0; k < NPC; k++) {
		uint64_t pc = k == 1 ? UINT64_MAX : k * 0x1000;	/* k == 0: pc 0 */
		for (uint64_t j = 0; j <= k % 3; j++)
			refs[n++] = R(pc, 0x10000 + 8 * j, 8, REP_REF_READ);
	}
	struct csim *s;
	run(&s, &cfg, refs, n);
	struct csim_result *m = csim_result__new();
	ck_assert_int_eq(csim_result__merge(m, csim__result(s)), 0);
	ck_assert(csim_result__equal(m, csim__result(s)));
	for (int pass = 0; pass < 2; pass++) {
		const struct csim_result *r = pass ? m : csim__result(s);
		ck_assert_uint_eq(csim_result__npcs(r), NPC);
		for (uint64_t k = 0; k < NPC; k++) {
			struct csim_pc_stats row;
			ck_assert(csim_result__get(r, k == 1 ? UINT64_MAX : k * 0x1000, &row));
			ck_assert_uint_eq(row.c.refs[CSIM_READ], k % 3 + 1);
		}
		struct csim_pc_stats row;
		ck_assert(!csim_result__get(r, 0x1001, &row));
	}
	csim_result__free(m);
	csim__free(s);
}
END_TEST

START_TEST(merge_sums_rows_and_totals)
{
	struct csim_config cfg = tiny(false);
	static struct rep_ref refs[4000];
	make_stream(refs, 4000, 7, 1 << 14, 40);
	struct csim *whole, *a, *b;
	run(&whole, &cfg, refs, 4000);
	run(&a, &cfg, refs, 2000);
	run(&b, &cfg, refs + 2000, 2000);
	struct csim_result *m = csim_result__new();
	ck_assert_int_eq(csim_result__merge(m, csim__result(a)), 0);
	ck_assert(csim_result__equal(m, csim__result(a)));
	ck_assert_int_eq(csim_result__merge(m, csim__result(b)), 0);
	const struct csim_counts *t = csim_result__totals(m);
	const struct csim_counts *tw = csim_result__totals(csim__result(whole));
	/* References add up exactly (caches differ: b started cold). */
	ck_assert_uint_eq(t->instr, tw->instr);
	ck_assert_uint_eq(t->refs[CSIM_READ], tw->refs[CSIM_READ]);
	ck_assert_uint_eq(t->refs[CSIM_WRITE], tw->refs[CSIM_WRITE]);
	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ],
			  csim_result__totals(csim__result(a))->miss[CSIM_D1][CSIM_READ] +
				  csim_result__totals(csim__result(b))->miss[CSIM_D1][CSIM_READ]);
	ck_assert(!csim_result__equal(m, csim__result(a)));
	csim_result__free(m);
	csim__free(whole);
	csim__free(a);
	csim__free(b);
}
END_TEST

/* csim against the naive model on refs, every counter of every PC. The
 * model's share of hits on the line the set used last (out of accesses to
 * the first levels) goes to *mru_share when asked. */
/* Every counter of every PC of r, against the model's. */
static void check_rows_against_model(struct csim_result *r, const struct model *m)
{
	ck_assert_uint_eq(csim_result__npcs(r), m->npcs);
	for (size_t i = 0; i < m->npcs; i++) {
		struct csim_pc_stats rowv, *row = &rowv;
		ck_assert(csim_result__get(r, m->pcs[i], row));
		if (memcmp(&row->c, &m->rows[i], sizeof(row->c))) {
			for (int lv = 0; lv < CSIM_NLEVELS; lv++)
				for (int k = 0; k < CSIM_NKINDS; k++)
					fprintf(stderr, "pc %lx lv %d kind %d: csim %lu/%lu model %lu/%lu\n",
						(unsigned long)m->pcs[i], lv, k,
						(unsigned long)row->c.access[lv][k],
						(unsigned long)row->c.miss[lv][k],
						(unsigned long)m->rows[i].access[lv][k],
						(unsigned long)m->rows[i].miss[lv][k]);
			ck_abort_msg("pc 0x%lx differs from the model", (unsigned long)m->pcs[i]);
		}
	}
}

static void check_refs_against_model(const struct csim_config *cfg, const struct rep_ref *refs,
				     size_t N, double *mru_share)
{
	struct model m;
	struct csim *s;

	model_init(&m, cfg);
	for (size_t i = 0; i < N; i++)
		model_ref(&m, &refs[i]);
	run(&s, cfg, refs, N);
	struct csim_result *r = csim__result(s);
	check_rows_against_model(r, &m);
	if (mru_share) {
		const struct csim_counts *t = csim_result__totals(r);
		uint64_t first = 0;
		for (int k = 0; k < CSIM_NKINDS; k++)
			first += t->access[CSIM_I1][k] + t->access[CSIM_D1][k];
		*mru_share = (double)(m.lv[CSIM_I1].mru_hits + m.lv[CSIM_D1].mru_hits) /
			     (double)first;
	}
	model_free(&m);
	csim__free(s);
}

static void check_against_model(const struct csim_config *cfg, uint64_t seed, uint64_t span)
{
	enum { N = 60000 };
	static struct rep_ref refs[N];

	make_stream(refs, N, seed, span, 200);
	check_refs_against_model(cfg, refs, N, NULL);
}

START_TEST(matches_model_cachegrind_mode)
{
	struct csim_config cfg = { .cachegrind = true };
	cfg.level[CSIM_I1] = (struct csim_geom){ 2048, 2, 32 };
	cfg.level[CSIM_D1] = (struct csim_geom){ 4096, 4, 64 };
	cfg.level[CSIM_LL] = (struct csim_geom){ 32768, 8, 64 };
	check_against_model(&cfg, 1, 1 << 16);
	cfg.level[CSIM_L2] = (struct csim_geom){ 8192, 2, 64 };
	cfg.level[CSIM_LL] = (struct csim_geom){ 65536, 16, 128 };
	check_against_model(&cfg, 2, 1 << 17);
}
END_TEST

START_TEST(matches_model_per_line_mode)
{
	struct csim_config cfg = { 0 };
	cfg.level[CSIM_I1] = (struct csim_geom){ 3072, 3, 64 };	/* 16 sets */
	cfg.level[CSIM_D1] = (struct csim_geom){ 6144, 4, 32 };	/* 48 sets */
	cfg.level[CSIM_LL] = (struct csim_geom){ 49152, 12, 64 };	/* 64 sets */
	check_against_model(&cfg, 3, 1 << 16);
	cfg.level[CSIM_L2] = (struct csim_geom){ 20480, 5, 128 };	/* 32 sets */
	cfg.level[CSIM_LL] = (struct csim_geom){ 3 * 65536, 16, 64 };	/* 192 sets */
	check_against_model(&cfg, 4, 1 << 18);
}
END_TEST

START_TEST(matches_model_at_every_associativity)
{
	/* Sets of 8 or 16 ways take the AVX-512 search, of 4, 8, 12 or 16
	 * the AVX2 one, the others the scalar one, each in its copy of the
	 * batch loop (as far as this CPU has them): all must be exactly LRU. */
	static const enum csim_simd tiers[] = { CSIM_SCALAR, CSIM_SIMD_AVX2, CSIM_SIMD_AVX512 };
	for (size_t t = 0; t < 3; t++) {
		csim_simd_max = tiers[t];
		for (uint32_t a = 1; a <= 17; a++) {
			struct csim_config cfg = { .cachegrind = a % 2 == 1 };
			cfg.level[CSIM_I1] = (struct csim_geom){ 16ull * a * 64, a, 64 };
			cfg.level[CSIM_D1] = (struct csim_geom){ 16ull * a * 64, a, 64 };
			cfg.level[CSIM_LL] = (struct csim_geom){ 64ull * (18 - a) * 64, 18 - a, 64 };
			check_against_model(&cfg, 100 + a, 1 << 15);
		}
	}
	csim_simd_max = CSIM_SIMD_AVX512;
}
END_TEST

/* Windows age the lines held, and change no hit or miss: the stream fed
 * in pieces with a window begun before each (the levels then search as
 * scalars, aged tags among fresh ones) counts exactly as the naive model
 * does, in both modes and at associativities of every search. */
START_TEST(windows_change_no_count)
{
	enum { N = 40000, PIECE = 997 };
	static struct rep_ref refs[N];

	for (uint32_t a = 1; a <= 16; a += 5) {
		struct csim_config cfg = { .cachegrind = a % 2 == 0 };
		cfg.level[CSIM_I1] = (struct csim_geom){ 16ull * a * 64, a, 64 };
		cfg.level[CSIM_D1] = (struct csim_geom){ 16ull * a * 64, a, 64 };
		cfg.level[CSIM_LL] = (struct csim_geom){ 64ull * 16 * 64, 16, 64 };
		struct model m;
		struct csim *s;
		make_stream(refs, N, 300 + a, 1 << 16, 200);
		model_init(&m, &cfg);
		for (size_t i = 0; i < N; i++)
			model_ref(&m, &refs[i]);
		ck_assert_int_eq(csim__new(&cfg, &s), 0);
		for (size_t i = 0; i < N; i += PIECE) {
			if (i)
				ck_assert_int_eq(csim__window_begin(s, 0.02, 0.18), 0);
			ck_assert_int_eq(csim__refs(s, refs + i, i + PIECE < N ? PIECE : N - i), 0);
		}
		check_rows_against_model(csim__result(s), &m);
		ck_assert_uint_gt(csim__window_aged_hits(s, CSIM_LL), 0);
		model_free(&m);
		csim__free(s);
	}
}
END_TEST

/* x = 1 - sum_{j < r} e^-m m^j / j! with m = a + b x: P(X >= r) for X of
 * Poisson's law with a mean that counts x itself, by bisection. */
static double poisson_fixed_point(double a, double b, unsigned r)
{
	double lo = 0, hi = 1;

	for (int i = 0; i < 100; i++) {
		double x = (lo + hi) / 2, m = a + b * x, term = exp(-m), below = 0;
		for (unsigned j = 0; j < r; j++, term *= m / j)
			below += term;
		if (1 - below > x)
			lo = x;
		else
			hi = x;
	}
	return lo;
}

/* Hits on aged lines, by age and way, and the chance that the gaps since
 * evicted them. D1 set 0 holds A (0x1000) and B (0x1080); D (0x1040, set
 * 1) misses in the second window. */
START_TEST(windows_weigh_hits_on_aged_lines)
{
	struct csim_config cfg = tiny(true);
	struct rep_ref first[] = { R(1, 0x1000, 8, REP_REF_READ), R(1, 0x1080, 8, REP_REF_READ) };
	struct rep_ref d = R(1, 0x1040, 8, REP_REF_READ), b = first[1], a = first[0];
	struct csim *s;

	run(&s, &cfg, first, 2);	/* the first window: exact */
	ck_assert_double_eq(csim__window_evicted(s, CSIM_D1, 1), 0);	/* no window yet */
	ck_assert_int_eq(csim__window_begin(s, 1, 1), 0);
	ck_assert_int_eq(csim__refs(s, &d, 1), 0);	/* the one miss since */
	ck_assert_int_eq(csim__refs(s, &b, 1), 0);	/* B: aged 1, way 0 */
	ck_assert_int_eq(csim__window_begin(s, 1, 2), 0);
	/* The second window, on 1 s, after a gap of 1 s: 1 miss, and B's if
	 * evicted, over 2 sets: m = (1 + x) / 2 new lines in the gap, 2 of
	 * them to evict B (at way 0 of 2). */
	double eb = csim__window_evicted(s, CSIM_D1, 0);
	ck_assert_double_eq_tol(eb, poisson_fixed_point(0.5, 0.5, 2), 1e-5);
	ck_assert_int_eq(csim__window_begin(s, 0.5, 3), 0);
	ck_assert_int_eq(csim__refs(s, &a, 1), 0);	/* A: aged 3, way 1 */
	ck_assert_uint_eq(csim__window_aged_hits(s, CSIM_D1), 2);
	ck_assert_uint_eq(csim_result__totals(csim__result(s))->miss[CSIM_D1][CSIM_READ], 3);
	/* Now 2 s on in all (this window's 0.5 s too), A used 3 gaps ago
	 * (3 + 2 + 1 s): m = 6 (1 + eb + x) / (2 * 2), 1 to evict it. */
	double ea = csim__window_evicted(s, CSIM_D1, 0.5) - eb;
	ck_assert_double_eq_tol(ea, poisson_fixed_point(1.5 * (1 + eb), 1.5, 1), 1e-5);
	ck_assert_double_gt(ea, eb);
	csim__free(s);
}
END_TEST

/* csim's fast path (a reference within the line its set used last is a
 * hit that changes nothing; anything else leaves the batch loop) against
 * the naive model, on streams of loops where most references take it:
 * every counter of every PC, with each set search, in both modes, with
 * and without L2, at sets of 1 to 16 ways. */
START_TEST(loop_streams_match_the_model_per_pc)
{
	enum { N = 60000 };
	static struct rep_ref refs[N];
	static const enum csim_simd tiers[] = { CSIM_SCALAR, CSIM_SIMD_AVX2, CSIM_SIMD_AVX512 };
	static const uint32_t ways[] = { 1, 2, 4, 8, 16 };
	uint64_t seed = 500;

	for (size_t t = 0; t < 3; t++) {
		csim_simd_max = tiers[t];
		for (size_t w = 0; w < 5; w++, seed++) {
			uint32_t a = ways[w];
			struct csim_config cfg = { .cachegrind = w % 2 == 0 };
			cfg.level[CSIM_I1] = (struct csim_geom){ 16ull * a * 64, a, 64 };
			cfg.level[CSIM_D1] = (struct csim_geom){ 32ull * a * 32, a, 32 };
			cfg.level[CSIM_LL] = (struct csim_geom){ 256ull * 8 * 64, 8, 64 };
			double share;
			make_loop_stream(refs, N, seed, 1 << 16);
			check_refs_against_model(&cfg, refs, N, &share);
			/* The stream is what it is for: mostly the fast path. */
			ck_assert_msg(share > 0.5, "only %.2f of first-level accesses hit the "
				      "line their set used last", share);
			cfg.cachegrind = !cfg.cachegrind;
			cfg.level[CSIM_L2] = (struct csim_geom){ 64ull * 4 * 64, 4, 64 };
			check_refs_against_model(&cfg, refs, N, NULL);
		}
	}
	/* Sets that are not a power of two (per-line mode only). */
	struct csim_config cfg = { 0 };
	cfg.level[CSIM_I1] = (struct csim_geom){ 3072, 3, 64 };
	cfg.level[CSIM_D1] = (struct csim_geom){ 6144, 4, 32 };
	cfg.level[CSIM_LL] = (struct csim_geom){ 49152, 12, 64 };
	make_loop_stream(refs, N, seed, 1 << 16);
	check_refs_against_model(&cfg, refs, N, NULL);
	csim_simd_max = CSIM_SIMD_AVX512;
}
END_TEST

START_TEST(geometry_parse_and_check)
{
	struct csim_geom g;
	char err[256];
	struct csim_config cfg = tiny(true);

	ck_assert_int_eq(csim_geom_parse("32768,8,64", &g, err, sizeof err), 0);
	ck_assert_uint_eq(g.size, 32768);
	ck_assert_uint_eq(g.assoc, 8);
	ck_assert_uint_eq(g.line, 64);
	ck_assert_uint_eq(csim_geom_sets(&g), 64);
	ck_assert_int_eq(csim_geom_parse("32768,8", &g, err, sizeof err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "SIZE,ASSOC,LINE"));
	ck_assert_int_eq(csim_geom_parse("32k,8,64", &g, err, sizeof err), -EINVAL);
	ck_assert_int_eq(csim_geom_parse("1,99999999999,64", &g, err, sizeof err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "too large"));

	ck_assert_int_eq(csim_config_check(&cfg, err, sizeof err), 0);
	cfg.level[CSIM_D1] = (struct csim_geom){ 49152, 16, 64 };	/* 48 sets */
	ck_assert_int_eq(csim_config_check(&cfg, err, sizeof err), -EINVAL);
	ck_assert_str_eq(err, "D1: 48 sets is not a power of two, which cachegrind refuses "
			      "(it simulates a detected cache like this one as 49152,24,64)");
	cfg.cachegrind = false;
	ck_assert_int_eq(csim_config_check(&cfg, err, sizeof err), 0);
	cfg.level[CSIM_D1].line = 48;
	ck_assert_int_eq(csim_config_check(&cfg, err, sizeof err), -EINVAL);
	ck_assert_str_eq(err, "D1: line size 48 is not a power of two");
	cfg.level[CSIM_D1] = (struct csim_geom){ 1000, 2, 64 };
	ck_assert_int_eq(csim_config_check(&cfg, err, sizeof err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a multiple"));
	cfg.level[CSIM_D1] = (struct csim_geom){ 0, 0, 0 };
	ck_assert_int_eq(csim_config_check(&cfg, err, sizeof err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "only L2 may be absent"));
	cfg = tiny(true);
	cfg.level[CSIM_LL].line = 8;
	ck_assert_int_eq(csim_config_check(&cfg, err, sizeof err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "minimum 16 (as in cachegrind)"));
}
END_TEST

START_TEST(cachegrind_tweaks_non_power_of_two_ll)
{
	/* cachegrind's own example: 12 MB, 16-way, 64 B lines -> 24-way. */
	struct csim_geom g = { 12u << 20, 16, 64 };
	ck_assert(csim_geom_cachegrind_tweak(&g));
	ck_assert_uint_eq(g.assoc, 24);
	ck_assert_uint_eq(g.size, 12u << 20);
	ck_assert_uint_eq(csim_geom_sets(&g), 8192);
	/* This VM's L3: 491520 KiB, 16-way -> 30-way, 503316480 B (what
	 * cachegrind printed here). */
	g = (struct csim_geom){ 491520ull << 10, 16, 64 };
	ck_assert(csim_geom_cachegrind_tweak(&g));
	ck_assert_uint_eq(g.assoc, 30);
	ck_assert_uint_eq(g.size, 503316480ull);
	g = (struct csim_geom){ 1u << 20, 16, 64 };
	ck_assert(!csim_geom_cachegrind_tweak(&g));
}
END_TEST

/* A processor for csim_config_cpuid: the leaves it answers; others read 0. */
struct fake_leaf {
	uint32_t leaf, sub, r[4];
};

static void fake_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4], void *arg)
{
	for (const struct fake_leaf *f = arg; f->leaf || f->r[0] || f->r[1]; f++)
		if (f->leaf == leaf && f->sub == sub) {
			memcpy(r, f->r, 4 * sizeof *r);
			return;
		}
}

/* Leaf 0 of a processor: highest leaf and the vendor string. */
static struct fake_leaf leaf0(uint32_t max, const char vendor[13])
{
	struct fake_leaf f = { 0, 0, { max, 0, 0, 0 } };
	memcpy(&f.r[1], vendor, 4);
	memcpy(&f.r[3], vendor + 4, 4);
	memcpy(&f.r[2], vendor + 8, 4);
	return f;
}

static void expect_geom(const struct csim_config *cfg, enum csim_level lv, uint64_t size,
			uint32_t assoc, uint32_t line)
{
	ck_assert_msg(cfg->level[lv].size == size && cfg->level[lv].assoc == assoc &&
		      cfg->level[lv].line == line, "%s: %" PRIu64 ",%u,%u, want %" PRIu64 ",%u,%u",
		      csim_level_name(lv), cfg->level[lv].size, cfg->level[lv].assoc,
		      cfg->level[lv].line, size, assoc, line);
}

static void expect_fallback(const struct csim_config *cfg)
{
	expect_geom(cfg, CSIM_I1, 65536, 2, 64);
	expect_geom(cfg, CSIM_D1, 65536, 2, 64);
	expect_geom(cfg, CSIM_L2, 0, 0, 0);
	expect_geom(cfg, CSIM_LL, 262144, 8, 64);
}

START_TEST(host_geometry_from_amd_cpuid)
{
	struct csim_config cfg;
	/* This VM's AMD EPYC: L1 from leaf 0x80000005; an L3 of 1016 x 512 KiB
	 * with an associativity code cachegrind reads as direct mapped, which
	 * its LL tweak turns into what cachegrind printed here: 512 MiB, 2-way. */
	struct fake_leaf epyc[] = {
		leaf0(0xd, "AuthenticAMD"),
		{ 1, 0, { 0xb00f21, 0, 0, 0 } },
		{ 0x80000000u, 0, { 0x80000021u, 0, 0, 0 } },
		{ 0x80000005u, 0, { 0xff60ff40u, 0xff60ff40u, 0x300c0140u, 0x20080140u } },
		{ 0x80000006u, 0, { 0x40802040u, 0x60804040u, 0x04006140u, 0x0fe09140u } },
		{ 0 } };
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, epyc), 0);
	expect_geom(&cfg, CSIM_I1, 32768, 8, 64);
	expect_geom(&cfg, CSIM_D1, 49152, 12, 64);
	expect_geom(&cfg, CSIM_L2, 0, 0, 0);
	expect_geom(&cfg, CSIM_LL, 536870912, 2, 64);

	/* An Athlon 64: no L3, so L2 (512 KiB, code 8: 16-way) is the LL. */
	struct fake_leaf athlon[] = {
		leaf0(1, "AuthenticAMD"),
		{ 1, 0, { 0x20f32, 0, 0, 0 } },
		{ 0x80000000u, 0, { 0x80000018u, 0, 0, 0 } },
		{ 0x80000005u, 0, { 0, 0, 0x40020140u, 0x40020140u } },
		{ 0x80000006u, 0, { 0, 0, 0x02008140u, 0 } },
		{ 0 } };
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, athlon), 0);
	expect_geom(&cfg, CSIM_I1, 65536, 2, 64);
	expect_geom(&cfg, CSIM_D1, 65536, 2, 64);
	expect_geom(&cfg, CSIM_LL, 524288, 16, 64);

	/* Without the extended leaves: cachegrind's fallback. */
	athlon[2].r[0] = 0x80000004u;
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, athlon), -ENOTSUP);
	expect_fallback(&cfg);
}
END_TEST

START_TEST(host_geometry_from_intel_cpuid)
{
	struct csim_config cfg;
	/* A Skylake: leaf 2 says "see leaf 4" (0xff); leaf 4 lists 32 KiB L1s,
	 * a 256 KiB L2 and a 12 MiB L3 of 12288 sets, which the LL tweak turns
	 * into 8192 sets of 24 ways. */
	struct fake_leaf skylake[] = {
		leaf0(0x16, "GenuineIntel"),
		{ 1, 0, { 0x906e9, 0, 0, 0 } },
		{ 2, 0, { 0x00feff01u, 0x000000f0u, 0, 0x00c30000u } },
		{ 4, 0, { 0x121, 0x01c0003fu, 63, 0 } },
		{ 4, 1, { 0x122, 0x01c0003fu, 63, 0 } },
		{ 4, 2, { 0x143, 0x00c0003fu, 1023, 0 } },
		{ 4, 3, { 0x163, 0x03c0003fu, 12287, 6 } },
		{ 0 } };
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, skylake), 0);
	expect_geom(&cfg, CSIM_I1, 32768, 8, 64);
	expect_geom(&cfg, CSIM_D1, 32768, 8, 64);
	expect_geom(&cfg, CSIM_L2, 0, 0, 0);
	expect_geom(&cfg, CSIM_LL, 12582912, 24, 64);

	/* A Core 2 describes its caches with leaf-2 descriptors only: 0x30 I1,
	 * 0x2c D1, 0x49 a 4 MiB L2 (an L3 only on family 15 model 6); the
	 * TLB and prefetch descriptors around them say nothing. */
	struct fake_leaf core2[] = {
		leaf0(0xa, "GenuineIntel"),
		{ 1, 0, { 0x6f6, 0, 0, 0 } },
		{ 2, 0, { 0x05b0b101u, 0x005657f0u, 0, 0x2cb43049u } },
		{ 0 } };
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, core2), 0);
	expect_geom(&cfg, CSIM_I1, 32768, 8, 64);
	expect_geom(&cfg, CSIM_D1, 32768, 8, 64);
	expect_geom(&cfg, CSIM_LL, 4194304, 16, 64);

	/* A Pentium 4: a 12 K micro-op trace cache, simulated as cachegrind
	 * guesses, 16 KiB with 32-byte lines. */
	struct fake_leaf p4[] = {
		leaf0(2, "GenuineIntel"),
		{ 1, 0, { 0xf29, 0, 0, 0 } },
		{ 2, 0, { 0x665b5001u, 0, 0, 0x007a7040u } },
		{ 0 } };
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, p4), 0);
	expect_geom(&cfg, CSIM_I1, 16384, 8, 32);
	expect_geom(&cfg, CSIM_D1, 8192, 4, 64);
	expect_geom(&cfg, CSIM_LL, 262144, 8, 64);

	/* Two level-1 data caches (a descriptor and leaf 4): not sensible. */
	skylake[2].r[1] = 0x2c;
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, skylake), -EINVAL);
	expect_fallback(&cfg);
	/* Leaf 2 asked more than once (AL != 1): cachegrind gives up. */
	core2[2].r[0] = 0x05b0b102u;
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, core2), -ENOTSUP);
	expect_fallback(&cfg);
	/* No level-1 instruction cache. */
	core2[2].r[0] = 0x05b0b101u;
	core2[2].r[3] = 0x2cb40049u;
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, core2), -ENOENT);
	expect_fallback(&cfg);
}
END_TEST

START_TEST(host_geometry_of_other_vendors)
{
	struct csim_config cfg;
	struct fake_leaf via[] = { leaf0(1, "CentaurHauls"), { 0 } };
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, via), 0);
	expect_geom(&cfg, CSIM_I1, 65536, 4, 16);
	expect_geom(&cfg, CSIM_D1, 65536, 16, 16);
	expect_geom(&cfg, CSIM_LL, 65536, 16, 16);
	struct fake_leaf other[] = { leaf0(1, "GenuineTMx86"), { 0 } };
	ck_assert_int_eq(csim_config_cpuid(&cfg, fake_cpuid, other), -ENOTSUP);
	expect_fallback(&cfg);
	/* The real processor: whatever it says, a geometry csim accepts. */
	char err[256];
	csim_config_host(&cfg);
	cfg.cachegrind = true;
	ck_assert_msg(csim_config_check(&cfg, err, sizeof err) == 0, "%s", err);
}
END_TEST

START_TEST(split_bits_follow_the_smallest_set_count)
{
	struct csim_config cfg = tiny(true);	/* D1 and I1: 2 sets */
	ck_assert_uint_eq(csim_config_split_bits(&cfg), 1);
	cfg.level[CSIM_I1] = (struct csim_geom){ 32768, 8, 64 };	/* 64 */
	cfg.level[CSIM_D1] = (struct csim_geom){ 49152, 12, 64 };	/* 64 */
	cfg.level[CSIM_LL] = (struct csim_geom){ 1 << 20, 16, 64 };
	ck_assert_uint_eq(csim_config_split_bits(&cfg), 6);
	/* D1 with 32 B lines: its 64 sets cover 2048 B = 32 lines of 64 B. */
	cfg.level[CSIM_D1] = (struct csim_geom){ 16384, 8, 32 };
	ck_assert_uint_eq(csim_config_split_bits(&cfg), 5);
	/* 48 sets (per-line mode): only the factor 16 can be used. */
	cfg.level[CSIM_D1] = (struct csim_geom){ 49152, 16, 64 };
	ck_assert_uint_eq(csim_config_split_bits(&cfg), 4);
	/* fully associative: no split */
	cfg.level[CSIM_D1] = (struct csim_geom){ 4096, 64, 64 };
	ck_assert_uint_eq(csim_config_split_bits(&cfg), 0);
}
END_TEST

START_TEST(fold_blocks_sums_rows)
{
	struct csim_config cfg = tiny(true);
	struct rep_ref refs[] = {
		R(0x100, 0x100, 4, REP_REF_INSTR), R(0x100, 0x9000, 4, REP_REF_READ),
		R(0x104, 0x104, 4, REP_REF_INSTR), R(0x104, 0xa000, 4, REP_REF_READ),
		R(0x200, 0x200, 4, REP_REF_INSTR),
	};
	struct csim *s;
	run(&s, &cfg, refs, 5);
	struct csim_block_range b[] = { { 0x100, 0x108 }, { 0x200, 0x204 }, { 0x300, 0x310 } };
	struct csim_counts out[3] = { 0 };
	ck_assert_int_eq(csim_result__fold_blocks(csim__result(s), b, 3, out), 0);
	ck_assert_uint_eq(out[0].instr, 2);
	ck_assert_uint_eq(out[0].reads, 2);
	ck_assert_uint_eq(out[0].miss[CSIM_D1][CSIM_READ], 2);
	ck_assert_uint_eq(out[1].instr, 1);
	ck_assert_uint_eq(out[2].instr, 0);
	csim__free(s);
}
END_TEST

START_TEST(json_report_has_the_agreed_shape)
{
	struct csim_config cfg = tiny(true);
	struct rep_ref refs[] = {
		R(0x10, 0x10, 4, REP_REF_INSTR), R(0x10, 0x5000, 8, REP_REF_READ),
		R(0x14, 0x14, 4, REP_REF_INSTR), R(0x14, 0x6000, 8, REP_REF_WRITE),
		R(0x14, 0x6000, 8, REP_REF_MODIFY),
	};
	struct csim *s;
	run(&s, &cfg, refs, 5);
	struct json_object *j = csim_result__to_json(csim__result(s), &cfg, 2, 1.25, 0);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
			 "{\"refs\":{\"instr\":2,\"reads\":1,\"writes\":1,\"modifies\":1},"
			 "\"I1\":{\"misses\":1},\"D1\":{\"read_misses\":1,\"write_misses\":1},"
			 "\"LL\":{\"read_misses\":1,\"write_misses\":1},\"workers\":2,"
			 "\"imbalance\":1.25,\"per_pc\":["
			 "{\"pc\":\"0x10\",\"reads\":1,\"writes\":0,\"D1_misses\":1,\"LL_misses\":1},"
			 "{\"pc\":\"0x14\",\"reads\":1,\"writes\":1,\"D1_misses\":1,\"LL_misses\":1}]}");
	json_object_put(j);

	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_int_eq(csim_result__write_text(csim__result(s), &cfg, 1, 1.0, 10, f), 0);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(text, "I   refs:"));
	ck_assert_ptr_nonnull(strstr(text, "D1  misses:"));
	ck_assert_ptr_nonnull(strstr(text, "LL miss rate:"));
	ck_assert_ptr_nonnull(strstr(text, "0x10 "));
	free(text);
	csim__free(s);
}
END_TEST

/* ---------------------------------------------------------------- lackey */

struct collect {
	struct rep_ref refs[64];
	size_t n, calls;
};

static int collect_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct collect *c = arg;
	ck_assert_uint_le(c->n + n, 64);
	memcpy(c->refs + c->n, refs, n * sizeof(*refs));
	c->n += n;
	c->calls++;
	return 0;
}

static int lackey_text(const char *text, size_t batch, struct collect *c, char *err, size_t errlen,
		       uint64_t *bad)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct csim_lackey *lk;
	ck_assert_int_eq(csim_lackey__open(f, "trace", &lk), 0);
	memset(c, 0, sizeof(*c));
	int rc = csim_lackey__run(lk, batch, collect_sink, c);
	snprintf(err, errlen, "%s", csim_lackey__errmsg(lk));
	*bad = csim_lackey__bad_lines(lk);
	csim_lackey__close(lk);
	fclose(f);
	return rc;
}

START_TEST(lackey_reads_trace_lines_and_ignores_others)
{
	const char *text = "==123== Lackey, an example Valgrind tool\n"
			   " S 1fff000708,8\n"		/* before any I: pc 0 */
			   "I  0401ab70,3\n"
			   " L 04022e10,8\n"
			   " M 1fff0006f8,4\r\n"
			   "program output\n"
			   "I  0401ab73,15\n"
			   " S 7ff0,16\n"
			   "==123== \n"
			   "I  deadbeefcafe,1";	/* no final newline */
	struct collect c;
	char err[512];
	uint64_t bad;

	ck_assert_int_eq(lackey_text(text, 2, &c, err, sizeof err, &bad), 0);
	ck_assert_uint_eq(c.n, 7);
	ck_assert_uint_eq(c.calls, 4);	/* batches of 2 */
	ck_assert_uint_eq(c.refs[0].type, REP_REF_WRITE);
	ck_assert_uint_eq(c.refs[0].pc, 0);
	ck_assert_uint_eq(c.refs[1].type, REP_REF_INSTR);
	ck_assert_uint_eq(c.refs[1].pc, 0x401ab70);
	ck_assert_uint_eq(c.refs[1].size, 3);
	ck_assert_uint_eq(c.refs[2].type, REP_REF_READ);
	ck_assert_uint_eq(c.refs[2].pc, 0x401ab70);
	ck_assert_uint_eq(c.refs[2].addr, 0x4022e10);
	ck_assert_uint_eq(c.refs[3].type, REP_REF_MODIFY);
	ck_assert_uint_eq(c.refs[3].addr, 0x1fff0006f8ull);
	ck_assert_uint_eq(c.refs[3].size, 4);
	ck_assert_uint_eq(c.refs[5].pc, 0x401ab73);
	ck_assert_uint_eq(c.refs[5].size, 16);
	ck_assert_uint_eq(c.refs[6].addr, 0xdeadbeefcafeull);
}
END_TEST

START_TEST(lackey_names_malformed_lines_and_keeps_the_rest)
{
	const char *text = "I  1000,4\n"
			   " L 2000,8\n"
			   " L 2zz0,8\n"		/* line 3 */
			   "I  1004,4\n"
			   " S 3000\n"			/* line 5 */
			   " S 3000,8\n";
	struct collect c;
	char err[512];
	uint64_t bad;

	ck_assert_int_eq(lackey_text(text, 100, &c, err, sizeof err, &bad), -EBADMSG);
	ck_assert_str_eq(err, "trace:3: malformed lackey line (expected ',' after the address): "
			      "' L 2zz0,8'");
	ck_assert_uint_eq(bad, 2);
	ck_assert_uint_eq(c.n, 4);	/* everything else */
	ck_assert_uint_eq(c.refs[3].type, REP_REF_WRITE);
	ck_assert_uint_eq(c.refs[3].pc, 0x1004);
}
END_TEST

START_TEST(lackey_line_parser_reasons)
{
	struct rep_ref r;
	const char *why;
	static const struct {
		const char *line, *why;
	} bad[] = {
		{ "I  ,4", "no hexadecimal address" },
		{ "I  12345678901234567,4", "address longer than 64 bits" },
		{ " L 1000;8", "expected ',' after the address" },
		{ " L 1000,", "no size after the address" },
		{ " L 1000,0", "size zero" },
		{ " L 1000,99999999999", "size too large" },
		{ " M 1000,8 x", "unexpected text after the size" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why = NULL;
		ck_assert_int_eq(csim_lackey_parse_line(bad[i].line, strlen(bad[i].line), 0, &r, &why),
				 -EBADMSG);
		ck_assert_str_eq(why, bad[i].why);
	}
	ck_assert_int_eq(csim_lackey_parse_line("I am here", 9, 0, &r, &why), 0);
	ck_assert_int_eq(csim_lackey_parse_line(" X 1000,8", 9, 0, &r, &why), 0);
	ck_assert_int_eq(csim_lackey_parse_line("", 0, 0, &r, &why), 0);
}
END_TEST

struct grow {
	struct rep_ref *refs;
	size_t n, cap;
};

static int grow_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct grow *g = arg;
	if (g->n + n > g->cap) {
		g->cap = (g->n + n) * 2;
		g->refs = realloc(g->refs, g->cap * sizeof(*refs));
		ck_assert_ptr_nonnull(g->refs);
	}
	memcpy(g->refs + g->n, refs, n * sizeof(*refs));
	g->n += n;
	return 0;
}

/* The one-pass reader of whole buffers and the line parser agree on every
 * line, across buffer boundaries (a trace of several MiB), on good lines,
 * lines that are no trace lines, CRLF ends and malformed lines. */
START_TEST(lackey_fast_reader_agrees_with_the_line_parser)
{
	static const char *odd[] = {
		" L 1000,8\r", "program says hi", "I  ,4", " S 12345678901234567,8",
		" M 1000,0", " L 1000,8 x", "==1== summary", " L 1000,99999999999",
	};
	char *text = NULL, line[64];
	size_t len = 0, nbad = 0;
	FILE *f = open_memstream(&text, &len);
	struct grow want = { 0 }, got = { 0 };
	uint64_t pc = 0, seed = 12345;

	for (int i = 0; i < 400000; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		unsigned k = (unsigned)(seed >> 33);
		if (k % 97 == 0) {
			snprintf(line, sizeof line, "%s", odd[k / 97 % 8]);
		} else {
			static const char tag[] = "ILSM";
			char t = tag[k % 4];
			int width = 8 + (int)(k % 9);	/* 8 to 16 digits */
			unsigned long long a = seed >> (k % 24);
			if (t == 'I')
				snprintf(line, sizeof line, "I  %0*llx,%u", width, a, 1 + k % 15);
			else
				snprintf(line, sizeof line, " %c %0*llx,%u", t, width, a, 1 + k % 64);
		}
		fprintf(f, "%s\n", line);
		struct rep_ref r;
		const char *why;
		int rc = csim_lackey_parse_line(line, strlen(line), pc, &r, &why);
		nbad += rc < 0;
		if (rc == 1) {
			if (r.type == REP_REF_INSTR)
				pc = r.pc;
			grow_sink(&want, &r, 1);
		}
	}
	fclose(f);
	ck_assert_uint_gt(len, 3u << 20);
	FILE *in = fmemopen(text, len, "r");
	struct csim_lackey *lk;
	ck_assert_int_eq(csim_lackey__open(in, "big", &lk), 0);
	ck_assert_int_eq(csim_lackey__run(lk, 1000, grow_sink, &got), nbad ? -EBADMSG : 0);
	ck_assert_uint_eq(csim_lackey__bad_lines(lk), nbad);
	ck_assert_uint_eq(csim_lackey__lines(lk), 400000);
	ck_assert_uint_eq(got.n, want.n);
	ck_assert_mem_eq(got.refs, want.refs, want.n * sizeof(*want.refs));
	csim_lackey__close(lk);
	fclose(in);
	free(text);
	free(want.refs);
	free(got.refs);
}
END_TEST

START_TEST(lackey_write_round_trips)
{
	struct rep_ref in[] = {
		R(0x401000, 0x401000, 7, REP_REF_INSTR), R(0x401000, 0x1fff000700ull, 8, REP_REF_READ),
		R(0x401000, 0x2000, 4, REP_REF_WRITE), R(0x401000, 0x2000, 4, REP_REF_MODIFY),
	};
	char *text = NULL, err[512];
	size_t len = 0;
	uint64_t bad;
	struct collect c;
	FILE *f = open_memstream(&text, &len);

	ck_assert_int_eq(csim_lackey_write(f, in, 4), 0);
	fclose(f);
	ck_assert_str_eq(text, "I  00401000,7\n L 1fff000700,8\n S 00002000,4\n M 00002000,4\n");
	ck_assert_int_eq(lackey_text(text, 3, &c, err, sizeof err, &bad), 0);
	ck_assert_uint_eq(c.n, 4);
	ck_assert_mem_eq(c.refs, in, sizeof in);
	free(text);
}
END_TEST

START_TEST(lackey_survives_a_huge_line)
{
	size_t big = (1u << 20) + 100;
	char *text = malloc(big + 64);
	struct collect c;
	char err[512];
	uint64_t bad;

	strcpy(text, "I  1000,4\n L ");
	memset(text + 13, '1', big);
	strcpy(text + 13 + big, ",8\nI  2000,4\n");
	ck_assert_int_eq(lackey_text(text, 10, &c, err, sizeof err, &bad), -EBADMSG);
	ck_assert_uint_eq(bad, 1);
	ck_assert_ptr_nonnull(strstr(err, "trace:2:"));
	ck_assert_uint_eq(c.n, 2);
	ck_assert_uint_eq(c.refs[1].addr, 0x2000);
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("csim");
	TCase *tc = tcase_create("csim");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, lru_evicts_least_recently_used);
	tcase_add_test(tc, lines_held_are_the_misses_that_filled_an_empty_way);
	tcase_add_test(tc, associativity_holds_assoc_lines_per_set);
	tcase_add_test(tc, straddle_counts_once_in_cachegrind_mode);
	tcase_add_test(tc, straddle_with_one_line_cached_is_one_miss_and_updates_both);
	tcase_add_test(tc, straddle_is_two_accesses_per_line_mode);
	tcase_add_test(tc, modify_is_one_read_in_cachegrind_mode);
	tcase_add_test(tc, count_only_references_touch_no_cache);
	tcase_add_test(tc, write_allocates);
	tcase_add_test(tc, a_loops_run_is_the_references_it_stands_for);
	tcase_add_test(tc, instructions_go_through_i1);
	tcase_add_test(tc, dirty_helper_sizes_are_cut_to_16_in_cachegrind_mode);
	tcase_add_test(tc, per_pc_rows_attribute_misses);
	tcase_add_test(tc, rows_for_many_pcs_and_extreme_pcs);
	tcase_add_test(tc, merge_sums_rows_and_totals);
	tcase_add_test(tc, matches_model_cachegrind_mode);
	tcase_add_test(tc, matches_model_per_line_mode);
	tcase_add_test(tc, matches_model_at_every_associativity);
	tcase_add_test(tc, loop_streams_match_the_model_per_pc);
	tcase_add_test(tc, windows_change_no_count);
	tcase_add_test(tc, windows_weigh_hits_on_aged_lines);
	tcase_add_test(tc, geometry_parse_and_check);
	tcase_add_test(tc, cachegrind_tweaks_non_power_of_two_ll);
	tcase_add_test(tc, host_geometry_from_amd_cpuid);
	tcase_add_test(tc, host_geometry_from_intel_cpuid);
	tcase_add_test(tc, host_geometry_of_other_vendors);
	tcase_add_test(tc, split_bits_follow_the_smallest_set_count);
	tcase_add_test(tc, fold_blocks_sums_rows);
	tcase_add_test(tc, json_report_has_the_agreed_shape);
	tcase_add_test(tc, lackey_reads_trace_lines_and_ignores_others);
	tcase_add_test(tc, lackey_names_malformed_lines_and_keeps_the_rest);
	tcase_add_test(tc, lackey_line_parser_reasons);
	tcase_add_test(tc, lackey_fast_reader_agrees_with_the_line_parser);
	tcase_add_test(tc, lackey_write_round_trips);
	tcase_add_test(tc, lackey_survives_a_huge_line);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
