/* check_csim_rep: padrone-sim --rep — a saved REP file gives the counts of
 * the same references read as a lackey trace, and of the simulator fed
 * directly; block and edge counts come from the recovery; bad data is named
 * by its offset while everything before it is still reported, and the
 * units lost (spoiled, corrupt) are counted. */
#include "tests/lib/tu.h"

#include "pipeline/pipeline.h"
#include "pipeline/rep.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ITERS 6000
#define GEOM "--cachegrind --I1=1024,2,64 --D1=2048,2,64 --LL=16384,4,64"

static char dir[64], path[128];

/* Block 1 (a loop body over an array, slots: rbx, rcx, rsp):
 *	401000  mov (%rbx,%rcx,8),%rax   read 8 at rbx + rcx*8
 *	401004  add %rax,8(%rbx,%rcx,8)  modify 8 at rbx + rcx*8 + 8
 *	401009  push %rax                write 8 at rsp - 8
 *	40100a  jmp ...
 * Block 2 (slots: rdx, rsi, rdi, rcx), its first instruction crossing a
 * line:
 *	40203c  mov 0x3c(%rdx),%r8       read 8 at rdx + 0x3c (crosses a line)
 *	402043  rep movsq                rcx times: read (rsi), write (rdi)
 */
static const struct rep_instr b1_ins[] = {
	{ 0x401000, 4, 0 }, { 0x401004, 5, 0 }, { 0x401009, 1, 0 }, { 0x40100a, 2, 0 },
};
static const struct rep_mref b1_refs[] = {
	{ .pc = 0x401000, .disp = 0, .size = 8, .type = REP_REF_READ, .scale = 8, .base = 0,
	  .index = 1, .seg = REP_NO_SLOT, .count = REP_NO_SLOT },
	{ .pc = 0x401004, .disp = 8, .size = 8, .type = REP_REF_MODIFY, .scale = 8, .base = 0,
	  .index = 1, .seg = REP_NO_SLOT, .count = REP_NO_SLOT },
	{ .pc = 0x401009, .disp = -8, .size = 8, .type = REP_REF_WRITE, .scale = 1, .base = 2,
	  .index = REP_NO_SLOT, .seg = REP_NO_SLOT, .count = REP_NO_SLOT },
};
static const struct rep_instr b2_ins[] = { { 0x40203c, 7, 0 }, { 0x402043, 3, 0 } };
static const struct rep_mref b2_refs[] = {
	{ .pc = 0x40203c, .disp = 0x3c, .size = 8, .type = REP_REF_READ, .scale = 1, .base = 0,
	  .index = REP_NO_SLOT, .seg = REP_NO_SLOT, .count = REP_NO_SLOT },
	{ .pc = 0x402043, .disp = 0, .size = 8, .type = REP_REF_READ, .scale = 1, .base = 1,
	  .index = REP_NO_SLOT, .seg = REP_NO_SLOT, .count = 3 },
	{ .pc = 0x402043, .disp = 0, .size = 8, .type = REP_REF_WRITE, .scale = 1, .base = 2,
	  .index = REP_NO_SLOT, .seg = REP_NO_SLOT, .count = 3 },
};

static struct rep_table *table(void)
{
	struct rep_table *t;
	struct rep_block b1 = { .id = 1, .nslots = 3, .pc = 0x401000, .ninstrs = 4, .nrefs = 3,
				.instrs = b1_ins, .refs = b1_refs };
	struct rep_block b2 = { .id = 2, .nslots = 4, .pc = 0x40203c, .ninstrs = 2, .nrefs = 3,
				.instrs = b2_ins, .refs = b2_refs };
	ck_assert_int_eq(rep_table__new(&t), 0);
	ck_assert_msg(rep_table__add(t, &b1) == 0, "%s", rep_errmsg());
	ck_assert_msg(rep_table__add(t, &b2) == 0, "%s", rep_errmsg());
	return t;
}

/* The units of ITERS loop iterations, block 2 every 16th; *cut: the word
 * after the first 1000 iterations. */
