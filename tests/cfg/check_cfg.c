/* cfg/ against oracles, on a corpus compiled by the test itself with gcc
 * and clang at -O0/-O2/-O3, PIE and not; cfg/ analyses the stripped copies,
 * the unstripped ones and the tools' outputs say what is true. */
#include "attach/attach.h"
#include "cfg/cfg.h"
#include "tests/cfg/oracle.h"
#include "tests/lib/tu.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXPROG 24
#define NPROG 16	/* what build.sh builds */

struct prog {
	char path[PATH_MAX];	/* unstripped: the oracles' */
	char stripped[PATH_MAX];	/* what cfg/ analyses */
	char name[64];		/* gcc-O2-pie, gcc-O2-cet-pie, bare-gcc-O2-nopie */
	bool clang, pie;
	bool cet;		/* -fcf-protection -fstack-protector-strong -z ibtplt */
	bool bare;		/* bare.c alone, not the corpus's functions */
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
	static bool done;
	if (done)
		return;
	done = true;
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
		p->bare = !strncmp(base, "bare-", 5);
		p->clang = !strncmp(base + (p->bare ? 5 : 0), "clang", 5);
		p->cet = strstr(base, "-cet-") != NULL;
		p->pie = !strstr(base, "nopie");
		p->opt = strstr(base, "-O0") ? 0 : strstr(base, "-O2") ? 2 : 3;
		nprogs++;
	}
	free(out);
	if (nprogs != NPROG)
		snprintf(corpus_err, sizeof(corpus_err), "expected %d corpus programs, got %zu", NPROG,
			 nprogs);
}

static void need_corpus(void)
{
	if (corpus_err[0])
		ck_abort_msg("%s", corpus_err);
}

static const struct prog *prog_named(const char *name)
{
	for (size_t i = 0; i < nprogs; i++)
		if (!strcmp(progs[i].name, name))
			return &progs[i];
	ck_abort_msg("no corpus program %s", name);
	return NULL;
}

/* ---------------------------------------------------------- bounds: F1 */

static const char *prefix_of(const struct prog *pr, char *buf, size_t size)
{
	snprintf(buf, size, "# %s: ", pr->name);
	return buf;
}

START_TEST(function_bounds_f1)
{
	need_corpus();
	size_t tp = 0, fp = 0, fn = 0;
	char pre[96];
	for (size_t i = 0; i < nprogs; i++) {
		struct or_syms syms;
		ck_assert_msg(or_read_syms(progs[i].path, &syms) == 0, "readelf -s %s", progs[i].path);
		struct or_program p;
		ck_assert_msg(or_program_build(progs[i].stripped, &p) == 0, "analysing %s",
			      progs[i].stripped);
		struct or_bounds bd;
		or_check_bounds(&syms, &p, 0, stdout, prefix_of(&progs[i], pre, sizeof(pre)), &bd);
		diag("%s: %zu of %zu function bounds exact", progs[i].name, bd.exact, bd.truth);
		tp += bd.exact;
		fp += bd.wrong;
		fn += bd.missed;
		or_program_free(&p);
		or_syms_free(&syms);
	}
	double f1 = or_f1(tp, fp, fn);
	diag("function bounds (stripped): F1 %.4f (%zu exact, %zu wrong, %zu missed)", f1, tp, fp,
	     fn);
	ck_assert_msg(f1 >= 0.99, "F1 %.4f < 0.99", f1);
}
END_TEST

/* ---------------------------------------------------------- jump tables */

START_TEST(jump_table_targets_match_relocations)
{
	need_corpus();
	size_t slots = 0, found = 0, tables = 0, extra = 0;
	char pre[96];
	for (size_t i = 0; i < nprogs; i++) {
		struct or_syms syms;
		ck_assert(or_read_syms(progs[i].path, &syms) == 0);
		struct or_program p;
		ck_assert(or_program_build(progs[i].stripped, &p) == 0);
		struct or_tables t;
		ck_assert(or_check_tables(progs[i].path, &syms, &p, 0, stdout,
					  prefix_of(&progs[i], pre, sizeof(pre)), &t) == 0);
		/* -Wa,-L keeps every table's label: all targets are checked */
		ck_assert_uint_eq(t.unchecked, 0);
		slots += t.slots;
		found += t.found;
		tables += t.tables;
		extra += t.extra;
		or_program_free(&p);
		or_syms_free(&syms);
	}
	diag("jump tables: %zu tables, %zu of %zu relocated targets found, %zu extra", tables,
	     found, slots, extra);
	ck_assert_msg(slots > 100, "only %zu jump-table slots in the corpus", slots);
	ck_assert_int_eq(found, slots);
	ck_assert_int_eq(extra, 0);
}
END_TEST

/* ---------------------------------------------------------- callgrind */

static bool loop_has(const struct cfg_loop *L, int32_t blk)
{
	for (uint32_t k = 0; blk >= 0 && k < L->block_count; k++)
		if (L->blocks[k] == (uint32_t)blk)
			return true;
	return false;
}

static bool listed(const uint32_t *v, uint32_t n, uint32_t x)
{
	for (uint32_t k = 0; k < n; k++)
		if (v[k] == x)
			return true;
	return false;
}

/* An edge that ran, from block blk to address to: for every loop holding
 * blk, a back edge if it goes back to the loop's header (one of its
 * entries if irreducible), an exit if it leaves the loop. */
static void observed_loop_edge(const struct cfg_function *f, size_t blk, uint64_t to,
			       size_t *back, size_t *exits, const char *pn)
{
	const struct cfg_block *B = cfg_function__block(f, blk);
	for (uint32_t e = B->first_succ; e < B->first_succ + B->succ_count; e++) {
		const struct cfg_edge *E = cfg_function__edge(f, e);
		if (E->to_addr != to)
			continue;
		for (int32_t l = B->loop; l >= 0; l = cfg_function__loop(f, (size_t)l)->parent) {
			const struct cfg_loop *L = cfg_function__loop(f, (size_t)l);
			bool inside = loop_has(L, E->to);
			bool again = inside && (L->irreducible ? listed(L->entries, L->entry_count,
									(uint32_t)E->to)
							       : (uint32_t)E->to == L->header);
			if (again) {
				ck_assert_msg(listed(L->back_edges, L->back_edge_count, e),
					      "%s: %#lx -> %#lx ran, not a back edge of loop %#lx", pn,
					      (unsigned long)B->start, (unsigned long)to,
					      (unsigned long)cfg_function__block(f, L->header)->start);
				(*back)++;
			} else if (!inside) {
				ck_assert_msg(listed(L->exits, L->exit_count, e),
					      "%s: %#lx -> %#lx ran, not an exit of loop %#lx", pn,
					      (unsigned long)B->start, (unsigned long)to,
					      (unsigned long)cfg_function__block(f, L->header)->start);
				(*exits)++;
			}
		}
	}
}

struct loop_tally {
	size_t back, exits;
	const char *prog;
};

static void on_observed(void *arg, const struct cfg_function *f, size_t blk, uint64_t to)
{
	struct loop_tally *t = arg;
	observed_loop_edge(f, blk, to, &t->back, &t->exits, t->prog);
}

START_TEST(callgrind_edges_are_in_the_cfg)
{
	need_corpus();
	size_t seen = 0, missing = 0;
	struct loop_tally lt = { 0 };
	char pre[96];
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
		struct or_program p;
		ck_assert(or_program_build(progs[i].stripped, &p) == 0);
		struct or_edges e;
		lt.prog = progs[i].name;
		ck_assert(or_check_edges(out, progs[i].path, &p, 0, stdout,
					 prefix_of(&progs[i], pre, sizeof(pre)), on_observed, &lt,
					 &e) == 0);
		seen += e.observed;
		missing += e.missing;
		or_program_free(&p);
		unlink(out);
		free(out);
	}
	diag("callgrind: %zu observed edges, %zu missing from the CFG", seen, missing);
	diag("loops: %zu observed back edges and %zu observed loop exits, all in the forest",
	     lt.back, lt.exits);
	ck_assert_msg(seen > 200, "callgrind saw only %zu edges", seen);
	ck_assert_msg(lt.back > 100 && lt.exits > 50, "few loop edges observed");
	ck_assert_int_eq(missing, 0);
}
END_TEST

/* ---------------------------------------------------------- per program */

/* The stripped program analysed, and the unstripped one's symbols to find
 * functions by name. */
struct both {
	struct or_program p;
	struct or_syms syms;
};

static void both_open(struct both *b, const struct prog *pr)
{
	ck_assert_msg(or_read_syms(pr->path, &b->syms) == 0, "readelf -s %s", pr->path);
	ck_assert_msg(or_program_build(pr->stripped, &b->p) == 0, "analysing %s", pr->stripped);
}

static void both_close(struct both *b)
{
	or_program_free(&b->p);
	or_syms_free(&b->syms);
}

/* The function at the symbol's address (must exist). */
static const struct cfg_function *fn(const struct both *b, const char *name, const char *prog)
{
	const struct or_sym *s = or_sym_named(&b->syms, name);
	ck_assert_msg(s != NULL, "%s: no symbol %s", prog, name);
	for (size_t i = 0; i < b->p.n; i++)
		if (cfg_function__entry(b->p.f[i]) == s->addr)
			return b->p.f[i];
	ck_abort_msg("%s: function %s at %#lx not found", prog, name, (unsigned long)s->addr);
	return NULL;
}

static uint64_t sym_addr(const struct both *b, const char *name)
{
	const struct or_sym *s = or_sym_named(&b->syms, name);
	ck_assert_msg(s != NULL, "no symbol %s", name);
	return s->addr;
}

