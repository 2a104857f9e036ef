/* Live replacement, restore and measurement on running targets, checked by
 * what the targets print themselves: cc_vecadd's checksum per round,
 * cc_threads' per-worker mismatch counts and its blocker's wake-ups. */
#include "attach/attach.h"
#include "codecache/codecache.h"
#include "tests/lib/tu.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct live {
	struct tu_proc p;
	struct attach_target *t;
	struct cc_cache *c;
	struct cc_syms *sy;
};

static void attach_all(struct live *l)
{
	struct attach_error aerr;
	struct cc_error err;

	ck_assert_msg(attach_seize(l->p.pid, NULL, &l->t, &aerr) == 0, "%s", aerr.msg);
	ck_assert_msg(cc_cache__open(l->t, NULL, &l->c, &err) == 0, "%s", err.msg);
	ck_assert_msg(cc_syms__open(l->p.pid, &l->sy, &err) == 0, "%s", err.msg);
}

static void detach_all(struct live *l)
{
	cc_syms__free(l->sy);
	cc_cache__close(l->c);
	if (l->t)
		ck_assert_int_eq(attach_target__detach(l->t), 0);
	l->sy = NULL;
	l->c = NULL;
	l->t = NULL;
}

static void start(struct live *l, const char *prog, const char *arg1, const char *arg2,
		  const char *ready)
{
	char *argv[] = { (char *)tu_path(prog), (char *)arg1, (char *)arg2, NULL };
	char line[256];

	memset(l, 0, sizeof *l);
	if (!arg1)
		argv[1] = NULL;
	ck_assert_int_eq(tu_spawn(&l->p, argv, false), 0);
	ck_assert_msg(tu_wait_for(&l->p, ready, line, sizeof line, 10000) >= 0, "%s: no %s",
		      prog, ready);
	attach_all(l);
}

static void end(struct live *l)
{
	detach_all(l);
	tu_kill(&l->p);
}

static struct cc_func func(struct live *l, const char *name)
{
	struct cc_func f;
	struct cc_error err;
	ck_assert_msg(cc_syms__func(l->sy, name, &f, &err) == 0, "%s", err.msg);
	return f;
}

static struct cc_image *image(const char *rel, const char *sym)
{
	struct cc_image_opts o = { .sz = sizeof o, .symbol = sym };
	struct cc_image *im;
	struct cc_error err;
	ck_assert_msg(cc_image__open(tu_path(rel), &o, &im, &err) == 0, "%s", err.msg);
	return im;
}

static int replace(struct live *l, const char *name, const char *obj, struct cc_patch_opts *o)
{
	struct cc_func f = func(l, name);
	struct cc_image *im = image(obj, name);
	int rc = cc_cache__replace(l->c, &f, im, cc_syms__resolve, l->sy, o);
	cc_image__free(im);
	return rc;
}

static int restore(struct live *l, const char *name, struct cc_patch_opts *o)
{
	struct cc_func f = func(l, name);
	return cc_cache__restore(l->c, f.addr, name, o);
}

/* The next "round N: X ns/call checksum C" of cc_vecadd. */
static void round_of(struct live *l, double *ns, unsigned *sum)
{
	char line[256];
	long r;
	ck_assert_msg(tu_wait_for(&l->p, "round ", line, sizeof line, 10000) >= 0, "no round");
	ck_assert_msg(sscanf(line, "round %ld: %lf ns/call checksum %x", &r, ns, sum) == 3, "%s",
		      line);
}

/* Wait until one of pid's threads sleeps in system call nr. */
static void wait_in_syscall(pid_t pid, long nr)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "grep -l '^%ld ' /proc/%d/task/*/syscall 2>/dev/null", nr, pid);
	for (int i = 0; i < 500; i++) {
		int st;
		char *out = tu_run(cmd, &st);
		bool found = out && out[0];
		free(out);
		if (found)
			return;
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	ck_abort_msg("no thread of %d in system call %ld", pid, nr);
}


/* cc_reader's FIFOs, in a directory of their own. */
struct fifos {
	char dir[64], in[96], sig[96];
};

static void fifos_make(struct fifos *f)
{
	snprintf(f->dir, sizeof f->dir, "/tmp/padrone-reader.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	snprintf(f->in, sizeof f->in, "%s/in", f->dir);
	snprintf(f->sig, sizeof f->sig, "%s/sig", f->dir);
	ck_assert_int_eq(mkfifo(f->in, 0600), 0);
	ck_assert_int_eq(mkfifo(f->sig, 0600), 0);
}

static void fifos_remove(struct fifos *f)
{
	unlink(f->in);
	unlink(f->sig);
	rmdir(f->dir);
}

/* One byte into a FIFO the target holds open. */
static void feed(const char *fifo, char c)
{
	int fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, &c, 1), 1);
	close(fd);
}

/* Wait for the line cc_reader prints after reading c. */
static void got(struct live *l, char c)
{
	char line[256], want[64];
	snprintf(want, sizeof want, "reader: got %c ret 1", c);
	ck_assert_int_ge(tu_wait_for(&l->p, "reader: got", line, sizeof line, 5000), 0);
	ck_assert_str_eq(line, want);
}

/* The pc of pid's (only) thread once it sleeps in read(2): the last field
 * of /proc/PID/syscall. */
