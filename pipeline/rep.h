/* rep.h: the Runtime Execution Profile (REP, after PiPA), version 2.
 *
 * Instrumented code does not write memory addresses. For every executed
 * basic block it writes one unit: a REP_S word naming the block and the
 * REP_D words ("slots") holding the register values the block's memory
 * references are computed from, captured at their point of use. A static
 * block table, written once per instrumented block, says how to rebuild every
 * reference <pc, addr, size, type> from those slots. Recovery does that.
 *
 * Unit (64-bit little-endian words):
 *	word 0     REP_S = REP_S_WORD(id, nslots): bits 0..31 block id (>= 1),
 *	           bit 32 REP_S_SPOILED, bit 33 REP_S_REPEAT, bits 34..47
 *	           zero, bits 48..63 the number of slots the unit holds. This
 *	           is a CAB record header (cab.h), so units travel through CAB
 *	           rings as they are.
 *	           A spoiled unit is one whose slots were overwritten before it
 *	           was written (a signal handler ran instrumented code of the
 *	           same thread between the unit's captures and its commit): its
 *	           block ran, but its slots are not its own. Recovery checks its
 *	           header as any other, then counts it (stats.spoiled) and skips
 *	           it; no edge is counted across it.
 *	word 1+k   REP_D slot k, for k < nslots.
 *	           A repeat unit (REP_S_REPEAT) is its block run again right
 *	           after itself: it holds the block's first n slots (n < the
 *	           block's nslots, in its header) and the rest are the previous
 *	           unit's, which must be the same block's (a loop's body whose
 *	           base registers the loop never changes writes them once per
 *	           run of the loop, not once per iteration), each plus its
 *	           step in the block table (struct rep_block: a loop's index
 *	           register, stepped by a constant per iteration, need not be
 *	           written either). Recovery rebuilds
 *	           the whole unit from the previous one; a repeat unit with no
 *	           such unit before it (after a gap, a spoiled unit, another
 *	           block's) is counted as spoiled and skipped. Never spoiled
 *	           itself. A recovery pool never cuts a stream before one.
 *
 * Block table entry (struct rep_block): id, pc, nslots, the instructions
 * (pc and length of each, in execution order, so instruction fetches can be
 * simulated) and the memory references (struct rep_mref) in program order.
 * A reference's address is
 *	addr = disp + slot[base] + (slot[index] << log2 scale) + slot[seg]
 * where an absent slot (REP_NO_SLOT) counts 0: rip-relative and absolute
 * references carry their whole address in disp and need no slot; fs/gs
 * relative ones name the slot holding the segment base. size is in bytes.
 * A reference with a count slot (a rep-prefixed string instruction) is
 * repeated once per iteration the instruction executed:
 *	iterations = slot[count]                     (rep movs, stos, lods, ins, outs)
 *	iterations = slot[count] - slot[count_end]   (flag REP_MREF_COUNT_DIFF)
 * where count holds the count register (rcx) before the instruction and
 * count_end holds it after: repe/repne cmps and scas stop when the data
 * says, and the CPU counts rcx down once per iteration it executed, the last
 * one included, so the difference is exact where "rcx before" overstates.
 * Element i is at addr + i * size, or at addr - i * size when the direction
 * flag was set (DF = 1: std ... cld): statically known (REP_MREF_DOWN), or
 * read from bit 10 of the rflags value in slot[rflags] (REP_MREF_DF_SLOT).
 * Every byte the iterations touch lies below REP_ADDR_LIMIT; anything else
 * is corrupt data (an error naming the offset). References of one
 * instruction share their count, flags and slots and are interleaved per
 * iteration (rep movs: read, write, read, write), and the instruction is
 * fetched once per iteration, once if there are none, as Valgrind reports
 * it.
 *
 * Recovered stream: struct rep_ref in program order. An instruction fetch
 * is {pc, addr = pc, size = length, REP_REF_INSTR} and comes before the
 * instruction's data references. Recovery also counts executions per block
 * and per edge (consecutive units of one stream).
 *
 * Saved REP file (what padrone-sim --rep reads), little-endian:
 *	header (32 bytes): "PADRNREP", u32 version (REP_VERSION), u32 header
 *	    size (32), u64 flags (0), u64 reserved (0)
 *	sections, each u32 tag, u32 zero, u64 body length (a multiple of 8),
 *	    then the body:
 *	REP_SEC_TABLE  u32 nblocks, u32 zero, then per block: u32 id, u16 nslots,
 *	    u16 flags, u64 pc, u32 ninstrs, u32 nrefs, ninstrs x {u64 pc, u32 len,
 *	    u32 zero}, nrefs x {u64 pc, i64 disp, u32 size, u8 type, u8 scale,
 *	    u16 base, u16 index, u16 seg, u16 count, u16 flags, u16 count_end,
 *	    u16 rflags, u32 zero} (40 bytes; all multiples of 8)
 *	REP_SEC_STREAM u64 thread id, then whole units
 *	REP_SEC_END    empty; the last section
 * One table section comes first; stream sections of any threads follow.
 * Errors name the byte offset of the bad data.
 *
 * Versions. The version changes whenever a reader of the previous one would
 * misread a file; readers accept every version they know and write the
 * latest. Units (and so CAB records) have not changed since version 1
 * but for REP_S_REPEAT, which a reader that does not know it rejects as a
 * bad header, not misreads (only live instrumentation writes it).
 *	1  references of 32 bytes: {..., u16 count, u16 zero}; no count_end,
 *	   no direction (DF taken as 0), counts from rcx before only.
 *	2  references of 40 bytes, with flags, count_end and rflags.
 *
 * Building blocks (for the instrumenter and the tests): rep_build turns the
 * decoded instructions of a block (struct rep_insn: operands with their
 * registers, rsp changes, clobbered registers) into a block table entry and
 * a capture plan (which register goes to which slot before which
 * instruction), plain or with PiPA's optimisations:
 *  - REP_OPT_STACK: one stack-pointer value serves a run of push/pop/call
 *    and rsp-relative references: later uses add the statically known rsp
 *    change to disp instead of capturing rsp again;
 *  - REP_OPT_BASE: a register used again (another field of one structure)
 *    while unchanged reuses the slot captured at its first use.
 * rep_encode then writes the unit for given register values.
 *
 * Conventions: 0 or a negative errno; the reason in words from rep_errmsg().
 */