/* clang's own loop analysis, printed in its assembly, against ours. */
START_TEST(clang_loop_headers_and_depths)
{
	need_corpus();
	static const char *files[] = { "main", "switches", "loops", "irreducible", "noreturn",
				       "tailcalls", "cold", "cleanup" };
	size_t headers = 0, matched = 0, ours = 0, unmatched_ours = 0, dead = 0;
	for (size_t i = 0; i < nprogs; i++) {
		if (!progs[i].clang)
			continue;
		struct both b;
		both_open(&b, &progs[i]);
		struct or_loop_header *v = NULL;
		size_t n = 0, cap = 0;
		for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
			char *sp, *fname;
			ck_assert(asprintf(&sp, "%s.d/%s.s", progs[i].path, files[k]) > 0);
			ck_assert(asprintf(&fname, "%s.c", files[k]) > 0);
			ck_assert_msg(or_clang_loops(sp, fname, &v, &n, &cap) == 0, "reading %s", sp);
			free(sp);
			free(fname);
		}
		uint64_t *hdr = calloc(n + 1, sizeof(*hdr));
		for (size_t k = 0; k < n; k++) {
			const struct or_sym *l = or_label(&b.syms, v[k].file, v[k].label);
			ck_assert_msg(l != NULL, "%s: label %s of %s not in .symtab", progs[i].name,
				      v[k].label, v[k].file);
			hdr[k] = l->addr;
			const struct cfg_function *f = or_function_at(&b.p, l->addr);
			/* clang does not know that exit_group does not return:
			 * its loop around the system call is no loop */
			ssize_t hb = f ? cfg_function__block_at(f, l->addr) : -1;
			if (hb >= 0 && cfg_function__noreturn(f) &&
			    cfg_function__block(f, (size_t)hb)->succ_count == 0) {
				dead++;
				continue;
			}
			headers++;
			bool ok = false;
			for (size_t q = 0; f && q < cfg_function__loop_count(f) && !ok; q++) {
				const struct cfg_loop *L = cfg_function__loop(f, q);
				ok = cfg_function__block(f, L->header)->start == l->addr &&
				     (int)L->depth == v[k].depth;
			}
			if (ok)
				matched++;
			else
				diag("%s: clang loop header %s (%s, %#lx) depth %d not found",
				     progs[i].name, v[k].label, v[k].file, (unsigned long)l->addr,
				     v[k].depth);
		}
		/* and every reducible loop of ours in corpus code is clang's */
		for (size_t q = 0; q < b.p.n; q++) {
			const struct cfg_function *f = b.p.f[q];
			for (size_t l = 0; l < cfg_function__loop_count(f); l++) {
				const struct cfg_loop *L = cfg_function__loop(f, l);
				uint64_t at = cfg_function__block(f, L->header)->start;
				bool irr = L->irreducible;
				for (int32_t p = L->parent; p >= 0; p = cfg_function__loop(f, p)->parent)
					irr |= cfg_function__loop(f, p)->irreducible;
				if (irr)
					continue;
				ours++;
				bool ok = false;
				for (size_t k = 0; k < n && !ok; k++)
					ok = hdr[k] == at;
				if (!ok) {
					unmatched_ours++;
					diag("%s: our loop at %#lx is not clang's", progs[i].name,
					     (unsigned long)at);
				}
			}
		}
		free(hdr);
		free(v);
		both_close(&b);
	}
	diag("clang loops: %zu of %zu headers and depths found (%zu around exit_group left out); "
	     "%zu of our %zu loops unknown to clang",
	     matched, headers, dead, unmatched_ours, ours);
	ck_assert_msg(headers > 40, "only %zu clang loop headers", headers);
	ck_assert_int_eq(matched, headers);
	ck_assert_int_eq(unmatched_ours, 0);
}
END_TEST

START_TEST(goto_into_a_loop_is_irreducible)
{
	need_corpus();
	size_t checked = 0;
	for (size_t i = 0; i < nprogs; i++) {
		if (progs[i].opt != 0 || progs[i].bare)
			continue;
		struct both b;
		both_open(&b, &progs[i]);
		const char *names[] = { "irreducible", "irreducible2" };
		for (int k = 0; k < 2; k++) {
			const struct cfg_function *f = fn(&b, names[k], progs[i].name);
			bool irr = false;
			for (size_t l = 0; l < cfg_function__loop_count(f); l++) {
				const struct cfg_loop *L = cfg_function__loop(f, l);
				if (L->irreducible) {
					irr = true;
					ck_assert_uint_ge(L->entry_count, 2);
				}
			}
			ck_assert_msg(irr, "%s: %s has no irreducible loop", progs[i].name, names[k]);
			checked++;
		}
		/* and natural loops stay reducible */
		const struct cfg_function *f = fn(&b, "loop_nest3", progs[i].name);
		ck_assert_uint_ge(cfg_function__loop_count(f), 3);
		for (size_t l = 0; l < cfg_function__loop_count(f); l++) {
			ck_assert(!cfg_function__loop(f, l)->irreducible);
			ck_assert_uint_eq(cfg_function__loop(f, l)->entry_count, 1);
		}
		both_close(&b);
	}
	ck_assert_uint_eq(checked, 8);
}
END_TEST

/* A hand-made irreducible cycle in raw machine code, through a reader of
 * the caller's own memory:
 *   0: test edi,edi; je B; A: inc eax; cmp eax,esi; jge X;
 *   B: inc ecx; cmp ecx,esi; jl A; X: ret */
static const uint8_t irred_code[] = { 0x85, 0xff, 0x74, 0x06, 0xff, 0xc0, 0x39, 0xf0, 0x7d,
				      0x06, 0xff, 0xc1, 0x39, 0xf1, 0x7c, 0xf4, 0xc3 };

struct buf {
	const uint8_t *p;
	size_t n;
	uint64_t base;
};

static ssize_t buf_read(void *ctx, uint64_t addr, void *out, size_t len)
{
	const struct buf *b = ctx;
	if (addr < b->base || addr >= b->base + b->n)
		return -EFAULT;
	size_t off = (size_t)(addr - b->base);
	size_t n = len < b->n - off ? len : b->n - off;
	memcpy(out, b->p + off, n);
	return (ssize_t)n;
}

static struct cfg_reader *buf_reader(struct buf *b)
{
	struct cfg_reader_ops ops = { .sz = sizeof(ops), .read = buf_read };
	struct cfg_reader *r;
	ck_assert_int_eq(cfg_reader__new(&ops, b, NULL, &r), 0);
	return r;
}

START_TEST(hand_made_irreducible_cycle)
{
	struct buf b = { irred_code, sizeof(irred_code), 0x10000 };
	struct cfg_reader *r = buf_reader(&b);
	struct cfg_function *f;
	ck_assert_int_eq(cfg_function__build(r, 0x10000, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, NULL, NULL), CFG_ERR_NONE);
	ck_assert_uint_eq(cfg_function__block_count(f), 4);
	ck_assert_uint_eq(cfg_function__loop_count(f), 1);
	const struct cfg_loop *L = cfg_function__loop(f, 0);
	ck_assert(L->irreducible);
	ck_assert_uint_eq(L->entry_count, 2);
	ck_assert_uint_eq(L->block_count, 2);
	uint64_t e0 = cfg_function__block(f, L->entries[0])->start;
	uint64_t e1 = cfg_function__block(f, L->entries[1])->start;
	ck_assert((e0 == 0x10004 && e1 == 0x1000a) || (e0 == 0x1000a && e1 == 0x10004));
	ck_assert_uint_eq(L->exit_count, 2);
	/* neither block of the cycle dominates the other */
	ssize_t a = cfg_function__block_at(f, 0x10004), bb = cfg_function__block_at(f, 0x1000a);
	ck_assert(!cfg_function__dominates(f, (size_t)a, (size_t)bb));
	ck_assert(!cfg_function__dominates(f, (size_t)bb, (size_t)a));
	ck_assert(cfg_function__dominates(f, 0, (size_t)a));
	ck_assert_uint_eq(cfg_function__range_count(f), 1);
	ck_assert_uint_eq(cfg_function__range(f, 0)->end, 0x10000 + sizeof(irred_code));
	cfg_function__free(f);
	cfg_reader__free(r);
}
END_TEST

/* Overlapping instructions: jmp into its own second byte (eb ff), which
 * decodes as inc eax (ff c0), then ret. */
START_TEST(overlapping_instructions_make_overlapping_blocks)
{
	static const uint8_t code[] = { 0xeb, 0xff, 0xc0, 0xc3 };
	struct buf b = { code, sizeof(code), 0x30000 };
	struct cfg_reader *r = buf_reader(&b);
	struct cfg_function *f;
	ck_assert_int_eq(cfg_function__build(r, 0x30000, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, NULL, NULL), CFG_ERR_NONE);
	ck_assert_uint_eq(cfg_function__block_count(f), 2);
	const struct cfg_block *b0 = cfg_function__block(f, 0), *b1 = cfg_function__block(f, 1);
	ck_assert_uint_eq(b0->start, 0x30000);
	ck_assert_uint_eq(b0->end, 0x30002);
	ck_assert_uint_eq(b1->start, 0x30001);
	ck_assert_uint_eq(b1->end, 0x30004);
	ck_assert_uint_eq(cfg_function__edge_count(f), 1);
	ck_assert_int_eq(cfg_function__edge(f, 0)->kind, CFG_EDGE_JUMP);
	ck_assert_uint_eq(cfg_function__range_count(f), 1);
	ck_assert_uint_eq(cfg_function__range(f, 0)->end, 0x30004);
	ck_assert_uint_eq(cfg_function__loop_count(f), 0);
	cfg_function__free(f);
	cfg_reader__free(r);
}
END_TEST

static bool block_has_kind(const struct cfg_function *f, uint64_t insn, enum cfg_edge_kind k)
{
	ssize_t blk = cfg_function__block_at(f, insn);
	ck_assert(blk >= 0);
	const struct cfg_block *B = cfg_function__block(f, (size_t)blk);
	for (uint32_t e = B->first_succ; e < B->first_succ + B->succ_count; e++)
		if (cfg_function__edge(f, e)->kind == k)
			return true;
	return false;
}

