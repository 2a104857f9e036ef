/* The report: ranking, and its JSON and text forms. */
#include "tests/lib/tu.h"

#include <json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/report.h"

/* The totals of a profile of process pid. */
static struct prof_totals totals(uint64_t samples, uint64_t lost, double seconds)
{
	struct prof_totals t = { .samples = samples, .lost = lost, .freq_hz = 999,
				 .duration_ns = (uint64_t)(seconds * 1e9), .kernel = true };
	snprintf(t.event, sizeof t.event, "cpu-clock");
	return t;
}

static void add(struct prof_hot *h, const char *name, const char *module, uint64_t start,
		uint64_t end, uint64_t self, uint64_t inclusive, enum prof_bounds bounds)
{
	struct prof_sym s = { .name = name, .module = module, .build_id = "", .start = start,
			      .end = end, .bounds = bounds };
	ck_assert_int_eq(prof_hot__add(h, &s, self, inclusive), 0);
}

/* A report of a ranking made by hand, in the order given, then ranked. */
static struct padrone_report *sample_report(uint64_t throttled)
{
	struct prof_totals t = totals(2000, 3, 2.0015);
	struct prof_hot *h;

	t.throttled = throttled;
	t.kernel_samples = 25;
	ck_assert_int_eq(prof_hot__new(&t, &h), 0);
	add(h, "main", "/opt/x/hotloop", 0x555555555040, 0x5555555550a0, 10, 1990,
	    PROF_BOUNDS_SYMTAB);
	add(h, "sub_401000", "/opt/x/stripped", 0x401000, 0x401080, 15, 15, PROF_BOUNDS_EH_FRAME);
	add(h, "spin", "/opt/x/hotloop", 0x555555555180, 0x5555555551c0, 1975, 1975,
	    PROF_BOUNDS_SYMTAB);
	add(h, "memcpy", "/usr/lib/libc.so.6", 0x7ffff7e00000, 0x7ffff7e00100, 10, 12,
	    PROF_BOUNDS_DYNSYM);
	ck_assert_int_eq(prof_hot__rank(h), 0);
	struct padrone_report *r = padrone_report_new(4242, &t, h);
	ck_assert_ptr_nonnull(r);
	padrone_report_set_kernel(r, false, 1500000000, 500000000);
	return r;
}

START_TEST(hottest_self_first_then_inclusive)
{
	struct padrone_report *r = sample_report(0);
	const char *order[] = { "spin", "sub_401000", "main", "memcpy" };

	ck_assert_uint_eq(padrone_report__count(r), 4);
	for (size_t i = 0; i < 4; i++)
		ck_assert_str_eq(padrone_report__function(r, i)->name, order[i]);
	ck_assert_ptr_null(padrone_report__function(r, 4));
	const struct padrone_function *f = padrone_report__function(r, 0);
	ck_assert(f->self_pct > 98.74 && f->self_pct < 98.76);
	ck_assert_int_eq(padrone_report__pid(r), 4242);
	ck_assert_uint_eq(padrone_report__samples(r), 2000);
	ck_assert_uint_eq(padrone_report__lost(r), 3);
	ck_assert_str_eq(padrone_report__backend(r), "ring");
	ck_assert_str_eq(padrone_report__fallback(r), "");
	padrone_report_free(r);
}
END_TEST

static const char *str(struct json_object *o, const char *key)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(o, key, &v), "no key %s", key);
	ck_assert_msg(json_object_is_type(v, json_type_string), "%s not a string", key);
	return json_object_get_string(v);
}

static int64_t num(struct json_object *o, const char *key)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(o, key, &v), "no key %s", key);
	ck_assert_msg(json_object_is_type(v, json_type_int), "%s not an integer", key);
	return json_object_get_int64(v);
}

