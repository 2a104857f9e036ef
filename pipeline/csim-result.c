/* csim-result.c: simulation results — totals and per-PC rows — their
 * merging, ordering, folding into blocks, and the two report formats. */
#include "pipeline/csim-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

/* Every memo entry empty: a PC of the next entry's slot. */
static void empty_memo(struct csim_result *r)
{
	for (uint64_t i = 0; i < CSIM_MEMO; i++)
		r->memo[i].pc = i + 1;
}

struct csim_result *csim_result__new(void)
{
	struct csim_result *r = calloc(1, sizeof(*r));
	if (r) {
		r->nopc_row = SIZE_MAX;
		empty_memo(r);
	}
	return r;
}

void csim_result__free(struct csim_result *r)
{
	if (!r)
		return;
	free(r->index);
	free(r->hot);
	free(r->cold);
	free(r);
}

void csim_result__clear(struct csim_result *r)
{
	free(r->index);
	free(r->hot);
	free(r->cold);
	memset(r, 0, sizeof(*r));
	r->nopc_row = SIZE_MAX;
	empty_memo(r);
}

bool csim_result_set_mode(struct csim_result *r, bool cachegrind)
{
	if (r->mode_set)
		return r->cachegrind == cachegrind;
	r->mode_set = true;
	r->cachegrind = cachegrind;
	return true;
}

/* Where pc is in the index, or the free slot where it would go. */
static size_t slot_of(const struct csim_result *r, uint64_t pc)
{
	size_t i = (size_t)((pc * 0x9E3779B97F4A7C15ull) >> r->shift);
	while (r->index[i] != CSIM_NO_ROW && r->hot[r->index[i]].pc != pc)
		i = (i + 1) & (r->cap - 1);
	return i;
}

/* Twice the slots, filled again from the rows. */
static int grow_index(struct csim_result *r)
{
	size_t cap = r->cap ? r->cap * 2 : 1024;
	uint32_t *index = malloc(cap * sizeof(*index));

	if (!index)
		return -ENOMEM;
	memset(index, 0xff, cap * sizeof(*index));	/* every slot CSIM_NO_ROW */
	free(r->index);
	r->index = index;
	r->cap = cap;
	r->shift = 64u - (unsigned)__builtin_ctzll(cap);
	for (size_t k = 0; k < r->n; k++) {
		if (k == r->nopc_row)
			continue;
		r->index[slot_of(r, r->hot[k].pc)] = (uint32_t)k;
	}
	return 0;
}

/* Room for twice the rows. */
static int grow_rows(struct csim_result *r)
{
	size_t nalloc = r->nalloc ? r->nalloc * 2 : 256;
	struct csim_hot *hot = aligned_alloc(_Alignof(struct csim_hot), nalloc * sizeof(*hot));
	struct csim_cold *cold = realloc(r->cold, nalloc * sizeof(*cold));

	if (cold)
		r->cold = cold;
	if (!hot || !cold) {
		free(hot);
		return -ENOMEM;
	}
	if (r->n)
		memcpy(hot, r->hot, r->n * sizeof(*hot));
	free(r->hot);
	r->hot = hot;
	r->nalloc = nalloc;
	return 0;
}

/* A new zero row for pc. */
static struct csim_hot *add_row(struct csim_result *r, uint64_t pc)
{
	if (r->n == r->nalloc && grow_rows(r))
		return NULL;
	struct csim_hot *h = &r->hot[r->n];
	memset(h, 0, sizeof(*h));
	memset(&r->cold[r->n], 0, sizeof(r->cold[r->n]));
	h->pc = pc;
	r->n++;
	return h;
}

struct csim_hot *csim_result_lookup_slow(struct csim_result *r, uint64_t pc)
{
	r->tot_dirty = true;
	if (pc == CSIM_NO_PC) {
		if (r->nopc_row != SIZE_MAX)
			return &r->hot[r->nopc_row];
		r->nopc_row = r->n;
		struct csim_hot *h = add_row(r, pc);
		if (!h)
			r->nopc_row = SIZE_MAX;
		return h;
	}
	if (r->n >= CSIM_NO_ROW)
		return NULL;
	if ((r->n + 1) * 4 > r->cap && grow_index(r))
		return NULL;
	size_t i = slot_of(r, pc);
	if (r->index[i] != CSIM_NO_ROW)
		return &r->hot[r->index[i]];
	struct csim_hot *h = add_row(r, pc);
	if (h)
		r->index[i] = (uint32_t)(r->n - 1);
	return h;
}

