/* padrone-sim: replay an address trace through padrone's pipeline — the set
 * splitter, parallel cache simulators and the other analyses — and report
 * like cachegrind. See padrone-sim(1). */
#include "pipeline/pipeline.h"
#include "pipeline/rep.h"
#include "src/version.h"
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
#include <unistd.h>

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
	"       padrone-sim [OPTIONS] --rep FILE\n"
	"\n"
	"Replay a memory reference trace through padrone's cache simulators and analyses.\n"
	"\n"
	"Input (one of):\n"
	"  --lackey FILE         a trace from valgrind's lackey tool with its memory\n"
	"                        trace on; FILE '-' is standard input\n"
	"  --rep FILE            a saved REP stream with its block table\n"
	"Cache geometry (SIZE,ASSOC,LINE in bytes; default: this host's caches, as\n"
	"cachegrind detects them):\n"
	"  --I1=S,A,L            level-1 instruction cache\n"
	"  --D1=S,A,L            level-1 data cache\n"
	"  --L2=S,A,L            an optional level between the L1s and LL\n"
	"  --LL=S,A,L            last-level cache\n"
	"  --cachegrind          count exactly as valgrind's cachegrind does\n"
	"Execution and output:\n"
	"  --workers N           simulator threads (cache sets split between them; default 1)\n"
	"  --recovery-workers N  threads recovering a REP file's references, 0: the reading\n"
	"                        thread (default: one fewer than the CPUs, 0 up to 2 CPUs)\n"
	"  -a, --analysis NAME   run analysis NAME (repeatable; default: cache); 'list' lists them\n"
	"  --trace-out FILE      write the references in lackey's format (the memtrace analysis)\n"
	"  --top N               rows in per-PC and per-block tables (default 10; 0: all)\n"
	"  --json                one JSON object on standard output\n"
	"  -h, --help            this text\n"
	"  -V, --version         padrone's version\n"
	"\n"
	"Exit status: 0 success; 1 malformed input (reported, naming the line or byte\n"
	"offset; everything else simulated and printed); 2 bad options; 3 the input\n"
	"could not be read.\n";