static uint64_t *stream(size_t *n, size_t *cut)
{
	uint64_t *w = malloc((ITERS * 4 + ITERS / 16 * 5 + 8) * sizeof(*w));
	size_t k = 0;
	for (uint64_t i = 0; i < ITERS; i++) {
		w[k++] = REP_S_WORD(1, 3);
		w[k++] = 0x600000;		/* rbx */
		w[k++] = (i * 17) % 700;	/* rcx */
		w[k++] = 0x7ff000 - 8 * (i % 4);	/* rsp */
		if (i % 16 == 15) {
			w[k++] = REP_S_WORD(2, 4);
			w[k++] = 0x700000 + i * 72;	/* rdx */
			w[k++] = 0x800000 + i * 40;	/* rsi */
			w[k++] = 0x900000 + i * 24;	/* rdi */
			w[k++] = i % 9;			/* rcx: rep count */
		}
		if (i == 999)
			*cut = k;
	}
	*n = k;
	return w;
}

static void write_rep(const char *file)
{
	struct rep_table *t = table();
	struct rep_writer *wr;
	size_t n, cut = 0;
	uint64_t *w = stream(&n, &cut);
	ck_assert_msg(rep_writer__open(file, t, &wr) == 0, "%s", rep_errmsg());
	/* Two sections (two threads), cut at a unit boundary. */
	ck_assert_int_eq(rep_writer__stream(wr, 1, w, cut), 0);
	ck_assert_int_eq(rep_writer__stream(wr, 2, w + cut, n - cut), 0);
	ck_assert_int_eq(rep_writer__close(wr), 0);
	free(w);
	rep_table__free(t);
}

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/check_csim_rep.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/prog.rep", dir);
	write_rep(path);
}

static void teardown(void)
{
	char cmd[160];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static char *sim(const char *args, int *status)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "%s %s 2>%s/err", tu_path("padrone-sim"), args, dir);
	char *out = tu_run(cmd, status);
	ck_assert_ptr_nonnull(out);
	return out;
}

static char *err_text(void)
{
	char cmd[160];
	int st;
	snprintf(cmd, sizeof cmd, "cat %s/err", dir);
	return tu_run(cmd, &st);
}

static uint64_t jget(struct json_object *o, const char *a, const char *b)
{
	struct json_object *x, *y;
	ck_assert(json_object_object_get_ex(o, a, &x));
	ck_assert(json_object_object_get_ex(x, b, &y));
	return json_object_get_uint64(y);
}

struct refs {
	struct rep_ref *v;
	size_t n;
};

static void collect(void *arg, const struct rep_ref *r, size_t n)
{
	struct refs *c = arg;
	c->v = realloc(c->v, (c->n + n) * sizeof(*r));
	memcpy(c->v + c->n, r, n * sizeof(*r));
	c->n += n;
}