/* Every call to target (or to a callee named name) in f: noreturn and with
 * no edge to its return address. Returns how many. */
static int noreturn_calls(const struct cfg_function *f, uint64_t target, const char *name,
			  const char *prog)
{
	int n = 0;
	for (size_t c = 0; c < cfg_function__call_count(f); c++) {
		const struct cfg_call *C = cfg_function__call(f, c);
		if (C->tail || (target ? C->target != target : strcmp(C->name, name) != 0))
			continue;
		ck_assert_msg(C->noreturn, "%s: call at %#lx to %s not noreturn", prog,
			      (unsigned long)C->at, name ? name : "?");
		ck_assert_msg(!block_has_kind(f, C->at, CFG_EDGE_CALL_RETURN),
			      "%s: fallthrough after the call at %#lx", prog, (unsigned long)C->at);
		n++;
	}
	return n;
}

START_TEST(calls_that_do_not_return)
{
	need_corpus();
	for (size_t i = 0; i < nprogs; i++) {
		struct both b;
		const char *pn = progs[i].name;
		if (progs[i].bare)
			continue;
		both_open(&b, &progs[i]);
		/* found by analysis: no attribute tells the callers */
		ck_assert_msg(cfg_function__noreturn(fn(&b, "die_quietly", pn)), "%s: die_quietly", pn);
		ck_assert_msg(cfg_function__noreturn(fn(&b, "die_by_syscall", pn)), "%s: syscall", pn);
		ck_assert_msg(cfg_function__noreturn(fn(&b, "die_by_exit", pn)), "%s: exit(60)", pn);
		/* mutually recursive, each exits or calls the other: only the
		 * greatest fixpoint says neither returns */
		ck_assert_msg(cfg_function__noreturn(fn(&b, "spin_even", pn)), "%s: spin_even", pn);
		ck_assert_msg(cfg_function__noreturn(fn(&b, "spin_odd", pn)), "%s: spin_odd", pn);
		ck_assert(!cfg_function__noreturn(fn(&b, "check_or_die", pn)));
		const struct cfg_function *f = fn(&b, "check_or_die", pn);
		ck_assert_int_ge(noreturn_calls(f, sym_addr(&b, "die_quietly"), NULL, pn) +
					 noreturn_calls(f, sym_addr(&b, "die_by_syscall"), NULL, pn),
				 1);
		ck_assert_int_ge(noreturn_calls(f, sym_addr(&b, "spin_even"), NULL, pn), 1);
		ck_assert_int_ge(noreturn_calls(f, sym_addr(&b, "die_by_exit"), NULL, pn), 1);
		/* each reaches the other by a call (-O0) or a tail call */
		const char *spins[] = { "spin_even", "spin_odd" };
		for (int k = 0; k < 2; k++) {
			const struct cfg_function *g = fn(&b, spins[k], pn);
			uint64_t other = sym_addr(&b, spins[1 - k]);
			int n = 0;
			for (size_t c = 0; c < cfg_function__call_count(g); c++) {
				const struct cfg_call *C = cfg_function__call(g, c);
				if (C->target != other)
					continue;
				ck_assert_msg(C->noreturn, "%s: %s to %s at %#lx returns", pn,
					      C->tail ? "tail call" : "call", spins[1 - k],
					      (unsigned long)C->at);
				n++;
			}
			ck_assert_msg(n >= 1, "%s: %s does not reach %s", pn, spins[k], spins[1 - k]);
			noreturn_calls(g, other, NULL, pn);	/* and no fallthrough */
		}
		if (progs[i].cet)	/* buf[32] is protected */
			ck_assert_int_ge(noreturn_calls(fn(&b, "check_buffer", pn), 0,
							"__stack_chk_fail@plt", pn), 1);
		f = fn(&b, "check_assert", pn);
		ck_assert_int_ge(noreturn_calls(f, 0, "__assert_fail@plt", pn), 1);
		ck_assert_int_ge(noreturn_calls(f, 0, "abort@plt", pn), 1);
		ck_assert_int_ge(noreturn_calls(f, 0, "error@plt", pn), 1);
		ck_assert_int_ge(noreturn_calls(fn(&b, "check_buffer", pn), 0, "exit@plt", pn), 1);
		/* and a returning call keeps its fallthrough */
		f = fn(&b, "noreturn_run", pn);
		bool any = false;
		for (size_t c = 0; c < cfg_function__call_count(f); c++) {
			const struct cfg_call *C = cfg_function__call(f, c);
			if (C->target == sym_addr(&b, "check_buffer") && !C->tail) {
				ck_assert(!C->noreturn);
				ck_assert(block_has_kind(f, C->at, CFG_EDGE_CALL_RETURN));
				any = true;
			}
		}
		ck_assert_msg(any || progs[i].opt, "%s: no call to check_buffer", pn);
		both_close(&b);
	}
}
END_TEST

START_TEST(tail_calls_leave_the_function)
{
	need_corpus();
	for (size_t i = 0; i < nprogs; i++) {
		if (progs[i].opt == 0 || progs[i].bare)
			continue;
		struct both b;
		const char *pn = progs[i].name;
		both_open(&b, &progs[i]);
		const struct cfg_function *f = fn(&b, "tc_forward", pn);
		uint64_t leaf = sym_addr(&b, "tc_leaf");
		bool tail = false;
		for (size_t c = 0; c < cfg_function__call_count(f); c++) {
			const struct cfg_call *C = cfg_function__call(f, c);
			if (C->target == leaf && C->tail)
				tail = true;
		}
		ck_assert_msg(tail, "%s: tc_forward does not tail-call tc_leaf", pn);
		bool edge = false;
		for (size_t e = 0; e < cfg_function__edge_count(f); e++) {
			const struct cfg_edge *E = cfg_function__edge(f, e);
			if (E->kind == CFG_EDGE_TAIL_CALL && E->to_addr == leaf && E->to < 0)
				edge = true;
		}
		ck_assert(edge);
		ck_assert(!cfg_function__range_of(f, leaf));
		ck_assert_int_lt(cfg_function__block_at(f, leaf), 0);
		/* through the PLT */
		f = fn(&b, "tc_plt", pn);
		tail = false;
		for (size_t c = 0; c < cfg_function__call_count(f); c++)
			if (cfg_function__call(f, c)->tail &&
			    !strcmp(cfg_function__call(f, c)->name, "strlen@plt"))
				tail = true;
		ck_assert_msg(tail, "%s: tc_plt does not tail-call strlen@plt", pn);
		/* tc_forward is only ever jumped to, from tc_choose alone: a
		 * function all the same (an unconditional jmp, frame torn down),
		 * not a cold part of tc_choose */
		f = fn(&b, "tc_choose", pn);
		uint64_t fwd = sym_addr(&b, "tc_forward");
		tail = false;
		for (size_t c = 0; c < cfg_function__call_count(f); c++)
			tail |= cfg_function__call(f, c)->tail && cfg_function__call(f, c)->target == fwd;
		ck_assert_msg(tail, "%s: tc_choose does not tail-call tc_forward", pn);
		ck_assert(!cfg_function__range_of(f, fwd));
		uint64_t at;
		ck_assert_int_eq(cfg_reader__function_at(b.p.r, fwd + 1, &at), 0);
		ck_assert_uint_eq(at, fwd);
		both_close(&b);
	}
}
END_TEST

/* Cold parts (FUNC.cold) are ranges of their function, also the cold part
 * of a leaf function, which starts in a function's entry state like a
 * function reached by a tail call; an address in one leads to its parent
 * (a sample there is the parent's), with or without symbols; and no
 * function starts there. */
START_TEST(cold_parts_are_ranges_of_their_function)
{
	need_corpus();
	size_t cold = 0;
	for (size_t i = 0; i < nprogs; i++) {
		struct both b;
		const char *pn = progs[i].name;
		both_open(&b, &progs[i]);
		struct cfg_reader *un;
		ck_assert_int_eq(cfg_reader__open_elf(progs[i].path, 0, NULL, &un), 0);
		uint64_t *starts;
		size_t nstarts;
		ck_assert_int_eq(cfg_reader__function_starts(b.p.r, cfg_function__entry(b.p.f[0]),
							     &starts, &nstarts), 0);
		for (size_t k = 0; k < b.syms.n; k++) {
			const struct or_sym *s = &b.syms.v[k];
			char *dot = strstr(s->name, ".cold");
			if (strcmp(s->type, "FUNC") || !dot)
				continue;
			char parent[96];
			snprintf(parent, sizeof(parent), "%.*s", (int)(dot - s->name), s->name);
			const struct cfg_function *f = fn(&b, parent, pn);
			const struct cfg_range *r = cfg_function__range_of(f, s->addr);
			ck_assert_msg(r && r->start == s->addr && r->end == s->addr + s->size,
				      "%s: %s is not a range of %s", pn, s->name, parent);
			ck_assert_uint_ge(cfg_function__range_count(f), 2);
			for (size_t e = 0; e < cfg_function__edge_count(f); e++)
				ck_assert_msg(cfg_function__edge(f, e)->kind != CFG_EDGE_TAIL_CALL ||
						      cfg_function__edge(f, e)->to_addr != s->addr,
					      "%s: %s tail-calls its cold part", pn, parent);
			for (size_t q = 0; q < nstarts; q++)
				ck_assert_msg(starts[q] != s->addr, "%s: a function starts at %s", pn,
					      s->name);
			uint64_t want = sym_addr(&b, parent), at;
			uint64_t probe[] = { s->addr, s->addr + s->size - 1 };
			for (int q = 0; q < 2; q++) {
				ck_assert_int_eq(cfg_reader__function_at(b.p.r, probe[q], &at), 0);
				ck_assert_msg(at == want, "%s: %#lx in %s leads to %#lx, not %s (stripped)",
					      pn, (unsigned long)probe[q], s->name, (unsigned long)at,
					      parent);
				ck_assert_int_eq(cfg_reader__function_at(un, probe[q], &at), 0);
				ck_assert_msg(at == want, "%s: %#lx in %s leads to %#lx, not %s", pn,
					      (unsigned long)probe[q], s->name, (unsigned long)at, parent);
			}
			struct cfg_function *g;
			struct cfg_build_opts bo = { .sz = sizeof(bo), .find_entry = true };
			ck_assert_int_eq(cfg_function__build(b.p.r, s->addr + 1, &bo, &g), 0);
			ck_assert_uint_eq(cfg_function__entry(g), want);
			ck_assert_uint_eq(cfg_function__range_count(g), cfg_function__range_count(f));
			cfg_function__free(g);
			cold++;
		}
		free(starts);
		cfg_reader__free(un);
		both_close(&b);
	}
	diag("%zu cold parts found in their functions", cold);
	ck_assert_uint_ge(cold, 8);
}
END_TEST

