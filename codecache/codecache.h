/* codecache.h: a code cache inside a live x86-64 process, instruction
 * relocation, replacement code loading, redirection and measurement.
 *
 * Conventions: functions return 0 or a negative errno. Functions that work
 * on a handle keep the reason in words in it (cc_cache__errmsg); the others
 * fill a struct cc_error. Operations on a target are split in phases, as in
 * CRIU's compel, and an error names its phase: "allocate: ...", "write: ...",
 * "redirect: ...", "restore: ...". No function prints or exits.
 */
#ifndef PADRONE_CODECACHE_H
#define PADRONE_CODECACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct attach_target;

/* The phases of changing a target's code; an error names the one it
 * happened in. */
enum cc_phase {
	CC_PHASE_NONE,
	CC_PHASE_OPEN,		/* finding the target's code cache */
	CC_PHASE_ALLOCATE,	/* mappings and blocks in the target */
	CC_PHASE_LOAD,		/* linking replacement code against the target */
	CC_PHASE_WRITE,		/* writing into the code cache */
	CC_PHASE_REDIRECT,	/* safety checks and patching live code */
	CC_PHASE_RESTORE,	/* putting original code back, freeing */
	CC_PHASE_MEASURE,	/* collecting a measurement */
};
const char *cc_phase_name(enum cc_phase p);

struct cc_error {
	int err;		/* negative errno */
	char msg[512];		/* a full sentence naming the cause */
	bool no_symbol;		/* cc_image__open, -ENOENT: the file was read,
				 * but has no function of the name asked for */
};

/* ------------------------------------------------------------ relocation */

/* A sequence of instructions decoded at one address, laid out to run at
 * another. Relative branches are widened to rel32 (jcc, jmp, call),
 * jrcxz/jecxz/loop/loope/loopne become a short test over a rel32 jump,
 * rip-relative operands are re-targeted; branches between the relocated
 * instructions stay between the copies. The layout does not depend on where
 * the copy goes; only cc_reloc__encode needs the destination, which must be
 * within +-2 GiB of every outside target. */
struct cc_reloc;

struct cc_reloc_opts {
	size_t sz;		/* sizeof(struct cc_reloc_opts) */
	/* 0: relocate exactly the len bytes given (a whole function).
	 * N: relocate the fewest whole instructions covering N bytes (a
	 *    function's prefix, displaced by a patch). */
	size_t min_len;
	/* Append a jmp back to the first byte after the relocated ones when
	 * the last instruction can fall through. */
	bool jump_back;
};

int cc_reloc__new(const void *code, size_t len, uint64_t src, const struct cc_reloc_opts *opts,
		  struct cc_reloc **out, struct cc_error *err);
void cc_reloc__free(struct cc_reloc *r);

/* Number of instructions, original bytes covered, size of the copy. */
size_t cc_reloc__count(const struct cc_reloc *r);
size_t cc_reloc__src_len(const struct cc_reloc *r);
size_t cc_reloc__size(const struct cc_reloc *r);

/* Write the copy, made to run at dst, into buf (size >= cc_reloc__size). */
int cc_reloc__encode(const struct cc_reloc *r, uint64_t dst, void *buf, size_t size,
		     struct cc_error *err);

/* Offset in the copy of the instruction at original address pc, or -ENOENT
 * when pc is not the start of a relocated instruction. */
int cc_reloc__map(const struct cc_reloc *r, uint64_t pc, size_t *off);
/* The original address of the instruction at offset off of the copy, or
 * -ENOENT when off is not the start of one (e.g. inside a rewritten
 * sequence, or the trailing jump). */
int cc_reloc__unmap(const struct cc_reloc *r, size_t off, uint64_t *pc);

/* Whether a call among the relocated instructions pushes a return address
 * that lies strictly inside the relocated bytes (such a return address on
 * a stack would land inside a patch). */
bool cc_reloc__has_inner_return(const struct cc_reloc *r);

