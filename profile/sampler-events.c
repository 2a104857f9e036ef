/* sampler-events.c: the sampler's perf_events: what each samples
 * (setup_attr), one per CPU for every task or one per thread and CPU, and
 * the rings they write into; and whether this machine has a PMU and lets us
 * sample the kernel. */
#include "profile/sampler-state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>


static long perf_event_open(struct perf_event_attr *a, pid_t pid, int cpu, int group,
			    unsigned long flags)
{
	return syscall(SYS_perf_event_open, a, pid, cpu, group, flags);
}

/* ------------------------------------------------------------ environment */

static int read_int_file(const char *path, int *v)
{
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%d", v) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

/* CAP_PERFMON or CAP_SYS_ADMIN in the effective set. */
bool sampler__may_sample_kernel(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	int paranoid = 2;

	read_int_file("/proc/sys/kernel/perf_event_paranoid", &paranoid);
	if (paranoid <= 1)
		return true;
	if (syscall(SYS_capget, &h, d) < 0)
		return geteuid() == 0;
	bool admin = d[0].effective & (1u << CAP_SYS_ADMIN);
	bool perfmon = d[1].effective & (1u << (38 - 32));	/* CAP_PERFMON */
	return admin || perfmon;
}

bool sampler__have_pmu(void)
{
	struct perf_event_attr a = {
		.size = sizeof(a), .type = PERF_TYPE_HARDWARE, .config = PERF_COUNT_HW_CPU_CYCLES,
		.disabled = 1, .exclude_kernel = 1, .exclude_hv = 1,
	};
	int fd = (int)perf_event_open(&a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* ------------------------------------------------------------ events */

static int ev_add(struct prof_sampler *s, int fd, int cpu, pid_t tid)
{
	uint64_t id;

	if (ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0)
		return -errno;
	if (s->nev == s->evcap) {
		size_t nc = s->evcap ? s->evcap * 2 : 64;
		void *p = realloc(s->evs, nc * sizeof(*s->evs));
		if (!p)
			return -ENOMEM;
		s->evs = p;
		s->evcap = nc;
	}
	if (util_hmap__put(&s->ev_by_id, id, (uint32_t)s->nev) < 0)
		return -ENOMEM;
	s->evs[s->nev++] = (struct ev){ .fd = fd, .cpu = cpu, .tid = tid, .id = id };
	return 0;
}

static int map_ring(struct prof_sampler *s, struct cpu_ring *c, int fd)
{
	unsigned pages = s->opts.ring_pages;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (1 + (size_t)pages) * pg;
	void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (base == MAP_FAILED) {
		int e = -errno;
		sampler__seterrmsg(s, "cannot map a %u-page perf ring: %s%s", pages, strerror(-e),
			  e == -EPERM ? " (perf_event_mlock_kb exhausted?)" : "");
		return e;
	}
	int r = prof_ring__init(&c->ring, base, (uint64_t)pages * pg);
	if (r < 0) {
		munmap(base, len);
		sampler__seterrmsg(s, "cannot set up a perf ring: %s", strerror(-r));
		return r;
	}
	c->fd = fd;
	c->base = base;
	c->maplen = len;
	return 0;
}

/* Raise the soft fd limit to the hard one, once, when we run out. */
static bool raise_nofile(void)
{
	static bool done;
	struct rlimit rl;

	if (done || getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return false;
	done = true;
	rl.rlim_cur = rl.rlim_max;
	return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

static const char *perm_hint(void)
{
	return "need CAP_PERFMON, or the same uid and perf_event_paranoid <= 2";
}

/* Opens one event per CPU on tid. -ESRCH when the thread is gone. */
int sampler__open_thread(struct prof_sampler *s, pid_t tid, bool enabled)
{
	struct perf_event_attr a = s->attr;
	int opened = 0;

	a.disabled = !enabled;
	for (int cpu = 0; cpu < s->ncpu; cpu++) {
		int fd = (int)perf_event_open(&a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0 && errno == EMFILE && raise_nofile())
			fd = (int)perf_event_open(&a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			int e = -errno;
			if (e == -ENODEV || (e == -EINVAL && opened))
				continue;	/* an offline CPU */
			if (e == -ESRCH)
				return e;
			if (e == -EACCES || e == -EPERM)
				sampler__seterrmsg(s, "perf_event_open on thread %d: %s (%s)", tid,
					  strerror(-e), perm_hint());
			else if (e == -EINVAL && s->attr.sample_freq > 1000)
				sampler__seterrmsg(s, "perf_event_open on thread %d at %llu Hz: %s "
					  "(above /proc/sys/kernel/perf_event_max_sample_rate?)",
					  tid, (unsigned long long)s->attr.sample_freq, strerror(-e));
			else
				sampler__seterrmsg(s, "perf_event_open on thread %d: %s", tid, strerror(-e));
			return e;
		}
		struct cpu_ring *c = &s->cpus[cpu];
		int r;
		if (c->fd < 0)
			r = map_ring(s, c, fd);
		else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, c->fd) < 0)
			r = -errno, sampler__seterrmsg(s, "PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));
		else
			r = 0;
		if (r == 0)
			r = ev_add(s, fd, cpu, tid);
		if (r < 0) {
			if (c->fd != fd)
				close(fd);
			return r;
		}
		opened++;
	}
	return 0;
}

/* Closes the direct events of a thread (not the rings' owners, which stay
 * mapped until free). */
void sampler__close_thread_events(struct prof_sampler *s, pid_t tid)
{
	for (size_t i = 0; i < s->nev; i++) {
		struct ev *e = &s->evs[i];
		if (e->tid != tid || e->fd < 0)
			continue;
		ioctl(e->fd, PERF_EVENT_IOC_DISABLE, 0);
		if (s->cpus[e->cpu].fd != e->fd)
			close(e->fd);
		e->fd = -1;
	}
}

/* What each setting costs the target was measured side by side
 * (bench/profile-cost; figures for a nested VM, per sample of ~17 us that
 * the timer interrupt alone costs): IP/TID/TIME/PERIOD/IDENTIFIER and the
 * side-band records cost nothing measurable; the call chain ~0.5-1 us, ~50
 * ns a frame (a 120-deep stack ~6 us, which sample_max_stack 32 would save,
 * but the inclusive counts of outer functions need the whole chain, so the
 * kernel's limit of 127 frames stays, as in perf); task-clock costs as much
 * as cpu-clock (both hrtimers that run only while the thread does); one
 * event per thread costs as much as one per thread and CPU (only the
 * running CPU's event is scheduled in); a wake-up per sample doubles the
 * cost, hence the watermark. */
static void setup_attr(struct prof_sampler *s)
{
	struct perf_event_attr *a = &s->attr;

	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	if (s->pmu) {
		a->type = PERF_TYPE_HARDWARE;
		a->config = PERF_COUNT_HW_CPU_CYCLES;
		snprintf(s->event, sizeof(s->event), "cycles");
	} else {
		a->type = PERF_TYPE_SOFTWARE;
		a->config = PERF_COUNT_SW_CPU_CLOCK;
		snprintf(s->event, sizeof(s->event), "cpu-clock");
	}
	a->freq = 1;
	a->sample_freq = s->opts.freq_hz;
	a->sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
			 PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;
	a->sample_id_all = 1;
	a->inherit = 1;
	a->disabled = 1;
	a->exclude_hv = 1;
	a->exclude_kernel = s->opts.user_only;
	a->exclude_callchain_kernel = s->opts.user_only;
	a->comm = 1;
	a->comm_exec = 1;	/* mark exec's COMM record: later samples are not ours */
	a->task = 1;
	a->mmap = 1;
	a->mmap2 = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	/* wake the reader when a quarter of the ring is used, not per sample:
	 * fewer wake-ups, less disturbance of the target */
	a->watermark = 1;
	a->wakeup_watermark = (uint32_t)((size_t)s->opts.ring_pages * 4096 / 4);
}

/* One event per CPU for every task, each CPU's with its ring. */
static int open_per_cpu(struct prof_sampler *s)
{
	struct perf_event_attr a = s->attr;
	int opened = 0;

	a.inherit = 0;	/* nothing to inherit: it follows the CPU */
	for (int cpu = 0; cpu < s->ncpu; cpu++) {
		int fd = (int)perf_event_open(&a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0 && errno == EMFILE && raise_nofile())
			fd = (int)perf_event_open(&a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0 && (errno == ENODEV || (errno == EINVAL && opened)))
			continue;	/* an offline CPU */
		if (fd < 0) {
			int e = -errno;
			sampler__seterrmsg(s, "perf_event_open on CPU %d: %s", cpu, strerror(-e));
			return e;
		}
		int r = map_ring(s, &s->cpus[cpu], fd);
		if (r == 0)
			r = ev_add(s, fd, cpu, -1);
		if (r < 0) {
			if (s->cpus[cpu].fd != fd)
				close(fd);
			return r;
		}
		opened++;
	}
	return opened ? 0 : -ENODEV;
}

/* Closes every event and ring (a per-CPU attempt that failed halfway). */
static void close_rings(struct prof_sampler *s)
{
	for (size_t i = 0; i < s->nev; i++)
		if (s->evs[i].fd >= 0 && s->cpus[s->evs[i].cpu].fd != s->evs[i].fd)
			close(s->evs[i].fd);
	s->nev = 0;
	util_hmap__fini(&s->ev_by_id);
	for (int c = 0; c < s->ncpu; c++) {
		if (s->cpus[c].fd < 0)
			continue;
		prof_ring__fini(&s->cpus[c].ring);
		munmap(s->cpus[c].base, s->cpus[c].maplen);
		close(s->cpus[c].fd);
		s->cpus[c].fd = -1;
	}
}

/* Per CPU unless told otherwise or not permitted: 0, or -errno when the
 * mode asked for cannot run. */
static int open_per_cpu_or_say_why(struct prof_sampler *s, struct prof_error *err)
{
	int r = open_per_cpu(s);

	if (r == 0) {
		s->per_cpu = true;
		s->tot.ring_mode = PROF_RING_PER_CPU;
		sampler__note_initial_threads(s);
		return 0;
	}
	close_rings(s);
	if (s->opts.ring_mode == PROF_RING_PER_CPU) {
		prof__seterr(err, r, "%s (per-CPU events %s)", s->errmsg,
			    r == -EACCES || r == -EPERM ?
			    "need CAP_PERFMON or perf_event_paranoid <= 0" : "cannot be opened");
		return r;
	}
	snprintf(s->tot.ring_mode_reason, sizeof(s->tot.ring_mode_reason),
		 "%.500s%s", s->errmsg, r == -EACCES || r == -EPERM ?
		 " (per-CPU events need CAP_PERFMON or perf_event_paranoid <= 0)" : "");
	s->errmsg[0] = '\0';
	return 0;
}

int sampler__open_ring_backend(struct prof_sampler *s, struct prof_error *err)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);

	s->ncpu = ncpu > 0 ? (int)ncpu : 1;
	s->cpus = calloc((size_t)s->ncpu, sizeof(*s->cpus));
	if (!s->cpus) {
		prof__seterr(err, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	for (int c = 0; c < s->ncpu; c++)
		s->cpus[c].fd = -1;
	setup_attr(s);
	if (s->opts.ring_mode != PROF_RING_PER_THREAD) {
		int r = open_per_cpu_or_say_why(s, err);
		if (r < 0 || s->per_cpu)
			return r;
	}
	s->tot.ring_mode = PROF_RING_PER_THREAD;
	int r = sampler__scan_until_stable(s, true, false);
	if (r < 0) {
		if (r == -ESRCH && !s->errmsg[0])
			sampler__seterrmsg(s, "no such process: %d", s->pid);
		prof__seterr(err, r, "%s", s->errmsg[0] ? s->errmsg : strerror(-r));
		return r;
	}
	if (s->nev == 0) {
		prof__seterr(err, -ESRCH, "process %d has no threads left to sample", s->pid);
		return -ESRCH;
	}
	return 0;
}

void sampler__enable_all(struct prof_sampler *s, bool on)
{
	for (size_t i = 0; i < s->nev; i++)
		if (s->evs[i].fd >= 0)
			ioctl(s->evs[i].fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}