/* Back edges and exits of loops whose shape the source fixes: every loop
 * has both (loop_nest3's three, at every level of optimisation), and
 * loop_two_latches's two gotos are two back edges at -O0. */
START_TEST(loop_back_edges_and_exits_of_known_loops)
{
	need_corpus();
	size_t two = 0;
	for (size_t i = 0; i < nprogs; i++) {
		if (progs[i].bare)
			continue;
		struct both b;
		const char *pn = progs[i].name;
		both_open(&b, &progs[i]);
		const struct cfg_function *f = fn(&b, "loop_nest3", pn);
		uint32_t deepest = 0;
		for (size_t l = 0; l < cfg_function__loop_count(f); l++) {
			const struct cfg_loop *L = cfg_function__loop(f, l);
			ck_assert_msg(L->back_edge_count >= 1 && L->exit_count >= 1,
				      "%s: loop_nest3 loop at %#lx: %u back edges, %u exits", pn,
				      (unsigned long)cfg_function__block(f, L->header)->start,
				      L->back_edge_count, L->exit_count);
			for (uint32_t k = 0; k < L->back_edge_count; k++)
				ck_assert_uint_eq(cfg_function__edge(f, L->back_edges[k])->to, L->header);
			if (L->depth > deepest)
				deepest = L->depth;
		}
		ck_assert_msg(deepest >= 2, "%s: loop_nest3 nests %u deep", pn, deepest);
		if (progs[i].opt == 0) {
			f = fn(&b, "loop_two_latches", pn);
			ck_assert_uint_ge(cfg_function__loop_count(f), 1);
			const struct cfg_loop *L = cfg_function__loop(f, 0);
			ck_assert_msg(L->back_edge_count == 2, "%s: loop_two_latches: %u back edges", pn,
				      L->back_edge_count);
			two++;
		}
		both_close(&b);
	}
	ck_assert_uint_eq(two, 4);
}
END_TEST

/* Landing pads (cleanup.c, built with -fexceptions): no branch reaches
 * them, the LSDA says where they are; with them with_cleanup's extent is
 * its symbol's (a cold part's too, checked above), and the pads are blocks
 * that only the unwinder enters. */
START_TEST(landing_pads_are_in_their_function)
{
	need_corpus();
	size_t checked = 0;
	for (size_t i = 0; i < nprogs; i++) {
		if (progs[i].bare)
			continue;
		struct both b;
		const char *pn = progs[i].name;
		both_open(&b, &progs[i]);
		const struct cfg_function *f = fn(&b, "with_cleanup", pn);
		const struct or_sym *s = or_sym_named(&b.syms, "with_cleanup");
		const struct cfg_range *r = cfg_function__range_of(f, s->addr);
		ck_assert_msg(r && r->start == s->addr && r->end == s->addr + s->size,
			      "%s: with_cleanup [%#lx, %#lx) is [%#lx, %#lx)", pn,
			      (unsigned long)s->addr, (unsigned long)(s->addr + s->size),
			      r ? (unsigned long)r->start : 0UL, r ? (unsigned long)r->end : 0UL);
		size_t pads = 0;
		for (size_t k = 0; k < cfg_function__block_count(f); k++)
			pads += k != cfg_function__entry_block(f) &&
				cfg_function__block(f, k)->idom < 0;
		ck_assert_msg(pads >= 1, "%s: with_cleanup has no landing pad", pn);
		ck_assert_int_eq(cfg_function__error(f, NULL, NULL), CFG_ERR_NONE);
		both_close(&b);
		checked++;
	}
	ck_assert_uint_eq(checked, NPROG - 2);
}
END_TEST

/* A non-PIE program that exports nothing: its .gnu.hash hashes no symbol,
 * yet .dynsym holds the imports its PLT slots name. The stubs keep their
 * names (cfg_reader__lookup finds each by it), abort@plt does not return, and the cold parts that call it end
 * there instead of running into what follows: every function's extent is
 * its symbol's. */
START_TEST(plt_names_without_exported_symbols)
{
	need_corpus();
	size_t checked = 0;
	for (size_t i = 0; i < nprogs; i++) {
		if (!progs[i].bare)
			continue;
		const char *pn = progs[i].name;
		/* the premise: nothing defined among the dynamic symbols */
		char *cmd;
		int st;
		ck_assert(asprintf(&cmd, "readelf --dyn-syms -W '%s'", progs[i].path) > 0);
		char *out = tu_run(cmd, &st);
		free(cmd);
		ck_assert_ptr_nonnull(out);
		size_t imports = 0;
		for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
			char type[16], ndx[16];
			unsigned n;
			if (sscanf(l, " %u: %*x %*s %15s %*s %*s %15s", &n, type, ndx) != 3 || n == 0)
				continue;
			ck_assert_msg(!strcmp(ndx, "UND"), "%s exports %s", pn, l);
			imports += !strcmp(type, "FUNC");
		}
		free(out);
		ck_assert_uint_ge(imports, 4);
		struct both b;
		both_open(&b, &progs[i]);
		uint64_t plo, phi;
		ck_assert(or_section(progs[i].path, ".plt", &plo, &phi) == 0);
		size_t aborts = 0, stubs = 0;
		for (size_t k = 0; k < b.p.n; k++) {
			const struct cfg_function *f = b.p.f[k];
			for (size_t c = 0; c < cfg_function__call_count(f); c++) {
				const struct cfg_call *C = cfg_function__call(f, c);
				if (C->target < plo || C->target >= phi)
					continue;
				stubs++;
				size_t nl = strlen(C->name);
				ck_assert_msg(nl > 4 && !strcmp(C->name + nl - 4, "@plt"),
					      "%s: call at %#lx to the PLT has no name", pn,
					      (unsigned long)C->at);
				/* and that name finds the stub: one naming */
				uint64_t at = 0;
				ck_assert_int_eq(cfg_reader__lookup(b.p.r, C->name, &at), 0);
				ck_assert_msg(at == C->target, "%s: %s is %#lx, called at %#lx",
					      pn, C->name, (unsigned long)at,
					      (unsigned long)C->target);
			}
			aborts += noreturn_calls(f, 0, "abort@plt", pn);
		}
		ck_assert_uint_ge(stubs, 4);
		ck_assert_uint_ge(aborts, 2);
		/* a library's noreturn function no table names: the call ends
		 * bare_check's code, which is all that tells */
		ck_assert_int_ge(noreturn_calls(fn(&b, "bare_check", pn), 0, "bare_fatal@plt", pn), 1);
		for (size_t k = 0; k < b.syms.n; k++) {
			const struct or_sym *s = &b.syms.v[k];
			if (strcmp(s->type, "FUNC") || !s->size)
				continue;
			const struct cfg_function *f = or_function_at(&b.p, s->addr);
			const struct cfg_range *r = f ? cfg_function__range_of(f, s->addr) : NULL;
			ck_assert_msg(r && r->start == s->addr && r->end == s->addr + s->size,
				      "%s: %s [%#lx, %#lx) is [%#lx, %#lx)", pn, s->name,
				      (unsigned long)s->addr, (unsigned long)(s->addr + s->size),
				      r ? (unsigned long)r->start : 0UL, r ? (unsigned long)r->end : 0UL);
		}
		both_close(&b);
		checked++;
	}
	ck_assert_uint_eq(checked, 2);
}
END_TEST

/* ---------------------------------------------------------- exports */

static struct json_object *get(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;
	ck_assert_msg(json_object_object_get_ex(o, key, &v), "no key %s", key);
	return v;
}

static uint64_t hexstr(struct json_object *o)
{
	ck_assert(json_object_is_type(o, json_type_string));
	const char *s = json_object_get_string(o);
	ck_assert_msg(!strncmp(s, "0x", 2), "not a hex string: %s", s);
	return strtoull(s, NULL, 16);
}

/* "error": null, or where and why the CFG is incomplete. */
static void json_error_matches(struct json_object *o, const struct cfg_function *f)
{
	uint64_t at;
	const char *msg;
	enum cfg_error e = cfg_function__error(f, &at, &msg);
	struct json_object *er = get(o, "error");
	if (e == CFG_ERR_NONE) {
		ck_assert_msg(er == NULL, "error not null: %s", json_object_get_string(er));
		return;
	}
	ck_assert(json_object_is_type(er, json_type_object));
	ck_assert_uint_eq(hexstr(get(er, "at")), at);
	ck_assert_str_eq(json_object_get_string(get(er, "kind")), cfg_error_name(e));
	ck_assert_str_eq(json_object_get_string(get(er, "msg")), msg);
}

