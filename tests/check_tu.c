/* The test toolkit itself: spawning, line reading, timeouts, reaping. */
#include "tests/lib/tu.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

START_TEST(spawn_reads_lines_in_order)
{
	struct tu_proc p;
	char *argv[] = { "/bin/sh", "-c", "echo one; echo two; echo three", NULL };
	char line[64];

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_eq(tu_read_line(&p, line, sizeof line, 5000), 3);
	ck_assert_str_eq(line, "one");
	ck_assert_int_eq(tu_wait_for(&p, "thr", line, sizeof line, 5000), 5);
	ck_assert_str_eq(line, "three");
	ck_assert_int_eq(tu_read_line(&p, line, sizeof line, 5000), -EPIPE);
	int st = tu_wait(&p, 5000);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	tu_kill(&p);
}
END_TEST

START_TEST(read_times_out_on_a_silent_process)
{
	struct tu_proc p;
	char *argv[] = { "/bin/sleep", "30", NULL };
	char line[64];

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_eq(tu_read_line(&p, line, sizeof line, 100), -ETIMEDOUT);
	ck_assert_int_eq(tu_wait(&p, 50), -ETIMEDOUT);
	pid_t pid = p.pid;
	tu_kill(&p);
	ck_assert_int_eq(kill(pid, 0), -1);
	ck_assert_int_eq(errno, ESRCH);
}
END_TEST

START_TEST(run_captures_output_and_status)
{
	int st;
	char *out = tu_run("printf 'a b'; exit 3", &st);

	ck_assert_ptr_nonnull(out);
	ck_assert_str_eq(out, "a b");
	ck_assert_int_eq(WEXITSTATUS(st), 3);
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tu");
	TCase *tc = tcase_create("tu");
	tcase_add_test(tc, spawn_reads_lines_in_order);
	tcase_add_test(tc, read_times_out_on_a_silent_process);
	tcase_add_test(tc, run_captures_output_and_status);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
