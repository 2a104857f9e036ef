/* profile/ on live targets: both sampling backends on a hot loop, a
 * stripped PIE without frame pointers (found through .eh_frame), code
 * without unwind tables (found from the call chain), JIT code named from
 * its perf map file, thread churn, a
 * target taking ~2000 signals a second, a deleted executable; samples only
 * between start and stop; bt of a known call stack; the refusals. Every
 * test checks that the target's own checksums go on unchanged after
 * profiling. */
#include "profile/profile.h"
#include "attach/attach.h"
#include "tests/lib/tu.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROFILE_MS 1200

/* ------------------------------------------------------------ helpers */

struct target {
	struct tu_proc p;
	char checksum[64];	/* the value the target prints, from its first line */
	const char *key;	/* the word that starts those lines: "rate", "threads"... */
	char ready[256];	/* the target's "ready" line */
	long first;		/* the number after key in the first line */
};

static void start_target_args(struct target *t, char *const argv[], const char *key);

static void start_target(struct target *t, const char *path, const char *key)
{
	char *argv[] = { (char *)path, NULL };

	start_target_args(t, argv, key);
}

static void start_target_args(struct target *t, char *const argv[], const char *key)
{
	char line[256];

	ck_assert_int_eq(tu_spawn(&t->p, argv, false), 0);
	ck_assert_int_ge(tu_wait_for(&t->p, "ready", t->ready, sizeof(t->ready), 10000), 0);
	ck_assert_int_ge(tu_wait_for(&t->p, key, line, sizeof(line), 10000), 0);
	const char *c = strstr(line, "checksum ");
	ck_assert_ptr_nonnull(c);
	snprintf(t->checksum, sizeof(t->checksum), "%s", c + 9);
	t->key = key;
	t->first = atol(line + strlen(key));
}

/* The target is still working and its checksum has not changed. */
static void check_target_fine(struct target *t)
{
	char line[256];

	for (int i = 0; i < 3; i++) {
		ck_assert_int_ge(tu_read_line(&t->p, line, sizeof(line), 10000), 0);
		ck_assert_msg(!strstr(line, "BAD"), "target says: %s", line);
		if (strncmp(line, t->key, strlen(t->key))) {
			i--;
			continue;
		}
		const char *c = strstr(line, "checksum ");
		ck_assert_ptr_nonnull(c);
		ck_assert_str_eq(c + 9, t->checksum);
	}
	ck_assert_int_eq(kill(t->p.pid, 0), 0);
}

/* A line with prefix printed now, not one waiting in the pipe: read until
 * a read had to wait for the target. */
static void fresh_line(struct tu_proc *p, const char *prefix, char *line, size_t size)
{
	for (int i = 0; i < 1000; i++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		ck_assert_int_ge(tu_read_line(p, line, size, 5000), 0);
		clock_gettime(CLOCK_MONOTONIC, &b);
		double waited = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
		if (waited > 0.002 && !strncmp(line, prefix, strlen(prefix)))
			return;
	}
	ck_abort_msg("no fresh \"%s\" line", prefix);
}

/* Samples pid for ms with opts; returns the sampler, stopped. */
static struct prof_sampler *sample(pid_t pid, const struct prof_opts *opts, int ms)
{
	struct prof_sampler *s = NULL;
	struct prof_error err;

	ck_assert_msg(prof_sampler__open(pid, opts, &s, &err) == 0, "open: %s", err.msg);
	ck_assert_msg(prof_sampler__start(s) == 0, "start: %s", prof_sampler__errmsg(s));
	usleep((useconds_t)ms * 1000);
	ck_assert_msg(prof_sampler__stop(s) == 0, "stop: %s", prof_sampler__errmsg(s));
	return s;
}

static struct prof_hot *rank(struct prof_sampler *s, struct prof_symbolizer **symp)
{
	struct prof_symbolizer *sym;
	struct prof_hot *h;
	struct prof_error err;

	ck_assert_msg(prof_symbolizer__new(prof_sampler__pid(s), &sym, &err) == 0, "%s", err.msg);
	ck_assert_msg(prof_hot__build(s, sym, &h, &err) == 0, "%s", err.msg);
	*symp = sym;
	return h;
}

/* value and size of symbol name in the (unstripped) ELF file at path */
static void symbol_of(const char *path, const char *name, uint64_t *value, uint64_t *size)
{
	char cmd[512];
	int st;
	unsigned long long v, sz;

	snprintf(cmd, sizeof(cmd), "readelf -sW '%s' | awk '$4 == \"FUNC\" && $8 == \"%s\" "
		 "{ print $2, $3; exit }'", path, name);
	char *out = tu_run(cmd, &st);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(sscanf(out, "%llx %lli", &v, &sz) == 2, "%s not in %s", name, path);
	free(out);
	*value = v;
	*size = sz;
}

/* Load bias of a PIE: where its file offset 0 is mapped in pid. */
static uint64_t load_bias(pid_t pid, const char *path)
{
	char cmd[4400], real[4096];
	int st;
	unsigned long long a = 0;

	ck_assert_ptr_nonnull(realpath(path, real));
	snprintf(cmd, sizeof(cmd), "awk '$6 == \"%s\" && $3 == \"00000000\" { split($1, r, \"-\"); "
		 "print r[1]; exit }' /proc/%d/maps", real, pid);
	char *out = tu_run(cmd, &st);
	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(sscanf(out, "%llx", &a), 1);
	free(out);
	return a;
}

/* The most samples busy threads can give at the sampling frequency, with
 * 10% of slack for the kernel's frequency adjustment. */
static uint64_t max_samples(const struct prof_totals *t, int busy)
{
	return (uint64_t)(1.1 * busy * t->freq_hz * ((double)t->duration_ns * 1e-9)) + 20;
}

