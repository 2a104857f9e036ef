/* cfg/ internals shared by its files; not part of the public API. */
#ifndef PADRONE_CFG_INTERNAL_H
#define PADRONE_CFG_INTERNAL_H

#include "cfg/cfg.h"
#include "util/util.h"

#include <Zydis/Zydis.h>
#include <stdarg.h>

/* ------------------------------------------------------------ arrays */

/* Grow a malloc'd array to hold at least n elements of size sz. */
int cfg__grow(void *pptr, size_t *cap, size_t n, size_t sz);

/* ------------------------------------------------------------ decoding */

enum cfg_ikind {
	CFG_I_PLAIN,
	CFG_I_JCC,		/* conditional, direct */
	CFG_I_JMP,		/* unconditional, direct */
	CFG_I_JMP_IND,
	CFG_I_CALL,
	CFG_I_CALL_IND,
	CFG_I_RET,
	CFG_I_SYSCALL,
	CFG_I_HALT,		/* hlt, ud2, int3: no successor */
	CFG_I_INVALID,		/* bytes that do not decode */
	CFG_I_UNREADABLE,
};

/* What an instruction does to rsp, from raw encoding fields (no operand
 * decoding): the stack height tracker for tail-call detection uses it. */
enum cfg_stack_op {
	CFG_SP_NONE,
	CFG_SP_ADD,		/* rsp += delta (push: -8, pop: +8, add/sub imm) */
	CFG_SP_FRAME,		/* mov rbp, rsp */
	CFG_SP_LEAVE,		/* leave: rsp = rbp + 8 */
	CFG_SP_LEA_RBP,		/* lea rsp, [rbp + delta] */
	CFG_SP_UNKNOWN,		/* anything else writing rsp */
};

struct cfg_insn {
	uint64_t addr;
	uint64_t target;	/* direct branch target; rip-relative memory
				 * operand's address for jmp/call [rip+X] */
	uint16_t mnemonic;	/* ZydisMnemonic */
	uint8_t len;
	uint8_t kind;		/* enum cfg_ikind */
	uint8_t sp_op;		/* enum cfg_stack_op */
	uint8_t rip_mem;	/* jmp/call through [rip+X] */
	uint8_t nop;		/* nop, or padding that decodes as such */
	int8_t const_reg;	/* register (0-15) set to const_val, or -1 */
	int32_t sp_delta;
	int64_t const_val;
	uint8_t bytes[15];
};

struct cfg_decoder {
	ZydisDecoder zd;
	ZydisFormatter fmt;
};
void cfg__decoder_init(struct cfg_decoder *d);
/* Decode the instruction at addr from bytes[n] into *out (all fields). */
void cfg__decode_bytes(const struct cfg_decoder *d, uint64_t addr, const uint8_t *bytes,
		      size_t n, struct cfg_insn *out);
/* Full decoding with operands, for the few instructions that need them. */
int cfg__decode_full(const struct cfg_decoder *d, const struct cfg_insn *in,
		    ZydisDecodedInstruction *zi, ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT]);
/* Intel syntax text. */
void cfg__format_insn(const struct cfg_decoder *d, const struct cfg_insn *in, char *buf,
		     size_t size);

/* ------------------------------------------------------------ modules */

struct cfg_sym {
	uint64_t addr, size;
	const char *name;	/* in the module's string pool */
};
struct cfg_fde {
	uint64_t start, end;
	uint64_t lsda;		/* its language-specific data (landing pads), or 0 */
	bool entry;		/* starts in a function's entry state */
};
struct cfg_slot {
	uint64_t slot;		/* GOT slot address */
	const char *name;
};

struct cfg_cold {
	uint64_t start;		/* a cold part's FDE */
	uint64_t parent;	/* the entry of the function it belongs to */
};

/* One ELF image in the address space. */
struct cfg_module {
	char *path;
	uint64_t bias, lo, hi;	/* load bias; extent of its mappings */
	struct cfg_sym *syms;	/* sorted by addr */
	size_t nsyms, csyms;
	struct cfg_fde *fdes;	/* sorted by start */
	size_t nfdes;
	struct cfg_slot *slots;	/* sorted by slot */
	size_t nslots, cslots;
	uint64_t *entries;	/* entry point, init/fini functions */
	size_t nentries, centries;
	char **pool;		/* strings owned */
	size_t npool, cpool;
	struct cfg_cold *colds;	/* sorted by start; found at first need */
	size_t ncolds;
	bool parsed, cold_done;
};

/* Parse what the in-memory image at base tells (program headers,
 * PT_DYNAMIC: dynsym and PLT relocations; PT_GNU_EH_FRAME: FDEs), reading
 * through r. bias_hint: the load bias if known, else UINT64_MAX. */
