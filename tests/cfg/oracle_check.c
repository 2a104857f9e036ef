/* The three acceptance checks of cfg/ against oracles, shared by the test
 * suite (on the corpus) and cfg-oracle (on any program, file or running):
 * function bounds against .symtab, jump-table targets against the
 * relocations --emit-relocs keeps, observed edges against callgrind. The
 * analysed functions may sit at bias from the oracle's link-time
 * addresses (a PIE running). */
#include "tests/cfg/oracle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void say(FILE *log, const char *prefix, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(FILE *log, const char *prefix, const char *fmt, ...)
{
	if (!log)
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs(prefix, log);
	vfprintf(log, fmt, ap);
	fputc('\n', log);
	va_end(ap);
}

/* ---------------------------------------------------------- building */

/* [endbr64;] jmp [rip+slot]: a PLT entry, no function of the program */
static bool is_stub(const struct cfg_function *f)
{
	const struct cfg_call *c = cfg_function__call_count(f) == 1 ? cfg_function__call(f, 0) : NULL;
	return c && c->tail && c->indirect && cfg_function__insn_count(f) <= 2;
}

/* Insert x into the sorted known[*n] (room for it); false if there. */
static bool known_add(uint64_t *known, size_t *n, uint64_t x)
{
	size_t lo = 0, hi = *n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (known[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < *n && known[lo] == x)
		return false;
	memmove(known + lo + 1, known + lo, (*n - lo) * sizeof(*known));
	known[lo] = x;
	(*n)++;
	return true;
}

int or_program_build_at(struct cfg_reader *r, uint64_t in_module, uint64_t lo, uint64_t hi,
			struct or_program *p)
{
	memset(p, 0, sizeof(*p));
	p->r = r;
	uint64_t *starts;
	size_t n;
	if (cfg_reader__function_starts(r, in_module, &starts, &n) < 0)
		return -1;
	/* and every function those call or jump to in the module, transitively */
	size_t cap = n + 16;
	starts = realloc(starts, cap * sizeof(*starts));
	p->f = calloc(cap, sizeof(*p->f));
	size_t nfde = n, nknown = n;
	uint64_t *known = malloc(cap * sizeof(*known));	/* starts, sorted */
	memcpy(known, starts, n * sizeof(*known));	/* function_starts sorts */
	for (size_t i = 0; i < n; i++) {
		struct cfg_function *f;
		if (cfg_function__build(r, starts[i], NULL, &f) < 0)
			continue;
		if (i >= nfde && is_stub(f)) {	/* an unnamed PLT entry (IRELATIVE) */
			cfg_function__free(f);
			continue;
		}
		p->f[p->n++] = f;
		for (size_t c = 0; c < cfg_function__call_count(f); c++) {
			uint64_t t = cfg_function__call(f, c)->target;
			const char *nm = cfg_function__call(f, c)->name;
			/* a jump into another function's middle (glibc's asm
			 * string functions share their tails) starts none */
			uint64_t at;
			uint8_t b;
			if (!t || strstr(nm, "@plt") || t < lo || t >= hi ||
			    cfg_reader__read(r, t, &b, 1) != 1 ||
			    (cfg_reader__function_at(r, t, &at) == 0 && at != t))
				continue;
			if (n == cap) {
				cap *= 2;
				starts = realloc(starts, cap * sizeof(*starts));
				known = realloc(known, cap * sizeof(*known));
				p->f = realloc(p->f, cap * sizeof(*p->f));
			}
			if (known_add(known, &nknown, t))
				starts[n++] = t;
		}
	}
	free(starts);
	free(known);
	return 0;
}

/* ---------------------------------------------------------- bounds */

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

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static bool sorted_has(const uint64_t *v, size_t n, uint64_t x)
{
	return n && bsearch(&x, v, n, sizeof(*v), u64_cmp) != NULL;
}

void or_check_bounds(const struct or_syms *syms, const struct or_program *p, uint64_t bias,
		     FILE *log, const char *prefix, struct or_bounds *out)
{
	memset(out, 0, sizeof(*out));
	struct span *truth = calloc(syms->n + 1, sizeof(*truth));
	uint64_t *sizeless = calloc(syms->n + 1, sizeof(*sizeless));
	size_t nt = 0, ns = 0;
	for (size_t k = 0; k < syms->n; k++) {
		if (strcmp(syms->v[k].type, "FUNC"))
			continue;
		if (syms->v[k].size)
			truth[nt++] = (struct span){ syms->v[k].addr, syms->v[k].addr + syms->v[k].size };
		else
			sizeless[ns++] = syms->v[k].addr;
	}
	nt = uniq(truth, nt);
	qsort(sizeless, ns, sizeof(*sizeless), u64_cmp);
	size_t cap = 1, np = 0;
	for (size_t k = 0; k < p->n; k++)
		cap += cfg_function__range_count(p->f[k]);
	struct span *pred = calloc(cap, sizeof(*pred));
	for (size_t k = 0; k < p->n; k++)
		for (size_t j = 0; j < cfg_function__range_count(p->f[k]); j++) {
			const struct cfg_range *r = cfg_function__range(p->f[k], j);
			/* functions whose symbol has no size (crt's asm) have
			 * no truth to compare with */
			if (!sorted_has(sizeless, ns, r->start - bias))
				pred[np++] = (struct span){ r->start - bias, r->end - bias };
		}
	np = uniq(pred, np);
	size_t a = 0, b = 0;
	while (a < nt || b < np) {
		int c = a >= nt ? 1 : b >= np ? -1 : span_cmp(&truth[a], &pred[b]);
		if (c == 0) {
			out->exact++;
			a++;
			b++;
		} else if (c < 0) {
			say(log, prefix, "missed [%#lx, %#lx)", (unsigned long)truth[a].lo,
			    (unsigned long)truth[a].hi);
			out->missed++;
			a++;
		} else {
			say(log, prefix, "wrong [%#lx, %#lx)", (unsigned long)pred[b].lo,
			    (unsigned long)pred[b].hi);
			out->wrong++;
			b++;
		}
	}
	out->truth = nt;
	free(truth);
	free(pred);
	free(sizeless);
}

double or_f1(size_t exact, size_t wrong, size_t missed)
{
	size_t d = 2 * exact + wrong + missed;
	return d ? 2.0 * (double)exact / (double)d : 1.0;
}

/* ---------------------------------------------------------- jump tables */

/* The local label at or below slot, if one is within the table's reach:
 * with -Wa,-L a relative table's own label (.L4, .LJTI0_0) is kept in
 * .symtab at its first entry, and its entries are relative to it. */
static uint64_t table_label(const uint64_t *labels, size_t n, uint64_t slot)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (labels[mid] <= slot)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && slot - labels[lo - 1] < 65536 ? labels[lo - 1] : 0;
}

