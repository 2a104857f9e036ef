/* profile-cost: where the cost of one cpu-clock sample goes, and its floor.
 *
 * 1. One VM exit: the time of a cpuid instruction, which always traps to
 *    the hypervisor. A cpu-clock sample is an hrtimer interrupt: one exit to
 *    deliver it and one when the guest re-arms the TSC-deadline timer (a
 *    wrmsr), so no timer-driven sampler costs less than about two exits.
 *
 * 2. Per-sample cost by setting. A child process spins reading the TSC and
 *    notes every gap in its own run ("hole"): the time an interrupt took
 *    from it. Each setting samples it for a window, alternating with
 *    unsampled windows; per setting: the work-rate ratio (iterations per
 *    CPU-second, sampled / unsampled) and the time lost per sample, from
 *    the holes (precise even on a shared machine: preemptions by other
 *    load are long holes, left out) and from the ratio (which also counts
 *    cache and TLB refills). The settings differ in one thing each: a
 *    counting event (no timer), a sampling event that records nothing and
 *    has no ring (the floor: timer interrupt plus perf's bookkeeping), IP
 *    only, padrone's fields, user-only and full call chains, a 120-deep
 *    frame-pointer stack with and without a depth limit, side-band
 *    records, task-clock, one event per thread instead of per thread and
 *    CPU, a wake-up of the reader per sample; then padrone's ring backend
 *    as shipped (and with its reader thread on the target's CPU or on
 *    another) and its bpf backend.
 *
 * 3. Context switches. A child whose two threads pass a token back and
 *    forth on one CPU: per-task events (the ring backend, perf record -p)
 *    stop and restart their hrtimer at every switch, which re-arms the
 *    TSC deadline (VM exits); per-CPU events (the bpf backend) do not.
 *
 * usage: profile-cost [ROUNDS [WINDOW_MS [HZ]]]   (HZ <= 10000; section 3
 * always samples at 999 Hz, padrone's default)
 */
#include "profile/profile.h"

#include <bpf/bpf.h>
#include <cpuid.h>
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#define MAXCPU 64
#define RING_PAGES 128
#define HOLE_MIN_NS 500		/* shorter gaps are the loop itself */
#define HOLE_MAX_NS 100000	/* longer ones: another task ran */
#define DEEP 120		/* frames of the deep-stack settings */

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ------------------------------------------------------- 1. a VM exit */

static void vm_exit_cost(void)
{
	static double t[2000];
	unsigned a, b, c, d;

	for (int i = 0; i < 2000; i++) {
		double t0 = mono();
		__cpuid(0, a, b, c, d);
		t[i] = mono() - t0;
	}
	__asm__ volatile("" : : "r"(a), "r"(b), "r"(c), "r"(d));
	qsort(t, 2000, sizeof(*t), cmp_double);
	printf("one VM exit (cpuid): min %.2f us, median %.2f us; a sampling interrupt "
	       "takes two (delivery, TSC-deadline re-arm)\n", t[0] * 1e6, t[1000] * 1e6);
}

/* ------------------------------------------------------- the children */

struct child_stats {
	uint64_t iters;
	uint64_t holes, hole_cyc;	/* interrupts: count and TSC cycles */
	int depth;			/* set by the parent: frames to spin under */
};

static struct child_stats *shared;	/* counters written by the child only */
static pid_t child;
static double tsc_per_ns;

static void calibrate_tsc(void)
{
	double t0 = mono();
	uint64_t c0 = __rdtsc();
	usleep(200000);
	tsc_per_ns = (double)(__rdtsc() - c0) / ((mono() - t0) * 1e9);
}

/* Spins until the parent asks for another depth. */
static void spin_leaf(void)
{
	uint64_t lo = (uint64_t)(HOLE_MIN_NS * tsc_per_ns), hi = (uint64_t)(HOLE_MAX_NS * tsc_per_ns);
	uint64_t prev = __rdtsc(), iters = shared->iters, holes = shared->holes;
	uint64_t cyc = shared->hole_cyc;
	int depth = shared->depth;

	while (__atomic_load_n(&shared->depth, __ATOMIC_RELAXED) == depth) {
		for (int i = 0; i < 4096; i++) {
			uint64_t t = __rdtsc(), d = t - prev;
			prev = t;
			if (__builtin_expect(d > lo, 0) && d < hi) {
				holes++;
				cyc += d;
			}
		}
		iters += 4096;
		__atomic_store_n(&shared->holes, holes, __ATOMIC_RELAXED);
		__atomic_store_n(&shared->hole_cyc, cyc, __ATOMIC_RELAXED);
		__atomic_store_n(&shared->iters, iters, __ATOMIC_RELEASE);
	}
}

