/* profile.h: where a live process spends its time.
 *
 * Four parts, each an opaque handle:
 *
 *   prof_sampler     samples every thread of a process, existing and new,
 *                    with call chains: perf_event mmap rings read on a
 *                    thread of padrone's (backend "ring"), or a BPF program
 *                    aggregating in kernel maps (backend "bpf").
 *   prof_symbolizer  names runtime addresses of one process: ELF .symtab /
 *                    .dynsym, PLT entries, .eh_frame FDE ranges for stripped
 *                    code (sub_<addr>), "module+0xoff" as the last resort,
 *                    kernel symbols from /proc/kallsyms; build-id per module;
 *                    JIT code from the perf map the JIT writes
 *                    (/tmp/perf-PID.map), as perf report does.
 *   prof_unwinder    walks the stack of a stopped thread as far as its
 *                    unwind information goes, and says where and why it
 *                    stopped (libunwind, over tables read from the target).
 *   prof_hot         the samples of a sampler ranked by function: self and
 *                    inclusive counts, function bounds and where they came
 *                    from, and the totals of the run.
 *
 * Conventions (as libbpf): 0 or a negative errno; constructors take a
 * struct prof_error that says why they failed; options structs start with
 * their size. Nothing here prints or exits.
 */
#ifndef PADRONE_PROFILE_H
#define PADRONE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct attach_target;

#define PROF_DEFAULT_FREQ_HZ 999u
/* Above this, without a hardware PMU, each sample's cost (~18 us on a
 * nested VM, see below) can lock up a CPU: refused unless opts.force (the
 * message does not say how to force: each front end names its own way). */
#define PROF_MAX_SOFT_FREQ_HZ 10000u

struct prof_error {
	int err;		/* negative errno */
	char msg[512];		/* a full sentence naming the cause */
};

/* --------------------------------------------------------------- sampler */

/* What sampling costs the target (measured by bench/profile-cost on a
 * 2-vCPU nested KVM guest without a PMU; the bench prints them):
 * - Each cpu-clock sample is a timer interrupt: two VM exits (delivery,
 *   then re-arming the TSC deadline), ~17 us here, whatever is recorded.
 *   perf's own work is ~0.4 us of that; the call chain adds ~0.5-1 us,
 *   ~50 ns a frame. So at 999 Hz the target loses ~1.8%, and no
 *   timer-driven sampler (perf record included) can keep 0.99 of its rate.
 * - ring: events on the target's threads. Each context switch of a sampled
 *   thread stops and restarts its event's hrtimer: ~7.5 us more per switch
 *   here, which slows a target that switches often (a server waking per
 *   request) far more than its samples do. perf record -p pays the same.
 * - bpf: events on every CPU: no cost per switch, the same per sample, but
 *   every process on the machine is interrupted at the rate, and it needs
 *   CAP_BPF and CAP_PERFMON. The better choice for servers. */
enum prof_backend {
	PROF_BACKEND_RING = 0,	/* perf_event mmap rings, read in padrone */
	PROF_BACKEND_BPF = 1,	/* BPF program, aggregation in kernel maps */
};
const char *prof_backend_name(enum prof_backend b);
/* "ring" / "bpf" -> 0 and *b, or -EINVAL. */
int prof_backend_parse(const char *name, enum prof_backend *b);

/* How the ring backend covers the target's threads.
 * - per-cpu: one event per CPU for every task (pid -1), samples of other
 *   processes dropped as they are read. Its timer runs whatever the CPU
 *   runs, so a thread is sampled in proportion to its CPU time however
 *   short it lives (a thread of 20 us is sampled once in 50 at 999 Hz), and
 *   the target pays nothing per context switch. But every process on the
 *   machine is interrupted at the rate, as with bpf, and it needs
 *   CAP_PERFMON (or CAP_SYS_ADMIN, or perf_event_paranoid <= 0).
 * - per-thread: events on the target's threads, inherited by the threads
 *   they create. A new thread's event starts a full period (1 ms at 999
 *   Hz) from zero, so a thread that lives less than that is almost never
 *   sampled; and each context switch costs the target ~7.5 us (see above).
 * A cgroup event (PERF_FLAG_PID_CGROUP) would spare other processes, but
 * only when the target has a cgroup of its own (here, as on many hosts,
 * every process is in the root v2 cgroup, which is per-cpu again), and
 * moving the target into one would change its resource accounting: not
 * done. Auto takes per-cpu when permitted, else per-thread, and says why. */
enum prof_ring_mode {
	PROF_RING_AUTO = 0,
	PROF_RING_PER_CPU,
	PROF_RING_PER_THREAD,
};
/* "auto", "per-cpu", "per-thread". */
const char *prof_ring_mode_name(enum prof_ring_mode m);