START_TEST(json_has_the_documented_shape)
{
	struct padrone_report *r = sample_report(0);
	char *text = padrone_report__json(r, 0);
	struct json_object *o = json_tokener_parse(text);
	struct json_object *v, *fns;

	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(num(o, "pid"), 4242);
	ck_assert_str_eq(str(o, "event"), "cpu-clock");
	ck_assert_int_eq(num(o, "frequency_hz"), 999);
	ck_assert(json_object_object_get_ex(o, "duration_s", &v) && json_object_is_type(v, json_type_double));
	ck_assert(json_object_get_double(v) > 2.0 && json_object_get_double(v) < 2.01);
	ck_assert_int_eq(num(o, "samples"), 2000);
	ck_assert_int_eq(num(o, "lost"), 3);
	ck_assert_int_eq(num(o, "throttled"), 0);
	ck_assert(json_object_object_get_ex(o, "functions", &fns));
	ck_assert_int_eq(json_object_array_length(fns), 4);
	/* kernel or not: the share of the samples and of the CPU time */
	ck_assert(json_object_object_get_ex(o, "user_only", &v) && !json_object_get_boolean(v));
	ck_assert_int_eq(num(o, "kernel_samples"), 25);
	ck_assert(json_object_object_get_ex(o, "cpu_user_s", &v) && json_object_get_double(v) == 1.5);
	ck_assert(json_object_object_get_ex(o, "cpu_system_s", &v) && json_object_get_double(v) == 0.5);
	/* how it was sampled, and whether the process went away meanwhile */
	ck_assert_str_eq(str(o, "backend"), "ring");
	ck_assert_str_eq(str(o, "sampling"), "");
	ck_assert(json_object_object_get_ex(o, "ended", &v) && v == NULL);
	ck_assert_int_eq(json_object_object_length(o), 15);

	struct json_object *f = json_object_array_get_idx(fns, 0);
	ck_assert_int_eq(json_object_object_length(f), 8);
	ck_assert_str_eq(str(f, "name"), "spin");
	ck_assert_str_eq(str(f, "module"), "/opt/x/hotloop");	/* no "\/" escapes */
	ck_assert_str_eq(str(f, "start"), "0x555555555180");
	ck_assert_str_eq(str(f, "end"), "0x5555555551c0");
	ck_assert_int_eq(num(f, "self"), 1975);
	ck_assert_int_eq(num(f, "inclusive"), 1975);
	ck_assert_str_eq(str(f, "bounds"), "symtab");
	ck_assert(json_object_object_get_ex(f, "self_pct", &v));
	ck_assert(json_object_get_double(v) == 98.75);
	ck_assert_ptr_nonnull(strstr(text, "\"self_pct\":98.75,"));
	ck_assert_str_eq(str(json_object_array_get_idx(fns, 1), "bounds"), "eh_frame");
	json_object_put(o);
	free(text);

	text = padrone_report__json(r, 1);	/* at most one function */
	o = json_tokener_parse(text);
	ck_assert(json_object_object_get_ex(o, "functions", &fns));
	ck_assert_int_eq(json_object_array_length(fns), 1);
	json_object_put(o);
	free(text);
	padrone_report_free(r);
}
END_TEST

START_TEST(text_is_a_perf_like_table)
{
	struct padrone_report *r = sample_report(0);
	char *text = padrone_report__text(r, 2);

	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_nonnull(strstr(text, "# pid 4242: 2000 samples of cpu-clock at 999 Hz in 2.00 s, 3 lost\n"));
	ck_assert_ptr_nonnull(strstr(text, "Overhead"));
	char *spin = strstr(text, "98.75%");
	ck_assert_ptr_nonnull(spin);
	ck_assert_ptr_nonnull(strstr(spin, "spin"));
	ck_assert_ptr_nonnull(strstr(spin, "hotloop"));	/* module shown by base name */
	ck_assert_ptr_null(strstr(text, "/opt/x/"));
	ck_assert_ptr_nonnull(strstr(text, "sub_401000"));
	ck_assert_ptr_null(strstr(text, "main"));
	ck_assert_ptr_nonnull(strstr(text, "# ... 2 more functions\n"));
	free(text);
	padrone_report_free(r);
	r = sample_report(5);
	text = padrone_report__text(r, 2);
	ck_assert_msg(strstr(text, "3 lost, throttled 5 times (the kernel lowered the rate)\n"), "%s", text);
	ck_assert_msg(strstr(text, "\n# kernel: 1.2% of the samples; CPU time 1.50 s user, 0.50 s system "
				   "(25.0% in the kernel)\n"), "%s", text);
	free(text);
	padrone_report_free(r);
}
END_TEST

START_TEST(an_empty_profile_is_still_a_report)
{
	struct prof_totals t = totals(0, 0, 1.0);

	t.fell_back = true;
	snprintf(t.fallback_reason, sizeof t.fallback_reason, "BPF is not available here");
	struct padrone_report *r = padrone_report_new(1, &t, NULL);
	char *json = padrone_report__json(r, 0);

	ck_assert_ptr_nonnull(strstr(json, "\"functions\":[]"));
	ck_assert_str_eq(padrone_report__backend(r), "ring");
	ck_assert_str_eq(padrone_report__fallback(r), "BPF is not available here");
	free(json);
	char *text = padrone_report__text(r, 20);	/* says why the table is empty */
	ck_assert_ptr_nonnull(strstr(text, "# no samples: no thread of process 1 ran on a CPU"));
	free(text);
	padrone_report_free(r);
}
END_TEST

