/* libpadrone's session API on a real process (tests/targets/hotloop): the
 * failure reasons, interrupting a profile, the exit event, the BPF backend,
 * and the extensions later rooms keep in a session. */
#include "tests/lib/tu.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attach/attach.h"
#include "src/padrone.h"
#include "src/session.h"

static void start_hotloop(struct tu_proc *p, const char *duration)
{
	char *argv[] = { (char *)tu_path("tests/targets/hotloop"), "-d", (char *)duration, NULL };
	char line[256];

	ck_assert_int_eq(tu_spawn(p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(p, "tick ", line, sizeof(line), 10000), 0);
}

static struct padrone_session *attached(struct tu_proc *p, const char *duration)
{
	struct padrone_session *s = padrone_session__new(NULL);

	ck_assert_ptr_nonnull(s);
	start_hotloop(p, duration);
	ck_assert_msg(padrone_session__attach(s, p->pid) == 0, "%s", padrone_session__errmsg(s));
	return s;
}

/* src/status.c: each reason's exit status and name, as padrone(1) lists
 * them; distinct but for the two that are also the programs' own (1 a
 * failed command, 2 a usage error). */
START_TEST(every_reason_has_its_documented_status_and_name)
{
	static const struct { enum padrone_why why; int status; const char *name; } want[] = {
		{ PADRONE_OK, 0, "ok" },
		{ PADRONE_NO_PROCESS, 3, "no-process" },
		{ PADRONE_ZOMBIE, 4, "zombie" },
		{ PADRONE_KERNEL_THREAD, 5, "kernel-thread" },
		{ PADRONE_NOT_X86_64, 6, "not-x86-64" },
		{ PADRONE_PERMISSION, 7, "permission" },
		{ PADRONE_ALREADY_TRACED, 8, "already-traced" },
		{ PADRONE_TARGET_EXITED, 9, "target-exited" },
		{ PADRONE_TARGET_EXECED, 10, "target-execed" },
		{ PADRONE_TIMEOUT, 11, "timeout" },
		{ PADRONE_SYSTEM, 12, "system" },
		{ PADRONE_NOT_ATTACHED, 1, "not-attached" },
		{ PADRONE_BAD_REQUEST, 2, "bad-request" },
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		ck_assert_int_eq(padrone_why_exit_status(want[i].why), want[i].status);
		ck_assert_str_eq(padrone_why_name(want[i].why), want[i].name);
	}
	ck_assert_int_eq(padrone_why_exit_status((enum padrone_why)99), 12);
	ck_assert_str_eq(padrone_why_name((enum padrone_why)99), "unknown");
}
END_TEST

START_TEST(failures_have_a_reason_a_message_and_a_status)
{
	struct padrone_session *s = padrone_session__new(NULL);
	struct padrone_profile_opts o = { .sz = sizeof(o), .seconds = 0.1 };

	ck_assert_int_lt(padrone_session__profile(s, &o), 0);
	ck_assert_int_eq(padrone_session__why(s), PADRONE_NOT_ATTACHED);
	ck_assert_str_eq(padrone_session__errmsg(s), "not attached to a process");
	ck_assert_int_eq(padrone_session__exit_status(s), 1);
	ck_assert_int_eq(padrone_session__detach(s), -ENOENT);

	ck_assert_int_eq(padrone_session__attach(s, 2), -EPERM);	/* kthreadd */
	ck_assert_int_eq(padrone_session__why(s), PADRONE_KERNEL_THREAD);
	ck_assert_int_eq(padrone_session__exit_status(s), 5);
	ck_assert_str_eq(padrone_why_name(PADRONE_KERNEL_THREAD), "kernel-thread");
	ck_assert(!padrone_session__attached(s));

	struct tu_proc p;
	start_hotloop(&p, "0");
	ck_assert_int_eq(padrone_session__attach(s, p.pid), 0);
	ck_assert_int_eq(padrone_session__why(s), PADRONE_OK);
	ck_assert_str_eq(padrone_session__errmsg(s), "");
	ck_assert_int_eq(padrone_session__pid(s), p.pid);
	ck_assert_int_eq(padrone_session__attach(s, p.pid), -EBUSY);
	ck_assert_int_eq(padrone_session__why(s), PADRONE_BAD_REQUEST);

	struct padrone_frame_list *f = (void *)1;
	ck_assert_int_eq(padrone_session__backtrace(s, 1, &f), -ESRCH);
	ck_assert_ptr_null(f);
	char want[96];
	snprintf(want, sizeof(want), "1 is not a thread of process %d", p.pid);
	ck_assert_str_eq(padrone_session__errmsg(s), want);

	/* Without a PMU, more than 10 kHz is refused unless forced. */
	o.hz = 20000;
	if (padrone_session__profile(s, &o) < 0) {
		ck_assert_int_eq(padrone_session__why(s), PADRONE_BAD_REQUEST);
		ck_assert_int_eq(padrone_session__exit_status(s), 2);
		ck_assert_ptr_nonnull(strstr(padrone_session__errmsg(s), "10000"));
	}
	ck_assert_int_eq(padrone_session__detach(s), 0);
	ck_assert_int_eq(padrone_session__pid(s), 0);
	padrone_session__free(s);
	tu_kill(&p);
}
END_TEST

struct interrupter {
	struct padrone_session *s;
	volatile bool done;
};

static void *interrupt_soon(void *arg)
{
	struct interrupter *it = arg;

	usleep(300000);
	while (!it->done) {	/* until the profile has begun and ended */
		padrone_session__interrupt(it->s);
		usleep(50000);
	}
	return NULL;
}

START_TEST(an_interrupt_ends_a_profile_early_keeping_its_samples)
{
	struct tu_proc p;
	struct padrone_session *s = attached(&p, "0");
	struct padrone_profile_opts o = { .sz = sizeof(o), .seconds = 30 };
	struct interrupter it = { .s = s };
	pthread_t th;

	/* An interrupt while nothing runs is forgotten. */
	padrone_session__interrupt(s);
	ck_assert_int_eq(pthread_create(&th, NULL, interrupt_soon, &it), 0);
	ck_assert_int_eq(padrone_session__profile(s, &o), 0);
	it.done = true;
	pthread_join(th, NULL);
	const struct padrone_report *r = padrone_session__report(s);
	ck_assert_ptr_nonnull(r);
	ck_assert(padrone_report__duration_s(r) < 10);
	ck_assert(padrone_report__duration_s(r) > 0.2);
	ck_assert_uint_gt(padrone_report__samples(r), 0);
	ck_assert_str_eq(padrone_report__function(r, 0)->name, "hot_function");
	padrone_session__free(s);
	tu_kill(&p);
}
END_TEST

/* padrone_session_leave (padroned's SIGTERM): unlike an interrupt, it holds
 * for the profile that begins after it, and every later one. */
START_TEST(leaving_ends_every_later_profile_at_once)
{
	struct tu_proc p;
	struct padrone_session *s = attached(&p, "0");
	struct padrone_profile_opts o = { .sz = sizeof(o), .seconds = 30 };

	padrone_session__interrupt(NULL);	/* nothing to do, no crash */
	padrone_session_leave(NULL);
	padrone_session_leave(s);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(padrone_session__profile(s, &o), 0);
		const struct padrone_report *r = padrone_session__report(s);
		ck_assert_ptr_nonnull(r);
		ck_assert_msg(padrone_report__duration_s(r) < 5, "%.3f s",
			      padrone_report__duration_s(r));
	}
	padrone_session__free(s);
	tu_kill(&p);
}
END_TEST

