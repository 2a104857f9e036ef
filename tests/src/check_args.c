/* The shared argument parser and line splitter of padrone's commands. */
#include "tests/lib/tu.h"

#include <errno.h>
#include <string.h>

#include "src/args.h"

static const struct padrone_opt opts[] = {
	{ 'b', "backend", "BACKEND" },
	{ 'f', "force", NULL },
	{ 'j', "json", NULL },
	{ 'l', "loops", NULL },
	{ 0 },
};

/* The parser keeps pointers into the words: they live until the next parse
 * (by then each test has freed the args made from them). */
static char **last_words;

/* Parse a line against opts and [lo, hi]. */
static int parse(const char *line, int lo, int hi, struct padrone_args **a, char *err, size_t n)
{
	padrone_free_words(last_words);
	int count = padrone_split_line(line, &last_words, err, n);
	ck_assert_int_ge(count, 0);
	return padrone_args_parse(opts, lo, hi, count, last_words, a, err, n);
}

START_TEST(switches_values_and_positionals_in_any_order)
{
	struct padrone_args *a;
	char err[128];

	ck_assert_int_eq(parse("2 -j --backend bpf 999", 0, 2, &a, err, sizeof(err)), 0);
	ck_assert(padrone_args_has(a, 'j'));
	ck_assert(!padrone_args_has(a, 'f'));
	ck_assert_str_eq(padrone_args_get(a, 'b'), "bpf");
	ck_assert_ptr_null(padrone_args_get(a, 'f'));
	ck_assert_int_eq(padrone_args_count(a), 2);
	ck_assert_str_eq(padrone_args_value(a, 0), "2");
	ck_assert_str_eq(padrone_args_value(a, 1), "999");
	ck_assert_ptr_null(padrone_args_value(a, 2));
	padrone_args_free(a);
}
END_TEST

START_TEST(value_forms_attached_detached_equals_and_combined)
{
	struct padrone_args *a;
	char err[128];
	const char *forms[] = { "-bbpf", "-b bpf", "--backend=bpf", "--backend bpf", "--back bpf",
				"-jfbbpf", "-jf -b ring -b bpf" };

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		ck_assert_msg(parse(forms[i], 0, 0, &a, err, sizeof(err)) == 0, "%s: %s", forms[i], err);
		ck_assert_str_eq(padrone_args_get(a, 'b'), "bpf");
		padrone_args_free(a);
	}
	ck_assert_int_eq(parse("-jfl", 0, 0, &a, err, sizeof(err)), 0);
	ck_assert(padrone_args_has(a, 'j') && padrone_args_has(a, 'f') && padrone_args_has(a, 'l'));
	padrone_args_free(a);
}
END_TEST

