/* padrone.h: the client API of libpadrone.
 *
 * A session attaches to a running x86-64 Linux process by PID, lists its
 * threads, samples where its time goes, ranks its hot functions, unwinds
 * any thread's stack, and detaches, leaving the process running exactly as
 * before. padroned and padrone are built on this API; so can yours:
 *
 *	struct padrone_session *s = padrone_session__new(NULL);
 *	if (padrone_session__attach(s, pid) < 0) {
 *		fprintf(stderr, "%s\n", padrone_session__errmsg(s));
 *		return padrone_session__exit_status(s);
 *	}
 *	struct padrone_profile_opts o = { .sz = sizeof(o), .seconds = 2 };
 *	if (padrone_session__profile(s, &o) == 0) {
 *		const struct padrone_report *r = padrone_session__report(s);
 *		const struct padrone_function *f = padrone_report__function(r, 0);
 *		printf("%s %.1f%%\n", f->name, f->self_pct);
 *	}
 *	padrone_session__free(s);	// detaches
 *
 * SIGCHLD. The process being attached to is serviced by a tracer thread
 * that libpadrone starts and that waits for SIGCHLD with sigtimedwait().
 * Block SIGCHLD in every thread of your program before the first
 * padrone_session__attach -- simplest, with pthread_sigmask() in main()
 * before creating any thread -- so the tracer thread sees the target's
 * events at once. Without it everything still works, but the tracer falls
 * back to polling every few milliseconds. (Do not reap children with
 * wait(-1, ...) while attached: the target's ptrace stops are reported to
 * the tracer thread through waitpid.)
 *
 * Conventions (as libbpf's): opaque objects, methods named type__verb,
 * functions returning int give 0 (or a count) or a negative errno, the
 * reason in words is kept by the session (padrone_session__errmsg);
 * constructors return NULL and set errno; options structs start with their
 * size (.sz = sizeof(struct ...)) so programs built against an older header
 * keep working. Nothing here prints or exits. A session is used by one
 * thread at a time, except padrone_session__interrupt.
 *
 * Lists, one way: a call that returns a list allocates it for the caller.
 * On success *out is a struct padrone_X_list { size_t count; struct
 * padrone_X *items; ... } the caller owns, strings included, until it
 * calls padrone_X_list__free (NULL is fine): later calls, detach and
 * padrone_session__free leave it alone. On failure *out is NULL:
 *
 *	struct padrone_thread_list *l;
 *	if (padrone_session__threads(s, &l) == 0) {
 *		for (size_t i = 0; i < l->count; i++)
 *			printf("%d %s\n", l->items[i].tid, l->items[i].function);
 *		padrone_thread_list__free(l);
 *	}
 *
 * The instrumentation's reports (padrone_ireport, padrone_istats) are
 * allocated alike, each with its own __free. The one thing the session
 * keeps for you is the last profile's report (padrone_session__report),
 * read through accessors.
 */
#ifndef PADRONE_H
#define PADRONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *padrone_version(void);

/* ------------------------------------------------------------- failures */

/* Why the last operation on a session failed. */
enum padrone_why {
	PADRONE_OK = 0,
	PADRONE_NO_PROCESS,	/* no such PID */
	PADRONE_ZOMBIE,		/* exited, not yet reaped by its parent */
	PADRONE_KERNEL_THREAD,	/* a kernel thread: nothing to attach to */
	PADRONE_NOT_X86_64,	/* a 32-bit or x32 process */
	PADRONE_PERMISSION,	/* uid, CAP_SYS_PTRACE or yama said no */
	PADRONE_ALREADY_TRACED,	/* another tracer (a debugger) holds it */
	PADRONE_TARGET_EXITED,	/* it exited while we worked */
	PADRONE_TARGET_EXECED,	/* it exec'd while we worked */
	PADRONE_TIMEOUT,	/* a thread did not stop in time */
	PADRONE_SYSTEM,		/* anything else: the message says what */
	PADRONE_NOT_ATTACHED,	/* the call needs an attached process */
	PADRONE_BAD_REQUEST,	/* invalid options (a rate above 10 kHz...), or a
				 * request that cannot be done as asked (no such
				 * function, already replaced, refused...) */
};

/* The distinct exit status padroned and padrone use for why (0 for
 * PADRONE_OK), as listed in padroned(8); and a short name
 * ("no-process", "zombie", ...). */
int padrone_why_exit_status(enum padrone_why why);
const char *padrone_why_name(enum padrone_why why);

/* -------------------------------------------------------------- session */

struct padrone_session;

struct padrone_session_opts {
	size_t sz;		/* sizeof(struct padrone_session_opts) */
	int stop_timeout_ms;	/* how long stopping a thread may take; 0: 1000 */
};

/* A session attached to nothing yet. opts may be NULL. NULL + errno on
 * failure. */
struct padrone_session *padrone_session__new(const struct padrone_session_opts *opts);
/* Detach (if attached) and free. NULL is fine. */
void padrone_session__free(struct padrone_session *s);