/* Calls itself n deep (with frame pointers: built -fno-omit-frame-pointer,
 * so the kernel's frame walk follows every frame), then spins. */
__attribute__((noinline)) static int spin_at(int n)
{
	int r = n ? spin_at(n - 1) + 1 : (spin_leaf(), 0);
	__asm__ volatile("" : "+r"(r));	/* no tail call */
	return r;
}

static void spin_main(void)
{
	for (;;)
		spin_at(__atomic_load_n(&shared->depth, __ATOMIC_RELAXED));
}

static int pp_to[2], pp_back[2];

static void *pp_peer(void *arg)
{
	char c;

	while (read(pp_to[0], &c, 1) == 1)
		if (write(pp_back[1], &c, 1) != 1)
			break;
	return arg;
}

/* Two threads on one CPU passing a byte: two context switches a round. */
static void pingpong_main(void)
{
	cpu_set_t set;
	pthread_t t;
	char c = 'x';

	CPU_ZERO(&set);
	CPU_SET(sched_getcpu(), &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0 || pipe(pp_to) < 0 || pipe(pp_back) < 0 ||
	    pthread_create(&t, NULL, pp_peer, NULL))
		_exit(1);
	for (;;) {
		if (write(pp_to[1], &c, 1) != 1 || read(pp_back[0], &c, 1) != 1)
			_exit(1);
		__atomic_store_n(&shared->iters, shared->iters + 1, __ATOMIC_RELEASE);
	}
}

static void start_child(void (*fn)(void))
{
	memset(shared, 0, sizeof(*shared));
	child = fork();
	if (child < 0) {
		perror("profile-cost: fork");
		exit(1);
	}
	if (child == 0) {
		fn();
		_exit(0);
	}
	/* keeps it on its CPU on a shared machine, where permitted */
	setpriority(PRIO_PROCESS, (id_t)child, -15);
}

static void stop_child(void)
{
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

/* CPU time of all the child's threads (schedstat: ns on CPU, interrupts
 * included, as this kernel has no IRQ time accounting). */
static double child_cpu(void)
{
	char path[320];
	unsigned long long ns, sum = 0;
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "/proc/%d/task", child);
	d = opendir(path);
	if (!d) {
		fprintf(stderr, "profile-cost: cannot open %s\n", path);
		exit(1);
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", child, de->d_name);
		FILE *f = fopen(path, "re");
		if (f && fscanf(f, "%llu", &ns) == 1)
			sum += ns;
		if (f)
			fclose(f);
	}
	closedir(d);
	return (double)sum * 1e-9;
}

struct win {
	double rate;		/* iterations per CPU-second */
	double stolen;		/* hole seconds per CPU-second */
};

static struct win window(int ms)
{
	uint64_t i0 = __atomic_load_n(&shared->iters, __ATOMIC_ACQUIRE);
	uint64_t h0 = __atomic_load_n(&shared->hole_cyc, __ATOMIC_RELAXED);
	double c0 = child_cpu();

	usleep((useconds_t)ms * 1000);
	uint64_t i1 = __atomic_load_n(&shared->iters, __ATOMIC_ACQUIRE);
	uint64_t h1 = __atomic_load_n(&shared->hole_cyc, __ATOMIC_RELAXED);
	double cpu = child_cpu() - c0;
	return (struct win){ (double)(i1 - i0) / cpu, (double)(h1 - h0) / tsc_per_ns * 1e-9 / cpu };
}

/* ------------------------------------------------------- settings */

enum kind { K_RAW, K_RING, K_BPF };
enum chain { CH_NONE, CH_USER, CH_FULL };