static uint64_t blocked_pc(pid_t pid)
{
	char path[64], buf[512];
	uint64_t pc = 0;

	wait_in_syscall(pid, SYS_read);
	snprintf(path, sizeof path, "/proc/%d/syscall", pid);
	FILE *f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
	fclose(f);
	const char *last = strrchr(buf, ' ');
	ck_assert_ptr_nonnull(last);
	ck_assert_int_eq(sscanf(last, " 0x%" SCNx64, &pc), 1);
	return pc;
}

/* Read cc_threads' output for at least ms, until every worker has printed
 * (10 s at most, for a busy machine): none may report a mismatch, and each
 * one's call count only grows. */
static void workers_fine(struct live *l, int nworkers, int ms)
{
	unsigned long last[64] = { 0 };
	char line[256];
	int seen = 0;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		long el = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if ((el >= ms && seen == nworkers) || el >= 10000)
			break;
		int n = tu_read_line(&l->p, line, sizeof line, 200);
		if (n == -ETIMEDOUT)
			continue;
		ck_assert_int_ge(n, 0);
		int id;
		unsigned long calls, bad;
		if (sscanf(line, "worker %d: calls %lu mismatches %lu", &id, &calls, &bad) == 3) {
			ck_assert_msg(bad == 0, "%s", line);
			ck_assert(id >= 0 && id < nworkers);
			ck_assert_uint_ge(calls, last[id]);
			seen += last[id] == 0;
			last[id] = calls;
		}
	}
	for (int i = 0; i < nworkers; i++)
		ck_assert_msg(last[i] > 0, "worker %d printed nothing in 10 s", i);
}

/* ------------------------------------------------------------------ tests */

START_TEST(vecadd_replaced_live_keeps_its_checksum)
{
	struct live l;
	double ns0, ns;
	unsigned sum0, sum;
	char report[2048];
	struct cc_patch_stats st;
	struct cc_patch_opts o = { .sz = sizeof o, .report = report, .report_size = sizeof report,
				   .stats = &st };

	start(&l, "tests/targets/cc_vecadd", NULL, NULL, "cc_vecadd:");
	round_of(&l, &ns0, &sum0);
	ck_assert_msg(replace(&l, "vecadd", "tests/codecache/repl/vecadd_avx2.o", &o) == 0, "%s",
		      cc_cache__errmsg(l.c));
	ck_assert_uint_eq(st.threads, 1);
	ck_assert_uint_gt(st.stop_ns, 0);
	ck_assert_msg(strstr(report, "stopped the world for "), "%s", report);
	/* the code cache: r-x and rw-, nothing writable and executable */
	char cmd[96];
	int st_;
	snprintf(cmd, sizeof cmd, "awk '$2 ~ /wx/' /proc/%d/maps", l.p.pid);
	char *wx = tu_run(cmd, &st_);
	ck_assert_msg(wx && !wx[0], "writable and executable: %s", wx);
	free(wx);
	for (int i = 0; i < 3; i++) {
		round_of(&l, &ns, &sum);
		ck_assert_uint_eq(sum, sum0);
	}
	ck_assert_msg(restore(&l, "vecadd", &o) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert(!st.kept_code);
	for (int i = 0; i < 2; i++) {
		round_of(&l, &ns, &sum);
		ck_assert_uint_eq(sum, sum0);
	}
	end(&l);
}
END_TEST

/* The mappings of pid that overlap [lo, hi): how many, and how many of
 * them are executable, and writable and executable. */
static void maps_in(pid_t pid, uint64_t lo, uint64_t hi, int *n, int *x, int *wx)
{
	char path[64], line[512];

	*n = *x = *wx = 0;
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof line, f)) {
		uint64_t a, b;
		char perms[8];
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &a, &b, perms) != 3 || b <= lo ||
		    a >= hi)
			continue;
		(*n)++;
		*x += perms[2] == 'x';
		*wx += perms[1] == 'w' && perms[2] == 'x';
	}
	fclose(f);
}

/* A shared object goes in an area of its own, each segment with its own
 * protection; restore unmaps it. */