/* Seize every thread of pid (it keeps running). On failure the process is
 * untouched and padrone_session__why/__errmsg say why: "no process with
 * PID 4242", "4242 is a zombie", .... -EBUSY if already attached. */
int padrone_session__attach(struct padrone_session *s, pid_t pid);
/* Let go of the process, restoring everything padrone changed; a process
 * that was stopped by job control stays stopped. Safe when it has exited. */
int padrone_session__detach(struct padrone_session *s);

bool padrone_session__attached(const struct padrone_session *s);
/* The attached PID, or 0. */
pid_t padrone_session__pid(const struct padrone_session *s);
/* PADRONE_OK while the attached process lives; PADRONE_TARGET_EXITED or
 * PADRONE_TARGET_EXECED once it is gone (then only detach is useful). */
enum padrone_why padrone_session__target_state(const struct padrone_session *s);
/* A file descriptor that becomes readable when the attached process exits
 * or execs (for poll loops), or -1 when not attached. */
int padrone_session__event_fd(const struct padrone_session *s);

/* The last failure: its reason, a full sentence ("" if none), its exit
 * status. */
enum padrone_why padrone_session__why(const struct padrone_session *s);
const char *padrone_session__errmsg(const struct padrone_session *s);
int padrone_session__exit_status(const struct padrone_session *s);

/* Make a running padrone_session__profile stop early and keep what it has
 * (from the moment the call begins, also while the sampler is being set
 * up; an interrupt while no profile call runs is forgotten); a running
 * padrone_session__measure likewise stops waiting for calls and reports
 * those timed so far. s NULL does
 * nothing. Async-signal-safe: call it from a signal handler or another
 * thread. The session must stay allocated meanwhile: a handler that may
 * run while the program frees it needs its own guard (padrone's
 * padrone_ctl_interrupt is one). */
void padrone_session__interrupt(struct padrone_session *s);

/* How long padrone has held the whole process stopped (every thread, for a
 * bt, info threads, a patch...), since it attached. */
struct padrone_pause_stats {
	uint64_t count;		/* completed stops */
	uint64_t last_ns;	/* the last one, from its first interrupt to its last resume */
	uint64_t max_ns;
	uint64_t total_ns;
	uint64_t last_stop_ns;	/* of last_ns, the time it took to stop every thread */
};

/* 0, or -ENOENT when not attached. */
int padrone_session__pause_stats(const struct padrone_session *s, struct padrone_pause_stats *out);

/* -------------------------------------------------------------- threads */

struct padrone_thread {
	pid_t tid;
	char name[16];		/* comm */
	char state;		/* as in /proc: R running, S sleeping, t traced... */
	uint64_t user_ms, system_ms;	/* CPU time used so far */
	uint64_t pc;		/* where it was when last stopped (0: unknown) */
	char function[128];	/* pc's function, named as padrone_session__backtrace
				 * names frame #0 (MODULE+0xOFF when no function
				 * is known); "" when pc is 0 */
};

struct padrone_thread_list {
	size_t count;
	struct padrone_thread *items;	/* main thread first */
};

/* The threads of the attached process. Reads each thread's pc from /proc
 * when it is off a CPU (no stop: a stop makes epoll_wait and the like fail
 * with EINTR); stops the process for a moment only if a thread keeps
 * running. 0 and *out (see Lists above), or -errno. */
int padrone_session__threads(struct padrone_session *s, struct padrone_thread_list **out);
void padrone_thread_list__free(struct padrone_thread_list *l);
/* How many threads the attached process has, or -errno (from /proc alone:
 * no stop, no pc read). */
int padrone_session__thread_count(struct padrone_session *s);

/* -------------------------------------------------------------- profile */

enum padrone_backend {
	PADRONE_BACKEND_RING = 0,	/* perf_event mmap rings: per CPU where
					 * permitted, else per thread */
	PADRONE_BACKEND_BPF,		/* in-kernel aggregation (libbpf) */
};

struct padrone_profile_opts {
	size_t sz;		/* sizeof(struct padrone_profile_opts) */
	double seconds;		/* how long to sample; 0: 2 */
	unsigned hz;		/* sampling frequency; 0: 999 */
	enum padrone_backend backend;
	bool force;		/* allow more than 10 kHz without a hardware PMU
				 * (else refused: PADRONE_BAD_REQUEST) */
	bool user_only;		/* sample user code only, as perf's :u (the
				 * report still tells the kernel's share of the
				 * CPU time) */
	/* Called on the calling thread about 4 times a second while sampling
	 * (NULL: never): seconds elapsed of total, samples so far (0 with the
	 * bpf backend, which counts in the kernel until the end). */
	void (*progress)(void *arg, double elapsed_s, double total_s, uint64_t samples);
	void *progress_arg;
};

