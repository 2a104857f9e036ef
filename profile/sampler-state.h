/* sampler-state.h: the sampler's state, shared by its three files (private
 * to them): sampler.c (the sampler's life: open, start, the reader thread
 * and its records, stop, free), sampler-events.c (perf_event setup: the
 * attributes, per-CPU and per-thread events, their rings) and
 * sampler-threads.c (thread discovery: /proc/PID/task scans, new threads on
 * probation). */
#ifndef PADRONE_PROFILE_SAMPLER_STATE_H
#define PADRONE_PROFILE_SAMPLER_STATE_H

#include "profile/internal.h"

#include <pthread.h>

#include "util/util.h"

#define CHAIN_MAX 256


struct ev {
	int fd;
	int cpu;
	pid_t tid;		/* the thread it was opened on */
	uint64_t id;
};


struct thr {
	pid_t tid;
	uint64_t samples;
	bool new_thread;
	bool direct;		/* we opened events on it */
	bool inherited;		/* a FORK record or an inherited sample showed
				 * it carries an inherited event */
	bool probation;		/* direct events opened after the first scan */
	bool dropped;		/* probation ended in a double cover */
	bool exited;
	uint64_t prob_samples;
	struct prof_stacks *prob;
};


struct cpu_ring {
	int fd;			/* the event owning the ring, -1 if none */
	void *base;
	size_t maplen;
	struct prof_ring ring;
	bool hup;
};


struct prof_sampler {
	pid_t pid;
	struct prof_opts opts;
	char errmsg[512];
	struct perf_event_attr attr;
	bool pmu;
	char event[32];

	int ncpu;
	struct cpu_ring *cpus;
	struct ev *evs;
	size_t nev, evcap;
	struct util_hmap ev_by_id;	/* event id -> index in evs */
	struct thr *thrs;
	size_t nthr, thrcap;
	struct util_hmap thr_by_tid;	/* tid -> index in thrs */

	struct prof_stacks stacks;
	uint64_t chain[CHAIN_MAX];

	pthread_mutex_t lock;	/* reader thread vs. API calls */
	pthread_t reader;
	bool reader_on;
	int stop_pipe[2];
	bool running;
	bool stop_req;		/* set by stop, read by the reader */
	uint64_t start_ns, last_scan_ns;
	bool per_cpu;		/* ring mode PER_CPU: no threads to follow */
	uint64_t exec_ns;	/* when the target exec'd (sample clock); 0: not */
	struct prof_totals tot;
	struct prof_bpf *bpf;
	struct prof_mmap *mmaps;
	size_t nmmaps, mmapcap;
};

/* sampler.c */
void sampler__seterrmsg(struct prof_sampler *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Reads every ring (the reader thread, and stop). */
void sampler__drain_all(struct prof_sampler *s);

/* sampler-events.c */
/* CAP_PERFMON or CAP_SYS_ADMIN, or a paranoid level that lets us. */
bool sampler__may_sample_kernel(void);
bool sampler__have_pmu(void);
/* Opens one event per CPU on tid. -ESRCH when the thread is gone. */
int sampler__open_thread(struct prof_sampler *s, pid_t tid, bool enabled);
void sampler__close_thread_events(struct prof_sampler *s, pid_t tid);
/* The ring backend's events: per CPU, else per thread (and why). */
int sampler__open_ring_backend(struct prof_sampler *s, struct prof_error *err);
void sampler__enable_all(struct prof_sampler *s, bool on);

/* sampler-threads.c */
/* The thread's record, made when create and not known yet. */
struct thr *sampler__thr_get(struct prof_sampler *s, pid_t tid, bool create);
/* Scans /proc/PID/task until a scan finds no thread without events;
 * first: the very first scan. Returns how many got events, or -errno. */
int sampler__scan_until_stable(struct prof_sampler *s, bool first, bool enabled);
/* Records the threads present now, so the bpf backend can tell new ones. */
void sampler__note_initial_threads(struct prof_sampler *s);
/* Samples of threads whose probation ended without a double cover join
 * the rest. */
void sampler__settle_probation(struct prof_sampler *s);

#endif
