/* cfg.h: control-flow graphs and loop forests of machine code, from memory.
 *
 * cfg/ rebuilds a function's control flow from its bytes alone: no symbols
 * and no debug information are needed (they are used for names when there).
 * Code is read through a struct cfg_reader: over a live process (attach/),
 * over an ELF file (for tests and offline use), or over any callback the
 * caller supplies.
 *
 *   struct cfg_reader *r;
 *   cfg_reader__open_elf("/bin/true", 0, NULL, &r);
 *   struct cfg_function *f;
 *   cfg_function__build(r, addr, NULL, &f);      // CFG, dominators, loops
 *   cfg_function__write(f, stdout, &(struct cfg_write_opts){
 *           .sz = sizeof(struct cfg_write_opts), .format = CFG_FORMAT_JSON });
 *   cfg_function__free(f);
 *   cfg_reader__free(r);
 *
 * Conventions: functions return 0 or a negative errno and leave the reason
 * in words in the reader (cfg_reader__errmsg). Constructors fill *out. Bad
 * code (unreadable pages, invalid instructions, data in code, limits) is not
 * a failure of cfg_function__build: the function is built as far as it goes
 * and carries the error and the address (cfg_function__error). Nothing here
 * prints: the exports write to the FILE* the caller gives.
 */
#ifndef PADRONE_CFG_H
#define PADRONE_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct attach_target;

/* ---------------------------------------------------------------- readers */

struct cfg_reader;

/* A symbolizer: the name of the symbol containing addr into name[size] and
 * its start into *start; 0, or -ENOENT when none. Used for names only. */
typedef int (*cfg_symbolize_fn)(void *arg, uint64_t addr, char *name, size_t size,
				uint64_t *start);
/* The address of a function called name; 0, or -ENOENT. */
typedef int (*cfg_lookup_fn)(void *arg, const char *name, uint64_t *addr);

/* A reader over any memory. read returns the bytes read (short at an
 * unreadable page) or -errno. is_code (optional) says whether addr is in
 * executable memory; without it every readable byte counts as code. */