START_TEST(rep_equals_its_lackey_rendering_and_the_simulator)
{
	char args[512];
	int st;

	snprintf(args, sizeof args, "--rep %s " GEOM " --workers 2 --json --top 0", path);
	char *j1 = sim(args, &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, err_text());
	snprintf(args, sizeof args, "--rep %s -a memtrace --trace-out %s/trace", path, dir);
	free(sim(args, &st));
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	snprintf(args, sizeof args, "--lackey %s/trace " GEOM " --workers 2 --json --top 0", dir);
	char *j2 = sim(args, &st);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	/* The same but for the REP file's recovery, which a trace has none of,
	 * and the workers' balance: a REP file's fetches that hit their line
	 * never reach them one by one (only counts do). */
	struct json_object *rep_j = json_tokener_parse(j1), *lk_j = json_tokener_parse(j2);
	ck_assert(rep_j && lk_j);
	ck_assert_uint_eq(jget(rep_j, "recovery", "units"), ITERS + ITERS / 16);
	ck_assert_uint_eq(jget(rep_j, "recovery", "lost_units"), 0);
	ck_assert(!json_object_object_get_ex(lk_j, "recovery", NULL));
	json_object_object_del(rep_j, "recovery");
	json_object_object_del(rep_j, "imbalance");
	json_object_object_del(lk_j, "imbalance");
	ck_assert_str_eq(json_object_to_json_string_ext(rep_j, JSON_C_TO_STRING_PLAIN),
			 json_object_to_json_string_ext(lk_j, JSON_C_TO_STRING_PLAIN));
	json_object_put(rep_j);
	json_object_put(lk_j);

	/* And the simulator fed the recovered references directly. */
	struct refs got = { 0 };
	struct rep_reader *rd;
	struct rep_recover *rec;
	ck_assert_int_eq(rep_reader__open(path, &rd), 0);
	ck_assert_int_eq(rep_recover__new(rep_reader__table(rd), collect, &got, &rec), 0);
	ck_assert_int_eq(rep_reader__replay(rd, rec), 0);
	rep_recover__flush(rec);
	struct csim_config cfg = { .cachegrind = true };
	cfg.level[CSIM_I1] = (struct csim_geom){ 1024, 2, 64 };
	cfg.level[CSIM_D1] = (struct csim_geom){ 2048, 2, 64 };
	cfg.level[CSIM_LL] = (struct csim_geom){ 16384, 4, 64 };
	struct csim *s;
	ck_assert_int_eq(csim__new(&cfg, &s), 0);
	ck_assert_int_eq(csim__refs(s, got.v, got.n), 0);
	const struct csim_counts *t = csim_result__totals(csim__result(s));
	struct json_object *j = json_tokener_parse(j1);
	ck_assert_ptr_nonnull(j);
	ck_assert_uint_eq(jget(j, "refs", "instr"), t->instr);
	ck_assert_uint_eq(jget(j, "refs", "reads"), t->reads);
	ck_assert_uint_eq(jget(j, "refs", "modifies"), ITERS);
	ck_assert_uint_eq(jget(j, "I1", "misses"), t->miss[CSIM_I1][CSIM_INSTR]);
	ck_assert_uint_eq(jget(j, "D1", "read_misses"), t->miss[CSIM_D1][CSIM_READ]);
	ck_assert_uint_eq(jget(j, "D1", "write_misses"), t->miss[CSIM_D1][CSIM_WRITE]);
	ck_assert_uint_eq(jget(j, "LL", "read_misses"), t->miss[CSIM_LL][CSIM_READ]);
	ck_assert_uint_eq(jget(j, "LL", "write_misses"), t->miss[CSIM_LL][CSIM_WRITE]);
	ck_assert_uint_gt(t->miss[CSIM_D1][CSIM_READ], 100);	/* the stream does miss */
	json_object_put(j);
	csim__free(s);
	rep_recover__free(rec);
	rep_reader__close(rd);
	free(got.v);
	free(j1);
	free(j2);
}
END_TEST

START_TEST(rep_block_and_edge_counts_come_from_the_recovery)
{
	char args[512];
	int st;
	snprintf(args, sizeof args, "--rep %s " GEOM " -a cache -a blocks -a edges --json", path);
	char *out = sim(args, &st);
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	struct json_object *j = json_tokener_parse(out), *pb, *e0, *v;
	ck_assert_ptr_nonnull(j);
	ck_assert_uint_eq(jget(j, "blocks", "distinct"), 2);
	ck_assert_uint_eq(jget(j, "blocks", "executions"), ITERS + ITERS / 16);
	/* 1->1 except around each block 2, 1->2 and 2->1, ITERS/16 times
	 * each; the section boundary (thread 1 | thread 2) is no edge. */
	ck_assert_uint_eq(jget(j, "edges", "distinct"), 3);
	ck_assert_uint_eq(jget(j, "edges", "traversals"), ITERS + ITERS / 16 - 2);
	/* per block: the table's ranges. */
	ck_assert(json_object_object_get_ex(j, "per_block", &pb));
	ck_assert_uint_eq(json_object_array_length(pb), 2);
	for (int i = 0; i < 2; i++) {
		e0 = json_object_array_get_idx(pb, i);
		ck_assert(json_object_object_get_ex(e0, "pc", &v));
		const char *pc = json_object_get_string(v);
		ck_assert(json_object_object_get_ex(e0, "end", &v));
		ck_assert_str_eq(json_object_get_string(v), !strcmp(pc, "0x401000") ? "0x40100c"
										  : "0x402046");
		ck_assert(json_object_object_get_ex(e0, "executions", &v));
		ck_assert_uint_eq(json_object_get_uint64(v),
				  !strcmp(pc, "0x401000") ? ITERS : ITERS / 16);
	}
	json_object_put(j);
	free(out);
}
END_TEST

