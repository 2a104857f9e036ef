/* padrone-sim: replay an address trace through padrone's pipeline — the set
 * splitter, parallel cache simulators and the other analyses — and report
 * like cachegrind. See padrone-sim(1). */
#include "pipeline/pipeline.h"
#include "src/padrone.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit statuses (padrone-sim(1), EXIT STATUS). */
enum {
	EXIT_OK = 0,
	EXIT_BADINPUT = 1,	/* some trace lines malformed; the rest simulated */
	EXIT_USAGE = 2,		/* bad options or geometry */
	EXIT_FAILURE_RUN = 3,	/* cannot read the input, out of memory, … */
};

#define MAX_ANALYSES 16

static const char usage_text[] =
	"usage: padrone-sim [OPTIONS] --lackey FILE\n"
	"\n"
	"Replay a valgrind lackey address trace (`valgrind --tool=lackey --trace-mem=yes`)\n"
	"through padrone's cache simulators and analyses; FILE '-' is standard input.\n"
	"\n"
	"Input:\n"
	"  --lackey FILE         the trace to replay\n"
	"Cache geometry (SIZE,ASSOC,LINE in bytes; default: this host's caches, as\n"
	"cachegrind detects them):\n"
	"  --I1=S,A,L            level-1 instruction cache\n"
	"  --D1=S,A,L            level-1 data cache\n"
	"  --L2=S,A,L            an optional level between the L1s and LL\n"
	"  --LL=S,A,L            last-level cache\n"
	"  --cachegrind          count exactly as valgrind's cachegrind does\n"
	"Execution and output:\n"
	"  --workers N           simulator threads (cache sets split between them; default 1)\n"
	"  -a, --analysis NAME   run analysis NAME (repeatable; default: cache); 'list' lists them\n"
	"  --trace-out FILE      write the references in lackey's format (the memtrace analysis)\n"
	"  --top N               rows in per-PC and per-block tables (default 10; 0: all)\n"
	"  --json                one JSON object on standard output\n"
	"  -h, --help            this text\n"
	"  -V, --version         padrone's version\n"
	"\n"
	"Exit status: 0 success; 1 malformed trace lines (reported; everything else\n"
	"simulated and printed); 2 bad options; 3 the input could not be read.\n";

struct opts {
	const char *lackey;
	const char *trace_out;
	struct csim_config cfg;
	bool have[CSIM_NLEVELS];
	unsigned workers;
	size_t top;
	bool json;
	const struct pipeline_analysis_ops *ops[MAX_ANALYSES];
	size_t nops;
};

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "padrone-sim: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'padrone-sim --help'.\n");
	return EXIT_USAGE;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *v)
{
	char *end;
	errno = 0;
	unsigned long x = strtoul(s, &end, 10);
	if (!*s || *end || errno || x > max || s[0] == '-')
		return -EINVAL;
	*v = x;
	return 0;
}

static void list_analyses(FILE *out)
{
	size_t n;
	const struct pipeline_analysis_ops *const *all = pipeline_analyses(&n);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%-10s %s\n", all[i]->name, all[i]->summary);
}