struct variant {
	const char *name;
	enum kind kind;
	int depth;		/* frames the spinner runs under */
	bool task_clock;
	bool counting;		/* no sampling at all */
	uint64_t sample_type;
	enum chain chain;
	uint16_t max_stack;	/* 0 = the kernel's default (127) */
	bool mmap;
	bool per_thread;	/* cpu = -1, no inherit: one event */
	bool wake_each;		/* wakeup_events = 1 instead of a watermark */
	bool sideband;		/* comm/task/mmap records, as padrone asks */
	int reader;		/* padrone: 1 = its reader thread on the target's
				 * CPU, 2 = on another one, 0 = where it runs */

	double ratio[32], hole_us[32], ratio_us[32];
	int n;
	uint64_t samples;
	double cpu_s;
	uint64_t bpf_runs, bpf_ns;	/* the bpf backend's program */
};

static unsigned hz = 4000;

struct raw {
	int fds[MAXCPU];
	int nfd;
	int ring_fds[MAXCPU];	/* the events owning a ring */
	int ring_cpu[MAXCPU];
	void *rings[MAXCPU];
	int nring;
	uint64_t samples;
	pthread_t reader;
	volatile bool stop;
};

static void drain(struct raw *w, void *base)
{
	struct perf_event_mmap_page *m = base;
	const uint8_t *data = (const uint8_t *)base + 4096;
	uint64_t size = RING_PAGES * 4096ull;
	uint64_t head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE), tail = m->data_tail;

	while (tail < head) {
		struct perf_event_header h;
		/* headers are 8-byte aligned, so never split by the wrap */
		memcpy(&h, data + (tail & (size - 1)), sizeof(h));
		if (h.size == 0)
			break;
		w->samples += h.type == PERF_RECORD_SAMPLE;
		tail += h.size;
	}
	__atomic_store_n(&m->data_tail, head, __ATOMIC_RELEASE);
}

/* As padrone's reader: poll with a timeout, drain every ring. */
static void *reader_main(void *arg)
{
	struct raw *w = arg;
	struct pollfd pf[MAXCPU];

	for (int i = 0; i < w->nring; i++)
		pf[i] = (struct pollfd){ .fd = w->ring_fds[i], .events = POLLIN };
	while (!w->stop) {
		poll(pf, (nfds_t)w->nring, 100);
		for (int i = 0; i < w->nring; i++)
			drain(w, w->rings[i]);
	}
	return NULL;
}

static void raw_event(const struct variant *v, struct raw *w, struct perf_event_attr *a, pid_t tid,
		      int cpu)
{
	int fd = (int)syscall(SYS_perf_event_open, a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0 && errno == ENODEV)
		return;	/* offline CPU */
	if (fd < 0 || w->nfd == MAXCPU) {
		fprintf(stderr, "profile-cost: %s: perf_event_open: %s\n", v->name,
			fd < 0 ? strerror(errno) : "too many events");
		exit(1);
	}
	w->fds[w->nfd++] = fd;
	if (!v->mmap)
		return;
	/* one ring per CPU (or per event when not per CPU), as padrone */
	for (int i = 0; i < w->nring && !v->per_thread; i++)
		if (w->ring_cpu[i] == cpu) {
			ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, w->ring_fds[i]);
			return;
		}
	void *base = mmap(NULL, (1 + RING_PAGES) * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		fprintf(stderr, "profile-cost: mmap: %s\n", strerror(errno));
		exit(1);
	}
	w->ring_fds[w->nring] = fd;
	w->ring_cpu[w->nring] = cpu;
	w->rings[w->nring++] = base;
}