/* ------------------------------------------------------ replacement code */

/* Code to put in a code cache, from a file: a relocatable object (e.g. built
 * with -O3 -mavx2 -fPIC -c), a shared object, or a raw blob of
 * position-independent code (entry at its first byte). Relocations are
 * applied against where the code and data go and against the target's own
 * symbols; outside functions out of rel32 reach are called through stubs,
 * GOT entries are synthesized in the data block. Thread-local storage and
 * constructors are refused (opening fails naming them); unwinding
 * information is not carried over. A corrupt file (a section past its end,
 * more than 256 MiB of code or data) is refused before anything is
 * allocated for it. */
struct cc_image;

struct cc_image_opts {
	size_t sz;		/* sizeof(struct cc_image_opts) */
	const char *symbol;	/* the function to load; NULL: the only global one */
	bool raw;		/* the file is a raw blob, not ELF */
};

/* Resolve a symbol the code needs in the target: 0 and *addr, -ENOENT, or
 * -ENOTSUP when it exists but its address cannot be known. */
typedef int (*cc_resolve_fn)(void *arg, const char *name, uint64_t *addr);

int cc_image__open(const char *path, const struct cc_image_opts *opts, struct cc_image **out,
		   struct cc_error *err);
void cc_image__free(struct cc_image *im);
const char *cc_image__symbol(const struct cc_image *im);
const char *cc_image__path(const struct cc_image *im);
/* -ENOTSUP naming the first instruction this CPU cannot run (its ISA set
 * against cpuid and XCR0), else 0. */
int cc_image__check_cpu(const struct cc_image *im, struct cc_error *err);
/* Whether the code may run other code (a call, an indirect or outside
 * jump), which an exception could come from; why: the first such. */
bool cc_image__calls_out(const struct cc_image *im, char *why, size_t size);

#define CC_PROT_R 1u
#define CC_PROT_W 2u
#define CC_PROT_X 4u
#define CC_IMAGE_MAX_SEGS 8

struct cc_image_seg {
	uint64_t off, size;	/* page-aligned, within the code block */
	unsigned prot;		/* CC_PROT_* */
};

/* What an image needs. Relocatable objects and raw blobs: a code block
 * (r-x) and a data block (rw-), placed independently. Shared objects
 * (fixed): one block of code_size whose pages take each segment's
 * protection, and no data block. */
struct cc_image_layout {
	size_t code_size, data_size;
	bool fixed;
	size_t nsegs;
	struct cc_image_seg segs[CC_IMAGE_MAX_SEGS];
};
void cc_image__layout(const struct cc_image *im, struct cc_image_layout *l);

/* Produce the blocks to run at code and data (buffers of the layout's
 * sizes) and the entry address of the function. */
int cc_image__link(const struct cc_image *im, uint64_t code, uint64_t data, cc_resolve_fn resolve,
		   void *arg, void *code_buf, void *data_buf, uint64_t *entry, struct cc_error *err);

/* A function of the target. size 0 (unknown, e.g. stripped): its extent is
 * taken from its control flow (cfg/). */
struct cc_func {
	uint64_t addr, size;
	const char *name;	/* for messages and the directory */
};

/* --------------------------------------------------------------- symbols */

/* Names of a process's functions and data, through elf/'s resolver over
 * the files it maps (IFUNCs resolved through padrone's own copy of the
 * same file). */
struct cc_syms;

int cc_syms__open(pid_t pid, struct cc_syms **out, struct cc_error *err);
/* The same over modules the caller keeps (a session's: elf/), borrowed
 * until cc_syms__free. */