struct prof_opts {
	size_t sz;		/* sizeof(struct prof_opts) */
	unsigned freq_hz;	/* samples per second per thread; 0 = 999 */
	enum prof_backend backend;
	bool force;		/* allow more than 10 kHz without a PMU */
	bool user_only;		/* never sample kernel code (also forced when
				 * perf_event_paranoid requires it) */
	unsigned ring_pages;	/* data pages per CPU ring, a power of 2;
				 * 0 = 128 */
	enum prof_ring_mode ring_mode;	/* ring backend: AUTO (per-cpu if
					 * permitted) or the one asked for */
};

struct prof_sampler;

/* Prepares sampling of process pid (events are opened, nothing is counted
 * yet). With backend bpf, when the program cannot be loaded, falls back to
 * the ring backend and says so in the totals. */
int prof_sampler__open(pid_t pid, const struct prof_opts *opts, struct prof_sampler **out,
		       struct prof_error *err);
/* Starts counting; a reader thread of padrone's drains the rings. */
int prof_sampler__start(struct prof_sampler *s);
/* Stops counting and collects everything still buffered. Safe when the
 * target has exited. start/stop may alternate; results accumulate. */
int prof_sampler__stop(struct prof_sampler *s);
void prof_sampler__free(struct prof_sampler *s);
const char *prof_sampler__errmsg(const struct prof_sampler *s);
pid_t prof_sampler__pid(const struct prof_sampler *s);

struct prof_totals {
	uint64_t samples;	/* samples of the target counted */
	uint64_t lost;		/* samples the kernel dropped (LOST records,
				 * or BPF map updates that failed) */
	uint64_t throttled;	/* THROTTLE records: times the kernel throttled sampling */
	uint64_t unthrottled;
	uint64_t stack_errors;	/* samples kept without a call chain (bpf) */
	uint64_t duration_ns;	/* time spent between start and stop */
	uint64_t threads;	/* distinct threads that were sampled */
	uint64_t new_threads;	/* of those, created after sampling began */
	uint64_t forks, exits, comms, mmaps; /* side-band records (ring) */
	unsigned freq_hz;
	char event[32];		/* "cpu-clock" or "cycles" */
	enum prof_backend backend; /* the backend that actually ran */
	bool fell_back;		/* bpf was asked for, ring ran */
	bool kernel;		/* kernel code was sampled too */
	char fallback_reason[256];
	enum prof_ring_mode ring_mode;	/* ring: PER_CPU or PER_THREAD as run */
	char ring_mode_reason[640];	/* auto ran per-thread: why ("" else) */
	bool execed;		/* the target called exec while sampled */
	uint64_t after_exec;	/* its samples after the exec (of the new
				 * program): not counted (ring) */
	uint64_t kernel_samples;	/* of samples, those whose IP was in the
					 * kernel (counted by prof_hot; 0 in a
					 * sampler's totals) */
};
void prof_sampler__totals(const struct prof_sampler *s, struct prof_totals *t);

/* The samples, aggregated by distinct call chain. ips[0] is the sampled
 * instruction; kernel frames (addresses >= PROF_KERNEL_START) come first,
 * then the user ones; ips[1..] are return addresses. Valid until the next
 * start or free. */
#define PROF_KERNEL_START 0xffff800000000000ull
size_t prof_sampler__stack_count(const struct prof_sampler *s);
int prof_sampler__stack(const struct prof_sampler *s, size_t i, const uint64_t **ips,
			size_t *nips, uint64_t *count);

struct prof_thread {
	pid_t tid;
	uint64_t samples;
	bool new_thread;	/* created after sampling began */
};
/* Per-thread sample counts; returns how many threads there are (may exceed
 * max; only max are copied). */
size_t prof_sampler__threads(const struct prof_sampler *s, struct prof_thread *out, size_t max);

/* ------------------------------------------------------------ symbolizer */

/* Where a function's bounds came from. */
enum prof_bounds {
	PROF_BOUNDS_NONE = 0,	/* nothing covers it: "module+0xoff" */
	PROF_BOUNDS_SYMTAB,
	PROF_BOUNDS_DYNSYM,	/* also PLT entries, named from .dynsym */
	PROF_BOUNDS_EH_FRAME,	/* an FDE of a stripped function: sub_<addr> */
	PROF_BOUNDS_CALLCHAIN,	/* entry found from a caller's call insn */
	PROF_BOUNDS_PERFMAP,	/* JIT code: a line of /tmp/perf-PID.map */
};
/* "none", "symtab", "dynsym", "eh_frame", "callchain", "perfmap". */
const char *prof_bounds_name(enum prof_bounds b);