/* Opens v's events on every thread of the child. */
static void raw_open(const struct variant *v, struct raw *w)
{
	struct perf_event_attr a = { .size = sizeof(a) };
	int ncpu = (int)sysconf(_SC_NPROCESSORS_CONF);
	int first = v->per_thread ? -1 : 0, last = v->per_thread ? 0 : ncpu;
	char path[64];
	pid_t tids[8];
	int ntid = 0;
	DIR *d;
	struct dirent *de;

	memset(w, 0, sizeof(*w));
	snprintf(path, sizeof(path), "/proc/%d/task", child);
	d = opendir(path);
	while (d && (de = readdir(d)) && ntid < 8)
		if (de->d_name[0] != '.')
			tids[ntid++] = atoi(de->d_name);
	if (d)
		closedir(d);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = v->task_clock ? PERF_COUNT_SW_TASK_CLOCK : PERF_COUNT_SW_CPU_CLOCK;
	if (!v->counting) {
		a.freq = 1;
		a.sample_freq = hz;
		a.sample_type = v->sample_type | (v->chain ? PERF_SAMPLE_CALLCHAIN : 0);
		a.exclude_callchain_kernel = v->chain == CH_USER;
		a.sample_max_stack = v->max_stack;
	}
	a.disabled = 1;
	a.exclude_hv = 1;
	a.inherit = !v->per_thread;
	if (v->sideband) {
		a.sample_id_all = 1;
		a.comm = a.task = a.mmap = a.mmap2 = 1;
		a.use_clockid = 1;
		a.clockid = CLOCK_MONOTONIC;
	}
	if (v->wake_each) {
		a.wakeup_events = 1;
	} else {
		a.watermark = 1;
		a.wakeup_watermark = RING_PAGES * 4096 / 4;
	}
	if (last > MAXCPU)
		last = MAXCPU;
	for (int t = 0; t < ntid; t++)
		for (int c = first; c < last; c++)
			raw_event(v, w, &a, tids[t], c);
	if (w->nring && pthread_create(&w->reader, NULL, reader_main, w)) {
		fprintf(stderr, "profile-cost: cannot start a reader thread\n");
		exit(1);
	}
	for (int i = 0; i < w->nfd; i++)
		ioctl(w->fds[i], PERF_EVENT_IOC_ENABLE, 0);
}

/* Closes; returns the samples taken, and in *cpu the child's CPU time when
 * sampling stopped. */
static uint64_t raw_close(const struct variant *v, struct raw *w, double *cpu)
{
	uint64_t period = 1000000000ull / hz, counted = 0;

	for (int i = 0; i < w->nfd; i++)
		ioctl(w->fds[i], PERF_EVENT_IOC_DISABLE, 0);
	*cpu = child_cpu();
	if (w->nring) {
		w->stop = true;
		pthread_join(w->reader, NULL);
		for (int i = 0; i < w->nring; i++) {
			drain(w, w->rings[i]);
			munmap(w->rings[i], (1 + RING_PAGES) * 4096);
		}
	}
	for (int i = 0; i < w->nfd; i++) {
		uint64_t ns = 0;
		if (read(w->fds[i], &ns, sizeof(ns)) == sizeof(ns))
			counted += ns;
		close(w->fds[i]);
	}
	/* without a ring, the timer fired once per period of the count */
	return v->counting ? 0 : w->nring ? w->samples : counted / period;
}

/* Pins the child to CPU 0 and this thread (so the reader thread it
 * starts) to CPU 0 or 1; how = 0 lets both run anywhere again. */
static void place(int how)
{
	cpu_set_t mine, target;
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);

	CPU_ZERO(&mine);
	CPU_ZERO(&target);
	if (how) {
		CPU_SET(0, &target);
		CPU_SET(how == 1 ? 0 : 1, &mine);
	} else {
		for (int c = 0; c < ncpu && c < CPU_SETSIZE; c++) {
			CPU_SET(c, &mine);
			CPU_SET(c, &target);
		}
	}
	sched_setaffinity(child, sizeof(target), &target);
	pthread_setaffinity_np(pthread_self(), sizeof(mine), &mine);
}

/* The highest BPF program id now: programs loaded later have higher ids. */
static uint32_t last_prog_id(void)
{
	uint32_t id = 0, next;

	while (bpf_prog_get_next_id(id, &next) == 0)
		id = next;
	return id;
}

/* Adds the run count and run time of the programs named prof_sample
 * loaded after id `after` (the bpf backend's) to v. */
static void bpf_prog_time(struct variant *v, uint32_t after)
{
	uint32_t id = after;

	while (bpf_prog_get_next_id(id, &id) == 0) {
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(id);
		memset(&info, 0, sizeof(info));
		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		    !strcmp(info.name, "prof_sample")) {
			v->bpf_runs += info.run_cnt;
			v->bpf_ns += info.run_time_ns;
		}
		if (fd >= 0)
			close(fd);
	}
}

/* One window sampled with v (NULL: not sampled). */
static struct win measure(struct variant *v, int ms)
{
	struct prof_sampler *s = NULL;
	struct prof_error err;
	struct raw w;
	struct win r;
	double c0, c1;
	uint32_t prog_id = 0;
	int stats = -1;