START_TEST(truncated_rep_names_the_offset_and_keeps_the_rest)
{
	char args[512];
	int st;
	struct stat sb;
	ck_assert_int_eq(stat(path, &sb), 0);
	/* Cut in the middle of the second stream section. */
	ck_assert_int_eq(truncate(path, sb.st_size / 2 + 4), 0);
	snprintf(args, sizeof args, "--rep %s " GEOM " --json", path);
	char *out = sim(args, &st);
	char *err = err_text();
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
	ck_assert_msg(strstr(err, "offset") != NULL, "stderr: %s", err);
	struct json_object *j = json_tokener_parse(out);
	ck_assert_msg(j != NULL, "stdout: %s", out);
	uint64_t instr = jget(j, "refs", "instr");
	ck_assert_uint_gt(instr, 1000 * 4);	/* the first section at least */
	ck_assert_uint_lt(instr, ITERS * 4);
	json_object_put(j);
	free(out);
	free(err);

	/* A broken header leaves nothing to report. */
	FILE *f = fopen(path, "r+");
	ck_assert_ptr_nonnull(f);
	fputs("NOTAREP!", f);
	fclose(f);
	out = sim(args, &st);
	err = err_text();
	ck_assert_int_eq(WEXITSTATUS(st), 1);
	ck_assert_str_eq(out, "");
	ck_assert_msg(strstr(err, "padrone-sim: ") == err, "stderr: %s", err);
	free(out);
	free(err);
}
END_TEST

/* A unit boundary at about frac of the stream. */
static size_t boundary(const uint64_t *w, size_t n, double frac)
{
	size_t at = 0;
	while (at < (size_t)((double)n * frac))
		at += 1 + (size_t)(w[at] >> 48);
	return at;
}

/* Sections of threads 1, 2, 1, 1, 2, larger together than a recovery
 * chunk: 1, 2 and 3 recovery threads give the same report, byte for byte. */
START_TEST(recovery_threads_change_nothing)
{
	static const uint64_t tids[] = { 1, 2, 1, 1, 2 };
	struct rep_table *t = table();
	struct rep_writer *wr;
	size_t n, cut, at[6];
	uint64_t *w = stream(&n, &cut);
	char file[160], args[512];
	int st;

	for (int k = 0; k < 5; k++)
		at[k] = boundary(w, n, k / 5.0);
	at[5] = n;
	snprintf(file, sizeof file, "%s/five.rep", dir);
	ck_assert_int_eq(rep_writer__open(file, t, &wr), 0);
	for (int k = 0; k < 5; k++)
		ck_assert_int_eq(rep_writer__stream(wr, tids[k], w + at[k], at[k + 1] - at[k]), 0);
	ck_assert_int_eq(rep_writer__close(wr), 0);
	ck_assert_uint_gt(n * 8, 2 * 65536);	/* several chunks */
	char *out[4];
	for (int k = 0; k < 4; k++) {	/* 0: recovered on the reading thread */
		snprintf(args, sizeof args,
			 "--rep %s " GEOM " --workers 2 --recovery-workers %d -a cache -a blocks "
			 "-a edges -a reuse --json --top 0", file, k);
		out[k] = sim(args, &st);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, err_text());
	}
	ck_assert_str_eq(out[0], out[1]);
	ck_assert_str_eq(out[0], out[2]);
	ck_assert_str_eq(out[0], out[3]);
	struct json_object *j = json_tokener_parse(out[0]);
	ck_assert_ptr_nonnull(j);
	ck_assert_uint_eq(jget(j, "blocks", "executions"), ITERS + ITERS / 16);
	/* Four runs of units: 1 | 2 | 1 1 | 2 (sections of one thread in a
	 * row are one run). */
	ck_assert_uint_eq(jget(j, "edges", "traversals"), ITERS + ITERS / 16 - 4);
	ck_assert_uint_eq(jget(j, "refs", "modifies"), ITERS);
	json_object_put(j);
	for (int k = 0; k < 4; k++)
		free(out[k]);
	free(w);
	rep_table__free(t);
}
END_TEST