START_TEST(the_event_fd_says_when_the_process_exits)
{
	struct tu_proc p;
	struct padrone_session *s = attached(&p, "1");
	struct pollfd pfd = { .fd = padrone_session__event_fd(s), .events = POLLIN };
	char want[64];

	ck_assert_int_ge(pfd.fd, 0);
	ck_assert_int_eq(padrone_session__target_state(s), PADRONE_OK);
	snprintf(want, sizeof(want), "process %d has exited", p.pid);
	/* a profile that the exit cuts short, then one after it */
	struct padrone_profile_opts o = { .sz = sizeof(o), .seconds = 30 };
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(padrone_session__profile(s, &o), -ESRCH);
		ck_assert_int_eq(poll(&pfd, 1, 15000), 1);
		ck_assert_int_eq(padrone_session__target_state(s), PADRONE_TARGET_EXITED);
		ck_assert_str_eq(padrone_session__errmsg(s), want);
		ck_assert_int_eq(padrone_session__exit_status(s), 9);
		o.seconds = 0.1;
	}
	ck_assert_int_eq(padrone_session__detach(s), 0);
	ck_assert_int_eq(padrone_session__event_fd(s), -1);
	padrone_session__free(s);
	tu_kill(&p);
}
END_TEST

START_TEST(threads_and_the_bpf_backend)
{
	struct tu_proc p;
	struct padrone_session *s = attached(&p, "0");
	struct padrone_thread_list *t;

	ck_assert_int_eq(padrone_session__thread_count(s), 1);
	ck_assert_int_eq(padrone_session__threads(s, &t), 0);
	ck_assert_uint_eq(t->count, 1);
	ck_assert_int_eq(t->items[0].tid, p.pid);
	ck_assert_str_eq(t->items[0].name, "hotloop");
	ck_assert_uint_ne(t->items[0].pc, 0);
	padrone_thread_list__free(t);

	struct padrone_profile_opts o = { .sz = sizeof(o), .seconds = 1,
					  .backend = PADRONE_BACKEND_BPF };
	ck_assert_msg(padrone_session__profile(s, &o) == 0, "%s", padrone_session__errmsg(s));
	const struct padrone_report *r = padrone_session__report(s);
	/* BPF runs here (root, BTF); elsewhere the fallback must say why. */
	ck_assert(strcmp(padrone_report__backend(r), "bpf") == 0 ||
		  *padrone_report__fallback(r) != '\0');
	ck_assert_str_eq(padrone_report__function(r, 0)->name, "hot_function");
	ck_assert(padrone_report__function(r, 0)->self_pct >= 80);
	padrone_session__free(s);
	tu_kill(&p);
}
END_TEST