	if (!v)
		return window(ms);
	if (v->kind == K_RAW) {
		c0 = child_cpu();
		raw_open(v, &w);
	} else {
		struct prof_opts o = { .sz = sizeof(o), .freq_hz = hz,
				       .backend = v->kind == K_BPF ? PROF_BACKEND_BPF : PROF_BACKEND_RING };
		if (v->kind == K_BPF) {
			/* the kernel times BPF programs while this fd is open */
			stats = bpf_enable_stats(BPF_STATS_RUN_TIME);
			prog_id = last_prog_id();
		}
		if (prof_sampler__open(child, &o, &s, &err) < 0) {
			fprintf(stderr, "profile-cost: %s\n", err.msg);
			exit(1);
		}
		c0 = child_cpu();	/* samples are taken from start to stop */
		if (v->reader)
			place(v->reader);
		if (prof_sampler__start(s) < 0) {
			fprintf(stderr, "profile-cost: %s\n", prof_sampler__errmsg(s));
			exit(1);
		}
	}
	usleep(20000);	/* set-up is not the cost of a sample */
	r = window(ms);
	if (v->kind == K_RAW) {
		v->samples += raw_close(v, &w, &c1);
	} else {
		struct prof_totals t;
		prof_sampler__stop(s);
		c1 = child_cpu();
		if (stats >= 0) {
			bpf_prog_time(v, prog_id);
			close(stats);
		}
		if (v->reader)
			place(0);
		prof_sampler__totals(s, &t);
		if (t.fell_back) {
			fprintf(stderr, "profile-cost: bpf fell back: %s\n", t.fallback_reason);
			exit(1);
		}
		v->samples += t.samples;
		prof_sampler__free(s);
	}
	v->cpu_s += c1 - c0;
	return r;
}

/* Each setting in turn, each window between unsampled ones. */
static void run_rounds(struct variant *vs, size_t nv, int rounds, int ms)
{
	struct win base = window(ms);

	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < nv; i++) {
			struct variant *v = &vs[i];
			uint64_t s0 = v->samples;
			double c0 = v->cpu_s;

			if (v->depth != shared->depth) {
				__atomic_store_n(&shared->depth, v->depth, __ATOMIC_RELAXED);
				base = window(ms);	/* at the new depth */
			}
			struct win during = measure(v, ms);
			struct win after = window(ms);
			double rate0 = (base.rate + after.rate) / 2;
			double stolen0 = (base.stolen + after.stolen) / 2;
			double per_s = (double)(v->samples - s0) / (v->cpu_s - c0);

			v->ratio[v->n] = during.rate / rate0;
			v->hole_us[v->n] = per_s > 0 ? (during.stolen - stolen0) / per_s * 1e6 : 0;
			v->ratio_us[v->n] = per_s > 0 ? (1 - during.rate / rate0) / per_s * 1e6 : 0;
			v->n++;
			base = after;
		}
	}
}