/* The found table holding slot (link-time address), or NULL. */
static const struct cfg_jump_table *table_of(const struct or_program *p, uint64_t slot,
					     uint64_t bias, uint32_t *idx)
{
	for (size_t k = 0; k < p->n; k++)
		for (size_t t = 0; t < cfg_function__jump_table_count(p->f[k]); t++) {
			const struct cfg_jump_table *J = cfg_function__jump_table(p->f[k], t);
			uint64_t s = slot + bias;
			if (s < J->table || (s - J->table) % J->entry_size)
				continue;
			uint64_t i = (s - J->table) / J->entry_size;
			if (i < J->target_count) {
				*idx = (uint32_t)i;
				return J;
			}
		}
	return NULL;
}

int or_check_tables(const char *unstripped, const struct or_syms *syms,
		    const struct or_program *p, uint64_t bias, FILE *log, const char *prefix,
		    struct or_tables *out)
{
	memset(out, 0, sizeof(*out));
	uint64_t tlo, thi;
	struct or_reloc *rel;
	size_t nrel;
	if (or_section(unstripped, ".text", &tlo, &thi) < 0 ||
	    or_read_relocs(unstripped, ".rela.rodata", &rel, &nrel) < 0)
		return -1;
	out->relocs = nrel;
	uint64_t rlo, rhi;	/* --emit-relocs keeps .rela.text too */
	out->emit_relocs = or_section(unstripped, ".rela.text", &rlo, &rhi) == 0;
	struct cfg_reader *un;
	if (cfg_reader__open_elf(unstripped, 0, NULL, &un) < 0) {
		free(rel);
		return -1;
	}
	uint64_t *labels = calloc(syms->n + 1, sizeof(*labels));
	size_t nl = 0;
	for (size_t i = 0; i < syms->n; i++)
		if (!strcmp(syms->v[i].type, "NOTYPE") && !strncmp(syms->v[i].name, ".L", 2))
			labels[nl++] = syms->v[i].addr;
	qsort(labels, nl, sizeof(*labels), u64_cmp);
	size_t ours = 0;
	for (size_t k = 0; k < p->n; k++) {
		out->tables += cfg_function__jump_table_count(p->f[k]);
		for (size_t t = 0; t < cfg_function__jump_table_count(p->f[k]); t++)
			ours += cfg_function__jump_table(p->f[k], t)->target_count;
	}
	for (size_t r = 0; r < nrel; r++) {
		uint64_t target = 0;
		bool pc = strstr(rel[r].type, "PC32") != NULL, unchecked = false;
		if (pc) {
			/* entry = target - table label */
			if (rel[r].sym_value < tlo || rel[r].sym_value >= thi)
				continue;
			int32_t v;
			uint64_t base = table_label(labels, nl, rel[r].offset);
			if (cfg_reader__read(un, rel[r].offset, &v, 4) != 4)
				continue;
			if (base)
				target = base + (uint64_t)(int64_t)v;
			else	/* no label: where the slot is can be checked, not where it leads */
				unchecked = true;
		} else {
			target = rel[r].sym_value + (uint64_t)rel[r].addend;
			if (target < tlo || target >= thi)
				continue;
		}
		if (!unchecked && (target < tlo || target >= thi))
			continue;
		out->slots++;
		uint32_t idx;
		const struct cfg_jump_table *J = table_of(p, rel[r].offset, bias, &idx);
		if (J && (unchecked || J->targets[idx] == target + bias)) {
			out->found++;
			out->unchecked += unchecked;
		} else if (unchecked) {
			say(log, prefix, "jump-table slot %#lx not in any table found",
			    (unsigned long)rel[r].offset);
		} else {
			say(log, prefix, "jump-table slot %#lx -> %#lx not found",
			    (unsigned long)rel[r].offset, (unsigned long)target);
		}
	}
	if (ours > out->slots) {
		say(log, prefix, "%zu table entries beyond the relocated ones", ours - out->slots);
		out->extra = ours - out->slots;
	}
	free(labels);
	free(rel);
	cfg_reader__free(un);
	return 0;
}

