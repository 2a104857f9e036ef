/* sampler.c: perf_event sampling of every thread of a process.
 *
 * Two ways to cover the threads (profile.h, enum prof_ring_mode). Per CPU:
 * one event per CPU for every task (pid -1), each with its own ring; the
 * reader keeps the target's samples (by the pid each sample carries) and
 * drops the rest. Threads need no bookkeeping at all: whatever runs on a
 * CPU is sampled, however short-lived.
 *
 * Per thread, where per-CPU events are not permitted: the kernel refuses to mmap an inherited per-task event opened with
 * cpu == -1, so, like perf record, we open one event per thread and per CPU
 * with inherit=1 (threads the target creates later get a copy of their
 * creator's event, writing into the creator's ring) and redirect every
 * event of a CPU into one ring with PERF_EVENT_IOC_SET_OUTPUT. A thread of
 * padrone's polls the rings and drains them.
 *
 * A thread that shows up in /proc/PID/task after the first scan may or may
 * not already carry an inherited event (its creator may have been given its
 * event just before or just after the clone). We open direct events on it
 * anyway but keep their samples apart, "on probation": if a sample of that
 * thread ever arrives through an inherited event, the thread was covered
 * twice, and the direct events and their samples are dropped; otherwise
 * they are merged when sampling stops. So no thread is missed and none is
 * counted twice.
 */
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

#define RESCAN_NS 100000000ull	/* look for unknown threads every 100 ms */
#define POLL_MS 100