START_TEST(vecadd_replaced_by_a_shared_object_and_its_area_unmapped_on_restore)
{
	struct live l;
	double ns;
	unsigned sum0, sum;
	char report[2048];
	struct cc_patch_stats st;
	struct cc_patch_opts o = { .sz = sizeof o, .report = report, .report_size = sizeof report,
				   .stats = &st };
	struct cc_redirect_info ri;
	uint64_t entry, code, size;
	int n, x, wx;

	start(&l, "tests/targets/cc_vecadd", NULL, NULL, "cc_vecadd:");
	round_of(&l, &ns, &sum0);
	ck_assert_msg(replace(&l, "vecadd", "tests/codecache/repl/vecadd_avx2.so", &o) == 0, "%s",
		      cc_cache__errmsg(l.c));
	const char *at = strstr(report, "vecadd_avx2.so:vecadd: entry 0x");
	ck_assert_msg(at && sscanf(at, "vecadd_avx2.so:vecadd: entry 0x%" SCNx64 ", %" SCNu64
				   " bytes of code at 0x%" SCNx64 ", no data", &entry, &size,
				   &code) == 3, "%s", report);
	ck_assert_uint_eq(size % 4096, 0);
	ck_assert(entry > code && entry < code + size);
	ck_assert_int_eq(cc_cache__redirects(l.c, &ri, 1), 1);
	ck_assert_msg(ri.dest == entry, "%s", report);
	ck_assert_msg(strstr(ri.source, "vecadd_avx2.so:vecadd"), "%s", ri.source);
	/* its segments: one executable at least, none writable too */
	maps_in(l.p.pid, code, code + size, &n, &x, &wx);
	ck_assert_int_ge(n, 2);
	ck_assert_int_ge(x, 1);
	ck_assert_int_eq(wx, 0);
	for (int i = 0; i < 3; i++) {
		round_of(&l, &ns, &sum);
		ck_assert_uint_eq(sum, sum0);
	}
	ck_assert_msg(restore(&l, "vecadd", &o) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_msg(!st.kept_code, "%s", report);
	maps_in(l.p.pid, code, code + size, &n, &x, &wx);
	ck_assert_msg(n == 0, "%d mappings left in 0x%" PRIx64 "-0x%" PRIx64, n, code, code + size);
	for (int i = 0; i < 2; i++) {
		round_of(&l, &ns, &sum);
		ck_assert_uint_eq(sum, sum0);
	}
	end(&l);
}
END_TEST

START_TEST(the_replacement_outlives_the_session_and_a_later_one_restores_it)
{
	struct live l;
	double ns;
	unsigned sum0, sum;
	struct cc_redirect_info ri;

	start(&l, "tests/targets/cc_vecadd", NULL, NULL, "cc_vecadd:");
	round_of(&l, &ns, &sum0);
	ck_assert_int_eq(replace(&l, "vecadd", "tests/codecache/repl/vecadd_avx2.o", NULL), 0);
	detach_all(&l);
	for (int i = 0; i < 2; i++) {
		round_of(&l, &ns, &sum);
		ck_assert_uint_eq(sum, sum0);
	}
	attach_all(&l);
	ck_assert(cc_cache__exists(l.c));
	ck_assert_int_eq(cc_cache__redirects(l.c, &ri, 1), 1);
	ck_assert_str_eq(ri.name, "vecadd");
	ck_assert_msg(strstr(ri.source, "vecadd_avx2.o:vecadd"), "%s", ri.source);
	ck_assert_int_eq(restore(&l, "vecadd", NULL), 0);
	ck_assert_int_eq(cc_cache__redirects(l.c, NULL, 0), 0);
	round_of(&l, &ns, &sum);
	ck_assert_uint_eq(sum, sum0);
	end(&l);
}
END_TEST

START_TEST(sigkill_of_padrone_right_after_a_replacement_leaves_the_target_fine)
{
	struct live l;
	double ns;
	unsigned sum0, sum;

	start(&l, "tests/targets/cc_vecadd", NULL, NULL, "cc_vecadd:");
	detach_all(&l);
	round_of(&l, &ns, &sum0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {	/* padrone: attach, replace, die */
		struct live me = l;
		attach_all(&me);
		if (replace(&me, "vecadd", "tests/codecache/repl/vecadd_avx2.o", NULL) != 0)
			_exit(3);
		raise(SIGKILL);
		_exit(4);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %#x", st);
	for (int i = 0; i < 3; i++) {
		round_of(&l, &ns, &sum);
		ck_assert_uint_eq(sum, sum0);
	}
	ck_assert_int_eq(kill(l.p.pid, 0), 0);
	attach_all(&l);
	ck_assert_int_eq(cc_cache__redirects(l.c, NULL, 0), 1);
	ck_assert_int_eq(restore(&l, "vecadd", NULL), 0);
	round_of(&l, &ns, &sum);
	ck_assert_uint_eq(sum, sum0);
	end(&l);
}
END_TEST

/* The directory is written before the jump: a padrone killed between the
 * two leaves a record whose bytes were never written, which restore
 * takes out without writing anything. (The kill is set up by writing the
 * original bytes back behind the record's back.) */
START_TEST(a_record_whose_jump_was_never_written_is_taken_out_by_restore)
{
	struct live l;
	double ns;
	unsigned sum0, sum;
	uint8_t before[16], now[16];

	start(&l, "tests/targets/cc_vecadd", NULL, NULL, "cc_vecadd:");
	struct cc_func f = func(&l, "vecadd");
	ck_assert_int_eq(attach_target__read(l.t, f.addr, before, 16), 16);
	detach_all(&l);
	round_of(&l, &ns, &sum0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct live me = l;
		attach_all(&me);
		if (replace(&me, "vecadd", "tests/codecache/repl/vecadd_avx2.o", NULL) != 0 ||
		    attach_target__stop(me.t) < 0 ||
		    attach_target__write(me.t, f.addr, before, 16) < 0)
			_exit(3);
		raise(SIGKILL);
		_exit(4);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %#x", st);
	attach_all(&l);
	ck_assert_int_eq(cc_cache__redirects(l.c, NULL, 0), 1);
	ck_assert_msg(restore(&l, "vecadd", NULL) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_int_eq(cc_cache__redirects(l.c, NULL, 0), 0);
	ck_assert_int_eq(attach_target__read(l.t, f.addr, now, 16), 16);
	ck_assert_mem_eq(before, now, 16);
	for (int i = 0; i < 2; i++) {
		round_of(&l, &ns, &sum);
		ck_assert_uint_eq(sum, sum0);
	}
	end(&l);
}
END_TEST

START_TEST(a_stale_stub_over_a_replacement_is_taken_out_by_restore)
{
	struct live l;
	double ns;
	unsigned sum0, sum;
	uint8_t before[16], now[16];
	char report[2048];
	struct cc_patch_stats st;
	struct cc_patch_opts o = { .sz = sizeof o, .report = report, .report_size = sizeof report,
				   .stats = &st };

	start(&l, "tests/targets/cc_vecadd", NULL, NULL, "cc_vecadd:");
	struct cc_func f = func(&l, "vecadd");
	ck_assert_int_eq(attach_target__read(l.t, f.addr, before, 16), 16);
	detach_all(&l);
	round_of(&l, &ns, &sum0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {	/* padrone: replace, measure over it, die mid-way */
		struct live me = l;
		struct cc_measure_opts mo = { .sz = sizeof mo, .calls = 16u << 20 };
		struct cc_measure *m;
		attach_all(&me);
		struct cc_func fn = func(&me, "vecadd");
		if (replace(&me, "vecadd", "tests/codecache/repl/vecadd_avx2.o", NULL) != 0 ||
		    cc_measure__start(me.c, &fn, &mo, &m) != 0)
			_exit(3);
		raise(SIGKILL);
		_exit(4);
	}
	int wst;
	ck_assert_int_eq(waitpid(pid, &wst, 0), pid);
	ck_assert_msg(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL, "status %#x", wst);
	for (int i = 0; i < 2; i++) {
		round_of(&l, &ns, &sum);
		ck_assert_uint_eq(sum, sum0);
	}
	attach_all(&l);
	struct cc_redirect_info ri[2];
	ck_assert_int_eq(cc_cache__redirects(l.c, ri, 2), 2);
	/* a new measurement is refused, naming the way out */
	struct cc_measure *m;
	ck_assert_int_eq(cc_measure__start(l.c, &f, NULL, &m), -EEXIST);
	ck_assert_msg(strstr(cc_cache__errmsg(l.c), "measure: vecadd is still redirected to a "
			     "measuring stub left by padrone process ") &&
		      strstr(cc_cache__errmsg(l.c), "`restore vecadd` takes it out"), "%s",
		      cc_cache__errmsg(l.c));
	o.dry_run = true;
	ck_assert_msg(restore(&l, "vecadd", &o) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_msg(strstr(report, "vecadd is also redirected to a measuring stub of padrone "
			     "process ") && strstr(report, "would then put back the code "),
		      "%s", report);
	ck_assert_int_eq(cc_cache__redirects(l.c, NULL, 0), 2);
	o.dry_run = false;
	ck_assert_msg(restore(&l, "vecadd", &o) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_uint_eq(st.sites, 2);	/* the stub's jump, then the replacement's */
	ck_assert_int_eq(cc_cache__redirects(l.c, NULL, 0), 0);
	ck_assert_int_eq(attach_target__read(l.t, f.addr, now, 16), 16);
	ck_assert_mem_eq(before, now, 16);
	for (int i = 0; i < 2; i++) {
		round_of(&l, &ns, &sum);
		ck_assert_uint_eq(sum, sum0);
	}
	end(&l);
}
END_TEST

START_TEST(workers_inside_the_function_keep_their_results)
{
	struct live l;
	uint64_t worst = 0;

	start(&l, "tests/targets/cc_threads", "8", NULL, "ready");
	workers_fine(&l, 8, 300);
	for (int i = 0; i < 6; i++) {
		struct cc_patch_stats st;
		struct cc_patch_opts o = { .sz = sizeof o, .stats = &st };
		ck_assert_msg(replace(&l, "work", "tests/codecache/repl/work_alt.o", &o) == 0, "%s",
			      cc_cache__errmsg(l.c));
		ck_assert_uint_ge(st.threads, 10);	/* main, 8 workers, blocker */
		if (st.stop_ns > worst)
			worst = st.stop_ns;
		workers_fine(&l, 8, 100);
		ck_assert_msg(restore(&l, "work", &o) == 0, "%s", cc_cache__errmsg(l.c));
		ck_assert(!st.kept_code);
		/* the patch's pause includes the time to stop; then at least
		 * one look at every thread before the code is freed */
		ck_assert_uint_gt(st.stop_ns, 0);
		ck_assert_uint_le(st.to_stop_ns, st.stop_ns);
		ck_assert_uint_ge(st.looks, 1);
		ck_assert_uint_gt(st.look_max_ns, 0);
	}
	fprintf(stderr, "# 10 threads: longest stop-the-world %.1f us\n", (double)worst / 1000.0);
	workers_fine(&l, 8, 300);
	end(&l);
}
END_TEST

START_TEST(a_thread_asleep_in_the_first_bytes_is_moved_out)
{
	struct live l;
	char line[256], report[2048];
	struct cc_patch_stats st;
	struct cc_patch_opts o = { .sz = sizeof o, .report = report, .report_size = sizeof report,
				   .stats = &st, .timeout_ms = 300 };

	start(&l, "tests/targets/cc_threads", "2", NULL, "ready");
	wait_in_syscall(l.p.pid, SYS_pause);	/* pc inside blocker's first bytes */
	ck_assert_msg(replace(&l, "blocker", "tests/codecache/repl/blocker_alt.o", &o) == 0, "%s",
		      cc_cache__errmsg(l.c));
	ck_assert_uint_eq(st.moved, 1);
	ck_assert_msg(strstr(report, "moved 1 thread out of the patched bytes"), "%s", report);
	workers_fine(&l, 2, 300);	/* it went back to sleep where it was moved */
	ck_assert_int_eq(kill(l.p.pid, SIGUSR1), 0);
	ck_assert_int_ge(tu_wait_for(&l.p, "blocker: woke 1", line, sizeof line, 5000), 0);
	ck_assert_str_eq(line, "blocker: woke 1 ret -4");	/* EINTR, as before */
	/* now asleep inside the replacement: restored, but its code stays */
	ck_assert_int_ge(tu_wait_for(&l.p, "blocker: waiting 2", line, sizeof line, 5000), 0);
	wait_in_syscall(l.p.pid, SYS_pause);
	ck_assert_msg(restore(&l, "blocker", &o) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert(st.kept_code);
	ck_assert_uint_ge(st.looks, 2);	/* looked again until the timeout */
	ck_assert_msg(strstr(report, "kept the code cache's code for blocker: after 300 ms thread ") &&
		      strstr(report, "is executing the code cache's code for blocker"), "%s", report);
	ck_assert_int_eq(kill(l.p.pid, SIGUSR1), 0);
	ck_assert_int_ge(tu_wait_for(&l.p, "blocker: woke 2", line, sizeof line, 5000), 0);
	ck_assert_str_eq(line, "blocker: woke 2 ret -4");
	ck_assert_int_ge(tu_wait_for(&l.p, "blocker: waiting 3", line, sizeof line, 5000), 0);
	workers_fine(&l, 2, 200);
	end(&l);
}
END_TEST

/* reader's syscall ends where the entry jump ends: blocked in it, the
 * thread's pc is just past the jump, but the kernel restarts the call 2
 * bytes earlier, inside the jump. It is moved into the copy (and back on
 * restore) by where it restarts. */
START_TEST(a_system_call_restarting_inside_the_jump_is_moved_by_where_it_restarts)
{
	struct live l;
	struct fifos ff;
	char report[2048];
	struct cc_patch_stats st;
	struct cc_patch_opts o = { .sz = sizeof o, .report = report, .report_size = sizeof report,
				   .stats = &st, .timeout_ms = 300 };

	fifos_make(&ff);
	start(&l, "tests/targets/cc_reader", ff.in, NULL, "ready");
	struct cc_func f = func(&l, "reader");
	ck_assert_uint_eq(blocked_pc(l.p.pid), f.addr + 5);
	ck_assert_msg(replace(&l, "reader", "tests/codecache/repl/reader_alt.o", &o) == 0, "%s",
		      cc_cache__errmsg(l.c));
	ck_assert_msg(st.moved == 1, "moved %u: %s", st.moved, report);
	ck_assert_msg(strstr(report, "entry: jmp rel32 at ") && strstr(report, " over 5 bytes") &&
		      strstr(report, "moved 1 thread out of the patched bytes"), "%s", report);
	/* still asleep, now in the copy, at its end: back it goes */
	ck_assert_uint_ne(blocked_pc(l.p.pid), f.addr + 5);
	ck_assert_msg(restore(&l, "reader", &o) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_msg(st.moved == 1, "moved %u: %s", st.moved, report);
	ck_assert_uint_eq(blocked_pc(l.p.pid), f.addr + 5);
	feed(ff.in, 'a');
	got(&l, 'a');
	/* asleep in the original again; replaced for good this time */
	ck_assert_uint_eq(blocked_pc(l.p.pid), f.addr + 5);
	ck_assert_msg(replace(&l, "reader", "tests/codecache/repl/reader_alt.o", &o) == 0, "%s",
		      cc_cache__errmsg(l.c));
	ck_assert_msg(st.moved == 1, "moved %u: %s", st.moved, report);
	feed(ff.in, 'b');
	got(&l, 'b');		/* out of the copy */
	feed(ff.in, 'c');
	got(&l, 'c');		/* through the replacement */
	ck_assert_msg(restore(&l, "reader", &o) == 0, "%s", cc_cache__errmsg(l.c));
	feed(ff.in, 'd');
	got(&l, 'd');
	feed(ff.in, 'e');
	got(&l, 'e');
	ck_assert_uint_eq(blocked_pc(l.p.pid), f.addr + 5);
	end(&l);
	fifos_remove(&ff);
}
END_TEST

/* A signal handler running on the thread asleep in reader: the pc it was
 * interrupted at, rewound onto the syscall inside the jump's bytes, waits in
 * the signal frame on its stack. It is found by walking the stack through
 * the signal frame and moved there, into the copy; restored meanwhile, the
 * copy stays for it. */
START_TEST(a_pc_interrupted_inside_the_jump_waits_in_a_signal_frame_and_is_moved)
{
	struct live l;
	struct fifos ff;
	char line[256], report[2048];
	struct cc_patch_stats st;
	struct cc_patch_opts o = { .sz = sizeof o, .report = report, .report_size = sizeof report,
				   .stats = &st, .timeout_ms = 300 };

	fifos_make(&ff);
	start(&l, "tests/targets/cc_reader", ff.in, ff.sig, "ready");
	struct cc_func f = func(&l, "reader");
	for (int round = 0; round < 2; round++) {
		/* asleep in reader (not still printing the last line) */
		ck_assert_uint_eq(blocked_pc(l.p.pid), f.addr + 5);
		ck_assert_int_eq(kill(l.p.pid, SIGUSR2), 0);
		ck_assert_int_ge(tu_wait_for(&l.p, "handler: waiting", line, sizeof line, 5000), 0);
		ck_assert_uint_ne(blocked_pc(l.p.pid), f.addr + 5);	/* in the handler's read */
		ck_assert_msg(replace(&l, "reader", "tests/codecache/repl/reader_alt.o", &o) == 0,
			      "%s", cc_cache__errmsg(l.c));
		ck_assert_msg(st.moved == 1, "moved %u: %s", st.moved, report);
		ck_assert_msg(strstr(report, "moved 1 thread out of the patched bytes (1 in a signal handler: its signal frame rewritten)"),
			      "%s", report);
		if (round == 0) {
			/* restored before the handler returns: the pc it returns to
			 * is in the copy, which stays until the thread has left */
			ck_assert_msg(restore(&l, "reader", &o) == 0, "%s", cc_cache__errmsg(l.c));
			ck_assert_msg(st.kept_code && strstr(report, "kept the code cache's code for "
							     "reader: after 300 ms thread "),
				      "%s", report);
		}
		feed(ff.sig, 'h');
		ck_assert_int_ge(tu_wait_for(&l.p, "handler: got", line, sizeof line, 5000), 0);
		ck_assert_str_eq(line, "handler: got h");
		feed(ff.in, 'x');
		got(&l, 'x');
	}
	feed(ff.in, 'y');	/* through the replacement */
	got(&l, 'y');
	ck_assert_msg(restore(&l, "reader", &o) == 0, "%s", cc_cache__errmsg(l.c));
	feed(ff.in, 'z');
	got(&l, 'z');
	end(&l);
	fifos_remove(&ff);
}
END_TEST

START_TEST(a_function_a_thread_never_leaves_is_refused_after_the_timeout)
{
	struct live l;
	struct cc_patch_opts o = { .sz = sizeof o, .wait = true, .timeout_ms = 300 };
	uint8_t before[8], after[8];

	start(&l, "tests/targets/cc_threads", "2", "forever", "ready");
	struct cc_func f = func(&l, "forever");
	ck_assert_int_eq(attach_target__read(l.t, f.addr, before, 8), 8);
	/* a dry run says it would wait, and only with force that it then
	 * goes ahead */
	char report[2048];
	struct cc_patch_opts dry = { .sz = sizeof dry, .wait = true, .dry_run = true,
				     .report = report, .report_size = sizeof report };
	ck_assert_int_eq(replace(&l, "forever", "tests/codecache/repl/forever_alt.o", &dry), 0);
	ck_assert_msg(strstr(report, "would wait (up to 2000 ms) because thread ") &&
		      strstr(report, "is executing forever (pc 0x") &&
		      strstr(report, "; force would go ahead") && !strstr(report, "forced"),
		      "%s", report);
	dry.force = true;
	ck_assert_int_eq(replace(&l, "forever", "tests/codecache/repl/forever_alt.o", &dry), 0);
	ck_assert_msg(strstr(report, "then go ahead (forced): its current call would finish in the "
			     "original code") && !strstr(report, "force would go ahead"), "%s", report);
	ck_assert_int_eq(cc_cache__redirects(l.c, NULL, 0), 0);
	/* asked to wait for the function to be free: it never is */
	ck_assert_int_eq(replace(&l, "forever", "tests/codecache/repl/forever_alt.o", &o), -EBUSY);
	const char *msg = cc_cache__errmsg(l.c);
	ck_assert_msg(strstr(msg, "redirect: forever: gave up after 300 ms (") &&
		      strstr(msg, "is executing forever (pc 0x") && strstr(msg, "force goes ahead"),
		      "%s", msg);
	ck_assert_int_eq(attach_target__read(l.t, f.addr, after, 8), 8);
	ck_assert_mem_eq(before, after, 8);
	/* run_it's return address lies inside its first bytes: never forced */
	o.wait = false;
	o.force = true;
	ck_assert_int_eq(replace(&l, "run_it", "tests/codecache/repl/run_alt.o", &o), -EBUSY);
	msg = cc_cache__errmsg(l.c);
	ck_assert_msg(strstr(msg, "redirect: run_it: gave up after 300 ms") &&
		      strstr(msg, "inside the bytes to patch"), "%s", msg);
	ck_assert_int_eq(cc_cache__redirects(l.c, NULL, 0), 0);
	workers_fine(&l, 2, 300);
	/* forced: the spinning thread stays in the original */
	o.wait = true;
	ck_assert_int_eq(replace(&l, "forever", "tests/codecache/repl/forever_alt.o", &o), 0);
	ck_assert_int_eq(restore(&l, "forever", &o), 0);
	workers_fine(&l, 2, 300);
	end(&l);
}
END_TEST

/* One measurement of f: the function's bytes come back unchanged and every
 * call asked for is timed. */
static struct cc_measure_result measure_once(struct live *l, const struct cc_func *f,
					     uint64_t calls)
{
	struct cc_measure_opts o = { .sz = sizeof o, .calls = calls };
	struct cc_measure *m;
	struct cc_measure_result r;
	uint64_t done;
	uint8_t before[16], after[16];

	ck_assert_int_eq(attach_target__read(l->t, f->addr, before, 16), 16);
	ck_assert_msg(cc_measure__start(l->c, f, &o, &m) == 0, "%s", cc_cache__errmsg(l->c));
	ck_assert_int_eq(cc_measure__wait(m, 10000, &done), 0);
	ck_assert_int_eq(cc_measure__finish(m, &r), 0);
	cc_measure__free(m);
	ck_assert_int_eq(attach_target__read(l->t, f->addr, after, 16), 16);
	ck_assert_mem_eq(before, after, 16);
	ck_assert_uint_eq(r.calls, calls);
	return r;
}

START_TEST(measure_agrees_with_the_targets_own_timing)
{
	struct live l;
	double before, after, lo = 0, hi = 0;
	unsigned sum0, sum;
	struct cc_measure_result r;
	bool agrees = false;

	start(&l, "tests/targets/cc_vecadd", NULL, NULL, "cc_vecadd:");
	round_of(&l, &before, &sum0);
	struct cc_func f = func(&l, "vecadd");
	/* the target prints its CPU time per call, rdtsc counts wall time; on
	 * this kind of shared VM both drift up to 2x between half seconds, and
	 * a burst of preemption over the few ms a measurement lasts moves even
	 * the median. So each try is judged against the target's rounds on
	 * both sides of it, and a busy machine gets three tries: a wrong clock
	 * fails them all. */
	for (int try = 0; try < 3 && !agrees; try++, before = after) {
		r = measure_once(&l, &f, 20000);
		round_of(&l, &after, &sum);
		ck_assert_uint_eq(sum, sum0);
		lo = before < after ? before : after;
		hi = before < after ? after : before;
		fprintf(stderr, "# vecadd: target says %.1f..%.1f ns/call, measure mean %.1f "
			"p50 %.1f p99 %.1f\n", lo, hi, r.mean_ns, r.p50_ns, r.p99_ns);
		agrees = r.p50_ns > lo / 2 && r.p50_ns < hi * 2;
	}
	ck_assert_msg(agrees, "p50 %.1f vs own %.1f..%.1f", r.p50_ns, lo, hi);
	end(&l);
}
END_TEST

START_TEST(measure_refuses_a_process_that_may_unwind_through_the_stub)
{
	struct live l;
	struct cc_measure_opts o = { .sz = sizeof o, .calls = 100 };
	struct cc_measure *m;
	struct cc_measure_result r;

	start(&l, "tests/targets/cc_threads", "1", "unwinder", "ready");
	struct cc_func f = func(&l, "work");
	ck_assert_int_eq(cc_measure__start(l.c, &f, &o, &m), -ENOTSUP);
	ck_assert_msg(strstr(cc_cache__errmsg(l.c), "measure: process ") &&
		      strstr(cc_cache__errmsg(l.c), "maps libgcc_s.so.1: an exception or cancellation "
			     "unwinding through work"), "%s", cc_cache__errmsg(l.c));
	o.force = true;		/* it never unwinds: allowed when asked */
	ck_assert_msg(cc_measure__start(l.c, &f, &o, &m) == 0, "%s", cc_cache__errmsg(l.c));
	uint64_t done;
	ck_assert_int_eq(cc_measure__wait(m, 10000, &done), 0);
	ck_assert_int_eq(cc_measure__finish(m, &r), 0);
	ck_assert_uint_eq(r.calls, 100);
	cc_measure__free(m);
	workers_fine(&l, 1, 200);
	end(&l);
}
END_TEST

/* A program padrone did not build, checked by its own output: mawk sums
 * numbers it converts from strings with libc's strtod; strtod is replaced
 * by a wrapper (tests/codecache/repl/strtod_wrap.c) counting its calls. */
static unsigned long wrapper_calls(struct live *l, uint64_t counter)
{
	unsigned long n = 0;
	ck_assert_int_eq(attach_target__read(l->t, counter, &n, sizeof n), (ssize_t)sizeof n);
	return n;
}

static void mawk_sum(struct live *l, char *sum, size_t size)
{
	char line[256];
	ck_assert_int_ge(tu_wait_for(&l->p, "round ", line, sizeof line, 20000), 0);
	const char *s = strstr(line, " sum ");
	ck_assert_ptr_nonnull(s);
	snprintf(sum, size, "%s", s + 5);
}

/* Read the rounds mawk printed ahead of us (the pipe holds thousands, all
 * computed before the last change), each with the expected sum, so that the
 * rounds read next were computed after it. */
static void mawk_drain(struct live *l, const char *expected)
{
	char line[256];

	for (int i = 0; i < 100000 && tu_read_line(&l->p, line, sizeof line, 1) >= 0; i++) {
		const char *s = strstr(line, " sum ");
		ck_assert_msg(s && !strcmp(s + 5, expected), "%s", line);
	}
}

START_TEST(libc_strtod_replaced_in_mawk_keeps_its_sums)
{
	static const char prog[] = "BEGIN { for (r = 1; ; r++) { s = 0; "
		"for (i = 0; i < 100000; i++) s += (\"0.\" i) + 0; "
		"printf \"round %d sum %.6f\\n\", r, s; fflush() } }";
	struct live l;
	char report[2048], sum0[64], sum[64];
	struct cc_patch_opts o = { .sz = sizeof o, .report = report, .report_size = sizeof report };
	uint64_t data = 0;

	if (access("/usr/bin/mawk", X_OK) != 0) {
		fprintf(stderr, "# no /usr/bin/mawk here\n");
		return;
	}
	memset(&l, 0, sizeof l);
	char *argv[] = { "/usr/bin/mawk", (char *)prog, NULL };
	ck_assert_int_eq(tu_spawn(&l.p, argv, false), 0);
	mawk_sum(&l, sum0, sizeof sum0);
	attach_all(&l);
	ck_assert_msg(replace(&l, "strtod", "tests/codecache/repl/strtod_wrap.o", &o) == 0, "%s",
		      cc_cache__errmsg(l.c));
	const char *at = strstr(report, " of data at 0x");
	ck_assert_msg(at && sscanf(at, " of data at 0x%" SCNx64, &data) == 1, "%s", report);
	unsigned long n0 = wrapper_calls(&l, data);
	/* The third round read after the drain began after the patch. */
	mawk_drain(&l, sum0);
	for (int i = 0; i < 3; i++) {
		mawk_sum(&l, sum, sizeof sum);
		ck_assert_str_eq(sum, sum0);
	}
	unsigned long n1 = wrapper_calls(&l, data);
	ck_assert_uint_ge(n1 - n0, 100000);	/* every conversion of a round */
	ck_assert_int_eq(restore(&l, "strtod", NULL), 0);
	mawk_drain(&l, sum0);
	for (int i = 0; i < 3; i++) {
		mawk_sum(&l, sum, sizeof sum);
		ck_assert_str_eq(sum, sum0);
	}
	unsigned long n2 = wrapper_calls(&l, data);
	mawk_sum(&l, sum, sizeof sum);
	ck_assert_str_eq(sum, sum0);
	ck_assert_uint_eq(wrapper_calls(&l, data), n2);	/* the wrapper is out of the way */
	end(&l);
}
END_TEST

START_TEST(bad_inputs_are_refused_clearly)
{
	struct live l;
	struct cc_func f;
	struct cc_error err;
	struct cc_image *im;
	struct cc_image_opts io = { .sz = sizeof io, .symbol = "nothing" };
	char report[2048];
	struct cc_patch_opts dry = { .sz = sizeof dry, .dry_run = true, .report = report,
				     .report_size = sizeof report };

	start(&l, "tests/targets/cc_vecadd", NULL, NULL, "cc_vecadd:");
	ck_assert_int_eq(cc_syms__func(l.sy, "no_such_function", &f, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "has no function named no_such_function"), "%s", err.msg);
	ck_assert_int_eq(cc_image__open(tu_path("tests/codecache/repl/vecadd_avx2.o"), &io, &im,
					&err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "has no function named nothing; it defines vecadd"), "%s",
		      err.msg);
	ck_assert_int_eq(restore(&l, "main", NULL), -ENOENT);
	ck_assert_msg(strstr(cc_cache__errmsg(l.c), "restore: main (0x") &&
		      strstr(cc_cache__errmsg(l.c), ") is not replaced"), "%s", cc_cache__errmsg(l.c));
	ck_assert_int_eq(replace(&l, "vecadd", "tests/codecache/repl/vecadd_avx2.o", &dry), 0);
	ck_assert_msg(strstr(report, "would write 5 bytes at 0x"), "%s", report);
	ck_assert_int_eq(cc_cache__redirects(l.c, NULL, 0), 0);
	ck_assert_int_eq(replace(&l, "vecadd", "tests/codecache/repl/vecadd_avx2.o", NULL), 0);
	ck_assert_int_eq(replace(&l, "vecadd", "tests/codecache/repl/vecadd_avx2.o", NULL), -EEXIST);
	ck_assert_msg(strstr(cc_cache__errmsg(l.c), "vecadd is already replaced"), "%s",
		      cc_cache__errmsg(l.c));
	ck_assert_int_eq(restore(&l, "vecadd", NULL), 0);
	ck_assert_int_eq(restore(&l, "vecadd", NULL), -ENOENT);
	end(&l);
}
END_TEST

int main(void)
{
	tu_block_sigchld();
	Suite *s = suite_create("live");
	TCase *tc = tcase_create("live");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, vecadd_replaced_live_keeps_its_checksum);
	tcase_add_test(tc, vecadd_replaced_by_a_shared_object_and_its_area_unmapped_on_restore);
	tcase_add_test(tc, the_replacement_outlives_the_session_and_a_later_one_restores_it);
	tcase_add_test(tc, sigkill_of_padrone_right_after_a_replacement_leaves_the_target_fine);
	tcase_add_test(tc, a_record_whose_jump_was_never_written_is_taken_out_by_restore);
	tcase_add_test(tc, a_stale_stub_over_a_replacement_is_taken_out_by_restore);
	tcase_add_test(tc, workers_inside_the_function_keep_their_results);
	tcase_add_test(tc, a_thread_asleep_in_the_first_bytes_is_moved_out);
	tcase_add_test(tc, a_system_call_restarting_inside_the_jump_is_moved_by_where_it_restarts);
	tcase_add_test(tc, a_pc_interrupted_inside_the_jump_waits_in_a_signal_frame_and_is_moved);
	tcase_add_test(tc, a_function_a_thread_never_leaves_is_refused_after_the_timeout);
	tcase_add_test(tc, measure_agrees_with_the_targets_own_timing);
	tcase_add_test(tc, measure_refuses_a_process_that_may_unwind_through_the_stub);
	tcase_add_test(tc, libc_strtod_replaced_in_mawk_keeps_its_sums);
	tcase_add_test(tc, bad_inputs_are_refused_clearly);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