size_t csim_result__npcs(const struct csim_result *r)
{
	return r->n;
}

static bool first_level_of(int lv, int kind)
{
	return lv == (kind == CSIM_INSTR ? CSIM_I1 : CSIM_D1);
}

void csim_row_counts(const struct csim_result *r, const struct csim_hot *h,
		     const struct csim_cold *c, struct csim_counts *out)
{
	memset(out, 0, sizeof(*out));
	out->instr = h->refs[CSIM_INSTR];
	out->modifies = h->modifies;
	out->reads = h->refs[CSIM_READ] - h->modifies;
	out->writes = h->refs[CSIM_WRITE] - (r->cachegrind ? 0 : h->modifies);
	for (int k = 0; k < CSIM_NKINDS; k++) {
		out->refs[k] = h->refs[k];
		for (int lv = 0; lv < CSIM_LL; lv++) {
			bool first = first_level_of(lv, k);
			out->access[lv][k] = c->access[lv][k] + (first ? h->refs[k] : 0);
			out->miss[lv][k] = first ? h->miss1[k] : c->miss[lv][k];
		}
		out->access[CSIM_LL][k] = h->ll_access[k];
		out->miss[CSIM_LL][k] = h->ll_miss[k];
	}
}

/* Every row, in the order their PCs came. */
#define FOR_EACH_ROW(r, i, h, c)                                         \
	for (size_t i = 0; i < (r)->n; i++)                               \
		for (const struct csim_hot *h = &(r)->hot[i]; h; h = NULL) \
			for (const struct csim_cold *c = &(r)->cold[i]; c; c = NULL)

bool csim_result__get(const struct csim_result *r, uint64_t pc, struct csim_pc_stats *out)
{
	size_t row = r->nopc_row;

	if (pc != CSIM_NO_PC) {
		size_t i = r->cap ? slot_of(r, pc) : 0;
		row = r->cap && r->index[i] != CSIM_NO_ROW ? r->index[i] : SIZE_MAX;
	}
	if (row == SIZE_MAX)
		return false;
	out->pc = pc;
	csim_row_counts(r, &r->hot[row], &r->cold[row], &out->c);
	return true;
}

void csim_counts_add(struct csim_counts *dst, const struct csim_counts *src)
{
	/* The struct is nothing but uint64_t counters. */
	uint64_t *d = (uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;
	for (size_t i = 0; i < sizeof(*dst) / sizeof(uint64_t); i++)
		d[i] += s[i];
}

const struct csim_counts *csim_result__totals(const struct csim_result *cr)
{
	/* Totals are the sum of the rows, made on demand so the hot path
	 * counts each event once. The cache is the only mutable part. */
	struct csim_result *r = (struct csim_result *)cr;
	if (r->tot_dirty) {
		struct csim_counts one;
		memset(&r->tot, 0, sizeof(r->tot));
		FOR_EACH_ROW(r, i, h, c) {
			csim_row_counts(r, h, c, &one);
			csim_counts_add(&r->tot, &one);
		}
		r->tot_dirty = false;
	}
	return &r->tot;
}

static void add_u64(uint64_t *d, const uint64_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] += s[i];
}

int csim_result__merge(struct csim_result *dst, const struct csim_result *src)
{
	if (src->mode_set && !csim_result_set_mode(dst, src->cachegrind))
		return -EINVAL;
	FOR_EACH_ROW(src, i, h, c) {
		struct csim_hot *d = csim_result_lookup(dst, h->pc);
		if (!d)
			return -ENOMEM;
		add_u64(d->refs, h->refs, CSIM_NKINDS);
		d->modifies += h->modifies;
		add_u64(d->miss1, h->miss1, CSIM_NKINDS);
		add_u64(d->ll_access, h->ll_access, CSIM_NKINDS);
		add_u64(d->ll_miss, h->ll_miss, CSIM_NKINDS);
		struct csim_cold *dc = csim_cold_of(dst, d);
		add_u64(&dc->access[0][0], &c->access[0][0], CSIM_LL * CSIM_NKINDS);
		add_u64(&dc->miss[0][0], &c->miss[0][0], CSIM_LL * CSIM_NKINDS);
	}
	dst->tot_dirty = true;
	return 0;
}