#ifndef PADRONE_PIPELINE_REP_H
#define PADRONE_PIPELINE_REP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define REP_VERSION 2
#define REP_FILE_MAGIC "PADRNREP"
#define REP_MAX_SLOTS 4095		/* a unit is at most 4096 words */
#define REP_MAX_BLOCK_ID 0xffffffu	/* ids are dense, 1..REP_MAX_BLOCK_ID */
/* The end of the largest x86-64 user address space (5-level paging; 2^47
 * with 4 levels): a string instruction touching a byte at or above it, or
 * wrapping below 0, would have faulted (a non-canonical or kernel address)
 * before finishing, so a rep count that says so is corrupt. It bounds what
 * one reference of a unit may expand to by the machine's own limit, not by a
 * guess at how large a copy can be. */
#define REP_ADDR_LIMIT (1ULL << 56)
#define REP_MAX_REP_REFS 4		/* references of one rep-prefixed instruction */
#define REP_NO_SLOT 0xffffu
#define REP_S_WORD(id, nslots) (((uint64_t)(nslots) << 48) | (uint32_t)(id))
#define REP_S_SPOILED (1ULL << 32)
#define REP_S_REPEAT (1ULL << 33)
/* The words of the unit a header begins (the header and its slots). */
#define REP_S_WORDS(h) (1 + (size_t)((uint64_t)(h) >> 48))