struct elf_modules;
int cc_syms__wrap(pid_t pid, struct elf_modules *ms, struct cc_syms **out, struct cc_error *err);
void cc_syms__free(struct cc_syms *s);
/* A function by name, with its size. */
int cc_syms__func(struct cc_syms *s, const char *name, struct cc_func *fn, struct cc_error *err);
/* A cc_resolve_fn (arg: the cc_syms) for replacement code. */
int cc_syms__resolve(void *syms, const char *name, uint64_t *addr);
/* Why the last cc_syms__resolve said -ENOTSUP. */
const char *cc_syms__errmsg(const struct cc_syms *s);

/* ------------------------------------------------------ branches into code */

/* Where the branches of a target's modules go, so that a patch is refused
 * when code anywhere in the module branches into the bytes it overwrites
 * (glibc's mempcpy variants `jmp memmove+3`; a hand-written side entry):
 * every direct branch of the module's executable code (a sweep with the
 * decoder, started again at each function start its FDEs and symbols
 * give), and every jump table's entries (from the CFG of each function
 * holding an indirect jump). Made once per module, the first time a patch
 * in it needs it (about 0.1 s for libc, see bench/xref), and kept: give one
 * to every cc_cache__open of a session. */
struct cc_xref;

int cc_xref__new(struct cc_xref **out);
void cc_xref__free(struct cc_xref *x);

/* ------------------------------------------------------------ code cache */

/* The code cache of one target: r-x code areas and rw- data areas within
 * +-2 GiB of the code they serve, made by remote mmap(MAP_FIXED_NOREPLACE)
 * and written only through /proc/PID/mem (never writable and executable),
 * growing by new areas. Its directory lives in the target, so what one
 * session did (a replacement) another can find and undo. */
struct cc_cache;

struct cc_xref;

struct cc_cache_opts {
	size_t sz;		/* sizeof(struct cc_cache_opts) */
	size_t code_size;	/* bytes per new code area; 0: 64 KiB */
	size_t data_size;	/* bytes per new data area; 0: 256 KiB */
	struct cc_xref *xref;	/* the index of branches to use and add to (the
				 * caller's, kept for a session); NULL: the
				 * cache makes its own */
};

/* t: a seized target; NULL: this process (for tests and benchmarks: there
 * nothing is stopped, the caller keeps other threads out of patched code).
 * Finds the cache an earlier session left; mappings are made at the first
 * allocation. */
int cc_cache__open(struct attach_target *t, const struct cc_cache_opts *opts,
		   struct cc_cache **out, struct cc_error *err);
/* Forget this session's view; what is in the target stays there. */
void cc_cache__close(struct cc_cache *c);
const char *cc_cache__errmsg(const struct cc_cache *c);
enum cc_phase cc_cache__errphase(const struct cc_cache *c);
struct attach_target *cc_cache__target(const struct cc_cache *c);
/* Whether the target has a code cache (made now or by an earlier session). */
bool cc_cache__exists(const struct cc_cache *c);

enum cc_area { CC_CODE = 1, CC_DATA = 2 };

/* Phase allocate: size bytes of code (r-x) or data (rw-), aligned (power of
 * two <= 4096; 0: 16), within +-2 GiB of near (0: anywhere). */
int cc_cache__alloc(struct cc_cache *c, enum cc_area area, size_t size, size_t align,
		    uint64_t near, uint64_t *addr);
int cc_cache__free(struct cc_cache *c, uint64_t addr, size_t size);
/* Phase write: into the code cache only (code areas included). */
int cc_cache__write(struct cc_cache *c, uint64_t addr, const void *buf, size_t len);
int cc_cache__read(struct cc_cache *c, uint64_t addr, void *buf, size_t len);

/* An image placed in the cache. */
struct cc_loaded {
	uint64_t entry;
	uint64_t code, code_size;	/* a shared object: its whole span */
	uint64_t data, data_size;
};

/* Allocate, link (resolve: the target's symbols) and write an image near
 * `near`. */
int cc_cache__load(struct cc_cache *c, const struct cc_image *im, uint64_t near,
		   cc_resolve_fn resolve, void *arg, struct cc_loaded *out);
void cc_cache__unload(struct cc_cache *c, struct cc_loaded *l);