/* Sample every thread (current and new) for opts->seconds (less if
 * interrupted), then rank the functions. The result replaces the session's
 * report. If the process exits or execs meanwhile, sampling ends then, the
 * report of what was sampled until then still replaces the last one
 * (padrone_report__ended says so), and the call fails with
 * PADRONE_TARGET_EXITED or PADRONE_TARGET_EXECED. If the BPF backend cannot load, the ring backend is used and the
 * report says why (padrone_report__fallback); the call still returns 0 and,
 * as after any success, padrone_session__errmsg is "". */
int padrone_session__profile(struct padrone_session *s, const struct padrone_profile_opts *opts);

/* One function in a report. Strings belong to the report. */
struct padrone_function {
	const char *name;	/* symbol, sub_ADDR (from .eh_frame), a JIT's name
				 * for its code (from /tmp/perf-PID.map) or
				 * module+0xOFF */
	const char *module;	/* path of the file mapped there, "[vdso]",
				 * "[anon]", "[perf-PID.map]" for JIT code */
	uint64_t start, end;	/* runtime addresses, [start, end); end == start: unknown */
	uint64_t self;		/* samples whose pc is in the function */
	uint64_t inclusive;	/* samples with the function anywhere on the call chain */
	double self_pct;	/* self / samples * 100 */
	const char *bounds;	/* where start/end came from: "symtab", "dynsym",
				 * "eh_frame", "callchain", "perfmap" or "none" */
};

/* The last profile's report, or NULL. Valid until the next profile, detach
 * or free. */
struct padrone_report;
const struct padrone_report *padrone_session__report(const struct padrone_session *s);

pid_t padrone_report__pid(const struct padrone_report *r);
const char *padrone_report__event(const struct padrone_report *r);	/* "cpu-clock", "cycles" */
unsigned padrone_report__frequency_hz(const struct padrone_report *r);
double padrone_report__duration_s(const struct padrone_report *r);
uint64_t padrone_report__samples(const struct padrone_report *r);
uint64_t padrone_report__lost(const struct padrone_report *r);
/* How often the kernel throttled sampling (a rate too high for it). */
uint64_t padrone_report__throttled(const struct padrone_report *r);
/* Kernel or not: whether kernel code was left out of the samples (opts
 * user_only, or perf_event_paranoid), the samples whose IP was in the kernel
 * (0 then), and the process's CPU time during the profile as the kernel
 * accounts it, user and system, whichever was sampled. */
bool padrone_report__user_only(const struct padrone_report *r);
uint64_t padrone_report__kernel_samples(const struct padrone_report *r);
double padrone_report__cpu_user_s(const struct padrone_report *r);
double padrone_report__cpu_system_s(const struct padrone_report *r);
/* When the profile began: ns since the epoch. */
uint64_t padrone_report__start_ns(const struct padrone_report *r);
/* The backend that ran ("ring", "bpf"), and why it is not the one asked
 * for ("" if it is). */
const char *padrone_report__backend(const struct padrone_report *r);
const char *padrone_report__fallback(const struct padrone_report *r);
/* How the threads were covered: "per-cpu" (ring backend: one event per
 * CPU, every thread however short-lived), "per-thread" (ring backend where
 * per-CPU events are not permitted: threads that live less than a
 * sampling period are missed) or "in-kernel" (bpf); and, for per-thread,
 * why per-cpu could not be used ("" otherwise). */
const char *padrone_report__sampling(const struct padrone_report *r);
const char *padrone_report__sampling_why(const struct padrone_report *r);
/* PADRONE_TARGET_EXITED or PADRONE_TARGET_EXECED when the process exited
 * or exec'd during the profile (the report holds what was sampled until
 * then, and padrone_session__profile failed with that reason); else
 * PADRONE_OK. */
enum padrone_why padrone_report__ended(const struct padrone_report *r);
/* Functions, hottest (most self samples) first. */
size_t padrone_report__count(const struct padrone_report *r);
const struct padrone_function *padrone_report__function(const struct padrone_report *r, size_t i);

/* The report as JSON (the shape padroned --json prints) or as a text table
 * like perf report's, with at most max functions (0: all). Returns a
 * malloc'd string the caller frees, or NULL and errno. */
char *padrone_report__json(const struct padrone_report *r, size_t max);
char *padrone_report__text(const struct padrone_report *r, size_t max);

/* Where profiles go: the formats other tools read. */
enum padrone_format {
	PADRONE_FORMAT_PPROF = 0,	/* gzipped profile.proto: pprof, Parca,
					 * Pyroscope (mappings with GNU build-ids,
					 * locations, functions; cpu nanoseconds) */
	PADRONE_FORMAT_FOLDED,		/* folded stacks, one "root;...;leaf COUNT"
					 * a line: FlameGraph, speedscope, inferno */
	PADRONE_FORMAT_JSON,		/* padrone_report__json */
};
/* "pprof", "folded", "json" <-> the format: 0, or -EINVAL. */
int padrone_format_parse(const char *name, enum padrone_format *out);
const char *padrone_format_name(enum padrone_format fmt);

