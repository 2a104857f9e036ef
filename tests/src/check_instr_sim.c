/* The cache simulation stage of an instrumentation (src/instr-sim.c):
 * references handed over by several consumers' feeds are all simulated,
 * each once, whatever the batch sizes; a drained feed's references are all
 * in the results; a reader holding the results up loses nothing (and a
 * consumer it keeps waiting says it is alive); a
 * consumer that simulates its own batches when it can loses none either. */
#include "tests/lib/tu.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "src/instr-sim.h"
#include "pipeline/rep.h"

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

static void count_alive(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_RELAXED);
}

/* A consumer whose feed is full while the simulator is held up says, again
 * and again as it waits, that it is alive (its ring's heartbeat: an
 * exhaustive producer then waits for it rather than judge it gone and
 * drop); nothing is lost. */
START_TEST(a_consumer_waiting_for_the_simulator_says_it_is_alive)
{
	struct csim *sim = new_sim();
	struct sim_stage *sg;
	struct pusher p = { .base = 0x9000, .refs = 200000, .seed = 9 };
	pthread_t th;
	int alive = 0;

	ck_assert_int_eq(sim_stage__new(&sim, NULL, &sg), 0);
	ck_assert_int_eq(sim_stage__open_feed(sg, &p.feed), 0);
	sim_feed__while_waiting(p.feed, count_alive, &alive);
	sim_stage__lock(sg);
	ck_assert_int_eq(pthread_create(&th, NULL, push, &p), 0);
	for (int i = 0; i < 3000 && __atomic_load_n(&alive, __ATOMIC_RELAXED) < 3; i++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	int seen = __atomic_load_n(&alive, __ATOMIC_RELAXED);
	sim_stage__unlock(sg);
	pthread_join(th, NULL);
	ck_assert_msg(seen >= 3, "the waiting consumer said it was alive %d times in 30 s", seen);
	sim_stage__lock(sg);
	ck_assert_uint_eq(csim_result__totals(csim__result(sim))->refs[CSIM_INSTR], 200000);
	sim_stage__unlock(sg);
	sim_stage__free(sg);
	csim__free(sim);
}
END_TEST

/* A lone consumer simulates its references itself: they are in the
 * results when sim_feed__refs returns, with no flush and no drain (handed
 * over, they would wait for SIM_WAKE batches or a flush). */
START_TEST(a_lone_consumer_simulates_its_references_itself)
{
	struct csim *sim = new_sim();
	struct sim_stage *sg;
	struct sim_feed *f;
	struct rep_ref r = { .pc = 0x2000, .addr = 0x2000, .size = 4, .type = REP_REF_INSTR };

	ck_assert_int_eq(sim_stage__new(&sim, NULL, &sg), 0);
	ck_assert_int_eq(sim_stage__open_feed(sg, &f), 0);
	for (uint64_t i = 1; i <= 300; i++) {
		sim_feed__refs(f, &r, 1);
		sim_stage__lock(sg);
		ck_assert_uint_eq(instr_refs_at(sim, 0x2000), i);
		sim_stage__unlock(sg);
	}
	ck_assert(sim_stage__idle(sg));
	sim_feed__close(f);
	sim_stage__free(sg);
	csim__free(sim);
}
END_TEST

/* A reader taking the results now and then while one consumer pushes: the
 * consumer simulates its batches itself while no one holds them, hands
 * them over while someone does, and goes back to simulating them itself
 * once its queue is empty. Each reference is simulated once. */
START_TEST(a_consumer_simulating_and_handing_over_in_turn_loses_nothing)
{
	enum { REFS = 400009 };
	struct csim *sim = new_sim();
	struct sim_stage *sg;
	struct pusher p = { .base = 0x9000, .refs = REFS, .seed = 5 };
	pthread_t th;

	ck_assert_int_eq(sim_stage__new(&sim, NULL, &sg), 0);
	ck_assert_int_eq(sim_stage__open_feed(sg, &p.feed), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, push, &p), 0);
	for (int k = 0; k < 20; k++) {
		sim_stage__lock(sg);
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		sim_stage__unlock(sg);
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	pthread_join(th, NULL);
	sim_stage__lock(sg);
	ck_assert_uint_eq(csim_result__totals(csim__result(sim))->refs[CSIM_INSTR], REFS);
	for (uint64_t k = 0; k < NPCS; k++)
		ck_assert_uint_eq(instr_refs_at(sim, p.base + 4 * k),
				  REFS / NPCS + (k < REFS % NPCS));
	sim_stage__unlock(sg);
	sim_stage__free(sg);
	csim__free(sim);
}
END_TEST

/* A feed keeping a recoverer's batches (sim_feed__keep_batches, what a
 * consumer does): units of one block, an instruction and a read of the
 * next 8 bytes each, recovered in pieces of every size; every reference is
 * simulated once and in order (a line's misses: its first read only), and
 * the arrays that change hands are each freed once (ASan). */
START_TEST(a_feed_keeping_the_recoverers_batches_simulates_each_reference_once)
{
	enum { UNITS = 3 * REP_RECOVER_BATCH + 1234 };
	static const struct rep_instr ins = { .pc = 0x400000, .len = 4 };
	static const struct rep_mref rd = { .pc = 0x400000, .size = 8, .type = REP_REF_READ,
					    .scale = 1, .base = 0, .index = REP_NO_SLOT,
					    .seg = REP_NO_SLOT, .count = REP_NO_SLOT };
	const struct rep_block b = { .id = 1, .nslots = 1, .pc = 0x400000, .ninstrs = 1,
				     .nrefs = 1, .instrs = &ins, .refs = &rd };
	uint64_t *words = malloc(2 * UNITS * sizeof *words);
	struct csim *sim = new_sim();
	struct rep_recover *rec;
	struct rep_table *t;
	struct sim_stage *sg;
	struct sim_feed *f;
	unsigned seed = 11;

	ck_assert_ptr_nonnull(words);
	for (size_t k = 0; k < UNITS; k++) {
		words[2 * k] = REP_S_WORD(1, 1);
		words[2 * k + 1] = 0x10000000 + 8 * k;
	}
	ck_assert_int_eq(rep_table__new(&t), 0);
	ck_assert_int_eq(rep_table__add(t, &b), 0);
	ck_assert_int_eq(sim_stage__new(&sim, NULL, &sg), 0);
	ck_assert_int_eq(sim_stage__open_feed(sg, &f), 0);
	ck_assert_int_eq(rep_recover__new(t, sim_feed__refs, f, &rec), 0);
	sim_feed__keep_batches(f, rec);
	for (size_t at = 0; at < 2 * UNITS;) {
		size_t n = 1 + (size_t)rand_r(&seed) % 5000;
		n = n < 2 * UNITS - at ? n : 2 * UNITS - at;
		ck_assert_int_eq(rep_recover__feed(rec, words + at, n, at * 8), 0);
		at += n;
	}
	rep_recover__flush(rec);
	sim_feed__flush(f);
	sim_feed__drain(f);
	sim_stage__lock(sg);
	const struct csim_counts *c = csim_result__totals(csim__result(sim));
	ck_assert_uint_eq(c->refs[CSIM_INSTR], UNITS);
	ck_assert_uint_eq(c->refs[CSIM_READ], UNITS);
	ck_assert_uint_eq(c->miss[CSIM_D1][CSIM_READ], (UNITS * 8 + 63) / 64);
	sim_stage__unlock(sg);
	sim_feed__close(f);
	rep_recover__free(rec);
	sim_stage__free(sg);
	csim__free(sim);
	rep_table__free(t);
	free(words);
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
	tcase_add_test(tc, a_consumer_waiting_for_the_simulator_says_it_is_alive);
	tcase_add_test(tc, a_lone_consumer_simulates_its_references_itself);
	tcase_add_test(tc, a_consumer_simulating_and_handing_over_in_turn_loses_nothing);
	tcase_add_test(tc, a_feed_keeping_the_recoverers_batches_simulates_each_reference_once);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
