/* check_split: N simulator threads behind the set splitter give exactly the
 * results of one simulator, in both counting modes, with references cut
 * across workers, uneven routing, tiny rings; and the analyses. */
#include "tests/lib/tu.h"
#include "tests/pipeline/check_csim-model.h"
#include "pipeline/csim-internal.h"	/* csim_compact_min */

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct csim_config cg_cfg(void)
{
	struct csim_config c = { .cachegrind = true };
	c.level[CSIM_I1] = (struct csim_geom){ 4096, 2, 64 };		/* 32 sets */
	c.level[CSIM_D1] = (struct csim_geom){ 8192, 4, 64 };		/* 32 sets */
	c.level[CSIM_LL] = (struct csim_geom){ 65536, 8, 64 };	/* 128 sets */
	return c;
}

static unsigned test_slots;	/* 0: the default */

/* Run refs through a splitter of nworkers, pushing in batches of batch. */
static struct csim_split *split_run(const struct csim_config *cfg, unsigned nworkers,
				    const struct rep_ref *refs, size_t n, size_t batch,
				    size_t ring_bytes)
{
	struct csim_split_opts o = { .sz = sizeof(o), .workers = nworkers, .ring_bytes = ring_bytes,
				     .slots = test_slots };
	struct csim_split *sp;

	ck_assert_int_eq(csim_split__new(cfg, &o, &sp), 0);
	for (size_t i = 0; i < n; i += batch)
		ck_assert_int_eq(csim_split__push(sp, refs + i, n - i < batch ? n - i : batch), 0);
	ck_assert_int_eq(csim_split__finish(sp), 0);
	return sp;
}

static void expect_same(const struct csim_config *cfg, const struct rep_ref *refs, size_t n,
			const unsigned *workers, size_t nw, size_t ring_bytes)
{
	struct csim *s;
	ck_assert_int_eq(csim__new(cfg, &s), 0);
	ck_assert_int_eq(csim__refs(s, refs, n), 0);
	/* Every level stored compact in the workers, then (with the first
	 * worker count) only the large ones, as in use. */
	size_t compact_min = csim_compact_min;
	for (size_t i = 0; i <= nw; i++) {
		csim_compact_min = i < nw ? 0 : compact_min;
		struct csim_split *sp = split_run(cfg, workers[i % nw], refs, n, 1000 + 77 * i,
						  ring_bytes);
		struct csim_split_stats st;
		csim_split__stats(sp, &st);
		ck_assert_uint_eq(st.workers, workers[i % nw]);
		ck_assert_uint_eq(st.refs, n);
		if (!csim_result__equal(csim_split__result(sp), csim__result(s))) {
			const struct csim_counts *a = csim_result__totals(csim_split__result(sp));
			const struct csim_counts *b = csim_result__totals(csim__result(s));
			for (int lv = 0; lv < CSIM_NLEVELS; lv++)
				for (int k = 0; k < CSIM_NKINDS; k++)
					fprintf(stderr, "lv %d kind %d: split %lu/%lu one %lu/%lu\n", lv, k,
						(unsigned long)a->access[lv][k], (unsigned long)a->miss[lv][k],
						(unsigned long)b->access[lv][k], (unsigned long)b->miss[lv][k]);
			ck_abort_msg("%u workers differ from one simulator", workers[i % nw]);
		}
		csim_split__free(sp);
	}
	csim_compact_min = compact_min;
	csim__free(s);
}

enum { N = 200000 };
static struct rep_ref refs[N];

START_TEST(workers_match_one_simulator_cachegrind_mode)
{
	static const unsigned w[] = { 1, 2, 3, 4, 8 };
	struct csim_config cfg = cg_cfg();
	make_stream(refs, N, 11, 1 << 17, 300);
	expect_same(&cfg, refs, N, w, 5, 0);
}
END_TEST

START_TEST(workers_match_with_l2_and_mixed_line_sizes)
{
	static const unsigned w[] = { 2, 4, 5 };
	struct csim_config cfg = cg_cfg();
	cfg.level[CSIM_I1] = (struct csim_geom){ 4096, 4, 32 };	/* 32 sets of 32 B */
	cfg.level[CSIM_L2] = (struct csim_geom){ 16384, 4, 64 };
	cfg.level[CSIM_LL] = (struct csim_geom){ 131072, 8, 128 };
	make_stream(refs, N, 12, 1 << 18, 300);
	expect_same(&cfg, refs, N, w, 3, 0);
}
END_TEST