struct prof_sym {
	const char *name;	/* owned by the symbolizer, valid until free */
	const char *module;	/* mapped path, "[vdso]", "[kernel.kallsyms]",
				 * "[anon]", "[perf-PID.map]" for JIT code... */
	const char *build_id;	/* hex NT_GNU_BUILD_ID, "" if none */
	uint64_t start, end;	/* runtime [start, end) */
	uint64_t addr;		/* the address asked about */
	enum prof_bounds bounds;
};

struct prof_symbolizer;

/* Reads /proc/PID/maps now; modules are loaded on first use and cached by
 * device/inode (and build-id). */
int prof_symbolizer__new(pid_t pid, struct prof_symbolizer **out, struct prof_error *err);
void prof_symbolizer__free(struct prof_symbolizer *s);
const char *prof_symbolizer__errmsg(const struct prof_symbolizer *s);
/* Re-reads the maps (after the target mapped new code), and the perf map
 * file on the next lookup that needs it. */
int prof_symbolizer__refresh(struct prof_symbolizer *s);
/* The process has exited or exec'd (its pid now runs another program):
 * names come from the maps as last read (and the mappings a sampler
 * noted) from now on; refresh fails, and nothing more is read from its
 * memory (-ESRCH). */
void prof_symbolizer__gone(struct prof_symbolizer *s);
/* Names addr. 0 when a symbol, PLT entry or FDE covers it, or (for
 * addresses no ELF symbol covers, such as JIT code in anonymous memory) a
 * line of the target's perf map file; -ENOENT with
 * sym filled as "module+0xoff" (bounds NONE) when only the module is known,
 * or "[unknown]" when no mapping holds addr. */
int prof_symbolizer__lookup(struct prof_symbolizer *s, uint64_t addr, struct prof_sym *sym);

/* The target's perf map file as last read. It is looked for when an
 * address has no ELF symbol, in the target's root as
 * /tmp/perf-<pid in its namespace>.map, else as /tmp/perf-PID.map, read
 * again when it has grown (at most once a second, and after a refresh), and
 * used only if it is a regular file, not a symlink, owned by the target's
 * user or root. */
struct prof_perfmap_stats {
	char path[128];		/* what was read; "" if nothing */
	uint64_t entries;	/* lines used */
	uint64_t malformed;	/* lines skipped */
	uint64_t dropped;	/* lines beyond the cap (1M entries, 64 MiB of names) */
	int err;		/* the last attempt: 0, -ENOENT (no file), -ELOOP (a
				 * symlink), -EPERM (wrong owner, not a regular file) */
};
void prof_symbolizer__perfmap_stats(const struct prof_symbolizer *s,
				    struct prof_perfmap_stats *st);
/* The code the perf map names name (the latest of its lines that still
 * owns its start), as the reports name it: [start, end); -ENOENT. */
int prof_symbolizer__perfmap_find(struct prof_symbolizer *s, const char *name, uint64_t *start,
				  uint64_t *end);

/* Reads len bytes of the target at addr (process_vm_readv; no ptrace).
 * Returns bytes read or -errno. */
ssize_t prof_symbolizer__read(struct prof_symbolizer *s, uint64_t addr, void *buf, size_t len);

/* ----------------------------------------------------------- stack walks */

/* A thread's stack, walked only as far as unwind information (.eh_frame)
 * says how, and signal frames. The tables are read from the process's own
 * memory (.eh_frame_hdr), or, for a module mapped without one (a plain
 * `gcc -static` executable), from its .eh_frame in the file it maps,
 * opened through /proc/PID/map_files (deleted files too), so the walk
 * never depends on a path still naming the same file. Nothing is guessed
 * (no frame-pointer chains): where the information ends before the
 * outermost frame, the walk says so, and where, so that a caller who must
 * know every return address (patching, freeing code) can look at the rest
 * of the stack conservatively. */
struct prof_unwinder;

enum prof_walk_end {
	PROF_WALK_COMPLETE,	/* the outermost frame, as its unwind
				 * information marks it */
	PROF_WALK_NO_INFO,	/* the last frame's pc has no unwind
				 * information (code without .eh_frame: JIT
				 * code, a code cache, hand-written assembly;
				 * a module whose tables cannot be read) */
	PROF_WALK_BAD_FRAME,	/* unwinding it failed (memory unreadable,
				 * information inconsistent) */
	PROF_WALK_TOO_DEEP,	/* more frames than room for them */
	PROF_WALK_NO_REGS,	/* the thread's registers could not be read */
};
/* "complete", "no_unwind_info", "bad_frame", "too_deep", "no_registers". */
const char *prof_walk_end_name(enum prof_walk_end e);