static const struct prof_func *find_func(const struct prof_hot *h, const char *name)
{
	for (size_t i = 0; i < prof_hot__count(h); i++)
		if (!strcmp(prof_hot__at(h, i)->name, name))
			return prof_hot__at(h, i);
	return NULL;
}

/* The hottest function is name, with at least min_pct of all the samples:
 * its self_pct, the share a user reads in the report. Samples in the kernel
 * count against it (on a crowded machine a few land in the kernel as the
 * thread is switched back in: 1-3% with eight busy loops on this 2-CPU VM,
 * not enough to matter). */
static void expect_top(const struct prof_hot *h, const char *name, double min_pct)
{
	const struct prof_func *f = prof_hot__at(h, 0);

	ck_assert_ptr_nonnull(f);
	ck_assert_msg(!strcmp(f->name, name), "hottest is %s (%.1f%%), not %s", f->name,
		      f->self_pct, name);
	if (f->self_pct < min_pct) {
		char others[512] = "";
		for (size_t i = 1, k = 0; i < prof_hot__count(h) && i < 6; i++)
			k += (size_t)snprintf(others + k, sizeof(others) - k, "; %s %.1f%% %s",
					      prof_hot__at(h, i)->name, prof_hot__at(h, i)->self_pct,
					      prof_hot__at(h, i)->module);
		ck_abort_msg("%s has %.1f%% of the samples, want >= %.0f%%%s", name, f->self_pct,
			     min_pct, others);
	}
}

/* A target profiled once: started, sampled, ranked. */
struct run {
	struct target t;
	struct prof_sampler *s;
	struct prof_symbolizer *sym;
	struct prof_hot *h;
	struct prof_totals tot;
};

/* Loop tests over ways of sampling: 0 ring (per CPU here, as root), 1
 * bpf, 2 ring per thread. */
static enum prof_backend backend_of(int variant)
{
	return variant == 1 ? PROF_BACKEND_BPF : PROF_BACKEND_RING;
}

static enum prof_ring_mode mode_of(int variant)
{
	return variant == 2 ? PROF_RING_PER_THREAD : PROF_RING_AUTO;
}

static void run_profile_args(struct run *r, char *const argv[], const char *key, int variant)
{
	struct prof_opts o = { .sz = sizeof(o), .backend = backend_of(variant),
			       .ring_mode = mode_of(variant) };

	start_target_args(&r->t, argv, key);
	r->s = sample(r->t.p.pid, &o, PROFILE_MS);
	prof_sampler__totals(r->s, &r->tot);
	ck_assert_msg(!r->tot.fell_back, "fell back: %s", r->tot.fallback_reason);
	r->h = rank(r->s, &r->sym);
}

static void run_profile(struct run *r, const char *path, const char *key,
			enum prof_backend backend)
{
	struct prof_opts o = { .sz = sizeof(o), .backend = backend };

	start_target(&r->t, path, key);
	r->s = sample(r->t.p.pid, &o, PROFILE_MS);
	prof_sampler__totals(r->s, &r->tot);
	ck_assert_msg(!r->tot.fell_back, "fell back: %s", r->tot.fallback_reason);
	r->h = rank(r->s, &r->sym);
}

/* Frees it all; the target must be fine (the caller kills it). */
static void run_finish(struct run *r)
{
	prof_hot__free(r->h);
	prof_symbolizer__free(r->sym);
	prof_sampler__free(r->s);
	check_target_fine(&r->t);
}

/* "sub_<runtime address>" of fn, a function of the unstripped twin of the
 * stripped executable a run is profiling. */
static uint64_t stripped_name(const struct run *r, const char *stripped, const char *twin,
			      const char *fn, char *name, size_t len, uint64_t *size)
{
	uint64_t value, bias = load_bias(r->t.p.pid, tu_path(stripped));

	symbol_of(tu_path(twin), fn, &value, size);
	snprintf(name, len, "sub_%llx", (unsigned long long)(bias + value));
	return bias + value;
}

/* ------------------------------------------------------------ hot loop */

static void hot_loop(enum prof_backend backend)
{
	struct run r;
	const char *path = tu_path("tests/targets/prof_hot");

	run_profile(&r, path, "rate", backend);
	ck_assert_int_eq(r.tot.backend, backend);
	if (backend == PROF_BACKEND_RING)	/* root: per-CPU events are permitted */
		ck_assert_msg(r.tot.ring_mode == PROF_RING_PER_CPU, "ran %s: %s",
			      prof_ring_mode_name(r.tot.ring_mode), r.tot.ring_mode_reason);
	ck_assert_str_eq(r.tot.event, "cpu-clock");
	ck_assert_uint_eq(r.tot.freq_hz, 999);
	ck_assert_uint_ge(r.tot.duration_ns, PROFILE_MS * 1000000ull);
	/* one busy thread at 999 Hz: ~1200 samples; fewer on a loaded machine,
	 * never more (no thread counted twice) */
	ck_assert_msg(r.tot.samples >= 10 && r.tot.samples <= max_samples(&r.tot, 1),
		      "%llu samples", (unsigned long long)r.tot.samples);
	ck_assert_uint_eq(r.tot.threads, 1);

	expect_top(r.h, "prof_spin", 80);
	const struct prof_func *f = prof_hot__at(r.h, 0);
	uint64_t value, size;
	symbol_of(path, "prof_spin", &value, &size);
	uint64_t bias = load_bias(r.t.p.pid, path);
	ck_assert_uint_eq(f->start, bias + value);
	ck_assert_uint_eq(f->end, bias + value + size);
	ck_assert_int_eq(f->bounds, PROF_BOUNDS_SYMTAB);
	ck_assert_ptr_nonnull(strstr(f->module, "prof_hot"));
	ck_assert_int_eq(strlen(f->build_id), 40);
	ck_assert_uint_ge(f->inclusive, f->self);
	ck_assert_uint_eq(prof_hot__totals(r.h)->samples, r.tot.samples);
	/* self counts add up to the samples */
	uint64_t sum = 0;
	for (size_t i = 0; i < prof_hot__count(r.h); i++)
		sum += prof_hot__at(r.h, i)->self;
	ck_assert_uint_eq(sum, r.tot.samples);
	run_finish(&r);
	tu_kill(&r.t.p);
}