START_TEST(json_has_the_documented_shape)
{
	need_corpus();
	struct both b;
	both_open(&b, prog_named("gcc-O2-pie"));
	size_t checked = 0;
	for (size_t i = 0; i < b.p.n; i++) {
		const struct cfg_function *f = b.p.f[i];
		struct cfg_write_opts wo = { .sz = sizeof(wo), .format = CFG_FORMAT_JSON };
		ssize_t len = cfg_function__snprint(f, NULL, 0, &wo);
		ck_assert_int_gt(len, 0);
		char *txt = malloc((size_t)len + 1);
		ck_assert_int_eq(cfg_function__snprint(f, txt, (size_t)len + 1, &wo), len);
		struct json_object *o = json_tokener_parse(txt);
		ck_assert_msg(o, "invalid JSON: %.200s", txt);
		ck_assert_uint_eq(hexstr(get(o, "entry")), cfg_function__entry(f));
		ck_assert(json_object_is_type(get(o, "name"), json_type_string));
		json_error_matches(o, f);
		struct json_object *a = get(o, "ranges");
		ck_assert_uint_eq(json_object_array_length(a), cfg_function__range_count(f));
		for (size_t k = 0; k < json_object_array_length(a); k++) {
			struct json_object *r = json_object_array_get_idx(a, k);
			ck_assert_uint_lt(hexstr(json_object_array_get_idx(r, 0)),
					  hexstr(json_object_array_get_idx(r, 1)));
		}
		a = get(o, "blocks");
		ck_assert_uint_eq(json_object_array_length(a), cfg_function__block_count(f));
		for (size_t k = 0; k < json_object_array_length(a); k++) {
			struct json_object *bl = json_object_array_get_idx(a, k);
			ck_assert_uint_eq(hexstr(get(bl, "start")), cfg_function__block(f, k)->start);
			ck_assert_uint_eq(hexstr(get(bl, "end")), cfg_function__block(f, k)->end);
			struct json_object *su = get(bl, "succs");
			for (size_t q = 0; q < json_object_array_length(su); q++)
				ck_assert_int_ge(cfg_function__block_at(
							 f, hexstr(json_object_array_get_idx(su, q))),
						 0);
		}
		static const char *kinds[] = { "fallthrough", "taken", "not_taken", "jump",
					       "jump_table", "call_return", "tail_call" };
		a = get(o, "edges");
		for (size_t k = 0; k < json_object_array_length(a); k++) {
			struct json_object *e = json_object_array_get_idx(a, k);
			hexstr(get(e, "from"));
			hexstr(get(e, "to"));
			const char *kind = json_object_get_string(get(e, "kind"));
			bool known = false;
			for (int q = 0; q < 7; q++)
				known |= !strcmp(kind, kinds[q]);
			ck_assert_msg(known, "edge kind %s", kind);
		}
		a = get(o, "jump_tables");
		for (size_t k = 0; k < json_object_array_length(a); k++) {
			hexstr(get(json_object_array_get_idx(a, k), "at"));
			ck_assert_uint_gt(
				json_object_array_length(get(json_object_array_get_idx(a, k), "targets")),
				0);
		}
		a = get(o, "calls");
		for (size_t k = 0; k < json_object_array_length(a); k++) {
			struct json_object *c = json_object_array_get_idx(a, k);
			hexstr(get(c, "at"));
			struct json_object *t = get(c, "target");
			if (t)
				hexstr(t);
			ck_assert(json_object_is_type(get(c, "name"), json_type_string));
			ck_assert(json_object_is_type(get(c, "noreturn"), json_type_boolean));
		}
		a = get(o, "loops");
		ck_assert_uint_eq(json_object_array_length(a), cfg_function__loop_count(f));
		for (size_t k = 0; k < json_object_array_length(a); k++) {
			struct json_object *l = json_object_array_get_idx(a, k);
			hexstr(get(l, "header"));
			ck_assert_uint_ge(json_object_array_length(get(l, "entries")), 1);
			ck_assert_uint_ge(json_object_array_length(get(l, "blocks")), 1);
			ck_assert_int_ge(json_object_get_int(get(l, "depth")), 1);
			struct json_object *p = get(l, "parent");
			if (p)
				hexstr(p);
			ck_assert(json_object_is_type(get(l, "irreducible"), json_type_boolean));
		}
		json_object_put(o);
		free(txt);
		checked++;
	}
	ck_assert_uint_ge(checked, 30);
	both_close(&b);
}
END_TEST

START_TEST(hot_loop_attribution_and_dot_shading)
{
	need_corpus();
	struct both b;
	both_open(&b, prog_named("gcc-O2-pie"));
	struct cfg_function *f = NULL;
	uint64_t entry = sym_addr(&b, "loop_nest3");
	for (size_t i = 0; i < b.p.n; i++)
		if (cfg_function__entry(b.p.f[i]) == entry)
			f = b.p.f[i];
	ck_assert_ptr_nonnull(f);
	/* the deepest loop gets most samples, its parent a few more */
	ssize_t deep = -1;
	for (size_t l = 0; l < cfg_function__loop_count(f); l++)
		if (deep < 0 || cfg_function__loop(f, l)->depth > cfg_function__loop(f, deep)->depth)
			deep = (ssize_t)l;
	ck_assert_int_ge(deep, 0);
	const struct cfg_loop *L = cfg_function__loop(f, deep);
	ck_assert_int_ge(L->depth, 2);
	uint64_t hdr = cfg_function__block(f, L->header)->start;
	uint64_t outer = cfg_function__block(f, cfg_function__loop(f, L->parent)->header)->start;
	struct cfg_sample s[] = { { hdr, 90 }, { hdr + 1, 5 }, { outer, 3 }, { entry, 2 },
				  { 0x10, 1000 } };
	ck_assert_uint_eq(cfg_function__attribute(f, s, 5), 100);
	ck_assert_int_eq(cfg_function__hottest_loop(f), deep);
	ck_assert_uint_eq(L->samples, 95);	/* nested samples count in the parent too */
	ck_assert_uint_eq(cfg_function__loop(f, L->parent)->samples, 98);
	ck_assert_uint_eq(cfg_function__block(f, L->header)->samples, 95);

	struct cfg_write_opts wo = { .sz = sizeof(wo), .format = CFG_FORMAT_DOT };
	char *dot = malloc(1 << 20);
	ck_assert_int_gt(cfg_function__snprint(f, dot, 1 << 20, &wo), 0);
	ck_assert_ptr_nonnull(strstr(dot, "digraph"));
	ck_assert_ptr_nonnull(strstr(dot, "subgraph cluster_loop"));
	ck_assert_ptr_nonnull(strstr(dot, "fillcolor"));
	ck_assert_ptr_nonnull(strstr(dot, "(95 samples)"));
	/* clusters nest: the inner one opens before its parent closes */
	char *c1 = strstr(dot, "subgraph cluster_loop"), *c2 = c1 ? strstr(c1 + 1, "subgraph") : NULL;
	ck_assert_ptr_nonnull(c2);
	ck_assert_ptr_null(memchr(c1, '}', (size_t)(c2 - c1)));
	wo.format = CFG_FORMAT_TEXT;
	ck_assert_int_gt(cfg_function__snprint(f, dot, 1 << 20, &wo), 0);
	ck_assert_ptr_nonnull(strstr(dot, "samples 95"));
	wo.format = CFG_FORMAT_LOOPS;
	ck_assert_int_gt(cfg_function__snprint(f, dot, 1 << 20, &wo), 0);
	ck_assert_ptr_nonnull(strstr(dot, "95 samples"));
	ck_assert_ptr_nonnull(strstr(dot, "depth 2"));
	/* a short buffer gets what fits, and the full length is returned */
	char small[16];
	ssize_t full = cfg_function__snprint(f, small, sizeof(small), &wo);
	ck_assert_int_gt(full, (ssize_t)sizeof(small));
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
	free(dot);
	both_close(&b);
}
END_TEST

/* ---------------------------------------------------------- bad input */

START_TEST(bad_code_gives_an_error_not_a_crash)
{
	uint8_t code[256];
	struct buf b = { code, sizeof(code), 0x20000 };
	struct cfg_reader *r = buf_reader(&b);
	struct cfg_function *f;
	uint64_t at;
	const char *msg;

	/* data in code: 0x06 is invalid in 64-bit mode */
	memset(code, 0x06, sizeof(code));
	ck_assert_int_eq(cfg_function__build(r, 0x20000, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, &at, &msg), CFG_ERR_INVALID);
	ck_assert_uint_eq(at, 0x20000);
	ck_assert_ptr_nonnull(strstr(msg, "0x20000"));
	cfg_function__free(f);

	/* straight-line code running off the readable end */
	cfg_reader__flush(r);
	memset(code, 0x90, sizeof(code));
	ck_assert_int_eq(cfg_function__build(r, 0x20000, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, &at, NULL), CFG_ERR_UNREADABLE);
	ck_assert_uint_eq(at, 0x20000 + sizeof(code));
	cfg_function__free(f);

	/* an instruction cut by the end of readable memory */
	cfg_reader__flush(r);
	code[sizeof(code) - 2] = 0xe8;	/* call rel32, 2 of 5 bytes */
	ck_assert_int_eq(cfg_function__build(r, 0x20000 + sizeof(code) - 2, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, NULL, NULL), CFG_ERR_UNREADABLE);
	cfg_function__free(f);

	/* a jump out of readable memory */
	cfg_reader__flush(r);
	code[0] = 0xe9;		/* jmp rel32 far away */
	code[1] = 0x00, code[2] = 0x00, code[3] = 0x00, code[4] = 0x10;
	ck_assert_int_eq(cfg_function__build(r, 0x20000, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, &at, NULL), CFG_ERR_NOT_CODE);
	cfg_function__free(f);

	/* the entry itself unreadable */
	ck_assert_int_eq(cfg_function__build(r, 0x90000, NULL, &f), 0);
	ck_assert_int_ne(cfg_function__error(f, NULL, NULL), CFG_ERR_NONE);
	cfg_function__free(f);

	/* limits */
	cfg_reader__flush(r);
	memset(code, 0x90, sizeof(code));
	code[200] = 0xc3;
	struct cfg_build_opts o = { .sz = sizeof(o), .max_insns = 50 };
	ck_assert_int_eq(cfg_function__build(r, 0x20000, &o, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, NULL, NULL), CFG_ERR_LIMIT);
	ck_assert_uint_le(cfg_function__insn_count(f), 50);
	cfg_function__free(f);

	/* random bytes: anything but a crash (the sanitizers watch) */
	srand(42);
	for (int round = 0; round < 300; round++) {
		cfg_reader__flush(r);
		for (size_t i = 0; i < sizeof(code); i++)
			code[i] = (uint8_t)rand();
		ck_assert_int_eq(cfg_function__build(r, 0x20000 + (uint64_t)(rand() % 64), NULL, &f), 0);
		char *out = NULL;
		size_t len;
		FILE *m = open_memstream(&out, &len);
		for (int fmt = CFG_FORMAT_TEXT; fmt <= CFG_FORMAT_LOOPS; fmt++) {
			struct cfg_write_opts wo = { .sz = sizeof(wo), .format = fmt };
			ck_assert_int_eq(cfg_function__write(f, m, &wo), 0);
		}
		fclose(m);
		free(out);
		cfg_function__free(f);
	}
	cfg_reader__free(r);

	struct cfg_reader *e;
	ck_assert_int_lt(cfg_reader__open_elf("/nonexistent/file", 0, NULL, &e), 0);
	ck_assert_int_eq(cfg_reader__open_elf("/etc/passwd", 0, NULL, &e), -ENOEXEC);
}
END_TEST

