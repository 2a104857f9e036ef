/* analysis-reuse.c: reuse-distance (LRU stack distance) histogram of data
 * references at line granularity: for each access, the number of distinct
 * other lines touched since the previous access to its line. A fully
 * associative LRU cache of C lines hits exactly the accesses whose distance
 * is below C.
 *
 * O(log n) per access: a Fenwick tree over access times marks, for each
 * line, the time of its latest access; the distance is the number of marks
 * after the line's previous time. Times are renumbered (compacted) when the
 * tree is full, keeping only the latest access of each line. */
#include "pipeline/analysis-internal.h"
#include "pipeline/pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

extern const struct pipeline_analysis_ops pipeline_analysis_reuse;

#define REUSE_BUCKETS 65	/* 0, then [2^(k-1), 2^k) for k = 1..64 */

struct reuse_priv {
	unsigned line_bits;
	struct pl_map last;	/* (line, 0) -> latest time + 1; 0 while unmarked */
	uint32_t *bit;		/* Fenwick tree, cap + 1 entries */
	size_t cap;
	uint64_t t;		/* next time */
	uint64_t accesses, cold;
	uint64_t hist[REUSE_BUCKETS];
};

static void bit_add(struct reuse_priv *p, uint64_t i, int32_t d)
{
	for (i++; i <= p->cap; i += i & -i)
		p->bit[i] += (uint32_t)d;
}

/* Marks in [0, i). */
static uint64_t bit_prefix(const struct reuse_priv *p, uint64_t i)
{
	uint64_t s = 0;
	for (; i > 0; i -= i & -i)
		s += p->bit[i];
	return s;
}

static int cmp_time(const void *x, const void *y)
{
	const uint64_t *a = *(uint64_t *const *)x, *b = *(uint64_t *const *)y;
	return *a < *b ? -1 : *a > *b;
}

/* Renumber the marked times 0..k-1 in order, growing the tree if it would
 * be more than half full. */
static int compact(struct reuse_priv *p)
{
	uint64_t **live = malloc((p->last.n ? p->last.n : 1) * sizeof(*live));
	size_t k = 0;

	if (!live)
		return -ENOMEM;
	for (size_t i = 0; i < p->last.cap; i++)
		if (p->last.e[i].used && p->last.e[i].v)
			live[k++] = &p->last.e[i].v;
	qsort(live, k, sizeof(*live), cmp_time);
	if (k * 2 > p->cap) {
		uint32_t *bit = realloc(p->bit, (p->cap * 2 + 1) * sizeof(*bit));
		if (!bit) {
			free(live);
			return -ENOMEM;
		}
		p->bit = bit;
		p->cap *= 2;
	}
	memset(p->bit, 0, (p->cap + 1) * sizeof(*p->bit));
	for (size_t i = 0; i < k; i++) {
		*live[i] = i + 1;
		bit_add(p, i, 1);
	}
	p->t = k;
	free(live);
	return 0;
}

static unsigned bucket(uint64_t d)
{
	return d ? 64u - (unsigned)__builtin_clzll(d) : 0u;
}

static int access_line(struct reuse_priv *p, uint64_t line)
{
	uint64_t *v = pl_map_get(&p->last, line, 0, true);
	if (!v)
		return -ENOMEM;
	p->accesses++;
	if (*v) {
		uint64_t prev = *v - 1;
		p->hist[bucket(bit_prefix(p, p->t) - bit_prefix(p, prev + 1))]++;
		bit_add(p, prev, -1);
		*v = 0;
	} else {
		p->cold++;
	}
	if (p->t == p->cap) {
		int rc = compact(p);
		if (rc)
			return rc;
	}
	bit_add(p, p->t, 1);
	*v = ++p->t;
	return 0;
}

static int reuse_start(struct pipeline_analysis *a, const struct pipeline_args *args)
{
	struct reuse_priv *p = pipeline_analysis__priv(a);
	uint32_t line = args->line ? args->line : 64;

	if (line & (line - 1))
		return pipeline_analysis__fail(a, -EINVAL, "line size %u is not a power of two",
					       line);
	p->line_bits = (unsigned)__builtin_ctz(line);
	p->cap = 1u << 16;
	p->bit = calloc(p->cap + 1, sizeof(*p->bit));
	return p->bit ? 0 : pipeline_analysis__fail(a, -ENOMEM, "out of memory");
}