/* bt of threads that live a few milliseconds: each either unwinds, or
 * fails as a bad request naming the thread (status 2: the process is still
 * there), never as a missing process or a system error. */
START_TEST(a_thread_exiting_around_a_backtrace_is_named)
{
	struct tu_proc p;
	char line[256];
	char *argv[] = { (char *)tu_path("tests/targets/threads"), "-n", "2", "-l", "0", "-w",
			 (char *)(_i ? "300000" : "3000000"), NULL };
	struct padrone_session *s = padrone_session__new(NULL);
	int outcomes[3] = { 0 };

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(&p, "tick ", line, sizeof(line), 10000), 0);
	ck_assert_int_eq(padrone_session__attach(s, p.pid), 0);
	for (int i = 0; i < 150; i++) {
		struct padrone_thread_list *th;
		ck_assert_msg(padrone_session__threads(s, &th) == 0, "%s", padrone_session__errmsg(s));
		ck_assert_uint_ge(th->count, 1);
		pid_t tid = th->items[th->count - 1].tid;	/* the newest short-lived one */
		size_t n = th->count;
		padrone_thread_list__free(th);
		if (n < 2)
			continue;
		struct padrone_frame_list *f;
		if (i % 3)
			usleep((useconds_t)(i % 7) * 500);
		int r = padrone_session__backtrace(s, tid, &f);
		padrone_frame_list__free(f);
		if (r == 0) {
			outcomes[0]++;
			continue;
		}
		char gone[128], never[128];
		snprintf(gone, sizeof(gone), "thread %d of process %d exited before its stack could "
			 "be read", tid, p.pid);
		snprintf(never, sizeof(never), "%d is not a thread of process %d", tid, p.pid);
		const char *msg = padrone_session__errmsg(s);
		ck_assert_msg(r == -ESRCH && padrone_session__exit_status(s) == 2 &&
			      (!strcmp(msg, gone) || !strcmp(msg, never)), "%d, status %d: %s", r,
			      padrone_session__exit_status(s), msg);
		outcomes[strcmp(msg, gone) ? 2 : 1]++;
	}
	/* which paths a run takes depends on the timing */
	fprintf(stderr, "# backtraces: %d unwound, %d thread exited during, %d before\n",
		outcomes[0], outcomes[1], outcomes[2]);
	padrone_session__free(s);
	ck_assert_int_gt(tu_wait_for(&p, "tick ", line, sizeof(line), 10000), 0);
	ck_assert_msg(strstr(line, " errors 0"), "%s", line);
	tu_kill(&p);
}
END_TEST