struct opts {
	const char *lackey;
	const char *rep;
	const char *trace_out;
	struct csim_config cfg;
	bool have[CSIM_NLEVELS];
	unsigned workers;
	unsigned rworkers;
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

/* One recovery thread per CPU but one, which is left to the thread that
 * hands the references to the simulators; more than 8 gain little (the
 * handing on is serial). With 2 CPUs or fewer, none: one recovery thread
 * handing references to the reading thread was 3x slower than the reading
 * thread recovering them itself (bench/pipeline-recover). */
static unsigned default_recovery_workers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n <= 2 ? 0 : n > 9 ? 8 : (unsigned)(n - 1);
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	enum { O_LACKEY = 256, O_REP, O_I1, O_D1, O_L2, O_LL, O_CG, O_WORKERS, O_RWORKERS, O_JSON,
	       O_TOP, O_TRACE };
	static const struct option longopts[] = {
		{ "lackey", required_argument, NULL, O_LACKEY },
		{ "rep", required_argument, NULL, O_REP },
		{ "I1", required_argument, NULL, O_I1 },
		{ "D1", required_argument, NULL, O_D1 },
		{ "L2", required_argument, NULL, O_L2 },
		{ "LL", required_argument, NULL, O_LL },
		{ "cachegrind", no_argument, NULL, O_CG },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "recovery-workers", required_argument, NULL, O_RWORKERS },
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
	o->rworkers = default_recovery_workers();
	o->top = 10;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":a:hV", longopts, NULL)) != -1) {
		switch (c) {
		case O_LACKEY:
			o->lackey = optarg;
			break;
		case O_REP:
			o->rep = optarg;
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
		case O_RWORKERS:
			if (parse_uint(optarg, 64, &v))
				return usage_error("--recovery-workers wants a number from 0 to 64, not '%s'",
						   optarg);
			o->rworkers = (unsigned)v;
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
			printf("padrone-sim %s\n", padrone_version_text());
			return EXIT_OK;
		case ':':
			return usage_error("option '%s' needs an argument", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->lackey == !o->rep)
		return usage_error("%s", o->lackey ? "give one input, --lackey or --rep"
						   : "no input: give --lackey FILE (- for stdin) or --rep FILE");
	if (!o->nops)
		add_analysis(o, pipeline_analysis_find("cache"));
	return -1;
}

/* The host's caches unless given, as cachegrind does. */
static int make_geometry(struct opts *o)
{
	struct csim_config host = { .cachegrind = o->cfg.cachegrind };
	char err[256];

	csim_config_host(&host);	/* the fallback when it fails, as cachegrind */
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
	uint64_t refs;		/* references fed to the analyses */
	bool recovered;		/* from a REP file: rec holds the recovery's stats */
	struct rep_recover_stats rec;
};

struct block_row;
static int report_analyses(struct opts *o, struct run *run, const struct block_row *blocks,
			   size_t nblocks);

static int sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct run *run = arg;
	run->refs += n;
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

static struct pipeline_analysis *find(struct run *run, const char *name)
{
	for (size_t i = 0; i < run->n; i++)
		if (!strcmp(pipeline_analysis__name(run->a[i]), name))
			return run->a[i];
	return NULL;
}

struct block_row {
	struct pipeline_block_count b;
	struct csim_counts c;
};

static uint64_t dmisses(const struct csim_counts *c)
{
	return c->miss[CSIM_D1][CSIM_READ] + c->miss[CSIM_D1][CSIM_WRITE] +
	       c->miss[CSIM_LL][CSIM_READ] + c->miss[CSIM_LL][CSIM_WRITE];
}

static int cmp_block_rows(const void *x, const void *y)
{
	const struct block_row *a = x, *b = y;
	uint64_t ma = dmisses(&a->c), mb = dmisses(&b->c);
	if (ma != mb)
		return ma > mb ? -1 : 1;
	return a->b.pc < b->b.pc ? -1 : a->b.pc > b->b.pc;
}

static int cmp_block_pc(const void *x, const void *y)
{
	const struct pipeline_block_count *a = x, *b = y;
	return a->pc < b->pc ? -1 : a->pc > b->pc;
}

/* With both the cache and the blocks analyses: the cache counts of each
 * block's instructions, most data misses first. Blocks seen in a trace may
 * overlap (a jump into the middle of a run of instructions starts another):
 * each is cut at the next block start, so every instruction counts in one
 * block, and a block's executions are those of its first instruction. NULL
 * unless both analyses ran. */
static struct block_row *block_rows(struct run *run, size_t *n)
{
	struct pipeline_analysis *cache = find(run, "cache"), *blocks = find(run, "blocks");
	struct pipeline_block_count *b;
	size_t nb, k = 0;

	*n = 0;
	if (!cache || !blocks || pipeline_blocks_ranges(blocks, &b, &nb))
		return NULL;
	const struct csim_result *res = pipeline_cache_result(cache);
	qsort(b, nb, sizeof(*b), cmp_block_pc);
	struct block_row *rows = calloc(nb ? nb : 1, sizeof(*rows));
	struct csim_block_range *ranges = calloc(nb ? nb : 1, sizeof(*ranges));
	for (size_t i = 0; rows && ranges && i < nb; i++) {
		struct csim_pc_stats first;
		if (!b[i].end)
			continue;
		if (i + 1 < nb && b[i + 1].pc < b[i].end)
			b[i].end = b[i + 1].pc;
		rows[k].b = b[i];
		rows[k].b.count = csim_result__get(res, b[i].pc, &first) ? first.c.instr : 0;
		ranges[k++] = (struct csim_block_range){ b[i].pc, b[i].end };
	}
	struct csim_counts *c = calloc(k ? k : 1, sizeof(*c));
	if (!rows || !ranges || !c || csim_result__fold_blocks(res, ranges, k, c)) {
		free(rows);
		rows = NULL;
		k = 0;
	}
	for (size_t i = 0; i < k; i++)
		rows[i].c = c[i];
	if (rows)
		qsort(rows, k, sizeof(*rows), cmp_block_rows);
	free(c);
	free(ranges);
	free(b);
	*n = k;
	return rows;
}

static void write_block_rows(const struct block_row *rows, size_t n, size_t top, FILE *out)
{
	fprintf(out, "\nTop blocks by data misses (instructions in [block, end)):\n"
		     "%-18s %-18s %12s %12s %12s %12s %10s %10s %10s %10s\n",
		"block", "end", "executions", "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "DLmr");
	for (size_t i = 0; i < n && (!top || i < top); i++) {
		const struct csim_counts *c = &rows[i].c;
		fprintf(out,
			"0x%-16" PRIx64 " 0x%-16" PRIx64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64
			" %12" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "\n",
			rows[i].b.pc, rows[i].b.end, rows[i].b.count, c->refs[CSIM_INSTR],
			c->refs[CSIM_READ], c->refs[CSIM_WRITE], c->miss[CSIM_I1][CSIM_INSTR],
			c->miss[CSIM_D1][CSIM_READ], c->miss[CSIM_D1][CSIM_WRITE],
			c->miss[CSIM_LL][CSIM_READ]);
	}
}

static struct json_object *json_block_rows(const struct block_row *rows, size_t n, size_t top)
{
	struct json_object *arr = json_object_new_array();
	for (size_t i = 0; arr && i < n && (!top || i < top); i++) {
		const struct csim_counts *c = &rows[i].c;
		char pc[32], end[32];
		struct json_object *e = json_object_new_object();
		snprintf(pc, sizeof pc, "0x%" PRIx64, rows[i].b.pc);
		snprintf(end, sizeof end, "0x%" PRIx64, rows[i].b.end);
		json_object_object_add(e, "pc", json_object_new_string(pc));
		json_object_object_add(e, "end", json_object_new_string(end));
		json_object_object_add(e, "executions", json_object_new_uint64(rows[i].b.count));
		json_object_object_add(e, "reads", json_object_new_uint64(c->refs[CSIM_READ]));
		json_object_object_add(e, "writes", json_object_new_uint64(c->refs[CSIM_WRITE]));
		json_object_object_add(e, "D1_misses",
				       json_object_new_uint64(c->miss[CSIM_D1][CSIM_READ] +
							      c->miss[CSIM_D1][CSIM_WRITE]));
		json_object_object_add(e, "LL_misses",
				       json_object_new_uint64(c->miss[CSIM_LL][CSIM_READ] +
							      c->miss[CSIM_LL][CSIM_WRITE]));
		json_object_array_add(arr, e);
	}
	return arr;
}

/* The units a REP file's recovery could not use are lost, as stats and
 * report count them in a live run: spoiled ones (a signal handler ran the
 * copy meanwhile) and unreadable ones (bad data, and the rest of its
 * section). */
static uint64_t lost_units(const struct rep_recover_stats *st)
{
	return st->spoiled + st->corrupt;
}

static void write_recovery(const struct rep_recover_stats *st, FILE *out)
{
	fprintf(out, "\nREP recovery: %" PRIu64 " units recovered, %" PRIu64 " lost (%" PRIu64
		" spoiled, %" PRIu64 " corrupt), %" PRIu64 " gaps\n", st->units, lost_units(st),
		st->spoiled, st->corrupt, st->gaps);
}

static struct json_object *json_recovery(const struct rep_recover_stats *st)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "units", json_object_new_uint64(st->units));
	json_object_object_add(o, "lost_units", json_object_new_uint64(lost_units(st)));
	json_object_object_add(o, "spoiled", json_object_new_uint64(st->spoiled));
	json_object_object_add(o, "corrupt", json_object_new_uint64(st->corrupt));
	json_object_object_add(o, "gaps", json_object_new_uint64(st->gaps));
	return o;
}