START_TEST(ring_finds_the_hot_function)
{
	hot_loop(PROF_BACKEND_RING);
}
END_TEST

START_TEST(bpf_finds_the_hot_function)
{
	hot_loop(PROF_BACKEND_BPF);
}
END_TEST

/* ------------------------------------------------------------ stripped */

START_TEST(stripped_pie_found_through_eh_frame)
{
	struct run r;
	char want[64];
	uint64_t size;

	run_profile(&r, tu_path("tests/targets/prof_hot_stripped"), "rate", (enum prof_backend)_i);
	uint64_t start = stripped_name(&r, "tests/targets/prof_hot_stripped",
				       "tests/targets/prof_hot_pie", "prof_spin", want, sizeof(want), &size);
	expect_top(r.h, want, 80);
	const struct prof_func *f = prof_hot__at(r.h, 0);
	ck_assert_int_eq(f->bounds, PROF_BOUNDS_EH_FRAME);
	ck_assert_uint_eq(f->start, start);
	ck_assert_uint_eq(f->end, start + size);
	run_finish(&r);
	tu_kill(&r.t.p);
}
END_TEST

/* No symbol, no FDE: the caller's `call rel32` names the entry. */
START_TEST(code_without_unwind_tables_found_from_call_chain)
{
	struct run r;
	char want[64];
	uint64_t size, mix_size;

	run_profile(&r, tu_path("tests/targets/prof_nofde_stripped"), "rate", (enum prof_backend)_i);
	uint64_t start = stripped_name(&r, "tests/targets/prof_nofde_stripped",
				       "tests/targets/prof_nofde", "prof_spin", want, sizeof(want), &size);
	expect_top(r.h, want, 80);
	const struct prof_func *f = prof_hot__at(r.h, 0);
	ck_assert_int_eq(f->bounds, PROF_BOUNDS_CALLCHAIN);
	ck_assert_uint_eq(f->start, start);
	ck_assert_uint_ge(f->end, start + size);
	/* its caller, also without FDE, was found the same way */
	stripped_name(&r, "tests/targets/prof_nofde_stripped", "tests/targets/prof_nofde",
		      "prof_mix", want, sizeof(want), &mix_size);
	const struct prof_func *mix = find_func(r.h, want);
	ck_assert_msg(mix, "caller %s not in the list", want);
	ck_assert_uint_ge(mix->inclusive, f->self * 9 / 10);
	run_finish(&r);
	tu_kill(&r.t.p);
}
END_TEST

/* ------------------------------------------------------------ JIT code */

/* Code a JIT generated in anonymous memory is named from the perf map
 * file it wrote, the later of two overlapping lines winning, with the
 * line's bounds; the target's calls go on returning the right value. */
START_TEST(jit_code_named_from_its_perf_map)
{
	struct run r;
	char map[64], module[64];
	unsigned long long start, end;
	struct prof_perfmap_stats st;

	run_profile(&r, tu_path("tests/targets/prof_jit"), "rate", (enum prof_backend)_i);
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)r.t.p.pid);
	snprintf(module, sizeof(module), "[perf-%d.map]", (int)r.t.p.pid);
	ck_assert_int_eq(sscanf(r.t.ready, "ready jit %llx %llx", &start, &end), 2);
	expect_top(r.h, "jit_spin_loop", 80);
	const struct prof_func *f = prof_hot__at(r.h, 0);
	ck_assert_int_eq(f->bounds, PROF_BOUNDS_PERFMAP);
	ck_assert_str_eq(prof_bounds_name(f->bounds), "perfmap");
	ck_assert_uint_eq(f->start, start);
	ck_assert_uint_eq(f->end, end);
	ck_assert_str_eq(f->module, module);
	ck_assert_str_eq(f->build_id, "");
	prof_symbolizer__perfmap_stats(r.sym, &st);
	ck_assert_uint_eq(st.entries, 2);
	ck_assert_uint_eq(st.malformed, 0);
	ck_assert_int_eq(st.err, 0);
	ck_assert_ptr_nonnull(strstr(st.path, map));
	run_finish(&r);
	tu_kill(&r.t.p);
	ck_assert_int_eq(unlink(map), 0);
}
END_TEST

/* ------------------------------------------------------------ threads */

START_TEST(churning_threads_are_all_sampled)
{
	struct run r;

	char *argv[] = { (char *)tu_path("tests/targets/prof_churn"), NULL };
	run_profile_args(&r, argv, "threads", _i);
	ck_assert_int_eq(r.tot.ring_mode, _i == 1 ? PROF_RING_AUTO : _i == 2 ?
			 PROF_RING_PER_THREAD : PROF_RING_PER_CPU);
	/* workers live ~20 ms: over 1.2 s dozens are born (fewer on a crowded
	 * machine), and only the two alive at the start were there before */
	ck_assert_msg(r.tot.new_threads >= 3, "%llu new threads sampled",
		      (unsigned long long)r.tot.new_threads);
	ck_assert_msg(r.tot.samples <= max_samples(&r.tot, 2),
		      "%llu samples in %.2f s from 2 busy threads",
		      (unsigned long long)r.tot.samples, (double)r.tot.duration_ns * 1e-9);
	struct prof_thread th[4096];
	size_t n = prof_sampler__threads(r.s, th, 4096);
	uint64_t from_new = 0;
	for (size_t i = 0; i < n && i < 4096; i++)
		from_new += th[i].new_thread ? th[i].samples : 0;
	ck_assert_msg(from_new * 2 >= r.tot.samples, "only %llu of %llu samples from new threads",
		      (unsigned long long)from_new, (unsigned long long)r.tot.samples);
	expect_top(r.h, "prof_churn_work", 80);
	run_finish(&r);
	tu_kill(&r.t.p);
}
END_TEST