static int add_analysis(struct opts *o, const struct pipeline_analysis_ops *ops)
{
	for (size_t i = 0; i < o->nops; i++)
		if (o->ops[i] == ops)
			return 0;
	if (o->nops == MAX_ANALYSES)
		return -E2BIG;
	o->ops[o->nops++] = ops;
	return 0;
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	enum { O_LACKEY = 256, O_I1, O_D1, O_L2, O_LL, O_CG, O_WORKERS, O_JSON, O_TOP, O_TRACE };
	static const struct option longopts[] = {
		{ "lackey", required_argument, NULL, O_LACKEY },
		{ "I1", required_argument, NULL, O_I1 },
		{ "D1", required_argument, NULL, O_D1 },
		{ "L2", required_argument, NULL, O_L2 },
		{ "LL", required_argument, NULL, O_LL },
		{ "cachegrind", no_argument, NULL, O_CG },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "json", no_argument, NULL, O_JSON },
		{ "top", required_argument, NULL, O_TOP },
		{ "trace-out", required_argument, NULL, O_TRACE },
		{ "analysis", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	char err[256];
	unsigned long v;
	int c;

	o->workers = 1;
	o->top = 10;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":a:hV", longopts, NULL)) != -1) {
		switch (c) {
		case O_LACKEY:
			o->lackey = optarg;
			break;
		case O_I1:
		case O_D1:
		case O_L2:
		case O_LL: {
			int lv = c - O_I1;
			if (csim_geom_parse(optarg, &o->cfg.level[lv], err, sizeof err)) {
				fprintf(stderr, "padrone-sim: --%s: %s\n", csim_level_name(lv), err);
				return EXIT_USAGE;
			}
			o->have[lv] = true;
			break;
		}
		case O_CG:
			o->cfg.cachegrind = true;
			break;
		case O_WORKERS:
			if (parse_uint(optarg, 64, &v) || !v)
				return usage_error("--workers wants a number from 1 to 64, not '%s'",
						   optarg);
			o->workers = (unsigned)v;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_TOP:
			if (parse_uint(optarg, ULONG_MAX, &v))
				return usage_error("--top wants a number, not '%s'", optarg);
			o->top = v;
			break;
		case O_TRACE:
			o->trace_out = optarg;
			add_analysis(o, pipeline_analysis_find("memtrace"));
			break;
		case 'a': {
			if (!strcmp(optarg, "list")) {
				list_analyses(stdout);
				return EXIT_OK;
			}
			const struct pipeline_analysis_ops *ops = pipeline_analysis_find(optarg);
			if (!ops)
				return usage_error("no analysis '%s' (-a list lists them)", optarg);
			if (add_analysis(o, ops))
				return usage_error("too many analyses at '%s'", optarg);
			break;
		}
		case 'h':
			fputs(usage_text, stdout);
			return EXIT_OK;
		case 'V':
			printf("padrone-sim %s\n", padrone_version());
			return EXIT_OK;
		case ':':
			return usage_error("option '%s' needs an argument", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->lackey)
		return usage_error("%s", "no input: give --lackey FILE (or - for stdin)");
	if (!o->nops)
		add_analysis(o, pipeline_analysis_find("cache"));
	return -1;
}

/* The host's caches unless given, as cachegrind does. */
static int make_geometry(struct opts *o)
{
	struct csim_config host = { .cachegrind = o->cfg.cachegrind };
	char err[256];

	if (csim_config_host(&host, "/sys/devices/system/cpu/cpu0/cache"))
		csim_config_fallback(&host);
	for (int lv = 0; lv < CSIM_NLEVELS; lv++)
		if (!o->have[lv])
			o->cfg.level[lv] = host.level[lv];
	if (csim_config_check(&o->cfg, err, sizeof err)) {
		fprintf(stderr, "padrone-sim: %s\n", err);
		return EXIT_USAGE;
	}
	return -1;
}

struct run {
	struct pipeline_analysis *a[MAX_ANALYSES];
	size_t n;
};

static int sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct run *run = arg;
	for (size_t i = 0; i < run->n; i++) {
		int rc = pipeline_analysis__refs(run->a[i], refs, n);
		if (rc) {
			fprintf(stderr, "padrone-sim: %s: %s\n", pipeline_analysis__name(run->a[i]),
				pipeline_analysis__errmsg(run->a[i]));
			return rc;
		}
	}
	return 0;
}

static void print_geometry(const struct csim_config *cfg)
{
	for (int lv = 0; lv < CSIM_NLEVELS; lv++) {
		const struct csim_geom *g = &cfg->level[lv];
		if (!g->size)
			continue;
		char name[16];
		snprintf(name, sizeof name, "%s cache:", csim_level_name(lv));
		if (g->assoc == 1)
			printf("%-17s %" PRIu64 " B, %u B, direct-mapped\n", name, g->size, g->line);
		else
			printf("%-17s %" PRIu64 " B, %u B, %u-way associative\n", name, g->size,
			       g->line, g->assoc);
	}
}