/* Units in w[from, to), by their headers' lengths. */
static uint64_t units_between(const uint64_t *w, size_t from, size_t to)
{
	uint64_t k = 0;

	for (size_t i = from; i < to; i += 1 + (size_t)(w[i] >> 48))
		k++;
	return k;
}

/* A corrupt unit in the first thread's section: reported with its offset,
 * and the second thread's section is still recovered in full: the report
 * is the one of a file holding only the good part of the first section. */
START_TEST(second_section_survives_a_corrupt_first)
{
	struct rep_table *t = table();
	struct rep_writer *wr;
	size_t n, cut;
	uint64_t *w = stream(&n, &cut);
	char bad_file[160], good_file[160], args[512];
	int st;

	size_t bad = boundary(w, cut, 0.5);
	snprintf(good_file, sizeof good_file, "%s/good.rep", dir);
	ck_assert_int_eq(rep_writer__open(good_file, t, &wr), 0);
	ck_assert_int_eq(rep_writer__stream(wr, 1, w, bad), 0);
	ck_assert_int_eq(rep_writer__stream(wr, 2, w + cut, n - cut), 0);
	ck_assert_int_eq(rep_writer__close(wr), 0);
	w[bad] = REP_S_WORD(77, 3);
	snprintf(bad_file, sizeof bad_file, "%s/bad.rep", dir);
	ck_assert_int_eq(rep_writer__open(bad_file, t, &wr), 0);
	ck_assert_int_eq(rep_writer__stream(wr, 1, w, cut), 0);
	ck_assert_int_eq(rep_writer__stream(wr, 2, w + cut, n - cut), 0);
	ck_assert_int_eq(rep_writer__close(wr), 0);

	/* Where the bad unit sits in the file. */
	struct rep_reader *rd;
	const uint64_t *sw;
	size_t sn;
	uint64_t tid, off;
	ck_assert_int_eq(rep_reader__open(bad_file, &rd), 0);
	ck_assert_int_eq(rep_reader__next(rd, &tid, &sw, &sn, &off), 1);
	rep_reader__close(rd);
	char want[256];
	snprintf(want, sizeof want,
		 "padrone-sim: %s: REP unit at offset %llu: unknown block id 77; the rest of the "
		 "section skipped\n", bad_file, (unsigned long long)(off + bad * 8));

	for (int k = 0; k <= 2; k++) {
		snprintf(args, sizeof args, "--rep %s " GEOM " --recovery-workers %d -a cache "
			 "-a blocks -a edges --json --top 0", bad_file, k);
		char *got = sim(args, &st);
		char *err = err_text();
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
		ck_assert_str_eq(err, want);
		snprintf(args, sizeof args, "--rep %s " GEOM " --recovery-workers %d -a cache "
			 "-a blocks -a edges --json --top 0", good_file, k);
		char *ref = sim(args, &st);
		ck_assert_int_eq(WEXITSTATUS(st), 0);
		/* The same but for the units lost: the bad one and the rest of
		 * its section. */
		struct json_object *j = json_tokener_parse(got), *good = json_tokener_parse(ref);
		ck_assert(j && good);
		ck_assert_uint_eq(jget(j, "recovery", "corrupt"), units_between(w, bad, cut));
		ck_assert_uint_eq(jget(good, "recovery", "lost_units"), 0);
		json_object_object_del(j, "recovery");
		json_object_object_del(good, "recovery");
		ck_assert_str_eq(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
				 json_object_to_json_string_ext(good, JSON_C_TO_STRING_PLAIN));
		json_object_put(good);
		/* All of the second section: its ITERS - 1000 loop bodies. */
		ck_assert_uint_gt(jget(j, "refs", "modifies"), ITERS - 1000);
		ck_assert_uint_lt(jget(j, "refs", "modifies"), ITERS);
		json_object_put(j);
		free(got);
		free(ref);
		free(err);
	}
	free(w);
	rep_table__free(t);
}
END_TEST