/* ------------------------------------------- found on real libraries */

/* gcc schedules flag-neutral moves between the guard and its branch
 * (redis's rdbLoadObject: cmp ebp, 8; mov r9d, [rsp+8]; mov r10, rax; ja).
 * The guard must still bound the table: extra entries after it (the next
 * table, read as this one's) once sent the CFG into the middle of
 * instructions. */
START_TEST(jump_table_guard_with_moves_before_the_branch)
{
	static const uint8_t code[] = {
		0x83, 0xff, 0x02,		/* 00 cmp edi, 2 */
		0x41, 0x89, 0xf1,		/* 03 mov r9d, esi */
		0x49, 0x89, 0xc2,		/* 06 mov r10, rax */
		0x77, 0x13,			/* 09 ja 0x1e */
		0x48, 0x8d, 0x15, 0x0e, 0, 0, 0, /* 0b lea rdx, [rip+0xe] = 0x20 */
		0x48, 0x63, 0x04, 0xba,		/* 12 movsxd rax, [rdx+rdi*4] */
		0x48, 0x01, 0xd0,		/* 16 add rax, rdx */
		0xff, 0xe0,			/* 19 jmp rax */
		0xc3, 0xc3, 0xc3, 0xc3, 0xcc,	/* 1b cases 0-2, default; pad */
		/* 20: the table (relative to itself), then what follows it */
		0xfb, 0xff, 0xff, 0xff, 0xfc, 0xff, 0xff, 0xff, 0xfd, 0xff, 0xff, 0xff,
		0xfb, 0xff, 0xff, 0xff, 0xfb, 0xff, 0xff, 0xff, 0xfb, 0xff, 0xff, 0xff,
	};
	struct buf b = { code, sizeof(code), 0x40000 };
	struct cfg_reader *r = buf_reader(&b);
	struct cfg_function *f;
	ck_assert_int_eq(cfg_function__build(r, 0x40000, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, NULL, NULL), CFG_ERR_NONE);
	ck_assert_uint_eq(cfg_function__jump_table_count(f), 1);
	const struct cfg_jump_table *t = cfg_function__jump_table(f, 0);
	ck_assert_uint_eq(t->table, 0x40020);
	ck_assert_uint_eq(t->target_count, 3);
	for (uint32_t i = 0; i < 3; i++)
		ck_assert_uint_eq(t->targets[i], 0x4001b + i);
	cfg_function__free(f);
	cfg_reader__free(r);
}
END_TEST

/* Arithmetic on what code computes wraps like the CPU's: UBSan stopped a
 * sweep of libz3 at a left shift of -1 in the jump-table evaluator. Stack
 * heights from sub rsp, 0x7fffffff again and again must not overflow
 * either. Run under the sanitizers to mean anything. */
START_TEST(code_arithmetic_does_not_overflow)
{
	static const uint8_t shl[] = {
		0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff,	/* mov rax, -1 */
		0x48, 0xc1, 0xe0, 0x03,				/* shl rax, 3 */
		0x48, 0x8b, 0x04, 0xc5, 0, 0, 0, 0x80,		/* mov rax, [rax*8 - 2^31] */
		0xff, 0xe0,					/* jmp rax */
	};
	struct buf b = { shl, sizeof(shl), 0x50000 };
	struct cfg_reader *r = buf_reader(&b);
	struct cfg_function *f;
	ck_assert_int_eq(cfg_function__build(r, 0x50000, NULL, &f), 0);
	ck_assert_uint_eq(cfg_function__jump_table_count(f), 0);
	ck_assert_uint_eq(cfg_function__unresolved_count(f), 1);
	cfg_function__free(f);
	cfg_reader__free(r);

	uint8_t subs[7 * 8 + 1];
	for (size_t i = 0; i + 7 <= sizeof(subs); i += 7)	/* sub rsp, 0x7fffffff */
		memcpy(subs + i, (const uint8_t[]){ 0x48, 0x81, 0xec, 0xff, 0xff, 0xff, 0x7f }, 7);
	subs[sizeof(subs) - 1] = 0xc3;
	b = (struct buf){ subs, sizeof(subs), 0x60000 };
	r = buf_reader(&b);
	ck_assert_int_eq(cfg_function__build(r, 0x60000, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, NULL, NULL), CFG_ERR_NONE);
	ck_assert_uint_eq(cfg_function__insn_count(f), 9);
	cfg_function__free(f);
	cfg_reader__free(r);
}
END_TEST

/* Callee analysis is transitive: one build in libLLVM/libclang-cpp took
 * over a second analysing thousands of callees. It is bounded by a budget
 * per build; an answer cut short ("returns") is not remembered, so a later
 * build with budget left finds the truth. Here: f0 calls f1 ... calls f9,
 * which never returns (ud2), so none of them returns. */
START_TEST(callee_analysis_is_bounded_per_build)
{
	enum { N = 10 };
	uint8_t code[N * 8];
	memset(code, 0xcc, sizeof(code));
	for (int i = 0; i < N - 1; i++) {	/* call next; ret */
		uint8_t *p = code + i * 8;
		p[0] = 0xe8;
		int32_t rel = 8 - 5;
		memcpy(p + 1, &rel, 4);
		p[5] = 0xc3;
	}
	code[(N - 1) * 8] = 0x0f, code[(N - 1) * 8 + 1] = 0x0b;	/* ud2 */
	struct buf b = { code, sizeof(code), 0x70000 };
	struct cfg_reader *r = buf_reader(&b);
	struct cfg_function *f;

	struct cfg_build_opts o = { .sz = sizeof(o), .max_callee_insns = 3 };
	ck_assert_int_eq(cfg_function__build(r, 0x70000, &o, &f), 0);
	ck_assert(!cfg_function__noreturn(f));	/* f4... never looked at */
	ck_assert_uint_eq(cfg_function__block_count(f), 2);	/* call, ret */
	cfg_function__free(f);

	ck_assert_int_eq(cfg_function__build(r, 0x70000, NULL, &f), 0);
	ck_assert(cfg_function__noreturn(f));
	ck_assert_uint_eq(cfg_function__block_count(f), 1);
	ck_assert(cfg_function__call(f, 0)->noreturn);
	cfg_function__free(f);

	/* and it is remembered: even without budget the answer stands */
	o.max_callee_insns = 1;
	ck_assert_int_eq(cfg_function__build(r, 0x70008, &o, &f), 0);
	ck_assert(cfg_function__noreturn(f));
	cfg_function__free(f);
	cfg_reader__free(r);
}
END_TEST

static char *whole(const struct cfg_function *f)
{
	struct cfg_write_opts wo = { .sz = sizeof(wo), .format = CFG_FORMAT_JSON };
	ssize_t n = cfg_function__snprint(f, NULL, 0, &wo);
	ck_assert_int_gt(n, 0);
	char *s = malloc((size_t)n + 1);
	cfg_function__snprint(f, s, (size_t)n + 1, &wo);
	return s;
}

/* The function at addr, which must build whole. */
static struct cfg_function *build_at(struct cfg_reader *r, uint64_t addr)
{
	struct cfg_function *f;
	ck_assert_int_eq(cfg_function__build(r, addr, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, NULL, NULL), CFG_ERR_NONE);
	return f;
}

static const struct cfg_call *only_call(const struct cfg_function *f)
{
	ck_assert_uint_eq(cfg_function__call_count(f), 1);
	return cfg_function__call(f, 0);
}

/* Noreturn is a fixpoint over the call graph, not a recursion that takes
 * the function being analysed as returning:
 *   T: call P; ret              P: if (edi) { edi--; call Q }; ret
 *   Q: call P; ret              (P returns whatever Q does: so do Q, T)
 *   A: if (edi) { edi--; call B; ret }; ud2
 *   B: call A; ret              C: call A; ret   (none of A, B, C returns)
 *   R: if (edi) { edi--; call R }; ret   (returns, and so does its call) */