/* Where BPF cannot load (as nobody: no CAP_BPF), the profile still
 * succeeds on the ring: the report says why, errmsg stays empty. */
START_TEST(a_bpf_fallback_is_told_by_the_report)
{
	struct tu_proc p;
	char line[256];
	int pfd[2];

	if (geteuid() != 0)
		return;	/* only root can become nobody */
	const char *hotloop = tu_public_path("tests/targets/hotloop");
	ck_assert_ptr_nonnull(hotloop);
	char *argv[] = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			 (char *)hotloop, NULL };
	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(&p, "tick ", line, sizeof(line), 10000), 0);
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t kid = fork();
	ck_assert_int_ge(kid, 0);
	if (kid == 0) {
		struct padrone_profile_opts o = { .sz = sizeof(o), .seconds = 1,
						  .backend = PADRONE_BACKEND_BPF };
		struct padrone_session *s = padrone_session__new(NULL);
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534) || !s)
			_exit(99);
		if (padrone_session__attach(s, p.pid) < 0 || padrone_session__profile(s, &o) < 0) {
			dprintf(pfd[1], "failed: %s\n", padrone_session__errmsg(s));
			_exit(1);
		}
		const struct padrone_report *r = padrone_session__report(s);
		dprintf(pfd[1], "%s|%s|%s|%s\n", padrone_report__backend(r),
			padrone_report__count(r) ? padrone_report__function(r, 0)->name : "-",
			padrone_session__errmsg(s), padrone_report__fallback(r));
		padrone_session__free(s);
		_exit(0);
	}
	close(pfd[1]);
	char buf[2048];
	ssize_t n, k = 0;
	while ((n = read(pfd[0], buf + k, sizeof(buf) - 1 - (size_t)k)) > 0)
		k += n;
	buf[k] = '\0';
	close(pfd[0]);
	int st;
	waitpid(kid, &st, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", buf);
	ck_assert_msg(strncmp(buf, "ring|hot_function||", 19) == 0, "%s", buf);
	ck_assert_msg(strstr(buf + 19, "BPF"), "no reason given: %s", buf);
	tu_kill(&p);
}
END_TEST

/* The GNU build-id of the file at path, as readelf prints it. */
static void readelf_build_id(const char *path, char *out, size_t size)
{
	char cmd[4200];
	int st;
	snprintf(cmd, sizeof(cmd), "readelf -n '%s' | awk '/Build ID:/ { print $3; exit }'", path);
	char *id = tu_run(cmd, &st);
	ck_assert_ptr_nonnull(id);
	id[strcspn(id, "\n")] = '\0';
	snprintf(out, size, "%s", id);
	free(id);
}