/* ------------------------------------------------------------ redirection */


struct cc_patch_stats {
	uint64_t stop_ns;	/* the world was stopped this long for the write
				 * (as attach_pause_stats.last_ns counts it) */
	uint64_t to_stop_ns;	/* of which, until every thread was stopped */
	unsigned threads;	/* threads checked */
	unsigned moved;		/* threads moved out of the patched bytes */
	unsigned retries;	/* times the world was resumed to let threads leave */
	unsigned sites;		/* places written */
	bool kept_code;		/* undo: a thread stayed in the code to free past
				 * the timeout, so it stays in the cache */
	unsigned looks;		/* undo: brief stops of the world after the write,
				 * to see every thread out of the code to free */
	uint64_t look_max_ns;	/* the longest of them */
	uint64_t prepare_ns;	/* instrument: its two stops of the world, whole
				 * (the copy, the area, the rings' range and */
	uint64_t install_ns;	/* memfd; then the threads and the entry, of
				 * which stop_ns is the entry's write) */
};

/* How to patch. A redirection writes a jmp rel32 at the function's entry
 * (after endbr64, which stays) unless callsites_only, and re-targets the
 * direct calls to it found in callers. Every thread is stopped and looked at
 * first: one whose PC is inside the overwritten bytes is moved to a
 * relocated copy of them -- so is one whose system call restarts inside
 * them, and one whose signal handler returns into them (the pc in its
 * signal frame rewritten); a return address inside them (a call among them)
 * makes it resume and retry, and refuse after timeout_ms. Threads executing
 * the function finish their current call in the original code, unless wait:
 * then it waits until no thread is in the function nor has it on its stack,
 * and refuses after timeout_ms unless force. Undoing puts the original bytes
 * back at once and frees the code cache's code once every thread has been
 * seen out of it; one that stays past timeout_ms leaves it in the cache. */
struct cc_patch_opts {
	size_t sz;			/* sizeof(struct cc_patch_opts) */
	const struct cc_func *callers;	/* rewrite their direct calls too */
	size_t ncallers;
	bool callsites_only;		/* leave the entry alone */
	bool wait;			/* replace only when no thread is in the
					 * function (nor has it on its stack) */
	int timeout_ms;			/* for waiting; 0: 2000 */
	bool force;			/* with wait: go ahead after the timeout */
	bool dry_run;			/* check and describe; change nothing */
	char *report;			/* if set: one line per step, what was */
	size_t report_size;		/* (or would be) done and why */
	const char *source;		/* recorded as what replaced it; NULL:
					 * FILE:SYMBOL of the image */
	struct cc_patch_stats *stats;	/* if set: filled */
};

/* Phases allocate, load, write (the image, near the function), then
 * redirect. Refused for a function already replaced or being measured. The
 * replacement stays when padrone detaches. */
int cc_cache__replace(struct cc_cache *c, const struct cc_func *fn, const struct cc_image *im,
		      cc_resolve_fn resolve, void *arg, const struct cc_patch_opts *opts);
/* Redirect to code the caller placed (cc_cache__alloc, cc_cache__write);
 * undone by cc_cache__restore, which leaves dest's code alone. */
int cc_cache__redirect(struct cc_cache *c, const struct cc_func *fn, uint64_t dest,
		       const struct cc_patch_opts *opts);
/* Phase restore: the original bytes back (checked to be still what padrone
 * wrote), then the replacement's code freed once every thread has been seen
 * out of it (kept if one stays past timeout_ms). A measuring stub whose
 * padrone process is gone (killed while measuring) is taken out too; one
 * still being measured: -EBUSY. name: for messages (NULL: as recorded).
 * -ENOENT if not replaced. */
int cc_cache__restore(struct cc_cache *c, uint64_t func, const char *name,
		      const struct cc_patch_opts *opts);

/* How many direct calls (and rel32 jumps) to func caller holds: the call
 * sites a redirection could re-target there. */