/* Write the last profile in fmt to fd, or to path (written beside it
 * and renamed into place, so a reader never sees half a file). pprof and
 * folded need the session still attached to the process it profiled (its
 * maps name the mappings). 0 or -errno with the reason in the session. */
int padrone_session__write_profile(struct padrone_session *s, enum padrone_format fmt, int fd);
int padrone_session__save_profile(struct padrone_session *s, enum padrone_format fmt,
				  const char *path);

/* ------------------------------------------------------------- modules */

/* A file (or [vdso]) mapped executable in the attached process. Strings
 * belong to the list. */
struct padrone_module {
	uint64_t base;		/* where its lowest mapping starts */
	const char *path;	/* as in /proc/PID/maps */
	const char *build_id;	/* hex NT_GNU_BUILD_ID, "" if it has none */
};

struct padrone_module_list {
	size_t count;
	struct padrone_module *items;	/* by address */
};

/* The process's executable modules: 0 and *out (see Lists above), or
 * -errno. */
int padrone_session__modules(struct padrone_session *s, struct padrone_module_list **out);
void padrone_module_list__free(struct padrone_module_list *l);

/* ------------------------------------------------------------ backtrace */

/* Strings belong to the list. */
struct padrone_frame {
	uint64_t pc;
	uint64_t offset;	/* pc - start of the function */
	const char *name;	/* the function, or "" */
	const char *module;	/* its file, or "" */
};

/* Where and why a backtrace ended. complete: at the outermost frame, as
 * the unwind information marks it. Otherwise the frames above the last one
 * were not walked: reason "no_unwind_info" (its pc is in code without
 * unwind information: JIT code, the code cache, hand-written assembly, a
 * module whose tables cannot be read), "bad_frame" (unwinding it failed)
 * or "too_deep"; why says it in words. */
struct padrone_backtrace_end {
	bool complete;
	const char *reason;
	size_t frame;		/* the last frame walked */
	uint64_t pc, sp;	/* its pc and stack pointer */
	const char *why;	/* "" when complete */
};

struct padrone_frame_list {
	size_t count;
	struct padrone_frame *items;	/* innermost first */
	struct padrone_backtrace_end end;
};

/* Unwind thread tid (0: the main thread) as far as its unwind information
 * goes. Code of the code cache is named for what it is ("replacement of
 * mid", "measuring stub of mid"; module "[code cache]"). 0 and *out (see
 * Lists above), or -errno. */
int padrone_session__backtrace(struct padrone_session *s, pid_t tid,
			       struct padrone_frame_list **out);
void padrone_frame_list__free(struct padrone_frame_list *l);

/* ------------------------------------------------------------------ cfg */

/* A function's control-flow graph and loop forest, rebuilt from the
 * attached process's memory alone (basic blocks, edges, jump tables, calls,
 * where the function ends, dominators, loops). */
struct padrone_cfg;

enum padrone_cfg_format {
	PADRONE_CFG_TEXT,	/* blocks with instructions, edges, calls, loops */
	PADRONE_CFG_JSON,	/* one object, the shape padroned --cfg --json prints */
	PADRONE_CFG_DOT,	/* Graphviz: loops as nested clusters, hot blocks shaded */
	PADRONE_CFG_DISAS,	/* disassembly, block by block */
	PADRONE_CFG_LOOPS,	/* the loop forest, one line per loop */
};

/* Build the CFG of the function `what` names: a symbol ("main", "printf")
 * or an address ("0x401136") anywhere inside the function. Samples of the
 * last profile, if any, are attributed to its blocks and loops. 0 and *out
 * (free with padrone_cfg__free), or -errno with the reason in the session
 * ("no function named 'foo' in process 4242"). */
int padrone_session__cfg(struct padrone_session *s, const char *what, struct padrone_cfg **out);
void padrone_cfg__free(struct padrone_cfg *c);
uint64_t padrone_cfg__entry(const struct padrone_cfg *c);
const char *padrone_cfg__name(const struct padrone_cfg *c);	/* sub_ADDR if unknown */
/* Why the CFG is incomplete (unreadable or invalid code at an address, a
 * limit), or "". */
const char *padrone_cfg__error(const struct padrone_cfg *c);
/* The CFG as text in fmt: a malloc'd string the caller frees, or NULL and
 * errno. */
char *padrone_cfg__format(const struct padrone_cfg *c, enum padrone_cfg_format fmt);

/* A hot function of the last profile and its hottest loop (the loop whose
 * own blocks hold the most samples). Strings belong to the list. */
struct padrone_hot_loop {
	const char *function, *module;
	uint64_t entry;
	uint64_t function_samples;	/* self samples of the function */
	uint64_t header;	/* the loop's header block; 0: no loop has samples */
	unsigned depth;		/* 1: outermost */
	unsigned blocks;
	bool irreducible;
	uint64_t samples;	/* in the loop, nested loops included */
};

struct padrone_hot_loop_list {
	size_t count;
	struct padrone_hot_loop *items;	/* hottest function first */
};

