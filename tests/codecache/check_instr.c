/* Instrumented copies on a running target (issue 10, step 1): instr_kernel's
 * threads call axpy (o[i] = a * x[i] + y[i]) on arrays whose addresses they
 * print; the address stream recovered from each thread's ring must be that
 * kernel's exactly (x[i], y[i] read, o[i] written, i = 0..n-1, call after
 * call, nothing of another thread), the target's own checks must see no
 * wrong result during and after, and uninstrument must put the original
 * bytes back. */
#include "attach/attach.h"
#include "codecache/codecache.h"
#include "codecache/instr.h"	/* the copy's units (ci_map) */
#include "pipeline/cab.h"
#include "pipeline/rep.h"
#include "tests/lib/tu.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define N 1000
#define MAX_T 8
#define SPARES 4	/* cc_instr_opts.spare_rings' default */
#define CHURN_SPARES 16	/* enough for every short-lived thread at once, on a slow day */
#define MAX_R (MAX_T + 1 + CHURN_SPARES)

struct arrays {
	uint64_t x, y, o;
};

/* One ring's consumer: recovery into a checker of the kernel's pattern. */
struct stream {
	struct cab_ring *ring;
	pid_t tid;
	struct arrays mine[MAX_T];	/* all threads' arrays (index: thread) */
	size_t nthreads;
	int owner;			/* which arrays are this thread's; -1 unknown yet */
	struct rep_recover *rec;
	struct cab_consumer *cons;
	pthread_t th;
	volatile int stop;
	int rc;
	/* the pattern: element i, phase 0 x, 1 y, 2 o; where the stream
	 * began (a thread moved into the copy mid-call begins there) */
	uint64_t i, phase, calls, refs, errors, first_ref;
	uint64_t units;			/* recovered, once closed */
	bool tally;			/* count writes to o[0..7] instead (switch) */
	_Atomic bool hold;		/* held_consume: read nothing meanwhile */
	uint64_t hits[8];
	char first_error[200];
};

static void bad(struct stream *s, const struct rep_ref *r, const char *what)
{
	if (!s->errors++)
		snprintf(s->first_error, sizeof s->first_error, "thread %d, call %" PRIu64
			 " element %" PRIu64 " phase %" PRIu64 ": %s (pc 0x%" PRIx64 " addr 0x%"
			 PRIx64 " size %u type %u)", s->tid, s->calls, s->i, s->phase, what,
			 r->pc, r->addr, r->size, r->type);
}

/* Which thread's array holds addr, and which array (0 x, 1 y, 2 o). */
static int owner_of(const struct stream *s, uint64_t addr, int *which)
{
	for (size_t t = 0; t < s->nthreads; t++) {
		const uint64_t base[3] = { s->mine[t].x, s->mine[t].y, s->mine[t].o };
		for (int k = 0; k < 3; k++)
			if (addr >= base[k] && addr < base[k] + N * 8) {
				*which = k;
				return (int)t;
			}
	}
	return -1;
}

static void check_ref(struct stream *s, const struct rep_ref *r)
{
	int which, t = owner_of(s, r->addr, &which);

	if (r->type == REP_REF_INSTR || t < 0)
		return;		/* the stack, the code */
	s->refs++;
	const uint64_t base[3] = { s->mine[t].x, s->mine[t].y, s->mine[t].o };
	if (s->owner < 0) {
		s->owner = t;
		s->i = (r->addr - base[which]) / 8;
		s->phase = (uint64_t)which;
		s->first_ref = 3 * s->i + s->phase;
	}
	if (t != s->owner)
		return bad(s, r, "another thread's array");
	if ((uint64_t)which != s->phase || r->addr != base[which] + 8 * s->i || r->size != 8 ||
	    r->type != (which == 2 ? REP_REF_WRITE : REP_REF_READ))
		return bad(s, r, "not the kernel's next reference");
	if (++s->phase == 3) {
		s->phase = 0;
		if (++s->i == N) {
			s->i = 0;
			s->calls++;
		}
	}
}

/* Writes (and read-modify-writes) into any thread's o[0..7], by element. */
static void tally_ref(struct stream *s, const struct rep_ref *r)
{
	bool writes = r->type == REP_REF_WRITE || r->type == REP_REF_MODIFY;

	for (size_t t = 0; t < s->nthreads && writes; t++)
		if (r->addr >= s->mine[t].o && r->addr < s->mine[t].o + 64)
			s->hits[(r->addr - s->mine[t].o) / 8]++;
}

static void sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct stream *s = arg;

	for (size_t k = 0; k < n; k++)
		if (s->tally)
			tally_ref(s, &refs[k]);
		else
			check_ref(s, &refs[k]);
}

static void *consume(void *arg)
{
	struct stream *s = arg;

	s->rc = cab_consumer__run(s->cons, rep_recover__cab_fn, s->rec, &s->stop);
	rep_recover__flush(s->rec);
	return NULL;
}

struct live {
	struct tu_proc p;
	struct attach_target *t;
	struct cc_cache *c;
	struct cc_syms *sy;
	struct arrays arr[MAX_T];
	size_t nthreads;
};

/* instr_kernel THREADS 1000 [MODE [FILE]] */
static void start_mode(struct live *l, const char *threads, const char *mode, const char *file)
{
	char *argv[] = { (char *)tu_path("tests/targets/instr_kernel"), (char *)threads, "1000",
			 (char *)mode, (char *)file, NULL };
	char line[256];
	struct attach_error aerr;
	struct cc_error err;

	memset(l, 0, sizeof *l);
	ck_assert_int_eq(tu_spawn(&l->p, argv, false), 0);
	for (;;) {
		ck_assert_msg(tu_read_line(&l->p, line, sizeof line, 10000) >= 0, "no ready line");
		if (strncmp(line, "ready", 5) == 0)
			break;
		long k, n;
		void *x, *y, *o;
		ck_assert_msg(sscanf(line, "thread %ld x=%p y=%p o=%p n=%ld", &k, &x, &y, &o, &n) == 5,
			      "%s", line);
		ck_assert_int_lt(k, MAX_T);
		l->arr[k] = (struct arrays){ (uint64_t)x, (uint64_t)y, (uint64_t)o };
		l->nthreads++;
	}
	ck_assert_msg(attach_seize(l->p.pid, NULL, &l->t, &aerr) == 0, "%s", aerr.msg);
	ck_assert_msg(cc_cache__open(l->t, NULL, &l->c, &err) == 0, "%s", err.msg);
	ck_assert_msg(cc_syms__open(l->p.pid, &l->sy, &err) == 0, "%s", err.msg);
}

static void start_with(struct live *l, const char *threads, const char *churn)
{
	start_mode(l, threads, churn, NULL);
}

static void start(struct live *l, const char *threads)
{
	start_with(l, threads, NULL);
}

static void end(struct live *l)
{
	cc_syms__free(l->sy);
	cc_cache__close(l->c);
	if (l->t)
		ck_assert_int_eq(attach_target__detach(l->t), 0);
	tu_kill(&l->p);
}

static struct cc_func func(struct live *l, const char *name)
{
	struct cc_func f;
	struct cc_error err;
	ck_assert_msg(cc_syms__func(l->sy, name, &f, &err) == 0, "%s", err.msg);
	return f;
}

/* The target's next progress line: calls so far, and no wrong result. */
static long alive(struct live *l)
{
	char line[256];
	long calls, nbad;

	ck_assert_msg(tu_wait_for(&l->p, "alive ", line, sizeof line, 10000) >= 0, "no progress");
	ck_assert_msg(sscanf(line, "alive %ld bad %ld", &calls, &nbad) == 2, "%s", line);
	ck_assert_msg(nbad == 0, "the target computed %ld wrong results: %s", nbad, line);
	return calls;
}

/* The target's calls go on past before (lines written while it waited are
 * read first: each has the count of its time). */
static void progresses(struct live *l, long before)
{
	long calls = before;
	for (int i = 0; i < 600 && calls <= before; i++)
		calls = alive(l);
	ck_assert_msg(calls > before, "the target made no progress past %ld calls", before);
}

/* The slot a ring of in takes in the target (its size in whole pages). */
static uint64_t ring_slot(const struct cc_instr *in)
{
	struct cab_layout l;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

	cab_ring__layout(cc_instr__ring(in, 0, NULL), &l);
	return (l.total_bytes + page - 1) / page * page;
}

/* The rings mapped in the target (one mapping holds a function's rings,
 * a slot each): how many, and whether all are read-write, shared, not
 * executable. */
static int rings_mapped(pid_t pid, uint64_t slot, bool *all_rw)
{
	char path[64], line[512];
	int n = 0;

	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	*all_rw = true;
	while (fgets(line, sizeof line, f))
		if (strstr(line, "memfd:padrone-ring")) {
			char perms[8];
			uint64_t lo, hi;
			ck_assert_int_eq(sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &lo, &hi, perms), 3);
			ck_assert_msg((hi - lo) % slot == 0, "rings mapped in %" PRIu64 " bytes, "
				      "not whole slots of %" PRIu64, hi - lo, slot);
			n += (int)((hi - lo) / slot);
			*all_rw &= strcmp(perms, "rw-s") == 0;
		}
	fclose(f);
	return n;
}

/* The clone event: the copy, published while the world was stopped (a
 * thread cloned right after the resume must find it already). */
static struct cc_instr *_Atomic published;

static void new_thread(struct attach_target *t, const struct attach_event *ev, void *arg)
{
	struct cc_instr *in = atomic_load(&published);

	(void)t;
	(void)arg;
	if (ev->kind == ATTACH_EV_THREAD_NEW && in)
		cc_instr__thread_new(in, ev->tid);
	if (ev->kind == ATTACH_EV_FORK && in)
		cc_instr__fork_child(in, ev->tid);
	if (ev->kind == ATTACH_EV_THREAD_EXIT && in)
		cc_instr__thread_exit(in, ev->tid);
}

static const struct cc_instr_opts publishing = { .sz = sizeof publishing,
						 .publish = &published };

static uint64_t calls_seen(struct stream *ss, size_t n)
{
	uint64_t least = UINT64_MAX;
	for (size_t i = 0; i < n; i++) {
		uint64_t c = __atomic_load_n(&ss[i].calls, __ATOMIC_RELAXED);
		least = c < least ? c : least;
	}
	return least;
}

/* Rings that carried at least min whole calls on the workers' arrays. */
static size_t busy_rings(struct stream *ss, size_t n, uint64_t min)
{
	size_t busy = 0;
	for (size_t i = 0; i < n; i++)
		busy += __atomic_load_n(&ss[i].calls, __ATOMIC_RELAXED) >= min;
	return busy;
}

