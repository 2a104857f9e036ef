/* cfg/ through padrone: the cfg, loops, disas and hot -l commands and
 * padroned --cfg on a live target, which keeps running unharmed. */
#include "src/cmd.h"
#include "tests/lib/tu.h"

#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define WORK "200000"

struct out {
	char *text;
	size_t len;
	FILE *f;
};

/* Run one command line on ctl; its stdout and stderr (merged) in o. */
static int run(struct padrone_ctl *ctl, const char *line, struct out *o)
{
	free(o->text);
	o->text = NULL;
	o->f = open_memstream(&o->text, &o->len);
	int st = padrone_ctl_run_line(ctl, line, o->f, o->f);
	fclose(o->f);
	return st;
}

static void spawn_hotloop(struct tu_proc *p, pid_t *pid, unsigned long *hot)
{
	/* -d: it ends by itself even if a failed test cannot kill it */
	char *argv[] = { (char *)tu_path("tests/targets/hotloop"), "-w", WORK, "-s", "2000", "-d",
			 "120", NULL };
	char line[256];
	ck_assert_int_eq(tu_spawn(p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(p, "ready", line, sizeof(line), 10000), 0);
	int ipid;
	ck_assert_int_eq(sscanf(line, "ready %d hot_function %lx", &ipid, hot), 2);
	*pid = ipid;
}

/* Where the target's executable is mapped at file offset 0: its ELF
 * header, readable and not code (-z separate-code). */
static unsigned long elf_header_of(pid_t pid)
{
	char path[64], exe[PATH_MAX], line[PATH_MAX + 128];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	ck_assert_int_gt(n, 0);
	exe[n] = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	unsigned long start = 0, off;
	char perms[8], file[PATH_MAX];
	while (!start && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%*x %7s %lx %*s %*s %4095s", &start, perms, &off, file) != 4 ||
		    off != 0 || strcmp(file, exe) != 0 || strchr(perms, 'x'))
			start = 0;
	fclose(f);
	ck_assert_msg(start, "no non-executable mapping of %s at offset 0", exe);
	return start;
}

static struct json_object *key(struct json_object *o, const char *k)
{
	struct json_object *v = NULL;
	ck_assert_msg(json_object_object_get_ex(o, k, &v), "no key %s in %s", k,
		      json_object_to_json_string(o));
	return v;
}

static void is_hex(struct json_object *o)
{
	ck_assert_msg(json_object_is_type(o, json_type_string) &&
			      !strncmp(json_object_get_string(o), "0x", 2),
		      "not a hex string: %s", json_object_to_json_string(o));
}

static void hex_array(struct json_object *a)
{
	ck_assert(json_object_is_type(a, json_type_array));
	for (size_t i = 0; i < json_object_array_length(a); i++)
		is_hex(json_object_array_get_idx(a, i));
}

/* o has exactly the keys listed (NULL-terminated), no more. */
static void only_keys(struct json_object *o, const char *const *keys)
{
	size_t n = 0;
	for (; keys[n]; n++)
		key(o, keys[n]);
	ck_assert_msg((size_t)json_object_object_length(o) == n, "keys beyond the documented: %s",
		      json_object_to_json_string(o));
}

/* The shape documented in padroned(8) and the README, key by key. */
static void documented_cfg_shape(struct json_object *j)
{
	static const char *const top[] = { "entry", "name", "error", "ranges", "blocks", "edges",
					   "jump_tables", "calls", "loops", NULL };
	static const char *const blk[] = { "start", "end", "succs", NULL };
	static const char *const edg[] = { "from", "to", "kind", NULL };
	static const char *const jt[] = { "at", "targets", NULL };
	static const char *const cl[] = { "at", "target", "name", "noreturn", NULL };
	static const char *const lp[] = { "header", "entries", "blocks", "depth", "parent",
					  "irreducible", NULL };
	static const char *const er[] = { "at", "kind", "msg", NULL };
	static const char *const kinds = " fallthrough taken not_taken jump jump_table "
					 "call_return tail_call ";
	only_keys(j, top);
	is_hex(key(j, "entry"));
	ck_assert(json_object_is_type(key(j, "name"), json_type_string));
	struct json_object *v = key(j, "error");
	if (v) {
		only_keys(v, er);
		is_hex(key(v, "at"));
	}
	v = key(j, "ranges");
	ck_assert_uint_ge(json_object_array_length(v), 1);
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		struct json_object *r = json_object_array_get_idx(v, i);
		ck_assert_uint_eq(json_object_array_length(r), 2);
		hex_array(r);
	}
	v = key(j, "blocks");
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		struct json_object *b = json_object_array_get_idx(v, i);
		only_keys(b, blk);
		is_hex(key(b, "start"));
		is_hex(key(b, "end"));
		hex_array(key(b, "succs"));
	}
	v = key(j, "edges");
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		struct json_object *e = json_object_array_get_idx(v, i);
		only_keys(e, edg);
		is_hex(key(e, "from"));
		is_hex(key(e, "to"));
		char k[32];
		snprintf(k, sizeof(k), " %s ", json_object_get_string(key(e, "kind")));
		ck_assert_msg(strstr(kinds, k), "edge kind%s", k);
	}
	v = key(j, "jump_tables");
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		only_keys(json_object_array_get_idx(v, i), jt);
		is_hex(key(json_object_array_get_idx(v, i), "at"));
		hex_array(key(json_object_array_get_idx(v, i), "targets"));
	}
	v = key(j, "calls");
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		struct json_object *c = json_object_array_get_idx(v, i);
		only_keys(c, cl);
		is_hex(key(c, "at"));
		if (key(c, "target"))
			is_hex(key(c, "target"));
		ck_assert(json_object_is_type(key(c, "name"), json_type_string));
		ck_assert(json_object_is_type(key(c, "noreturn"), json_type_boolean));
	}
	v = key(j, "loops");
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		struct json_object *l = json_object_array_get_idx(v, i);
		only_keys(l, lp);
		is_hex(key(l, "header"));
		hex_array(key(l, "entries"));
		hex_array(key(l, "blocks"));
		ck_assert(json_object_is_type(key(l, "depth"), json_type_int));
		if (key(l, "parent"))
			is_hex(key(l, "parent"));
		ck_assert(json_object_is_type(key(l, "irreducible"), json_type_boolean));
	}
}

