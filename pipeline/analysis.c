/* analysis.c: the table of analyses (generated from PIPELINE_ANALYSES in
 * pipeline/Makemodule.am) and the object every analysis lives in. */
#include "pipeline/analysis-internal.h"
#include "pipeline/pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define PIPELINE_ANALYSIS(n) extern const struct pipeline_analysis_ops pipeline_analysis_##n;
#include "pipeline/analysis-list.h"
#undef PIPELINE_ANALYSIS

#define PIPELINE_ANALYSIS(n) &pipeline_analysis_##n,
static const struct pipeline_analysis_ops *const table[] = {
#include "pipeline/analysis-list.h"
};
#undef PIPELINE_ANALYSIS

struct pipeline_analysis {
	const struct pipeline_analysis_ops *ops;
	void *priv;
	bool finished;
	char errmsg[256];
};

const struct pipeline_analysis_ops *const *pipeline_analyses(size_t *n)
{
	*n = sizeof(table) / sizeof(table[0]);
	return table;
}

const struct pipeline_analysis_ops *pipeline_analysis_find(const char *name)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(table[i]->name, name))
			return table[i];
	return NULL;
}

int pipeline_analysis__fail(struct pipeline_analysis *a, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->errmsg, sizeof a->errmsg, fmt, ap);
	va_end(ap);
	return err;
}

void *pipeline_analysis__priv(struct pipeline_analysis *a)
{
	return a->priv;
}

struct pipeline_analysis *pipeline_analysis__new(const struct pipeline_analysis_ops *ops,
						 const struct pipeline_args *args, char *err,
						 size_t errlen)
{
	struct pipeline_analysis *a = calloc(1, sizeof(*a));
	if (!a || !(a->priv = calloc(1, ops->priv_size ? ops->priv_size : 1))) {
		free(a);
		snprintf(err, errlen, "%s: out of memory", ops->name);
		errno = ENOMEM;
		return NULL;
	}
	a->ops = ops;
	int rc = ops->start ? ops->start(a, args) : 0;
	if (rc) {
		snprintf(err, errlen, "%s: %s", ops->name, a->errmsg[0] ? a->errmsg : strerror(-rc));
		pipeline_analysis__free(a);
		errno = -rc;
		return NULL;
	}
	return a;
}

int pipeline_analysis__refs(struct pipeline_analysis *a, const struct rep_ref *refs, size_t n)
{
	return a->ops->refs ? a->ops->refs(a, refs, n) : 0;
}

int pipeline_analysis__blocks(struct pipeline_analysis *a, const struct pipeline_block_count *b,
			      size_t n)
{
	return a->ops->blocks ? a->ops->blocks(a, b, n) : 0;
}

int pipeline_analysis__edges(struct pipeline_analysis *a, const struct pipeline_edge_count *e,
			     size_t n)
{
	return a->ops->edges ? a->ops->edges(a, e, n) : 0;
}

int pipeline_analysis__finish(struct pipeline_analysis *a)
{
	if (a->finished)
		return 0;
	a->finished = true;
	return a->ops->finish ? a->ops->finish(a) : 0;
}

int pipeline_analysis__write_text(struct pipeline_analysis *a, FILE *out)
{
	return a->ops->write_text ? a->ops->write_text(a, out) : 0;
}

struct json_object *pipeline_analysis__to_json(struct pipeline_analysis *a)
{
	return a->ops->to_json ? a->ops->to_json(a) : NULL;
}

const char *pipeline_analysis__name(const struct pipeline_analysis *a)
{
	return a->ops->name;
}

const char *pipeline_analysis__errmsg(const struct pipeline_analysis *a)
{
	return a->errmsg;
}

const struct pipeline_analysis_ops *pipeline_analysis__ops(const struct pipeline_analysis *a)
{
	return a->ops;
}

void pipeline_analysis__free(struct pipeline_analysis *a)
{
	if (!a)
		return;
	if (a->ops->destroy)
		a->ops->destroy(a);
	free(a->priv);
	free(a);
}

/* ------------------------------------------------------- shared hash map */

static size_t pl_hash(uint64_t a, uint64_t b)
{
	uint64_t h = (a ^ (b * 0xC2B2AE3D27D4EB4Full)) * 0x9E3779B97F4A7C15ull;
	return (size_t)(h ^ (h >> 29));
}