void sampler__seterrmsg(struct prof_sampler *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------ records */

static void add_sample_to(struct prof_sampler *s, struct prof_stacks *t, uint64_t ip,
			  const uint64_t *cc, uint64_t nr)
{
	size_t n = 0;

	for (uint64_t i = 0; i < nr && n < CHAIN_MAX; i++)
		if (cc[i] < PERF_CONTEXT_MAX)
			s->chain[n++] = cc[i];
	if (n == 0 || s->chain[0] != ip) {
		/* no chain, or a chain that does not start at the IP */
		if (n == CHAIN_MAX)
			n--;
		memmove(s->chain + 1, s->chain, n * sizeof(*s->chain));
		s->chain[0] = ip;
		n++;
	}
	prof_stacks__add(t, s->chain, n, 1);
}

static void on_sample(struct prof_sampler *s, const struct perf_event_header *h)
{
	const uint64_t *p = (const void *)(h + 1);
	const uint64_t *end = (const void *)((const uint8_t *)h + h->size);

	if (end - p < 6)
		return;
	uint64_t id = p[0], ip = p[1], time = p[3];
	uint32_t pid = (uint32_t)p[2], tid = (uint32_t)(p[2] >> 32);
	uint64_t nr = p[5];
	const uint64_t *cc = p + 6;

	if ((pid_t)pid != s->pid)
		return;
	if (s->exec_ns && time >= s->exec_ns) {
		s->tot.after_exec++;	/* the new program's: not what was profiled */
		return;
	}
	if (nr > (uint64_t)(end - cc))
		nr = (uint64_t)(end - cc);
	struct thr *t = sampler__thr_get(s, (pid_t)tid, true);
	if (!t)
		return;
	if (s->per_cpu) {
		t->new_thread = !t->direct;	/* not there when sampling began */
		t->samples++;
		s->tot.samples++;
		add_sample_to(s, &s->stacks, ip, cc, nr);
		return;
	}
	const uint32_t *ei = util_hmap__get(&s->ev_by_id, id);
	bool inherited = !ei || s->evs[*ei].tid != (pid_t)tid;

	if (inherited && t->probation && !t->dropped) {
		/* covered twice: keep the inherited event only */
		t->dropped = true;
		t->inherited = true;
		sampler__close_thread_events(s, t->tid);
		if (t->prob)
			prof_stacks__fini(t->prob);
		free(t->prob);
		t->prob = NULL;
		t->prob_samples = 0;
	}
	if (!t->direct && !t->inherited)
		t->new_thread = true;	/* not there at the first scan */
	if (inherited)
		t->inherited = true;
	if (!inherited && t->probation) {
		if (t->dropped || !t->prob)
			return;
		t->prob_samples++;
		add_sample_to(s, t->prob, ip, cc, nr);
		return;
	}
	t->samples++;
	s->tot.samples++;
	add_sample_to(s, &s->stacks, ip, cc, nr);
}

/* The target's COMM record that exec writes (before the new program runs
 * an instruction): when, on the samples' clock (the sample_id trailer ends
 * with TIME, IDENTIFIER). Returns nonzero to stop a peek there. */
static int find_exec(const struct perf_event_header *h, void *arg)
{
	struct prof_sampler *s = arg;
	const uint32_t *u32 = (const void *)(h + 1);

	if (h->type != PERF_RECORD_COMM || !(h->misc & PERF_RECORD_MISC_COMM_EXEC) ||
	    h->size < sizeof(*h) + 8 + 24 || (pid_t)u32[0] != s->pid)
		return 0;
	const uint8_t *end = (const uint8_t *)h + h->size;
	uint64_t time;
	memcpy(&time, end - 16, sizeof(time));
	if (!s->exec_ns || time < s->exec_ns)
		s->exec_ns = time;
	s->tot.execed = true;
	return 1;
}

/* An executable mapping of the target's: remember it (once). */
static void on_mmap2(struct prof_sampler *s, const struct perf_event_header *h)
{
	const uint8_t *p = (const uint8_t *)(h + 1), *end = (const uint8_t *)h + h->size;
	struct {
		uint32_t pid, tid;
		uint64_t addr, len, pgoff;
		uint32_t maj, min;
		uint64_t ino, ino_generation;
		uint32_t prot, flags;
	} r;

	if ((size_t)(end - p) <= sizeof(r) || (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID))
		return;
	memcpy(&r, p, sizeof(r));
	const char *name = (const char *)p + sizeof(r);
	size_t nlen = strnlen(name, (size_t)(end - p) - sizeof(r));
	if ((pid_t)r.pid != s->pid || !(r.prot & PROT_EXEC) || name[0] != '/')
		return;
	for (size_t i = 0; i < s->nmmaps; i++)
		if (s->mmaps[i].start == r.addr && s->mmaps[i].ino == r.ino &&
		    s->mmaps[i].end == r.addr + r.len)
			return;
	if (s->nmmaps == s->mmapcap) {
		size_t nc = s->mmapcap ? s->mmapcap * 2 : 16;
		void *q = realloc(s->mmaps, nc * sizeof(*s->mmaps));
		if (!q)
			return;
		s->mmaps = q;
		s->mmapcap = nc;
	}
	char *path = strndup(name, nlen);
	if (!path)
		return;
	s->mmaps[s->nmmaps++] = (struct prof_mmap){ r.addr, r.addr + r.len, r.pgoff, r.maj, r.min,
						     r.ino, path };
}

static int on_record(const struct perf_event_header *h, void *arg)
{
	struct prof_sampler *s = arg;
	const uint32_t *u32 = (const void *)(h + 1);
	const uint64_t *u64 = (const void *)(h + 1);

	switch (h->type) {
	case PERF_RECORD_SAMPLE:
		on_sample(s, h);
		break;
	case PERF_RECORD_LOST:
		s->tot.lost += u64[1];
		break;
	case PERF_RECORD_THROTTLE:
		s->tot.throttled++;
		break;
	case PERF_RECORD_UNTHROTTLE:
		s->tot.unthrottled++;
		break;
	case PERF_RECORD_FORK:
		s->tot.forks++;
		if ((pid_t)u32[0] == s->pid) {
			struct thr *t = sampler__thr_get(s, (pid_t)u32[2], true);
			if (t && !t->direct) {
				t->inherited = true;
				t->new_thread = true;
			}
		}
		break;
	case PERF_RECORD_EXIT:
		s->tot.exits++;
		if ((pid_t)u32[0] == s->pid) {
			struct thr *t = sampler__thr_get(s, (pid_t)u32[2], false);
			if (t)
				t->exited = true;
		}
		break;
	case PERF_RECORD_COMM:
		s->tot.comms++;
		break;
	case PERF_RECORD_MMAP:
		s->tot.mmaps++;
		break;
	case PERF_RECORD_MMAP2:
		s->tot.mmaps++;
		on_mmap2(s, h);
		break;
	default:
		break;
	}
	return 0;
}

void prof_sampler__consume(struct prof_sampler *s, const struct perf_event_header *h)
{
	pthread_mutex_lock(&s->lock);
	on_record(h, s);
	pthread_mutex_unlock(&s->lock);
}

/* Every ring, up to what each held when we looked. A sample of the new
 * program after an exec may sit in one ring while exec's COMM record sits
 * in another: so the heads are taken first, then every ring is searched
 * for that record up to its head of now (which holds the record of any
 * exec that happened before a sample we are about to read), and only then
 * are the records up to the first heads read. */
void sampler__drain_all(struct prof_sampler *s)
{
	uint64_t stack_heads[64], *heads = stack_heads;

	if (s->ncpu > 64 && !(heads = calloc((size_t)s->ncpu, sizeof(*heads))))
		heads = NULL;
	for (int c = 0; heads && c < s->ncpu; c++)
		if (s->cpus[c].fd >= 0)
			heads[c] = prof_ring__head(&s->cpus[c].ring);
	for (int c = 0; !s->exec_ns && c < s->ncpu; c++)
		if (s->cpus[c].fd >= 0)
			prof_ring__peek(&s->cpus[c].ring, find_exec, s);
	for (int c = 0; c < s->ncpu; c++) {
		if (s->cpus[c].fd < 0)
			continue;
		if (heads)
			prof_ring__drain_to(&s->cpus[c].ring, heads[c], on_record, s);
		else
			prof_ring__drain(&s->cpus[c].ring, on_record, s);
	}
	if (heads != stack_heads)
		free(heads);
}

/* ------------------------------------------------------------ reader */

static void *reader_main(void *arg)
{
	struct prof_sampler *s = arg;
	struct pollfd *pf = calloc((size_t)s->ncpu + 1, sizeof(*pf));
	int *which = calloc((size_t)s->ncpu + 1, sizeof(*which));

	if (!pf || !which) {
		free(pf);
		free(which);
		return NULL;
	}
	for (;;) {
		int n = 0;
		pf[n++] = (struct pollfd){ .fd = s->stop_pipe[0], .events = POLLIN };
		for (int c = 0; c < s->ncpu; c++)
			if (s->cpus[c].fd >= 0 && !s->cpus[c].hup) {
				which[n] = c;
				pf[n++] = (struct pollfd){ .fd = s->cpus[c].fd, .events = POLLIN };
			}
		int r = poll(pf, (nfds_t)n, POLL_MS);
		if ((r < 0 && errno != EINTR) || (r > 0 && pf[0].revents) ||
		    __atomic_load_n(&s->stop_req, __ATOMIC_ACQUIRE))
			break;
		pthread_mutex_lock(&s->lock);
		for (int i = 1; r > 0 && i < n; i++)
			if (pf[i].revents & (POLLHUP | POLLERR))
				s->cpus[which[i]].hup = true;	/* owner gone; drain on timeouts */
		sampler__drain_all(s);
		uint64_t now = util_now_ns();
		if (!s->per_cpu && now - s->last_scan_ns >= RESCAN_NS) {
			s->last_scan_ns = now;
			sampler__scan_until_stable(s, false, true);
		}
		pthread_mutex_unlock(&s->lock);
	}
	free(pf);
	free(which);
	return NULL;
}

/* ------------------------------------------------------------ API */

static int check_pid(pid_t pid, struct prof_error *err)
{
	char path[64];
	FILE *f;
	char st = 0;

	if (pid <= 0) {
		prof__seterr(err, -EINVAL, "invalid process id %d", pid);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f) {
		prof__seterr(err, -ESRCH, "no such process: %d", pid);
		return -ESRCH;
	}
	if (fscanf(f, "%*d (%*[^)]) %c", &st) != 1)
		st = 0;
	fclose(f);
	if (st == 'Z' || st == 'X') {
		prof__seterr(err, -ESRCH, "process %d is a zombie: it has exited", pid);
		return -ESRCH;
	}
	return 0;
}

int prof_sampler__open(pid_t pid, const struct prof_opts *opts, struct prof_sampler **out,
		       struct prof_error *err)
{
	struct prof_sampler *s;
	int r;

	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	r = check_pid(pid, err);
	if (r < 0)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s) {
		prof__seterr(err, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	s->pid = pid;
	s->stop_pipe[0] = s->stop_pipe[1] = -1;
	pthread_mutex_init(&s->lock, NULL);
	prof_stacks__init(&s->stacks);
	if (!UTIL_OPTS_COPY(&s->opts, opts)) {
		prof__seterr(err, -EINVAL, UTIL_OPTS_UNKNOWN);
		r = -EINVAL;
		goto fail;
	}
	s->opts.sz = sizeof(s->opts);
	if (!s->opts.freq_hz)
		s->opts.freq_hz = PROF_DEFAULT_FREQ_HZ;
	if (!s->opts.ring_pages)
		s->opts.ring_pages = 128;
	if (s->opts.ring_pages & (s->opts.ring_pages - 1)) {
		prof__seterr(err, -EINVAL, "ring_pages must be a power of two, not %u",
			    s->opts.ring_pages);
		r = -EINVAL;
		goto fail;
	}
	s->pmu = sampler__have_pmu();
	if (!s->pmu && s->opts.freq_hz > PROF_MAX_SOFT_FREQ_HZ && !s->opts.force) {
		prof__seterr(err, -EINVAL,
			    "refusing to sample at %u Hz without a hardware PMU: cpu-clock costs "
			    "the target ~20 us per sample and above %u Hz can lock up a CPU",
			    s->opts.freq_hz, PROF_MAX_SOFT_FREQ_HZ);
		r = -EINVAL;
		goto fail;
	}
	if (!s->opts.user_only && !sampler__may_sample_kernel())
		s->opts.user_only = true;	/* perf_event_paranoid says user only */
	s->tot.kernel = !s->opts.user_only;
	s->tot.freq_hz = s->opts.freq_hz;
	s->tot.backend = s->opts.backend;
	snprintf(s->event, sizeof(s->event), "%s", s->pmu ? "cycles" : "cpu-clock");

	if (s->opts.backend == PROF_BACKEND_BPF) {
		char why[256];
		r = prof_bpf__open(pid, s->opts.freq_hz, s->opts.user_only, s->pmu, &s->bpf, why,
				   sizeof(why));
		if (r == 0) {
			sampler__note_initial_threads(s);
			*out = s;
			return 0;
		}
		s->bpf = NULL;
		s->tot.fell_back = true;
		s->tot.backend = PROF_BACKEND_RING;
		snprintf(s->tot.fallback_reason, sizeof(s->tot.fallback_reason), "%s", why);
	}
	r = sampler__open_ring_backend(s, err);
	if (r < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	prof_sampler__free(s);
	return r;
}

int prof_sampler__start(struct prof_sampler *s)
{
	int r;

	if (s->running) {
		sampler__seterrmsg(s, "the sampler is already running");
		return -EBUSY;
	}
	s->errmsg[0] = 0;
	if (s->bpf) {
		r = prof_bpf__enable(s->bpf, true);
		if (r < 0) {
			sampler__seterrmsg(s, "cannot enable the BPF sampling events: %s", strerror(-r));
			return r;
		}
		s->start_ns = util_now_ns();
		s->running = true;
		return 0;
	}
	if (pipe2(s->stop_pipe, O_CLOEXEC) < 0) {
		r = -errno;
		sampler__seterrmsg(s, "pipe: %s", strerror(errno));
		return r;
	}
	pthread_mutex_lock(&s->lock);
	sampler__enable_all(s, true);
	s->start_ns = util_now_ns();
	/* threads created before the events existed and after the last scan */
	s->last_scan_ns = s->start_ns;
	r = s->per_cpu ? 0 : sampler__scan_until_stable(s, false, true);
	pthread_mutex_unlock(&s->lock);
	if (r < 0 && r != -ESRCH) {
		sampler__enable_all(s, false);
		goto fail;
	}
	s->stop_req = false;
	r = pthread_create(&s->reader, NULL, reader_main, s);
	if (r) {
		sampler__enable_all(s, false);
		sampler__seterrmsg(s, "cannot start the ring reader thread: %s", strerror(r));
		r = -r;
		goto fail;
	}
	s->reader_on = true;
	s->running = true;
	return 0;
fail:
	close(s->stop_pipe[0]);
	close(s->stop_pipe[1]);
	s->stop_pipe[0] = s->stop_pipe[1] = -1;
	return r;
}

static void bpf_thread_cb(pid_t tid, uint64_t samples, void *arg)
{
	struct prof_sampler *s = arg;
	struct thr *t = sampler__thr_get(s, tid, true);

	if (!t)
		return;
	if (!t->direct)
		t->new_thread = true;
	t->samples += samples;
	s->tot.samples += samples;
}

int prof_sampler__stop(struct prof_sampler *s)
{
	int r = 0;

	if (!s->running)
		return 0;
	if (s->bpf) {
		prof_bpf__enable(s->bpf, false);
		r = prof_bpf__collect(s->bpf, &s->stacks, bpf_thread_cb, s, &s->tot.lost,
				      &s->tot.stack_errors, &s->tot.throttled);
		if (r < 0)
			sampler__seterrmsg(s, "cannot read the BPF maps: %s", strerror(-r));
	} else {
		/* the reader may open events on new threads until it is gone:
		 * join it first, then disable everything */
		__atomic_store_n(&s->stop_req, true, __ATOMIC_RELEASE);
		ssize_t w = write(s->stop_pipe[1], "x", 1);
		(void)w;	/* if not woken, it sees stop_req within POLL_MS */
		if (s->reader_on)
			pthread_join(s->reader, NULL);
		s->reader_on = false;
		close(s->stop_pipe[0]);
		close(s->stop_pipe[1]);
		s->stop_pipe[0] = s->stop_pipe[1] = -1;
		pthread_mutex_lock(&s->lock);
		sampler__enable_all(s, false);
		sampler__drain_all(s);
		sampler__settle_probation(s);
		pthread_mutex_unlock(&s->lock);
	}
	s->tot.duration_ns += util_now_ns() - s->start_ns;
	s->running = false;
	return r;
}

void prof_sampler__free(struct prof_sampler *s)
{
	if (!s)
		return;
	prof_sampler__stop(s);
	for (size_t i = 0; i < s->nev; i++) {
		bool owner = false;
		for (int c = 0; c < s->ncpu; c++)
			owner |= s->cpus[c].fd == s->evs[i].fd;
		if (s->evs[i].fd >= 0 && !owner)
			close(s->evs[i].fd);
	}
	for (int c = 0; s->cpus && c < s->ncpu; c++) {
		if (s->cpus[c].fd < 0)
			continue;
		prof_ring__fini(&s->cpus[c].ring);
		munmap(s->cpus[c].base, s->cpus[c].maplen);
		close(s->cpus[c].fd);
	}
	for (size_t i = 0; i < s->nthr; i++)
		if (s->thrs[i].prob) {
			prof_stacks__fini(s->thrs[i].prob);
			free(s->thrs[i].prob);
		}
	prof_bpf__free(s->bpf);
	for (size_t i = 0; i < s->nmmaps; i++)
		free(s->mmaps[i].path);
	free(s->mmaps);
	free(s->cpus);
	free(s->evs);
	free(s->thrs);
	util_hmap__fini(&s->ev_by_id);
	util_hmap__fini(&s->thr_by_tid);
	prof_stacks__fini(&s->stacks);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

const char *prof_ring_mode_name(enum prof_ring_mode m)
{
	switch (m) {
	case PROF_RING_PER_CPU: return "per-cpu";
	case PROF_RING_PER_THREAD: return "per-thread";
	default: return "auto";
	}
}

const char *prof_sampler__errmsg(const struct prof_sampler *s)
{
	return s->errmsg;
}

pid_t prof_sampler__pid(const struct prof_sampler *s)
{
	return s->pid;
}

void prof_sampler__totals(const struct prof_sampler *s, struct prof_totals *t)
{
	struct prof_sampler *m = (struct prof_sampler *)s;

	pthread_mutex_lock(&m->lock);
	*t = s->tot;
	snprintf(t->event, sizeof(t->event), "%s", s->event);
	t->threads = t->new_threads = 0;
	for (size_t i = 0; i < s->nthr; i++) {
		if (!s->thrs[i].samples)
			continue;
		t->threads++;
		t->new_threads += s->thrs[i].new_thread;
	}
	if (s->running)
		t->duration_ns += util_now_ns() - s->start_ns;
	pthread_mutex_unlock(&m->lock);
}

size_t prof_sampler__stack_count(const struct prof_sampler *s)
{
	return s->stacks.n;
}

int prof_sampler__stack(const struct prof_sampler *s, size_t i, const uint64_t **ips,
			size_t *nips, uint64_t *count)
{
	if (i >= s->stacks.n)
		return -ENOENT;
	const struct prof_stack_ent *e = &s->stacks.ents[i];
	*ips = s->stacks.ips + e->off;
	*nips = e->len;
	*count = e->count;
	return 0;
}

size_t prof_sampler__mmaps(const struct prof_sampler *s, const struct prof_mmap **out)
{
	*out = s->mmaps;
	return s->nmmaps;
}

size_t prof_sampler__threads(const struct prof_sampler *s, struct prof_thread *out, size_t max)
{
	size_t k = 0;

	for (size_t i = 0; i < s->nthr; i++) {
		const struct thr *t = &s->thrs[i];
		if (!t->samples)
			continue;
		if (k < max)
			out[k] = (struct prof_thread){ .tid = t->tid, .samples = t->samples,
						       .new_thread = t->new_thread };
		k++;
	}
	return k;
}