static int reuse_refs(struct pipeline_analysis *a, const struct rep_ref *refs, size_t n)
{
	struct reuse_priv *p = pipeline_analysis__priv(a);

	for (size_t i = 0; i < n; i++) {
		const struct rep_ref *r = &refs[i];
		if (r->type == REP_REF_INSTR)
			continue;
		uint64_t end = r->addr + (r->size ? r->size : 1) - 1;
		if (end < r->addr)
			end = UINT64_MAX;
		for (uint64_t l = r->addr >> p->line_bits;; l++) {
			if (access_line(p, l))
				return pipeline_analysis__fail(a, -ENOMEM, "out of memory");
			if (l == end >> p->line_bits)
				break;
		}
	}
	return 0;
}

static void bucket_range(unsigned k, uint64_t *lo, uint64_t *hi)
{
	*lo = k ? 1ull << (k - 1) : 0;
	*hi = k == 0 ? 0 : k == 64 ? UINT64_MAX : (1ull << k) - 1;
}

static int reuse_write_text(struct pipeline_analysis *a, FILE *out)
{
	struct reuse_priv *p = pipeline_analysis__priv(a);
	uint64_t cum = 0;

	fprintf(out, "Reuse distance (%u B lines, data): %" PRIu64 " accesses, %" PRIu64 " cold\n",
		1u << p->line_bits, p->accesses, p->cold);
	fprintf(out, "  %-24s %14s %8s\n", "distance (lines)", "accesses", "cum %");
	for (unsigned k = 0; k < REUSE_BUCKETS; k++) {
		if (!p->hist[k])
			continue;
		uint64_t lo, hi;
		char range[48];
		bucket_range(k, &lo, &hi);
		cum += p->hist[k];
		if (lo == hi)
			snprintf(range, sizeof range, "%" PRIu64, lo);
		else
			snprintf(range, sizeof range, "%" PRIu64 "-%" PRIu64, lo, hi);
		fprintf(out, "  %-24s %14" PRIu64 " %7.2f%%\n", range, p->hist[k],
			100.0 * (double)cum / (double)p->accesses);
	}
	fprintf(out, "  %-24s %14" PRIu64 " %7.2f%%\n", "cold", p->cold, 100.0);
	return ferror(out) ? -EIO : 0;
}

static struct json_object *reuse_to_json(struct pipeline_analysis *a)
{
	struct reuse_priv *p = pipeline_analysis__priv(a);
	struct json_object *o = json_object_new_object(), *arr = json_object_new_array();

	if (!o || !arr) {
		json_object_put(o);
		json_object_put(arr);
		return NULL;
	}
	json_object_object_add(o, "line", json_object_new_int(1 << p->line_bits));
	json_object_object_add(o, "accesses", json_object_new_uint64(p->accesses));
	json_object_object_add(o, "cold", json_object_new_uint64(p->cold));
	for (unsigned k = 0; k < REUSE_BUCKETS; k++) {
		if (!p->hist[k])
			continue;
		uint64_t lo, hi;
		bucket_range(k, &lo, &hi);
		struct json_object *b = json_object_new_object();
		json_object_object_add(b, "min", json_object_new_uint64(lo));
		json_object_object_add(b, "max", json_object_new_uint64(hi));
		json_object_object_add(b, "count", json_object_new_uint64(p->hist[k]));
		json_object_array_add(arr, b);
	}
	json_object_object_add(o, "buckets", arr);
	return o;
}

static void reuse_destroy(struct pipeline_analysis *a)
{
	struct reuse_priv *p = pipeline_analysis__priv(a);
	pl_map_free(&p->last);
	free(p->bit);
}

const struct pipeline_analysis_ops pipeline_analysis_reuse = {
	.name = "reuse",
	.summary = "reuse-distance histogram of data accesses (distinct lines between reuses)",
	.priv_size = sizeof(struct reuse_priv),
	.start = reuse_start,
	.refs = reuse_refs,
	.write_text = reuse_write_text,
	.to_json = reuse_to_json,
	.destroy = reuse_destroy,
};