/* The max hottest functions of the last profile (fewer if it has fewer),
 * each with its hottest loop. 0 and *out (see Lists above), or -errno (no
 * profile yet, the process gone). */
int padrone_session__hot_loops(struct padrone_session *s, size_t max,
			       struct padrone_hot_loop_list **out);
void padrone_hot_loop_list__free(struct padrone_hot_loop_list *l);

/* ----------------------------------------------------------- code cache */

/* Live replacement and measurement (PADRONE's optimisation step). padrone
 * keeps a code cache inside the process, within +-2 GiB of its code, never
 * writable and executable at once. A replacement outlives the session:
 * padrone_session__restore, in this session or a later one, puts the
 * original back. FUNCTION is a name, or an address "0x..." (its extent then
 * comes from its control flow). Every thread is stopped while code is
 * patched; one caught inside the overwritten bytes is moved out. */

struct padrone_patch {
	uint64_t function;	/* its address */
	uint64_t stop_ns;	/* how long the world was stopped for the write */
	unsigned threads;	/* threads looked at */
	unsigned moved;		/* threads moved out of the overwritten bytes */
	unsigned sites;		/* places written */
	bool kept_code;		/* restore: a thread was still in the replacement
				 * past the timeout; its code stays in the cache */
	char report[2048];	/* one line per step: what was (or would be) done, why */
};

struct padrone_replace_opts {
	size_t sz;		/* sizeof(struct padrone_replace_opts) */
	const char *symbol;	/* in the file; NULL: FUNCTION's own name if the
				 * file has it, else the file's only function */
	bool raw;		/* the file is raw position-independent code */
	const char *const *callers;	/* also re-target the direct calls in these */
	size_t ncallers;
	bool callsites_only;	/* only those: leave the entry alone */
	bool wait;		/* only once no thread is in FUNCTION (else threads
				 * inside finish their call in the original) */
	bool force;		/* with wait: go ahead after the timeout */
	bool dry_run;		/* check and describe in the report; change nothing */
	int timeout_ms;		/* 0: 2000 */
};

/* Replace FUNCTION by a function of file: a relocatable object (cc -O3
 * -mavx2 -fPIC -c), a shared object, or a raw blob. It is linked against the
 * process's own libraries. Fails (with the reason) for a function already
 * replaced, one too short for a 5-byte jump or that branches into its own
 * first bytes, a missing symbol. out may be NULL. */
int padrone_session__replace(struct padrone_session *s, const char *function, const char *file,
			     const struct padrone_replace_opts *opts, struct padrone_patch *out);

struct padrone_restore_opts {
	size_t sz;		/* sizeof(struct padrone_restore_opts) */
	bool dry_run;
	int timeout_ms;		/* how long to wait for threads to leave the
				 * replacement before keeping its code; 0: 2000 */
};

/* Put FUNCTION's original code back. Fails when it is not replaced. */
int padrone_session__restore(struct padrone_session *s, const char *function,
			     const struct padrone_restore_opts *opts, struct padrone_patch *out);

struct padrone_replacement {
	uint64_t function;	/* its address */
	uint64_t code;		/* where its calls go */
	uint64_t stop_ns;	/* the pause of its patch */
	bool measuring;		/* a measuring stub, not a replacement */
	char name[96];
	char source[160];	/* FILE:SYMBOL */
	unsigned sites;		/* places written: its entry, call sites */
	pid_t owner;		/* the padrone process that made it */
	bool stale;		/* a measuring stub whose padrone is gone (killed
				 * while measuring): restore takes it out */
};

struct padrone_replacement_list {
	size_t count;
	struct padrone_replacement *items;
};

/* The replacements in place (made by any session): 0 and *out (see Lists
 * above), or -errno. */
int padrone_session__replacements(struct padrone_session *s,
				  struct padrone_replacement_list **out);
void padrone_replacement_list__free(struct padrone_replacement_list *l);

struct padrone_measure_opts {
	size_t sz;		/* sizeof(struct padrone_measure_opts) */
	uint64_t calls;		/* how many calls to time; 0: 1000 */
	double timeout;		/* seconds to wait for them; 0: 10 */
	bool force;		/* even in a process with a C++ or unwinding
				 * runtime (an exception through a timed call
				 * would abort it) */
	/* Told about every 50 ms while the calls are waited for: seconds
	 * elapsed of the timeout, calls timed so far. */
	void (*progress)(void *arg, double elapsed_s, double total_s, uint64_t calls);
	void *progress_arg;
};

struct padrone_measurement {
	char function[128];
	uint64_t requested, calls;	/* calls asked for, calls timed */
	bool complete;		/* all requested calls came in time */
	uint64_t skipped;	/* calls let through untimed */
	double mean_ns, p50_ns, p99_ns, min_ns, max_ns;	/* 0 when no call was timed */
	bool has_ipc;		/* false without a hardware PMU: IPC unknown */
	double ipc;
	uint64_t stop_ns;	/* the pause of putting the stub in */
	double resolution_ns;	/* the clock's: a figure below it is "< resolution" */
};

