/* analysis-memtrace.c: the reference stream written out in lackey's format
 * (so a REP stream can be read by any lackey-trace tool, and a lackey trace
 * round-trips). */
#include "pipeline/pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>

extern const struct pipeline_analysis_ops pipeline_analysis_memtrace;

struct memtrace_priv {
	FILE *out;
	uint64_t written;
};

static int memtrace_start(struct pipeline_analysis *a, const struct pipeline_args *args)
{
	struct memtrace_priv *p = pipeline_analysis__priv(a);
	if (!args->trace_out)
		return pipeline_analysis__fail(a, -EINVAL, "no output file given (--trace-out)");
	p->out = args->trace_out;
	return 0;
}

static int memtrace_refs(struct pipeline_analysis *a, const struct rep_ref *refs, size_t n)
{
	struct memtrace_priv *p = pipeline_analysis__priv(a);
	int rc = csim_lackey_write(p->out, refs, n);
	if (rc)
		return pipeline_analysis__fail(a, rc, "cannot write the trace: %s",
					       rc == -EIO ? "write error" : "unknown reference type");
	p->written += n;
	return 0;
}

static int memtrace_finish(struct pipeline_analysis *a)
{
	struct memtrace_priv *p = pipeline_analysis__priv(a);
	if (fflush(p->out))
		return pipeline_analysis__fail(a, -EIO, "cannot write the trace");
	return 0;
}

static int memtrace_write_text(struct pipeline_analysis *a, FILE *out)
{
	struct memtrace_priv *p = pipeline_analysis__priv(a);
	fprintf(out, "Memory trace: %" PRIu64 " references written\n", p->written);
	return 0;
}

static struct json_object *memtrace_to_json(struct pipeline_analysis *a)
{
	struct memtrace_priv *p = pipeline_analysis__priv(a);
	struct json_object *o = json_object_new_object();
	if (o)
		json_object_object_add(o, "written", json_object_new_uint64(p->written));
	return o;
}

const struct pipeline_analysis_ops pipeline_analysis_memtrace = {
	.name = "memtrace",
	.summary = "write the references in lackey's trace format (--trace-out)",
	.priv_size = sizeof(struct memtrace_priv),
	.start = memtrace_start,
	.refs = memtrace_refs,
	.finish = memtrace_finish,
	.write_text = memtrace_write_text,
	.to_json = memtrace_to_json,
};
