/* The cache simulation stage of an instrumentation (src/instr-sim.c):
 * references handed over by several consumers' feeds are all simulated,
 * each once, whatever the batch sizes; a drained feed's references are all
 * in the results; a reader holding the results up loses nothing. */
#include "tests/lib/tu.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "src/instr-sim.h"

enum { NPCS = 64 };

static struct csim *new_sim(void)
{
	struct csim_config cfg;
	struct csim *sim;

	csim_config_fallback(&cfg);
	cfg.cachegrind = true;
	ck_assert_int_eq(csim__new(&cfg, &sim), 0);
	return sim;
}

struct pusher {
	struct sim_feed *feed;
	uint64_t base;		/* its PCs: base + 4 * k, k < NPCS */
	size_t refs;
	unsigned seed;
};

/* refs instruction fetches, PC after PC, in batches of 1..3000 as the
 * recoverer's vary, then the consumer's end (flush, close). */
static void *push(void *arg)
{
	struct pusher *p = arg;
	struct rep_ref batch[3000];
	size_t done = 0;

	while (done < p->refs) {
		size_t n = 1 + (size_t)rand_r(&p->seed) % 3000;
		n = n < p->refs - done ? n : p->refs - done;
		for (size_t i = 0; i < n; i++, done++)
			batch[i] = (struct rep_ref){ .pc = p->base + 4 * (done % NPCS),
						     .addr = p->base + 4 * (done % NPCS),
						     .size = 4, .type = REP_REF_INSTR };
		sim_feed__refs(p->feed, batch, n);
	}
	sim_feed__flush(p->feed);
	sim_feed__close(p->feed);
	return NULL;
}

static uint64_t instr_refs_at(struct csim *sim, uint64_t pc)
{
	struct csim_pc_stats row;

	return csim_result__get(csim__result(sim), pc, &row) ? row.c.refs[CSIM_INSTR] : 0;
}

START_TEST(every_feeds_references_are_simulated_once)
{
	enum { FEEDS = 4, REFS = 200003 };	/* not a multiple of NPCS */
	struct csim *sim = new_sim();
	struct sim_stage *sg;
	struct pusher p[FEEDS];
	pthread_t th[FEEDS];

	ck_assert_int_eq(sim_stage__new(&sim, NULL, &sg), 0);
	for (int i = 0; i < FEEDS; i++) {
		p[i] = (struct pusher){ .base = 0x400000 + 0x10000 * (uint64_t)i, .refs = REFS,
					.seed = (unsigned)i + 1 };
		ck_assert_int_eq(sim_stage__open_feed(sg, &p[i].feed), 0);
		ck_assert_int_eq(pthread_create(&th[i], NULL, push, &p[i]), 0);
	}
	for (int i = 0; i < FEEDS; i++)
		pthread_join(th[i], NULL);
	sim_stage__lock(sg);
	ck_assert_uint_eq(csim_result__totals(csim__result(sim))->refs[CSIM_INSTR],
			  (uint64_t)FEEDS * REFS);
	for (int i = 0; i < FEEDS; i++)
		for (uint64_t k = 0; k < NPCS; k++)
			ck_assert_uint_eq(instr_refs_at(sim, p[i].base + 4 * k),
					  REFS / NPCS + (k < REFS % NPCS));
	sim_stage__unlock(sg);
	sim_stage__free(sg);
	csim__free(sim);
}
END_TEST

START_TEST(a_drained_feed_is_all_in_the_results)
{
	struct csim *sim = new_sim();
	struct sim_stage *sg;
	struct sim_feed *f;
	struct rep_ref r = { .pc = 0x1000, .addr = 0x1000, .size = 4, .type = REP_REF_INSTR };

	ck_assert_int_eq(sim_stage__new(&sim, NULL, &sg), 0);
	ck_assert_int_eq(sim_stage__open_feed(sg, &f), 0);
	for (uint64_t i = 1; i <= 300; i++) {
		sim_feed__refs(f, &r, 1);
		sim_feed__flush(f);
		sim_feed__drain(f);
		sim_stage__lock(sg);
		ck_assert_uint_eq(instr_refs_at(sim, 0x1000), i);
		sim_stage__unlock(sg);
	}
	sim_feed__close(f);
	sim_stage__free(sg);
	csim__free(sim);
}
END_TEST

/* A report holding the results while a consumer pushes more than its
 * feed holds: the consumer waits, nothing is lost. */
START_TEST(a_reader_holding_the_results_loses_nothing)
{
	struct csim *sim = new_sim();
	struct sim_stage *sg;
	struct pusher p = { .base = 0x7000, .refs = 100000, .seed = 7 };
	pthread_t th;

	ck_assert_int_eq(sim_stage__new(&sim, NULL, &sg), 0);
	ck_assert_int_eq(sim_stage__open_feed(sg, &p.feed), 0);
	sim_stage__lock(sg);
	ck_assert_int_eq(pthread_create(&th, NULL, push, &p), 0);
	nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
	sim_stage__unlock(sg);
	pthread_join(th, NULL);
	sim_stage__lock(sg);
	ck_assert_uint_eq(csim_result__totals(csim__result(sim))->refs[CSIM_INSTR], 100000);
	sim_stage__unlock(sg);
	sim_stage__free(sg);
	csim__free(sim);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("instr_sim");
	TCase *tc = tcase_create("stage");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_feeds_references_are_simulated_once);
	tcase_add_test(tc, a_drained_feed_is_all_in_the_results);
	tcase_add_test(tc, a_reader_holding_the_results_loses_nothing);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