/* A spoiled unit in the first thread's section; in the second's, a corrupt
 * unit early on and, several recovery chunks later, another spoiled one.
 * padrone-sim says the units lost, as stats and report do in a live run:
 * the first spoiled unit, and the corrupt one with the rest of its section
 * (the later spoiled unit among them), for any number of recovery threads. */
START_TEST(lost_units_are_counted_spoiled_and_corrupt)
{
	struct rep_table *t = table();
	struct rep_writer *wr;
	size_t n, cut;
	uint64_t *w = stream(&n, &cut);
	char file[160], args[512], want[256];
	int st;

	size_t sp1 = boundary(w, cut, 0.3);
	size_t bad = cut + boundary(w + cut, n - cut, 0.1);
	size_t sp2 = cut + boundary(w + cut, n - cut, 0.8);
	ck_assert_uint_gt((sp2 - bad) * 8, 65536);	/* in a later chunk */
	uint64_t corrupt = units_between(w, bad, n);
	uint64_t units = units_between(w, 0, n) - corrupt - 1;
	ck_assert_uint_eq(units_between(w, 0, n), ITERS + ITERS / 16);
	w[sp1] |= REP_S_SPOILED;
	w[sp2] |= REP_S_SPOILED;
	w[bad] = REP_S_WORD(77, w[bad] >> 48);
	snprintf(file, sizeof file, "%s/lost.rep", dir);
	ck_assert_int_eq(rep_writer__open(file, t, &wr), 0);
	ck_assert_int_eq(rep_writer__stream(wr, 1, w, cut), 0);
	ck_assert_int_eq(rep_writer__stream(wr, 2, w + cut, n - cut), 0);
	ck_assert_int_eq(rep_writer__close(wr), 0);

	snprintf(want, sizeof want, "\nREP recovery: %llu units recovered, %llu lost (1 spoiled, "
		 "%llu corrupt), ", (unsigned long long)units, (unsigned long long)corrupt + 1,
		 (unsigned long long)corrupt);
	for (int k = 0; k <= 2; k++) {
		snprintf(args, sizeof args, "--rep %s " GEOM " --recovery-workers %d --json", file, k);
		char *out = sim(args, &st);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
		struct json_object *j = json_tokener_parse(out);
		ck_assert_msg(j != NULL, "stdout: %s", out);
		ck_assert_uint_eq(jget(j, "recovery", "units"), units);
		ck_assert_uint_eq(jget(j, "recovery", "spoiled"), 1);
		ck_assert_uint_eq(jget(j, "recovery", "corrupt"), corrupt);
		ck_assert_uint_eq(jget(j, "recovery", "lost_units"), corrupt + 1);
		ck_assert_uint_ge(jget(j, "recovery", "gaps"), 1);
		json_object_put(j);
		free(out);
		snprintf(args, sizeof args, "--rep %s " GEOM " --recovery-workers %d", file, k);
		out = sim(args, &st);
		ck_assert_int_eq(WEXITSTATUS(st), 1);
		ck_assert_msg(strstr(out, want), "no '%s' in: %s", want, out);
		free(out);
	}
	free(w);
	rep_table__free(t);
}
END_TEST

START_TEST(one_input_only)
{
	char args[512];
	int st;
	snprintf(args, sizeof args, "--rep %s --lackey -", path);
	free(sim(args, &st));
	ck_assert_int_eq(WEXITSTATUS(st), 2);
	char *err = err_text();
	ck_assert_ptr_nonnull(strstr(err, "give one input, --lackey or --rep"));
	free(err);
	snprintf(args, sizeof args, "--rep %s/missing.rep", dir);
	free(sim(args, &st));
	ck_assert_int_eq(WEXITSTATUS(st), 3);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("csim_rep");
	TCase *tc = tcase_create("csim_rep");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, rep_equals_its_lackey_rendering_and_the_simulator);
	tcase_add_test(tc, rep_block_and_edge_counts_come_from_the_recovery);
	tcase_add_test(tc, truncated_rep_names_the_offset_and_keeps_the_rest);
	tcase_add_test(tc, recovery_threads_change_nothing);
	tcase_add_test(tc, second_section_survives_a_corrupt_first);
	tcase_add_test(tc, lost_units_are_counted_spoiled_and_corrupt);
	tcase_add_test(tc, one_input_only);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