static int report(struct opts *o, struct run *run)
{
	if (o->json) {
		struct json_object *top = NULL;
		for (size_t i = 0; i < run->n; i++)
			if (!strcmp(pipeline_analysis__name(run->a[i]), "cache"))
				top = pipeline_analysis__to_json(run->a[i]);
		if (!top)
			top = json_object_new_object();
		for (size_t i = 0; i < run->n; i++) {
			if (!strcmp(pipeline_analysis__name(run->a[i]), "cache"))
				continue;
			struct json_object *j = pipeline_analysis__to_json(run->a[i]);
			if (j)
				json_object_object_add(top, pipeline_analysis__name(run->a[i]), j);
		}
		puts(json_object_to_json_string_ext(top, JSON_C_TO_STRING_PLAIN));
		json_object_put(top);
		return 0;
	}
	for (size_t i = 0; i < run->n; i++) {
		if (!strcmp(pipeline_analysis__name(run->a[i]), "cache"))
			print_geometry(&o->cfg), putchar('\n');
		int rc = pipeline_analysis__write_text(run->a[i], stdout);
		if (rc)
			return rc;
		if (i + 1 < run->n)
			putchar('\n');
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct run run = { 0 };
	struct csim_lackey *lk = NULL;
	FILE *in = NULL, *trace = NULL;
	int status = EXIT_OK, rc;
	char err[512];

	if ((rc = parse_args(argc, argv, &o)) >= 0)
		return rc;
	if ((rc = make_geometry(&o)) >= 0)
		return rc;
	in = strcmp(o.lackey, "-") ? fopen(o.lackey, "re") : stdin;
	if (!in) {
		fprintf(stderr, "padrone-sim: cannot open %s: %s\n", o.lackey, strerror(errno));
		return EXIT_FAILURE_RUN;
	}
	if (o.trace_out) {
		trace = strcmp(o.trace_out, "-") ? fopen(o.trace_out, "we") : stdout;
		if (!trace) {
			fprintf(stderr, "padrone-sim: cannot create %s: %s\n", o.trace_out,
				strerror(errno));
			status = EXIT_FAILURE_RUN;
			goto out;
		}
	}
	struct pipeline_args args = {
		.sz = sizeof(args), .cache = &o.cfg, .workers = o.workers, .trace_out = trace,
		.line = o.cfg.level[CSIM_D1].line, .top = o.top,
	};
	for (size_t i = 0; i < o.nops; i++) {
		run.a[run.n] = pipeline_analysis__new(o.ops[i], &args, err, sizeof err);
		if (!run.a[run.n]) {
			fprintf(stderr, "padrone-sim: %s\n", err);
			status = EXIT_FAILURE_RUN;
			goto out;
		}
		run.n++;
	}
	if ((rc = csim_lackey__open(in, strcmp(o.lackey, "-") ? o.lackey : "<stdin>", &lk))) {
		fprintf(stderr, "padrone-sim: %s\n", strerror(-rc));
		status = EXIT_FAILURE_RUN;
		goto out;
	}
	rc = csim_lackey__run(lk, 4096, sink, &run);
	if (rc == -EBADMSG) {
		fprintf(stderr, "padrone-sim: %s\n", csim_lackey__errmsg(lk));
		if (csim_lackey__bad_lines(lk) > 1)
			fprintf(stderr, "padrone-sim: %" PRIu64 " malformed lines in all, skipped\n",
				csim_lackey__bad_lines(lk));
		status = EXIT_BADINPUT;
	} else if (rc == -EIO) {
		fprintf(stderr, "padrone-sim: %s\n", csim_lackey__errmsg(lk));
		status = EXIT_FAILURE_RUN;
	} else if (rc) {
		status = EXIT_FAILURE_RUN;	/* an analysis said why */
		goto out;
	}
	for (size_t i = 0; i < run.n; i++) {
		if ((rc = pipeline_analysis__finish(run.a[i]))) {
			fprintf(stderr, "padrone-sim: %s: %s\n", pipeline_analysis__name(run.a[i]),
				pipeline_analysis__errmsg(run.a[i]));
			status = EXIT_FAILURE_RUN;
			goto out;
		}
	}
	if (report(&o, &run) || fflush(stdout)) {
		fprintf(stderr, "padrone-sim: cannot write the report: %s\n", strerror(errno));
		status = EXIT_FAILURE_RUN;
	}
out:
	for (size_t i = 0; i < run.n; i++)
		pipeline_analysis__free(run.a[i]);
	csim_lackey__close(lk);
	if (in && in != stdin)
		fclose(in);
	if (trace && trace != stdout && fclose(trace)) {
		fprintf(stderr, "padrone-sim: writing %s: %s\n", o.trace_out, strerror(errno));
		status = EXIT_FAILURE_RUN;
	}
	return status;
}