struct prof_walk_frame {
	uint64_t pc;		/* frame 0: the thread's pc; then the return
				 * address, or where a signal interrupted */
	uint64_t sp;
	uint64_t pc_at;		/* where pc was read from (0: a register) */
	bool interrupted;	/* pc is where a signal handler returns to
				 * (the frame below is its signal frame), not
				 * a return address */
};

struct prof_walk_stop {
	enum prof_walk_end why;
	size_t frame;		/* the last frame walked */
	uint64_t pc, sp;	/* its pc and sp: the stack above sp is
				 * unknown unless why is COMPLETE */
	char msg[256];		/* why, in words ("" when complete) */
};

/* For a seized target, which must outlive it. */
int prof_unwinder__new(struct attach_target *t, struct prof_unwinder **out,
		       struct prof_error *err);
void prof_unwinder__free(struct prof_unwinder *u);
/* With the world stopped, before walks: rereads the maps, and drops what
 * is known of code whose mappings changed. 0 or -errno. */
int prof_unwinder__sync(struct prof_unwinder *u);
/* Walks thread tid (stopped): up to max frames, innermost first. Returns
 * how many (0 when its registers cannot be read) and why it ended. */
size_t prof_unwinder__walk(struct prof_unwinder *u, pid_t tid, struct prof_walk_frame *frames,
			   size_t max, struct prof_walk_stop *stop);
/* Where the FDEs of the module holding addr start (its search table,
 * sorted): the functions of its code that have unwind information. Any
 * time after a sync. *starts is malloc'd. 0, -ENOENT (no module there) or
 * -errno (no tables). */
int prof_unwinder__fde_starts(struct prof_unwinder *u, uint64_t addr, uint64_t **starts,
			      size_t *count);

struct prof_frame {
	uint64_t pc;		/* return address for frames > 0 */
	uint64_t sp;
	struct prof_sym sym;	/* names pc (pc - 1 for a return address) */
};
/* Walks thread tid of an attached target (a prof_unwinder, the world
 * stopped for the time of the walk) and names each frame. Returns the
 * number of frames (at most max) or -errno; stop (if not NULL) says where
 * and why the walk ended. */
int prof_symbolizer__backtrace(struct prof_symbolizer *s, struct attach_target *t, pid_t tid,
			       struct prof_frame *frames, size_t max, struct prof_walk_stop *stop);

/* ------------------------------------------------------------- hot spots */

struct prof_func {
	const char *name;
	const char *module;
	const char *build_id;
	uint64_t start, end;	/* runtime; for CALLCHAIN bounds, end is the
				 * next known function or the mapping's end */
	uint64_t self;		/* samples whose IP is in the function */
	uint64_t inclusive;	/* samples with it anywhere in the chain,
				 * once per sample even if recursive */
	double self_pct, inclusive_pct;	/* of prof_hot totals.samples */
	enum prof_bounds bounds;
};

struct prof_hot;

/* Ranks the functions of a stopped sampler's samples (hottest self first,
 * then inclusive). Return addresses whose previous instruction is not a
 * call end a chain there (a frame-pointer walk through code built without
 * frame pointers yields such garbage). */
int prof_hot__build(const struct prof_sampler *smp, struct prof_symbolizer *sym,
		    struct prof_hot **out, struct prof_error *err);
void prof_hot__free(struct prof_hot *h);
/* A ranking made function by function (what prof_hot__build does for each
 * chain, for a caller that counted elsewhere): new with the totals the
 * percentages are of, add each function's counts (adding to one already
 * there when module and start match; the strings must outlive h), then
 * rank. 0 or -ENOMEM. */
int prof_hot__new(const struct prof_totals *t, struct prof_hot **out);
int prof_hot__add(struct prof_hot *h, const struct prof_sym *s, uint64_t self, uint64_t inclusive);
int prof_hot__rank(struct prof_hot *h);
size_t prof_hot__count(const struct prof_hot *h);
const struct prof_func *prof_hot__at(const struct prof_hot *h, size_t i);
const struct prof_totals *prof_hot__totals(const struct prof_hot *h);
/* Chains cut because a return address was not preceded by a call. */
uint64_t prof_hot__chains_cut(const struct prof_hot *h);

/* The sampler's chains as they were counted (what exporters such as pprof
 * and folded stacks write): each kept frame, leaf first, with the function
 * it was attributed to; a chain ends where the report cut it. */
struct prof_hot_frame {
	uint64_t addr;		/* as sampled: the IP, then return addresses */
	uint32_t func;		/* index for prof_hot__at */
};
size_t prof_hot__stack_count(const struct prof_hot *h);
/* 0 and the frames of chain i (valid until free), or -ENOENT. */
int prof_hot__stack(const struct prof_hot *h, size_t i, const struct prof_hot_frame **frames,
		    size_t *n, uint64_t *count);

#ifdef __cplusplus
}
#endif
#endif