START_TEST(modules_with_their_build_ids_and_the_stops)
{
	struct tu_proc p;
	struct padrone_session *s = attached(&p, "0");
	struct padrone_module_list *l;
	struct padrone_pause_stats st;
	char want[128], real[4096];

	ck_assert_int_eq(padrone_session__modules(s, &l), 0);
	const struct padrone_module *m = l->items;
	size_t n = l->count;
	ck_assert_uint_ge(n, 3);	/* hotloop, libc, ld.so (and [vdso]) */
	ck_assert_ptr_nonnull(realpath(tu_path("tests/targets/hotloop"), real));
	size_t found = n, libc = n;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(m[i].path, real))
			found = i;
		if (strstr(m[i].path, "/libc.so"))
			libc = i;
		ck_assert(i == 0 || m[i].base > m[i - 1].base);	/* by address */
	}
	ck_assert_msg(found < n, "%s not among the modules", real);
	readelf_build_id(real, want, sizeof(want));
	ck_assert_uint_eq(strlen(want), 40);
	ck_assert_str_eq(m[found].build_id, want);
	ck_assert_msg(libc < n, "no libc");
	readelf_build_id(m[libc].path, want, sizeof(want));
	ck_assert_str_eq(m[libc].build_id, want);
	/* the base is where the file's first page is mapped */
	char cmd[4300];
	int status;
	snprintf(cmd, sizeof(cmd), "awk '$6 == \"%s\" { split($1, r, \"-\"); print r[1]; exit }' "
		 "/proc/%d/maps", real, p.pid);
	char *base = tu_run(cmd, &status);
	ck_assert_uint_eq(strtoull(base, NULL, 16), m[found].base);
	free(base);
	padrone_module_list__free(l);

	ck_assert_int_eq(padrone_session__pause_stats(s, &st), 0);
	uint64_t before = st.count;
	ck_assert_int_eq(padrone_session__thread_count(s), 1);	/* no stop */
	struct padrone_thread_list *t;
	ck_assert_int_eq(padrone_session__threads(s, &t), 0);	/* one stop */
	padrone_thread_list__free(t);
	ck_assert_int_eq(padrone_session__pause_stats(s, &st), 0);
	ck_assert_uint_eq(st.count, before + 1);
	ck_assert_uint_gt(st.last_ns, 0);
	ck_assert_uint_ge(st.last_ns, st.last_stop_ns);
	ck_assert_uint_ge(st.max_ns, st.last_ns);
	ck_assert_uint_ge(st.total_ns, st.max_ns);
	ck_assert_int_eq(padrone_session__detach(s), 0);
	ck_assert_int_eq(padrone_session__pause_stats(s, &st), -ENOENT);
	ck_assert_int_lt(padrone_session__modules(s, &l), 0);
	ck_assert_ptr_null(l);
	padrone_session__free(s);
	tu_kill(&p);
}
END_TEST

/* ------------------------------------------------- extensions (session.h) */

struct probe {
	uint64_t addr;	/* somewhere in the process's code */
	char tag;
};
static char released[8];
static int nreleased;

static int release(struct padrone_session *s, void *data)
{
	struct probe *pr = data;
	unsigned char byte;

	/* Still attached, the process still readable: time to restore things. */
	ck_assert(padrone_session__attached(s));
	ck_assert_int_eq(attach_target__read(padrone_session_target(s), pr->addr, &byte, 1), 1);
	released[nreleased++] = pr->tag;
	return 0;
}

START_TEST(extensions_are_released_at_detach_newest_first_while_attached)
{
	struct tu_proc p;
	struct padrone_session *s = padrone_session__new(NULL);
	struct probe a, b, c;

	ck_assert_int_eq(padrone_session_set_ext(s, "x", &a, release), -ENOENT);	/* not attached */
	padrone_session__free(s);
	s = attached(&p, "0");
	uint64_t pc = 0;
	struct padrone_thread_list *t;
	ck_assert_int_eq(padrone_session__threads(s, &t), 0);
	pc = t->items[0].pc;
	padrone_thread_list__free(t);
	a = (struct probe){ pc, 'a' };
	b = (struct probe){ pc, 'b' };
	c = (struct probe){ pc, 'c' };
	nreleased = 0;
	ck_assert_int_eq(padrone_session_set_ext(s, "codecache", &a, release), 0);
	ck_assert_int_eq(padrone_session_set_ext(s, "cfg", &b, release), 0);
	ck_assert_ptr_eq(padrone_session_ext(s, "codecache"), &a);
	ck_assert_ptr_null(padrone_session_ext(s, "nothing"));
	/* Replacing releases the one replaced, at once. */
	ck_assert_int_eq(padrone_session_set_ext(s, "codecache", &c, release), 0);
	ck_assert_int_eq(nreleased, 1);
	ck_assert_int_eq(released[0], 'a');
	ck_assert_int_eq(padrone_session__detach(s), 0);
	ck_assert_int_eq(nreleased, 3);
	ck_assert_int_eq(released[1], 'b');	/* newest first */
	ck_assert_int_eq(released[2], 'c');
	ck_assert_ptr_null(padrone_session_ext(s, "cfg"));
	padrone_session__free(s);
	tu_kill(&p);
}
END_TEST