START_TEST(workers_match_with_a_large_last_level)
{
	/* A last level large enough to be stored compact in the workers while
	 * the first levels are not (in both modes). */
	static const unsigned w[] = { 2, 3 };
	struct csim_config cfg = cg_cfg();
	cfg.level[CSIM_LL] = (struct csim_geom){ 4 << 20, 16, 64 };	/* 512 KiB of tags */
	make_stream(refs, N, 15, 1 << 23, 300);
	expect_same(&cfg, refs, N, w, 2, 0);
	cfg.cachegrind = false;
	expect_same(&cfg, refs, N, w, 2, 0);
}
END_TEST

START_TEST(workers_match_per_line_mode)
{
	static const unsigned w[] = { 2, 3, 4 };
	struct csim_config cfg = cg_cfg();
	cfg.cachegrind = false;
	cfg.level[CSIM_D1] = (struct csim_geom){ 12288, 4, 64 };	/* 48 sets */
	cfg.level[CSIM_LL] = (struct csim_geom){ 3 * 65536, 12, 64 };	/* 256 sets */
	make_stream(refs, N, 13, 1 << 17, 300);
	expect_same(&cfg, refs, N, w, 3, 0);
}
END_TEST

/* References that only count among the others (FETCH_HITS from
 * rep_recover__set_fetch_line, READS and WRITES from padrone's refs
 * analysis): any worker counts them, and the rows come out as one
 * simulator's. */
START_TEST(count_only_references_count_as_in_one_simulator)
{
	static const unsigned w[] = { 1, 2, 3 };
	static const uint8_t types[] = { REP_REF_FETCH_HITS, REP_REF_READS, REP_REF_WRITES };
	struct csim_config cfg = cg_cfg();
	make_stream(refs, N, 16, 1 << 17, 300);
	for (size_t i = 0; i < N; i += 7)
		refs[i] = (struct rep_ref){ .pc = refs[i].pc, .addr = 1 + i % 5,
					    .type = types[i / 7 % 3] };
	expect_same(&cfg, refs, N, w, 3, 0);
	cfg.cachegrind = false;
	expect_same(&cfg, refs, N, w, 3, 0);
}
END_TEST

START_TEST(split_matches_the_naive_model)
{
	/* Closes the loop: split == csim (above) and split == model here, on
	 * random references and on loops (mostly hits on the line the set
	 * used last). */
	struct csim_config cfg = cg_cfg();
	struct model m;
	if (_i == 0)
		make_stream(refs, N, 14, 1 << 16, 100);
	else
		make_loop_stream(refs, N, 14, 1 << 16);
	model_init(&m, &cfg);
	for (size_t i = 0; i < N; i++)
		model_ref(&m, &refs[i]);
	struct csim_split *sp = split_run(&cfg, 3, refs, N, 4096, 0);
	const struct csim_result *r = csim_split__result(sp);
	ck_assert_uint_eq(csim_result__npcs(r), m.npcs);
	for (size_t i = 0; i < m.npcs; i++) {
		struct csim_pc_stats row;
		ck_assert(csim_result__get(r, m.pcs[i], &row));
		ck_assert_mem_eq(&row.c, &m.rows[i], sizeof(row.c));
	}
	model_free(&m);
	csim_split__free(sp);
}
END_TEST

START_TEST(every_reference_straddles)
{
	/* Worst case for the meeting slots: every access crosses a line, so
	 * every one is cut between two workers, over few sets (so deferred
	 * parts block later accesses), through tiny rings. */
	static const unsigned w[] = { 2, 4 };
	struct csim_config cfg = cg_cfg();
	uint64_t s = 99;
	for (size_t i = 0; i < N; i++) {
		uint64_t x = rnd(&s);
		uint64_t line = x % 3000;
		uint8_t type = (uint8_t)(1 + (x >> 20) % 4);
		uint64_t addr = (line << 6) + 60 - (x >> 30) % 4;
		refs[i] = (struct rep_ref){ .pc = 0x1000 + (x >> 40) % 50, .addr = addr,
					    .size = type == REP_REF_INSTR ? 9 : 8, .type = type };
	}
	expect_same(&cfg, refs, N, w, 2, 16384);
}
END_TEST

START_TEST(few_slots_make_workers_read_chunks_being_filled)
{
	/* With 8 meeting slots the splitter keeps waiting for cut references
	 * to complete while their parts sit in chunks still being filled
	 * (large chunks, so many references per chunk): idle workers must
	 * read those out, or everything stops. Each wait is a wake-up of a
	 * worker, which on a VM whose idle CPUs halt takes long: a sixth of
	 * the stream (the whole took 100 s of a 120 s timeout, 95% asleep). */
	static const unsigned w[] = { 2, 3 };
	struct csim_config cfg = cg_cfg();
	make_stream(refs, N / 6, 31, 1 << 16, 200);
	test_slots = 8;
	expect_same(&cfg, refs, N / 6, w, 2, 0);
	test_slots = 0;
}
END_TEST