int cc_cache__direct_calls(struct cc_cache *c, const struct cc_func *caller, uint64_t func,
			   size_t *n);

struct cc_redirect_info {
	uint64_t func, func_size, dest;
	bool measure;		/* a measuring stub (else a replacement) */
	unsigned sites;
	uint64_t stop_ns;	/* stop-the-world time of its patch */
	char name[96], source[160];
	pid_t owner;		/* the padrone process that made it */
	bool stale;		/* a measuring stub whose padrone is gone */
};
/* The redirections in place (also those of earlier sessions): how many
 * there are; the first max are copied. */
int cc_cache__redirects(struct cc_cache *c, struct cc_redirect_info *out, size_t max);

/* What code of the cache holds addr (a pc in a stack, say): "replacement
 * of F", "measuring stub of F", "relocated first bytes of F", and where
 * that code starts (a replacement: its entry, when addr is past it). 0, or
 * -ENOENT when addr is in none of it. */
int cc_cache__describe(struct cc_cache *c, uint64_t addr, char *name, size_t size,
		       uint64_t *start);

/* ----------------------------------------------------------- measurement */

/* Times calls of a function inside the target, without traps: a measuring
 * stub in the code cache takes rdtsc at entry and at return (the return
 * address swapped for its handler), keeps one sample per call in the data
 * area, and after N calls lets further calls through untouched until
 * cc_measure__finish takes it out. Recursion and many threads are handled;
 * processes where an exception or cancellation could unwind through a
 * timed call (C++ or unwinder runtimes mapped) are refused unless forced. */
struct cc_measure;

struct cc_measure_opts {
	size_t sz;			/* sizeof(struct cc_measure_opts) */
	uint64_t calls;			/* N; 0: 1000 */
	const struct cc_func *callers;	/* as in cc_patch_opts */
	size_t ncallers;
	bool callsites_only;
	int timeout_ms;			/* for stopping the world; 0: 2000 */
	bool force;			/* measure despite an unwinding runtime */
	char *report;
	size_t report_size;
	struct cc_patch_stats *stats;	/* of the redirection */
};

struct cc_measure_result {
	uint64_t calls;			/* calls timed */
	uint64_t skipped;		/* calls let through untimed (table full) */
	double mean_ns, p50_ns, p99_ns, min_ns, max_ns;
	double tsc_ghz;			/* the TSC rate used to convert */
	double resolution_ns;		/* the shortest interval the clock tells
					 * apart from none: a figure below it is
					 * not a measurement */
	bool has_ipc;			/* no hardware PMU here: false */
	double ipc;
	bool kept_code;			/* a timed call was still running: the
					 * stub stays in the cache */
};

/* Refused for a function already being measured (-EBUSY), or still
 * redirected to the stub of a padrone killed while measuring it (-EEXIST:
 * cc_cache__restore takes that out). */
int cc_measure__start(struct cc_cache *c, const struct cc_func *fn,
		      const struct cc_measure_opts *opts, struct cc_measure **out);
/* Calls timed so far. */
int cc_measure__poll(struct cc_measure *m, uint64_t *done);
/* Poll until N calls are timed: 0, or -ETIMEDOUT (finish still reports
 * what was timed). */
int cc_measure__wait(struct cc_measure *m, int timeout_ms, uint64_t *done);
uint64_t cc_measure__calls(const struct cc_measure *m);
/* Take the stub out (phase restore) and compute the figures. */
int cc_measure__finish(struct cc_measure *m, struct cc_measure_result *res);
/* Finishes it if needed. */
void cc_measure__free(struct cc_measure *m);

/* ------------------------------------------------------- instrumentation */

