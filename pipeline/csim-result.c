/* csim-result.c: simulation results — totals and per-PC rows — their
 * merging, ordering, folding into blocks, and the two report formats. */
#include "pipeline/csim-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

struct csim_result *csim_result__new(void)
{
	return calloc(1, sizeof(struct csim_result));
}

void csim_result__free(struct csim_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nchunks; i++)
		free(r->chunks[i]);
	free(r->chunks);
	free(r->slots);
	free(r);
}

void csim_result__clear(struct csim_result *r)
{
	for (size_t i = 0; i < r->nchunks; i++)
		free(r->chunks[i]);
	free(r->chunks);
	free(r->slots);
	memset(r, 0, sizeof(*r));
}

static struct csim_pc_stats *row_at(const struct csim_result *r, size_t i)
{
	return &r->chunks[i / CSIM_ROW_CHUNK][i % CSIM_ROW_CHUNK];
}

static void slot_insert(struct csim_slot_ent *slots, size_t nslots, unsigned shift,
			struct csim_pc_stats *row)
{
	size_t i = (size_t)((row->pc * 0x9E3779B97F4A7C15ull) >> shift);
	while (slots[i].row)
		i = (i + 1) & (nslots - 1);
	slots[i].pc = row->pc;
	slots[i].row = row;
}

static int grow_slots(struct csim_result *r)
{
	size_t n = r->nslots ? r->nslots * 2 : 1024;
	unsigned shift = 64u - (unsigned)__builtin_ctzll(n);
	struct csim_slot_ent *slots = calloc(n, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < r->nrows; i++)
		slot_insert(slots, n, shift, row_at(r, i));
	free(r->slots);
	r->slots = slots;
	r->nslots = n;
	r->slot_shift = shift;
	return 0;
}

/* Not found by csim_result_lookup: add a zero row. Allocates at most a
 * chunk of rows and a doubled table, rarely. */
struct csim_pc_stats *csim_result_lookup_slow(struct csim_result *r, uint64_t pc)
{
	if ((r->nrows + 1) * 2 > r->nslots && grow_slots(r))
		return NULL;
	if (r->nrows == r->nchunks * CSIM_ROW_CHUNK) {
		struct csim_pc_stats **chunks =
			realloc(r->chunks, (r->nchunks + 1) * sizeof(*chunks));
		if (!chunks)
			return NULL;
		r->chunks = chunks;
		chunks[r->nchunks] = calloc(CSIM_ROW_CHUNK, sizeof(struct csim_pc_stats));
		if (!chunks[r->nchunks])
			return NULL;
		r->nchunks++;
	}
	struct csim_pc_stats *row = row_at(r, r->nrows++);
	row->pc = pc;
	slot_insert(r->slots, r->nslots, r->slot_shift, row);
	r->tot_dirty = true;
	return r->last = row;
}

struct csim_pc_stats *csim_result__pc(struct csim_result *r, uint64_t pc)
{
	struct csim_pc_stats *row = csim_result_lookup(r, pc);
	r->tot_dirty = true;
	return row;
}

size_t csim_result__npcs(const struct csim_result *r)
{
	return r->nrows;
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
		memset(&r->tot, 0, sizeof(r->tot));
		for (size_t i = 0; i < r->nrows; i++)
			csim_counts_add(&r->tot, &row_at(r, i)->c);
		r->tot_dirty = false;
	}
	return &r->tot;
}

int csim_result__merge(struct csim_result *dst, const struct csim_result *src)
{
	for (size_t i = 0; i < src->nrows; i++) {
		const struct csim_pc_stats *s = row_at(src, i);
		struct csim_pc_stats *d = csim_result_lookup(dst, s->pc);
		if (!d)
			return -ENOMEM;
		csim_counts_add(&d->c, &s->c);
	}
	dst->tot_dirty = true;
	return 0;
}

bool csim_result__equal(const struct csim_result *a, const struct csim_result *b)
{
	if (a->nrows != b->nrows)
		return false;
	if (memcmp(csim_result__totals(a), csim_result__totals(b), sizeof(struct csim_counts)))
		return false;
	for (size_t i = 0; i < a->nrows; i++) {
		const struct csim_pc_stats *ra = row_at(a, i);
		struct csim_pc_stats *rb = csim_result_lookup((struct csim_result *)b, ra->pc);
		if (!rb || memcmp(&ra->c, &rb->c, sizeof(ra->c)))
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
	struct csim_pc_stats *rows = malloc((r->nrows ? r->nrows : 1) * sizeof(*rows));
	if (!rows)
		return NULL;
	for (size_t i = 0; i < r->nrows; i++)
		rows[i] = *row_at(r, i);
	qsort(rows, r->nrows, sizeof(*rows), order == CSIM_BY_PC ? cmp_pc : cmp_misses);
	*n = r->nrows;
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