/* The issue-14 case: a process busy in threads of ~20 us, sampled per
 * thread, got 3 samples for 3 s of CPU and was told no thread ran. It is
 * told that its threads are too short for per-thread events; the "no
 * thread ran" note stays for a process that used no CPU. */
START_TEST(few_samples_are_explained_by_how_threads_were_sampled)
{
	struct prof_totals t = totals(3, 0, 3.0);

	t.ring_mode = PROF_RING_PER_THREAD;
	snprintf(t.ring_mode_reason, sizeof t.ring_mode_reason,
		 "perf_event_open on CPU 0: Permission denied");
	struct padrone_report *r = padrone_report_new(9, &t, NULL);
	padrone_report_set_kernel(r, false, 1000000000ull, 2000000000ull);
	char *text = padrone_report__text(r, 20);
	ck_assert_msg(strstr(text, "# sampled per thread (ring backend): threads that live less "
			     "than a sampling period are missed; perf_event_open on CPU 0: "
			     "Permission denied\n"), "%s", text);
	ck_assert_msg(strstr(text, "# only 3 samples for ~3.00 s of CPU time (~2997 at 999 Hz): "
			     "threads that live less than a sampling period are not seen by "
			     "per-thread events"), "%s", text);
	ck_assert_msg(!strstr(text, "no thread of process"), "%s", text);
	free(text);
	char *json = padrone_report__json(r, 0);
	ck_assert_msg(strstr(json, "\"backend\":\"ring\",\"sampling\":\"per-thread\","
			     "\"ended\":null"), "%s", json);
	free(json);
	padrone_report_free(r);

	t = totals(0, 0, 3.0);
	t.ring_mode = PROF_RING_PER_CPU;
	r = padrone_report_new(9, &t, NULL);
	padrone_report_set_kernel(r, false, 0, 0);
	padrone_report_set_ended(r, PADRONE_TARGET_EXITED);
	text = padrone_report__text(r, 20);
	ck_assert_msg(strstr(text, "# sampled per CPU (ring backend): every thread, however "
			     "short-lived\n"), "%s", text);
	ck_assert_msg(strstr(text, "# no samples: no thread of process 9 ran on a CPU"), "%s", text);
	ck_assert_msg(strstr(text, "# process 9 exited during the profile: this is what was "
			     "sampled until then\n"), "%s", text);
	free(text);
	json = padrone_report__json(r, 0);
	ck_assert_msg(strstr(json, "\"ended\":\"target-exited\""), "%s", json);
	free(json);
	padrone_report_free(r);
}
END_TEST

START_TEST(text_shows_cxx_names_as_source_spells_them)
{
	struct prof_totals t = totals(10, 0, 1.0);
	struct prof_hot *h;
	char buf[256];

	ck_assert_int_eq(prof_hot__new(&t, &h), 0);
	add(h, "_ZN4node5StartEiPPc", "/usr/bin/node", 0x1000, 0x1100, 9, 9, PROF_BOUNDS_SYMTAB);
	add(h, "_ZdlPv@plt", "/usr/bin/node", 0x2000, 0x2010, 1, 1, PROF_BOUNDS_DYNSYM);
	ck_assert_int_eq(prof_hot__rank(h), 0);
	struct padrone_report *r = padrone_report_new(7, &t, h);
	char *text = padrone_report__text(r, 0), *json = padrone_report__json(r, 0);
	ck_assert_msg(strstr(text, "node::Start(int, char**)"), "%s", text);
	ck_assert_msg(strstr(text, "operator delete(void*)@plt"), "%s", text);
	ck_assert_msg(strstr(json, "\"_ZN4node5StartEiPPc\""), "%s", json);	/* JSON: the symbol */
	ck_assert_str_eq(padrone_demangle("main", buf, sizeof buf), "main");
	ck_assert_str_eq(padrone_demangle("_Znot-a-name", buf, sizeof buf), "_Znot-a-name");
	ck_assert_str_eq(padrone_demangle("_ZN1a1bEv.cold", buf, sizeof buf), "a::b() [clone .cold]");
	free(text);
	free(json);
	padrone_report_free(r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("report");
	TCase *tc = tcase_create("report");
	tcase_add_test(tc, hottest_self_first_then_inclusive);
	tcase_add_test(tc, json_has_the_documented_shape);
	tcase_add_test(tc, text_is_a_perf_like_table);
	tcase_add_test(tc, an_empty_profile_is_still_a_report);
	tcase_add_test(tc, few_samples_are_explained_by_how_threads_were_sampled);
	tcase_add_test(tc, text_shows_cxx_names_as_source_spells_them);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
