/* The code cache through libpadrone's API (padrone.h): replace, measure,
 * restore, the replacements list, and PADRONE's own calls -- create a code
 * cache, insert raw code, redirect a function to it -- on a live cc_vecadd,
 * checked by its checksum. */
#include "src/padrone.h"
#include "tests/lib/tu.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct tu_proc p;
static struct padrone_session *s;

static void start(void)
{
	char *argv[] = { (char *)tu_path("tests/targets/cc_vecadd"), NULL };
	char line[256];

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_ge(tu_wait_for(&p, "cc_vecadd:", line, sizeof line, 10000), 0);
	s = padrone_session__new(NULL);
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(padrone_session__attach(s, p.pid) == 0, "%s", padrone_session__errmsg(s));
}

static void end(void)
{
	padrone_session__free(s);
	tu_kill(&p);
}

static unsigned checksum(void)
{
	char line[256];
	unsigned sum;
	double ns;
	long r;
	ck_assert_int_ge(tu_wait_for(&p, "round ", line, sizeof line, 10000), 0);
	ck_assert(sscanf(line, "round %ld: %lf ns/call checksum %x", &r, &ns, &sum) == 3);
	return sum;
}

START_TEST(replace_measure_restore)
{
	struct padrone_patch pt;
	struct padrone_measurement m;
	struct padrone_replacement_list *rl;
	struct padrone_measure_opts mo = { .sz = sizeof mo, .calls = 500 };

	start();
	unsigned sum = checksum();
	ck_assert_msg(padrone_session__replace(s, "vecadd", tu_path("tests/codecache/repl/vecadd_avx2.o"),
					       NULL, &pt) == 0, "%s", padrone_session__errmsg(s));
	ck_assert_uint_eq(pt.sites, 1);
	ck_assert_int_eq(padrone_session__replacements(s, &rl), 0);
	ck_assert_uint_eq(rl->count, 1);
	ck_assert_str_eq(rl->items[0].name, "vecadd");
	ck_assert(!rl->items[0].measuring);
	ck_assert_uint_eq(rl->items[0].sites, 1);
	ck_assert_int_eq(rl->items[0].owner, getpid());	/* this process made it */
	ck_assert(!rl->items[0].stale);
	ck_assert_uint_gt(rl->items[0].stop_ns, 0);
	padrone_replacement_list__free(rl);
	ck_assert_msg(padrone_session__measure(s, "vecadd", &mo, &m) == 0, "%s",
		      padrone_session__errmsg(s));
	ck_assert_uint_eq(m.calls, 500);
	ck_assert(m.complete && !m.has_ipc && m.p50_ns > 0);
	ck_assert_uint_eq(checksum(), sum);
	ck_assert_int_eq(padrone_session__restore(s, "vecadd", NULL, &pt), 0);
	ck_assert_int_eq(padrone_session__restore(s, "vecadd", NULL, &pt), -ENOENT);
	ck_assert_int_eq(padrone_session__why(s), PADRONE_BAD_REQUEST);
	ck_assert_msg(strstr(padrone_session__errmsg(s), "is not replaced"), "%s",
		      padrone_session__errmsg(s));
	ck_assert_uint_eq(checksum(), sum);
	end();
}
END_TEST

START_TEST(padrone_cc_create_insert_redirect)
{
	struct padrone_patch pt;
	uint64_t area, code;

	start();
	unsigned sum = checksum();
	FILE *f = fopen(tu_path("tests/codecache/repl/vecadd_avx2.bin"), "rb");
	ck_assert_ptr_nonnull(f);
	unsigned char blob[4096];
	size_t n = fread(blob, 1, sizeof blob, f);
	fclose(f);
	ck_assert_uint_gt(n, 16);
	/* the code cache near the program's code (vecadd is in it) */
	ck_assert_int_eq(padrone_cc_create(s, 0, &area), 0);
	ck_assert_uint_ne(area, 0);
	ck_assert_msg(padrone_cc_insert(s, blob, n, 0, &code) == 0, "%s",
		      padrone_session__errmsg(s));
	ck_assert_msg(padrone_cc_redirect(s, "vecadd", code, &pt) == 0, "%s",
		      padrone_session__errmsg(s));
	ck_assert_uint_eq(checksum(), sum);
	ck_assert_uint_eq(checksum(), sum);
	ck_assert_int_eq(padrone_session__restore(s, "vecadd", NULL, &pt), 0);
	ck_assert_uint_eq(checksum(), sum);
	end();
}
END_TEST