/* The target's CPU time so far, all threads, the dead ones too. */
static double cpu_time_s(pid_t pid)
{
	char cmd[128];
	int st;
	unsigned long long ut = 0, sys = 0;

	snprintf(cmd, sizeof(cmd), "sed 's/.*) //' /proc/%d/stat | cut -d' ' -f12,13", (int)pid);
	char *out = tu_run(cmd, &st);
	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(sscanf(out, "%llu %llu", &ut, &sys), 2);
	free(out);
	return (double)(ut + sys) / (double)sysconf(_SC_CLK_TCK);
}

/* Threads that live ~20 us, thousands a second: a per-thread event never
 * runs a whole period on any of them, a per-CPU one samples them as their
 * CPU time says (about HZ per CPU-second; the bench profile-churn shows
 * ~1.1 HZ, /proc's ticks being coarse). Asked for a third of that. */
START_TEST(short_lived_threads_are_sampled)
{
	struct run r;
	char *argv[] = { (char *)tu_path("tests/targets/prof_churn"), "-l", "20", "-r", "200",
			 NULL };

	start_target_args(&r.t, argv, "threads");
	struct prof_opts o = { .sz = sizeof(o), .backend = backend_of(_i) };
	double cpu0 = cpu_time_s(r.t.p.pid);
	r.s = sample(r.t.p.pid, &o, PROFILE_MS);
	double cpu = cpu_time_s(r.t.p.pid) - cpu0;
	prof_sampler__totals(r.s, &r.tot);
	ck_assert_msg(!r.tot.fell_back, "fell back: %s", r.tot.fallback_reason);
	ck_assert_msg(cpu >= 0.1, "the target ran only %.2f s of CPU", cpu);
	ck_assert_msg((double)r.tot.samples >= cpu * r.tot.freq_hz / 3,
		      "%llu samples for %.2f s of CPU at %u Hz (%s)",
		      (unsigned long long)r.tot.samples, cpu, r.tot.freq_hz,
		      _i ? "bpf" : prof_ring_mode_name(r.tot.ring_mode));
	r.h = rank(r.s, &r.sym);
	run_finish(&r);
	tu_kill(&r.t.p);
}
END_TEST

START_TEST(target_taking_signals_is_sampled)
{
	struct run r;
	char line[256];
	long before, after;

	run_profile(&r, tu_path("tests/targets/prof_signals"), "signals", (enum prof_backend)_i);
	before = r.t.first;
	/* The handler's work and the kernel's delivery of ~2000 signals a
	 * second take 1-5% of the samples (96-97% stay in prof_sig_spin here,
	 * with the machine loaded). This is the sampler alone; under padrone's
	 * ptrace seize (padroned) every signal is also a signal-delivery stop
	 * until the tracer re-delivers it, and the target's own time in that
	 * path (get_signal, ptrace_stop, the sample timer firing as interrupts
	 * come back on after the switch: pvm_irq_enable) is 10-19% of its
	 * samples: a real cost of being traced, which the report rightly
	 * shows. tests/src's e2e test of this target checks its signals. */
	expect_top(r.h, "prof_sig_spin", 80);
	run_finish(&r);
	fresh_line(&r.t.p, "signals", line, sizeof(line));
	after = atol(line + 8);
	/* ~2000 a second on an idle machine; the handler kept running */
	ck_assert_msg(after - before > 100, "signals %ld -> %ld", before, after);
	tu_kill(&r.t.p);
}
END_TEST

/* A thread born between open and start carries an event inherited from
 * its (disabled) creator's, without any FORK record: start finds it in
 * /proc/PID/task and must neither miss it nor count it twice. */
START_TEST(thread_born_between_open_and_start_counted_once)
{
	struct target t;
	struct prof_opts o = { .sz = sizeof(o),
			       .ring_mode = _i ? PROF_RING_PER_CPU : PROF_RING_PER_THREAD };
	struct prof_sampler *s;
	struct prof_error err;
	struct prof_totals tot;
	char line[256];

	char *argv[] = { (char *)tu_path("tests/targets/prof_spawn"), NULL };
	ck_assert_int_eq(tu_spawn(&t.p, argv, false), 0);
	ck_assert_int_ge(tu_wait_for(&t.p, "ready", line, sizeof(line), 10000), 0);
	ck_assert_msg(prof_sampler__open(t.p.pid, &o, &s, &err) == 0, "%s", err.msg);
	kill(t.p.pid, SIGUSR1);
	ck_assert_int_ge(tu_wait_for(&t.p, "spin", line, sizeof(line), 10000), 0);
	ck_assert_int_eq(prof_sampler__start(s), 0);
	usleep(PROFILE_MS * 1000);
	ck_assert_int_eq(prof_sampler__stop(s), 0);
	prof_sampler__totals(s, &tot);
	ck_assert_msg(tot.samples >= 10 && tot.samples <= max_samples(&tot, 1),
		      "%llu samples in %.2f s from one busy thread",
		      (unsigned long long)tot.samples, (double)tot.duration_ns * 1e-9);
	ck_assert_uint_le(tot.threads, 2);	/* the main thread wakes every 10 ms */
	ck_assert_uint_eq(tot.new_threads, 1);
	struct prof_symbolizer *sym;
	struct prof_hot *h = rank(s, &sym);
	expect_top(h, "prof_spawn_work", 80);
	prof_hot__free(h);
	prof_symbolizer__free(sym);
	prof_sampler__free(s);
	const char *c = strstr(line, "checksum ");
	ck_assert_ptr_nonnull(c);
	snprintf(t.checksum, sizeof(t.checksum), "%s", c + 9);
	t.key = "spin";
	check_target_fine(&t);
	tu_kill(&t.p);
}
END_TEST