/* The first 16 bytes of the target's code at addr. */
static void code_at(pid_t pid, unsigned long addr, unsigned char out[16])
{
	char path[64];

	snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, out, 16, (off_t)addr), 16);
	close(fd);
}

/* A target's "alive CALLS bad N" line: its calls, and whether N is 0. */
static long alive_calls(struct tu_proc *p, bool *fine)
{
	char line[256];
	long calls = -1, bad = -1;

	ck_assert_int_gt(tu_wait_for(p, "alive ", line, sizeof line, 30000), 0);
	ck_assert_int_eq(sscanf(line, "alive %ld bad %ld", &calls, &bad), 2);
	*fine = bad == 0;
	return calls;
}

/* Instrumentation takes every thread's gs base: a process with a thread
 * that uses gs itself (arch_prctl, as some runtimes do) is refused through
 * the library with a message naming the thread's gs, status 2, and left as
 * it was: its code unpatched, that thread reading its own gs block right
 * (instr_oracle counts a wrong read), the kernel computing right. */
START_TEST(instrument_refuses_a_thread_using_gs_and_leaves_it_alone)
{
	char *argv[] = { (char *)tu_path("tests/targets/instr_oracle"), "stream", "0", "gs", NULL };
	char line[256];
	struct tu_proc p;
	unsigned long entry = 0;
	unsigned char before[16], after[16];
	bool fine;

	ck_assert_int_eq(tu_spawn(&p, argv, false), 0);
	ck_assert_int_gt(tu_wait_for(&p, "gs set", line, sizeof line, 10000), 0);
	ck_assert_int_gt(tu_wait_for(&p, "stream=", line, sizeof line, 10000), 0);
	ck_assert_int_eq(sscanf(line, "stream=%lx", &entry), 1);
	alive_calls(&p, &fine);
	struct padrone_session *s = padrone_session__new(NULL);
	ck_assert_msg(padrone_session__attach(s, p.pid) == 0, "%s", padrone_session__errmsg(s));
	code_at(p.pid, entry, before);
	struct padrone_instrument_opts o = { .sz = sizeof o };
	ck_assert_int_lt(padrone_session__instrument(s, "stream", &o), 0);
	ck_assert_int_eq(padrone_session__exit_status(s), 2);
	ck_assert_msg(strstr(padrone_session__errmsg(s), "uses gs"), "%s", padrone_session__errmsg(s));
	code_at(p.pid, entry, after);
	ck_assert_mem_eq(after, before, sizeof before);
	struct padrone_ireport *r = NULL;
	ck_assert_int_lt(padrone_session__instr_report(s, &r), 0);	/* nothing instrumented */
	ck_assert_int_eq(padrone_session__detach(s), 0);
	padrone_session__free(s);
	long c0 = alive_calls(&p, &fine);
	ck_assert(fine);
	ck_assert_int_gt(alive_calls(&p, &fine), c0);
	ck_assert_msg(fine, "the target saw a wrong result or a wrong gs read");
	tu_kill(&p);
}
END_TEST

int main(void)
{
	tu_block_sigchld();

	Suite *s = suite_create("session");
	TCase *tc = tcase_create("session");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, every_reason_has_its_documented_status_and_name);
	tcase_add_test(tc, failures_have_a_reason_a_message_and_a_status);
	tcase_add_test(tc, an_interrupt_ends_a_profile_early_keeping_its_samples);
	tcase_add_test(tc, leaving_ends_every_later_profile_at_once);
	tcase_add_test(tc, the_event_fd_says_when_the_process_exits);
	tcase_add_test(tc, threads_and_the_bpf_backend);
	tcase_add_test(tc, modules_with_their_build_ids_and_the_stops);
	tcase_add_loop_test(tc, a_thread_exiting_around_a_backtrace_is_named, 0, 2);
	tcase_add_test(tc, a_bpf_fallback_is_told_by_the_report);
	tcase_add_test(tc, extensions_are_released_at_detach_newest_first_while_attached);
	tcase_add_test(tc, instrument_refuses_a_thread_using_gs_and_leaves_it_alone);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