/* An instrumented copy of a function: every block of its CFG relocated into
 * the code cache, each writing one REP unit (pipeline/rep.h) per execution
 * into its thread's CAB ring (pipeline/cab.h). Each thread's gs_base points
 * at its own state block, holding its ring pointer and the slots of the
 * unit being captured; the capture code saves only what it clobbers (rax and
 * rcx, below the red zone), never touches the flags, and keeps every other
 * register. The rings are memfds created inside the target by remote system
 * calls, mapped read-write (never executable) there and in padrone. A full
 * ring makes the thread wait (exhaustive) or drop (sampling) in a stub of
 * the code cache; with the consumer gone (closed, or no heartbeat for its
 * timeout) it drops and never waits again. Refused: a function already
 * replaced or measured, one with jump tables or unresolved indirect jumps,
 * instructions it cannot record (fs- or gs-relative, gathers), a target
 * where a thread uses gs. Threads cloned later must be given a ring of their
 * own or the sink block (cc_instr__thread_new, from the clone event), and
 * children forked the sink (cc_instr__fork_child, from the fork event),
 * before they run: they inherit their parent's gs_base. Several functions
 * at once share the threads' state areas (cc_instr_opts.share): the
 * events are then handled by any one of them for all; the areas go (gs_base
 * cleared) when the last is uninstrumented. */
struct cc_instr;
struct cab_ring;
struct rep_table;

struct cc_instr_opts {
	size_t sz;			/* sizeof(struct cc_instr_opts) */
	bool sampling;			/* rings in CAB_SAMPLING mode (else exhaustive) */
	size_t chunk_bytes;		/* per ring chunk; 0: 64 KiB (a power of two) */
	unsigned nchunks;		/* 0: 16 */
	unsigned consumer_timeout_ms;	/* 0: 2000 */
	bool blocks_only;		/* units record which block ran, no addresses */
	int timeout_ms;			/* for stopping the world; 0: 2000 */
	char *report;			/* as in cc_patch_opts */
	size_t report_size;
	struct cc_patch_stats *stats;
	/* if set: the handle is stored here (atomically) while the world is
	 * still stopped, so that a clone event right after the resume already
	 * finds it for cc_instr__thread_new */
	struct cc_instr *_Atomic *publish;
	/* tests only: the plain capture plan, each reference's registers
	 * captured anew (no PiPA slot sharing), the oracle of the optimised
	 * one's addresses */
	bool plain_plan;
	/* rings made beyond the threads' at the install, for threads created
	 * later; a thread that exits gives its ring to the next one (whose
	 * units follow its last); 0: 4. Joining (share): as many as the
	 * first one's */
	unsigned spare_rings;
	/* an active instrumentation of the same process: this one joins it
	 * (each thread keeps its one gs_base, a section of its state area
	 * per function, at most 8 at once) instead of giving the threads
	 * state blocks of its own, which it could not (they use gs) */
	struct cc_instr *share;
};

int cc_cache__instrument(struct cc_cache *c, const struct cc_func *fn,
			 const struct cc_instr_opts *opts, struct cc_instr **out);
/* The rings: one per thread at the stop that installed the copy, and the
 * spares (opts.spare_rings). */
size_t cc_instr__thread_count(const struct cc_instr *in);
/* Ring i (padrone's mapping) and the tid of the thread writing it now, or
 * that last wrote it (0: none yet). */
struct cab_ring *cc_instr__ring(const struct cc_instr *in, size_t i, pid_t *tid);
/* How often thread i's copy ran the ring stub (new chunk, ring full, junk
 * area full): 0, or a negative errno when the target cannot be read. */
int cc_instr__stub_calls(const struct cc_instr *in, size_t i, uint64_t *out);
/* How often thread i called the function since its ring was made, on or
 * off (counted at the gate): 0; -ENOTSUP when the gate does not count
 * (the flags are live at the function's entry), or a negative errno when
 * the target cannot be read. */
int cc_instr__calls(const struct cc_instr *in, size_t i, uint64_t *out);
/* The block table: what every unit's id means. */
const struct rep_table *cc_instr__table(const struct cc_instr *in);
/* The function instrumented: [*addr, *addr + *size) (its extent from the
 * CFG when the symbol gave none). */