/* ------------------------------------------------------------ files */

START_TEST(deleted_executable_still_symbolized)
{
	struct target t;
	struct prof_opts o = { .sz = sizeof(o) };
	char tmp[] = "/tmp/padrone-prof-XXXXXX", cmd[512];
	int fd = mkstemp(tmp), st;

	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 755 '%s'", tu_path("tests/targets/prof_hot"),
		 tmp, tmp);
	free(tu_run(cmd, &st));
	ck_assert_int_eq(WEXITSTATUS(st), 0);
	start_target(&t, tmp, "rate");
	ck_assert_int_eq(unlink(tmp), 0);
	struct prof_sampler *s = sample(t.p.pid, &o, 600);
	struct prof_symbolizer *sym;
	struct prof_hot *h = rank(s, &sym);
	expect_top(h, "prof_spin", 80);
	ck_assert_msg(strstr(prof_hot__at(h, 0)->module, "(deleted)"), "module %s",
		      prof_hot__at(h, 0)->module);
	prof_hot__free(h);
	prof_symbolizer__free(sym);
	prof_sampler__free(s);
	check_target_fine(&t);
	tu_kill(&t.p);
}
END_TEST

/* A library dlopen'd, sampled, then dlclose'd before the report: the
 * MMAP2 records of the sampling still name its code. */