/* Time CALLS calls of FUNCTION inside the process (rdtsc at entry and
 * return, no traps), then take the measuring stub out again. */
int padrone_session__measure(struct padrone_session *s, const char *function,
			     const struct padrone_measure_opts *opts, struct padrone_measurement *out);

/* Instrumentation (issue 10): FUNCTION replaced by a copy that records one
 * REP unit per executed block into a CAB ring per thread (codecache.h);
 * padrone recovers the references on a consumer thread per ring and
 * simulates the host's caches (Cachegrind's geometry and counting), until
 * padrone_session__uninstrument or detach (which uninstruments first).
 * Results stay for padrone_session__instr_report until the next attach. */
#define PADRONE_NEVENTS 9
/* "Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw" */
const char *padrone_event_name(unsigned i);

struct padrone_instrument_opts {
	size_t sz;		/* sizeof(struct padrone_instrument_opts) */
	bool sampling;		/* rings in sampling mode: the target never waits */
	/* Cache geometries "SIZE,ASSOC,LINE" (cachegrind's --I1/--D1/--LL);
	 * NULL: the host's, as cachegrind finds it. One geometry per
	 * attachment: a later function must keep the first one's. */
	const char *i1, *d1, *ll;
	/* What the consumers do with the units, PADRONE_ANALYZE_* (0: CACHE).
	 * Each level includes the ones before it: BLOCKS counts the units of
	 * each thread (the copy records no addresses when nothing else is
	 * asked), RECORD has the copy record every address all the same
	 * (what recording costs), REFS recovers the references and counts
	 * them, CACHE simulates the caches (report's events need it). One
	 * choice per attachment, as the mode. EDGES and LOOPS (the edges'
	 * executions, the loops' entries and iterations) come with every
	 * level but RECORD; asked alone they are BLOCKS, and a report lists
	 * the edges in text when EDGES was asked. */
	unsigned analyses;
};
#define PADRONE_ANALYZE_BLOCKS 1u
#define PADRONE_ANALYZE_RECORD 2u
#define PADRONE_ANALYZE_REFS 4u
#define PADRONE_ANALYZE_CACHE 8u
#define PADRONE_ANALYZE_EDGES 16u
#define PADRONE_ANALYZE_LOOPS 32u
/* "cache,blocks,..." into PADRONE_ANALYZE_* bits: 0, or -EINVAL naming
 * the word it does not know in why. */
int padrone_analyses_parse(const char *text, unsigned *out, char *why, size_t size);
int padrone_session__instrument(struct padrone_session *s, const char *function,
				const struct padrone_instrument_opts *opts);
/* FUNCTION's original back; NULL: every instrumented function. Fails when
 * nothing (or not FUNCTION) is instrumented. */
int padrone_session__uninstrument(struct padrone_session *s, const char *function);
/* Switch every function instrumented now off (each runs its original
 * again; its copy, rings and results stay) or on again (issue 11), without
 * stopping the process: the copy's entry reads a switch in the thread's
 * state block, so a call under way finishes as it began (recorded whole or
 * not at all). Ends a duty cycle. A function instrumented while the others
 * are off starts off. Fails (PADRONE_BAD_REQUEST) when nothing is
 * instrumented. */
int padrone_session__instr_switch(struct padrone_session *s, bool on);
/* A duty cycle (PEBIL's): on for on_ms, off for off_ms (1 ms to an hour
 * each), kept by a thread of this session (padrone's clock, not the
 * target's), beginning with a whole window on, until a switch by hand, a
 * new cycle, uninstrument of everything or detach. Report then says what
 * fraction of the time the counts cover and estimates the whole. Fails
 * (PADRONE_BAD_REQUEST) when nothing is instrumented or a window is out of
 * range. */
int padrone_session__instr_duty(struct padrone_session *s, unsigned on_ms, unsigned off_ms);
/* An overhead budget (--max-overhead): a duty cycle of 200 ms periods (up
 * to 1 s for a share below 0.5%) whose
 * share on this session chooses, and keeps choosing as the load changes,
 * so that the target loses about pct% of its time (more than 0, at most
 * 100). It samples the target's threads (cpu-clock, 499 Hz) and where they
 * sleep, for the share of its time spent in the copies and how much slower
 * they are than the originals (method in padrone(1)); padrone_istats says
 * the fraction chosen and the estimate. Meanwhile the session's pipeline
 * threads run at niceness 19.
 * Fails (PADRONE_BAD_REQUEST) when nothing is instrumented or pct is out
 * of range, (PADRONE_SYSTEM) when the process cannot be sampled (the
 * functions are then left switched off). */
int padrone_session__instr_budget(struct padrone_session *s, double pct);