/* The target's next ticks still carry the checksums it would compute alone. */
static void still_right(struct tu_proc *p)
{
	char line[256], want[256];
	for (int i = 0; i < 3; i++) {
		ck_assert_int_gt(tu_wait_for(p, "tick", line, sizeof(line), 10000), 0);
		long tick;
		ck_assert_int_eq(sscanf(line, "tick %ld", &tick), 1);
		char *cmd;
		int st;
		ck_assert(asprintf(&cmd, "'%s' -w " WORK " -e %ld", tu_path("tests/targets/hotloop"),
				   tick) > 0);
		char *expect = tu_run(cmd, &st);
		free(cmd);
		ck_assert_ptr_nonnull(expect);
		snprintf(want, sizeof(want), "%s", expect);
		want[strcspn(want, "\n")] = 0;
		ck_assert_str_eq(line, want);
		free(expect);
	}
}

START_TEST(cfg_loops_disas_and_hot_loops_commands)
{
	struct tu_proc p;
	pid_t pid;
	unsigned long hot;
	spawn_hotloop(&p, &pid, &hot);
	struct padrone_ctl ctl;
	ck_assert_int_eq(padrone_ctl_init(&ctl, "padrone", false), 0);
	struct out o = { 0 };
	char line[64];
	snprintf(line, sizeof(line), "attach %d", (int)pid);
	ck_assert_int_eq(run(&ctl, line, &o), 0);

	ck_assert_int_eq(run(&ctl, "cfg hot_function", &o), 0);
	char head[128];
	snprintf(head, sizeof(head), "function hot_function at %#lx:", hot);
	ck_assert_msg(strstr(o.text, head), "%s", o.text);
	ck_assert_ptr_nonnull(strstr(o.text, "ret"));

	snprintf(line, sizeof(line), "cfg -j %#lx", hot + 8);	/* inside the function */
	ck_assert_int_eq(run(&ctl, line, &o), 0);
	struct json_object *j = json_tokener_parse(o.text), *v;
	ck_assert_msg(j, "not JSON: %s", o.text);
	ck_assert(json_object_object_get_ex(j, "entry", &v));
	char hex[32];
	snprintf(hex, sizeof(hex), "%#lx", hot);
	ck_assert_str_eq(json_object_get_string(v), hex);
	ck_assert(json_object_object_get_ex(j, "name", &v));
	ck_assert_str_eq(json_object_get_string(v), "hot_function");
	ck_assert(json_object_object_get_ex(j, "loops", &v));
	ck_assert_uint_ge(json_object_array_length(v), 1);
	json_object_put(j);

	ck_assert_int_eq(run(&ctl, "cfg -d hot_function", &o), 0);
	ck_assert_ptr_nonnull(strstr(o.text, "subgraph cluster_loop"));
	ck_assert_int_eq(run(&ctl, "loops hot_function", &o), 0);
	ck_assert_ptr_nonnull(strstr(o.text, "depth 1"));
	ck_assert_int_eq(run(&ctl, "disas hot_function", &o), 0);
	snprintf(head, sizeof(head), "\n%#lx:\n", hot);	/* the entry block */
	ck_assert_msg(strstr(o.text, head), "%s", o.text);
	ck_assert_ptr_nonnull(strstr(o.text, "xor"));

	/* hot -l: profiles first, then the hottest loop of the hottest function */
	ck_assert_int_eq(run(&ctl, "hot -l 3", &o), 0);
	ck_assert_msg(strstr(o.text, "hot_function") && strstr(o.text, "loop 0x"), "%s", o.text);
	char *hl = strstr(o.text, "hot_function");
	ck_assert_ptr_nonnull(strstr(hl, "depth 1"));
	ck_assert_int_eq(run(&ctl, "hot -jl 1", &o), 0);
	j = json_tokener_parse(o.text);
	ck_assert_msg(j && json_object_array_length(j) == 1, "%s", o.text);
	json_object_put(j);
	/* after a profile, the loop has samples */
	ck_assert_int_eq(run(&ctl, "loops hot_function", &o), 0);
	ck_assert_msg(strstr(o.text, " samples"), "%s", o.text);

	/* errors: named, with a status */
	ck_assert_int_ne(run(&ctl, "cfg no_such_function", &o), 0);
	ck_assert_msg(strstr(o.text, "no function named 'no_such_function'"), "%s", o.text);
	ck_assert_int_ne(run(&ctl, "cfg 0x10", &o), 0);
	ck_assert_msg(strstr(o.text, "no code at 0x10"), "%s", o.text);
	/* readable, but an ELF header: it would decode as a function */
	snprintf(line, sizeof(line), "cfg -j %#lx", elf_header_of(pid));
	ck_assert_int_eq(run(&ctl, line, &o), PADRONE_EXIT_USAGE);
	ck_assert_msg(strstr(o.text, "is not code") && !strchr(o.text, '{'), "%s", o.text);
	ck_assert_int_eq(run(&ctl, "cfg -dj hot_function", &o), PADRONE_EXIT_USAGE);
	ck_assert_int_eq(run(&ctl, "cfg", &o), PADRONE_EXIT_USAGE);
	ck_assert_ptr_nonnull(strstr(o.text, "usage: cfg [-dj] FUNC|ADDR"));

	ck_assert_int_eq(run(&ctl, "detach", &o), 0);
	padrone_ctl_fini(&ctl);
	free(o.text);
	still_right(&p);
	tu_kill(&p);
}
END_TEST