START_TEST(code_unmapped_before_the_report_still_symbolized)
{
	struct tu_proc p;
	char lib[4096], line[256];
	char *argv[] = { (char *)tu_path("tests/targets/prof_dlopen"), lib, NULL };
	struct prof_opts o = { .sz = sizeof(o) };
	struct prof_sampler *s;
	struct prof_error err;

	ck_assert_ptr_nonnull(realpath(tu_path("tests/targets/.libs/libprof_plugin.so"), lib));
	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_ge(tu_wait_for(&p, "unloaded 1", line, sizeof(line), 10000), 0);
	ck_assert_msg(prof_sampler__open(p.pid, &o, &s, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(prof_sampler__start(s), 0);
	ck_assert_int_ge(tu_wait_for(&p, "unloaded 2", line, sizeof(line), 10000), 0);
	ck_assert_int_eq(prof_sampler__stop(s), 0);
	/* now the library is not mapped: only the sampler saw it */
	char cmd[4200];
	int st;
	snprintf(cmd, sizeof(cmd), "grep -c libprof_plugin /proc/%d/maps", p.pid);
	char *out = tu_run(cmd, &st);
	ck_assert_str_eq(out, "0\n");
	free(out);
	struct prof_totals tot;
	prof_sampler__totals(s, &tot);
	ck_assert_uint_ge(tot.mmaps, 1);
	struct prof_symbolizer *sym;
	struct prof_hot *h = rank(s, &sym);
	expect_top(h, "prof_plugin_spin", 80);
	ck_assert_str_eq(prof_hot__at(h, 0)->module, lib);
	ck_assert_int_eq(prof_hot__at(h, 0)->bounds, PROF_BOUNDS_SYMTAB);
	prof_hot__free(h);
	prof_symbolizer__free(sym);
	prof_sampler__free(s);
	const char *c = strstr(line, "checksum ");
	ck_assert_ptr_nonnull(c);
	char want[64];
	snprintf(want, sizeof(want), "%s", c);
	ck_assert_int_ge(tu_wait_for(&p, "unloaded 3", line, sizeof(line), 10000), 0);
	ck_assert_str_eq(strstr(line, "checksum "), want);
	tu_kill(&p);
}
END_TEST

START_TEST(libc_and_plt_symbolized_in_a_live_process)
{
	struct target t;
	struct prof_symbolizer *sym;
	struct prof_error err;
	struct prof_sym ps;
	char cmd[512];
	int st;

	start_target(&t, tu_path("tests/targets/prof_hot"), "rate");
	ck_assert_int_eq(prof_symbolizer__new(t.p.pid, &sym, &err), 0);
	/* a PLT entry of the executable */
	snprintf(cmd, sizeof(cmd), "objdump -d -j .plt -j .plt.sec '%s' | "
		 "sed -n 's/^\\([0-9a-f]*\\) <\\(printf@plt\\|puts@plt\\)>:$/\\1 \\2/p' | head -1",
		 tu_path("tests/targets/prof_hot"));
	char *out = tu_run(cmd, &st);
	unsigned long long a;
	char name[64];
	ck_assert_int_eq(sscanf(out, "%llx %63s", &a, name), 2);
	free(out);
	uint64_t bias = load_bias(t.p.pid, tu_path("tests/targets/prof_hot"));
	ck_assert_int_eq(prof_symbolizer__lookup(sym, bias + a + 4, &ps), 0);
	ck_assert_str_eq(ps.name, name);
	ck_assert_uint_eq(ps.start, bias + a);
	ck_assert_int_eq(ps.bounds, PROF_BOUNDS_DYNSYM);
	/* a libc function, through libc's own dynsym */
	out = tu_run("nm -D --defined-only $(ldd tests/targets/prof_hot | awk '/libc.so/ { print $3 }')"
		     " | awk '$3 ~ /^getpid(@|$)/ { print $1 }'", &st);
	unsigned long long off;
	ck_assert_int_eq(sscanf(out, "%llx", &off), 1);
	free(out);
	snprintf(cmd, sizeof(cmd), "awk '$6 ~ /libc.so/ && $3 == \"00000000\" { split($1, r, \"-\"); "
		 "print r[1]; exit }' /proc/%d/maps", t.p.pid);
	out = tu_run(cmd, &st);
	unsigned long long libc_base;
	ck_assert_int_eq(sscanf(out, "%llx", &libc_base), 1);
	free(out);
	ck_assert_int_eq(prof_symbolizer__lookup(sym, libc_base + off + 1, &ps), 0);
	ck_assert_str_eq(ps.name, "getpid");
	ck_assert_ptr_nonnull(strstr(ps.module, "libc.so"));
	ck_assert_int_eq(strlen(ps.build_id), 40);
	/* no mapping at all */
	ck_assert_int_eq(prof_symbolizer__lookup(sym, 0x10, &ps), -ENOENT);
	ck_assert_str_eq(ps.name, "[unknown]");
	prof_symbolizer__free(sym);
	check_target_fine(&t);
	tu_kill(&t.p);
}
END_TEST

/* ------------------------------------------------------------ bt */

START_TEST(bt_shows_the_known_call_stack)
{
	struct target t;
	struct attach_target *at;
	struct attach_error aerr;
	struct prof_symbolizer *sym;
	struct prof_error err;
	struct prof_frame fr[64];
	const char *want[] = { "prof_spin", "prof_mix", "prof_unit", "main" };
	struct prof_walk_stop stop;
	int n = 0, tries;

	start_target(&t, tu_path(_i ? "tests/targets/prof_hot_pie" : "tests/targets/prof_hot"), "rate");
	ck_assert_msg(attach_seize(t.p.pid, NULL, &at, &aerr) == 0, "%s", aerr.msg);
	ck_assert_int_eq(prof_symbolizer__new(t.p.pid, &sym, &err), 0);
	/* the thread is in prof_spin ~99% of the time */
	for (tries = 0; tries < 20; tries++) {
		n = prof_symbolizer__backtrace(sym, at, t.p.pid, fr, 64, &stop);
		ck_assert_msg(n > 0, "bt: %s", prof_symbolizer__errmsg(sym));
		if (!strcmp(fr[0].sym.name, "prof_spin"))
			break;
		usleep(10000);
	}
	ck_assert_msg(tries < 20, "never caught in prof_spin (last: %s)", fr[0].sym.name);
	ck_assert_int_ge(n, 4);
	for (int i = 0; i < 4; i++)
		ck_assert_msg(!strcmp(fr[i].sym.name, want[i]), "frame %d is %s, not %s", i,
			      fr[i].sym.name, want[i]);
	ck_assert_uint_gt(fr[1].sp, fr[0].sp);
	/* to _start, whose unwind information marks it the outermost */
	ck_assert_msg(stop.why == PROF_WALK_COMPLETE, "%s", stop.msg);
	ck_assert_str_eq(fr[n - 1].sym.name, "_start");
	prof_symbolizer__free(sym);
	ck_assert_int_eq(attach_target__detach(at), 0);
	check_target_fine(&t);
	tu_kill(&t.p);
}
END_TEST

/* attach/'s hotloop, profiled while seized (as padrone does), then
 * detached: the hot function is the one the target names, at the address
 * it prints, and its ticks' checksums are what `hotloop -e N` computes. */
START_TEST(seized_hotloop_profiled_then_detached)
{
	struct tu_proc p;
	char *argv[] = { (char *)tu_path("tests/targets/hotloop"), NULL };
	char line[256], cmd[512];
	struct attach_target *at;
	struct attach_error aerr;
	struct prof_opts o = { .sz = sizeof(o), .backend = _i ? PROF_BACKEND_BPF : PROF_BACKEND_RING };
	unsigned long long addr;
	int st;

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_ge(tu_wait_for(&p, "ready", line, sizeof(line), 10000), 0);
	ck_assert_int_eq(sscanf(line, "ready %*d hot_function %llx", &addr), 1);
	ck_assert_msg(attach_seize(p.pid, NULL, &at, &aerr) == 0, "%s", aerr.msg);
	struct prof_sampler *s = sample(p.pid, &o, PROFILE_MS);
	struct prof_symbolizer *sym;
	struct prof_hot *h = rank(s, &sym);
	expect_top(h, "hot_function", 80);
	ck_assert_uint_eq(prof_hot__at(h, 0)->start, addr);
	prof_hot__free(h);
	prof_symbolizer__free(sym);
	prof_sampler__free(s);
	ck_assert_int_eq(attach_target__detach(at), 0);
	fresh_line(&p, "tick", line, sizeof(line));
	long tick;
	char sum[64];
	ck_assert_int_eq(sscanf(line, "tick %ld checksum %63s", &tick, sum), 2);
	snprintf(cmd, sizeof(cmd), "'%s' -e %ld", tu_path("tests/targets/hotloop"), tick);
	char *out = tu_run(cmd, &st);
	ck_assert_ptr_nonnull(out);
	out[strcspn(out, "\n")] = 0;
	ck_assert_str_eq(out, line);
	free(out);
	tu_kill(&p);
}
END_TEST

/* The target exits while sampled: stop still works, the samples are kept
 * and named (its files are opened by path once /proc/PID is gone). */
START_TEST(target_exiting_while_sampled)
{
	struct tu_proc p;
	char *argv[] = { (char *)tu_path("tests/targets/prof_hot"), "0.4", NULL };
	char line[256];
	struct prof_opts o = { .sz = sizeof(o), .backend = _i ? PROF_BACKEND_BPF : PROF_BACKEND_RING };
	struct prof_sampler *s;
	struct prof_symbolizer *sym;
	struct prof_hot *h;
	struct prof_error err;
	struct prof_totals tot;

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_ge(tu_wait_for(&p, "ready", line, sizeof(line), 10000), 0);
	ck_assert_int_eq(prof_symbolizer__new(p.pid, &sym, &err), 0);
	ck_assert_msg(prof_sampler__open(p.pid, &o, &s, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(prof_sampler__start(s), 0);
	int st = tu_wait(&p, 10000);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);	/* reaped: /proc/PID is gone */
	ck_assert_int_eq(prof_sampler__stop(s), 0);
	prof_sampler__totals(s, &tot);
	ck_assert_uint_gt(tot.samples, 20);
	ck_assert_msg(prof_hot__build(s, sym, &h, &err) == 0, "%s", err.msg);
	expect_top(h, "prof_spin", 80);
	prof_hot__free(h);
	prof_symbolizer__free(sym);
	prof_sampler__free(s);
	tu_kill(&p);
}
END_TEST

/* bt of a thread other than the main one, started after the seize. */
START_TEST(bt_of_a_new_thread)
{
	struct tu_proc p;
	char *argv[] = { (char *)tu_path("tests/targets/prof_spawn"), NULL };
	char line[256];
	struct attach_target *at;
	struct attach_error aerr;
	struct prof_symbolizer *sym;
	struct prof_error err;
	struct prof_frame fr[64];
	struct prof_walk_stop stop;
	int n = 0, tries;
	long tid;

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_ge(tu_wait_for(&p, "ready", line, sizeof(line), 10000), 0);
	ck_assert_msg(attach_seize(p.pid, NULL, &at, &aerr) == 0, "%s", aerr.msg);
	kill(p.pid, SIGUSR1);
	ck_assert_int_ge(tu_wait_for(&p, "spawned", line, sizeof(line), 10000), 0);
	ck_assert_int_eq(sscanf(line, "spawned %ld", &tid), 1);
	ck_assert_int_eq(prof_symbolizer__new(p.pid, &sym, &err), 0);
	for (tries = 0; tries < 20; tries++) {
		n = prof_symbolizer__backtrace(sym, at, (pid_t)tid, fr, 64, &stop);
		ck_assert_msg(n > 0, "bt: %s", prof_symbolizer__errmsg(sym));
		if (!strcmp(fr[0].sym.name, "prof_spawn_work"))
			break;
		usleep(10000);
	}
	ck_assert_msg(tries < 20, "never caught in prof_spawn_work (last: %s)", fr[0].sym.name);
	ck_assert_int_ge(n, 3);
	ck_assert_str_eq(fr[1].sym.name, "spin");
	/* the thread starts in libc (start_thread, clone3) */
	ck_assert_ptr_nonnull(strstr(fr[n - 1].sym.module, "libc.so"));
	ck_assert_msg(stop.why == PROF_WALK_COMPLETE, "%s", stop.msg);
	prof_symbolizer__free(sym);
	ck_assert_int_eq(attach_target__detach(at), 0);
	ck_assert_int_ge(tu_wait_for(&p, "spin", line, sizeof(line), 10000), 0);
	ck_assert_ptr_null(strstr(line, "BAD"));
	tu_kill(&p);
}
END_TEST

/* ------------------------------------------------------------ refusals */

/* Samples are taken between start and stop only, not from open on nor
 * while stopped (each costs the target ~18 us on a VM). */
START_TEST(samples_only_between_start_and_stop)
{
	struct target t;
	struct prof_opts o = { .sz = sizeof(o), .backend = (enum prof_backend)_i };
	struct prof_sampler *s = NULL;
	struct prof_error err;
	struct prof_totals tot;

	start_target(&t, tu_path("tests/targets/prof_hot"), "rate");
	ck_assert_msg(prof_sampler__open(t.p.pid, &o, &s, &err) == 0, "open: %s", err.msg);
	for (int round = 0; round < 2; round++) {
		usleep(600000);	/* opened or stopped: nothing may be sampled */
		ck_assert_msg(prof_sampler__start(s) == 0, "start: %s", prof_sampler__errmsg(s));
		usleep(200000);
		ck_assert_int_eq(prof_sampler__stop(s), 0);
	}
	prof_sampler__totals(s, &tot);
	ck_assert_msg(!tot.fell_back, "fell back: %s", tot.fallback_reason);
	/* ~400 ms sampled: at most ~460 samples; 1.6 s would give ~1600 */
	ck_assert_msg(tot.samples >= 1 && tot.samples <= max_samples(&tot, 1),
		      "%llu samples in %.3f s sampled", (unsigned long long)tot.samples,
		      (double)tot.duration_ns * 1e-9);
	prof_sampler__free(s);
	check_target_fine(&t);
	tu_kill(&t.p);
}
END_TEST

START_TEST(refuses_more_than_10khz_without_a_pmu)
{
	struct target t;
	struct prof_opts o = { .sz = sizeof(o), .freq_hz = 20000 };
	struct prof_sampler *s = (void *)1;
	struct prof_error err;

	start_target(&t, tu_path("tests/targets/prof_hot"), "rate");
	ck_assert_int_eq(prof_sampler__open(t.p.pid, &o, &s, &err), -EINVAL);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(err.err, -EINVAL);
	ck_assert_str_eq(err.msg, "refusing to sample at 20000 Hz without a hardware PMU: "
				  "cpu-clock costs the target ~20 us per sample and above 10000 Hz "
				  "can lock up a CPU");
	check_target_fine(&t);
	tu_kill(&t.p);
}
END_TEST

START_TEST(refuses_a_missing_process)
{
	struct prof_sampler *s = NULL;
	struct prof_symbolizer *sym = NULL;
	struct prof_error err;
	struct tu_proc p;
	char *argv[] = { "/bin/true", NULL };

	/* a pid that surely is free: one that just exited and was reaped */
	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	pid_t pid = p.pid;
	tu_wait(&p, 5000);
	tu_kill(&p);
	ck_assert_int_eq(prof_sampler__open(pid, NULL, &s, &err), -ESRCH);
	char want[64];
	snprintf(want, sizeof(want), "no such process: %d", pid);
	ck_assert_str_eq(err.msg, want);
	ck_assert_ptr_null(s);
	ck_assert_int_lt(prof_symbolizer__new(pid, &sym, &err), 0);
	ck_assert_ptr_null(sym);
	ck_assert_int_eq(prof_sampler__open(0, NULL, &s, &err), -EINVAL);
}
END_TEST

/* Without CAP_BPF the bpf backend cannot load: the sampler says why and
 * samples with the ring backend (user code only, as an unprivileged user
 * may). Runs as nobody in a child, on a target owned by nobody. */
START_TEST(bpf_falls_back_to_the_ring_when_it_cannot_load)
{
	struct passwd *pw = getpwnam("nobody");
	int pfd[2];

	ck_assert_ptr_nonnull(pw);
	const char *prof_hot = tu_public_path("tests/targets/prof_hot");
	ck_assert_ptr_nonnull(prof_hot);
	pid_t target = fork();
	ck_assert_int_ge(target, 0);
	if (target == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		if (setgid(pw->pw_gid) || setuid(pw->pw_uid))
			_exit(99);
		execl(prof_hot, "prof_hot", (char *)NULL);
		_exit(98);
	}
	usleep(200000);
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t prof = fork();
	ck_assert_int_ge(prof, 0);
	if (prof == 0) {
		struct prof_opts o = { .sz = sizeof(o), .backend = PROF_BACKEND_BPF };
		struct prof_sampler *s;
		struct prof_symbolizer *sym;
		struct prof_hot *h;
		struct prof_error err;
		struct prof_totals tot;
		char msg[1024];
		if (setgid(pw->pw_gid) || setuid(pw->pw_uid))
			_exit(99);
		if (prof_sampler__open(target, &o, &s, &err) < 0) {
			dprintf(pfd[1], "open failed: %s\n", err.msg);
			_exit(1);
		}
		prof_sampler__start(s);
		usleep(1000000);
		prof_sampler__stop(s);
		prof_sampler__totals(s, &tot);
		if (prof_symbolizer__new(target, &sym, &err) < 0 ||
		    prof_hot__build(s, sym, &h, &err) < 0) {
			dprintf(pfd[1], "rank failed: %s\n", err.msg);
			_exit(1);
		}
		snprintf(msg, sizeof(msg), "%d %s %d %llu %s|%s\n", tot.fell_back,
			 prof_backend_name(tot.backend), tot.kernel, (unsigned long long)tot.samples,
			 prof_hot__count(h) ? prof_hot__at(h, 0)->name : "-", tot.fallback_reason);
		if (write(pfd[1], msg, strlen(msg)) < 0)
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	char buf[1024] = "";
	ssize_t k = 0, r;
	while ((r = read(pfd[0], buf + k, sizeof(buf) - 1 - (size_t)k)) > 0)
		k += r;
	buf[k > 0 ? k : 0] = 0;
	close(pfd[0]);
	int st;
	waitpid(prof, &st, 0);
	/* the target lived through it (its checksum is checked by the tests
	 * that can read its output) */
	ck_assert_int_eq(waitpid(target, NULL, WNOHANG), 0);
	kill(target, SIGKILL);
	waitpid(target, NULL, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %s", buf);
	int fell, kern;
	char backend[16], top[128];
	unsigned long long samples;
	ck_assert_msg(sscanf(buf, "%d %15s %d %llu %127[^|]", &fell, backend, &kern, &samples,
			     top) == 5, "%s", buf);
	ck_assert_int_eq(fell, 1);
	ck_assert_str_eq(backend, "ring");
	ck_assert_int_eq(kern, 0);
	ck_assert_uint_gt(samples, 10);	/* ~1000 on an idle machine */
	ck_assert_str_eq(top, "prof_spin");
	ck_assert_msg(strstr(buf, "cannot load the BPF program") && strstr(buf, "CAP_BPF"), "%s", buf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("profile-live");
	TCase *tc = tcase_create("live");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, ring_finds_the_hot_function);
	tcase_add_test(tc, bpf_finds_the_hot_function);
	tcase_add_loop_test(tc, stripped_pie_found_through_eh_frame, 0, 2);
	tcase_add_loop_test(tc, code_without_unwind_tables_found_from_call_chain, 0, 2);
	tcase_add_loop_test(tc, jit_code_named_from_its_perf_map, 0, 2);
	tcase_add_loop_test(tc, churning_threads_are_all_sampled, 0, 3);
	tcase_add_loop_test(tc, short_lived_threads_are_sampled, 0, 2);
	tcase_add_loop_test(tc, target_taking_signals_is_sampled, 0, 2);
	tcase_add_loop_test(tc, thread_born_between_open_and_start_counted_once, 0, 2);
	tcase_add_test(tc, deleted_executable_still_symbolized);
	tcase_add_test(tc, code_unmapped_before_the_report_still_symbolized);
	tcase_add_test(tc, libc_and_plt_symbolized_in_a_live_process);
	tcase_add_loop_test(tc, bt_shows_the_known_call_stack, 0, 2);
	tcase_add_test(tc, bt_of_a_new_thread);
	tcase_add_loop_test(tc, seized_hotloop_profiled_then_detached, 0, 2);
	tcase_add_loop_test(tc, target_exiting_while_sampled, 0, 2);
	tcase_add_loop_test(tc, samples_only_between_start_and_stop, 0, 2);
	tcase_add_test(tc, refuses_more_than_10khz_without_a_pmu);
	tcase_add_test(tc, refuses_a_missing_process);
	tcase_add_test(tc, bpf_falls_back_to_the_ring_when_it_cannot_load);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