struct cfg_reader_ops {
	size_t sz;		/* sizeof(struct cfg_reader_ops) */
	ssize_t (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	bool (*is_code)(void *ctx, uint64_t addr);
	cfg_symbolize_fn symbolize;	/* optional */
	cfg_lookup_fn lookup;		/* optional */
	void (*destroy)(void *ctx);	/* optional, called by cfg_reader__free */
};

struct cfg_reader_opts {
	size_t sz;		/* sizeof(struct cfg_reader_opts) */
	bool no_modules;	/* live: do not parse ELF images in memory
				 * (no FDEs, no dynamic symbols, no PLT names) */
};

int cfg_reader__new(const struct cfg_reader_ops *ops, void *ctx,
		    const struct cfg_reader_opts *opts, struct cfg_reader **out);
/* An ELF file (executable or shared object) as if loaded at bias (0 for a
 * non-PIE executable or to analyse at link-time addresses). Uses .symtab and
 * .dynsym for names, .rela.plt/.rela.dyn for PLT stub names, .eh_frame_hdr
 * for function starts. */
int cfg_reader__open_elf(const char *path, uint64_t bias, const struct cfg_reader_opts *opts,
			 struct cfg_reader **out);
/* The bias to give cfg_reader__open_elf for the ELF file at path mapped at
 * base (the start of its first mapping): base minus the page of its first
 * PT_LOAD, 0 for a non-PIE executable. -errno when it cannot be read. */
int cfg_elf_load_bias(const char *path, uint64_t base, uint64_t *bias);
/* A live process seized with attach/. Code is read with attach_target__read;
 * executable mappings come from /proc/PID/maps; every ELF image mapped is
 * parsed from the process's memory (program headers, dynamic section,
 * .eh_frame_hdr), never from the file on disk. The target must outlive r. */
int cfg_reader__open_live(struct attach_target *t, const struct cfg_reader_opts *opts,
			  struct cfg_reader **out);
void cfg_reader__free(struct cfg_reader *r);

/* Plug a symbolizer in (e.g. profile/'s, with .symtab from the file on
 * disk). It is asked before the reader's own tables. */
void cfg_reader__set_symbolizer(struct cfg_reader *r, cfg_symbolize_fn symbolize,
				cfg_lookup_fn lookup, void *arg);
/* Forget cached code, decoded instructions and function summaries (after
 * the code was changed, or maps changed: live readers rescan the maps). */
int cfg_reader__flush(struct cfg_reader *r);
const char *cfg_reader__errmsg(const struct cfg_reader *r);

/* Is addr in executable memory (for a file: an executable segment)? */
bool cfg_reader__is_code(struct cfg_reader *r, uint64_t addr);
/* Read code bytes through the reader's cache; bytes read or -errno. */
ssize_t cfg_reader__read(struct cfg_reader *r, uint64_t addr, void *buf, size_t len);
/* Name of the function containing addr ("" and -ENOENT when unknown), with
 * "@plt" for PLT stubs. *start may be NULL. */
int cfg_reader__symbolize(struct cfg_reader *r, uint64_t addr, char *name, size_t size,
			  uint64_t *start);
/* Address of the function called name: the lookup plugged in, else a
 * symbol of the reader's modules (for a file, a PLT stub's NAME@plt too,
 * as elf/ names it; src/ resolves a live process's names with elf/). */
int cfg_reader__lookup(struct cfg_reader *r, const char *name, uint64_t *addr);
/* The entry of the function containing addr (an address from a sample):
 * the FDE covering it, else the symbol covering it, else addr itself. A
 * cold part (an FDE nothing calls, entered by jumps from one function
 * only, conditional ones if it starts in an entry state; or a FUNC.cold
 * symbol) leads to its parent's entry, symbols or not. */
int cfg_reader__function_at(struct cfg_reader *r, uint64_t addr, uint64_t *entry);

/* Function entries of the module containing addr: its FDEs (cold parts,
 * other FDEs that do not start in a function's entry state, and PLT stubs
 * left out), its entry point, DT_INIT/DT_FINI and the init/fini arrays;
 * sorted, unique. *starts is malloc'd (caller frees). */
int cfg_reader__function_starts(struct cfg_reader *r, uint64_t addr, uint64_t **starts,
				size_t *count);

/* ---------------------------------------------------------------- functions */

struct cfg_function;

enum cfg_edge_kind {
	CFG_EDGE_FALLTHROUGH,	/* block ends at another block's start */
	CFG_EDGE_TAKEN,		/* conditional branch taken */
	CFG_EDGE_NOT_TAKEN,	/* conditional branch not taken */
	CFG_EDGE_JUMP,		/* unconditional direct jump */
	CFG_EDGE_JUMP_TABLE,	/* indirect jump through a jump table */
	CFG_EDGE_CALL_RETURN,	/* from a call to its return address */
	CFG_EDGE_TAIL_CALL,	/* a jump leaving to another function */
};
const char *cfg_edge_kind_name(enum cfg_edge_kind k);

/* Why a function is incomplete. */
enum cfg_error {
	CFG_ERR_NONE = 0,
	CFG_ERR_UNREADABLE,	/* code could not be read at the address */
	CFG_ERR_INVALID,	/* bytes that do not decode: data in code? */
	CFG_ERR_NOT_CODE,	/* a branch into non-executable memory */
	CFG_ERR_LIMIT,		/* more instructions or blocks than allowed */
	CFG_ERR_UNRESOLVED,	/* an indirect jump with the frame still live
				 * (not a tail call) whose targets are unknown */
};
#define CFG_ERR_COUNT (CFG_ERR_UNRESOLVED + 1)
const char *cfg_error_name(enum cfg_error e);

#define CFG_DEFAULT_MAX_INSNS 200000
#define CFG_DEFAULT_MAX_BLOCKS 50000
#define CFG_DEFAULT_MAX_CALLEE_INSNS 20000

struct cfg_build_opts {
	size_t sz;		/* sizeof(struct cfg_build_opts) */
	uint32_t max_insns;	/* 0 = CFG_DEFAULT_MAX_INSNS */
	uint32_t max_blocks;	/* 0 = CFG_DEFAULT_MAX_BLOCKS */
	bool find_entry;	/* addr may be anywhere inside the function:
				 * start at cfg_reader__function_at(addr) */
	bool no_callee_analysis;	/* decide noreturn callees from names and
					 * stubs only (no analysis of callees) */
	uint32_t max_callee_insns;	/* instructions the analysis of callees
					 * (transitive, remembered by the reader)
					 * may decode in one build; past it callees
					 * are assumed to return. 0 = default */
};

/* Build the CFG of the function entered at addr: blocks, edges, jump
 * tables, calls, address ranges, dominators, loop forest. Returns 0 with
 * *out even when the code is bad (see cfg_function__error); -ENOMEM,
 * -EINVAL otherwise. */
int cfg_function__build(struct cfg_reader *r, uint64_t addr, const struct cfg_build_opts *opts,
			struct cfg_function **out);
void cfg_function__free(struct cfg_function *f);

uint64_t cfg_function__entry(const struct cfg_function *f);
/* Symbol name; sub_ADDR (hex) when none is known. */
const char *cfg_function__name(const struct cfg_function *f);
/* CFG_ERR_NONE, or why and where the CFG is incomplete; *at and *msg may
 * be NULL. */
enum cfg_error cfg_function__error(const struct cfg_function *f, uint64_t *at, const char **msg);
/* No path from the entry reaches a return or a tail call that returns. */
bool cfg_function__noreturn(const struct cfg_function *f);
/* Indirect jumps that are neither jump tables nor calls through a pointer
 * slot (their targets are unknown). */
size_t cfg_function__unresolved_count(const struct cfg_function *f);
size_t cfg_function__insn_count(const struct cfg_function *f);

/* Address ranges [start, end) covered, sorted; the first contains the
 * entry only if the entry is the lowest address. Where the function ends. */
struct cfg_range {
	uint64_t start, end;
};
size_t cfg_function__range_count(const struct cfg_function *f);
const struct cfg_range *cfg_function__range(const struct cfg_function *f, size_t i);
/* The range containing addr, or NULL. */
const struct cfg_range *cfg_function__range_of(const struct cfg_function *f, uint64_t addr);

/* Blocks are sorted by start address; indices are stable for a function. */
struct cfg_block {
	uint64_t start, end;	/* [start, end) */
	uint32_t insn_count;
	int32_t idom;		/* immediate dominator's index; -1 for the
				 * entry block and unreachable ones */
	int32_t loop;		/* innermost loop's index, or -1 */
	uint32_t first_succ, succ_count;	/* into the edge array, by source */
	uint64_t samples;	/* from cfg_function__attribute */
};
size_t cfg_function__block_count(const struct cfg_function *f);
const struct cfg_block *cfg_function__block(const struct cfg_function *f, size_t i);
size_t cfg_function__entry_block(const struct cfg_function *f);
/* Index of the block containing addr, or -1. */
ssize_t cfg_function__block_at(const struct cfg_function *f, uint64_t addr);
/* Does block a dominate block b? */
bool cfg_function__dominates(const struct cfg_function *f, size_t a, size_t b);

/* Edges, grouped by source block in block order. Tail calls have to = -1
 * and to_addr the callee. */
struct cfg_edge {
	uint32_t from;
	int32_t to;
	uint64_t to_addr;
	enum cfg_edge_kind kind;
};
size_t cfg_function__edge_count(const struct cfg_function *f);
const struct cfg_edge *cfg_function__edge(const struct cfg_function *f, size_t i);

struct cfg_jump_table {
	uint64_t at;		/* the indirect jmp */
	uint64_t table;		/* first entry */
	uint8_t entry_size;	/* 4 (relative to base) or 8 (absolute) */
	uint64_t base;		/* what 4-byte entries are relative to */
	uint32_t target_count;	/* entries, duplicates included */
	const uint64_t *targets;
};
size_t cfg_function__jump_table_count(const struct cfg_function *f);
const struct cfg_jump_table *cfg_function__jump_table(const struct cfg_function *f, size_t i);

/* Calls and tail calls, in address order. */
struct cfg_call {
	uint64_t at;		/* the call (or jmp) instruction */
	uint64_t target;	/* 0 when unknown (through a register) */
	const char *name;	/* "" when unknown; "puts@plt" for a stub */
	bool noreturn;
	bool tail;		/* a jmp, not a call */
	bool indirect;
};
size_t cfg_function__call_count(const struct cfg_function *f);
const struct cfg_call *cfg_function__call(const struct cfg_function *f, size_t i);

/* ---------------------------------------------------------------- loops */

/* The loop forest (Havlak's algorithm with Ramalingam's fix, iterative).
 * Loops are sorted outer before inner. blocks lists every block of the
 * loop, nested loops' included, header first. entries are the blocks
 * entered from outside (one for a reducible loop, its header). back_edges
 * and exits are edge indices. */
struct cfg_loop {
	uint32_t header;	/* block index */
	int32_t parent;		/* loop index or -1 */
	uint32_t depth;		/* 1 for an outermost loop */
	bool irreducible;
	uint32_t block_count, entry_count, back_edge_count, exit_count;
	const uint32_t *blocks, *entries, *back_edges, *exits;
	uint64_t samples;	/* from cfg_function__attribute, nested included */
};
size_t cfg_function__loop_count(const struct cfg_function *f);
const struct cfg_loop *cfg_function__loop(const struct cfg_function *f, size_t i);

/* ---------------------------------------------------------------- samples */

struct cfg_sample {
	uint64_t ip;
	uint64_t count;
};
/* Set the samples of every block and loop from the given (ip, count)
 * pairs (replacing earlier ones); those outside the function are ignored.
 * Returns how many samples (summed counts) fell inside. */
uint64_t cfg_function__attribute(struct cfg_function *f, const struct cfg_sample *s, size_t n);
/* The hottest loop: the one whose own blocks (nested loops' excluded) hold
 * the most samples, the innermost on a tie; -1 if no loop has samples.
 * Its ancestors hold at least as many samples in cfg_loop.samples. */
ssize_t cfg_function__hottest_loop(const struct cfg_function *f);

/* ---------------------------------------------------------------- exports */

enum cfg_format {
	CFG_FORMAT_TEXT,	/* readable listing */
	CFG_FORMAT_JSON,	/* one object; addresses as hex strings */
	CFG_FORMAT_DOT,		/* Graphviz; loops as nested clusters */
	CFG_FORMAT_DISAS,	/* disassembly, block by block */
	CFG_FORMAT_LOOPS,	/* the loop forest: one line per loop, nested */
};

struct cfg_write_opts {
	size_t sz;		/* sizeof(struct cfg_write_opts) */
	enum cfg_format format;
	bool no_disas;		/* text/dot: blocks without instructions */
};

/* Write f to out. 0 or -errno (a write error). */
int cfg_function__write(const struct cfg_function *f, FILE *out, const struct cfg_write_opts *opts);
/* The same into buf[size] (truncated, always NUL-terminated when size > 0);
 * returns the length the whole output needs, like snprintf, or -errno. */
ssize_t cfg_function__snprint(const struct cfg_function *f, char *buf, size_t size,
			      const struct cfg_write_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