START_TEST(errors_name_the_problem)
{
	struct padrone_args *a;
	char err[128];

	ck_assert_int_eq(parse("-z", 0, 0, &a, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "unknown option: -z");
	ck_assert_ptr_null(a);
	ck_assert_int_eq(parse("--zap", 0, 0, &a, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "unknown option: --zap");
	ck_assert_int_eq(parse("-b", 0, 0, &a, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "option -b needs a value (BACKEND)");
	ck_assert_int_eq(parse("--backend", 0, 0, &a, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "option --backend needs a value (BACKEND)");
	ck_assert_int_eq(parse("--json=yes", 0, 0, &a, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "option --json takes no value");
	ck_assert_int_eq(parse("1 2 3", 0, 2, &a, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "too many arguments");
	ck_assert_int_eq(parse("-j", 1, 1, &a, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "too few arguments");
}
END_TEST

START_TEST(long_prefixes_must_be_unique)
{
	static const struct padrone_opt two[] = {
		{ 'd', "dot", NULL }, { 'D', "dominators", NULL }, { 0 },
	};
	struct padrone_args *a;
	char err[128];
	char *amb[] = { "--do" }, *ok[] = { "--dom" }, *exact[] = { "--dot" };

	ck_assert_int_eq(padrone_args_parse(two, 0, 0, 1, amb, &a, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "ambiguous option: --do");
	ck_assert_int_eq(padrone_args_parse(two, 0, 0, 1, ok, &a, err, sizeof(err)), 0);
	ck_assert(padrone_args_has(a, 'D') && !padrone_args_has(a, 'd'));
	padrone_args_free(a);
	ck_assert_int_eq(padrone_args_parse(two, 0, 0, 1, exact, &a, err, sizeof(err)), 0);
	ck_assert(padrone_args_has(a, 'd'));
	padrone_args_free(a);
}
END_TEST

START_TEST(double_dash_and_negative_numbers_are_positional)
{
	struct padrone_args *a;
	char err[128];

	ck_assert_int_eq(parse("-- -j -5", 0, 2, &a, err, sizeof(err)), 0);
	ck_assert(!padrone_args_has(a, 'j'));
	ck_assert_str_eq(padrone_args_value(a, 0), "-j");
	padrone_args_free(a);
	ck_assert_int_eq(parse("-5 -", 0, 2, &a, err, sizeof(err)), 0);
	ck_assert_str_eq(padrone_args_value(a, 0), "-5");
	ck_assert_str_eq(padrone_args_value(a, 1), "-");
	padrone_args_free(a);
}
END_TEST

START_TEST(numbers_in_range_or_a_clear_message)
{
	unsigned long v;
	double d;
	char err[128];

	ck_assert_int_eq(padrone_parse_ulong("HZ", "999", 1, 10000, &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 999);
	ck_assert_int_eq(padrone_parse_ulong("ADDR", "0x401000", 0, ~0ul, &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 0x401000);
	ck_assert_int_eq(padrone_parse_ulong("PID", "010", 1, 100, &v, err, sizeof(err)), 0);
	ck_assert_uint_eq(v, 10);	/* never octal */
	const char *bad[] = { "", "x", "12x", "-1", "+1", "0", "10001", "99999999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(padrone_parse_ulong("HZ", bad[i], 1, 10000, &v, err, sizeof(err)) == -EINVAL,
			      "'%s' accepted", bad[i]);
	padrone_parse_ulong("HZ", "abc", 1, 10000, &v, err, sizeof(err));
	ck_assert_str_eq(err, "HZ must be an integer from 1 to 10000, not 'abc'");
	ck_assert_int_eq(padrone_parse_double("SECONDS", "0.5", 0.01, 60, &d, err, sizeof(err)), 0);
	ck_assert(d == 0.5);
	ck_assert_int_eq(padrone_parse_double("SECONDS", "nan", 0.01, 60, &d, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(padrone_parse_double("SECONDS", "61", 0.01, 60, &d, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "SECONDS must be a number from 0.01 to 60, not '61'");
}
END_TEST

static void check_split(const char *line, const char *const *expect)
{
	char **w;
	char err[64];
	int n = padrone_split_line(line, &w, err, sizeof(err));
	int i;

	ck_assert_msg(n >= 0, "%s: %s", line, err);
	for (i = 0; expect[i]; i++) {
		ck_assert_msg(i < n, "%s: only %d words", line, n);
		ck_assert_str_eq(w[i], expect[i]);
	}
	ck_assert_int_eq(n, i);
	ck_assert_ptr_null(w[n]);
	padrone_free_words(w);
}

START_TEST(lines_split_like_a_shell)
{
	check_split("", (const char *[]){ NULL });
	check_split("   # only a comment", (const char *[]){ NULL });
	check_split("  hot  5 ", (const char *[]){ "hot", "5", NULL });
	check_split("replace f '/tmp/a b.so':fast", (const char *[]){ "replace", "f", "/tmp/a b.so:fast", NULL });
	check_split("x \"say \\\"hi\\\"\" a\\ b ''", (const char *[]){ "x", "say \"hi\"", "a b", "", NULL });
	check_split("profile 1; hot 3", (const char *[]){ "profile", "1", ";", "hot", "3", NULL });
	check_split("a ; b;c", (const char *[]){ "a", ";", "b", ";", "c", NULL });
	check_split("a ';' b # not this", (const char *[]){ "a", ";", "b", NULL });
	check_split("a b#c", (const char *[]){ "a", "b#c", NULL });
}
END_TEST

START_TEST(an_open_quote_is_an_error)
{
	char **w;
	char err[64];

	ck_assert_int_eq(padrone_split_line("attach '12", &w, err, sizeof(err)), -EINVAL);
	ck_assert_str_eq(err, "unterminated ' quote");
	ck_assert_ptr_null(w);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("args");
	TCase *tc = tcase_create("args");
	tcase_add_test(tc, switches_values_and_positionals_in_any_order);
	tcase_add_test(tc, value_forms_attached_detached_equals_and_combined);
	tcase_add_test(tc, errors_name_the_problem);
	tcase_add_test(tc, long_prefixes_must_be_unique);
	tcase_add_test(tc, double_dash_and_negative_numbers_are_positional);
	tcase_add_test(tc, numbers_in_range_or_a_clear_message);
	tcase_add_test(tc, lines_split_like_a_shell);
	tcase_add_test(tc, an_open_quote_is_an_error);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
