/* bpf.c: the BPF sampling backend's user half.
 *
 * One perf event per CPU (system-wide, same event and frequency as the ring
 * backend) runs profile/bpf/prof.bpf.c, which keeps only the target's tgid
 * and counts (thread, IP, user stack, kernel stack) in a hash map. Threads
 * the target creates later need nothing: the filter is by tgid. Collecting
 * turns the maps into the same stack table the ring backend fills.
 *
 * The program returns 0, so the kernel writes no sample into the events'
 * rings; each event still gets a small ring, where the kernel reports
 * throttling (PERF_RECORD_THROTTLE), counted as the ring backend does.
 */
#include "profile/internal.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "profile/bpf/prof-bpf.h"
#include "profile/bpf/prof.skel.h"

/* Data bytes of each event's ring: THROTTLE and UNTHROTTLE records only
 * (24 bytes each), read when the profile stops. */
#define THROTTLE_RING 8192

struct prof_bpf {
	struct prof_skel *skel;
	int ncpu;
	int *fds;
	struct bpf_link **links;
	void **maps;			/* each event's ring, or NULL */
	struct prof_ring *rings;
};

/* libbpf's last complaint, kept to explain a failed load; never printed. */
static __thread char libbpf_last[256];

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[256];

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = 0;
	if (line[0])
		snprintf(libbpf_last, sizeof(libbpf_last), "%s", line);
	return 0;
}

static const char *load_hint(int e)
{
	if (e == -EPERM || e == -EACCES)
		return "loading BPF programs needs CAP_BPF and CAP_PERFMON (or root)";
	if (e == -ENOSYS || e == -EOPNOTSUPP)
		return "this kernel lacks BPF support for perf_event programs";
	if (e == -ENOMEM)
		return "locked memory limit too low for the BPF maps (RLIMIT_MEMLOCK)";
	return "the kernel rejected the program";
}

/* CPU c's event's ring, for its throttling records. Best effort: without
 * it (mmap refused) throttling is just not counted. */
static void map_ring(struct prof_bpf *b, int c)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len = page + THROTTLE_RING;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, b->fds[c], 0);

	if (m == MAP_FAILED)
		return;
	if (prof_ring__init(&b->rings[c], m, THROTTLE_RING) < 0) {
		munmap(m, len);
		return;
	}
	b->maps[c] = m;
}

static int count_throttle(const struct perf_event_header *h, void *arg)
{
	if (h->type == PERF_RECORD_THROTTLE)
		++*(uint64_t *)arg;
	return 0;
}

/* Throttling since the last call, on every CPU. */
static uint64_t take_throttled(struct prof_bpf *b)
{
	uint64_t n = 0;

	for (int c = 0; c < b->ncpu; c++)
		if (b->maps[c])
			prof_ring__drain(&b->rings[c], count_throttle, &n);
	return n;
}

int prof_bpf__open(pid_t pid, unsigned freq_hz, bool user_only, bool pmu, struct prof_bpf **out,
		   char *why, size_t whylen)
{
	struct prof_bpf *b = calloc(1, sizeof(*b));
	int r;

	*out = NULL;
	if (!b) {
		prof__fmt(why, whylen, "out of memory");
		return -ENOMEM;
	}
	libbpf_set_print(libbpf_quiet);
	libbpf_last[0] = 0;
	b->skel = prof_skel__open();
	if (!b->skel) {
		r = -errno;
		prof__fmt(why, whylen, "cannot open the BPF object: %s", strerror(-r));
		goto fail;
	}
	b->skel->rodata->target_tgid = (__u32)pid;
	b->skel->rodata->user_only = user_only;
	r = prof_skel__load(b->skel);
	if (r) {
		r = r < 0 ? r : -errno;
		prof__fmt(why, whylen, "cannot load the BPF program: %s: %s%s%s", strerror(-r),
			 load_hint(r), libbpf_last[0] ? "; libbpf: " : "", libbpf_last);
		goto fail;
	}
	long n = sysconf(_SC_NPROCESSORS_CONF);
	b->ncpu = n > 0 ? (int)n : 1;
	b->fds = malloc((size_t)b->ncpu * sizeof(*b->fds));
	b->links = calloc((size_t)b->ncpu, sizeof(*b->links));
	b->maps = calloc((size_t)b->ncpu, sizeof(*b->maps));
	b->rings = calloc((size_t)b->ncpu, sizeof(*b->rings));
	if (!b->fds || !b->links || !b->maps || !b->rings) {
		r = -ENOMEM;
		prof__fmt(why, whylen, "out of memory");
		goto fail;
	}
	for (int c = 0; c < b->ncpu; c++)
		b->fds[c] = -1;
	for (int c = 0; c < b->ncpu; c++) {
		struct perf_event_attr a = {
			.size = sizeof(a),
			.type = pmu ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE,
			.config = pmu ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_SW_CPU_CLOCK,
			.freq = 1, .sample_freq = freq_hz, .disabled = 1,
			.exclude_hv = 1, .exclude_kernel = user_only,
		};
		int fd = (int)syscall(SYS_perf_event_open, &a, -1, c, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0 && errno == ENODEV)
			continue;	/* offline CPU */
		if (fd < 0) {
			r = -errno;
			prof__fmt(why, whylen, "cannot open a system-wide perf event on CPU %d: %s%s",
				 c, strerror(-r), r == -EACCES || r == -EPERM ?
				 " (needs CAP_PERFMON or perf_event_paranoid <= 0)" : "");
			goto fail;
		}
		b->fds[c] = fd;
		map_ring(b, c);
		b->links[c] = bpf_program__attach_perf_event(b->skel->progs.prof_sample, fd);
		if (!b->links[c]) {
			r = -errno;
			prof__fmt(why, whylen, "cannot attach the BPF program to CPU %d's event: %s",
				 c, strerror(-r));
			goto fail;
		}
		/* libbpf enables the event it attaches to: off until start, or
		 * the target would be sampled (and pay for it) from open on */
		if (ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) < 0) {
			r = -errno;
			prof__fmt(why, whylen, "cannot disable CPU %d's perf event: %s", c,
				 strerror(-r));
			goto fail;
		}
	}
	*out = b;
	return 0;