START_TEST(without_a_process_it_says_so)
{
	struct padrone_session *un = padrone_session__new(NULL);
	struct padrone_patch pt;

	ck_assert_int_lt(padrone_session__replace(un, "f", "x.o", NULL, &pt), 0);
	ck_assert_int_eq(padrone_session__why(un), PADRONE_NOT_ATTACHED);
	ck_assert_str_eq(padrone_session__errmsg(un), "not attached to a process");
	padrone_session__free(un);
}
END_TEST

/* Every list-returning call (padrone.h's Lists) hands the caller a list
 * that owns its strings: each is read after detach and the session's free
 * (ASan catches a string still borrowed from the session), then freed
 * (LeakSanitizer catches what its __free leaves). The target runs on
 * unharmed. */
static size_t touch(const char *str)
{
	ck_assert_ptr_nonnull(str);
	return strlen(str);
}

START_TEST(every_list_outlives_its_session_and_frees_clean)
{
	struct padrone_profile_opts po = { .sz = sizeof po, .seconds = 0.5 };
	struct padrone_thread_list *tl;
	struct padrone_module_list *ml;
	struct padrone_frame_list *fl;
	struct padrone_hot_loop_list *hl;
	struct padrone_replacement_list *rl;
	size_t chars = 0;

	start();
	pid_t target = p.pid;
	unsigned sum = checksum();
	ck_assert_msg(padrone_session__replace(s, "vecadd", tu_path("tests/codecache/repl/vecadd_avx2.o"),
					       NULL, NULL) == 0, "%s", padrone_session__errmsg(s));
	ck_assert_msg(padrone_session__profile(s, &po) == 0, "%s", padrone_session__errmsg(s));
	ck_assert_int_eq(padrone_session__threads(s, &tl), 0);
	ck_assert_int_eq(padrone_session__modules(s, &ml), 0);
	ck_assert_int_eq(padrone_session__backtrace(s, 0, &fl), 0);
	ck_assert_int_eq(padrone_session__hot_loops(s, 3, &hl), 0);
	ck_assert_int_eq(padrone_session__replacements(s, &rl), 0);
	ck_assert_int_eq(padrone_session__restore(s, "vecadd", NULL, NULL), 0);
	ck_assert_uint_eq(checksum(), sum);
	end();	/* detaches and frees the session, kills the target */

	ck_assert_uint_eq(tl->count, 1);
	ck_assert_int_eq(tl->items[0].tid, target);
	ck_assert_uint_ge(ml->count, 2);	/* cc_vecadd, libc... */
	for (size_t i = 0; i < ml->count; i++)
		chars += touch(ml->items[i].path) + touch(ml->items[i].build_id);
	ck_assert_uint_ge(fl->count, 1);
	for (size_t i = 0; i < fl->count; i++)
		chars += touch(fl->items[i].name) + touch(fl->items[i].module);
	chars += touch(fl->end.reason) + touch(fl->end.why);
	ck_assert_uint_ge(hl->count, 1);
	for (size_t i = 0; i < hl->count; i++)
		chars += touch(hl->items[i].function) + touch(hl->items[i].module);
	ck_assert_uint_eq(rl->count, 1);
	ck_assert_str_eq(rl->items[0].name, "vecadd");
	ck_assert_uint_gt(chars, 0);
	padrone_thread_list__free(tl);
	padrone_module_list__free(ml);
	padrone_frame_list__free(fl);
	padrone_hot_loop_list__free(hl);
	padrone_replacement_list__free(rl);
	padrone_thread_list__free(NULL);	/* as free(NULL) */
}
END_TEST

int main(void)
{
	tu_block_sigchld();
	Suite *su = suite_create("api");
	TCase *tc = tcase_create("api");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, replace_measure_restore);
	tcase_add_test(tc, padrone_cc_create_insert_redirect);
	tcase_add_test(tc, without_a_process_it_says_so);
	tcase_add_test(tc, every_list_outlives_its_session_and_frees_clean);
	suite_add_tcase(su, tc);
	return tu_main(su);
}