START_TEST(uneven_routing_is_reported_and_still_exact)
{
	/* Nearly everything on even lines (worker 0 of 2), with some
	 * straddles involving worker 1: imbalance close to 2. */
	static const unsigned w[] = { 2 };
	struct csim_config cfg = cg_cfg();
	uint64_t s = 5;
	for (size_t i = 0; i < N; i++) {
		uint64_t x = rnd(&s);
		uint64_t line = (x % 4000) * 2;
		uint64_t addr = (line << 6) + (x % 97 == 0 ? 62 : (x >> 20) % 56);
		refs[i] = (struct rep_ref){ .pc = 0x2000 + (x >> 40) % 20, .addr = addr, .size = 8,
					    .type = REP_REF_READ };
	}
	expect_same(&cfg, refs, N, w, 1, 0);
	struct csim_split *sp = split_run(&cfg, 2, refs, N, 5000, 0);
	struct csim_split_stats st;
	csim_split__stats(sp, &st);
	ck_assert(st.imbalance > 1.9 && st.imbalance <= 2.0);
	ck_assert_uint_gt(st.cross, 1000);
	ck_assert_uint_eq(st.per_worker[0] + st.per_worker[1], st.refs + st.parts);
	csim_split__free(sp);
}
END_TEST

START_TEST(balanced_stream_has_low_imbalance)
{
	struct csim_config cfg = cg_cfg();
	make_stream(refs, N, 21, 1 << 20, 300);
	struct csim_split *sp = split_run(&cfg, 4, refs, N, 4096, 0);
	struct csim_split_stats st;
	csim_split__stats(sp, &st);
	ck_assert_uint_eq(st.bits, 5);	/* 32 sets at I1 and D1 */
	ck_assert(st.imbalance >= 1.0 && st.imbalance < 1.2);
	csim_split__free(sp);
}
END_TEST

START_TEST(workers_are_capped_by_the_set_count)
{
	struct csim_config cfg = cg_cfg();
	cfg.level[CSIM_D1] = (struct csim_geom){ 512, 2, 64 };	/* 4 sets: 2 bits */
	struct csim_split_opts o = { .sz = sizeof(o), .workers = 16 };
	struct csim_split *sp;
	struct csim_split_stats st;
	ck_assert_int_eq(csim_split__new(&cfg, &o, &sp), 0);
	csim_split__stats(sp, &st);
	ck_assert_uint_eq(st.workers, 4);
	csim_split__free(sp);	/* without finish: threads stop, nothing leaks */
}
END_TEST

START_TEST(bad_input_is_refused)
{
	struct csim_config cfg = cg_cfg();
	struct csim_split *sp;
	struct rep_ref bad = { .pc = 1, .addr = 2, .size = 4, .type = 9 };
	ck_assert_int_eq(csim_split__new(&cfg, NULL, &sp), 0);
	ck_assert_int_eq(csim_split__push(sp, &bad, 1), -EINVAL);
	ck_assert_str_eq(csim_split__errmsg(sp), "reference 0 has an unknown type 9");
	ck_assert_int_eq(csim_split__finish(sp), 0);
	ck_assert_int_eq(csim_split__push(sp, &bad, 1), -EPIPE);
	csim_split__free(sp);
	cfg.level[CSIM_LL].line = 12;
	ck_assert_int_eq(csim_split__new(&cfg, NULL, &sp), -EINVAL);
}
END_TEST

/* ------------------------------------------------------------- analyses */

static struct pipeline_analysis *analysis(const char *name, const struct pipeline_args *args)
{
	char err[256];
	const struct pipeline_analysis_ops *ops = pipeline_analysis_find(name);
	ck_assert_ptr_nonnull(ops);
	struct pipeline_analysis *a = pipeline_analysis__new(ops, args, err, sizeof err);
	ck_assert_msg(a != NULL, "%s", err);
	return a;
}

START_TEST(analysis_table_lists_every_analysis)
{
	size_t n;
	const struct pipeline_analysis_ops *const *all = pipeline_analyses(&n);
	const char *want[] = { "blocks", "cache", "edges", "memtrace", "reuse" };
	ck_assert_uint_eq(n, 5);
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(all[i]->name, want[i]);
		ck_assert_ptr_nonnull(all[i]->summary);
	}
	ck_assert_ptr_null(pipeline_analysis_find("nope"));
}
END_TEST

