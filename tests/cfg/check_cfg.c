/* cfg/ against oracles, on a corpus compiled by the test itself with gcc
 * and clang at -O0/-O2/-O3, PIE and not; cfg/ analyses the stripped copies,
 * the unstripped ones and the tools' outputs say what is true. */
#include "cfg/cfg.h"
#include "tests/cfg/oracle.h"
#include "tests/lib/tu.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXPROG 16

struct prog {
	char path[PATH_MAX];	/* unstripped: the oracles' */
	char stripped[PATH_MAX];	/* what cfg/ analyses */
	char name[64];		/* gcc-O2-pie */
	bool clang, pie;
	int opt;
};

static struct prog progs[MAXPROG];
static size_t nprogs;
static char corpus_err[512];

static void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void diag(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("# ");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
}

/* Build the corpus once for the whole suite (in the parent, before the
 * test cases fork). */
static void corpus_setup(void)
{
	char cmd[PATH_MAX * 3];
	snprintf(cmd, sizeof(cmd), "sh '%s' '%s' '%s' 2>&1", tu_srcpath("tests/cfg/corpus/build.sh"),
		 tu_srcpath("tests/cfg/corpus"), tu_path("tests/cfg/corpus.out"));
	int st;
	char *out = tu_run(cmd, &st);
	if (!out || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(corpus_err, sizeof(corpus_err), "building the corpus failed: %.400s",
			 out ? out : "cannot run build.sh");
		free(out);
		return;
	}
	for (char *l = strtok(out, "\n"); l && nprogs < MAXPROG; l = strtok(NULL, "\n")) {
		struct prog *p = &progs[nprogs];
		const char *base = strrchr(l, '/') ? strrchr(l, '/') + 1 : l;
		snprintf(p->path, sizeof(p->path), "%s", l);
		snprintf(p->stripped, sizeof(p->stripped), "%s.stripped", l);
		snprintf(p->name, sizeof(p->name), "%s", base);
		p->clang = !strncmp(base, "clang", 5);
		p->pie = !strstr(base, "nopie");
		p->opt = strstr(base, "-O0") ? 0 : strstr(base, "-O2") ? 2 : 3;
		nprogs++;
	}
	free(out);
	if (nprogs != 12)
		snprintf(corpus_err, sizeof(corpus_err), "expected 12 corpus programs, got %zu", nprogs);
}

static void need_corpus(void)
{
	if (corpus_err[0])
		ck_abort_msg("%s", corpus_err);
}

/* ---------------------------------------------------------- bounds: F1 */

struct span {
	uint64_t lo, hi;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->hi < y->hi ? -1 : x->hi > y->hi;
}

static size_t uniq(struct span *v, size_t n)
{
	qsort(v, n, sizeof(*v), span_cmp);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!k || span_cmp(&v[k - 1], &v[i]))
			v[k++] = v[i];
	return k;
}

START_TEST(function_bounds_f1)
{
	need_corpus();
	size_t tp = 0, fp = 0, fn = 0;
	for (size_t i = 0; i < nprogs; i++) {
		struct or_syms syms;
		ck_assert_msg(or_read_syms(progs[i].path, &syms) == 0, "readelf -s %s", progs[i].path);
		struct span *truth = calloc(syms.n, sizeof(*truth));
		size_t nt = 0;
		for (size_t k = 0; k < syms.n; k++)
			if (!strcmp(syms.v[k].type, "FUNC") && syms.v[k].size)
				truth[nt++] = (struct span){ syms.v[k].addr,
							     syms.v[k].addr + syms.v[k].size };
		nt = uniq(truth, nt);
		struct or_program p;
		ck_assert_msg(or_program_build(progs[i].stripped, &p) == 0, "analysing %s",
			      progs[i].stripped);
		size_t cap = 0, np = 0;
		for (size_t k = 0; k < p.n; k++)
			cap += cfg_function__range_count(p.f[k]);
		struct span *pred = calloc(cap + 1, sizeof(*pred));
		for (size_t k = 0; k < p.n; k++)
			for (size_t j = 0; j < cfg_function__range_count(p.f[k]); j++) {
				const struct cfg_range *r = cfg_function__range(p.f[k], j);
				/* functions whose symbol has no size (crt's asm)
				 * have no truth to compare with */
				bool sizeless = false;
				for (size_t q = 0; q < syms.n && !sizeless; q++)
					sizeless = syms.v[q].addr == r->start && !syms.v[q].size &&
						   !strcmp(syms.v[q].type, "FUNC");
				if (!sizeless)
					pred[np++] = (struct span){ r->start, r->end };
			}
		np = uniq(pred, np);
		size_t a = 0, b = 0, t0 = tp;
		while (a < nt || b < np) {
			int c = a >= nt ? 1 : b >= np ? -1 : span_cmp(&truth[a], &pred[b]);
			if (c == 0) {
				tp++;
				a++;
				b++;
			} else if (c < 0) {
				diag("%s: missed [%#lx, %#lx)", progs[i].name, (unsigned long)truth[a].lo,
				     (unsigned long)truth[a].hi);
				fn++;
				a++;
			} else {
				diag("%s: wrong [%#lx, %#lx)", progs[i].name, (unsigned long)pred[b].lo,
				     (unsigned long)pred[b].hi);
				fp++;
				b++;
			}
		}
		diag("%s: %zu of %zu function bounds exact", progs[i].name, tp - t0, nt);
		free(truth);
		free(pred);
		or_program_free(&p);
		or_syms_free(&syms);
	}
	double f1 = 2.0 * (double)tp / (double)(2 * tp + fp + fn);
	diag("function bounds (stripped): F1 %.4f (%zu exact, %zu wrong, %zu missed)", f1, tp, fp,
	     fn);
	ck_assert_msg(f1 >= 0.99, "F1 %.4f < 0.99", f1);
}
END_TEST