/* ---------------------------------------------------------- callgrind */

struct blk_ref {
	uint64_t start, end;
	uint32_t f, b;
};

static int blk_cmp(const void *a, const void *b)
{
	const struct blk_ref *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

struct call_ref {
	uint64_t at;
	bool counts;		/* a call, or a tail call through a stub or a pointer */
};

static int call_cmp(const void *a, const void *b)
{
	const struct call_ref *x = a, *y = b;
	return x->at < y->at ? -1 : x->at > y->at;
}

static bool block_has_edge(const struct cfg_function *f, size_t blk, uint64_t to)
{
	const struct cfg_block *b = cfg_function__block(f, blk);
	for (uint32_t e = b->first_succ; e < b->first_succ + b->succ_count; e++)
		if (cfg_function__edge(f, e)->to_addr == to)
			return true;
	return false;
}

/* Is the observed jump (runtime addresses) an edge of a block holding
 * from? Blocks of several functions (shared code) may hold it. */
static bool edge_found(const struct or_program *p, const struct blk_ref *v, size_t n,
		       const struct or_jump *j, uint64_t bias, or_edge_fn on_edge, void *arg)
{
	uint64_t from = j->from + bias;
	size_t lo = 0, hi = n;
	while (lo < hi) {	/* first block starting above from */
		size_t mid = (lo + hi) / 2;
		if (v[mid].start <= from)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo; k-- > 0 && from - v[k].start < (1u << 20);) {
		if (from >= v[k].end)
			continue;
		const struct cfg_function *f = p->f[v[k].f];
		uint64_t to = j->cond_not_taken ? v[k].end : j->to + bias;
		if (block_has_edge(f, v[k].b, to)) {
			if (on_edge)
				on_edge(arg, f, v[k].b, to);
			return true;
		}
	}
	return false;
}

int or_check_edges(const char *callgrind_out, const char *obj, const struct or_program *p,
		   uint64_t bias, FILE *log, const char *prefix, or_edge_fn on_edge, void *arg,
		   struct or_edges *out)
{
	memset(out, 0, sizeof(*out));
	struct or_jump *j;
	size_t nj;
	if (or_callgrind_jumps(callgrind_out, obj, &j, &nj) < 0)
		return -1;
	size_t nb = 0, nc = 0;
	for (size_t q = 0; q < p->n; q++) {
		nb += cfg_function__block_count(p->f[q]);
		nc += cfg_function__call_count(p->f[q]);
	}
	struct blk_ref *bv = calloc(nb + 1, sizeof(*bv));
	struct call_ref *cv = calloc(nc + 1, sizeof(*cv));
	nb = nc = 0;
	for (size_t q = 0; q < p->n; q++) {
		for (size_t b = 0; b < cfg_function__block_count(p->f[q]); b++) {
			const struct cfg_block *B = cfg_function__block(p->f[q], b);
			bv[nb++] = (struct blk_ref){ B->start, B->end, (uint32_t)q, (uint32_t)b };
		}
		for (size_t c = 0; c < cfg_function__call_count(p->f[q]); c++) {
			const struct cfg_call *C = cfg_function__call(p->f[q], c);
			/* from a jmp, callgrind names the final callee of a stub */
			cv[nc++] = (struct call_ref){ C->at, !C->tail || strstr(C->name, "@plt") ||
								     C->indirect };
		}
	}
	qsort(bv, nb, sizeof(*bv), blk_cmp);
	qsort(cv, nc, sizeof(*cv), call_cmp);
	for (size_t k = 0; k < nj; k++) {
		bool ok = edge_found(p, bv, nb, &j[k], bias, on_edge, arg);
		/* a call= line from a call instruction is a call, not an edge;
		 * from a jmp, a jump into another function */
		if (!ok && j[k].call) {
			struct call_ref key = { j[k].from + bias, false };
			const struct call_ref *c = bsearch(&key, cv, nc, sizeof(*cv), call_cmp);
			for (; c && c > cv && c[-1].at == key.at; c--)
				;
			for (; c && c < cv + nc && c->at == key.at && !ok; c++)
				ok = c->counts;
		}
		out->observed++;
		if (!ok) {
			out->missing++;
			say(log, prefix, "observed edge %#lx -> %#lx%s not in the CFG",
			    (unsigned long)j[k].from, (unsigned long)(j[k].cond_not_taken ? 0 : j[k].to),
			    j[k].cond_not_taken ? " (not taken)" : "");
		}
	}
	free(bv);
	free(cv);
	free(j);
	return 0;
}