START_TEST(reuse_distance_matches_brute_force_and_lru)
{
	/* Histogram vs an O(n^2) count, and: a fully associative LRU cache of
	 * C lines misses exactly the cold accesses plus those at distance >= C. */
	enum { M = 30000 };
	static struct rep_ref r[M];
	static uint64_t lines[M];
	uint64_t hist[65] = { 0 }, cold = 0, far = 0, s = 3;
	size_t nl = 0;
	for (size_t i = 0; i < M; i++) {
		uint64_t x = rnd(&s);
		r[i] = (struct rep_ref){ .pc = 1, .addr = 0x100000 + (x % 700) * 64 + (x >> 60),
					 .size = 4, .type = (uint8_t)(1 + (x >> 20) % 3) };
		lines[nl++] = r[i].addr >> 6;
	}
	for (size_t i = 0; i < nl; i++) {
		/* Walk back to the previous access of this line, counting the
		 * distinct lines passed. */
		static bool seen[700];
		uint64_t d = 0;
		size_t j = i;
		memset(seen, 0, sizeof seen);
		while (j-- > 0 && lines[j] != lines[i]) {
			size_t k = lines[j] - (0x100000 >> 6);
			d += !seen[k];
			seen[k] = true;
		}
		if (j == (size_t)-1) {
			cold++;
			continue;
		}
		hist[d ? 64 - __builtin_clzll(d) : 0]++;
		far += d >= 256;
	}
	struct pipeline_args args = { .sz = sizeof(args), .line = 64 };
	struct pipeline_analysis *a = analysis("reuse", &args);
	for (size_t i = 0; i < M; i += 999)
		ck_assert_int_eq(pipeline_analysis__refs(a, r + i, M - i < 999 ? M - i : 999), 0);
	ck_assert_int_eq(pipeline_analysis__finish(a), 0);
	struct json_object *j = pipeline_analysis__to_json(a), *v, *b;
	ck_assert(json_object_object_get_ex(j, "cold", &v));
	ck_assert_uint_eq((uint64_t)json_object_get_uint64(v), cold);
	ck_assert(json_object_object_get_ex(j, "buckets", &b));
	for (size_t i = 0; i < json_object_array_length(b); i++) {
		struct json_object *e = json_object_array_get_idx(b, i), *lo, *cnt;
		json_object_object_get_ex(e, "min", &lo);
		json_object_object_get_ex(e, "count", &cnt);
		uint64_t l = json_object_get_uint64(lo);
		ck_assert_uint_eq(json_object_get_uint64(cnt), hist[l ? 64 - __builtin_clzll(l) : 0]);
	}
	json_object_put(j);
	pipeline_analysis__free(a);

	/* The same stream through a fully associative data cache of 256
	 * lines, per-line mode (a modify's write half always hits). */
	struct csim_config cfg = { 0 };
	cfg.level[CSIM_I1] = (struct csim_geom){ 4096, 2, 64 };
	cfg.level[CSIM_D1] = (struct csim_geom){ 256 * 64, 256, 64 };
	cfg.level[CSIM_LL] = (struct csim_geom){ 1 << 20, 16, 64 };
	struct csim *sim;
	ck_assert_int_eq(csim__new(&cfg, &sim), 0);
	ck_assert_int_eq(csim__refs(sim, r, M), 0);
	const struct csim_counts *t = csim_result__totals(csim__result(sim));
	ck_assert_uint_eq(t->miss[CSIM_D1][CSIM_READ] + t->miss[CSIM_D1][CSIM_WRITE], cold + far);
	csim__free(sim);
}
END_TEST