int cfg__module_parse_memory(struct cfg_reader *r, struct cfg_module *m, uint64_t base);
void cfg__module_fini(struct cfg_module *m);
int cfg__module_add_sym(struct cfg_module *m, uint64_t addr, uint64_t size, const char *name);
int cfg__module_add_slot(struct cfg_module *m, uint64_t slot, const char *name);
void cfg__module_sort(struct cfg_module *m);
const struct cfg_sym *cfg__module_sym_at(const struct cfg_module *m, uint64_t addr);
const struct cfg_fde *cfg__module_fde_at(const struct cfg_module *m, uint64_t addr);
const char *cfg__module_slot_name(const struct cfg_module *m, uint64_t slot);
/* The landing pads of an FDE's LSDA (gcc's .gcc_except_table: where the
 * unwinder resumes in the function for a cleanup or a catch), read
 * through r: *pads malloc'd, sorted, unique. 0 (maybe none) or -errno. */
int cfg__lsda_pads(struct cfg_reader *r, const struct cfg_fde *f, uint64_t **pads, size_t *n);

/* ------------------------------------------------------------ reader */

struct cfg_page {
	uint64_t addr;
	int32_t len;		/* bytes readable from addr, -errno if none */
	uint8_t data[4096];
};

#define CFG_MAX_CALLEE_DEPTH 24

/* Callee summary: does the function at an address return? In the map,
 * BUSY (being analysed: the frame's index above the low byte) and PROV (an
 * answer resting on a frame's assumption: its index in prov) are kept
 * apart from final answers. */
enum cfg_ret { CFG_RET_UNKNOWN, CFG_RET_YES, CFG_RET_NO, CFG_RET_BUSY, CFG_RET_PROV };

/* A function whose summary is being computed. Its callers within its
 * strongly connected component (recursion) are told the assumption, "does
 * not return" at first (the greatest fixpoint: mutually recursive functions
 * that only exit do not return); if it turns out to return after all and
 * the assumption was used, it is analysed again. low: the lowest frame the
 * answer rests on (Tarjan's lowlink); mark: prov's length when pushed. */
struct cfg_ret_frame {
	uint64_t entry;
	uint8_t assume;		/* CFG_RET_NO, then CFG_RET_YES */
	bool used;
	uint32_t low, mark;
};
struct cfg_ret_prov {
	uint64_t entry;
	uint8_t ret;
	uint32_t low;
};

struct cfg_reader {
	struct cfg_reader_ops ops;
	void *ctx;
	struct cfg_decoder dec;
	/* the caller's symbolizer */
	cfg_symbolize_fn usym;
	cfg_lookup_fn ulookup;
	void *uarg;
	/* page cache */
	struct util_hmap pages;	/* page addr -> index */
	struct cfg_page **pagev;
	size_t npages, cpages;
	/* decode cache */
	struct util_hmap insns;	/* addr -> index */
	struct cfg_insn **insnv;	/* chunks of CFG_INSN_CHUNK */
	size_t ninsns, cinsnv;
	/* callee summaries */
	struct util_hmap rets;	/* entry -> enum cfg_ret (UNKNOWN: not known) */
	unsigned depth;		/* nesting of callee analyses: frames in use */
	struct cfg_ret_frame frames[CFG_MAX_CALLEE_DEPTH + 1];
	struct cfg_ret_prov *prov;	/* answers not final yet */
	size_t nprov, cprov;
	uint32_t callee_budget;	/* instructions callee analyses may still
				 * decode in this cfg_function__build */
	bool callee_cut;	/* the budget ran out: a "returns" answer may
				 * rest on callees never looked at */
	/* modules */
	struct cfg_module *mods;
	size_t nmods, cmods;
	int (*refresh)(struct cfg_reader *r);	/* re-learn modules */
	char err[512];
};
#define CFG_INSN_CHUNK 4096
/* Caches kept between builds: over these they are dropped before the next
 * one (about 80 and 64 MiB), so sweeping a huge library stays bounded. */
#define CFG_INSN_CACHE_MAX (1u << 20)
#define CFG_PAGE_CACHE_MAX 16384u

/* Drop decoded instructions and code pages past the limits above. Only
 * between builds: a build holds pointers into the caches. */
void cfg__reader_trim(struct cfg_reader *r);