static void per_sample_costs(int rounds, int ms)
{
	const uint64_t IP = PERF_SAMPLE_IP;
	const uint64_t PAD = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
			     PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD;
	struct variant vs[] = {
		{ .name = "counting event, no timer", .counting = true },
		{ .name = "records nothing, no ring (floor)" },
		{ .name = "IP only", .sample_type = IP, .mmap = true },
		{ .name = "padrone's fields, no chain", .sample_type = PAD, .mmap = true },
		{ .name = "  + user chain", .sample_type = PAD, .chain = CH_USER, .mmap = true },
		{ .name = "  + full chain", .sample_type = PAD, .chain = CH_FULL, .mmap = true },
		{ .name = "  + full chain + side-band", .sample_type = PAD, .chain = CH_FULL,
		  .mmap = true, .sideband = true },
		{ .name = "  same on task-clock", .sample_type = PAD, .chain = CH_FULL, .mmap = true,
		  .sideband = true, .task_clock = true },
		{ .name = "  same, one event, not per CPU", .sample_type = PAD, .chain = CH_FULL,
		  .mmap = true, .sideband = true, .per_thread = true },
		{ .name = "  same, a wake-up per sample", .sample_type = PAD, .chain = CH_FULL,
		  .mmap = true, .sideband = true, .wake_each = true },
		{ .name = "padrone ring", .kind = K_RING },
		{ .name = "  reader on the target's CPU", .kind = K_RING, .reader = 1 },
		{ .name = "  reader on another CPU", .kind = K_RING, .reader = 2 },
		{ .name = "padrone bpf", .kind = K_BPF },
		{ .name = "120 frames deep: full chain", .depth = DEEP, .sample_type = PAD,
		  .chain = CH_FULL, .mmap = true },
		{ .name = "  same, max stack 32", .depth = DEEP, .sample_type = PAD,
		  .chain = CH_FULL, .mmap = true, .max_stack = 32 },
		{ .name = "  padrone ring", .depth = DEEP, .kind = K_RING },
	};
	size_t nv = sizeof(vs) / sizeof(*vs);

	start_child(spin_main);
	window(300);	/* warm up */
	run_rounds(vs, nv, rounds, ms);
	stop_child();

	printf("cost of one cpu-clock sample at %u Hz, by setting: a spinning target, median of %d "
	       "rounds of %d ms windows, each between unsampled ones\n", hz, rounds, ms);
	printf("  lost: the target's time lost per sample, from gaps in its run (interrupts; "
	       "preemptions left out); by ratio: (1 - ratio) / samples per CPU-second\n");
	for (size_t i = 0; i < nv; i++) {
		struct variant *v = &vs[i];
		double per_s = v->cpu_s > 0 ? (double)v->samples / v->cpu_s : 0;
		printf("  %-34s ratio %.4f", v->name, median(v->ratio, v->n));
		if (per_s > 0)
			printf("  %5.0f samples/CPU-s, lost %5.1f us, by ratio %5.1f us", per_s,
			       median(v->hole_us, v->n), median(v->ratio_us, v->n));
		if (v->bpf_runs)
			printf("; its program %.2f us a run (on any CPU, any process)",
			       (double)v->bpf_ns / v->bpf_runs * 1e-3);
		printf("\n");
	}
}

/* ------------------------------------------------------- 3. switches */

static void switch_costs(int rounds, int ms)
{
	struct variant vs[] = {
		{ .name = "counting events, no timer", .counting = true },
		{ .name = "sampling, records nothing" },
		{ .name = "  same, one event a thread", .per_thread = true },
		{ .name = "padrone ring (per-task events)", .kind = K_RING },
		{ .name = "padrone bpf (per-CPU events)", .kind = K_BPF },
	};
	size_t nv = sizeof(vs) / sizeof(*vs);
	unsigned saved = hz;
	double round_us[sizeof(vs) / sizeof(*vs)][32];

	hz = PROF_DEFAULT_FREQ_HZ;
	start_child(pingpong_main);
	window(300);
	struct win base = window(ms);
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < nv; i++) {
			struct win during = measure(&vs[i], ms);
			struct win after = window(ms);
			double rate0 = (base.rate + after.rate) / 2;
			vs[i].ratio[vs[i].n] = during.rate / rate0;
			/* two switches a round */
			round_us[i][vs[i].n++] = (1 / during.rate - 1 / rate0) / 2 * 1e6;
			base = after;
		}
	}
	stop_child();
	hz = saved;

	printf("context switches at %u Hz: two threads passing a byte on one CPU, %.1f us of CPU "
	       "a switch unsampled\n", PROF_DEFAULT_FREQ_HZ, 1e6 / base.rate / 2);
	for (size_t i = 0; i < nv; i++)
		printf("  %-34s ratio %.4f, %+5.1f us per switch\n", vs[i].name,
		       median(vs[i].ratio, vs[i].n), median(round_us[i], vs[i].n));
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5, ms = argc > 2 ? atoi(argv[2]) : 600;

	if (argc > 3)
		hz = (unsigned)atoi(argv[3]);
	if (rounds < 1 || rounds > 32 || ms < 100 || hz < 1 || hz > PROF_MAX_SOFT_FREQ_HZ) {
		fprintf(stderr, "usage: profile-cost [ROUNDS(1-32) [WINDOW_MS(>=100) [HZ(<=%u)]]]\n",
			PROF_MAX_SOFT_FREQ_HZ);
		return 2;
	}
	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	if (shared == MAP_FAILED)
		return 1;
	calibrate_tsc();
	vm_exit_cost();
	per_sample_costs(rounds, ms);
	switch_costs(rounds, ms);
	return 0;
}