/* ---------------------------------------------------------- jump tables */

/* The label a relative table's entries are relative to: with -Wa,-L the
 * table's own label (.L4, .LJTI0_0) is kept in .symtab at its first entry. */
static uint64_t table_label(const struct or_syms *s, uint64_t slot)
{
	uint64_t best = 0;
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->v[i].type, "NOTYPE") && !strncmp(s->v[i].name, ".L", 2) &&
		    s->v[i].addr <= slot && s->v[i].addr > best)
			best = s->v[i].addr;
	return best;
}

START_TEST(jump_table_targets_match_relocations)
{
	need_corpus();
	size_t slots = 0, found = 0, tables = 0, extra = 0;
	for (size_t i = 0; i < nprogs; i++) {
		struct or_reloc *rel;
		size_t nrel;
		uint64_t tlo, thi;
		struct or_syms syms;
		ck_assert(or_section(progs[i].path, ".text", &tlo, &thi) == 0);
		ck_assert(or_read_syms(progs[i].path, &syms) == 0);
		ck_assert(or_read_relocs(progs[i].path, ".rela.rodata", &rel, &nrel) == 0);
		struct or_program p;
		ck_assert(or_program_build(progs[i].stripped, &p) == 0);
		struct cfg_reader *un;
		ck_assert(cfg_reader__open_elf(progs[i].path, 0, NULL, &un) == 0);
		size_t ours = 0;
		for (size_t k = 0; k < p.n; k++)
			for (size_t t = 0; t < cfg_function__jump_table_count(p.f[k]); t++)
				ours += cfg_function__jump_table(p.f[k], t)->target_count;
		size_t here = 0;
		for (size_t r = 0; r < nrel; r++) {
			uint64_t target;
			bool pc = strstr(rel[r].type, "PC32") != NULL;
			if (pc) {
				/* entry = target - table label */
				if (rel[r].sym_value < tlo || rel[r].sym_value >= thi)
					continue;
				int32_t v;
				ck_assert(cfg_reader__read(un, rel[r].offset, &v, 4) == 4);
				target = table_label(&syms, rel[r].offset) + (uint64_t)(int64_t)v;
			} else {
				target = rel[r].sym_value + (uint64_t)rel[r].addend;
			}
			if (target < tlo || target >= thi)
				continue;
			slots++;
			here++;
			bool ok = false;
			for (size_t k = 0; k < p.n && !ok; k++)
				for (size_t t = 0; t < cfg_function__jump_table_count(p.f[k]); t++) {
					const struct cfg_jump_table *J = cfg_function__jump_table(p.f[k], t);
					uint64_t idx = (rel[r].offset - J->table) / J->entry_size;
					if (rel[r].offset >= J->table && idx < J->target_count &&
					    J->table + idx * J->entry_size == rel[r].offset &&
					    J->targets[idx] == target)
						ok = true;
				}
			if (ok)
				found++;
			else
				diag("%s: jump-table slot %#lx -> %#lx not found", progs[i].name,
				     (unsigned long)rel[r].offset, (unsigned long)target);
		}
		for (size_t k = 0; k < p.n; k++)
			tables += cfg_function__jump_table_count(p.f[k]);
		if (ours > here) {
			diag("%s: %zu table entries beyond the relocated ones", progs[i].name,
			     ours - here);
			extra += ours - here;
		}
		cfg_reader__free(un);
		or_program_free(&p);
		or_syms_free(&syms);
		free(rel);
	}
	diag("jump tables: %zu tables, %zu of %zu relocated targets found, %zu extra", tables,
	     found, slots, extra);
	ck_assert_msg(slots > 100, "only %zu jump-table slots in the corpus", slots);
	ck_assert_int_eq(found, slots);
	ck_assert_int_eq(extra, 0);
}
END_TEST

