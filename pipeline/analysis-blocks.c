/* analysis-blocks.c: block execution counts — the source's own (REP
 * recovery), or derived from the instruction stream (pl_flow). */
#include "pipeline/analysis-internal.h"
#include "pipeline/pipeline.h"

#include <errno.h>
#include <stdlib.h>

extern const struct pipeline_analysis_ops pipeline_analysis_blocks;

struct blocks_priv {
	struct pl_map counts;	/* (pc, 0) -> executions */
	struct pl_map ends;	/* (pc, 0) -> end of the block, when known */
	struct pl_flow flow;
	bool explicit;		/* the source gave counts: ignore the derived */
	uint64_t executions;
	size_t top;
};

static int blocks_start(struct pipeline_analysis *a, const struct pipeline_args *args)
{
	struct blocks_priv *p = pipeline_analysis__priv(a);
	p->top = args->top;
	return 0;
}

/* A block runs at least to end (a later execution may run further). */
static int end_at_least(struct blocks_priv *p, uint64_t pc, uint64_t end)
{
	uint64_t *e = pl_map_get(&p->ends, pc, 0, true);
	if (!e)
		return -ENOMEM;
	if (end > *e)
		*e = end;
	return 0;
}

static int blocks_finish(struct pipeline_analysis *a)
{
	struct blocks_priv *p = pipeline_analysis__priv(a);
	/* The block running when the stream ended. */
	if (!p->explicit && p->flow.have && end_at_least(p, p->flow.cur, p->flow.expect))
		return pipeline_analysis__fail(a, -ENOMEM, "out of memory");
	return 0;
}

static int blocks_refs(struct pipeline_analysis *a, const struct rep_ref *refs, size_t n)
{
	struct blocks_priv *p = pipeline_analysis__priv(a);
	uint64_t start, prev, prev_end;
	bool has_prev;

	if (p->explicit)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!pl_flow_step(&p->flow, &refs[i], &start, &prev, &prev_end, &has_prev))
			continue;
		uint64_t *c = pl_map_get(&p->counts, start, 0, true);
		if (!c || (has_prev && end_at_least(p, prev, prev_end)))
			return pipeline_analysis__fail(a, -ENOMEM, "out of memory");
		++*c;
		p->executions++;
	}
	return 0;
}

static int blocks_blocks(struct pipeline_analysis *a, const struct pipeline_block_count *b,
			 size_t n)
{
	struct blocks_priv *p = pipeline_analysis__priv(a);

	if (!p->explicit) {
		pl_map_free(&p->counts);
		pl_map_free(&p->ends);
		p->executions = 0;
		p->explicit = true;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t *c = pl_map_get(&p->counts, b[i].pc, 0, true);
		if (!c || (b[i].end && end_at_least(p, b[i].pc, b[i].end)))
			return pipeline_analysis__fail(a, -ENOMEM, "out of memory");
		*c += b[i].count;
		p->executions += b[i].count;
	}
	return 0;
}

static int blocks_write_text(struct pipeline_analysis *a, FILE *out)
{
	struct blocks_priv *p = pipeline_analysis__priv(a);
	return pl_map_write_text(out, &p->counts, p->top, false, "Blocks", p->explicit, "executions",
				 p->executions);
}

static struct json_object *blocks_to_json(struct pipeline_analysis *a)
{
	struct blocks_priv *p = pipeline_analysis__priv(a);
	return pl_map_to_json(&p->counts, p->top, false, "executions", p->executions);
}

static void blocks_destroy(struct pipeline_analysis *a)
{
	struct blocks_priv *p = pipeline_analysis__priv(a);
	pl_map_free(&p->counts);
	pl_map_free(&p->ends);
}

int pipeline_blocks_ranges(struct pipeline_analysis *a, struct pipeline_block_count **out,
			   size_t *n)
{
	*out = NULL;
	*n = 0;
	if (pipeline_analysis__ops(a) != &pipeline_analysis_blocks)
		return -EINVAL;
	struct blocks_priv *p = pipeline_analysis__priv(a);
	size_t k;
	struct pl_map_ent *e = pl_map_sorted(&p->counts, &k);
	struct pipeline_block_count *b = malloc((k ? k : 1) * sizeof(*b));
	if (!e || !b) {
		free(e);
		free(b);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k; i++) {
		uint64_t *end = pl_map_get(&p->ends, e[i].a, 0, false);
		b[*n] = (struct pipeline_block_count){ .pc = e[i].a, .count = e[i].v,
						       .end = end ? *end : 0 };
		(*n)++;
	}
	free(e);
	*out = b;
	return 0;
}

const struct pipeline_analysis_ops pipeline_analysis_blocks = {
	.name = "blocks",
	.summary = "block execution counts (the source's, or from the instruction stream)",
	.priv_size = sizeof(struct blocks_priv),
	.start = blocks_start,
	.refs = blocks_refs,
	.blocks = blocks_blocks,
	.finish = blocks_finish,
	.write_text = blocks_write_text,
	.to_json = blocks_to_json,
	.destroy = blocks_destroy,
};