fail:
	prof_bpf__free(b);
	return r < 0 ? r : -EINVAL;
}

int prof_bpf__enable(struct prof_bpf *b, bool on)
{
	for (int c = 0; c < b->ncpu; c++)
		if (b->fds[c] >= 0 &&
		    ioctl(b->fds[c], on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0) < 0)
			return -errno;
	return 0;
}

/* Appends the stack stored under id to chain; returns the new length. */
static size_t append_stack(int fd, int32_t id, uint64_t *chain, size_t n, size_t max)
{
	uint64_t ips[PROF_BPF_STACK_DEPTH];

	if (id < 0 || bpf_map_lookup_elem(fd, &id, ips) < 0)
		return n;
	for (size_t i = 0; i < PROF_BPF_STACK_DEPTH && ips[i] && n < max; i++)
		chain[n++] = ips[i];
	return n;
}

static uint64_t take_stat(int fd, uint32_t idx, int ncpu)
{
	uint64_t *v = calloc((size_t)ncpu, sizeof(*v)), sum = 0;

	if (!v)
		return 0;
	if (bpf_map_lookup_elem(fd, &idx, v) == 0) {
		for (int c = 0; c < ncpu; c++)
			sum += v[c];
		memset(v, 0, (size_t)ncpu * sizeof(*v));
		bpf_map_update_elem(fd, &idx, v, BPF_ANY);
	}
	free(v);
	return sum;
}

int prof_bpf__collect(struct prof_bpf *b, struct prof_stacks *stacks, prof_bpf_thread_fn cb,
		      void *arg, uint64_t *lost, uint64_t *stack_errors, uint64_t *throttled)
{
	int cfd = bpf_map__fd(b->skel->maps.counts);
	int sfd = bpf_map__fd(b->skel->maps.stacks);
	int tfd = bpf_map__fd(b->skel->maps.stats);
	struct prof_bpf_key key, next, *keys = NULL;
	size_t nkeys = 0, cap = 0;
	uint64_t chain[2 * PROF_BPF_STACK_DEPTH + 1];
	int r = 0, ncpu = libbpf_num_possible_cpus();
	void *prev = NULL;

	while (bpf_map_get_next_key(cfd, prev, &next) == 0) {
		uint64_t count;
		if (nkeys == cap) {
			void *p = realloc(keys, (cap = cap ? cap * 2 : 1024) * sizeof(*keys));
			if (!p) {
				r = -ENOMEM;
				break;
			}
			keys = p;
		}
		keys[nkeys++] = next;
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(cfd, &next, &count) < 0)
			continue;
		size_t n = 0;
		if (next.kstack >= 0)
			n = append_stack(sfd, next.kstack, chain, 0, PROF_BPF_STACK_DEPTH);
		if (n == 0 || chain[0] != next.ip) {
			/* a user-mode sample (its user stack starts at the IP too),
			 * or a kernel one whose stack was lost */
			chain[0] = next.ip;
			n = n ? n : 1;
		}
		size_t nu = append_stack(sfd, next.ustack, chain, n, sizeof(chain) / sizeof(*chain));
		if (next.kstack < 0 && nu > n && chain[n] == next.ip) {
			/* the user stack repeats the IP first */
			memmove(chain + n, chain + n + 1, (nu - n - 1) * sizeof(*chain));
			nu--;
		}
		r = prof_stacks__add(stacks, chain, nu, count);
		if (r < 0)
			break;
		cb((pid_t)next.tid, count, arg);
	}
	/* empty the maps so a later start counts afresh */
	for (size_t i = 0; i < nkeys; i++) {
		bpf_map_delete_elem(cfd, &keys[i]);
		if (keys[i].ustack >= 0)
			bpf_map_delete_elem(sfd, &keys[i].ustack);
		if (keys[i].kstack >= 0)
			bpf_map_delete_elem(sfd, &keys[i].kstack);
	}
	free(keys);
	if (ncpu > 0) {
		*lost += take_stat(tfd, PROF_BPF_STAT_LOST, ncpu);
		*stack_errors += take_stat(tfd, PROF_BPF_STAT_STACK_ERRORS, ncpu);
	}
	*throttled += take_throttled(b);
	return r;
}

void prof_bpf__free(struct prof_bpf *b)
{
	if (!b)
		return;
	for (int c = 0; b->links && c < b->ncpu; c++)
		bpf_link__destroy(b->links[c]);
	size_t len = (size_t)sysconf(_SC_PAGESIZE) + THROTTLE_RING;
	for (int c = 0; b->maps && c < b->ncpu; c++)
		if (b->maps[c]) {
			prof_ring__fini(&b->rings[c]);
			munmap(b->maps[c], len);
		}
	for (int c = 0; b->fds && c < b->ncpu; c++)
		if (b->fds[c] >= 0)
			close(b->fds[c]);
	prof_skel__destroy(b->skel);
	free(b->links);
	free(b->fds);
	free(b->maps);
	free(b->rings);
	free(b);
}