/* ---------------------------------------------------------- callgrind */

static bool has_edge(const struct cfg_function *f, size_t blk, uint64_t to)
{
	const struct cfg_block *b = cfg_function__block(f, blk);
	for (uint32_t e = b->first_succ; e < b->first_succ + b->succ_count; e++)
		if (cfg_function__edge(f, e)->to_addr == to)
			return true;
	return false;
}

START_TEST(callgrind_edges_are_in_the_cfg)
{
	need_corpus();
	size_t seen = 0, missing = 0;
	for (size_t i = 0; i < nprogs; i++) {
		char *out, *cmd;
		ck_assert(asprintf(&out, "%s.callgrind", progs[i].path) > 0);
		/* the unstripped program runs (same code), so valgrind names
		 * its object by that path */
		ck_assert(asprintf(&cmd,
				   "valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes "
				   "--callgrind-out-file='%s' '%s' 40 >/dev/null 2>&1",
				   out, progs[i].path) > 0);
		int st;
		free(tu_run(cmd, &st));
		free(cmd);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "valgrind on %s", progs[i].path);
		struct or_jump *j;
		size_t nj;
		ck_assert(or_callgrind_jumps(out, progs[i].path, &j, &nj) == 0);
		struct or_program p;
		ck_assert(or_program_build(progs[i].stripped, &p) == 0);
		size_t here = 0;
		for (size_t k = 0; k < nj; k++) {
			size_t blk;
			const struct cfg_function *f = NULL;
			bool ok = false;
			for (size_t q = 0; q < p.n && !ok; q++) {
				ssize_t b = cfg_function__block_at(p.f[q], j[k].from);
				if (b < 0)
					continue;
				f = p.f[q];
				blk = (size_t)b;
				const struct cfg_block *B = cfg_function__block(f, blk);
				uint64_t to = j[k].to;
				if (j[k].cond_not_taken)	/* fall through the jcc */
					to = B->end;
				ok = has_edge(f, blk, to);
			}
			/* a call= line from a call instruction is a call, not an
			 * edge; from a jmp, it is a jump into another function:
			 * through a PLT stub, callgrind names the final callee */
			for (size_t q = 0; q < p.n && !ok && j[k].call; q++)
				for (size_t c = 0; c < cfg_function__call_count(p.f[q]); c++) {
					const struct cfg_call *C = cfg_function__call(p.f[q], c);
					if (C->at == j[k].from &&
					    (!C->tail || strstr(C->name, "@plt") || C->indirect))
						ok = true;
				}
			here++;
			if (!ok) {
				missing++;
				diag("%s: observed edge %#lx -> %#lx%s not in the CFG", progs[i].name,
				     (unsigned long)j[k].from,
				     (unsigned long)(j[k].cond_not_taken ? 0 : j[k].to),
				     j[k].cond_not_taken ? " (not taken)" : "");
			}
		}
		seen += here;
		free(j);
		or_program_free(&p);
		unlink(out);
		free(out);
	}
	diag("callgrind: %zu observed edges, %zu missing from the CFG", seen, missing);
	ck_assert_msg(seen > 200, "callgrind saw only %zu edges", seen);
	ck_assert_int_eq(missing, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cfg");
	TCase *tc = tcase_create("oracles");
	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, corpus_setup, NULL);
	tcase_add_test(tc, function_bounds_f1);
	tcase_add_test(tc, jump_table_targets_match_relocations);
	tcase_add_test(tc, callgrind_edges_are_in_the_cfg);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
