/* analysis-cache.c: cache simulation, on csim_split's worker threads. */
#include "pipeline/pipeline.h"

#include <errno.h>
#include <string.h>

extern const struct pipeline_analysis_ops pipeline_analysis_cache;

struct cache_priv {
	struct csim_config cfg;
	struct csim_split *sp;
	size_t top;
	int rc;
};

static int cache_start(struct pipeline_analysis *a, const struct pipeline_args *args)
{
	struct cache_priv *p = pipeline_analysis__priv(a);
	struct csim_split_opts o = { .sz = sizeof(o), .workers = args->workers };
	char err[256];

	if (!args->cache)
		return pipeline_analysis__fail(a, -EINVAL, "no cache geometry given");
	p->cfg = *args->cache;
	p->top = args->top;
	if (csim_config_check(&p->cfg, err, sizeof err))
		return pipeline_analysis__fail(a, -EINVAL, "%s", err);
	int rc = csim_split__new(&p->cfg, &o, &p->sp);
	if (rc)
		return pipeline_analysis__fail(a, rc, "cannot start the simulators: %s",
					       strerror(-rc));
	return 0;
}

static int cache_refs(struct pipeline_analysis *a, const struct rep_ref *refs, size_t n)
{
	struct cache_priv *p = pipeline_analysis__priv(a);
	int rc = csim_split__push(p->sp, refs, n);
	return rc ? pipeline_analysis__fail(a, rc, "%s", csim_split__errmsg(p->sp)) : 0;
}

static int cache_finish(struct pipeline_analysis *a)
{
	struct cache_priv *p = pipeline_analysis__priv(a);
	int rc = csim_split__finish(p->sp);
	return rc ? pipeline_analysis__fail(a, rc, "%s", csim_split__errmsg(p->sp)) : 0;
}

static int cache_write_text(struct pipeline_analysis *a, FILE *out)
{
	struct cache_priv *p = pipeline_analysis__priv(a);
	struct csim_split_stats st;

	csim_split__stats(p->sp, &st);
	return csim_result__write_text(csim_split__result(p->sp), &p->cfg, st.workers, st.imbalance,
				       p->top, out);
}

static struct json_object *cache_to_json(struct pipeline_analysis *a)
{
	struct cache_priv *p = pipeline_analysis__priv(a);
	struct csim_split_stats st;

	csim_split__stats(p->sp, &st);
	return csim_result__to_json(csim_split__result(p->sp), &p->cfg, st.workers, st.imbalance,
				    p->top);
}

static void cache_destroy(struct pipeline_analysis *a)
{
	struct cache_priv *p = pipeline_analysis__priv(a);
	csim_split__free(p->sp);
}

const struct csim_result *pipeline_cache_result(struct pipeline_analysis *a)
{
	if (pipeline_analysis__ops(a) != &pipeline_analysis_cache)
		return NULL;
	struct cache_priv *p = pipeline_analysis__priv(a);
	return p->sp ? csim_split__result(p->sp) : NULL;
}

void pipeline_cache_stats(struct pipeline_analysis *a, struct csim_split_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (pipeline_analysis__ops(a) != &pipeline_analysis_cache)
		return;
	struct cache_priv *p = pipeline_analysis__priv(a);
	if (p->sp)
		csim_split__stats(p->sp, st);
}

const struct pipeline_analysis_ops pipeline_analysis_cache = {
	.name = "cache",
	.summary = "set-associative LRU cache simulation (I1, D1, [L2], LL), per PC",
	.priv_size = sizeof(struct cache_priv),
	.start = cache_start,
	.refs = cache_refs,
	.finish = cache_finish,
	.write_text = cache_write_text,
	.to_json = cache_to_json,
	.destroy = cache_destroy,
};
