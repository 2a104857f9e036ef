/* Per-function measurement without traps: the measuring stub (stubs.S) is
 * copied into the code cache with a relocated copy of the function's first
 * bytes, the function is redirected to it, N calls are timed with rdtsc in
 * the target itself, and the stub is taken out again.
 *
 * Why rdtsc: it costs ~20 cycles and needs no call; clock_gettime through
 * the vDSO reads the same counter plus a conversion and a seqlock, and would
 * need a call (and all registers saved) from the stub. rdtsc is only a
 * clock when the TSC is invariant (constant_tsc and nonstop_tsc), which is
 * checked; ticks are converted to ns with a rate measured here against
 * CLOCK_MONOTONIC_RAW over the whole measurement.
 *
 * The stub swaps the return address, so an exception or a thread
 * cancellation unwinding through a timed call would meet an address without
 * unwind information and abort: measuring is refused in processes that map
 * a C++ or unwinding runtime, unless forced. setjmp/longjmp is harmless (the
 * abandoned entries are reclaimed by key), recursion and threads are handled
 * (the key is the return slot's address), and a hardware shadow stack makes
 * it refuse.
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

extern const uint8_t cc_mstub_begin[], cc_mstub_ret[], cc_mstub_end[];
extern const uint8_t cc_mstub_fix_data1[], cc_mstub_fix_data2[], cc_mstub_fix_cont[];

enum { MD_LIMIT = 0, MD_STARTED = 8, MD_SKIPPED = 24, MD_MASK = 32, MD_TABLE = 40,
       MD_SAMPLES = 48, MD_HEADER = 64 };
#define TABLE_ENTRIES 1024u
#define TABLE_ENTRY 32u
#define MD_SAMPLES_AT (MD_HEADER + TABLE_ENTRIES * TABLE_ENTRY)
#define MAX_CALLS (16u << 20)

struct cc_measure {
	struct cc_cache *c;
	struct cc_job *job;		/* holds the relocated prefix */
	char name[96];
	uint32_t id;
	uint64_t calls;
	uint64_t code, code_size, stub_size, copy;
	uint64_t data, data_size;
	uint64_t tsc0, ns0;
	struct cc_patch_opts po;
	bool finished;
};

/* The smallest positive difference of two back-to-back rdtsc reads: under
 * a hypervisor that traps or coarsens the TSC, far more than one tick. */
static uint64_t tsc_resolution_ticks(void)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 256; i++) {
		uint64_t a = __rdtsc(), b = __rdtsc();
		if (b > a && b - a < best)
			best = b - a;
	}
	return best == UINT64_MAX ? 1 : best;
}

static uint64_t raw_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A line of a /proc file containing all of words, or NULL. */
static bool proc_has(const char *path, const char *line_prefix, const char *word)
{
	FILE *f = fopen(path, "re");
	char buf[4096];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(buf, sizeof buf, f))
		if (strncmp(buf, line_prefix, strlen(line_prefix)) == 0) {
			char *w = buf;
			size_t n = strlen(word);
			while ((w = strstr(w, word))) {
				if ((w == buf || w[-1] == ' ' || w[-1] == '\t') &&
				    (w[n] == ' ' || w[n] == '\n' || w[n] == '\0')) {
					found = true;
					break;
				}
				w += n;
			}
		}
	fclose(f);
	return found;
}

/* What makes measuring this process unsafe or meaningless. */
static int preflight(struct cc_cache *c, const char *name, bool force)
{
	char path[64];

	if (!proc_has("/proc/cpuinfo", "flags", "constant_tsc") ||
	    !proc_has("/proc/cpuinfo", "flags", "nonstop_tsc"))
		return cc__fail(c, CC_PHASE_MEASURE, -ENOTSUP, "this CPU's TSC is not invariant "
				"(no constant_tsc/nonstop_tsc): rdtsc cannot time calls");
	snprintf(path, sizeof path, "/proc/%d/status", c->pid);
	if (proc_has(path, "x86_Thread_features:", "shstk"))
		return cc__fail(c, CC_PHASE_MEASURE, -ENOTSUP, "process %d uses a hardware shadow "
				"stack; the measuring stub's return address swap would trap", c->pid);
	if (force)
		return 0;
	char unw[256];
	int rc = cc__maps_unwinder(c, unw, sizeof unw);
	if (rc < 0)
		return cc__fail(c, CC_PHASE_MEASURE, rc, "cannot read the maps of process %d",
				c->pid);
	if (rc > 0)
		return cc__fail(c, CC_PHASE_MEASURE, -ENOTSUP, "process %d maps %s: an exception or "
				"cancellation unwinding through %s while it is timed would abort the "
				"process; use force if it never unwinds", c->pid, unw, name);
	return 0;
}