START_TEST(blocks_and_edges_from_the_instruction_stream)
{
	/* A loop of two blocks run 3 times: A (0x10, 0x14) -> B (0x40) -> A. */
	struct rep_ref r[20];
	size_t n = 0;
	for (int i = 0; i < 3; i++) {
		r[n++] = (struct rep_ref){ .pc = 0x10, .addr = 0x10, .size = 4, .type = REP_REF_INSTR };
		r[n++] = (struct rep_ref){ .pc = 0x10, .addr = 0x900, .size = 4, .type = REP_REF_READ };
		r[n++] = (struct rep_ref){ .pc = 0x14, .addr = 0x14, .size = 2, .type = REP_REF_INSTR };
		r[n++] = (struct rep_ref){ .pc = 0x40, .addr = 0x40, .size = 5, .type = REP_REF_INSTR };
	}
	struct pipeline_args args = { .sz = sizeof(args) };
	struct pipeline_analysis *b = analysis("blocks", &args), *e = analysis("edges", &args);
	ck_assert_int_eq(pipeline_analysis__refs(b, r, n), 0);
	ck_assert_int_eq(pipeline_analysis__refs(e, r, n), 0);
	struct json_object *jb = pipeline_analysis__to_json(b), *je = pipeline_analysis__to_json(e);
	ck_assert_str_eq(json_object_to_json_string_ext(jb, JSON_C_TO_STRING_PLAIN),
			 "{\"distinct\":2,\"executions\":6,\"top\":[{\"pc\":\"0x10\",\"count\":3},"
			 "{\"pc\":\"0x40\",\"count\":3}]}");
	ck_assert_str_eq(json_object_to_json_string_ext(je, JSON_C_TO_STRING_PLAIN),
			 "{\"distinct\":2,\"traversals\":5,\"top\":[{\"from\":\"0x10\",\"to\":\"0x40\","
			 "\"count\":3},{\"from\":\"0x40\",\"to\":\"0x10\",\"count\":2}]}");
	json_object_put(jb);
	json_object_put(je);
	/* Counts from the source replace the derived ones. */
	struct pipeline_block_count bc[] = { { .pc = 0x100, .count = 7, .end = 0x120 } };
	ck_assert_int_eq(pipeline_analysis__blocks(b, bc, 1), 0);
	ck_assert_int_eq(pipeline_analysis__refs(b, r, n), 0);
	jb = pipeline_analysis__to_json(b);
	ck_assert_str_eq(json_object_to_json_string_ext(jb, JSON_C_TO_STRING_PLAIN),
			 "{\"distinct\":1,\"executions\":7,\"top\":[{\"pc\":\"0x100\",\"count\":7}]}");
	json_object_put(jb);
	pipeline_analysis__free(b);
	pipeline_analysis__free(e);
}
END_TEST

START_TEST(memtrace_needs_an_output)
{
	struct pipeline_args args = { .sz = sizeof(args) };
	char err[256];
	ck_assert_ptr_null(pipeline_analysis__new(pipeline_analysis_find("memtrace"), &args, err,
						  sizeof err));
	ck_assert_str_eq(err, "memtrace: no output file given (--trace-out)");
}
END_TEST

START_TEST(cache_analysis_equals_the_simulator)
{
	struct csim_config cfg = cg_cfg();
	struct pipeline_args args = { .sz = sizeof(args), .cache = &cfg, .workers = 2 };
	make_stream(refs, 50000, 8, 1 << 16, 100);
	struct pipeline_analysis *a = analysis("cache", &args);
	ck_assert_int_eq(pipeline_analysis__refs(a, refs, 50000), 0);
	ck_assert_int_eq(pipeline_analysis__finish(a), 0);
	struct csim *s;
	ck_assert_int_eq(csim__new(&cfg, &s), 0);
	ck_assert_int_eq(csim__refs(s, refs, 50000), 0);
	ck_assert(csim_result__equal(pipeline_cache_result(a), csim__result(s)));
	struct csim_split_stats st;
	pipeline_cache_stats(a, &st);
	ck_assert_uint_eq(st.workers, 2);
	csim__free(s);
	pipeline_analysis__free(a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("split");
	TCase *tc = tcase_create("split");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, workers_match_one_simulator_cachegrind_mode);
	tcase_add_test(tc, workers_match_with_l2_and_mixed_line_sizes);
	tcase_add_test(tc, workers_match_with_a_large_last_level);
	tcase_add_test(tc, workers_match_per_line_mode);
	tcase_add_test(tc, count_only_references_count_as_in_one_simulator);
	tcase_add_loop_test(tc, split_matches_the_naive_model, 0, 2);
	tcase_add_test(tc, every_reference_straddles);
	tcase_add_test(tc, few_slots_make_workers_read_chunks_being_filled);
	tcase_add_test(tc, uneven_routing_is_reported_and_still_exact);
	tcase_add_test(tc, balanced_stream_has_low_imbalance);
	tcase_add_test(tc, workers_are_capped_by_the_set_count);
	tcase_add_test(tc, bad_input_is_refused);
	tcase_add_test(tc, analysis_table_lists_every_analysis);
	tcase_add_test(tc, reuse_distance_matches_brute_force_and_lru);
	tcase_add_test(tc, blocks_and_edges_from_the_instruction_stream);
	tcase_add_test(tc, memtrace_needs_an_output);
	tcase_add_test(tc, cache_analysis_equals_the_simulator);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