enum rep_sec_tag { REP_SEC_TABLE = 1, REP_SEC_STREAM = 2, REP_SEC_END = 3 };

/* ---------------------------------------------------- shared output types */

enum rep_ref_type { REP_REF_READ = 1, REP_REF_WRITE = 2, REP_REF_MODIFY = 3, REP_REF_INSTR = 4,
		    /* addr fetches at pc that the sink's first instruction
		     * cache hits on its set's most recent line, changing
		     * nothing: sent only when rep_recover__set_fetch_line asks */
		    REP_REF_FETCH_HITS = 5,
		    /* addr data reads (writes) at pc, counted without touching
		     * any cache: padrone's refs analysis, which simulates none */
		    REP_REF_READS = 6, REP_REF_WRITES = 7,
		    /* a loop's run (below): only to a sink that asked for them
		     * (rep_recover__set_runs) */
		    REP_REF_RUN = 8 };
/* A reference that only counts (FETCH_HITS, READS, WRITES): addr of them. */
static inline bool rep_ref_is_count(uint8_t type)
{
	return type >= REP_REF_FETCH_HITS && type <= REP_REF_WRITES;
}
struct rep_ref { uint64_t pc; uint64_t addr; uint32_t size; uint8_t type; uint8_t pad[3]; }; /* 24 bytes */

/* A loop's run: iterations of one block whose references differ only in
 * their addresses, in rep_run_entries(m, k) consecutive references of a
 * batch: {REP_REF_RUN, size = m references per iteration, addr = k
 * iterations}, then the m references of an iteration in order with addr
 * 0 (their pc, size and type), then the k * m addresses in order as
 * 64-bit words packed three to a reference (rep_run_addr). It stands for
 * those k * m references, and takes a third of their room. */
#define REP_RUN_MAX_REFS 32
static inline size_t rep_run_entries(uint32_t m, uint64_t k)
{
	return 1 + (size_t)m + (size_t)((m * k + 2) / 3);
}

/* The i-th address of the run that begins at run. */
static inline uint64_t rep_run_addr(const struct rep_ref *run, uint64_t i)
{
	uint64_t a;

	__builtin_memcpy(&a, (const unsigned char *)(run + 1 + run->size) + 8 * i, 8);
	return a;
}

/* Recovered references, delivered in batches (the array is reused after the
 * call returns). */
typedef void (*rep_ref_sink)(void *arg, const struct rep_ref *refs, size_t n);

/* ------------------------------------------------------ static block table */

struct rep_instr {
	uint64_t pc;
	uint32_t len;
	uint32_t pad;
};

struct rep_mref {
	uint64_t pc;		/* the instruction making the reference */
	int64_t disp;		/* constant offset; the whole address if no slot */
	uint32_t size;		/* bytes (per iteration when count is set) */
	uint8_t type;		/* REP_REF_READ, WRITE or MODIFY */
	uint8_t scale;		/* 1, 2, 4 or 8 */
	uint16_t base;		/* slot with the base register, or REP_NO_SLOT */
	uint16_t index;		/* slot with the index register, or REP_NO_SLOT */
	uint16_t seg;		/* slot with the fs/gs base, or REP_NO_SLOT */
	uint16_t count;		/* slot with the count register before, or REP_NO_SLOT */
	uint16_t flags;		/* REP_MREF_*; only with a count slot */
	uint16_t count_end;	/* REP_MREF_COUNT_DIFF: slot with the count register after */
	uint16_t rflags;	/* REP_MREF_DF_SLOT: slot with rflags before (DF: bit 10) */
	uint16_t pad[2];
};

enum {
	REP_MREF_COUNT_DIFF = 1u,	/* iterations: slot[count] - slot[count_end] */
	REP_MREF_DOWN = 2u,		/* DF = 1: element i at addr - i * size */
	REP_MREF_DF_SLOT = 4u,		/* DF from bit 10 of slot[rflags] */
};