static int report(struct opts *o, struct run *run)
{
	size_t nblocks;
	struct block_row *blocks = block_rows(run, &nblocks);
	int rc = report_analyses(o, run, blocks, nblocks);
	free(blocks);
	return rc;
}

static int report_analyses(struct opts *o, struct run *run, const struct block_row *blocks,
			   size_t nblocks)
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
		if (blocks)
			json_object_object_add(top, "per_block",
					       json_block_rows(blocks, nblocks, o->top));
		if (run->recovered)
			json_object_object_add(top, "recovery", json_recovery(&run->rec));
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
	if (blocks)
		write_block_rows(blocks, nblocks, o->top, stdout);
	if (run->recovered)
		write_recovery(&run->rec, stdout);
	return 0;
}

/* --lackey: returns an exit status (the report follows), or minus one (no
 * report). */
static int replay_lackey(const struct opts *o, struct run *run)
{
	struct csim_lackey *lk;
	bool std = !strcmp(o->lackey, "-");
	FILE *in = std ? stdin : fopen(o->lackey, "re");
	int status = EXIT_OK, rc;

	if (!in) {
		fprintf(stderr, "padrone-sim: cannot open %s: %s\n", o->lackey, strerror(errno));
		return -EXIT_FAILURE_RUN;
	}
	if ((rc = csim_lackey__open(in, std ? "<stdin>" : o->lackey, &lk))) {
		fprintf(stderr, "padrone-sim: %s\n", strerror(-rc));
		if (!std)
			fclose(in);
		return -EXIT_FAILURE_RUN;
	}
	rc = csim_lackey__run(lk, 4096, sink, run);
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
		status = -EXIT_FAILURE_RUN;	/* an analysis said why; no report */
	} else if (!run->refs) {	/* not a trace: nothing to report */
		fprintf(stderr, "padrone-sim: %s: not a lackey trace: none of its %" PRIu64 " lines "
				"is a trace line (valgrind --tool=lackey --trace-mem=yes writes them)\n",
			std ? "<stdin>" : o->lackey, csim_lackey__lines(lk));
		status = -EXIT_BADINPUT;
	}
	csim_lackey__close(lk);
	if (!std)
		fclose(in);
	return status;
}