static int pl_map_grow(struct pl_map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024;
	struct pl_map_ent *e = calloc(cap, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->e[i].used)
			continue;
		size_t j = pl_hash(m->e[i].a, m->e[i].b) & (cap - 1);
		while (e[j].used)
			j = (j + 1) & (cap - 1);
		e[j] = m->e[i];
	}
	free(m->e);
	m->e = e;
	m->cap = cap;
	return 0;
}

uint64_t *pl_map_get(struct pl_map *m, uint64_t a, uint64_t b, bool create)
{
	if (m->cap) {
		size_t j = pl_hash(a, b) & (m->cap - 1);
		for (; m->e[j].used; j = (j + 1) & (m->cap - 1))
			if (m->e[j].a == a && m->e[j].b == b)
				return &m->e[j].v;
	}
	if (!create)
		return NULL;
	if ((m->n + 1) * 2 > m->cap && pl_map_grow(m))
		return NULL;
	size_t j = pl_hash(a, b) & (m->cap - 1);
	while (m->e[j].used)
		j = (j + 1) & (m->cap - 1);
	m->e[j] = (struct pl_map_ent){ .a = a, .b = b, .v = 0, .used = true };
	m->n++;
	return &m->e[j].v;
}

void pl_map_free(struct pl_map *m)
{
	free(m->e);
	memset(m, 0, sizeof(*m));
}

static int cmp_ent(const void *x, const void *y)
{
	const struct pl_map_ent *p = x, *q = y;
	if (p->v != q->v)
		return p->v > q->v ? -1 : 1;
	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	return p->b < q->b ? -1 : p->b > q->b;
}

struct pl_map_ent *pl_map_sorted(const struct pl_map *m, size_t *n)
{
	struct pl_map_ent *out = malloc((m->n ? m->n : 1) * sizeof(*out));
	size_t k = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < m->cap; i++)
		if (m->e[i].used)
			out[k++] = m->e[i];
	qsort(out, k, sizeof(*out), cmp_ent);
	*n = k;
	return out;
}

int pl_map_write_text(FILE *out, const struct pl_map *m, size_t top, bool pair, const char *title,
		      bool explicit, const char *total_name, uint64_t total)
{
	size_t n;
	struct pl_map_ent *e = pl_map_sorted(m, &n);
	if (!e)
		return -ENOMEM;
	fprintf(out, "%s (%s): %zu distinct, %" PRIu64 " %s\n", title,
		explicit ? "from the source" : "from the instruction stream", n, total, total_name);
	for (size_t i = 0; i < n && (!top || i < top); i++) {
		if (pair)
			fprintf(out, "  0x%-16" PRIx64 " -> 0x%-16" PRIx64 " %14" PRIu64 "\n", e[i].a,
				e[i].b, e[i].v);
		else
			fprintf(out, "  0x%-16" PRIx64 " %14" PRIu64 "\n", e[i].a, e[i].v);
	}
	free(e);
	return ferror(out) ? -EIO : 0;
}

static struct json_object *json_pc(uint64_t pc)
{
	char buf[32];
	snprintf(buf, sizeof buf, "0x%" PRIx64, pc);
	return json_object_new_string(buf);
}

struct json_object *pl_map_to_json(const struct pl_map *m, size_t top, bool pair,
				   const char *total_name, uint64_t total)
{
	size_t n;
	struct pl_map_ent *e = pl_map_sorted(m, &n);
	struct json_object *o = json_object_new_object(), *arr = json_object_new_array();
	if (!e || !o || !arr) {
		free(e);
		json_object_put(o);
		json_object_put(arr);
		return NULL;
	}
	json_object_object_add(o, "distinct", json_object_new_uint64(n));
	json_object_object_add(o, total_name, json_object_new_uint64(total));
	for (size_t i = 0; i < n && (!top || i < top); i++) {
		struct json_object *r = json_object_new_object();
		if (pair) {
			json_object_object_add(r, "from", json_pc(e[i].a));
			json_object_object_add(r, "to", json_pc(e[i].b));
		} else {
			json_object_object_add(r, "pc", json_pc(e[i].a));
		}
		json_object_object_add(r, "count", json_object_new_uint64(e[i].v));
		json_object_array_add(arr, r);
	}
	json_object_object_add(o, "top", arr);
	free(e);
	return o;
}