START_TEST(noreturn_is_a_fixpoint_over_recursion)
{
	uint8_t code[0x80];
	memset(code, 0xcc, sizeof(code));
	static const struct {
		uint8_t at;
		uint8_t bytes[16];
		uint8_t n;
	} parts[] = {
		{ 0x00, { 0xe8, 0x0b, 0, 0, 0, 0xc3 }, 6 },
		{ 0x10, { 0x85, 0xff, 0x74, 0x07, 0xff, 0xcf, 0xe8, 0x05, 0, 0, 0, 0xc3 }, 12 },
		{ 0x20, { 0xe8, 0xeb, 0xff, 0xff, 0xff, 0xc3 }, 6 },
		{ 0x40, { 0x85, 0xff, 0x74, 0x08, 0xff, 0xcf, 0xe8, 0x05, 0, 0, 0, 0xc3, 0x0f, 0x0b }, 14 },
		{ 0x50, { 0xe8, 0xeb, 0xff, 0xff, 0xff, 0xc3 }, 6 },
		{ 0x60, { 0xe8, 0xdb, 0xff, 0xff, 0xff, 0xc3 }, 6 },
		{ 0x70, { 0x85, 0xff, 0x74, 0x07, 0xff, 0xcf, 0xe8, 0xf5, 0xff, 0xff, 0xff, 0xc3 }, 12 },
	};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		memcpy(code + parts[i].at, parts[i].bytes, parts[i].n);
	const uint64_t B0 = 0x80000;
	struct buf b = { code, sizeof(code), B0 };

	/* T first: P is analysed under the assumption that it does not
	 * return, which Q used; P returns, so Q is analysed again */
	struct cfg_reader *r = buf_reader(&b);
	struct cfg_function *f = build_at(r, B0);
	ck_assert(!cfg_function__noreturn(f));
	ck_assert(!only_call(f)->noreturn);
	ck_assert(block_has_kind(f, B0, CFG_EDGE_CALL_RETURN));
	cfg_function__free(f);
	f = build_at(r, B0 + 0x20);
	ck_assert_msg(!cfg_function__noreturn(f), "Q kept an answer resting on a wrong assumption");
	ck_assert(!only_call(f)->noreturn);
	cfg_function__free(f);
	f = build_at(r, B0 + 0x10);
	ck_assert(!cfg_function__noreturn(f));
	ck_assert(!only_call(f)->noreturn);
	ck_assert(block_has_kind(f, B0 + 0x16, CFG_EDGE_CALL_RETURN));
	cfg_function__free(f);

	/* A, B, C in every order, each from a fresh reader */
	static const uint64_t order[][3] = { { 0x40, 0x50, 0x60 }, { 0x50, 0x40, 0x60 },
					     { 0x60, 0x50, 0x40 } };
	for (size_t o = 0; o < 3; o++) {
		cfg_reader__free(r);
		r = buf_reader(&b);
		for (int k = 0; k < 3; k++) {
			f = build_at(r, B0 + order[o][k]);
			ck_assert_msg(cfg_function__noreturn(f), "%#lx returns (order %zu)",
				      (unsigned long)(B0 + order[o][k]), o);
			ck_assert(only_call(f)->noreturn);
			ck_assert(!block_has_kind(f, only_call(f)->at, CFG_EDGE_CALL_RETURN));
			cfg_function__free(f);
		}
	}

	/* direct recursion that returns: built again once the assumption
	 * fails, so the recursive call keeps its return edge */
	cfg_reader__free(r);
	r = buf_reader(&b);
	f = build_at(r, B0 + 0x70);
	ck_assert(!cfg_function__noreturn(f));
	ck_assert(!only_call(f)->noreturn);
	ck_assert(block_has_kind(f, B0 + 0x76, CFG_EDGE_CALL_RETURN));
	cfg_function__free(f);
	cfg_reader__free(r);
}
END_TEST

static int name_error_at_0x20(void *arg, uint64_t addr, char *name, size_t size,
			      uint64_t *start)
{
	const struct buf *b = arg;
	if (addr < b->base + 0x20 || addr >= b->base + 0x30)
		return -ENOENT;
	snprintf(name, size, "error");
	*start = b->base + 0x20;
	return 0;
}

/* A program's own function named error (zlib's minigzip: error(msg)
 * prints and exits) is not glibc's error(status, ...), which returns when
 * status is 0: it is analysed, and the call to it does not return. */
START_TEST(a_local_function_named_error_is_analysed)
{
	uint8_t code[0x30];
	memset(code, 0xcc, sizeof(code));
	static const uint8_t caller[] = {
		0x85, 0xf6, 0x74, 0x0c,				/* 00 test esi, esi; je 0x10 */
		0x48, 0x8d, 0x3d, 0xf5, 0xff, 0xff, 0xff,	/* 04 lea rdi, [rip-11] */
		0xe8, 0x10, 0, 0, 0,				/* 0b call error (0x20) */
		0xc3,						/* 10 ret */
	};
	static const uint8_t error[] = {
		0xbf, 1, 0, 0, 0, 0xb8, 60, 0, 0, 0, 0x0f, 0x05,	/* exit(1) */
		0xc3,
	};
	memcpy(code, caller, sizeof(caller));
	memcpy(code + 0x20, error, sizeof(error));
	struct buf b = { code, sizeof(code), 0xb0000 };
	struct cfg_reader *r = buf_reader(&b);
	cfg_reader__set_symbolizer(r, name_error_at_0x20, NULL, &b);
	struct cfg_function *f = build_at(r, 0xb0000);
	const struct cfg_call *C = only_call(f);
	ck_assert_str_eq(C->name, "error");
	ck_assert(C->noreturn);
	ck_assert(!block_has_kind(f, C->at, CFG_EDGE_CALL_RETURN));
	ck_assert(!cfg_function__noreturn(f));
	cfg_function__free(f);
	cfg_reader__free(r);
}
END_TEST

/* xbegin: a transaction that aborts resumes at its target, a branch
 * Zydis files with no successor; xabort outside a transaction falls
 * through (glibc's lock elision). And code after a trap (hlt; jmp back to
 * it, glibc's check_one_fd) is the function's. */
START_TEST(transactions_and_traps)
{
	static const uint8_t code[] = {
		0xc7, 0xf8, 0x05, 0, 0, 0,	/* 00 xbegin 0x0b */
		0xc6, 0xf8, 0xff,		/* 06 xabort 0xff */
		0xeb, 0x03,			/* 09 jmp 0x0e */
		0x83, 0xf8, 0xff,		/* 0b cmp eax, -1 (the abort path) */
		0x85, 0xff,			/* 0e test edi, edi */
		0x74, 0x01,			/* 10 je 0x13 */
		0xc3,				/* 12 ret */
		0xf4,				/* 13 hlt */
		0xeb, 0xfd,			/* 14 jmp 0x13: dead, but the function's */
	};
	struct buf b = { code, sizeof(code), 0xc0000 };
	struct cfg_reader *r = buf_reader(&b);
	struct cfg_function *f = build_at(r, 0xc0000);
	ck_assert(block_has_kind(f, 0xc0000, CFG_EDGE_TAKEN));
	ck_assert_int_ge(cfg_function__block_at(f, 0xc000b), 0);	/* the abort path */
	ck_assert_int_ge(cfg_function__block_at(f, 0xc0006), 0);
	ck_assert_int_ge(cfg_function__block_at(f, 0xc0009), 0);	/* after xabort */
	ck_assert_uint_eq(cfg_function__call_count(f), 0);
	ck_assert_uint_eq(cfg_function__range_count(f), 1);
	ck_assert_uint_eq(cfg_function__range(f, 0)->end, 0xc0000 + sizeof(code));
	cfg_function__free(f);
	cfg_reader__free(r);
}
END_TEST

/* jmp through a register: a tail call once the frame is torn down; with
 * the frame live, an unresolved jump that leaves the CFG incomplete there
 * (said in the JSON and the dot too), not a tail call. */
START_TEST(indirect_jump_with_live_frame_is_not_a_tail_call)
{
	static const uint8_t code[] = {
		0x53, 0x48, 0x89, 0xf8, 0xff, 0xe0,		/* 00 push rbx; mov rax, rdi; jmp rax */
		0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
		0x53, 0x5b, 0x48, 0x89, 0xf8, 0xff, 0xe0,	/* 10 push; pop; mov; jmp rax */
	};
	struct buf b = { code, sizeof(code), 0x90000 };
	struct cfg_reader *r = buf_reader(&b);
	struct cfg_function *f;
	uint64_t at;
	const char *msg;
	ck_assert_int_eq(cfg_function__build(r, 0x90000, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, &at, &msg), CFG_ERR_UNRESOLVED);
	ck_assert_uint_eq(at, 0x90004);
	ck_assert_ptr_nonnull(strstr(msg, "0x90004"));
	ck_assert_uint_eq(cfg_function__call_count(f), 0);
	ck_assert_uint_eq(cfg_function__unresolved_count(f), 1);
	ck_assert(!cfg_function__noreturn(f));
	for (size_t e = 0; e < cfg_function__edge_count(f); e++)
		ck_assert_int_ne(cfg_function__edge(f, e)->kind, CFG_EDGE_TAIL_CALL);
	ck_assert_uint_eq(cfg_function__range(f, 0)->end, 0x90006);

	char *txt = whole(f);
	struct json_object *o = json_tokener_parse(txt);
	ck_assert_msg(o, "invalid JSON: %s", txt);
	json_error_matches(o, f);
	ck_assert_str_eq(json_object_get_string(get(get(o, "error"), "at")), "0x90004");
	json_object_put(o);
	free(txt);
	char dot[8192];
	struct cfg_write_opts wo = { .sz = sizeof(wo), .format = CFG_FORMAT_DOT };
	ck_assert_int_gt(cfg_function__snprint(f, dot, sizeof(dot), &wo), 0);
	ck_assert_ptr_nonnull(strstr(dot, "incomplete: unresolved indirect jump at 0x90004"));
	ck_assert_ptr_nonnull(strstr(dot, "b0 -> error"));
	cfg_function__free(f);

	ck_assert_int_eq(cfg_function__build(r, 0x90010, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, NULL, NULL), CFG_ERR_NONE);
	const struct cfg_call *C = only_call(f);
	ck_assert(C->tail && C->indirect && !C->noreturn && C->target == 0);
	ck_assert_uint_eq(C->at, 0x90015);
	txt = whole(f);
	o = json_tokener_parse(txt);
	json_error_matches(o, f);
	json_object_put(o);
	free(txt);
	cfg_function__free(f);
	cfg_reader__free(r);
}
END_TEST