/* The runtime named is the most telling one the process maps, whatever the
 * order the loader placed them in: libstdc++ (a C++ program), then libgcc_s
 * (the unwinder of C code that cancels threads), then libunwind. */
int cc__maps_unwinder(struct cc_cache *c, char *lib, size_t size)
{
	static const char *const runtimes[] = { "libstdc++", "libgcc_s", "libunwind" };
	struct attach_maps *m;
	int rc = attach_maps__read(c->pid, &m);

	if (rc < 0)
		return rc;
	size_t best = (sizeof runtimes / sizeof runtimes[0]);
	for (size_t i = 0; i < attach_maps__count(m); i++) {
		const char *p = attach_maps__at(m, i)->path;
		const char *base = strrchr(p, '/');
		base = base ? base + 1 : p;
		for (size_t r = 0; r < best; r++)
			if (strncmp(base, runtimes[r], strlen(runtimes[r])) == 0) {
				snprintf(lib, size, "%s", base);
				best = r;
			}
	}
	attach_maps__free(m);
	return best < (sizeof runtimes / sizeof runtimes[0]);
}

static void put64(uint8_t *b, size_t off, uint64_t v)
{
	memcpy(b + off, &v, 8);
}

/* The stub for this function, linked to run at code with its data at data. */
static int build_stub(struct cc_measure *m, const struct cc_func *fn, uint8_t *buf)
{
	const struct cc_reloc *prefix = cc__job_prefix(m->job);
	size_t n = (size_t)(cc_mstub_end - cc_mstub_begin);
	struct cc_error err;

	memcpy(buf, cc_mstub_begin, n);
	const uint8_t *fix[2] = { cc_mstub_fix_data1, cc_mstub_fix_data2 };
	for (int i = 0; i < 2; i++) {
		size_t at = (size_t)(fix[i] - cc_mstub_begin);
		int64_t d = (int64_t)(m->data - (m->code + at));
		if (d < INT32_MIN || d > INT32_MAX)
			return -ERANGE;
		int32_t d32 = (int32_t)d;
		memcpy(buf + at - 4, &d32, 4);
	}
	/* after the entry part: the relocated first bytes, or the function
	 * itself when only call sites are redirected */
	uint64_t cont = prefix ? m->copy : fn->addr;
	size_t at = (size_t)(cc_mstub_fix_cont - cc_mstub_begin);
	int64_t d = (int64_t)(cont - (m->code + at));
	if (d < INT32_MIN || d > INT32_MAX)
		return -ERANGE;
	int32_t d32 = (int32_t)d;
	memcpy(buf + at - 4, &d32, 4);
	if (prefix && cc_reloc__encode(prefix, m->copy, buf + (m->copy - m->code),
				       cc_reloc__size(prefix), &err) < 0)
		return cc__fail(m->c, CC_PHASE_WRITE, err.err, "%s", err.msg);
	return 0;
}

static int place(struct cc_measure *m, const struct cc_func *fn)
{
	struct cc_cache *c = m->c;
	const struct cc_reloc *prefix = cc__job_prefix(m->job);
	int rc;

	m->stub_size = (uint64_t)(cc_mstub_end - cc_mstub_begin);
	m->code_size = ((m->stub_size + 15) & ~15ULL) + (prefix ? cc_reloc__size(prefix) : 0);
	m->data_size = MD_HEADER + TABLE_ENTRIES * TABLE_ENTRY + m->calls * 8;
	if ((rc = cc_cache__alloc(c, CC_DATA, m->data_size, 64, fn->addr, &m->data)) < 0)
		return rc;
	if ((rc = cc_cache__alloc(c, CC_CODE, m->code_size, 64, fn->addr, &m->code)) < 0)
		return rc;
	m->copy = m->code + ((m->stub_size + 15) & ~15ULL);

	uint8_t *d = calloc(1, m->data_size), *code = calloc(1, m->code_size);
	if (!d || !code) {
		free(d);
		free(code);
		return cc__fail(c, CC_PHASE_MEASURE, -ENOMEM, "out of memory");
	}
	put64(d, MD_LIMIT, m->calls);
	put64(d, MD_MASK, TABLE_ENTRIES - 1);
	put64(d, MD_TABLE, m->data + MD_HEADER);
	put64(d, MD_SAMPLES, m->data + MD_SAMPLES_AT);
	rc = build_stub(m, fn, code);
	if (rc == -ERANGE)
		rc = cc__fail(c, CC_PHASE_WRITE, rc, "the measuring stub's code and data are out of "
			      "reach of each other");
	if (rc == 0)
		rc = cc_cache__write(c, m->data, d, m->data_size);
	if (rc == 0)
		rc = cc_cache__write(c, m->code, code, m->code_size);
	free(d);
	free(code);
	return rc;
}