struct rep_run {
	struct run *run;
	const char *path;
	int rc;		/* the first analysis error (already said) */
};

static int rep_sink(void *arg, uint64_t stream, const struct rep_ref *refs, size_t n)
{
	struct rep_run *rr = arg;
	(void)stream;
	return rr->rc = sink(rr->run, refs, n);
}

/* Bad data in a section: said at once, in file order; the pool goes on
 * with the next section. */
static void rep_error(void *arg, uint64_t stream, int err, const char *msg)
{
	struct rep_run *rr = arg;
	(void)stream;
	(void)err;
	fprintf(stderr, "padrone-sim: %s: %s; the rest of the section skipped\n", rr->path, msg);
}

struct rep_counts {
	const struct rep_table *t;
	struct pipeline_block_count *blocks;
	struct pipeline_edge_count *edges;
	size_t nblocks, nedges, capb, cape;
};

static int count_fn(void *arg, uint32_t from, uint32_t to, uint64_t count)
{
	struct rep_counts *c = arg;
	const struct rep_block *bt = rep_table__block(c->t, to);
	const struct rep_block *bf = from ? rep_table__block(c->t, from) : NULL;

	if (!bt || (from && !bf))
		return -EINVAL;
	if (!from) {
		if (c->nblocks == c->capb) {
			c->capb = c->capb ? 2 * c->capb : 256;
			void *p = realloc(c->blocks, c->capb * sizeof(*c->blocks));
			if (!p)
				return -ENOMEM;
			c->blocks = p;
		}
		const struct rep_instr *last = bt->ninstrs ? &bt->instrs[bt->ninstrs - 1] : NULL;
		c->blocks[c->nblocks++] = (struct pipeline_block_count){
			.pc = bt->pc, .count = count, .end = last ? last->pc + last->len : 0 };
		return 0;
	}
	if (c->nedges == c->cape) {
		c->cape = c->cape ? 2 * c->cape : 256;
		void *p = realloc(c->edges, c->cape * sizeof(*c->edges));
		if (!p)
			return -ENOMEM;
		c->edges = p;
	}
	c->edges[c->nedges++] = (struct pipeline_edge_count){ bf->pc, bt->pc, count };
	return 0;
}

/* Hand the recovery's block and edge counts to the analyses. */
static int deliver_counts(struct run *run, const struct rep_table *t, const struct rep_recover *rec)
{
	struct rep_counts c = { .t = t };
	int rc = rep_recover__foreach_count(rec, count_fn, &c);

	for (size_t i = 0; !rc && i < run->n; i++) {
		if ((rc = pipeline_analysis__blocks(run->a[i], c.blocks, c.nblocks)) ||
		    (rc = pipeline_analysis__edges(run->a[i], c.edges, c.nedges)))
			fprintf(stderr, "padrone-sim: %s: %s\n", pipeline_analysis__name(run->a[i]),
				pipeline_analysis__errmsg(run->a[i]));
	}
	free(c.blocks);
	free(c.edges);
	return rc;
}

/* Every stream section into the pool, in file order: a gap where the
 * thread changes (as rep_reader__replay). Returns the reader's error for a
 * bad section header (after which nothing can be found), its message in msg. */
static int feed_sections(struct rep_reader *rd, struct rep_pool *pool, char *msg, size_t len)
{
	uint64_t tid, prev = 0, off;
	const uint64_t *w;
	size_t n;
	bool first = true;
	int rc;

	while ((rc = rep_reader__next(rd, &tid, &w, &n, &off)) == 1) {
		unsigned flags = REP_POOL_BORROW | (first || tid != prev ? REP_POOL_GAP : 0);
		first = false;
		prev = tid;
		if ((rc = rep_pool__feed(pool, tid, w, n, off, flags)))
			return rc;	/* fatal: said by the sink, or in the pool's message */
	}
	if (rc < 0)
		snprintf(msg, len, "%s", rep_errmsg());
	return rc;
}