bool csim_result__equal(const struct csim_result *a, const struct csim_result *b)
{
	struct csim_pc_stats ra, rb;

	if (csim_result__npcs(a) != csim_result__npcs(b))
		return false;
	if (memcmp(csim_result__totals(a), csim_result__totals(b), sizeof(struct csim_counts)))
		return false;
	FOR_EACH_ROW(a, i, h, c) {
		csim_row_counts(a, h, c, &ra.c);
		if (!csim_result__get(b, h->pc, &rb) || memcmp(&ra.c, &rb.c, sizeof(ra.c)))
			return false;
	}
	return true;
}

static uint64_t data_misses(const struct csim_counts *c)
{
	uint64_t m = 0;
	for (int lv = 0; lv < CSIM_NLEVELS; lv++)
		m += c->miss[lv][CSIM_READ] + c->miss[lv][CSIM_WRITE];
	return m;
}

static uint64_t instr_misses(const struct csim_counts *c)
{
	uint64_t m = 0;
	for (int lv = 0; lv < CSIM_NLEVELS; lv++)
		m += c->miss[lv][CSIM_INSTR];
	return m;
}

static int cmp_pc(const void *x, const void *y)
{
	const struct csim_pc_stats *a = x, *b = y;
	return a->pc < b->pc ? -1 : a->pc > b->pc;
}

static int cmp_misses(const void *x, const void *y)
{
	const struct csim_pc_stats *a = x, *b = y;
	uint64_t da = data_misses(&a->c), db = data_misses(&b->c);
	if (da != db)
		return da > db ? -1 : 1;
	uint64_t ia = instr_misses(&a->c), ib = instr_misses(&b->c);
	if (ia != ib)
		return ia > ib ? -1 : 1;
	return cmp_pc(x, y);
}

struct csim_pc_stats *csim_result__sorted(const struct csim_result *r, enum csim_order order,
					  size_t *n)
{
	size_t k = 0;
	struct csim_pc_stats *rows = malloc((csim_result__npcs(r) + 1) * sizeof(*rows));
	if (!rows)
		return NULL;
	FOR_EACH_ROW(r, i, h, c) {
		rows[k].pc = h->pc;
		csim_row_counts(r, h, c, &rows[k++].c);
	}
	qsort(rows, k, sizeof(*rows), order == CSIM_BY_PC ? cmp_pc : cmp_misses);
	*n = k;
	return rows;
}

int csim_result__fold_blocks(const struct csim_result *r, const struct csim_block_range *blocks,
			     size_t nblocks, struct csim_counts *out)
{
	size_t n;
	struct csim_pc_stats *rows = csim_result__sorted(r, CSIM_BY_PC, &n);
	if (!rows)
		return -ENOMEM;
	for (size_t b = 0; b < nblocks; b++) {
		/* First row at or after the block start, by bisection. */
		size_t lo = 0, hi = n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (rows[mid].pc < blocks[b].start)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t i = lo; i < n && rows[i].pc < blocks[b].end; i++)
			csim_counts_add(&out[b], &rows[i].c);
	}
	free(rows);
	return 0;
}

/* ------------------------------------------------------------ reports */

static struct json_object *json_u64(uint64_t v)
{
	return json_object_new_uint64(v);
}

static struct json_object *json_level(const struct csim_counts *c, int lv)
{
	struct json_object *o = json_object_new_object();
	if (!o)
		return NULL;
	if (lv == CSIM_I1) {
		json_object_object_add(o, "misses", json_u64(c->miss[lv][CSIM_INSTR]));
		return o;
	}
	json_object_object_add(o, "read_misses", json_u64(c->miss[lv][CSIM_READ]));
	json_object_object_add(o, "write_misses", json_u64(c->miss[lv][CSIM_WRITE]));
	return o;
}