int cc_measure__start(struct cc_cache *c, const struct cc_func *fn,
		      const struct cc_measure_opts *opts, struct cc_measure **out)
{
	struct cc_measure_opts o = { .sz = sizeof o };
	struct cc_measure *m;
	int rc;

	*out = NULL;
	if (!UTIL_OPTS_COPY(&o, opts))
		return cc__fail(c, CC_PHASE_MEASURE, -EINVAL, UTIL_OPTS_UNKNOWN);
	if (!o.calls)
		o.calls = 1000;
	const char *name = fn->name ? fn->name : "the function";
	if (o.calls > MAX_CALLS)
		return cc__fail(c, CC_PHASE_MEASURE, -EINVAL, "%" PRIu64 " calls is more than the "
				"%u a measurement keeps", o.calls, MAX_CALLS);
	const struct cc_dir_redir *old = cc__redir_find(c, fn->addr, CC_REDIR_MEASURE);
	if (old && cc__redir_stale(old))
		return cc__fail_stale(c, CC_PHASE_MEASURE, old, name);
	if (old)
		return cc__fail(c, CC_PHASE_MEASURE, -EBUSY, "%s is already being measured (by "
				"padrone process %d)", name, (int)old->owner_pid);
	if ((rc = preflight(c, name, o.force)) < 0)
		return rc;
	if (!(m = calloc(1, sizeof *m)))
		return cc__fail(c, CC_PHASE_MEASURE, -ENOMEM, "out of memory");
	m->c = c;
	m->calls = o.calls;
	snprintf(m->name, sizeof m->name, "%s", name);
	m->po = (struct cc_patch_opts){
		.sz = sizeof m->po, .callers = o.callers, .ncallers = o.ncallers,
		.callsites_only = o.callsites_only, .timeout_ms = o.timeout_ms, .force = true,
		.report = o.report, .report_size = o.report_size, .source = "measuring stub",
		.stats = o.stats,
	};
	if ((rc = cc__job_new(c, fn, CC_REDIR_MEASURE, &m->po, &m->job)) < 0)
		goto err;
	if ((rc = place(m, fn)) < 0)
		goto err;
	struct cc_dir_block owned[2] = {
		{ m->code, m->code_size, CC_CODE, 0 },
		{ m->data, m->data_size, CC_DATA, 0 },
	};
	cc__job_set_stub_end(m->job, m->code + m->stub_size);
	m->tsc0 = __rdtsc();
	m->ns0 = raw_ns();
	if ((rc = cc__job_apply(m->job, m->code, cc__job_prefix(m->job) ? m->copy : 0, owned, 2,
				m->data, &m->id)) < 0)
		goto err;
	*out = m;
	return 0;
err:
	if (m->code)
		cc_cache__free(c, m->code, m->code_size);
	if (m->data)
		cc_cache__free(c, m->data, m->data_size);
	cc__job_free(m->job);
	free(m);
	return rc;
}

/* Calls timed so far: claimed indices while fewer than N are claimed (the
 * few in flight counted), then the samples actually written. */
int cc_measure__poll(struct cc_measure *m, uint64_t *done)
{
	uint64_t started;
	int rc = cc_cache__read(m->c, m->data + MD_STARTED, &started, 8);

	if (rc < 0)
		return rc;
	if (started < m->calls) {
		*done = started;
		return 0;
	}
	uint64_t *s = malloc(m->calls * 8);
	if (!s)
		return cc__fail(m->c, CC_PHASE_MEASURE, -ENOMEM, "out of memory");
	rc = cc_cache__read(m->c, m->data + MD_SAMPLES_AT, s, m->calls * 8);
	*done = 0;
	for (uint64_t i = 0; rc == 0 && i < m->calls; i++)
		*done += s[i] != 0;
	free(s);
	return rc;
}