struct rep_block {
	uint32_t id;		/* 1..REP_MAX_BLOCK_ID */
	uint16_t nslots;	/* REP_D words per execution */
	uint16_t flags;		/* 0 */
	uint64_t pc;		/* first instruction */
	uint32_t ninstrs;	/* 0 if instruction fetches are not described */
	uint32_t nrefs;
	const struct rep_instr *instrs;
	const struct rep_mref *refs;
	/* NULL, or per slot what a repeat unit adds to the previous unit's
	 * value of a slot it does not hold (0 for a register its loop never
	 * writes, the loop's step for one it only steps by constants: an
	 * index). Not saved in files, which hold no repeat units. */
	const int64_t *steps;
};

struct rep_table;

const char *rep_errmsg(void);

int rep_table__new(struct rep_table **out);
/* Check and copy a block: unique id, slots < nslots, scale 1/2/4/8, known
 * type, size > 0, references in instruction order on listed instructions,
 * one count slot, flags and count_end/rflags slots per instruction (at most
 * REP_MAX_REP_REFS references on one with a count), flags only with a
 * count, REP_MREF_DOWN and _DF_SLOT not both. count_end and
 * rflags are stored as REP_NO_SLOT when their flag is clear. The error names
 * block and reference. */
int rep_table__add(struct rep_table *t, const struct rep_block *b);
size_t rep_table__size(const struct rep_table *t);
/* The block with this id, or NULL. */
const struct rep_block *rep_table__block(const struct rep_table *t, uint32_t id);
/* The i-th block added, i < rep_table__size. */
const struct rep_block *rep_table__nth(const struct rep_table *t, size_t i);
void rep_table__free(struct rep_table *t);

/* ----------------------------------------------------------------- recovery */

struct rep_recover;

struct rep_recover_stats {
	uint64_t units;		/* executed blocks recovered */
	uint64_t refs;		/* data references (after rep expansion) */
	uint64_t instrs;	/* instruction fetches */
	uint64_t bytes;		/* stream bytes consumed */
	uint64_t gaps;		/* discontinuities (lost data, new stream) */
	uint64_t corrupt;	/* units not recovered from CAB spans: one that
				 * could not be read and the rest of its chunk
				 * (in a rep_pool: the rest of its feed) */
	uint64_t spoiled;	/* units marked REP_S_SPOILED, and repeat units with no
				 * unit of their block before them: skipped */
};

/* A recovery worker over table t (which must outlive it), delivering to
 * sink (may be NULL: counts only). Not thread-safe; one per stream/thread. */
int rep_recover__new(const struct rep_table *t, rep_ref_sink sink, void *arg,
		     struct rep_recover **out);
/* Recover units from words[0..n). A unit may be split across calls (the
 * tail is kept). offset is the byte offset of words[0] in the stream or
 * file, used in error messages; pass UINT64_MAX to continue from the end of
 * the previous call. On bad data returns -EBADMSG naming the offset;
 * everything before it has been recovered and delivered. */
int rep_recover__feed(struct rep_recover *r, const uint64_t *words, size_t n,
		      uint64_t offset);
/* Data was lost, or a new stream starts: no edge across this point. An
 * incomplete unit held from the previous feed is an error (-EBADMSG). */
int rep_recover__gap(struct rep_recover *r);
/* Deliver the references still batched. */
void rep_recover__flush(struct rep_recover *r);
/* The sink gets full batches of REP_RECOVER_BATCH references (shorter ones
 * only at a flush, an error or the end). */
#define REP_RECOVER_BATCH 2048
/* Recover into batch (REP_RECOVER_BATCH references, from malloc) from now
 * on: a sink calls it to keep the array it was handed rather than copy
 * it. The recoverer frees the array it holds. */