struct padrone_pc_events {
	uint64_t pc;
	uint64_t ev[PADRONE_NEVENTS];
};
struct padrone_ithread {
	int tid;
	uint64_t units, refs, lost_units;
};
/* A loop of an instrumented function's CFG (cfg's loop forest, built when
 * it was instrumented): its events are those of its instructions, nested
 * loops' included. */
struct padrone_iloop {
	uint64_t header;	/* the header block's address */
	int parent;		/* index in the function's loops, or -1 */
	unsigned depth;		/* 1: outermost */
	unsigned blocks;	/* nested loops' included */
	bool irreducible;
	uint64_t ev[PADRONE_NEVENTS];
	/* Times entered (from outside it, or by a call when it holds the
	 * function's entry) and iterations (entries and back edges taken:
	 * a reducible loop's header executions); their ratio is the trip
	 * count. From the edges' counts: 0 under PADRONE_ANALYZE_RECORD. */
	uint64_t entries, iterations;
};
/* An edge of an instrumented function's CFG that stays inside it, and how
 * often it ran (consecutive units of a thread; 0 under
 * PADRONE_ANALYZE_RECORD, which recovers nothing). */
struct padrone_iedge {
	uint64_t from;		/* the source block's address */
	uint64_t at;		/* its last instruction (the branch), 0 if unknown */
	uint64_t to;		/* the target block's address */
	const char *kind;	/* "fallthrough", "taken", "not_taken", "jump",
				 * "jump_table", "call_return" */
	uint64_t count;
};
struct padrone_ifunction {
	char name[96];
	uint64_t entry;
	bool active;		/* still instrumented */
	uint64_t copy;		/* the instrumented copy's address in the code cache */
	double seconds;		/* instrumented so far (until uninstrument) */
	char module[256];	/* the file FUNCTION is in, as /proc/PID/maps names it */
	uint64_t module_base;	/* where its file offset 0 is mapped */
	uint64_t ev[PADRONE_NEVENTS];
	size_t npcs;
	struct padrone_pc_events *pcs;	/* ascending pc */
	size_t nloops;
	struct padrone_iloop *loops;	/* outer before inner */
	double fraction;	/* of its time instrumented that it was switched on */
	size_t nedges;
	struct padrone_iedge *edges;	/* in the CFG's order, never run ones too */
};
struct padrone_ireport {
	int pid;
	double seconds;		/* instrumented so far */
	bool sampling;
	/* What the analysis (PADRONE_ANALYZE_*) measures: nevents events of
	 * ev[], those events[] names (indices into ev[], in order); the others
	 * are 0. cache: all nine; refs: Ir, Dr and Dw (as lackey counts them,
	 * from the blocks' executions and a rep-prefixed instruction's
	 * references recovered), no cache simulated; blocks: Ir alone, from
	 * the blocks' executions; record: none. */
	unsigned analysis;
	unsigned nevents;
	char i1[48], d1[48], ll[48];	/* geometry "SIZE,ASSOC,LINE" */
	size_t nfunctions, nthreads;
	struct padrone_ifunction *functions;
	struct padrone_ithread *threads;
	uint64_t lost_units, gaps;
	/* Switched off at some time (instrument --off, a duty cycle): the
	 * counts cover fraction of the time instrumented (all functions'), in
	 * windows (times switched on, the first one's included). Estimates for
	 * the whole time divide a function's counts by its own fraction; miss
	 * ratios are as measured. false: exhaustive in time, always on. */
	bool sampled;
	double fraction;
	uint64_t windows;
	/* Cold-start misses of the simulated I1, D1 and LL (all functions'):
	 * those that filled an empty line, first touches since the simulation
	 * began. A simulation that began earlier, or saw the time switched off
	 * too, might have hit there, so a miss ratio lies between the one
	 * without them and the one measured; the gap is wide when the function
	 * touched most of its lines only once in the windows on. */
	uint64_t cold[3];
	/* Sampled (in time, or by CAB's sampling), with the cache simulated:
	 * the hits of I1, D1 and LL on lines kept from before a gap (a time
	 * switched off, units sampling left out), and how many of those a run
	 * of the whole time would have missed, expected (the gaps since the
	 * line was used, at the level's rate of new lines per set, evicted
	 * it: method in padrone(1)); and the data miss ratios (misses / data
	 * references, 0..1) estimated for the whole time with those misses
	 * (an LL line's share of them by the data's share of the LL's
	 * accesses; a D1 miss so added hits the LL), -1 otherwise. */
	uint64_t aged_hits[3];
	double evicted[3];
	double est_d1, est_ll;
	unsigned events[PADRONE_NEVENTS];	/* see nevents */
	unsigned asked;		/* every PADRONE_ANALYZE_* bit instrument was given */
};
/* What instrumentation found so far (also after uninstrument). Fails when
 * nothing was instrumented in this attachment. */
int padrone_session__instr_report(struct padrone_session *s, struct padrone_ireport **out);
void padrone_ireport__free(struct padrone_ireport *r);

/* How the pipeline keeps up, now: per thread's ring of each function
 * instrumented in this attachment. Rates are over the time since the
 * previous stats (or since instrument). */