int cc_measure__wait(struct cc_measure *m, int timeout_ms, uint64_t *done)
{
	struct timespec nap = { 0, 5000000 };
	int waited = 0, rc;

	for (;;) {
		if ((rc = cc_measure__poll(m, done)) < 0)
			return rc;
		if (*done >= m->calls)
			return 0;
		if (waited >= timeout_ms)
			return -ETIMEDOUT;
		nanosleep(&nap, NULL);
		waited += 5;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static double pct(const uint64_t *v, size_t n, double p)
{
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);
	return (double)v[i < n ? i : n - 1];
}

int cc_measure__finish(struct cc_measure *m, struct cc_measure_result *res)
{
	struct cc_cache *c = m->c;
	struct cc_undo_stub stub = { .lo = m->code, .hi = m->code + m->stub_size,
				      .prefix = cc__job_prefix(m->job), .copy = m->copy };
	struct cc_patch_stats st = { 0 };
	struct cc_patch_opts po = m->po;
	uint64_t hdr[4];
	int rc;

	memset(res, 0, sizeof *res);
	if (m->finished)
		return cc__fail(c, CC_PHASE_MEASURE, -EALREADY, "the measurement of %s is finished",
				m->name);
	po.stats = &st;
	po.report = NULL;	/* keep what the start reported */
	if ((rc = cc__undo(c, m->id, &po, cc__job_prefix(m->job) ? &stub : &(struct cc_undo_stub){
				   .lo = m->code, .hi = m->code + m->stub_size })) < 0)
		return rc;
	m->finished = true;
	res->kept_code = st.kept_code;
	/* the blocks may be free in the allocator now, but are still mapped
	 * and nobody else allocates in this session */
	uint64_t *s = malloc(m->calls * 8);
	if (!s)
		return cc__fail(c, CC_PHASE_MEASURE, -ENOMEM, "out of memory");
	if ((rc = cc_cache__read(c, m->data, hdr, sizeof hdr)) < 0 ||
	    (rc = cc_cache__read(c, m->data + MD_SAMPLES_AT, s, m->calls * 8)) < 0) {
		free(s);
		return rc;
	}
	/* ticks per ns, over at least 20 ms */
	uint64_t ns = raw_ns() - m->ns0;
	while (ns < 20000000u)
		ns = raw_ns() - m->ns0;
	res->tsc_ghz = (double)(__rdtsc() - m->tsc0) / (double)ns;
	res->resolution_ns = (double)tsc_resolution_ticks() / res->tsc_ghz;
	size_t n = 0;
	for (size_t i = 0; i < m->calls; i++)
		if (s[i] && s[i] != UINT64_MAX)
			s[n++] = s[i];
	res->skipped = hdr[MD_SKIPPED / 8];
	res->calls = n;
	if (n) {
		qsort(s, n, sizeof *s, cmp_u64);
		double sum = 0;
		for (size_t i = 0; i < n; i++)
			sum += (double)s[i];
		res->mean_ns = sum / (double)n / res->tsc_ghz;
		res->p50_ns = pct(s, n, 0.50) / res->tsc_ghz;
		res->p99_ns = pct(s, n, 0.99) / res->tsc_ghz;
		res->min_ns = (double)s[0] / res->tsc_ghz;
		res->max_ns = (double)s[n - 1] / res->tsc_ghz;
	}
	res->has_ipc = false;	/* needs counters read in the stub (rdpmc): no PMU here */
	free(s);
	return 0;
}

int cc__measure_undo_stale(struct cc_cache *c, struct cc_dir_redir *r,
			   const struct cc_patch_opts *opts)
{
	struct cc_undo_stub stub = { .lo = r->dest,
				      .hi = r->stub_end > r->dest ? r->stub_end : r->dest };
	struct cc_reloc *prefix = NULL;
	int rc;

	if (r->detour) {
		if ((rc = cc__redir_prefix(c, r, &prefix)) < 0)
			return rc;
		stub.prefix = prefix;
		stub.copy = r->detour;
	}
	rc = cc__undo(c, r->id, opts, &stub);
	cc_reloc__free(prefix);
	return rc;
}

int cc__fail_stale(struct cc_cache *c, enum cc_phase phase, const struct cc_dir_redir *r,
		   const char *name)
{
	return cc__fail(c, phase, -EEXIST, "%s is still redirected to a measuring stub left by "
			"padrone process %d, which is gone; `restore %s` takes it out", name,
			(int)r->owner_pid, name);
}

void cc_measure__free(struct cc_measure *m)
{
	if (!m)
		return;
	if (!m->finished) {
		struct cc_measure_result r;
		cc_measure__finish(m, &r);
	}
	cc__job_free(m->job);
	free(m);
}

uint64_t cc_measure__calls(const struct cc_measure *m) { return m->calls; }