void rep_recover__set_batch(struct rep_recover *r, struct rep_ref *batch);
/* The sink simulates a first-level instruction cache of lines of line
 * bytes (a power of two), as csim does: within a block, a fetch that lies
 * in the one line the block's previous fetch ended on hits that line, most
 * recent in its set (data references touch another cache), and changes
 * nothing. Such fetches are then left out of the stream, and their number
 * per PC comes instead as REP_REF_FETCH_HITS references (at the head of a
 * later batch; all of them by the next rep_recover__flush): a simulator
 * fed that stream counts exactly what the whole stream gives it, for a
 * fraction of the work (most of a loop's references are its fetches).
 * Blocks with a rep-prefixed instruction keep every fetch. 0: every fetch
 * (the default). Set before the first feed. */
void rep_recover__set_fetch_line(struct rep_recover *r, uint32_t line);
/* With a fetch line set, the sink's I1 has sets sets: a block without a
 * rep-prefixed instruction that runs again right after itself within one
 * batch (a loop of one block), its lines (consecutive) in sets of their
 * own, finds every line it fetches most recent in its set, and so leaves
 * out (as FETCH_HITS) every fetch that lies in one line (one straddling two
 * is two accesses in csim's per-line counting: it stays). 0: unknown (the
 * default). Set before the first feed. */
void rep_recover__set_fetch_sets(struct rep_recover *r, uint32_t sets);
/* The sink takes loops' runs (REP_REF_RUN, above), as csim__refs does:
 * where a block runs again after itself in repeat units of one header (a
 * loop in its steady state), their references go as one run per batch.
 * Off by default. Set before the first feed. */
void rep_recover__set_runs(struct rep_recover *r, bool runs);
/* As a cab_consume_fn (arg is the rep_recover): spans from a CAB ring.
 * A unit that cannot be recovered does not stop the stream: it and the
 * rest of its chunk are counted (stats.corrupt, the reason in
 * rep_errmsg()), a gap follows, and recovery picks up again at the next
 * span that begins a chunk (CAB_SPAN_CHUNK): chunks start on a unit
 * boundary. Returns 0 then; other errors as rep_recover__feed. */
int rep_recover__cab_fn(void *arg, const uint64_t *words, size_t nwords, unsigned flags);

uint64_t rep_recover__block_count(const struct rep_recover *r, uint32_t id);
uint64_t rep_recover__edge_count(const struct rep_recover *r, uint32_t from, uint32_t to);
typedef int (*rep_count_fn)(void *arg, uint32_t from, uint32_t to, uint64_t count);
/* Every executed block (from = 0, to = id), then every edge; a nonzero
 * return stops and is returned. Order is unspecified. */
int rep_recover__foreach_count(const struct rep_recover *r, rep_count_fn fn, void *arg);
/* Add src's block/edge counts and stats into dst (same table). */
int rep_recover__merge(struct rep_recover *dst, const struct rep_recover *src);
void rep_recover__stats(const struct rep_recover *r, struct rep_recover_stats *st);
void rep_recover__free(struct rep_recover *r);

/* --------------------------------------------------------------- REP files */

struct rep_writer;
int rep_writer__open(const char *path, const struct rep_table *t, struct rep_writer **out);
/* One stream section of whole units of thread tid. */
int rep_writer__stream(struct rep_writer *w, uint64_t tid, const uint64_t *words, size_t n);
/* Write the end section and close; returns the first write error if any. */
int rep_writer__close(struct rep_writer *w);

struct rep_reader;
/* Map the file, check the header and load the table. */
int rep_reader__open(const char *path, struct rep_reader **out);
const struct rep_table *rep_reader__table(const struct rep_reader *r);
/* Next stream section: 1 and its words, 0 at the end section, or -EBADMSG
 * naming the offset (truncated or corrupt). offset is the file offset of
 * the first word. */
int rep_reader__next(struct rep_reader *r, uint64_t *tid, const uint64_t **words,
		     size_t *n, uint64_t *offset);