struct padrone_istat_thread {
	int tid;
	char function[96];
	bool active;		/* its consumer still runs */
	uint64_t units;		/* REP units (executed blocks) recovered */
	uint64_t refs;		/* references recovered (instruction fetches too) */
	uint64_t lost_units;	/* dropped by the target or skipped (sample mode) */
	uint64_t gaps;		/* discontinuities the recovery saw */
	uint64_t producer_waits;	/* times the thread found its ring full and waited */
	double seconds;		/* the rates' interval */
	double units_per_s, refs_per_s;
	double ring_fill;	/* % of the ring's chunks holding unconsumed units (0 once ended) */
	double cpu_s;		/* the consumer thread's CPU time */
};
struct padrone_istats {
	int pid;
	double seconds;		/* instrumented so far */
	bool sampling;
	uint64_t units, refs, lost_units, gaps;
	double cpu_s;		/* the pipeline's CPU time: all consumers' and sim_cpu_s */
	size_t nthreads;
	struct padrone_istat_thread *threads;
	/* switching (padrone_session__instr_switch, __instr_duty) */
	bool on;		/* switched on now */
	double on_fraction;	/* of the time instrumented (all functions') */
	uint64_t windows;	/* times switched on, the first one's included */
	unsigned duty_on_ms, duty_off_ms;	/* the duty cycle kept, 0 0: none */
	/* an overhead budget (padrone_session__instr_budget), 0: none */
	double max_overhead;	/* %, of the target's time */
	double budget_fraction;	/* the share of each period on, chosen now */
	bool estimated;		/* false: the estimate is unknown (note says why) */
	double overhead;	/* estimated, % of the target's time, over the last seconds
				 * (overhead_off included) */
	double slowdown;	/* of the functions' own code, on against off */
	double share_on, share_off;	/* the functions' share of the target's CPU time */
	double share_copy;	/* of the target's time in the copies (asleep in them too) */
	/* samples behind the estimate (decayed: the last seconds'), and all */
	double recent_on, recent_off;
	uint64_t samples_on, samples_off;
	char note[128];		/* why the samples tell no overhead, if they do not */
	/* the estimate is the larger of two measures, either may be unknown:
	 * the threads' busy time per call (on a CPU, waiting for one, or in
	 * the ring stubs; calls counted at the copies' gates) over all windows
	 * against the off windows' once the pipeline is idle, and the samples
	 * above (share_*, slowdown) */
	bool by_calls, by_samples;
	double overhead_calls, overhead_samples;	/* each one's, % */
	double ns_per_call, ns_per_call_off;	/* busy time per call */
	double recent_calls;	/* calls behind it (decayed) */
	char calls_note[96];	/* why the calls tell no overhead, if they do not */
	/* what being switched off costs (the gates and detours' share of the
	 * samples off), %: the estimate is this plus the larger measure */
	double overhead_off;
	/* how sure the estimate is: how far the last ones (weighted to the
	 * last four or so) strayed from what the one before predicted, a
	 * standard deviation in points of overhead; 0 with only one */
	double spread;
	double sim_cpu_s;	/* the simulator thread's: batches a consumer handed over
				 * while another simulated (a lone one simulates its own) */
};
int padrone_session__instr_stats(struct padrone_session *s, struct padrone_istats **out);
void padrone_istats__free(struct padrone_istats *r);

/* Let the instrumented functions run for seconds (a one-shot instrument:
 * instrument, wait, report, uninstrument), telling progress, when set,
 * four times a second how far it is and the REP units recovered so
 * far. 0 when the time has run out, 1 when padrone_session__interrupt (or
 * a leaving program's signal) cut it short; fails when not attached, when
 * seconds is not positive, or when the process exits or execs meanwhile
 * (what was recovered stays for padrone_session__instr_report). */
struct padrone_instr_wait_opts {
	size_t sz;		/* sizeof(struct padrone_instr_wait_opts) */
	double seconds;
	void (*progress)(void *arg, double elapsed_s, double total_s, uint64_t units);
	void *progress_arg;
};
int padrone_session__instr_wait(struct padrone_session *s,
				const struct padrone_instr_wait_opts *opts);

/* PADRONE's code-cache calls. padrone_cc_create makes sure the process has a
 * code cache within +-2 GiB of near (0: of the program's own code; *addr: an
 * address in it, may be NULL);
 * padrone_cc_insert copies len bytes of position-independent code into it
 * (*addr: where); padrone_cc_redirect sends FUNCTION's calls there (undone
 * by padrone_session__restore). */
int padrone_cc_create(struct padrone_session *s, uint64_t near, uint64_t *addr);
int padrone_cc_insert(struct padrone_session *s, const void *code, size_t len, uint64_t near,
		      uint64_t *addr);
int padrone_cc_redirect(struct padrone_session *s, const char *function, uint64_t code,
			struct padrone_patch *out);

#ifdef __cplusplus
}
#endif
#endif