void cc_instr__function(const struct cc_instr *in, uint64_t *addr, uint64_t *size);
/* Installed and not yet undone. */
bool cc_instr__active(const struct cc_instr *in);
/* Switch an active instrumentation off (its threads run the original from
 * their next call on; the copy, rings and state stay) or on again, without
 * stopping the process: a byte per thread's state block, which the copy's
 * gate reads at the entry (a call under way finishes as it began, so every
 * call is recorded whole or not at all). Threads cloned later start in the
 * state switched last. A new instrumentation starts on. Safe beside the
 * tracer's events (no stop); not beside this copy's undo. 0, -EINVAL when
 * it is not active, or the error writing the target's memory (some rows may
 * then be switched: switching again makes them agree). */
int cc_instr__switch(struct cc_instr *in, bool on);
bool cc_instr__on(const struct cc_instr *in);
/* Whether a thread that finds its ring full waits for the consumer
 * (exhaustive mode's way, the default) or drops the unit, counted as lost,
 * as sample mode does; a thread waiting now stops at its next look (10 ms
 * at most). For a pipeline that yields to the target, which must then
 * never wait for it. 0 or -errno. */
int cc_instr__wait_when_full(struct cc_instr *in, bool wait);
/* The copy's code: [*addr, *addr + *size). */
void cc_instr__copy(const struct cc_instr *in, uint64_t *addr, uint64_t *size);
/* What a call runs switched off besides the original's own code: the
 * gate, in the copy ([gate[0], gate[0] + gate[1])), and the detour, the
 * original's displaced first bytes ([detour[0], detour[0] + detour[1]);
 * size 0 when the entry has none). */
void cc_instr__off_path(const struct cc_instr *in, uint64_t gate[2], uint64_t detour[2]);
/* A thread cloned while instrumented (world stopped, or from the clone
 * event): its gs_base goes to a free ring's state block, or, with none
 * free, to the sink block (what it runs of the copy is recorded nowhere),
 * never its parent's ring. */
int cc_instr__thread_new(struct cc_instr *in, pid_t tid);
/* A thread that exits (its exit event): its ring, whose units stay for the
 * consumer, is free for the next thread cloned. */
void cc_instr__thread_exit(struct cc_instr *in, pid_t tid);
/* A process forked while instrumented (the fork event, held): its gs_base
 * goes to the sink block. */
int cc_instr__fork_child(struct cc_instr *in, pid_t tid);
/* Phase restore, through c (any view of the same target's cache: a later
 * command's): the original back (as cc_cache__restore), the producers
 * ended (consumers then drain to the end) and, once no thread can be in
 * the copy, threads' gs_base back to 0 and the rings unmapped from the
 * target (cc_instr__released). A failure changes nothing (the entry still
 * goes to the copy). A thread kept in the copy past the timeout keeps the
 * copy, its gs_base, the rings and the directory's record
 * (stats->kept_code): calling this again waits and releases them. in stays
 * valid for reading the rings. */
int cc_cache__uninstrument(struct cc_cache *c, struct cc_instr *in,
			   const struct cc_patch_opts *opts);
/* Uninstrumented and released: no thread can run the copy, and nothing of
 * it is left in the target but free cache blocks. */
bool cc_instr__released(const struct cc_instr *in);
/* Before detaching from a process whose copy is not released (an
 * uninstrument that failed or kept it): every thread keeps its gs_base
 * past the detach, and the record stays for a later restore. */
int cc_instr__leave(struct cc_instr *in);
/* Closes padrone's mappings of the rings. Uninstrument first, or leave:
 * detaching puts every thread's gs_base back, and a copy left in place
 * would then write through %gs at address 0. */
void cc_instr__free(struct cc_instr *in);

#ifdef __cplusplus
}
#endif
#endif