/* Recover every stream section into rec (a gap between sections of
 * different threads). Bad data inside a stream section ends that section
 * (what came before it is delivered, and a gap follows); recovery goes on
 * with the next section. A truncated file or a bad section header ends the
 * replay there (nothing after it can be found). 0, or
 * the first error (its message, naming the offset, in rep_errmsg()). */
int rep_reader__replay(struct rep_reader *r, struct rep_recover *rec);
void rep_reader__close(struct rep_reader *r);

/* ------------------------------------------ building blocks, encoder (tests) */

/* General registers in x86 encoding order, plus the segment bases. */
enum rep_reg {
	REP_REG_NONE = 0,
	REP_REG_RAX, REP_REG_RCX, REP_REG_RDX, REP_REG_RBX,
	REP_REG_RSP, REP_REG_RBP, REP_REG_RSI, REP_REG_RDI,
	REP_REG_R8, REP_REG_R9, REP_REG_R10, REP_REG_R11,
	REP_REG_R12, REP_REG_R13, REP_REG_R14, REP_REG_R15,
	REP_REG_FSBASE, REP_REG_GSBASE,
	REP_REG_RFLAGS,
	REP_NREGS
};

/* A memory operand as decoded. Registers hold their value before the
 * instruction executes (push writes at rsp - 8: base rsp, disp -8). */
struct rep_operand {
	uint8_t type;		/* REP_REF_READ, WRITE, MODIFY */
	uint8_t base;		/* enum rep_reg; NONE for absolute/rip-relative (disp = address) */
	uint8_t index;
	uint8_t scale;
	uint8_t seg;		/* REP_REG_FSBASE/GSBASE or NONE */
	uint8_t count;		/* rep prefix: the count register (rcx), or NONE */
	uint8_t flags;		/* REP_OPF_*, with a count; the same on every operand */
	uint8_t pad;
	uint32_t size;
	int64_t disp;
};

#define REP_MAX_OPERANDS 3
struct rep_insn {
	uint64_t pc;
	uint32_t len;
	int32_t rsp_delta;	/* rsp += rsp_delta after it, when known statically */
	uint32_t clobbers;	/* 1u << reg for registers it sets to unknown values */
	uint32_t nops;
	struct rep_operand ops[REP_MAX_OPERANDS];
};

/* Operand flags of rep-prefixed instructions. */
enum {
	REP_OPF_COUNT_DIFF = 1u,	/* stops early (repe/repne cmps, scas): the count
					 * register is captured after it as well */
	REP_OPF_DOWN = 2u,		/* DF is known to be 1 here (after std) */
	REP_OPF_DF = 4u,		/* DF unknown: rflags is captured before it */
};

enum { REP_OPT_STACK = 1u, REP_OPT_BASE = 2u };

/* Before instruction insn executes (after it, when after is set), the value
 * of reg goes to slot. */
struct rep_capture {
	uint32_t insn;
	uint16_t slot;
	uint8_t reg;
	uint8_t after;
};

/* A built block: its table entry (block.instrs/refs point into this) and
 * its capture plan, in instruction order (an instruction's captures before
 * it ahead of those after it). Free with rep_built__free. */
struct rep_built {
	struct rep_block block;
	struct rep_instr *instrs;
	struct rep_mref *refs;
	struct rep_capture *caps;
	uint32_t ncaps;
};

int rep_build(const struct rep_insn *insns, uint32_t n, uint32_t id, unsigned opts,
	      struct rep_built *out);
void rep_built__free(struct rep_built *b);
/* Write the unit of one execution: regs[i][reg] is the value of reg before
 * instruction i, and so after instruction i - 1; regs[n] (after the last
 * instruction) is read only when a capture is after the last one. Returns
 * the number of words written (1 + nslots), or -ENOSPC if cap is too small. */
int rep_encode(const struct rep_built *b, const uint64_t (*regs)[REP_NREGS],
	       uint64_t *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