START_TEST(padroned_prints_one_cfg)
{
	struct tu_proc p;
	pid_t pid;
	unsigned long hot;
	spawn_hotloop(&p, &pid, &hot);
	char *cmd;
	int st;
	ck_assert(asprintf(&cmd, "'%s' --pid %d --cfg hot_function --json 2>&1",
			   tu_path("src/padroned"), (int)pid) > 0);
	char *out = tu_run(cmd, &st);
	free(cmd);
	ck_assert(out && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct json_object *j = json_tokener_parse(out), *v;
	ck_assert_msg(j, "not JSON: %s", out);
	documented_cfg_shape(j);
	ck_assert(json_object_object_get_ex(j, "blocks", &v));
	ck_assert_uint_ge(json_object_array_length(v), 2);
	ck_assert_ptr_null(key(j, "error"));	/* hot_function is whole */
	ck_assert_uint_ge(json_object_array_length(key(j, "loops")), 1);
	json_object_put(j);
	free(out);

	/* an address that is no code: refused, with a status, no JSON */
	unsigned long hdr = elf_header_of(pid);
	ck_assert(asprintf(&cmd, "'%s' --pid %d --cfg %#lx --json 2>&1", tu_path("src/padroned"),
			   (int)pid, hdr) > 0);
	out = tu_run(cmd, &st);
	free(cmd);
	ck_assert(out && WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), PADRONE_EXIT_USAGE);
	char want[128];
	snprintf(want, sizeof(want), "%#lx in process %d is not code", hdr, (int)pid);
	ck_assert_msg(strstr(out, want) && strstr(out, "r--p mapping of /"), "%s", out);
	ck_assert_msg(!strchr(out, '{'), "JSON printed: %s", out);
	free(out);

	ck_assert(asprintf(&cmd, "'%s' --pid %d --cfg %#lx --dot 2>&1", tu_path("src/padroned"),
			   (int)pid, hot) > 0);
	out = tu_run(cmd, &st);
	free(cmd);
	ck_assert(out && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_ptr_eq(strstr(out, "digraph"), out);
	free(out);

	ck_assert(asprintf(&cmd, "'%s' --pid %d --dot 2>&1", tu_path("src/padroned"), (int)pid) > 0);
	out = tu_run(cmd, &st);
	free(cmd);
	ck_assert_int_eq(WEXITSTATUS(st), PADRONE_EXIT_USAGE);
	ck_assert_msg(strstr(out, "--dot goes with --cfg"), "%s", out);
	free(out);
	still_right(&p);
	tu_kill(&p);
}
END_TEST

int main(void)
{
	tu_block_sigchld();
	Suite *s = suite_create("cfg_cmd");
	TCase *tc = tcase_create("cmd");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, cfg_loops_disas_and_hot_loops_commands);
	tcase_add_test(tc, padroned_prints_one_cfg);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