struct json_object *csim_result__to_json(const struct csim_result *r,
					 const struct csim_config *cfg, unsigned workers,
					 double imbalance, size_t top)
{
	const struct csim_counts *t = csim_result__totals(r);
	struct json_object *o = json_object_new_object(), *refs, *pcs;
	size_t n;
	struct csim_pc_stats *rows;

	if (!o)
		return NULL;
	refs = json_object_new_object();
	json_object_object_add(refs, "instr", json_u64(t->instr));
	json_object_object_add(refs, "reads", json_u64(t->reads));
	json_object_object_add(refs, "writes", json_u64(t->writes));
	json_object_object_add(refs, "modifies", json_u64(t->modifies));
	json_object_object_add(o, "refs", refs);
	json_object_object_add(o, "I1", json_level(t, CSIM_I1));
	json_object_object_add(o, "D1", json_level(t, CSIM_D1));
	if (cfg && cfg->level[CSIM_L2].size)
		json_object_object_add(o, "L2", json_level(t, CSIM_L2));
	json_object_object_add(o, "LL", json_level(t, CSIM_LL));
	json_object_object_add(o, "workers", json_object_new_int((int)workers));
	json_object_object_add(o, "imbalance", json_object_new_double(imbalance));
	pcs = json_object_new_array();
	json_object_object_add(o, "per_pc", pcs);
	rows = csim_result__sorted(r, CSIM_BY_DMISSES, &n);
	if (!rows) {
		json_object_put(o);
		return NULL;
	}
	for (size_t i = 0, shown = 0; i < n && (!top || shown < top); i++) {
		const struct csim_counts *c = &rows[i].c;
		if (!c->refs[CSIM_READ] && !c->refs[CSIM_WRITE])
			continue;
		char pc[32];
		snprintf(pc, sizeof pc, "0x%" PRIx64, rows[i].pc);
		struct json_object *e = json_object_new_object();
		json_object_object_add(e, "pc", json_object_new_string(pc));
		json_object_object_add(e, "reads", json_u64(c->refs[CSIM_READ]));
		json_object_object_add(e, "writes", json_u64(c->refs[CSIM_WRITE]));
		json_object_object_add(e, "D1_misses",
				       json_u64(c->miss[CSIM_D1][CSIM_READ] + c->miss[CSIM_D1][CSIM_WRITE]));
		json_object_object_add(e, "LL_misses",
				       json_u64(c->miss[CSIM_LL][CSIM_READ] + c->miss[CSIM_LL][CSIM_WRITE]));
		json_object_array_add(pcs, e);
		shown++;
	}
	free(rows);
	return o;
}

/* 1234567 -> "1,234,567" */
static const char *commas(uint64_t v, char *buf, size_t len)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v), o = 0;
	for (int i = 0; i < n && (size_t)o + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = tmp[i];
	}
	buf[o] = '\0';
	return buf;
}

static double pct(uint64_t num, uint64_t den)
{
	return den ? 100.0 * (double)num / (double)den : 0.0;
}

/* "NAME  total  ( rd  +  wr)" with cachegrind's layout. */
static void line3(FILE *out, const char *name, uint64_t tot, uint64_t rd, uint64_t wr, int w,
		  int w2)
{
	char a[32], b[32], c[32];
	fprintf(out, "%-14s %*s  (%*s rd   + %*s wr)\n", name, w, commas(tot, a, sizeof a), w2,
		commas(rd, b, sizeof b), w2, commas(wr, c, sizeof c));
}

static void rate3(FILE *out, const char *name, double tot, double rd, double wr, int w, int w2)
{
	fprintf(out, "%-14s %*.1f%% (%*.1f%%     + %*.1f%%  )\n", name, w - 1, tot, w2 - 1, rd,
		w2 - 1, wr);
}