/* More blocks than max_blocks: the first ones kept, an error at the first
 * one left out, and the exports still whole (edges to dropped blocks
 * left out). 100 x "je +0" (a block each), then ret. */
START_TEST(block_limit_is_an_error_not_a_crash)
{
	uint8_t code[201];
	for (int i = 0; i < 100; i++)
		code[2 * i] = 0x74, code[2 * i + 1] = 0x00;
	code[200] = 0xc3;
	struct buf b = { code, sizeof(code), 0xa0000 };
	struct cfg_reader *r = buf_reader(&b);
	struct cfg_function *f;
	ck_assert_int_eq(cfg_function__build(r, 0xa0000, NULL, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, NULL, NULL), CFG_ERR_NONE);
	ck_assert_uint_eq(cfg_function__block_count(f), 101);
	cfg_function__free(f);

	struct cfg_build_opts o = { .sz = sizeof(o), .max_blocks = 10 };
	uint64_t at;
	const char *msg;
	ck_assert_int_eq(cfg_function__build(r, 0xa0000, &o, &f), 0);
	ck_assert_int_eq(cfg_function__error(f, &at, &msg), CFG_ERR_LIMIT);
	ck_assert_uint_eq(at, 0xa0000 + 2 * 10);
	ck_assert_ptr_nonnull(strstr(msg, "more than 10 blocks"));
	ck_assert_uint_eq(cfg_function__block_count(f), 10);
	for (size_t e = 0; e < cfg_function__edge_count(f); e++)
		ck_assert_int_lt(cfg_function__edge(f, e)->to, 10);
	char *txt = whole(f);
	struct json_object *j = json_tokener_parse(txt);
	ck_assert_msg(j, "invalid JSON: %s", txt);
	json_error_matches(j, f);
	json_object_put(j);
	free(txt);
	cfg_function__free(f);
	cfg_reader__free(r);
}
END_TEST

/* ---------------------------------------------------------- live */

/* The same stripped program, running: its code read from its memory gives
 * exactly the CFGs its file gives (loaded at the same address), and it
 * finishes with the right checksum afterwards. */
START_TEST(live_process_matches_its_file)
{
	need_corpus();
	for (size_t i = 0; i < nprogs; i++) {
		if (strcmp(progs[i].name, "gcc-O2-pie") && strcmp(progs[i].name, "clang-O3-nopie"))
			continue;
		char *cmd;
		int st;
		ck_assert(asprintf(&cmd, "'%s' 40", progs[i].stripped) > 0);
		char *expect = tu_run(cmd, &st);
		free(cmd);
		ck_assert_ptr_nonnull(expect);
		expect[strcspn(expect, "\n")] = 0;
		ck_assert_ptr_nonnull(strstr(expect, "checksum"));

		struct tu_proc tp;
		char *argv[] = { progs[i].stripped, "40", "wait", NULL };
		char line[256];
		ck_assert_int_eq(tu_spawn(&tp, argv, false), 0);
		ck_assert_int_ge(tu_wait_for(&tp, "ready", line, sizeof(line), 10000), 0);
		struct attach_target *t;
		struct attach_error aerr;
		ck_assert_msg(attach_seize(tp.pid, NULL, &t, &aerr) == 0, "%s", aerr.msg);
		struct cfg_reader *live;
		ck_assert_int_eq(cfg_reader__open_live(t, NULL, &live), 0);
		struct attach_maps *maps;
		ck_assert_int_eq(attach_maps__read(tp.pid, &maps), 0);
		char real[PATH_MAX];
		ck_assert_ptr_nonnull(realpath(progs[i].stripped, real));
		const struct attach_map *m = attach_maps__first_of(maps, real);
		ck_assert_msg(m != NULL, "%s not mapped", real);
		uint64_t bias = progs[i].pie ? m->start : 0;
		struct cfg_reader *file;
		ck_assert_int_eq(cfg_reader__open_elf(progs[i].stripped, bias, NULL, &file), 0);

		uint64_t *ls, *fs;
		size_t ln, fnn;
		ck_assert_int_eq(cfg_reader__function_starts(live, m->start, &ls, &ln), 0);
		ck_assert_int_eq(cfg_reader__function_starts(file, m->start, &fs, &fnn), 0);
		for (size_t k = 0; ln != fnn && k < (ln > fnn ? ln : fnn); k++)
			diag("live %#lx file %#lx", k < ln ? (unsigned long)ls[k] : 0,
			     k < fnn ? (unsigned long)fs[k] : 0);
		ck_assert_uint_eq(ln, fnn);
		ck_assert_uint_ge(ln, 30);
		for (size_t k = 0; k < ln; k++) {
			ck_assert_uint_eq(ls[k], fs[k]);
			struct cfg_function *a, *b;
			ck_assert_int_eq(cfg_function__build(live, ls[k], NULL, &a), 0);
			ck_assert_int_eq(cfg_function__build(file, fs[k], NULL, &b), 0);
			char *ja = whole(a), *jb = whole(b);
			ck_assert_msg(!strcmp(ja, jb), "%s at %#lx: live %.300s\nfile %.300s",
				      progs[i].name, (unsigned long)ls[k], ja, jb);
			ck_assert_int_eq(cfg_function__error(a, NULL, NULL), CFG_ERR_NONE);
			free(ja);
			free(jb);
			cfg_function__free(a);
			cfg_function__free(b);
		}
		free(ls);
		free(fs);

		/* libc as mapped: FDEs and names from its memory alone */
		uint64_t printf_at;
		ck_assert_int_eq(cfg_reader__lookup(live, "printf", &printf_at), 0);
		char name[64];
		uint64_t start;
		ck_assert_int_eq(cfg_reader__symbolize(live, printf_at + 1, name, sizeof(name), &start), 0);
		ck_assert_uint_eq(start, printf_at);
		ck_assert_ptr_nonnull(strstr(name, "printf"));
		ck_assert_int_eq(cfg_reader__function_starts(live, printf_at, &ls, &ln), 0);
		ck_assert_uint_ge(ln, 1000);
		bool has = false;
		for (size_t k = 0; k < ln; k++)
			has |= ls[k] == printf_at;
		ck_assert(has);
		free(ls);
		struct cfg_function *f;
		struct cfg_build_opts bo = { .sz = sizeof(bo), .find_entry = true };
		ck_assert_int_eq(cfg_function__build(live, printf_at + 4, &bo, &f), 0);
		ck_assert_uint_eq(cfg_function__entry(f), printf_at);
		ck_assert_str_eq(cfg_function__name(f), name);
		cfg_function__free(f);

		cfg_reader__free(file);
		cfg_reader__free(live);
		attach_maps__free(maps);
		ck_assert_int_eq(attach_target__detach(t), 0);
		/* the target was not harmed: it runs on to the right answer */
		ck_assert_int_eq(kill(tp.pid, SIGUSR1), 0);
		ck_assert_int_ge(tu_wait_for(&tp, "checksum", line, sizeof(line), 10000), 0);
		ck_assert_str_eq(line, expect);
		st = tu_wait(&tp, 10000);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		tu_kill(&tp);
		free(expect);
	}
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
	tcase_add_test(tc, clang_loop_headers_and_depths);
	tcase_add_test(tc, goto_into_a_loop_is_irreducible);
	tcase_add_test(tc, calls_that_do_not_return);
	tcase_add_test(tc, tail_calls_leave_the_function);
	tcase_add_test(tc, cold_parts_are_ranges_of_their_function);
	tcase_add_test(tc, loop_back_edges_and_exits_of_known_loops);
	tcase_add_test(tc, plt_names_without_exported_symbols);
	tcase_add_test(tc, landing_pads_are_in_their_function);
	tcase_add_test(tc, json_has_the_documented_shape);
	tcase_add_test(tc, hot_loop_attribution_and_dot_shading);
	suite_add_tcase(s, tc);

	TCase *unit = tcase_create("unit");
	tcase_add_test(unit, hand_made_irreducible_cycle);
	tcase_add_test(unit, overlapping_instructions_make_overlapping_blocks);
	tcase_add_test(unit, bad_code_gives_an_error_not_a_crash);
	tcase_add_test(unit, jump_table_guard_with_moves_before_the_branch);
	tcase_add_test(unit, code_arithmetic_does_not_overflow);
	tcase_add_test(unit, callee_analysis_is_bounded_per_build);
	tcase_add_test(unit, noreturn_is_a_fixpoint_over_recursion);
	tcase_add_test(unit, a_local_function_named_error_is_analysed);
	tcase_add_test(unit, transactions_and_traps);
	tcase_add_test(unit, indirect_jump_with_live_frame_is_not_a_tail_call);
	tcase_add_test(unit, block_limit_is_an_error_not_a_crash);
	suite_add_tcase(s, unit);

	TCase *live = tcase_create("live");
	tcase_set_timeout(live, 120);
	tcase_add_unchecked_fixture(live, corpus_setup, NULL);
	tcase_add_test(live, live_process_matches_its_file);
	suite_add_tcase(s, live);
	return tu_main(s);
}
