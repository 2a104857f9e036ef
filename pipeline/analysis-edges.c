/* analysis-edges.c: control-flow edge counts between blocks — the source's
 * own (REP recovery), or derived from the instruction stream (pl_flow). */
#include "pipeline/analysis-internal.h"
#include "pipeline/pipeline.h"

#include <errno.h>
#include <stdlib.h>

extern const struct pipeline_analysis_ops pipeline_analysis_edges;

struct edges_priv {
	struct pl_map counts;	/* (from, to) -> traversals */
	struct pl_flow flow;
	bool explicit;
	uint64_t traversals;
	size_t top;
};

static int edges_start(struct pipeline_analysis *a, const struct pipeline_args *args)
{
	struct edges_priv *p = pipeline_analysis__priv(a);
	p->top = args->top;
	return 0;
}

static int edges_refs(struct pipeline_analysis *a, const struct rep_ref *refs, size_t n)
{
	struct edges_priv *p = pipeline_analysis__priv(a);
	uint64_t start, prev, prev_end;
	bool has_prev;

	if (p->explicit)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!pl_flow_step(&p->flow, &refs[i], &start, &prev, &prev_end, &has_prev) || !has_prev)
			continue;
		uint64_t *c = pl_map_get(&p->counts, prev, start, true);
		if (!c)
			return pipeline_analysis__fail(a, -ENOMEM, "out of memory");
		++*c;
		p->traversals++;
	}
	return 0;
}

static int edges_edges(struct pipeline_analysis *a, const struct pipeline_edge_count *e, size_t n)
{
	struct edges_priv *p = pipeline_analysis__priv(a);

	if (!p->explicit) {
		pl_map_free(&p->counts);
		p->traversals = 0;
		p->explicit = true;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t *c = pl_map_get(&p->counts, e[i].from, e[i].to, true);
		if (!c)
			return pipeline_analysis__fail(a, -ENOMEM, "out of memory");
		*c += e[i].count;
		p->traversals += e[i].count;
	}
	return 0;
}

static int edges_write_text(struct pipeline_analysis *a, FILE *out)
{
	struct edges_priv *p = pipeline_analysis__priv(a);
	return pl_map_write_text(out, &p->counts, p->top, true, "Edges", p->explicit, "traversals",
				 p->traversals);
}

static struct json_object *edges_to_json(struct pipeline_analysis *a)
{
	struct edges_priv *p = pipeline_analysis__priv(a);
	return pl_map_to_json(&p->counts, p->top, true, "traversals", p->traversals);
}

static void edges_destroy(struct pipeline_analysis *a)
{
	struct edges_priv *p = pipeline_analysis__priv(a);
	pl_map_free(&p->counts);
}

const struct pipeline_analysis_ops pipeline_analysis_edges = {
	.name = "edges",
	.summary = "control-flow edge counts between blocks",
	.priv_size = sizeof(struct edges_priv),
	.start = edges_start,
	.refs = edges_refs,
	.edges = edges_edges,
	.write_text = edges_write_text,
	.to_json = edges_to_json,
	.destroy = edges_destroy,
};