int cfg__reader_err(struct cfg_reader *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int cfg__reader_alloc(const struct cfg_reader_ops *ops, void *ctx, struct cfg_reader **out);
/* Decoded instruction at addr (cached); never NULL unless out of memory. */
const struct cfg_insn *cfg__reader_insn(struct cfg_reader *r, uint64_t addr);
bool cfg__reader_is_code(struct cfg_reader *r, uint64_t addr);
struct cfg_module *cfg__reader_module(struct cfg_reader *r, uint64_t addr);
int cfg__reader_add_module(struct cfg_reader *r, struct cfg_module **out);
/* A PLT-like stub at addr: [endbr64;] [bnd] jmp [rip+slot]. *name gets the
 * slot's symbol if known ("" if not). */
bool cfg__reader_stub(struct cfg_reader *r, uint64_t addr, uint64_t *slot, const char **name);
const char *cfg__reader_slot_name(struct cfg_reader *r, uint64_t slot);
/* Name of a function (symbol at exactly addr, or stub name). */
const char *cfg__reader_name_at(struct cfg_reader *r, uint64_t addr, char *buf, size_t size);
const struct cfg_fde *cfg__reader_fde_at(struct cfg_reader *r, uint64_t addr);
/* Is addr the start of a function as far as symbols and FDEs tell? */
bool cfg__reader_is_entry(struct cfg_reader *r, uint64_t addr);
/* Is addr in a cold part of a function (cold.c)? *parent (may be NULL)
 * gets the function's entry. */
bool cfg__reader_cold_parent(struct cfg_reader *r, uint64_t addr, uint64_t *parent);

/* returns.c: does the function at entry return? Analyses it (bounded) if
 * needed. */
enum cfg_ret cfg__callee_returns(struct cfg_reader *r, uint64_t entry);
/* The fixpoint's frames (returns.c), for a build that is the first frame
 * of the analysis: the answer known for entry (false if none yet); push a
 * frame for entry (0 or -ENOMEM); whether the top frame, done with answer
 * ret, must be analysed again; pop it with its answer. */
bool cfg__ret_known(struct cfg_reader *r, uint64_t entry, enum cfg_ret *out);
int cfg__ret_push(struct cfg_reader *r, uint64_t entry);
bool cfg__ret_again(struct cfg_reader *r, enum cfg_ret ret);
void cfg__ret_pop(struct cfg_reader *r, enum cfg_ret ret);
/* build.c: whether a path of the function at entry may return (true when
 * it cannot be explored), its callees asked through cfg_callee_returns. */
bool cfg__may_return(struct cfg_reader *r, uint64_t entry);
/* Is name a function that never returns (exit, abort...)? */
bool cfg__noreturn_name(const char *name);

/* ------------------------------------------------------------ functions */

struct cfg_finsn {	/* an instruction kept in the built function */
	uint64_t addr;
	uint8_t len;
	uint8_t bytes[15];
};

struct cfg_function {
	struct cfg_decoder dec;	/* for disassembly: insns keep their bytes, so
				 * a function outlives its reader */
	uint64_t entry;
	char name[128];
	enum cfg_error err;
	uint64_t err_at;
	char err_msg[160];
	bool noreturn;
	size_t unresolved;

	struct cfg_block *blocks;
	size_t nblocks;
	size_t entry_block;
	uint32_t *block_insn;	/* per block: first index into insns */
	struct cfg_finsn *insns;	/* block by block */
	size_t ninsns;

	struct cfg_edge *edges;
	size_t nedges;
	uint32_t *preds;	/* edge indices grouped by target block */
	uint32_t *pred_first;	/* nblocks + 1 */

	struct cfg_range *ranges;
	size_t nranges;

	struct cfg_jump_table *tables;
	size_t ntables;
	uint64_t *table_targets;

	struct cfg_call *calls;
	size_t ncalls;
	char *names;		/* pool for call names */
	size_t names_len;

	uint32_t *dom_pre, *dom_post;	/* dominator tree intervals */

	struct cfg_loop *loops;
	size_t nloops;
	uint32_t *loop_data;	/* storage for the loops' arrays */
};

int cfg__dominators(struct cfg_function *f);
int cfg__loops(struct cfg_function *f);

/* Jump-table analysis at an indirect jmp, given a backward path of
 * instructions (path[0] is the jmp, path[i+1] precedes path[i]) and for
 * each step whether it was entered through the conditional branch's taken
 * side (taken[i] = 1: path[i] is the target of path[i+1]). Entries are read
 * while valid() accepts their targets. Fills the table with targets
 * (malloc'd). 0 if found, -ENOENT if not a jump table. */
struct cfg_jt_result {
	uint64_t table, base;
	uint8_t entry_size;
	uint32_t count;
	uint64_t *targets;
};
int cfg__jump_table(struct cfg_reader *r, const struct cfg_insn *const *path,
		   const uint8_t *taken, size_t n, bool (*valid)(void *arg, uint64_t target),
		   void *arg, struct cfg_jt_result *out);

#endif