int csim_result__write_text(const struct csim_result *r, const struct csim_config *cfg,
			    unsigned workers, double imbalance, size_t top, FILE *out)
{
	const struct csim_counts *t = csim_result__totals(r);
	const uint64_t *ir = &t->refs[CSIM_INSTR], dr = t->refs[CSIM_READ], dw = t->refs[CSIM_WRITE];
	const uint64_t(*m)[CSIM_NKINDS] = t->miss;
	char a[32];
	int w = (int)strlen(commas(*ir + dr + dw, a, sizeof a)) + 1, w2;
	if (w < 8)
		w = 8;
	w2 = (int)strlen(commas(dr > dw ? dr : dw, a, sizeof a));
	if (w2 < 5)
		w2 = 5;

	fprintf(out, "%-14s %*s\n", "I   refs:", w, commas(*ir, a, sizeof a));
	fprintf(out, "%-14s %*s\n", "I1  misses:", w, commas(m[CSIM_I1][CSIM_INSTR], a, sizeof a));
	if (cfg && cfg->level[CSIM_L2].size)
		fprintf(out, "%-14s %*s\n", "L2i misses:", w,
			commas(m[CSIM_L2][CSIM_INSTR], a, sizeof a));
	fprintf(out, "%-14s %*s\n", "LLi misses:", w, commas(m[CSIM_LL][CSIM_INSTR], a, sizeof a));
	fprintf(out, "%-14s %*.2f%%\n", "I1  miss rate:", w - 1, pct(m[CSIM_I1][CSIM_INSTR], *ir));
	fprintf(out, "%-14s %*.2f%%\n\n", "LLi miss rate:", w - 1, pct(m[CSIM_LL][CSIM_INSTR], *ir));

	line3(out, "D   refs:", dr + dw, dr, dw, w, w2);
	line3(out, "D1  misses:", m[CSIM_D1][CSIM_READ] + m[CSIM_D1][CSIM_WRITE], m[CSIM_D1][CSIM_READ],
	      m[CSIM_D1][CSIM_WRITE], w, w2);
	if (cfg && cfg->level[CSIM_L2].size)
		line3(out, "L2d misses:", m[CSIM_L2][CSIM_READ] + m[CSIM_L2][CSIM_WRITE],
		      m[CSIM_L2][CSIM_READ], m[CSIM_L2][CSIM_WRITE], w, w2);
	line3(out, "LLd misses:", m[CSIM_LL][CSIM_READ] + m[CSIM_LL][CSIM_WRITE],
	      m[CSIM_LL][CSIM_READ], m[CSIM_LL][CSIM_WRITE], w, w2);
	rate3(out, "D1  miss rate:", pct(m[CSIM_D1][CSIM_READ] + m[CSIM_D1][CSIM_WRITE], dr + dw),
	      pct(m[CSIM_D1][CSIM_READ], dr), pct(m[CSIM_D1][CSIM_WRITE], dw), w, w2);
	rate3(out, "LLd miss rate:", pct(m[CSIM_LL][CSIM_READ] + m[CSIM_LL][CSIM_WRITE], dr + dw),
	      pct(m[CSIM_LL][CSIM_READ], dr), pct(m[CSIM_LL][CSIM_WRITE], dw), w, w2);
	fputc('\n', out);

	const uint64_t *ll = t->access[CSIM_LL], *lm = m[CSIM_LL];
	line3(out, "LL refs:", ll[0] + ll[1] + ll[2], ll[CSIM_INSTR] + ll[CSIM_READ], ll[CSIM_WRITE],
	      w, w2);
	line3(out, "LL misses:", lm[0] + lm[1] + lm[2], lm[CSIM_INSTR] + lm[CSIM_READ],
	      lm[CSIM_WRITE], w, w2);
	rate3(out, "LL miss rate:", pct(lm[0] + lm[1] + lm[2], *ir + dr + dw),
	      pct(lm[CSIM_INSTR] + lm[CSIM_READ], *ir + dr), pct(lm[CSIM_WRITE], dw), w, w2);
	fprintf(out, "\nworkers: %u  imbalance: %.3f  mode: %s\n", workers, imbalance,
		cfg && cfg->cachegrind ? "cachegrind" : "per-line");

	size_t n;
	struct csim_pc_stats *rows = csim_result__sorted(r, CSIM_BY_DMISSES, &n);
	if (!rows)
		return -ENOMEM;
	if (top && n > top)
		n = top;
	fprintf(out, "\nTop PCs by misses:\n%-18s %12s %12s %12s %10s %10s %10s %10s %10s %10s\n",
		"pc", "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw");
	for (size_t i = 0; i < n; i++) {
		const struct csim_counts *c = &rows[i].c;
		if (!data_misses(c) && !instr_misses(c))
			break;
		fprintf(out,
			"0x%-16" PRIx64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %10" PRIu64
			" %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "\n",
			rows[i].pc, c->refs[CSIM_INSTR], c->refs[CSIM_READ], c->refs[CSIM_WRITE],
			c->miss[CSIM_I1][CSIM_INSTR], c->miss[CSIM_D1][CSIM_READ],
			c->miss[CSIM_D1][CSIM_WRITE], c->miss[CSIM_LL][CSIM_INSTR],
			c->miss[CSIM_LL][CSIM_READ], c->miss[CSIM_LL][CSIM_WRITE]);
	}
	free(rows);
	return ferror(out) ? -EIO : 0;
}
