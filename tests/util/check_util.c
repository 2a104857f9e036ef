/* util/: the hash map, the upper-bound search, the options copy, the clock
 * and deadlines on it. */
#include "tests/lib/tu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/padrone.h"
#include "util/util.h"

START_TEST(the_map_keeps_every_key_across_growth)
{
	struct util_hmap h = { 0 };	/* zeroed: empty and ready */

	ck_assert_ptr_null(util_hmap__get(&h, 7));
	for (uint64_t k = 0; k < 5000; k++)
		ck_assert_int_eq(util_hmap__put(&h, k * 0x1000 + 3, (uint32_t)k), 0);
	ck_assert_uint_eq(h.len, 5000);
	for (uint64_t k = 0; k < 5000; k++) {
		uint32_t *v = util_hmap__get(&h, k * 0x1000 + 3);
		ck_assert_ptr_nonnull(v);
		ck_assert_uint_eq(*v, k);
	}
	ck_assert_ptr_null(util_hmap__get(&h, 4));
	/* the empty marker is no key: never found, refused */
	ck_assert_ptr_null(util_hmap__get(&h, UTIL_HMAP_EMPTY));
	ck_assert_int_eq(util_hmap__put(&h, UTIL_HMAP_EMPTY, 1), -EINVAL);
	ck_assert_int_eq(util_hmap__put(&h, 3, 99), 0);	/* overwrite */
	ck_assert_uint_eq(*util_hmap__get(&h, 3), 99);
	ck_assert_uint_eq(h.len, 5000);
	util_hmap__clear(&h);
	ck_assert_ptr_null(util_hmap__get(&h, 3));
	util_hmap__fini(&h);
}
END_TEST

struct range {
	uint32_t pad;
	uint64_t start;
};

START_TEST(upper_bound_finds_the_first_above)
{
	struct range r[] = { { 0, 10 }, { 0, 20 }, { 0, 20 }, { 0, 30 } };

	ck_assert_uint_eq(UTIL_UPPER_BOUND(r, 4, start, 5), 0);
	ck_assert_uint_eq(UTIL_UPPER_BOUND(r, 4, start, 10), 1);
	ck_assert_uint_eq(UTIL_UPPER_BOUND(r, 4, start, 20), 3);
	ck_assert_uint_eq(UTIL_UPPER_BOUND(r, 4, start, 29), 3);
	ck_assert_uint_eq(UTIL_UPPER_BOUND(r, 4, start, 30), 4);
	ck_assert_uint_eq(UTIL_UPPER_BOUND(r, 0, start, 30), 0);
}
END_TEST

struct opts_v1 {
	size_t sz;
	int a;
};

struct opts_v2 {	/* a newer caller's: one more field */
	size_t sz;
	int a;
	long b;
};

START_TEST(options_of_older_and_newer_callers)
{
	struct opts_v1 mine = { .sz = sizeof mine, .a = 5 };
	struct opts_v2 newer = { .sz = sizeof newer, .a = 1 };

	ck_assert(UTIL_OPTS_COPY(&mine, (struct opts_v2 *)NULL));
	ck_assert_int_eq(mine.a, 5);	/* nothing to copy: defaults stay */
	ck_assert(UTIL_OPTS_COPY(&mine, &newer));	/* the unknown field is 0 */
	ck_assert_int_eq(mine.a, 1);
	ck_assert_uint_eq(mine.sz, sizeof mine);	/* this build's, to be handed on */
	newer.b = 2;
	mine.a = 5;
	ck_assert(!UTIL_OPTS_COPY(&mine, &newer));	/* it is set: refused */
	ck_assert_int_eq(mine.a, 5);	/* and nothing copied */
	struct opts_v1 older = { .sz = sizeof(size_t) };	/* knows only sz */
	ck_assert(UTIL_OPTS_COPY(&mine, &older));
	ck_assert_int_eq(mine.a, 5);
	ck_assert_uint_eq(mine.sz, sizeof mine);
}
END_TEST

/* Through the API: a session's options from a newer caller. */
START_TEST(a_session_refuses_options_it_does_not_know)
{
	struct {
		struct padrone_session_opts o;
		uint64_t later;
	} newer = { .o = { .sz = sizeof newer }, .later = 1 };
	struct padrone_session *s;

	errno = 0;
	ck_assert_ptr_null(padrone_session__new(&newer.o));
	ck_assert_int_eq(errno, EINVAL);
	newer.later = 0;
	s = padrone_session__new(&newer.o);
	ck_assert_ptr_nonnull(s);
	padrone_session__free(s);
}
END_TEST

/* instrument and its wait, too: the options are looked at first, so a
 * session attached to nothing tells the refusal apart from "not
 * attached". */
START_TEST(instrument_refuses_options_it_does_not_know)
{
	struct padrone_session *s = padrone_session__new(NULL);
	struct {
		struct padrone_instrument_opts o;
		uint64_t later;
	} in = { .o = { .sz = sizeof in }, .later = 1 };
	struct {
		struct padrone_instr_wait_opts o;
		uint64_t later;
	} wait = { .o = { .sz = sizeof wait, .seconds = 1 }, .later = 1 };

	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(padrone_session__instrument(s, "f", &in.o), -EINVAL);
	ck_assert_msg(strstr(padrone_session__errmsg(s), "does not know"), "%s",
		      padrone_session__errmsg(s));
	ck_assert_int_eq(padrone_session__instr_wait(s, &wait.o), -EINVAL);
	in.later = wait.later = 0;
	ck_assert_int_eq(padrone_session__instrument(s, "f", &in.o), -ENOENT);
	ck_assert_int_eq(padrone_session__instr_wait(s, &wait.o), -ENOENT);
	ck_assert_msg(strstr(padrone_session__errmsg(s), "not attached"), "%s",
		      padrone_session__errmsg(s));
	padrone_session__free(s);
}
END_TEST

START_TEST(the_clock_goes_forward)
{
	uint64_t a = util_now_ns(), b = util_now_ns();

	ck_assert_uint_gt(a, 0);
	ck_assert_uint_ge(b, a);
}
END_TEST

/* Adding carries nanoseconds into seconds, whole seconds of ns too; a
 * deadline is the monotonic clock's now plus the time given. */
START_TEST(a_timespec_adds_and_carries)
{
	struct timespec t = { 5, 999999999 }, d;

	util_timespec_add_ns(&t, 1);
	ck_assert(t.tv_sec == 6 && t.tv_nsec == 0);
	util_timespec_add_ns(&t, 2500000001ull);
	ck_assert(t.tv_sec == 8 && t.tv_nsec == 500000001);
	util_timespec_add_ns(&t, 499999999);
	ck_assert(t.tv_sec == 9 && t.tv_nsec == 0);
	uint64_t before = util_now_ns();
	util_deadline_ns(&d, 3000000000ull);
	uint64_t at = (uint64_t)d.tv_sec * 1000000000ull + (uint64_t)d.tv_nsec;
	ck_assert_uint_ge(at, before + 3000000000ull);
	ck_assert_uint_le(at, util_now_ns() + 3000000000ull);
	ck_assert_int_lt(d.tv_nsec, 1000000000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("util");
	tcase_add_test(tc, the_map_keeps_every_key_across_growth);
	tcase_add_test(tc, upper_bound_finds_the_first_above);
	tcase_add_test(tc, options_of_older_and_newer_callers);
	tcase_add_test(tc, a_session_refuses_options_it_does_not_know);
	tcase_add_test(tc, instrument_refuses_options_it_does_not_know);
	tcase_add_test(tc, the_clock_goes_forward);
	tcase_add_test(tc, a_timespec_adds_and_carries);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