/* Do the analyses only simulate caches? Then the fetches that hit their
 * line need not reach them one by one (rep_recover__set_fetch_line). */
static bool only_caches(const struct run *run)
{
	for (size_t i = 0; i < run->n; i++)
		if (strcmp(pipeline_analysis__name(run->a[i]), "cache"))
			return false;
	return run->n > 0;
}

/* --rep: a saved REP file (rep.h), recovered on the recovery threads and
 * fed to the analyses. Returns an exit status; negative: stop without a
 * report. */
static int replay_rep(const struct opts *o, struct run *run)
{
	struct rep_reader *rd;
	struct rep_pool *pool;
	struct rep_run rr = { .run = run, .path = o->rep };
	const struct csim_geom *i1 = &o->cfg.level[CSIM_I1];
	bool left_out = only_caches(run);
	struct rep_pool_opts po = { .sz = sizeof(po), .workers = o->rworkers, .error = rep_error,
				    .on_caller = o->rworkers == 0,
				    .fetch_line = left_out ? i1->line : 0,
				    .fetch_sets = left_out ? (uint32_t)csim_geom_sets(i1) : 0 };
	char msg[512] = "";
	int status = EXIT_OK, rc;

	if ((rc = rep_reader__open(o->rep, &rd))) {
		fprintf(stderr, "padrone-sim: %s\n", rep_errmsg());
		/* A file that cannot be opened, or whose header or block table
		 * is bad: nothing of it can be recovered. */
		return -(rc == -EBADMSG ? EXIT_BADINPUT : EXIT_FAILURE_RUN);
	}
	const struct rep_table *t = rep_reader__table(rd);
	if ((rc = rep_pool__new(t, &po, rep_sink, &rr, &pool))) {
		fprintf(stderr, "padrone-sim: cannot start the recovery threads: %s\n", strerror(-rc));
		rep_reader__close(rd);
		return -EXIT_FAILURE_RUN;
	}
	int frc = feed_sections(rd, pool, msg, sizeof msg);
	rc = rep_pool__finish(pool);
	if (rr.rc) {
		status = -EXIT_FAILURE_RUN;	/* an analysis said why; no report */
	} else if (rc && rc != -EBADMSG) {
		fprintf(stderr, "padrone-sim: %s: %s\n", o->rep, rep_pool__errmsg(pool));
		status = -EXIT_FAILURE_RUN;
	} else {
		/* Bad sections were said as they came; everything else counts. */
		if (rc)
			status = EXIT_BADINPUT;
		if (frc == -EBADMSG) {
			fprintf(stderr, "padrone-sim: %s\n", msg);
			status = EXIT_BADINPUT;
		} else if (frc) {
			fprintf(stderr, "padrone-sim: %s\n", msg);
			status = EXIT_FAILURE_RUN;
		}
		if (deliver_counts(run, t, rep_pool__counts(pool)))
			status = -EXIT_FAILURE_RUN;	/* said why; no report */
		rep_recover__stats(rep_pool__counts(pool), &run->rec);
		run->recovered = true;
	}
	rep_pool__free(pool);
	rep_reader__close(rd);
	return status;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct run run = { 0 };
	FILE *trace = NULL;
	int status = EXIT_OK, rc;
	char err[512];

	if ((rc = parse_args(argc, argv, &o)) >= 0)
		return rc;
	if ((rc = make_geometry(&o)) >= 0)
		return rc;
	if (o.trace_out) {
		trace = strcmp(o.trace_out, "-") ? fopen(o.trace_out, "we") : stdout;
		if (!trace) {
			fprintf(stderr, "padrone-sim: cannot create %s: %s\n", o.trace_out,
				strerror(errno));
			return EXIT_FAILURE_RUN;
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
	struct pipeline_analysis *cache = find(&run, "cache");
	struct csim_split_stats st;
	if (cache) {
		pipeline_cache_stats(cache, &st);
		if (st.workers < o.workers)
			fprintf(stderr, "padrone-sim: %u workers, not %u: these caches' set counts "
					"allow only %u groups of sets\n",
				st.workers, o.workers, 1u << st.bits);
	}
	status = o.rep ? replay_rep(&o, &run) : replay_lackey(&o, &run);
	if (status < 0) {
		status = -status;
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
	if (trace && trace != stdout && fclose(trace)) {
		fprintf(stderr, "padrone-sim: writing %s: %s\n", o.trace_out, strerror(errno));
		status = EXIT_FAILURE_RUN;
	}
	return status;
}
