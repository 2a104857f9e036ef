/* internal.h: what codecache/'s files share and nobody else sees. */
#ifndef PADRONE_CODECACHE_INTERNAL_H
#define PADRONE_CODECACHE_INTERNAL_H

#include "attach/attach.h"
#include "codecache/codecache.h"
#include "codecache/dir.h"
#include "util/util.h"

#include <inttypes.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How far a rel32 may reach, with room for the size of what is patched. */
#define CC_REACH 0x7ff00000ULL

struct prof_unwinder;
struct prof_walk_frame;

struct cc_cache {
	struct attach_target *t;	/* NULL: this process */
	pid_t pid;
	int memfd;			/* this process: /proc/self/mem */
	struct cc_cache_opts o;
	uint64_t dir_addr;		/* 0 until the first allocation */
	struct cc_dir dir;		/* padrone's copy of the target's */
	enum cc_phase phase;
	char errmsg[600];
	struct prof_unwinder *uw;	/* threads.c: kept between stops */
	struct prof_walk_frame *frames;	/* threads.c: one walk's */
	struct cc_xref *xref;		/* xref.c: the options', or its own */
	bool own_xref;
};

/* Set the cache's error, "phase: message", and return err. */
int cc__fail(struct cc_cache *c, enum cc_phase phase, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Memory of the target (or this process), anywhere: code cache or text. */
int cc__read(struct cc_cache *c, uint64_t addr, void *buf, size_t len);
int cc__write(struct cc_cache *c, uint64_t addr, const void *buf, size_t len);
int cc__syscall(struct cc_cache *c, long nr, const uint64_t args[6], int64_t *ret);
int cc__protect(struct cc_cache *c, uint64_t addr, uint64_t size, unsigned prot);
int cc__dir_save(struct cc_cache *c);
bool cc__in_reach(uint64_t near, uint64_t addr, uint64_t size);
/* Room in the array *vp (of *cap elements of size bytes) for need: grown
 * by doubling from first. 0 or -ENOMEM. */
int cc__grow(void *vp, size_t *cap, size_t need, size_t size, size_t first);
/* A cfg reader over the target's memory (or this process's). */
struct cfg_reader;
int cc__open_cfg(struct cc_cache *c, struct cfg_reader **r);
/* image.c: the first section of an ELF file with this sh_type, or NULL. */
Elf_Scn *cc__find_section(Elf *e, unsigned type);

/* Fill err (if not NULL): the code and the message; returns code. */
int cc__err(struct cc_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* isa.c: NULL if this CPU runs instructions of Zydis ISA set `set`, else
 * the feature it lacks (in buf, or a constant). endbr: an endbr32/64. */
const char *cc__isa_lacking(const char *set, bool endbr, char *buf, size_t size);
/* isa.c: user code may run rdfsbase and its kin (the kernel enabled them) */
bool cc__user_fsgsbase(void);
/* measure.c: 1 and the file's name if process maps a C++ or unwinding
 * runtime (libstdc++, libgcc_s, libunwind), 0 if not, or a negative errno. */
int cc__maps_unwinder(struct cc_cache *c, char *lib, size_t size);
/* The instruction at addr in Intel syntax, for messages. */
void cc_insn_text(const void *bytes, size_t len, uint64_t addr, char *buf, size_t size);
/* A 5-byte jmp/call rel32 placed at `at` going to target; -ERANGE when out
 * of reach. */
int cc_encode_jmp(uint64_t at, uint64_t target, uint8_t buf[5]);
int cc_encode_call(uint64_t at, uint64_t target, uint8_t buf[5]);

/* One redirection, planned (entry prefix relocated, call sites found) then
 * applied: stop, check, write, move threads, resume, record. */
struct cc_job;
int cc__job_new(struct cc_cache *c, const struct cc_func *fn, unsigned kind,
		const struct cc_patch_opts *opts, struct cc_job **out);
const struct cc_reloc *cc__job_prefix(const struct cc_job *j);
/* dest: where calls go; copy: where the relocated prefix was written (0:
 * none); owned: blocks to free when it is undone; state: kind-specific. */
int cc__job_apply(struct cc_job *j, uint64_t dest, uint64_t copy, const struct cc_dir_block *owned,
		  size_t nowned, uint64_t state, uint32_t *id);
void cc__job_free(struct cc_job *j);
/* cc__job_apply's checks and record, made earlier by a caller that must
 * have the record before it changes the target in ways the record names
 * (an instrumentation's gs_base and rings): cc__job_apply then writes the
 * bytes under that record, and on failure leaves it to the caller, which
 * takes it out with cc__job_unrecord once those changes are undone (unless
 * the bytes are in the target). */
int cc__job_record(struct cc_job *j, uint64_t dest, uint64_t copy, const struct cc_dir_block *owned,
		   size_t nowned, uint64_t state);
void cc__job_unrecord(struct cc_job *j);
/* An instrumented copy's state area and rings' range, for its record. */
void cc__job_set_instr(struct cc_job *j, uint64_t area, uint64_t area_size, uint64_t rings,
		       uint64_t rings_size);

/* The redirection of func of that kind (0: any), or NULL. */
struct cc_dir_redir *cc__redir_find(struct cc_cache *c, uint64_t func, unsigned kind);
/* A measuring stub whose padrone process is gone (killed while measuring):
 * nobody will take it out but a restore. */
bool cc__redir_stale(const struct cc_dir_redir *r);
/* The relocated first bytes a redirection's detour holds, made again from
 * the directory (the entry site's original bytes over the function's code,
 * relocated as cc__job_new did) and checked to be byte for byte the copy in
 * the cache, so that a later session moves threads by the right map. */
int cc__redir_prefix(struct cc_cache *c, const struct cc_dir_redir *r, struct cc_reloc **out);
/* MEASURE: where the stub's code ends (recorded for a later undo). */
void cc__job_set_stub_end(struct cc_job *j, uint64_t end);
/* The detour: the job's relocated first bytes written to the cache, where
 * a thread caught inside them is moved (phases allocate, write). */
int cc__job_place_detour(struct cc_job *j, uint64_t *copy, size_t *size);
/* The job's own report, to add a line to. */
void cc__job_say(struct cc_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Threads the caller moved in the job's stop (its stats). */
void cc__job_add_moved(struct cc_job *j, unsigned n);

/* Undoing a measuring stub: threads in [lo, hi) are stepped out, those in
 * the prefix copy moved back to the original. */
struct cc_undo_stub {
	uint64_t lo, hi;
	const struct cc_reloc *prefix;
	uint64_t copy;
	/* run once no thread is in the code, before its record goes: what the
	 * record's owner must take out while a killed padrone would still leave
	 * a record saying it is there (an instrumentation's gs and rings); a
	 * failure (the cache's error set) keeps the record, as keep_busy */
	int (*release)(struct cc_cache *c, void *arg);
	void *release_arg;
	/* run once the record is forgotten and saved: what the record named
	 * and only now may be freed (an instrumentation's state area: freed
	 * before, a padrone killed in between would have a later restore free
	 * it again) */
	void (*forgotten)(struct cc_cache *c, void *arg);
	/* a thread still in the code past the timeout (or a failed release)
	 * keeps the record, the original bytes already back, so that a later
	 * undo of it waits and releases again: code that still needs what the
	 * release takes out (an instrumented copy: its thread's gs_base and
	 * ring) must not be forgotten while a thread can run it */
	bool keep_busy;
	/* run in the stop that puts the bytes back, before the threads are
	 * looked at (on each try): what must change with the world stopped
	 * goes in the same pause (an instrumented copy's unlinking) */
	int (*stopped)(struct cc_cache *c, void *arg);
	void *stopped_arg;
	/* (release_arg) whether a thread the grace period found in the code
	 * cannot leave it before something outside the target happens: the
	 * next look waits for that (an instrumented copy's thread waiting in
	 * its ring stub for padrone's consumer) */
	bool (*held)(struct cc_cache *c, void *arg, pid_t tid);
};
int cc__undo(struct cc_cache *c, uint32_t id, const struct cc_patch_opts *opts,
	     const struct cc_undo_stub *stub);
/* instr-undo.c: is the redirection an instrumented copy? And undoing one that a
 * padrone left (killed, or detached without uninstrument): as cc__undo, with
 * the threads' gs_base back to 0 and the rings unmapped from the target
 * before its record goes. */
bool cc__redir_is_instr(const struct cc_dir_redir *r);
int cc__instr_undo_left(struct cc_cache *c, struct cc_dir_redir *r,
			const struct cc_patch_opts *opts, const struct cc_undo_stub *stub);
/* measure.c: take out a stale measuring stub (cc__redir_stale), as
 * cc_measure__finish would have; and the refusal that names it. */
int cc__measure_undo_stale(struct cc_cache *c, struct cc_dir_redir *r,
			   const struct cc_patch_opts *opts);
int cc__fail_stale(struct cc_cache *c, enum cc_phase phase, const struct cc_dir_redir *r,
		   const char *name);

/* ------------------------------------------------------ xref.c */

/* A branch into bytes about to be overwritten. */
struct cc_xhit {
	uint64_t from, to;
	bool table;		/* an entry of the jump table of the jmp at from */
	char where[160];	/* from as "F+0xN" */
	size_t count;		/* how many such branches */
};
struct cc_range;
/* Branches (direct ones, jump-table entries) from the module holding lo
 * into [lo, hi), but for those from within skip: 1 and the first in *hit,
 * 0 none, -errno (the cache's error set). */
int cc__xref_into(struct cc_cache *c, uint64_t lo, uint64_t hi, const struct cc_range *skip,
		  struct cc_xhit *hit);
/* Each direct branch (call, jmp, jcc; not jump-table entries) of the module
 * holding to that goes to it: fn(arg, the branch, the function start
 * at or before it, 0 if none known); stops at fn's first nonzero return. */
typedef int (*cc_xref_fn)(void *arg, uint64_t from, uint64_t func);
int cc__xref_each_to(struct cc_cache *c, uint64_t to, cc_xref_fn fn, void *arg);
/* "F+0xN" for code at a (its symbol), else "0xADDR". */
void cc__code_name(struct cc_cache *c, uint64_t a, char *buf, size_t size);

/* ------------------------------------------------------ ipara.c */

/* Registers as bits: general ones by number (rax 0 ... r15 15), vector
 * ones 16 + n (xmm/ymm n, n < 16). */
#define CC_REG_VEC(n) (1u << (16 + (n)))
/* What callers in fn's module compiled with -fipa-ra keep in registers
 * across a direct call to fn because fn leaves them intact, and code (at
 * new_addr, size bytes, copied in new_code, entered at new_entry) would
 * change: *need, and in why the first caller relying on it; 0 or a
 * negative errno. */
int cc__ipara_need(struct cc_cache *c, const struct cc_func *fn, const uint8_t *new_code,
		   size_t size, uint64_t new_addr, uint64_t new_entry, uint32_t *need, char *why,
		   size_t why_size);
/* "rcx, r8, xmm3" */
void cc__regs_text(uint32_t regs, char *buf, size_t size);
/* A gate at `at` that saves need, calls target (passing on 128 bytes of
 * stack arguments), restores need and returns: its size (buf NULL: the
 * size it needs), 0 if target is out of a call's reach. */
size_t cc__gate_encode(uint32_t need, uint64_t at, uint64_t target, uint8_t *buf);

/* ------------------------------------------------------ threads.c */

struct cc_range {
	uint64_t lo, hi;
};

struct cc_move {
	pid_t tid;
	struct user_regs_struct regs;
};

/* A pc saved in a signal frame on a thread's stack, to be rewritten. */
struct cc_poke {
	uint64_t addr, value, old;
};

/* One look at every thread of a stopped target (cc__tcheck).
 *
 * Where a thread goes next is not always its pc: one stopped in a system
 * call the kernel will restart (rax -ERESTART*) executes the 2-byte syscall
 * again, 2 bytes before its pc; one running a signal handler goes back to
 * the pc saved in the signal frame on its stack. Both are checked and moved
 * as a pc is. */
struct cc_tcheck {
	struct cc_cache *c;
	/* the bytes being patched: PCs strictly inside move to the copy of
	 * reloc at copy (back: from the copy to the original); a return
	 * address inside them is a hard obstacle (looked for if crit_returns) */
	struct cc_range crit;
	bool crit_returns;
	const struct cc_reloc *reloc;
	uint64_t copy;
	bool back;
	struct cc_range step_out;	/* PCs here are single-stepped out */
	/* threads with their PC here (and, if frames, a frame) are busy */
	struct cc_range busy[CC_MAX_OWNED + 2];
	size_t nbusy;
	bool frames;
	char busy_what[128];
	const pid_t *ignore;		/* threads not to look at for busy */
	size_t nignore;
	/* found */
	pid_t *tids;
	size_t cap, n;
	bool *busy_of;			/* per thread */
	uint64_t *scan_from;
	struct cc_move *moves;		/* registers to set before resuming */
	size_t nmoves;
	struct cc_poke *pokes;		/* signal frames to rewrite before resuming */
	size_t npokes, poke_cap;
	bool sig;			/* the process catches signals: a thread may be
					 * in a handler, its interrupted pc in a signal
					 * frame, so every stack is walked */
	bool hard;
	char hard_why[384];
	size_t nbusy_threads;
	char busy_why[384];		/* the first busy thread */
};
/* World stopped. 0 (results in k), or -errno if the target could not be
 * inspected. */
int cc__tcheck(struct cc_tcheck *k);
void cc__tcheck_free(struct cc_tcheck *k);
/* The stack walker's caches (cc_cache__close). */
void cc__unwinder_free(struct cc_cache *c);

#endif
