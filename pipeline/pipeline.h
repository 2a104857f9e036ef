/* pipeline.h: the pipeline assembly of padrone — cache simulators, the set
 * splitter and its worker threads, analyses of the recovered reference
 * stream, and their results. The REP format and the CAB rings have their
 * own header and room-internal header (rep.h, cab.h).
 *
 * Data flow: a source (REP recovery, or a lackey trace read by
 * csim_lackey) produces batches of struct rep_ref and, when it knows them,
 * per-block and per-edge execution counts. Analyses consume them
 * (pipeline_analysis). The cache analysis routes references by cache set to
 * N simulator threads (csim_split) whose results are merged at the end; N
 * workers give exactly the results of one.
 *
 * Conventions: functions return 0 or a negative errno and leave the reason in
 * words in the object (…__errmsg) or in a caller's buffer; nothing prints,
 * nothing exits. Hot paths (csim__refs, the workers) allocate nothing per
 * reference.
 */
#ifndef PADRONE_PIPELINE_H
#define PADRONE_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pipeline/rep.h"

#ifdef __cplusplus
extern "C" {
#endif

struct json_object;

/* ============================================================ geometry */

/* The simulated levels. Instruction fetches go I1 -> [L2] -> LL, data
 * accesses D1 -> [L2] -> LL; a level with size 0 is absent (only L2 may be
 * absent; I1, D1 and LL always exist, as in Cachegrind). */
enum csim_level { CSIM_I1, CSIM_D1, CSIM_L2, CSIM_LL, CSIM_NLEVELS };

/* What a level access was for. A modify (read-modify-write) is a READ in
 * Cachegrind mode and a READ then a WRITE otherwise. */
enum csim_kind { CSIM_INSTR, CSIM_READ, CSIM_WRITE, CSIM_NKINDS };

struct csim_geom {
	uint64_t size;		/* bytes; 0: level absent */
	uint32_t assoc;		/* ways */
	uint32_t line;		/* bytes, a power of two */
};

struct csim_config {
	struct csim_geom level[CSIM_NLEVELS];
	/* Count exactly as valgrind 3.19's cachegrind does (see
	 * csim_config_check and padrone-sim(1)): an access straddling lines
	 * counts once (a miss if any line misses, every line updated), a
	 * modify counts as one read, the next level is consulted only on a
	 * miss and then with the original address and size, data accesses
	 * above 16 bytes other than 32- and 64-byte vector ones are cut to 16 bytes
	 * (cachegrind's dirty-helper rule), set counts are powers of two. */
	bool cachegrind;
};

const char *csim_level_name(enum csim_level lv);	/* "I1", "D1", "L2", "LL" */

/* Parse "SIZE,ASSOC,LINE" (decimal, as cachegrind's --D1=…). -EINVAL and a
 * message in err on anything else. Does not check the geometry. */
int csim_geom_parse(const char *text, struct csim_geom *g, char *err, size_t errlen);

/* Number of sets of a level (size / (assoc * line)). */
uint64_t csim_geom_sets(const struct csim_geom *g);

/* Cachegrind's x86-64 fallback geometry when it cannot read the host's
 * caches: I1 65536,2,64  D1 65536,2,64  LL 262144,8,64; no L2. */
void csim_config_fallback(struct csim_config *cfg);

/* One cpuid query: leaf and subleaf in, eax, ebx, ecx, edx out in r. */
typedef void (*csim_cpuid_fn)(uint32_t leaf, uint32_t subleaf, uint32_t r[4], void *arg);

/* The host's caches as valgrind 3.19's cachegrind finds them, from cpuid
 * (never sysfs): Intel's leaf 2 descriptors and leaf 4, AMD's leaves
 * 0x80000005/6; the level-1 instruction and data caches, and the unified
 * cache of the deepest level as LL, adjusted as cachegrind does when its
 * set count is not a power of two (csim_geom_cachegrind_tweak). 0, or
 * -errno when cachegrind would use its fallback: an unknown vendor, a cache
 * missing, caches that make no sense (then cfg holds csim_config_fallback).
 * csim_config_cpuid asks fn instead of the processor (for tests).
 * cfg->cachegrind is left alone. */
int csim_config_host(struct csim_config *cfg);
int csim_config_cpuid(struct csim_config *cfg, csim_cpuid_fn fn, void *arg);

/* What cachegrind does to an auto-detected LL whose set count S is not a
 * power of two: S becomes the largest power of two below it, the
 * associativity grows by the same factor (rounded), the size is recomputed.
 * Returns true if g changed. */
bool csim_geom_cachegrind_tweak(struct csim_geom *g);

/* Validate every level. Line sizes must be powers of two (>= 16 in
 * Cachegrind mode, as cachegrind requires), size a multiple of
 * assoc * line. In Cachegrind mode set counts must be powers of two, as
 * cachegrind requires of --I1/--D1/--LL; otherwise any set count works
 * (set = line number mod sets). -EINVAL with a message naming the level. */
int csim_config_check(const struct csim_config *cfg, char *err, size_t errlen);

/* How many low bits of the line address (at the largest line size) a
 * splitter may use so that a line maps to the same worker at every level:
 * the smallest, over levels, of log2(line) + v2(sets) - log2(largest line),
 * where v2 is the number of trailing zero bits (log2 for powers of two). */
unsigned csim_config_split_bits(const struct csim_config *cfg);

/* ============================================================= results */

/* Counts of one simulation, or of one PC. */
struct csim_counts {
	/* References by trace type: instr, read, write, modify. */
	uint64_t instr, reads, writes, modifies;
	/* Accesses by kind as cachegrind counts them: Ir, Dr, Dw. */
	uint64_t refs[CSIM_NKINDS];
	/* Accesses reaching each level, and misses there, by kind. In
	 * Cachegrind mode one reference is one access per level it reaches;
	 * otherwise each line is its own access. */
	uint64_t access[CSIM_NLEVELS][CSIM_NKINDS];
	uint64_t miss[CSIM_NLEVELS][CSIM_NKINDS];
};

struct csim_pc_stats {
	uint64_t pc;
	struct csim_counts c;
};

/* A simulation's totals plus a row per PC (the PC of an instruction fetch
 * is its address; a data reference carries its instruction's PC). */
struct csim_result;

struct csim_result *csim_result__new(void);	/* NULL and errno on failure */
void csim_result__free(struct csim_result *r);
void csim_result__clear(struct csim_result *r);
const struct csim_counts *csim_result__totals(const struct csim_result *r);
/* The counts of pc: true and *out filled, or false if pc has no row. */
bool csim_result__get(const struct csim_result *r, uint64_t pc, struct csim_pc_stats *out);
size_t csim_result__npcs(const struct csim_result *r);
/* Add src's rows into dst. 0, -ENOMEM, or -EINVAL when the two were
 * counted in different modes. */
int csim_result__merge(struct csim_result *dst, const struct csim_result *src);
/* Two results are equal: totals and every row. */
bool csim_result__equal(const struct csim_result *a, const struct csim_result *b);

enum csim_order {
	CSIM_BY_PC,		/* ascending pc */
	CSIM_BY_DMISSES,	/* D1 + LL data misses, then I1 + LL instr misses,
				 * descending; ties by ascending pc */
};
/* Rows sorted, in a malloc'd array the caller frees; *n gets the count.
 * NULL and errno on failure (an empty result gives a non-NULL array). */
struct csim_pc_stats *csim_result__sorted(const struct csim_result *r, enum csim_order order,
					  size_t *n);

/* Fold per-PC rows into blocks [start, end): out[i] (zeroed by the caller)
 * gets the sum of the rows whose pc lies in block i. Blocks need not be
 * sorted and may overlap (a row counts in each block containing it). */
struct csim_block_range {
	uint64_t start, end;
};
int csim_result__fold_blocks(const struct csim_result *r, const struct csim_block_range *blocks,
			     size_t nblocks, struct csim_counts *out);

/* The report padrone-sim --json prints:
 * {"refs":{"instr":N,"reads":N,"writes":N,"modifies":N},"I1":{"misses":N},
 *  "D1":{"read_misses":N,"write_misses":N},["L2":{…},]
 *  "LL":{"read_misses":N,"write_misses":N},"workers":N,"imbalance":x,
 *  "per_pc":[{"pc":"0x…","reads":N,"writes":N,"D1_misses":N,"LL_misses":N}]}
 * per_pc holds the top rows by CSIM_BY_DMISSES (all of them if top is 0),
 * rows without data accesses left out. L2 appears only when simulated. NULL
 * and errno on failure. */
struct json_object *csim_result__to_json(const struct csim_result *r,
					 const struct csim_config *cfg, unsigned workers,
					 double imbalance, size_t top);

/* Cachegrind-like summary ("I refs:", "I1 misses:", …, "LL miss rate:")
 * followed by the top PCs by misses. */
int csim_result__write_text(const struct csim_result *r, const struct csim_config *cfg,
			    unsigned workers, double imbalance, size_t top, FILE *out);

/* ============================================== one simulator (one thread) */

struct csim;

/* A simulator of cfg (checked here; -EINVAL if invalid). */
int csim__new(const struct csim_config *cfg, struct csim **out);
void csim__free(struct csim *s);
/* Simulate refs in order. Allocation happens only when a PC is seen for
 * the first time (its row). -ENOMEM then, with the earlier refs counted.
 * References that only count (rep_ref_is_count: FETCH_HITS, READS, WRITES)
 * add to their PC's counts (csim_split's too); a loop's run (REP_REF_RUN)
 * is the references it stands for; a reference of no known type, or a run
 * that does not fit in refs or holds more than REP_RUN_MAX_REFS references
 * of an iteration, is -EINVAL.
 * (The other analyses take only the four cache types.) */
int csim__refs(struct csim *s, const struct rep_ref *refs, size_t n);
/* The accumulated result, owned by s. */
struct csim_result *csim__result(struct csim *s);
/* Empty every level (the counts stay). */
void csim__flush_caches(struct csim *s);
/* The lines each level holds: the misses that filled an empty way since
 * the levels were last empty (first touches: a set evicts only once full,
 * so such a line was never in it). Every other miss would miss again in a
 * simulation that began earlier; these might have hit. */
void csim__lines_held(const struct csim *s, uint64_t held[CSIM_NLEVELS]);
/* Sampling by time: the references given from now on are those of a new
 * window, after a gap of off_s seconds unseen, which followed a window of
 * on_s (the first window's is not needed). Every line held so far is
 * aged (a tag's count of gaps since its line was used), and each level's
 * hits on aged lines are counted by age and way from now on, so that
 * csim__window_evicted can weigh them; hits and misses stay those of the
 * references given (as csim__refs alone would count them). The searches
 * of levels with windows are scalar. -ENOMEM, and the window is not
 * begun. */
int csim__window_begin(struct csim *s, double on_s, double off_s);
/* The hits on aged lines of level lv that a simulation of the whole time
 * would have missed, expected, the window in progress on for on_s so far:
 * each is taken as evicted when the gaps since its line was used brought
 * into its set, at the level's rate of misses per set and second on (those
 * that the evictions stand for included), at least as many new lines as
 * the ways below it (Poisson's law). 0 before any window. */
double csim__window_evicted(const struct csim *s, int lv, double on_s);
/* The hits on aged lines of level lv so far. */
uint64_t csim__window_aged_hits(const struct csim *s, int lv);

/* ================================================= splitter and workers */

/* Routes references by cache set to N worker threads, each simulating the
 * sets it owns, over one CAB ring per worker. A line goes to the same worker
 * at every level (csim_config_split_bits). A reference that touches lines of
 * two workers is cut into one part per line-block; in Cachegrind mode the
 * parts meet in a shared slot where each reports, level by level, whether
 * its lines missed, so the reference still counts once, misses if any line
 * misses, and the next level is consulted for every line exactly when the
 * sequential simulator would. A worker whose part still waits for its
 * partner's verdict defers the deeper-level access, and later accesses to
 * the sets it may touch behind it, and keeps going: no worker ever waits
 * for another. Results equal csim__refs' exactly. */
struct csim_split;

struct csim_split_opts {
	size_t sz;		/* sizeof(struct csim_split_opts) */
	unsigned workers;	/* 0 = 1; capped at 2^csim_config_split_bits */
	size_t ring_bytes;	/* per worker ring; 0 = 4 MiB */
	size_t chunk_bytes;	/* ring chunk; 0 = 64 KiB */
	unsigned slots;		/* meeting slots for cut references (Cachegrind
				 * mode); 0 = 65536, the most. Fewer make the
				 * splitter wait for them (tests). */
};

struct csim_split_stats {
	unsigned workers;	/* threads actually used */
	unsigned bits;		/* set-index bits used for routing */
	uint64_t refs;		/* references pushed */
	uint64_t parts;		/* extra ring entries made by cutting references */
	uint64_t cross;		/* references cut across workers */
	uint64_t per_worker[64];	/* ring entries routed to each (first 64) */
	double imbalance;	/* max / mean of per_worker; 1.0 is perfect */
	uint64_t waits;		/* accesses deferred behind a partner's verdict */
	double worker_cpu[64];	/* CPU seconds each worker used (first 64) */
	double worker_busy[64];	/* ... of which simulating, not waiting for input */
	double splitter_cpu;	/* CPU seconds the routing thread spent in push/finish */
};

int csim_split__new(const struct csim_config *cfg, const struct csim_split_opts *opts,
		    struct csim_split **out);
/* Route refs (in order, after every earlier push). Their pad bytes are
 * ignored (the rings use them). Blocks while a worker's ring is full. */
int csim_split__push(struct csim_split *sp, const struct rep_ref *refs, size_t n);
/* Drain, stop the workers, merge their results. Idempotent. */
int csim_split__finish(struct csim_split *sp);
/* The merged result (after finish), owned by sp. */
const struct csim_result *csim_split__result(const struct csim_split *sp);
void csim_split__stats(const struct csim_split *sp, struct csim_split_stats *st);
const char *csim_split__errmsg(const struct csim_split *sp);
/* Stops the workers if still running and frees everything. */
void csim_split__free(struct csim_split *sp);

/* ================================================ parallel REP recovery */

/* PiPA's second stage: K recovery threads turn REP units into references
 * and block/edge counts, while the caller's thread hands the references on
 * (to csim_split, to the analyses). Fed words are cut into chunks of whole
 * units; a thread takes a whole chunk and recovers it into buffers of that
 * chunk's own; the caller's thread delivers the chunks strictly in the order
 * they were fed. The sink therefore sees exactly the stream that one
 * rep_recover fed the same words would deliver, and the counts are exactly
 * its counts (an edge from one chunk into the next is added in order), for
 * any number of threads.
 *
 * Streams: each feed names its stream (a target thread, a ring, a file's
 * thread id); an edge joins a stream's consecutive units, never units of two
 * streams, and never across a feed flagged REP_POOL_GAP.
 *
 * Bad data (an unknown block, a unit cut by the end of its feed, an
 * impossible rep count) ends its feed: the references before it are
 * delivered, opts.error is called with the message (naming the offset), the
 * rest of that feed is dropped and the stream starts again at the next feed
 * with no edge across, as rep_reader__replay skips the rest of a section.
 * The bad unit and the rest of its feed (units by their headers' lengths)
 * count as corrupt in the counts' stats (rep_recover_stats.corrupt).
 *
 * Threads: feed, run_cab, finish and the callbacks run on the caller's
 * thread (one caller). Nothing allocates per reference; a chunk not yet
 * due holds at most max_chunk_refs references before its thread waits. */
struct rep_pool;
struct cab_consumer;

struct rep_pool_opts {
	size_t sz;		/* sizeof(struct rep_pool_opts) */
	unsigned workers;	/* recovery threads; 0 = 1, at most 256 */
	size_t chunk_bytes;	/* feeds are cut into chunks of about this; 0 = 64 KiB */
	unsigned depth;		/* chunks in flight; 0 = 4 per thread */
	size_t max_chunk_refs;	/* buffered per chunk not yet due; 0 = 256 Ki */
	/* Bad data in a feed, in feed order (msg names the offset). */
	void (*error)(void *arg, uint64_t stream, int err, const char *msg);
	/* No recovery thread: rep_pool__feed recovers on the caller's thread,
	 * straight into the sink (workers is ignored). Where the caller and one
	 * recovery thread cannot each have a CPU, handing references from one
	 * thread to another costs more than recovering them. */
	bool on_caller;
	/* The sink only simulates caches, the first instruction cache with
	 * lines of this many bytes: fetches that hit are left out and counted
	 * (rep_recover__set_fetch_line). 0: every fetch. */
	uint32_t fetch_line;
	/* ... and that cache's sets: a loop of one block leaves out its
	 * fetches run after run (rep_recover__set_fetch_sets). 0: unknown. */
	uint32_t fetch_sets;
};

struct rep_pool_stats {
	unsigned workers;	/* recovery threads */
	uint64_t chunks;	/* chunks fed */
	uint64_t errors;	/* feeds that had bad data (each reported) */
	uint64_t discarded;	/* chunks after bad data in their feed, dropped */
	uint64_t waits;		/* times the caller waited for the next chunk */
	double worker_cpu[64];	/* CPU seconds of each thread (first 64; after finish) */
};

/* References of a stream, in order; nonzero stops the pool (feed and finish
 * return it). refs is reused after the call. */
typedef int (*rep_pool_sink)(void *arg, uint64_t stream, const struct rep_ref *refs, size_t n);

enum {
	REP_POOL_GAP = 1u,	/* data was lost before these words: no edge into them */
	REP_POOL_BORROW = 2u,	/* keep a pointer instead of a copy; the words
				 * must stay unchanged until rep_pool__finish */
};

/* A pool over table t (which must outlive it; no blocks added while it
 * runs); threads start here. 0, -EINVAL (bad opts) or -ENOMEM. */
int rep_pool__new(const struct rep_table *t, const struct rep_pool_opts *opts,
		  rep_pool_sink sink, void *arg, struct rep_pool **out);
/* Whole units of stream (a unit cut by the end of the words is bad data).
 * Feeds are recovered apart: a repeat unit (rep.h) at a feed's start has no
 * unit before it and counts as spoiled; inside a feed none is cut from the
 * unit it repeats. (Live rings, which carry them, are recovered serially.)
 * offset: byte offset of words[0] in the stream or file, for messages;
 * UINT64_MAX continues from the stream's previous feed. Delivers what is
 * ready; waits while `depth` chunks are in flight. 0, or a fatal error
 * (a sink's, -ENOMEM): never one for bad data, which is reported in order. */
int rep_pool__feed(struct rep_pool *p, uint64_t stream, const uint64_t *words, size_t n,
		   uint64_t offset, unsigned flags);
/* Consume rings until every one reports end of stream (or *stop): ring i's
 * spans are stream i, copied, with REP_POOL_GAP where records were lost. A
 * producer whose process died is drained. 0 or a fatal error; call finish
 * after it. */
int rep_pool__run_cab(struct rep_pool *p, struct cab_consumer *const *rings, size_t n,
		      const volatile int *stop);
/* Deliver everything, stop the threads, join the counts. Returns 0,
 * -EBADMSG when some feed had bad data (the first message in errmsg), or
 * the fatal error. Idempotent. */
int rep_pool__finish(struct rep_pool *p);
/* Block and edge counts and stats of everything delivered (after finish;
 * rep_recover__foreach_count, __block_count, __edge_count, __stats). */
const struct rep_recover *rep_pool__counts(const struct rep_pool *p);
void rep_pool__stats(const struct rep_pool *p, struct rep_pool_stats *st);
const char *rep_pool__errmsg(const struct rep_pool *p);
/* Stops the threads if still running (what is in flight is dropped). */
void rep_pool__free(struct rep_pool *p);

/* ======================================================= lackey traces */

/* Reads `valgrind --tool=lackey --trace-mem=yes` output: lines "I  ADDR,SIZE"
 * (instruction fetch), " L ADDR,SIZE", " S …", " M …" (load, store,
 * modify of the instruction last fetched). Any other line (valgrind's
 * "==PID==" messages, the program's output) is ignored. A line that starts
 * like a trace line but does not parse is an error naming its number; the
 * reader skips it and goes on, so nothing else is lost. */
struct csim_lackey;

typedef int (*csim_ref_sink)(void *arg, const struct rep_ref *refs, size_t n);

int csim_lackey__open(FILE *in, const char *name, struct csim_lackey **out);
/* Parse everything, handing batches of up to batch refs to sink (which
 * returns 0, or a negative errno to stop). Returns 0 when every trace line
 * parsed, -EBADMSG when some did not (csim_lackey__errmsg names the first,
 * csim_lackey__bad_lines counts them), -EIO on a read error, or the sink's
 * error. */
int csim_lackey__run(struct csim_lackey *lk, size_t batch, csim_ref_sink sink, void *arg);
const char *csim_lackey__errmsg(const struct csim_lackey *lk);
uint64_t csim_lackey__lines(const struct csim_lackey *lk);
uint64_t csim_lackey__bad_lines(const struct csim_lackey *lk);
void csim_lackey__close(struct csim_lackey *lk);	/* does not fclose */

/* Parse one line (no newline needed). 1 and *ref filled for a trace line,
 * 0 for a line to ignore, -EBADMSG for a malformed trace line (reason in
 * why). last_pc is the PC given to data references. */
int csim_lackey_parse_line(const char *line, size_t len, uint64_t last_pc, struct rep_ref *ref,
			   const char **why);

/* Write refs in lackey's format (the memory-trace analysis' output). */
int csim_lackey_write(FILE *out, const struct rep_ref *refs, size_t n);

/* ============================================================ analyses */

/* Analyses consume the recovered stream; each lives in its own file
 * pipeline/analysis-NAME.c defining `const struct pipeline_analysis_ops
 * pipeline_analysis_NAME`. Adding one is that file plus its name in
 * PIPELINE_ANALYSES (pipeline/Makemodule.am): automake compiles only the
 * sources it is told of (it has no wildcards, by design), and the table of
 * analyses, padrone-sim's -a and its list are generated from that line;
 * nothing else changes. tests/pipeline/padrone-sim.sh names a file whose
 * line is missing. */

struct pipeline_block_count {
	uint64_t pc;		/* block start */
	uint64_t count;		/* executions */
	uint64_t end;		/* address after its last instruction; 0: unknown */
};
struct pipeline_edge_count {
	uint64_t from, to;	/* block start pcs */
	uint64_t count;
};

struct pipeline_args {
	size_t sz;				/* sizeof(struct pipeline_args) */
	const struct csim_config *cache;	/* cache: geometry and mode */
	unsigned workers;			/* cache: simulator threads */
	FILE *trace_out;			/* memtrace: where to write */
	uint32_t line;				/* reuse: line size, 0 = 64 */
	size_t top;				/* rows in reports, 0 = all */
};

struct pipeline_analysis;

struct pipeline_analysis_ops {
	const char *name;
	const char *summary;	/* one line, for --help */
	size_t priv_size;
	int (*start)(struct pipeline_analysis *a, const struct pipeline_args *args);
	int (*refs)(struct pipeline_analysis *a, const struct rep_ref *refs, size_t n);
	/* Counts known to the source (REP recovery); a source that has none
	 * (a lackey trace) never calls them. */
	int (*blocks)(struct pipeline_analysis *a, const struct pipeline_block_count *b, size_t n);
	int (*edges)(struct pipeline_analysis *a, const struct pipeline_edge_count *e, size_t n);
	int (*finish)(struct pipeline_analysis *a);
	int (*write_text)(struct pipeline_analysis *a, FILE *out);
	struct json_object *(*to_json)(struct pipeline_analysis *a);	/* NULL: none */
	void (*destroy)(struct pipeline_analysis *a);
};

/* Every analysis, in name order; *n gets the count. */
const struct pipeline_analysis_ops *const *pipeline_analyses(size_t *n);
const struct pipeline_analysis_ops *pipeline_analysis_find(const char *name);

/* Make one (ops->start runs); NULL and errno on failure, with the reason in
 * err. */
struct pipeline_analysis *pipeline_analysis__new(const struct pipeline_analysis_ops *ops,
						 const struct pipeline_args *args, char *err,
						 size_t errlen);
int pipeline_analysis__refs(struct pipeline_analysis *a, const struct rep_ref *refs, size_t n);
int pipeline_analysis__blocks(struct pipeline_analysis *a, const struct pipeline_block_count *b,
			      size_t n);
int pipeline_analysis__edges(struct pipeline_analysis *a, const struct pipeline_edge_count *e,
			     size_t n);
int pipeline_analysis__finish(struct pipeline_analysis *a);
int pipeline_analysis__write_text(struct pipeline_analysis *a, FILE *out);
struct json_object *pipeline_analysis__to_json(struct pipeline_analysis *a);
const char *pipeline_analysis__name(const struct pipeline_analysis *a);
const struct pipeline_analysis_ops *pipeline_analysis__ops(const struct pipeline_analysis *a);
const char *pipeline_analysis__errmsg(const struct pipeline_analysis *a);
void pipeline_analysis__free(struct pipeline_analysis *a);

/* For analysis files: the private state (priv_size bytes, zeroed), and the
 * error message setter (printf-style). */
void *pipeline_analysis__priv(struct pipeline_analysis *a);
int pipeline_analysis__fail(struct pipeline_analysis *a, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The blocks analysis' blocks (after finish), most executed first, in a
 * malloc'd array the caller frees; .end is where the block's instructions
 * end (0 if unknown). -EINVAL for another analysis. */
int pipeline_blocks_ranges(struct pipeline_analysis *a, struct pipeline_block_count **out,
			   size_t *n);

/* The cache analysis' simulator result and split statistics (NULL / zero
 * before finish or for another analysis). */
const struct csim_result *pipeline_cache_result(struct pipeline_analysis *a);
void pipeline_cache_stats(struct pipeline_analysis *a, struct csim_split_stats *st);

#ifdef __cplusplus
}
#endif
#endif