START_TEST(the_recovered_stream_is_the_kernels_exactly)
{
	struct live l;
	struct cc_instr *in = NULL;
	struct stream ss[MAX_R];
	uint8_t orig[64], now[64];

	start(&l, "2");
	attach_target__on_event(l.t, new_thread, NULL);
	struct cc_func f = func(&l, "axpy");
	ck_assert_int_eq(attach_target__read(l.t, f.addr, orig, sizeof orig), (ssize_t)sizeof orig);
	int rc = cc_cache__instrument(l.c, &f, &publishing, &in);
	ck_assert_msg(rc == 0, "%s", cc_cache__errmsg(l.c));
	size_t nr = cc_instr__thread_count(in);
	ck_assert_uint_eq(nr, l.nthreads + 1 + SPARES);	/* main's, the spares */
	memset(ss, 0, sizeof ss);
	for (size_t i = 0; i < nr; i++) {
		struct stream *s = &ss[i];
		s->ring = cc_instr__ring(in, i, &s->tid);
		memcpy(s->mine, l.arr, sizeof l.arr);
		s->nthreads = l.nthreads;
		s->owner = -1;
		ck_assert_int_eq(rep_recover__new(cc_instr__table(in), sink, s, &s->rec), 0);
		ck_assert_msg(cab_consumer__open(s->ring, &s->cons) == 0, "%s", cab_errmsg());
		ck_assert_int_eq(pthread_create(&s->th, NULL, consume, s), 0);
	}
	/* a few hundred calls of each worker through its ring */
	for (int w = 0; w < 3000 && calls_seen(ss + 1, l.nthreads) < 200; w++) {
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	ck_assert_uint_ge(calls_seen(ss + 1, l.nthreads), 200);
	alive(&l);
	bool rw;
	uint64_t slot = ring_slot(in);
	ck_assert_int_eq(rings_mapped(l.p.pid, slot, &rw), (int)nr);
	ck_assert_msg(rw, "a ring is mapped other than rw-s in the target");
	/* the gate's count of each thread's calls: at least the whole calls
	 * recovered so far (the first may have begun before the copy, moved
	 * in), at most those recovered in the end and the one under way */
	uint64_t gate[MAX_R], seen[MAX_R];
	for (size_t i = 0; i < nr; i++)
		seen[i] = __atomic_load_n(&ss[i].calls, __ATOMIC_RELAXED);
	for (size_t i = 0; i < nr; i++)
		ck_assert_int_eq(cc_instr__calls(in, i, &gate[i]), 0);
	struct cc_patch_stats st = { 0 };
	struct cc_patch_opts po = { .sz = sizeof po, .stats = &st };
	rc = cc_cache__uninstrument(l.c, in, &po);
	ck_assert_msg(rc == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert(!st.kept_code);
	ck_assert_int_eq(rings_mapped(l.p.pid, slot, &rw), 0);
	for (size_t i = 0; i < nr; i++) {
		struct stream *s = &ss[i];
		for (int w = 0; w < 1000 && !cab_consumer__eof(s->cons); w++) {
			struct timespec ts = { 0, 10000000 };
			nanosleep(&ts, NULL);
		}
		s->stop = 1;
		pthread_join(s->th, NULL);
		struct cab_stats cs;
		cab_consumer__stats(s->cons, &cs);
		ck_assert_msg(s->errors == 0, "%" PRIu64 " wrong references, first: %s", s->errors,
			      s->first_error);
		ck_assert_msg(cs.records_dropped == 0 && cs.corrupt == 0,
			      "thread %d: %" PRIu64 " units dropped, %" PRIu64 " corrupt", s->tid,
			      cs.records_dropped, cs.corrupt);
		/* every reference from the first one on (threads inside axpy at
		 * the stops were moved into the copy and out of it mid-call) */
		if (i > 0)
			ck_assert_uint_eq(s->refs, s->calls * 3 * N + 3 * s->i + s->phase -
					  s->first_ref);
		ck_assert_msg(gate[i] + 1 >= seen[i] && gate[i] <= s->calls + 1,
			      "thread %d: the gate counted %" PRIu64 " calls; %" PRIu64 " were "
			      "recovered before, %" PRIu64 " in all", s->tid, gate[i], seen[i],
			      s->calls);
		cab_consumer__close(s->cons);
		rep_recover__free(s->rec);
	}
	ck_assert_uint_eq(ss[0].refs, 0);	/* main never calls axpy */
	/* the original bytes are back, and the target runs on correctly */
	ck_assert_int_eq(attach_target__read(l.t, f.addr, now, sizeof now), (ssize_t)sizeof now);
	ck_assert_mem_eq(now, orig, sizeof orig);
	atomic_store(&published, NULL);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	ck_assert_int_eq(attach_target__detach(l.t), 0);
	l.t = NULL;
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

START_TEST(bad_inputs_are_refused_and_leave_the_target_alone)
{
	struct live l;
	struct cc_instr *in = NULL, *again = NULL;
	uint8_t orig[64], now[64];
	pid_t tids[16];

	start(&l, "2");
	struct cc_func f = func(&l, "axpy");
	ck_assert_int_eq(attach_target__read(l.t, f.addr, orig, sizeof orig), (ssize_t)sizeof orig);
	/* a thread using gs */
	ck_assert_int_eq(attach_target__stop(l.t), 0);
	int n = attach_target__threads(l.t, tids, 16);
	ck_assert_int_ge(n, 3);
	ck_assert_int_eq(attach_target__set_gs_base(l.t, tids[1], 0x1000), 0);
	ck_assert_int_eq(attach_target__resume(l.t), 0);
	ck_assert_int_eq(cc_cache__instrument(l.c, &f, NULL, &in), -EBUSY);
	ck_assert_msg(strstr(cc_cache__errmsg(l.c), "uses gs"), "%s", cc_cache__errmsg(l.c));
	ck_assert_ptr_null(in);
	ck_assert_int_eq(attach_target__read(l.t, f.addr, now, sizeof now), (ssize_t)sizeof now);
	ck_assert_mem_eq(now, orig, sizeof orig);
	ck_assert_int_eq(attach_target__stop(l.t), 0);
	ck_assert_int_eq(attach_target__set_gs_base(l.t, tids[1], 0), 0);
	ck_assert_int_eq(attach_target__resume(l.t), 0);
	alive(&l);
	/* twice: the second is refused */
	ck_assert_msg(cc_cache__instrument(l.c, &f, NULL, &in) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_int_eq(cc_cache__instrument(l.c, &f, NULL, &again), -EEXIST);
	ck_assert_msg(strstr(cc_cache__errmsg(l.c), "axpy is already instrumented"), "%s",
		      cc_cache__errmsg(l.c));
	/* nobody consumes: exhaustive producers wait, then judge the consumer
	 * gone and drop; the target runs on */
	alive(&l);
	struct cc_patch_stats st = { 0 };
	struct cc_patch_opts po = { .sz = sizeof po, .stats = &st };
	ck_assert_int_eq(cc_cache__uninstrument(l.c, in, &po), 0);
	ck_assert(!st.kept_code);
	ck_assert_int_eq(cc_cache__uninstrument(l.c, in, NULL), -ENOENT);
	ck_assert_msg(strstr(cc_cache__errmsg(l.c), "not instrumented"), "%s",
		      cc_cache__errmsg(l.c));
	ck_assert_int_eq(attach_target__read(l.t, f.addr, now, sizeof now), (ssize_t)sizeof now);
	ck_assert_mem_eq(now, orig, sizeof orig);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* The target's fds open on a memfd named padrone-ring. */
static int ring_fds(pid_t pid)
{
	char path[64], link[256];
	int n = 0;

	snprintf(path, sizeof path, "/proc/%d/fd", pid);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));) {
		char fd[sizeof path + sizeof e->d_name + 1];
		snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
		ssize_t len = readlink(fd, link, sizeof link - 1);
		if (len > 0) {
			link[len] = 0;
			n += strstr(link, "memfd:padrone-ring") != NULL;
		}
	}
	closedir(d);
	return n;
}

/* Between the install's two stops the target runs: should it close the
 * rings' memfd and open another file under its number, the install stops
 * there, maps nothing over that file and leaves it open; the target runs
 * on, right, its code untouched, and instrumenting works again. */
START_TEST(a_rings_fd_the_target_replaced_meanwhile_is_left_to_it)
{
	struct live l;
	struct cc_instr *in = NULL;
	uint8_t orig[32], now[32];
	bool rw;

	start(&l, "2");
	alive(&l);
	struct cc_func f = func(&l, "axpy");
	ck_assert_int_eq(attach_target__read(l.t, f.addr, orig, sizeof orig), (ssize_t)sizeof orig);
	setenv("PADRONE_TEST_SWAP_RINGS_FD", "1", 1);
	int rc = cc_cache__instrument(l.c, &f, NULL, &in);
	unsetenv("PADRONE_TEST_SWAP_RINGS_FD");
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(strstr(cc_cache__errmsg(l.c), "closed or replaced"), "%s",
		      cc_cache__errmsg(l.c));
	ck_assert_int_eq(ring_fds(l.p.pid), 1);	/* the other file, still open */
	ck_assert_int_eq(rings_mapped(l.p.pid, (uint64_t)sysconf(_SC_PAGESIZE), &rw), 0);
	ck_assert_int_eq(attach_target__read(l.t, f.addr, now, sizeof now), (ssize_t)sizeof now);
	ck_assert_mem_eq(now, orig, sizeof orig);
	progresses(&l, alive(&l));
	ck_assert_msg(cc_cache__instrument(l.c, &f, NULL, &in) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_int_eq(ring_fds(l.p.pid), 1);
	progresses(&l, alive(&l));
	ck_assert_int_eq(cc_cache__uninstrument(l.c, in, NULL), 0);
	cc_instr__free(in);
	ck_assert_int_eq(attach_target__read(l.t, f.addr, now, sizeof now), (ssize_t)sizeof now);
	ck_assert_mem_eq(now, orig, sizeof orig);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* Threads cloned while instrumented inherit their parent's gs_base: given
 * a spare ring or the sink block at their clone event, they run the copy,
 * compute right, and never write into the ring of the thread that made
 * them (main, which never calls axpy itself: its ring stays empty). */
START_TEST(threads_cloned_while_instrumented_never_write_into_their_makers_ring)
{
	struct live l;
	struct cc_instr *in = NULL;
	char line[256];

	start_with(&l, "2", "churn");
	attach_target__on_event(l.t, new_thread, NULL);
	struct cc_func f = func(&l, "axpy");
	ck_assert_msg(cc_cache__instrument(l.c, &f, &publishing, &in) == 0, "%s",
		      cc_cache__errmsg(l.c));
	struct stream ss[MAX_R];
	size_t nr = cc_instr__thread_count(in);
	memset(ss, 0, sizeof ss);
	for (size_t i = 0; i < nr; i++) {
		struct stream *s = &ss[i];
		s->ring = cc_instr__ring(in, i, &s->tid);
		memcpy(s->mine, l.arr, sizeof l.arr);
		s->nthreads = l.nthreads;
		s->owner = -1;
		ck_assert_int_eq(rep_recover__new(cc_instr__table(in), sink, s, &s->rec), 0);
		ck_assert_msg(cab_consumer__open(s->ring, &s->cons) == 0, "%s", cab_errmsg());
		ck_assert_int_eq(pthread_create(&s->th, NULL, consume, s), 0);
	}
	/* ten short-lived threads born while instrumented */
	long born = -1, first = -1;
	for (int i = 0; i < 1000 && (first < 0 || born < first + 10); i++) {
		ck_assert_msg(tu_wait_for(&l.p, "churned ", line, sizeof line, 10000) >= 0, "no churn");
		ck_assert_int_eq(sscanf(line, "churned %ld", &born), 1);
		if (first < 0)
			first = born;
	}
	ck_assert_int_ge(born, first + 10);
	for (int w = 0; w < 3000 && busy_rings(ss, nr, 20) < l.nthreads; w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	alive(&l);
	ck_assert_int_eq(cc_cache__uninstrument(l.c, in, NULL), 0);
	for (size_t i = 0; i < nr; i++) {
		struct stream *s = &ss[i];
		for (int w = 0; w < 1000 && !cab_consumer__eof(s->cons); w++)
			nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
		s->stop = 1;
		pthread_join(s->th, NULL);
		struct cab_stats cs;
		cab_consumer__stats(s->cons, &cs);
		ck_assert_msg(s->errors == 0, "%s", s->first_error);
		ck_assert_uint_eq(cs.corrupt, 0);
		if (i == 0) {
			struct rep_recover_stats rs;
			rep_recover__stats(s->rec, &rs);
			ck_assert_msg(rs.units == 0, "main's ring got %" PRIu64 " units of the threads "
				      "it made", rs.units);
		}
		cab_consumer__close(s->cons);
		rep_recover__free(s->rec);
	}
	/* the workers' rings (a short-lived thread alive at the stop has its
	 * own, with calls on arrays of its own) */
	ck_assert_uint_ge(busy_rings(ss, nr, 20), l.nthreads);
	atomic_store(&published, NULL);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* ------------------------------------------------- the plain plan as oracle */

/* The references of the first whole call a ring carries (from one
 * execution of the entry to the next), recorded by its consumer. */
struct one_call {
	uint64_t entry;
	struct rep_ref *refs;
	size_t n, cap;
	bool keep_tail;		/* also what comes before the first entry */
	struct rep_ref *tail;
	size_t ntail, tail_cap;
	int state;		/* 0 before the first entry, 1 inside, 2 done */
	struct cab_consumer *cons;
	struct rep_recover *rec;
	uint64_t repeats;	/* repeat units the ring carried */
	uint64_t spoiled;	/* units recovery dropped as spoiled */
	volatile int stop;
	struct cc_instr *in;	/* the copy recorded from */
	pthread_t th;		/* its consumer */
};

static void append_ref(struct rep_ref **v, size_t *n, size_t *cap, const struct rep_ref *r)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 1 << 16;
		*v = realloc(*v, *cap * sizeof **v);
		ck_assert_ptr_nonnull(*v);
	}
	(*v)[(*n)++] = *r;
}

static void record(void *arg, const struct rep_ref *refs, size_t n)
{
	struct one_call *c = arg;

	for (size_t k = 0; k < n && c->state < 2; k++) {
		if (refs[k].type == REP_REF_INSTR && refs[k].pc == c->entry)
			__atomic_store_n(&c->state, c->state + 1, __ATOMIC_RELEASE);
		if (c->state == 0 && c->keep_tail)
			append_ref(&c->tail, &c->ntail, &c->tail_cap, &refs[k]);
		if (c->state == 1)
			append_ref(&c->refs, &c->n, &c->cap, &refs[k]);
	}
}

static int count_repeats(void *arg, const uint64_t *w, size_t n, unsigned flags)
{
	struct one_call *c = arg;

	for (size_t i = 0; i < n; i += REP_S_WORDS(w[i]))
		c->repeats += !!(w[i] & REP_S_REPEAT);
	return rep_recover__cab_fn(c->rec, w, n, flags);
}

static void *consume_call(void *arg)
{
	struct one_call *c = arg;

	cab_consumer__run(c->cons, count_repeats, c, &c->stop);
	rep_recover__flush(c->rec);
	return NULL;
}

/* Instrument f (with the plain plan or PiPA's) and record until the first
 * whole call of the target's one thread is in c; the copy stays. */
static void consume_first_call(struct live *l, struct one_call *c);

static void record_first_call(struct live *l, const struct cc_func *f, bool plain,
			      struct one_call *c)
{
	struct cc_instr_opts o = { .sz = sizeof o, .plain_plan = plain };

	memset(c, 0, sizeof *c);
	c->entry = f->addr;
	ck_assert_msg(cc_cache__instrument(l->c, f, &o, &c->in) == 0, "%s",
		      cc_cache__errmsg(l->c));
	consume_first_call(l, c);
}

/* c->in's ring of the one thread read until its first whole call is in. */
static void consume_first_call(struct live *l, struct one_call *c)
{
	pid_t tid;

	/* the one thread's ring first, then the spares nobody has taken */
	ck_assert_uint_ge(cc_instr__thread_count(c->in), 1);
	ck_assert_int_eq(rep_recover__new(cc_instr__table(c->in), record, c, &c->rec), 0);
	ck_assert_msg(cab_consumer__open(cc_instr__ring(c->in, 0, &tid), &c->cons) == 0, "%s",
		      cab_errmsg());
	ck_assert_int_eq(tid, l->p.pid);
	ck_assert_int_eq(pthread_create(&c->th, NULL, consume_call, c), 0);
	for (int w = 0; w < 3000 && __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) < 2; w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	ck_assert_int_eq(c->state, 2);
}

/* Uninstrument, let the consumer read the ring to its end and stop it
 * (c->refs stay, the caller's to free). */
static void stop_recording(struct live *l, struct one_call *c)
{
	ck_assert_msg(cc_cache__uninstrument(l->c, c->in, NULL) == 0, "%s", cc_cache__errmsg(l->c));
	for (int w = 0; w < 1000 && !cab_consumer__eof(c->cons); w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	c->stop = 1;
	pthread_join(c->th, NULL);
	struct rep_recover_stats rs;
	rep_recover__stats(c->rec, &rs);
	c->spoiled = rs.spoiled;
	cab_consumer__close(c->cons);
	rep_recover__free(c->rec);
	cc_instr__free(c->in);
}

/* The first whole call of the target's one thread, recorded, and the
 * original back. */
static void first_call(struct live *l, const struct cc_func *f, bool plain, struct one_call *c)
{
	record_first_call(l, f, plain, c);
	stop_recording(l, c);
}

/* instr_oracle calling KERNEL for ever, attached. */
static void start_oracle(struct live *l, const char *kernel)
{
	char *argv[] = { (char *)tu_path("tests/targets/instr_oracle"), (char *)kernel, "0", NULL };
	char line[256];
	struct attach_error aerr;
	struct cc_error err;

	memset(l, 0, sizeof *l);
	ck_assert_int_eq(tu_spawn(&l->p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(&l->p, "ready", line, sizeof line, 10000), 0);
	alive(l);
	ck_assert_msg(attach_seize(l->p.pid, NULL, &l->t, &aerr) == 0, "%s", aerr.msg);
	ck_assert_msg(cc_cache__open(l->t, NULL, &l->c, &err) == 0, "%s", err.msg);
	ck_assert_msg(cc_syms__open(l->p.pid, &l->sy, &err) == 0, "%s", err.msg);
}

static const char *const oracle_kernels[] = { "chase", "branchy", "stream", "mixed", "bump" };

/* PiPA's plan shares captured registers between references (a base used
 * again, the stack pointer across pushes and calls); the plain plan
 * captures each reference's registers anew, storing every address's
 * inputs. On instr_oracle's kernels (chase: three fields of one node
 * through one base; branchy: a call; stream: indexed arrays; mixed: rep
 * movsb, SSE loads; bump: two pointers stepped), one call's
 * recovered stream under each must be the same reference for reference:
 * each call of a kernel makes the same references. PiPA's plan also writes
 * a loop's unchanging bases once per run of it (repeat units), the plain
 * one never. */
START_TEST(pipas_plan_recovers_what_the_plain_plan_stores)
{
	const char *kernel = oracle_kernels[_i];
	char want[32];
	struct live l;

	start_oracle(&l, kernel);
	struct cc_func f = func(&l, kernel);
	struct one_call pipa, plain;
	first_call(&l, &f, false, &pipa);
	first_call(&l, &f, true, &plain);
	size_t data = 0;
	for (size_t k = 0; k < plain.n; k++)
		data += plain.refs[k].type != REP_REF_INSTR;
	ck_assert_msg(data > 4000, "%s: %zu data references in a call", kernel, data);
	snprintf(want, sizeof want, "%zu references", plain.n);
	for (size_t k = 0; k < pipa.n && k < plain.n; k++) {
		const struct rep_ref *a = &pipa.refs[k], *b = &plain.refs[k];
		ck_assert_msg(a->pc == b->pc && a->addr == b->addr && a->size == b->size &&
			      a->type == b->type, "%s: reference %zu: PiPA's pc 0x%" PRIx64 " addr 0x%"
			      PRIx64 " size %u type %u, the plain plan's pc 0x%" PRIx64 " addr 0x%"
			      PRIx64 " size %u type %u", kernel, k, a->pc, a->addr, a->size, a->type,
			      b->pc, b->addr, b->size, b->type);
	}
	ck_assert_msg(pipa.n == plain.n, "%s: PiPA's plan: %zu references, the plain one: %s",
		      kernel, pipa.n, want);
	/* the stream's loop never changes its arrays' bases: repeat units */
	ck_assert_uint_eq(plain.repeats, 0);
	if (!strcmp(kernel, "stream"))
		ck_assert_msg(pipa.repeats > 1000, "%s: %" PRIu64 " repeat units", kernel,
			      pipa.repeats);
	free(pipa.refs);
	free(plain.refs);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* The one thread of a live target stopped inside f, then stepped steps
 * instructions further without leaving it (the world left stopped); its
 * pc. */
static uint64_t stop_inside(struct live *l, const struct cc_func *f, int steps)
{
	struct user_regs_struct regs;

	for (int tries = 0; tries < 5000; tries++) {
		ck_assert_int_eq(attach_target__stop(l->t), 0);
		bool inside = true;
		for (int k = 0; k <= steps && inside; k++) {
			if (k)
				ck_assert_int_eq(attach_target__step(l->t, l->p.pid), 0);
			ck_assert_int_eq(attach_target__get_regs(l->t, l->p.pid, &regs), 0);
			inside = regs.rip >= f->addr && regs.rip < f->addr + f->size;
		}
		if (inside)
			return regs.rip;
		ck_assert_int_eq(attach_target__resume(l->t), 0);
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	ck_abort_msg("the thread was never stopped inside %s", f->name);
	return 0;
}

/* References a (recorded after a thread was moved in at +at) the same as
 * b, one by one. */
static void same_refs(const char *kernel, uint64_t at, const struct rep_ref *a,
		      const struct rep_ref *b, size_t n)
{
	for (size_t k = 0; k < n; k++)
		ck_assert_msg(a[k].pc == b[k].pc && a[k].addr == b[k].addr &&
			      a[k].size == b[k].size && a[k].type == b[k].type, "%s, the thread "
			      "moved in at +%" PRIu64 ": reference %zu of %zu: pc 0x%" PRIx64 " addr 0x%"
			      PRIx64 ", a whole call's pc 0x%" PRIx64 " addr 0x%" PRIx64, kernel, at,
			      k, n, a[k].pc, a[k].addr, b[k].pc, b[k].addr);
}

/* A thread inside the function at the install goes into the copy where it
 * is when no capture its unit keeps in the state block comes before (the
 * unit is then written whole), else it is stepped to its next unit first:
 * either way what it records from there is exactly the rest of the call it
 * was in (every call of an oracle kernel makes the same references; in the
 * entry's unit, a whole call), then whole calls, with no unit lost as
 * spoiled. Tried at 24 places in turn, on each kernel;
 * some are in the middle of a unit. (The kernel interrupts a rep string
 * instruction between its iterations: a thread stopped at one may have
 * done part of it in the original, which its unit then lacks; there only
 * the loss is checked.) */
START_TEST(a_thread_anywhere_in_the_function_records_the_rest_of_its_call_right)
{
	const char *kernel = oracle_kernels[_i];
	struct live l;
	int middle = 0;

	start_oracle(&l, kernel);
	struct cc_func f = func(&l, kernel);
	struct one_call whole, part;
	first_call(&l, &f, false, &whole);
	for (int place = 0; place < 24; place++) {
		struct cc_patch_stats st = { 0 };
		struct cc_instr_opts o = { .sz = sizeof o, .stats = &st };
		struct ci_map m;
		uint64_t pc = stop_inside(&l, &f, place % 6);
		memset(&part, 0, sizeof part);
		part.entry = f.addr;
		part.keep_tail = true;
		ck_assert_msg(cc_cache__instrument(l.c, &f, &o, &part.in) == 0, "%s",
			      cc_cache__errmsg(l.c));
		/* (not when stepped into a callee: the call ends in the original) */
		ck_assert_uint_le(st.moved, 1);
		cc__instr_copy_map(part.in, &m);
		bool half_done = false;	/* a rep string instruction, maybe half done */
		for (size_t i = 0; i < m.n; i++) {
			if (m.insns[i].pc != pc)
				continue;
			middle += st.moved && m.enters[i] && !m.unit_start[i];
			for (uint32_t k = 0; k < m.insns[i].rep.nops; k++)
				half_done |= m.insns[i].rep.ops[k].count != REP_REG_NONE;
		}
		ck_assert_int_eq(attach_target__resume(l.t), 0);
		consume_first_call(&l, &part);
		stop_recording(&l, &part);
		ck_assert_msg(part.spoiled == 0, "%s, the thread at 0x%" PRIx64 ": %" PRIu64
			      " units spoiled", kernel, pc, part.spoiled);
		/* in the entry's unit, that unit is written whole: a whole call */
		ck_assert(st.moved || part.ntail == 0);
		ck_assert_msg(part.ntail <= whole.n, "%s, the thread at %s+%" PRIu64 ": %zu "
			      "references before the next call (a call makes %zu)", kernel, kernel,
			      pc - f.addr, part.ntail, whole.n);
		if (!half_done)
			same_refs(kernel, pc - f.addr, part.tail, whole.refs + whole.n - part.ntail,
				  part.ntail);
		if (part.ntail || !half_done) {
			ck_assert_uint_eq(part.n, whole.n);
			same_refs(kernel, pc - f.addr, part.refs, whole.refs, whole.n);
		}
		free(part.refs);
		free(part.tail);
		alive(&l);
	}
	ck_assert_msg(middle > 0, "%s: the thread was never moved in the middle of a unit", kernel);
	free(whole.refs);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* instr_oracle's flags reads at its entry the zero flag its caller set:
 * the gate must not count calls there (its incq would clear the flag), and
 * the copy must keep it. The copy records the calls (its first whole call
 * recovered: the write of o[0]), the gate counts none, and the target
 * computes right in the copy and after. */
START_TEST(the_gate_counts_no_calls_where_the_flags_are_live)
{
	struct live l;
	struct one_call c;
	uint64_t n;

	start_oracle(&l, "flags");
	struct cc_func f = func(&l, "flags");
	record_first_call(&l, &f, false, &c);
	progresses(&l, alive(&l));	/* "bad 0": the flag came through the copy */
	ck_assert_int_eq(cc_instr__calls(c.in, 0, &n), -ENOTSUP);
	stop_recording(&l, &c);
	size_t writes = 0;
	for (size_t k = 0; k < c.n; k++)
		writes += c.refs[k].type == REP_REF_WRITE;
	ck_assert_uint_eq(writes, 1);
	free(c.refs);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* instr_oracle's redzone keeps its sums below rsp, in its red zone, across
 * its loop's blocks, and the copy's commits push below rsp: they must step
 * over the red zone, or the sums would be the commits' pushes (a copy that
 * did not computed 85 wrong results in a second). The copy runs (a whole
 * call recorded), and the target computes right in it and after. */
START_TEST(a_function_keeping_data_in_its_red_zone_computes_right_in_the_copy)
{
	struct live l;
	struct one_call c;

	start_oracle(&l, "redzone");
	struct cc_func f = func(&l, "redzone");
	record_first_call(&l, &f, false, &c);
	for (int k = 0; k < 3; k++)	/* "bad 0", call after call in the copy */
		progresses(&l, alive(&l));
	stop_recording(&l, &c);
	free(c.refs);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* A consumer with recovery on each ring of the copy. */
static size_t open_streams_as(struct live *l, struct cc_instr *in, struct stream *ss, bool tally)
{
	size_t nr = cc_instr__thread_count(in);

	memset(ss, 0, MAX_R * sizeof *ss);
	ck_assert_uint_le(nr, MAX_R);
	for (size_t i = 0; i < nr; i++) {
		struct stream *s = &ss[i];
		s->ring = cc_instr__ring(in, i, &s->tid);
		memcpy(s->mine, l->arr, sizeof l->arr);
		s->nthreads = l->nthreads;
		s->owner = -1;
		s->tally = tally;
		ck_assert_int_eq(rep_recover__new(cc_instr__table(in), sink, s, &s->rec), 0);
		ck_assert_msg(cab_consumer__open(s->ring, &s->cons) == 0, "%s", cab_errmsg());
		ck_assert_int_eq(pthread_create(&s->th, NULL, consume, s), 0);
	}
	return nr;
}

static size_t open_streams(struct live *l, struct cc_instr *in, struct stream *ss)
{
	return open_streams_as(l, in, ss, false);
}

/* The rest of a ring (after uninstrument), then its checks: every
 * reference the kernel's next one, nothing dropped or corrupt. */
static void close_stream(struct stream *s)
{
	struct cab_stats cs;

	for (int w = 0; w < 1000 && !cab_consumer__eof(s->cons); w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	s->stop = 1;
	pthread_join(s->th, NULL);
	cab_consumer__stats(s->cons, &cs);
	struct rep_recover_stats rs;
	rep_recover__stats(s->rec, &rs);
	s->units = rs.units;
	ck_assert_msg(s->errors == 0, "%" PRIu64 " wrong references, first: %s", s->errors,
		      s->first_error);
	ck_assert_msg(cs.records_dropped == 0 && cs.corrupt == 0, "thread %d: %" PRIu64 " units "
		      "dropped, %" PRIu64 " corrupt", s->tid, cs.records_dropped, cs.corrupt);
	/* no handler runs the copy here: no unit is spoiled, none unreadable */
	ck_assert_msg(rs.spoiled == 0 && rs.corrupt == 0, "thread %d: %" PRIu64 " units spoiled, %"
		      PRIu64 " not recovered: %s", s->tid, rs.spoiled, rs.corrupt, rep_errmsg());
	cab_consumer__close(s->cons);
	rep_recover__free(s->rec);
}

/* After the uninstrument: each ring read to its end (close_stream), every
 * reference the kernel's from the first one on, none of the threads main
 * made in main's ring (ring 0). axmy's references are axpy's: x[i], y[i]
 * read, o[i] written. */
static void close_streams(struct stream *ss, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		struct stream *s = &ss[i];
		close_stream(s);
		ck_assert_uint_eq(s->refs, s->calls * 3 * N + 3 * s->i + s->phase - s->first_ref);
		ck_assert_msg(i > 0 || s->units == 0, "main's ring got %" PRIu64 " units of the "
			      "threads it made", s->units);
	}
}

static void wait_calls(struct stream *ss, size_t nthreads, uint64_t min, const char *what)
{
	for (int w = 0; w < 3000 && calls_seen(ss + 1, nthreads) < min; w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	ck_assert_msg(calls_seen(ss + 1, nthreads) >= min, "%s: %" PRIu64 " calls seen of each "
		      "worker, not %" PRIu64 " (errors %" PRIu64 " %" PRIu64 ": %s)", what,
		      calls_seen(ss + 1, nthreads), min, ss[1].errors, ss[2].errors, ss[1].first_error);
}

/* instr_kernel pair: axpy and axmy instrumented at once, the second joining
 * the first's state areas; threads cloned meanwhile (churn) get a row of
 * both; axmy undone first, axpy goes on recording; then axpy; originals
 * back, no ring left. */
START_TEST(two_functions_at_once_each_record_exactly_and_go_one_by_one)
{
	struct live l;
	struct cc_instr *a = NULL, *m = NULL;
	struct stream sa[MAX_R], sm[MAX_R];
	uint8_t orig_a[32], orig_m[32], now[32];
	char line[256];
	bool rw;

	start_with(&l, "2", "pair");
	attach_target__on_event(l.t, new_thread, NULL);
	struct cc_func fa = func(&l, "axpy"), fm = func(&l, "axmy");
	ck_assert_int_eq(attach_target__read(l.t, fa.addr, orig_a, 32), 32);
	ck_assert_int_eq(attach_target__read(l.t, fm.addr, orig_m, 32), 32);
	ck_assert_msg(cc_cache__instrument(l.c, &fa, &publishing, &a) == 0, "%s",
		      cc_cache__errmsg(l.c));
	/* without sharing, the threads' gs is taken */
	ck_assert_int_lt(cc_cache__instrument(l.c, &fm, NULL, &m), 0);
	ck_assert_msg(strstr(cc_cache__errmsg(l.c), "uses gs"), "%s", cc_cache__errmsg(l.c));
	struct cc_instr_opts join = { .sz = sizeof join, .share = a };
	ck_assert_msg(cc_cache__instrument(l.c, &fm, &join, &m) == 0, "%s", cc_cache__errmsg(l.c));
	size_t na = open_streams(&l, a, sa), nm = open_streams(&l, m, sm);
	/* main's, the workers', a short-lived thread's alive at the stop, the
	 * spares: the second function has a ring for each row of the first */
	ck_assert_uint_ge(na, l.nthreads + 1 + SPARES);
	ck_assert_uint_eq(nm, na);
	uint64_t slot = ring_slot(a);
	ck_assert_int_eq(ring_slot(m), slot);
	ck_assert_int_eq(rings_mapped(l.p.pid, slot, &rw), (int)(na + nm));
	long born = -1, first = -1;	/* five short-lived threads born meanwhile */
	for (int i = 0; i < 1000 && (first < 0 || born < first + 5); i++) {
		ck_assert_msg(tu_wait_for(&l.p, "churned ", line, sizeof line, 10000) >= 0, "no churn");
		ck_assert_int_eq(sscanf(line, "churned %ld", &born), 1);
		first = first < 0 ? born : first;
	}
	wait_calls(sa, l.nthreads, 100, "axpy");
	wait_calls(sm, l.nthreads, 100, "axmy");
	alive(&l);
	ck_assert_int_eq(cc_cache__uninstrument(l.c, m, NULL), 0);
	close_streams(sm, nm);
	ck_assert_int_eq(attach_target__read(l.t, fm.addr, now, 32), 32);
	ck_assert_mem_eq(now, orig_m, 32);
	ck_assert_int_eq(rings_mapped(l.p.pid, slot, &rw), (int)na);
	/* axpy's copy goes on recording alone */
	wait_calls(sa, l.nthreads, calls_seen(sa + 1, l.nthreads) + 100, "axpy alone");
	alive(&l);
	ck_assert_int_eq(cc_cache__uninstrument(l.c, a, NULL), 0);
	close_streams(sa, na);
	ck_assert_int_eq(attach_target__read(l.t, fa.addr, now, 32), 32);
	ck_assert_mem_eq(now, orig_a, 32);
	ck_assert_int_eq(rings_mapped(l.p.pid, slot, &rw), 0);
	atomic_store(&published, NULL);
	cc_instr__free(m);
	cc_instr__free(a);
	progresses(&l, alive(&l));
	/* every thread's gs_base cleared: a new instrumentation finds gs free */
	ck_assert_msg(cc_cache__instrument(l.c, &fm, NULL, &m) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_int_eq(cc_cache__uninstrument(l.c, m, NULL), 0);
	cc_instr__free(m);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* Threads in a loop that never returns are moved into the copy at the
 * stop that installs it (recorded from then on), and back out at
 * uninstrument (the copy is freed: nothing kept); the target's own check
 * of its arrays sees no wrong value, before, during and after. */
START_TEST(threads_looping_inside_the_function_are_moved_in_and_out)
{
	struct live l;
	struct cc_instr *in = NULL;
	struct stream ss[MAX_R];
	struct cc_patch_stats st = { 0 };
	struct cc_instr_opts io = { .sz = sizeof io, .stats = &st };
	char line[256];
	uint8_t orig[64], now[64];
	bool rw;

	start_with(&l, "2", "spin");
	ck_assert_msg(tu_wait_for(&l.p, "spinning", line, sizeof line, 10000) >= 0, "no spin");
	alive(&l);
	struct cc_func f = func(&l, "spin");
	ck_assert_int_eq(attach_target__read(l.t, f.addr, orig, sizeof orig), (ssize_t)sizeof orig);
	ck_assert_msg(cc_cache__instrument(l.c, &f, &io, &in) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_msg(st.moved >= l.nthreads, "%u threads moved into the copy, not the %zu in "
		      "spin", st.moved, l.nthreads);
	size_t nr = open_streams(&l, in, ss);
	uint64_t slot = ring_slot(in);
	/* each looping thread recorded whole passes */
	for (int w = 0; w < 3000 && calls_seen(ss + 1, l.nthreads) < 20; w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	ck_assert_msg(calls_seen(ss + 1, l.nthreads) >= 20, "a thread looping in spin was not "
		      "recorded (%" PRIu64 " passes)", calls_seen(ss + 1, l.nthreads));
	progresses(&l, alive(&l));
	struct cc_patch_stats us = { 0 };
	char said[2048];
	struct cc_patch_opts po = { .sz = sizeof po, .stats = &us, .report = said,
				    .report_size = sizeof said };
	ck_assert_msg(cc_cache__uninstrument(l.c, in, &po) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_msg(!us.kept_code, "the copy was kept (%u looks): %s", us.looks, said);
	ck_assert_int_eq(rings_mapped(l.p.pid, slot, &rw), 0);
	for (size_t i = 0; i < nr; i++)
		close_stream(&ss[i]);
	ck_assert_int_eq(attach_target__read(l.t, f.addr, now, sizeof now), (ssize_t)sizeof now);
	ck_assert_mem_eq(now, orig, sizeof orig);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	ck_assert_int_eq(attach_target__detach(l.t), 0);
	l.t = NULL;
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* How many threads have their pc in [lo, hi) (world stopped). */
static size_t threads_in(struct live *l, uint64_t lo, uint64_t hi)
{
	pid_t tids[MAX_T + 2];
	size_t k = 0;
	int n = attach_target__threads(l->t, tids, MAX_T + 2);

	ck_assert_int_gt(n, 0);
	for (int i = 0; i < n && i < MAX_T + 2; i++) {
		struct user_regs_struct regs;
		ck_assert_int_eq(attach_target__get_regs(l->t, tids[i], &regs), 0);
		k += regs.rip >= lo && regs.rip < hi;
	}
	return k;
}

/* 8 threads calling axpy, most of them inside it at the stop that
 * installs the copy: those are moved in mid-call, and their streams go on
 * from that very reference, exactly the kernel's, until uninstrument moves
 * them out mid-call again. */
START_TEST(eight_threads_inside_the_function_go_on_in_the_copy_exactly)
{
	struct live l;
	struct cc_instr *in = NULL;
	struct stream ss[MAX_R];
	struct cc_patch_stats st = { 0 };
	struct cc_instr_opts io = { .sz = sizeof io, .stats = &st };
	size_t inside = 0;

	start(&l, "8");
	alive(&l);
	struct cc_func f = func(&l, "axpy");
	/* a stop with at least 4 threads inside axpy; instrument in it */
	for (int tries = 0; tries < 200 && inside < 4; tries++) {
		if (tries)
			ck_assert_int_eq(attach_target__resume(l.t), 0);
		ck_assert_int_eq(attach_target__stop(l.t), 0);
		inside = threads_in(&l, f.addr, f.addr + f.size);
	}
	ck_assert_uint_ge(inside, 4);
	int rc = cc_cache__instrument(l.c, &f, &io, &in);
	ck_assert_int_eq(attach_target__resume(l.t), 0);
	ck_assert_msg(rc == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_uint_ge(st.moved, 1);
	size_t nr = open_streams(&l, in, ss);
	for (int w = 0; w < 3000 && calls_seen(ss + 1, l.nthreads) < 20; w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	ck_assert_uint_ge(calls_seen(ss + 1, l.nthreads), 20);
	alive(&l);
	ck_assert_msg(cc_cache__uninstrument(l.c, in, NULL) == 0, "%s", cc_cache__errmsg(l.c));
	size_t mid_call = 0;
	for (size_t i = 0; i < nr; i++) {
		mid_call += ss[i].owner >= 0 && ss[i].first_ref != 0;
		close_stream(&ss[i]);
	}
	ck_assert_msg(mid_call >= 1, "no stream began inside a call: the threads inside axpy "
		      "finished their calls in the original");
	cc_instr__free(in);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* Taking the copy out stops the world once: the units' jumps out of the
 * copy go in with the original's first bytes, in the same pause (and on
 * the tracer thread), not in a stop of their own before it. Every other
 * stop is a brief look of the grace period (the last one clears the
 * threads' gs_base and unmaps every ring), or a retry, and the stats say
 * how many. The threads in axpy record exact streams up to the end and
 * compute right after. */
START_TEST(uninstrument_unlinks_and_restores_in_one_stop)
{
	struct live l;
	struct cc_instr *in = NULL;
	struct stream ss[MAX_R];
	struct attach_pause_stats p0, p1;
	uint8_t orig[64], now[64];

	start(&l, "2");
	alive(&l);
	struct cc_func f = func(&l, "axpy");
	ck_assert_int_eq(attach_target__read(l.t, f.addr, orig, sizeof orig), (ssize_t)sizeof orig);
	ck_assert_msg(cc_cache__instrument(l.c, &f, NULL, &in) == 0, "%s", cc_cache__errmsg(l.c));
	size_t nr = open_streams(&l, in, ss);
	for (int w = 0; w < 3000 && calls_seen(ss + 1, l.nthreads) < 20; w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	ck_assert_uint_ge(calls_seen(ss + 1, l.nthreads), 20);
	struct cc_patch_stats us = { 0 };
	struct cc_patch_opts po = { .sz = sizeof po, .stats = &us };
	attach_target__pause_stats(l.t, &p0);
	ck_assert_msg(cc_cache__uninstrument(l.c, in, &po) == 0, "%s", cc_cache__errmsg(l.c));
	attach_target__pause_stats(l.t, &p1);
	ck_assert_msg(p1.count - p0.count == 1 + us.retries + us.looks, "uninstrument stopped the "
		      "world %" PRIu64 " times: 1 to unlink and restore, %u retries, %u looks",
		      p1.count - p0.count, us.retries, us.looks);
	ck_assert_uint_gt(us.stop_ns, 0);
	close_streams(ss, nr);
	ck_assert_int_eq(attach_target__read(l.t, f.addr, now, sizeof now), (ssize_t)sizeof now);
	ck_assert_mem_eq(now, orig, sizeof orig);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* The start of the unit of the copy whose first bytes (where unlinking
 * writes its jump) hold pc strictly inside, or 0. */
static uint64_t unit_window(const struct ci_map *m, uint64_t pc)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->unit_start[i] && pc > m->code + m->at[i] && pc < m->code + m->at[i] + CC_UNLINK_JMP)
			return m->code + m->at[i];
	return 0;
}

/* Is pc where a unit of the copy begins? */
static bool unit_begins(const struct ci_map *m, uint64_t pc)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->unit_start[i] && pc == m->code + m->at[i])
			return true;
	return false;
}

/* A worker of instr_kernel (hold mode), world stopped, single-stepped
 * through STEPS instructions (more than a call of axpy and the checks
 * between two: every unit run):
 * never strictly inside a unit's first bytes, where unlinking writes a
 * jump (running or back from a signal handler, a thread there would run
 * the jump's tail). Then stepped on to the next unit's start and SIGUSR1
 * queued for it there: its handler runs with that pc in its signal frame
 * and holds it (instr_kernel's "held"). */
static void step_and_hold(struct live *l, const struct ci_map *m)
{
	enum { STEPS = 40000 };
	pid_t tids[16], worker = 0;
	struct user_regs_struct regs;
	int n, k, starts = 0;

	ck_assert_int_eq(attach_target__stop(l->t), 0);
	n = attach_target__threads(l->t, tids, 16);
	for (k = 0; k < n && !worker; k++)
		if (tids[k] != l->p.pid)
			worker = tids[k];
	ck_assert_int_ne(worker, 0);
	for (k = 0; k < STEPS; k++) {
		ck_assert_int_eq(attach_target__get_regs(l->t, worker, &regs), 0);
		ck_assert_msg(!unit_window(m, regs.rip), "the worker stopped at 0x%llx, inside the "
			      "first bytes of the unit at 0x%llx", (unsigned long long)regs.rip,
			      (unsigned long long)unit_window(m, regs.rip));
		starts += unit_begins(m, regs.rip);
		ck_assert_int_eq(attach_target__step(l->t, worker), 0);
	}
	ck_assert_int_gt(starts, 1000);
	do {
		ck_assert_int_eq(attach_target__step(l->t, worker), 0);
		ck_assert_int_eq(attach_target__get_regs(l->t, worker, &regs), 0);
	} while (!unit_begins(m, regs.rip) && ++k < 2 * STEPS);
	ck_assert(unit_begins(m, regs.rip));
	ck_assert_int_eq(syscall(SYS_tgkill, l->p.pid, worker, SIGUSR1), 0);
	ck_assert_int_eq(attach_target__resume(l->t), 0);
	char line[256];
	ck_assert_msg(tu_wait_for(&l->p, "held", line, sizeof line, 10000) >= 0,
		      "the worker was not held at 0x%llx", (unsigned long long)regs.rip);
}

/* Unlinking writes a 5-byte jump over each unit's first bytes, so those
 * are always one instruction (a unit beginning with a shorter one is
 * padded): no thread is ever strictly inside them, neither running nor
 * back from a signal handler, which no step can move (it once ran the
 * jump's tail and died). A thread held in a handler at a unit's start
 * keeps the copy; let go, it takes the jump to the original and runs
 * right; the copy is released after. */
START_TEST(no_thread_is_ever_inside_a_units_first_bytes)
{
	struct live l;
	struct cc_instr *in = NULL;
	struct stream ss[MAX_R];
	struct ci_map m;
	char go[64];

	snprintf(go, sizeof go, "/tmp/padrone-check-instr-hold.%d", (int)getpid());
	unlink(go);
	start_mode(&l, "1", "hold", go);
	alive(&l);
	struct cc_func f = func(&l, "axpy");
	ck_assert_msg(cc_cache__instrument(l.c, &f, NULL, &in) == 0, "%s", cc_cache__errmsg(l.c));
	size_t nr = open_streams(&l, in, ss);
	for (int w = 0; w < 3000 && calls_seen(ss + 1, l.nthreads) < 5; w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	cc__instr_copy_map(in, &m);
	step_and_hold(&l, &m);
	struct cc_patch_opts po = { .sz = sizeof po, .timeout_ms = 300 };
	ck_assert_msg(cc_cache__uninstrument(l.c, in, &po) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_msg(!cc_instr__released(in), "the copy was released while a thread was held "
		      "in it");
	FILE *g = fopen(go, "w");
	ck_assert_ptr_nonnull(g);
	fclose(g);
	char line[256];
	ck_assert_msg(tu_wait_for(&l.p, "let go", line, sizeof line, 10000) >= 0, "not let go");
	progresses(&l, alive(&l));
	ck_assert_msg(cc_cache__uninstrument(l.c, in, &po) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_msg(cc_instr__released(in), "the copy was kept once the thread left it");
	close_streams(ss, nr);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	unlink(go);
	end(&l);
}
END_TEST

/* Children made while instrumented, by fork, vfork and posix_spawn,
 * inherit the patched code and the gs_base of the thread that made them
 * (main's, whose ring padrone reads): pointed at the sink at their fork
 * event, they compute right (their exit status says) and never write into
 * main's ring (main never calls axpy itself). */
START_TEST(forked_children_run_right_and_never_write_into_the_rings)
{
	struct live l;
	struct cc_instr *in = NULL;
	struct stream ss[MAX_R];
	char line[256];
	long ok = 0, nbad = 0, first = -1;

	start_with(&l, "2", "fork");
	attach_target__on_event(l.t, new_thread, NULL);
	struct cc_func f = func(&l, "axpy");
	ck_assert_msg(cc_cache__instrument(l.c, &f, &publishing, &in) == 0, "%s",
		      cc_cache__errmsg(l.c));
	size_t nr = open_streams(&l, in, ss);
	/* nine children (three of each kind) made while instrumented */
	for (int i = 0; i < 1000 && (first < 0 || ok < first + 9); i++) {
		ck_assert_msg(tu_wait_for(&l.p, "forked ", line, sizeof line, 10000) >= 0,
			      "no child");
		ck_assert_int_eq(sscanf(line, "forked %ld bad %ld", &ok, &nbad), 2);
		ck_assert_msg(nbad == 0, "a child made while instrumented failed: %s", line);
		if (first < 0)
			first = ok;
	}
	ck_assert_int_ge(ok, first + 9);
	for (int w = 0; w < 3000 && busy_rings(ss, nr, 20) < l.nthreads; w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	alive(&l);
	ck_assert_msg(cc_cache__uninstrument(l.c, in, NULL) == 0, "%s", cc_cache__errmsg(l.c));
	for (size_t i = 0; i < nr; i++) {
		close_stream(&ss[i]);
		if (i == 0)
			ck_assert_msg(ss[i].units == 0, "main's ring got %" PRIu64 " units of the "
				      "children it made", ss[i].units);
	}
	ck_assert_uint_ge(busy_rings(ss, nr, 20), l.nthreads);
	atomic_store(&published, NULL);
	cc_instr__free(in);
	ck_assert_msg(tu_wait_for(&l.p, "forked ", line, sizeof line, 10000) >= 0, "no child");
	ck_assert_int_eq(sscanf(line, "forked %ld bad %ld", &ok, &nbad), 2);
	ck_assert_int_eq(nbad, 0);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* The last "churned T" line before the next "alive": threads finished. */
static long churned_now(struct live *l)
{
	char line[256];
	long t = -1;

	for (;;) {
		ck_assert_msg(tu_read_line(&l->p, line, sizeof line, 10000) >= 0, "no progress");
		if (sscanf(line, "churned %ld", &t) != 1 && t >= 0 && strncmp(line, "alive", 5) == 0)
			return t;
	}
}

/* Read and drop the lines the target has written so far: the next one read
 * is of a time after this. */
static void skip_written(struct live *l)
{
	char line[256];

	while (tu_read_line(&l->p, line, sizeof line, 1) >= 0)
		;
}

/* The target's threads now. */
static int threads_now(struct live *l)
{
	char path[64];
	int n = 0;

	snprintf(path, sizeof path, "/proc/%d/task", (int)l->p.pid);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Thread churn while instrumented: each thread made meanwhile records into
 * a ring of its own (a spare, given back when the thread exits and taken
 * by the next), so every call of every short-lived thread is recovered, up
 * to the last unit of each; nothing dropped, and the target's own checks
 * see no wrong result. (Spares enough that none is left to the sink while
 * the exit events of a loaded machine lag behind the clones.) */
START_TEST(short_lived_threads_record_every_unit_into_rings_of_their_own)
{
	struct live l;
	struct cc_instr *in = NULL;
	struct stream ss[MAX_R];

	struct cc_instr_opts io = publishing;

	io.spare_rings = CHURN_SPARES;
	start_with(&l, "2", "churn");
	attach_target__on_event(l.t, new_thread, NULL);
	struct cc_func f = func(&l, "axpy");
	ck_assert_msg(cc_cache__instrument(l.c, &f, &io, &in) == 0, "%s", cc_cache__errmsg(l.c));
	/* short-lived threads there at the install (or born since): they may
	 * have run part of their calls in the original */
	long before = threads_now(&l) - 1 - (long)l.nthreads;
	size_t nr = open_streams(&l, in, ss);
	/* what the target wrote while the install went on (seconds, under
	 * ASan on a loaded machine) counts threads finished before it */
	skip_written(&l);
	long c0 = churned_now(&l), c1 = c0;
	for (int i = 0; i < 1000 && c1 < c0 + 12 + before; i++)
		c1 = churned_now(&l);
	ck_assert_int_ge(c1, c0 + 12 + before);
	alive(&l);
	ck_assert_msg(cc_cache__uninstrument(l.c, in, NULL) == 0, "%s", cc_cache__errmsg(l.c));
	uint64_t spare_units = 0;
	for (size_t i = 0; i < nr; i++) {
		close_stream(&ss[i]);
		if (i > l.nthreads)
			spare_units += ss[i].units;
	}
	ck_assert_uint_eq(ss[0].units, 0);	/* main's: never its children's */
	/* the threads finished between the two lines, but those there at the
	 * install: born after it and finished before the uninstall, 20 calls
	 * each, each call N executions of the loop */
	long made = c1 - c0 - (before > 2 ? before : 2);
	uint64_t least = (uint64_t)made * 20 * N;
	ck_assert_msg(spare_units >= least, "the threads made while instrumented left %" PRIu64
		      " units, fewer than the %" PRIu64 " of their %ld calls (%ld threads "
		      "finished, %ld there at the install)", spare_units, least, made * 20,
		      c1 - c0, before);
	atomic_store(&published, NULL);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* A function whose CFG has a jump table: its table's jmp is re-pointed at
 * the copy, so every case block runs (and is recorded) in the copy: each
 * worker's ring holds writes to all 8 elements its cases change; the
 * target's own check of the results sees no wrong one. */
START_TEST(a_jump_table_is_re_pointed_at_the_copy)
{
	struct live l;
	struct cc_instr *in = NULL;
	struct stream ss[MAX_R];

	start_with(&l, "2", "switch");
	alive(&l);
	struct cc_func f = func(&l, "dispatch");
	ck_assert_msg(cc_cache__instrument(l.c, &f, NULL, &in) == 0, "%s", cc_cache__errmsg(l.c));
	size_t nr = open_streams_as(&l, in, ss, true);
	for (int w = 0; w < 3000; w++) {
		size_t full = 0;
		for (size_t i = 1; i <= l.nthreads; i++) {
			bool all = true;
			for (int k = 0; k < 8; k++)
				all &= __atomic_load_n(&ss[i].hits[k], __ATOMIC_RELAXED) >= 100;
			full += all;
		}
		if (full == l.nthreads)
			break;
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	}
	progresses(&l, alive(&l));
	ck_assert_msg(cc_cache__uninstrument(l.c, in, NULL) == 0, "%s", cc_cache__errmsg(l.c));
	for (size_t i = 0; i < nr; i++)
		close_stream(&ss[i]);
	for (size_t i = 1; i <= l.nthreads; i++)
		for (int k = 0; k < 8; k++)
			ck_assert_msg(ss[i].hits[k] >= 100, "thread %d: case %d's write recorded %"
				      PRIu64 " times: the table still jumps to the original", ss[i].tid,
				      k, ss[i].hits[k]);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* Sample mode with a ring that stays full (no consumer at first): the
 * thread drops its units into its block's junk area at the cost of writing
 * them, entering the ring stub once per junk area (or chunk), not once per
 * unit; the drops are counted; a consumer that comes later gets whole,
 * recoverable units from where writing resumed; the target computes right
 * all along. */
START_TEST(sample_mode_drops_whole_junk_areas_not_single_units)
{
	struct live l;
	struct cc_instr *in = NULL;
	struct cc_instr_opts o = publishing;
	struct cab_stats cs;

	o.sampling = true;
	o.chunk_bytes = 4096;
	o.nchunks = 4;
	start(&l, "1");
	attach_target__on_event(l.t, new_thread, NULL);
	struct cc_func f = func(&l, "axpy");
	ck_assert_msg(cc_cache__instrument(l.c, &f, &o, &in) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_uint_ge(cc_instr__thread_count(in), 2);	/* and the spares */
	struct stream s = { .owner = -1 };
	s.ring = cc_instr__ring(in, 1, &s.tid);	/* the worker's */
	ck_assert_int_ne(s.tid, 0);
	cs.records_dropped = 0;
	for (int w = 0; w < 3000 && cs.records_dropped < 200000; w++) {
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
		cab_ring__stats(s.ring, &cs);
	}
	ck_assert_uint_ge(cs.records_dropped, 200000);
	uint64_t stub = 0;
	ck_assert_int_eq(cc_instr__stub_calls(in, 1, &stub), 0);
	cab_ring__stats(s.ring, &cs);
	ck_assert_msg(stub > 0 && stub * 50 < cs.records_dropped, "%" PRIu64 " stub calls for %"
		      PRIu64 " units dropped", stub, cs.records_dropped);
	alive(&l);
	ck_assert_int_eq(rep_recover__new(cc_instr__table(in), NULL, NULL, &s.rec), 0);
	ck_assert_msg(cab_consumer__open(s.ring, &s.cons) == 0, "%s", cab_errmsg());
	ck_assert_int_eq(pthread_create(&s.th, NULL, consume, &s), 0);
	struct rep_recover_stats rs = { 0 };
	for (int w = 0; w < 3000 && rs.units < 10000; w++) {
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
		cab_consumer__stats(s.cons, &cs);
		rs.units = cs.records_delivered;
	}
	ck_assert_uint_ge(rs.units, 10000);
	ck_assert_int_eq(cc_cache__uninstrument(l.c, in, NULL), 0);
	for (int w = 0; w < 1000 && !cab_consumer__eof(s.cons); w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	s.stop = 1;
	pthread_join(s.th, NULL);
	cab_consumer__stats(s.cons, &cs);
	rep_recover__stats(s.rec, &rs);
	ck_assert_msg(s.rc == 0 && rs.corrupt == 0, "recovery failed: %s", rep_errmsg());
	ck_assert_uint_eq(cs.corrupt, 0);
	ck_assert_uint_ge(rs.units, 10000);
	ck_assert_uint_ge(rs.gaps, 1);
	cab_consumer__close(s.cons);
	rep_recover__free(s.rec);
	atomic_store(&published, NULL);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* instr_kernel's one worker in axpy, instrumented with rings of 16 chunks
 * of 4 KiB, main's ring and the worker's read by reader; once the worker
 * recorded 30 calls. */
static struct cc_instr *small_rings(struct live *l, struct stream ss[2], void *(*reader)(void *))
{
	struct cc_instr_opts o = publishing;
	struct cc_instr *in = NULL;

	o.chunk_bytes = 4096;
	o.nchunks = 16;
	start(l, "1");
	attach_target__on_event(l->t, new_thread, NULL);
	struct cc_func f = func(l, "axpy");
	ck_assert_msg(cc_cache__instrument(l->c, &f, &o, &in) == 0, "%s", cc_cache__errmsg(l->c));
	memset(ss, 0, 2 * sizeof *ss);
	for (size_t i = 0; i < 2; i++) {
		struct stream *s = &ss[i];
		s->ring = cc_instr__ring(in, i, &s->tid);
		memcpy(s->mine, l->arr, sizeof l->arr);
		s->nthreads = l->nthreads;
		s->owner = -1;
		ck_assert_int_eq(rep_recover__new(cc_instr__table(in), sink, s, &s->rec), 0);
		ck_assert_msg(cab_consumer__open(s->ring, &s->cons) == 0, "%s", cab_errmsg());
		ck_assert_int_eq(pthread_create(&s->th, NULL, reader, s), 0);
	}
	for (int w = 0; w < 3000 && calls_seen(ss + 1, 1) < 30; w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	ck_assert_uint_ge(calls_seen(ss + 1, 1), 30);
	return in;
}

/* Once uninstrumented: the stream read to its end, right, nothing lost;
 * its consumer's counters. */
static void stream_ends_whole(struct stream *s, struct cab_stats *cs)
{
	struct rep_recover_stats rs;

	for (int w = 0; w < 3000 && !cab_consumer__eof(s->cons); w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	s->stop = 1;
	pthread_join(s->th, NULL);
	cab_consumer__stats(s->cons, cs);
	rep_recover__stats(s->rec, &rs);
	ck_assert_msg(s->rc == 0 && rs.corrupt == 0, "recovery failed: %s", rep_errmsg());
	ck_assert_msg(s->errors == 0, "%s", s->first_error);
	ck_assert_uint_eq(cs->records_dropped, 0);
	ck_assert_uint_eq(cs->corrupt, 0);
	cab_consumer__close(s->cons);
	rep_recover__free(s->rec);
}

/* A consumer slower than the thread (it naps after each span): the thread
 * waits, loses nothing, and is woken when half the ring is free, not at
 * each chunk freed (a futex round trip per chunk); the stream is the
 * kernel's exactly. */
static int slow_consume_span(void *arg, const uint64_t *words, size_t nwords, unsigned flags)
{
	struct stream *s = arg;

	nanosleep(&(struct timespec){ 0, 300000 }, NULL);
	return rep_recover__cab_fn(s->rec, words, nwords, flags);
}

static void *slow_consume(void *arg)
{
	struct stream *s = arg;

	s->rc = cab_consumer__run(s->cons, slow_consume_span, s, &s->stop);
	rep_recover__flush(s->rec);
	return NULL;
}

START_TEST(a_waiting_thread_runs_again_once_half_its_ring_is_free)
{
	struct live l;
	struct stream ss[2];
	struct cab_stats cs;
	struct cc_instr *in = small_rings(&l, ss, slow_consume);

	alive(&l);
	ck_assert_int_eq(cc_cache__uninstrument(l.c, in, NULL), 0);
	for (size_t i = 0; i < 2; i++)
		stream_ends_whole(&ss[i], &cs);
	/* from the first reference on: a thread inside axpy at a stop is
	 * moved into the copy, and out of it, mid-call */
	const struct stream *s = &ss[1];
	ck_assert_uint_eq(s->refs, s->calls * 3 * N + 3 * s->i + s->phase - s->first_ref);
	ck_assert_msg(cs.producer_waits > 0 && cs.producer_waits * 4 < cs.chunks_consumed,
		      "the thread waited %" PRIu64 " times for %" PRIu64 " chunks",
		      cs.producer_waits, cs.chunks_consumed);
	atomic_store(&published, NULL);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* A consumer that reads nothing while s->hold is set. */
static int held_consume_span(void *arg, const uint64_t *words, size_t nwords, unsigned flags)
{
	struct stream *s = arg;

	while (atomic_load(&s->hold))
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	return rep_recover__cab_fn(s->rec, words, nwords, flags);
}

static void *held_consume(void *arg)
{
	struct stream *s = arg;

	s->rc = cab_consumer__run(s->cons, held_consume_span, s, &s->stop);
	rep_recover__flush(s->rec);
	return NULL;
}

static void *let_go_later(void *arg)
{
	struct stream *s = arg;

	nanosleep(&(struct timespec){ 0, 400000000 }, NULL);
	atomic_store(&s->hold, false);
	return NULL;
}

/* A thread waiting in the copy's ring stub when uninstrument puts the
 * entry back leaves the copy only once its consumer frees a chunk: the
 * grace period waits for that without stopping the world (a look would
 * find it where it was), so 400 ms of a consumer reading nothing cost no
 * more looks than a consumer keeping up, where one look every 16 ms was
 * made before. Nothing is lost, the stream is the kernel's exactly, the
 * copy is released. */
START_TEST(uninstrument_waits_for_the_consumer_of_a_waiting_thread_without_stopping)
{
	struct live l;
	struct stream ss[2];
	struct cab_stats cs;
	pthread_t later;
	struct cc_instr *in = small_rings(&l, ss, held_consume);

	atomic_store(&ss[1].hold, true);
	for (int w = 0; w < 3000 && !cab_ring__producer_waiting(ss[1].ring); w++)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	ck_assert_msg(cab_ring__producer_waiting(ss[1].ring), "the worker never waited");
	ck_assert_int_eq(pthread_create(&later, NULL, let_go_later, &ss[1]), 0);
	struct cc_patch_stats st = { 0 };
	struct cc_patch_opts po = { .sz = sizeof po, .stats = &st, .timeout_ms = 5000 };
	ck_assert_msg(cc_cache__uninstrument(l.c, in, &po) == 0, "%s", cc_cache__errmsg(l.c));
	pthread_join(later, NULL);
	ck_assert_msg(!st.kept_code && cc_instr__released(in), "the copy was kept");
	ck_assert_msg(st.looks <= 3, "%u looks at the threads while the worker waited", st.looks);
	for (size_t i = 0; i < 2; i++)
		stream_ends_whole(&ss[i], &cs);
	atomic_store(&published, NULL);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* A thread waiting for a full ring whose consumer is alive (it beats, and
 * reads nothing) waits as long as it lives; told not to wait
 * (cc_instr__wait_when_full, as under an overhead budget), it goes on at
 * once, dropping what finds the ring full, counted; told again, it waits
 * again. The target computes right throughout. */

/* The producer waited more than waits times (30 s at most), the consumer
 * beating meanwhile. */
static bool waits_beating(struct cab_consumer *cons, uint64_t waits)
{
	struct cab_stats cs;

	for (int i = 0; i < 600; i++) {
		cab_consumer__beat(cons);
		cab_consumer__stats(cons, &cs);
		if (cs.producer_waits > waits)
			return true;
		nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	}
	return false;
}

static int ignore_span(void *arg, const uint64_t *words, size_t nwords, unsigned flags)
{
	(void)arg;
	(void)words;
	(void)nwords;
	(void)flags;
	return 0;
}

/* The target's calls stand still for 10 of its lines in a row (half a
 * second), the consumer beating (its lines from before are read first):
 * their count, or -1 if they never did in 30 s. */
static long stalls(struct live *l, struct cab_consumer *cons)
{
	long last = alive(l);

	for (int i = 0, same = 0; i < 600; i++) {
		cab_consumer__beat(cons);
		long now = alive(l);
		same = now == last ? same + 1 : 0;
		last = now;
		if (same == 10)
			return now;
	}
	return -1;
}

START_TEST(a_thread_waiting_for_a_live_consumer_drops_once_told_not_to_wait)
{
	struct live l;
	struct cc_instr *in = NULL;
	struct cc_instr_opts o = { .sz = sizeof o, .chunk_bytes = 4096, .nchunks = 16,
				   .consumer_timeout_ms = 120000 };
	struct cab_consumer *cons;
	struct cab_stats cs;
	pid_t tid;

	start(&l, "1");
	struct cc_func f = func(&l, "axpy");
	ck_assert_msg(cc_cache__instrument(l.c, &f, &o, &in) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_msg(cab_consumer__open(cc_instr__ring(in, 1, &tid), &cons) == 0, "%s",
		      cab_errmsg());
	ck_assert_msg(waits_beating(cons, 0), "the worker never waited for its full ring");
	long stood = stalls(&l, cons);
	ck_assert_msg(stood >= 0, "the worker went on with its ring full and its consumer alive");
	ck_assert_int_eq(cc_instr__wait_when_full(in, false), 0);
	progresses(&l, stood);	/* (within 30 s, the consumer's timeout 120) */
	cab_consumer__stats(cons, &cs);
	ck_assert_uint_gt(cs.records_dropped, 0);
	ck_assert_int_eq(cc_instr__wait_when_full(in, true), 0);
	/* (dropping, it writes again once there is room, and waits when full) */
	ck_assert_int_ge(cab_consumer__drain(cons, ignore_span, NULL), 0);
	ck_assert_msg(waits_beating(cons, cs.producer_waits), "told to wait again, the "
		      "worker never waited");
	ck_assert_int_eq(cc_cache__uninstrument(l.c, in, NULL), 0);
	cab_consumer__close(cons);
	cc_instr__free(in);
	progresses(&l, alive(&l));
	end(&l);
}
END_TEST

/* ------------------------------------------------ signal handlers inside */

/* instr_signals (tests/targets): scale(x, o, n), o[i] = 3 * x[i] + 1,
 * called by the loop on its arrays and by a 1 kHz SIGALRM handler on
 * others, on the one thread: the handler's calls land anywhere in the
 * loop's, between a unit's captures and its commit too. What one stream
 * recovered, per element of each array. */
struct sig_stream {
	uint64_t base[4];		/* loop x, loop o, handler x, handler o */
	long len[4];			/* elements (the handler's: two pairs) */
	long per_call[4];		/* elements per call */
	uint64_t *hits[4];		/* references per element */
	uint64_t stack_lo, stack_hi;	/* the ret's reads */
	uint64_t stack_reads;
	uint64_t strays;
	char first_stray[160];
	struct rep_recover *rec;
	struct cab_consumer *cons;
	volatile int stop;
};

static bool sig_hit(struct sig_stream *s, const struct rep_ref *r)
{
	for (int k = 0; k < 4; k++) {
		uint64_t off = r->addr - s->base[k];
		bool want = k % 2 ? r->type == REP_REF_WRITE : r->type == REP_REF_READ;
		if (r->addr >= s->base[k] && off < (uint64_t)s->len[k] * 8) {
			if (off % 8 || r->size != 8 || !want)
				return false;
			s->hits[k][off / 8]++;
			return true;
		}
	}
	if (r->type != REP_REF_READ || r->addr < s->stack_lo || r->addr >= s->stack_hi)
		return false;
	s->stack_reads++;
	return true;
}

static void sig_sink(void *arg, const struct rep_ref *refs, size_t n)
{
	struct sig_stream *s = arg;

	for (size_t i = 0; i < n; i++)
		if (refs[i].type != REP_REF_INSTR && !sig_hit(s, &refs[i]) && !s->strays++)
			snprintf(s->first_stray, sizeof s->first_stray, "pc 0x%" PRIx64 " addr 0x%"
				 PRIx64 " size %u type %u", refs[i].pc, refs[i].addr, refs[i].size,
				 refs[i].type);
}

static void *sig_consume(void *arg)
{
	struct sig_stream *s = arg;

	cab_consumer__run(s->cons, rep_recover__cab_fn, s->rec, &s->stop);
	rep_recover__flush(s->rec);
	return NULL;
}

static void sig_stack(pid_t pid, struct sig_stream *s)
{
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof line, f))
		if (strstr(line, "[stack]"))
			ck_assert_int_eq(sscanf(line, "%" SCNx64 "-%" SCNx64, &s->stack_lo,
						&s->stack_hi), 2);
	fclose(f);
	ck_assert_uint_gt(s->stack_hi, 0);
}

/* SIGUSR1 toggles instr_signals' pause: paused, its exact calls so far. */
static void sig_pause(struct live *l, long *loop, long *handler)
{
	char line[256];
	ck_assert_int_eq(kill(l->p.pid, SIGUSR1), 0);
	ck_assert_msg(tu_wait_for(&l->p, "paused ", line, sizeof line, 30000) > 0, "no pause");
	ck_assert_int_eq(sscanf(line, "paused %ld %ld", loop, handler), 2);
}

/* The next progress line: calls so far, none wrong. */
static void sig_alive(struct live *l, long *loop, long *handler)
{
	char line[256];
	long nbad;
	ck_assert_msg(tu_wait_for(&l->p, "alive ", line, sizeof line, 30000) > 0, "no progress");
	ck_assert_int_eq(sscanf(line, "alive %ld %ld bad %ld", loop, handler, &nbad), 3);
	ck_assert_msg(nbad == 0, "the target computed %ld wrong results", nbad);
}

static void sig_start(struct live *l, struct sig_stream *s, bool nodefer)
{
	char *argv[] = { (char *)tu_path("tests/targets/instr_signals"),
			 nodefer ? "nodefer" : NULL, NULL };
	char line[256];
	struct attach_error aerr;
	struct cc_error err;
	void *a[4];

	memset(l, 0, sizeof *l);
	ck_assert_int_eq(tu_spawn(&l->p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(&l->p, "scale=", line, sizeof line, 10000), 0);
	ck_assert_int_eq(sscanf(line, "scale=%*p %ld %ld", &s->per_call[0], &s->per_call[2]), 2);
	s->per_call[1] = s->len[0] = s->len[1] = s->per_call[0];
	s->per_call[3] = s->per_call[2];
	s->len[2] = s->len[3] = 2 * s->per_call[2];	/* a nested handler's pair */
	ck_assert_int_gt(tu_wait_for(&l->p, "arrays ", line, sizeof line, 10000), 0);
	ck_assert_int_eq(sscanf(line, "arrays %p %p %p %p", &a[0], &a[1], &a[2], &a[3]), 4);
	for (int k = 0; k < 4; k++) {
		s->base[k] = (uint64_t)a[k];
		s->hits[k] = calloc((size_t)s->len[k], sizeof *s->hits[k]);
		ck_assert_ptr_nonnull(s->hits[k]);
	}
	ck_assert_int_gt(tu_wait_for(&l->p, "ready", line, sizeof line, 10000), 0);
	sig_stack(l->p.pid, s);
	ck_assert_msg(attach_seize(l->p.pid, NULL, &l->t, &aerr) == 0, "%s", aerr.msg);
	ck_assert_msg(cc_cache__open(l->t, NULL, &l->c, &err) == 0, "%s", err.msg);
	ck_assert_msg(cc_syms__open(l->p.pid, &l->sy, &err) == 0, "%s", err.msg);
}

/* Each element was referenced at most once per call made on its array (a
 * unit the handler spoiled is dropped, never recovered with the other
 * call's index), and the loads recovered plus the units dropped are all
 * the loads the target made: the blocks keeping a slot (the loop's, the
 * ret's) make one load each. */
static void sig_check(struct sig_stream *s, long loop_calls, long handler_calls,
		      const struct rep_recover_stats *rs)
{
	uint64_t elements = (uint64_t)loop_calls * (uint64_t)s->per_call[0] +
			    (uint64_t)handler_calls * (uint64_t)s->per_call[2];
	uint64_t got[2] = { 0, 0 };	/* loads, stores */

	ck_assert_msg(s->strays == 0, "%" PRIu64 " references to no array: the first %s",
		      s->strays, s->first_stray);
	for (int k = 0; k < 4; k++)
		for (long e = 0; e < s->len[k]; e++) {
			long calls = k < 2 ? loop_calls : handler_calls;
			ck_assert_msg(s->hits[k][e] <= (uint64_t)calls, "%s %s[%ld] referenced %"
				      PRIu64 " times in %ld calls", k < 2 ? "the loop's" :
				      "the handler's", k % 2 ? "o" : "x", e, s->hits[k][e], calls);
			got[k % 2] += s->hits[k][e];
		}
	uint64_t calls = (uint64_t)(loop_calls + handler_calls);
	ck_assert_uint_eq(got[0] + s->stack_reads + rs->spoiled, elements + calls);
	ck_assert_uint_le(got[1], elements);
	ck_assert_uint_ge(got[1] + rs->spoiled, elements);
	ck_assert_uint_eq(rs->corrupt, 0);
	/* dropped only where a handler ran between captures and commit */
	ck_assert_uint_lt(rs->spoiled, elements / 10);
}

START_TEST(a_handler_running_the_copy_never_leaves_its_addresses_in_a_unit)
{
	struct live l;
	struct sig_stream s = { 0 };
	struct cc_instr *in = NULL;
	struct cc_instr_opts o = { .sz = sizeof o };
	long l0, h0, l1, h1, lx, hx;
	pthread_t th;
	pid_t tid;

	sig_start(&l, &s, _i == 1);
	struct cc_func f = func(&l, "scale");
	sig_pause(&l, &l0, &h0);
	ck_assert_msg(cc_cache__instrument(l.c, &f, &o, &in) == 0, "%s", cc_cache__errmsg(l.c));
	ck_assert_int_eq(rep_recover__new(cc_instr__table(in), sig_sink, &s, &s.rec), 0);
	ck_assert_msg(cab_consumer__open(cc_instr__ring(in, 0, &tid), &s.cons) == 0, "%s",
		      cab_errmsg());
	ck_assert_int_eq(tid, l.p.pid);
	ck_assert_int_eq(pthread_create(&th, NULL, sig_consume, &s), 0);
	kill(l.p.pid, SIGUSR1);		/* resume */
	/* a second or more of calls, the handler's included */
	do
		sig_alive(&l, &lx, &hx);
	while (hx < h0 + 1000);
	sig_pause(&l, &l1, &h1);
	ck_assert_msg(cc_cache__uninstrument(l.c, in, NULL) == 0, "%s", cc_cache__errmsg(l.c));
	for (int w = 0; w < 3000 && !cab_consumer__eof(s.cons); w++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	s.stop = 1;
	pthread_join(th, NULL);
	kill(l.p.pid, SIGUSR1);
	struct rep_recover_stats rs;
	rep_recover__stats(s.rec, &rs);
	fprintf(stderr, "# %s: calls loop %ld handler %ld, units %" PRIu64 ", spoiled %" PRIu64
		"\n", _i ? "SA_NODEFER" : "deferred", l1 - l0, h1 - h0, rs.units, rs.spoiled);
	sig_check(&s, l1 - l0, h1 - h0, &rs);
	sig_alive(&l, &lx, &hx);
	sig_alive(&l, &lx, &hx);
	ck_assert_int_gt(hx, h1);
	cab_consumer__close(s.cons);
	rep_recover__free(s.rec);
	cc_instr__free(in);
	for (int k = 0; k < 4; k++)
		free(s.hits[k]);
	end(&l);
}
END_TEST

int main(void)
{
	tu_block_sigchld();
Suite *s = suite_create("instr");
	TCase *tc = tcase_create("instr");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, the_recovered_stream_is_the_kernels_exactly);
	tcase_add_test(tc, the_gate_counts_no_calls_where_the_flags_are_live);
	tcase_add_test(tc, a_function_keeping_data_in_its_red_zone_computes_right_in_the_copy);
	tcase_add_test(tc, bad_inputs_are_refused_and_leave_the_target_alone);
	tcase_add_test(tc, a_rings_fd_the_target_replaced_meanwhile_is_left_to_it);
	tcase_add_test(tc, threads_cloned_while_instrumented_never_write_into_their_makers_ring);
	tcase_add_test(tc, threads_looping_inside_the_function_are_moved_in_and_out);
	tcase_add_test(tc, eight_threads_inside_the_function_go_on_in_the_copy_exactly);
	tcase_add_test(tc, uninstrument_unlinks_and_restores_in_one_stop);
	tcase_add_test(tc, forked_children_run_right_and_never_write_into_the_rings);
	tcase_add_test(tc, short_lived_threads_record_every_unit_into_rings_of_their_own);
	tcase_add_test(tc, a_jump_table_is_re_pointed_at_the_copy);
	tcase_add_loop_test(tc, pipas_plan_recovers_what_the_plain_plan_stores, 0, 5);
	tcase_add_loop_test(tc, a_thread_anywhere_in_the_function_records_the_rest_of_its_call_right,
			    0, 5);
	tcase_add_test(tc, sample_mode_drops_whole_junk_areas_not_single_units);
	tcase_add_test(tc, a_waiting_thread_runs_again_once_half_its_ring_is_free);
	tcase_add_test(tc, uninstrument_waits_for_the_consumer_of_a_waiting_thread_without_stopping);
	tcase_add_test(tc, a_thread_waiting_for_a_live_consumer_drops_once_told_not_to_wait);
	tcase_add_test(tc, two_functions_at_once_each_record_exactly_and_go_one_by_one);
	tcase_add_test(tc, no_thread_is_ever_inside_a_units_first_bytes);
	tcase_add_loop_test(tc, a_handler_running_the_copy_never_leaves_its_addresses_in_a_unit, 0, 2);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
