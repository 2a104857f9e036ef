/* attach/: stop-the-world and resume, thread churn, signals, job control,
 * registers, thread events, and a target that execs, exits or is killed
 * while attached. Every test checks the target's own output afterwards. */
#include "attach/internal.h"
#include "tests/attach/helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORK "2000000"
#define WORK_N 2000000

/* No line for ms milliseconds? */
static bool silent_for(struct tu_proc *p, int ms)
{
	char line[256];
	return tu_read_line(p, line, sizeof line, ms) == -ETIMEDOUT;
}

/* Every live task of pid is in a ptrace stop. */
static void assert_all_stopped(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	ck_assert_int_eq(at_tasks_not_traced_by(pid, getpid()), 0);
	pid_t tids[1024];
	int n = 0;
	FILE *f;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "ls /proc/%d/task", (int)pid);
	ck_assert_ptr_nonnull(f = popen(cmd, "r"));
	while (n < 1024 && fscanf(f, "%d", &tids[n]) == 1)
		n++;
	pclose(f);
	for (int i = 0; i < n; i++) {
		char s = at_state(pid, tids[i]);
		ck_assert_msg(s == 't' || s == 'Z' || s == 'X' || s == 0,
			      "thread %d of %d is in state %c while the world is stopped",
			      (int)tids[i], (int)pid, s);
	}
}

/* The CPU latency every process's requests add up to (µs), -1 unknown. */
static int32_t cpu_latency_limit(void)
{
	int32_t us = -1;
	int fd = open("/dev/cpu_dma_latency", O_RDONLY | O_CLOEXEC);

	if (fd >= 0 && read(fd, &us, sizeof us) != (ssize_t)sizeof us)
		us = -1;
	if (fd >= 0)
		close(fd);
	return us;
}

/* While the world is stopped, padrone asks that idle CPUs poll (a CPU
 * latency of 0 µs); once its tracer is idle again with the world running,
 * it asks nothing. Other tests' pauses may ask meanwhile: the request's
 * end is polled for. */
START_TEST(idle_cpus_poll_only_while_the_world_is_stopped)
{
	if (cpu_latency_limit() < 0) {
		fprintf(stderr, "# no /dev/cpu_dma_latency here: nothing to ask\n");
		return;
	}
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", WORK, NULL);
	struct attach_target *t = at_seize(pid);

	ck_assert_int_eq(attach_target__stop(t), 0);
	ck_assert_int_eq(cpu_latency_limit(), 0);
	ck_assert_int_eq(attach_target__resume(t), 0);
	int32_t us = 0;
	for (int i = 0; i < 200 && (us = cpu_latency_limit()) == 0; i++)
		usleep(10000);
	ck_assert_int_gt(us, 0);
	at_check_ticks(&p, 2, WORK_N);
	ck_assert_int_eq(attach_target__detach(t), 0);
	tu_kill(&p);
}
END_TEST

START_TEST(stops_and_resumes)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", WORK, NULL);
	struct attach_target *t = at_seize(pid);
	char msg[256];

	ck_assert_int_eq(attach_target__resume(t), -EINVAL);
	snprintf(msg, sizeof msg, "process %d (hotloop) is not stopped: resume without stop",
		 (int)pid);
	ck_assert_str_eq(attach_target__errmsg(t), msg);

	ck_assert_int_eq(attach_target__stop(t), 0);
	ck_assert_str_eq(attach_target__errmsg(t), "");
	ck_assert_int_eq(attach_target__why(t), ATTACH_OK);
	ck_assert(attach_target__is_stopped(t));
	assert_all_stopped(pid);
	at_drain(&p);
	ck_assert(silent_for(&p, 300));
	/* Nested: only the outermost resume lets it run. */
	ck_assert_int_eq(attach_target__stop(t), 0);
	ck_assert_int_eq(attach_target__resume(t), 0);
	ck_assert(attach_target__is_stopped(t));
	ck_assert(silent_for(&p, 100));
	ck_assert_int_eq(attach_target__resume(t), 0);
	ck_assert(!attach_target__is_stopped(t));
	at_check_ticks(&p, 2, WORK_N);

	struct attach_pause_stats st;
	attach_target__pause_stats(t, &st);
	ck_assert_uint_eq(st.count, 1);
	ck_assert_uint_ge(st.last_ns, 400000000ull);
	ck_assert_uint_eq(st.max_ns, st.last_ns);
	ck_assert_uint_eq(st.total_ns, st.last_ns);
	ck_assert_uint_gt(st.last_stop_ns, 0);
	ck_assert_uint_lt(st.last_stop_ns, st.last_ns);
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(attach_target__stop(t), 0);
		ck_assert_int_eq(attach_target__resume(t), 0);
	}
	attach_target__pause_stats(t, &st);
	ck_assert_uint_eq(st.count, 21);
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert_int_eq(at_tracer(pid, 0), 0);
	at_drain(&p);
	at_check_ticks(&p, 3, WORK_N);
	tu_kill(&p);
}
END_TEST

START_TEST(stops_a_churning_process)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "threads", "-n", "4", "-l", "2", "-w", "20000", NULL);
	struct attach_target *t = at_seize(pid);
	for (int i = 0; i < 30; i++) {
		ck_assert_int_eq(attach_target__stop(t), 0);
		assert_all_stopped(pid);
		pid_t tids[64];
		int n = attach_target__threads(t, tids, 64);
		ck_assert_int_ge(n, 3);
		ck_assert_int_eq(tids[0], pid);
		ck_assert_int_eq(attach_target__resume(t), 0);
		at_sleep_ms(10);
	}
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert_int_eq(at_tasks_not_traced_by(pid, 0), 0);
	at_drain(&p);
	long created0 = at_threads_ok(&p);
	ck_assert_int_gt(at_threads_ok(&p), created0);	/* still churning */
	tu_kill(&p);
}
END_TEST

START_TEST(seizes_during_churn)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "threads", "-n", "8", "-l", "1", "-w", "5000", NULL);
	for (int i = 0; i < 15; i++) {
		struct attach_target *t = at_seize(pid);
		ck_assert_int_eq(at_tasks_not_traced_by(pid, getpid()), 0);
		ck_assert_int_eq(attach_target__stop(t), 0);
		assert_all_stopped(pid);
		ck_assert_int_eq(attach_target__resume(t), 0);
		ck_assert_int_eq(attach_target__detach(t), 0);
		ck_assert_int_eq(at_tasks_not_traced_by(pid, 0), 0);
	}
	at_drain(&p);
	at_threads_ok(&p);
	tu_kill(&p);
}
END_TEST

struct ev_log {
	int news, exits, execs, process_exits;
	int regs_ok, regs_bad;
	int status;
	pid_t pid, bad_parent;
};

static void on_ev(struct attach_target *t, const struct attach_event *ev, void *arg)
{
	struct ev_log *log = arg;
	struct user_regs_struct regs;
	switch (ev->kind) {
	case ATTACH_EV_THREAD_NEW:
		log->news++;
		if (ev->parent_tid != log->pid)
			log->bad_parent = ev->parent_tid;
		/* Still stopped: the per-thread calls work on it. */
		if (attach_target__get_regs(t, ev->tid, &regs) == 0 && regs.fs_base != 0)
			log->regs_ok++;
		else
			log->regs_bad++;
		/* ... but nothing that waits for events. */
		if (attach_target__stop(t) != -EDEADLK)
			log->regs_bad++;
		break;
	case ATTACH_EV_THREAD_EXIT:
		log->exits++;
		break;
	case ATTACH_EV_EXEC:
		log->execs++;
		break;
	case ATTACH_EV_FORK:	/* (check_instr makes children) */
		break;
	case ATTACH_EV_EXIT:
		log->process_exits++;
		log->status = ev->status;
		break;
	}
}

START_TEST(reports_thread_events)
{
	struct tu_proc p;
	struct ev_log log = { 0 };
	pid_t pid = at_spawn(&p, "threads", "-n", "2", "-l", "0", "-w", "20000", NULL);
	log.pid = pid;
	struct attach_target *t = at_seize(pid);
	attach_target__on_event(t, on_ev, &log);
	at_sleep_ms(300);
	ck_assert_int_eq(attach_target__stop(t), 0);
	struct ev_log seen = log;	/* the tracer is idle while stopped */
	ck_assert_int_eq(attach_target__resume(t), 0);
	attach_target__on_event(t, NULL, NULL);
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert_int_ge(seen.news, 10);
	ck_assert_int_ge(seen.exits, seen.news - 4);
	ck_assert_int_eq(seen.bad_parent, 0);
	ck_assert_int_eq(seen.regs_bad, 0);
	ck_assert_int_eq(seen.regs_ok, seen.news);
	at_drain(&p);
	at_threads_ok(&p);
	tu_kill(&p);
}
END_TEST

static void expect_signals_ok(struct tu_proc *p)
{
	char line[256];
	ck_assert_int_gt(tu_wait_for(p, "done", line, sizeof line, 20000), 0);
	char verdict[16];
	ck_assert_int_gt(tu_read_line(p, verdict, sizeof verdict, 5000), 0);
	ck_assert_msg(strcmp(verdict, "ok") == 0, "signals target: %s", line);
	long a, e, u, s, l, r, q, g;
	ck_assert_int_eq(sscanf(line, "done alrm %ld expected %ld usr1 %ld sent %ld lost %ld rt %ld "
				"rtsent %ld gaps %ld", &a, &e, &u, &s, &l, &r, &q, &g), 8);
	ck_assert_int_gt(u, 100);	/* plenty went through padrone */
	ck_assert_int_gt(r, 400);
}

START_TEST(loses_no_signal)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "signals", "-d", "2.5", NULL);
	struct attach_target *t = at_seize(pid);
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(attach_target__stop(t), 0);
		at_sleep_ms(2);
		ck_assert_int_eq(attach_target__resume(t), 0);
		at_sleep_ms(10);
	}
	ck_assert_int_eq(attach_target__detach(t), 0);
	expect_signals_ok(&p);
	tu_kill(&p);
}
END_TEST

START_TEST(keeps_a_job_control_stop)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", WORK, NULL);
	kill(pid, SIGSTOP);
	ck_assert(at_wait_state(pid, "T", 5000));
	at_drain(&p);
	struct attach_target *t = at_seize(pid);
	ck_assert(attach_target__was_stopped(t));
	ck_assert(silent_for(&p, 200));
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(attach_target__stop(t), 0);
		ck_assert_int_eq(attach_target__resume(t), 0);
	}
	ck_assert(silent_for(&p, 300));	/* stop/resume did not wake it */
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert(at_wait_state(pid, "T", 2000));
	ck_assert(silent_for(&p, 300));
	ck_assert_int_eq(at_tracer(pid, 0), 0);
	kill(pid, SIGCONT);
	at_check_ticks(&p, 3, WORK_N);
	tu_kill(&p);
}
END_TEST

START_TEST(follows_job_control_while_attached)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", WORK, NULL);
	struct attach_target *t = at_seize(pid);
	ck_assert(!attach_target__was_stopped(t));
	kill(pid, SIGSTOP);
	at_sleep_ms(100);
	at_drain(&p);
	ck_assert(silent_for(&p, 300));
	ck_assert_int_eq(attach_target__stop(t), 0);
	ck_assert_int_eq(attach_target__resume(t), 0);
	ck_assert(silent_for(&p, 300));
	kill(pid, SIGCONT);
	at_check_ticks(&p, 2, WORK_N);
	/* Stopped again, then detached: it stays stopped. */
	kill(pid, SIGSTOP);
	at_sleep_ms(100);
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert(at_wait_state(pid, "T", 2000));
	at_drain(&p);
	ck_assert(silent_for(&p, 300));
	kill(pid, SIGCONT);
	at_check_ticks(&p, 2, WORK_N);
	tu_kill(&p);
}
END_TEST

START_TEST(round_trips_registers_and_xstate)
{
	struct tu_proc p;
	char msg[256];
	pid_t pid = at_spawn(&p, "hotloop", "-w", WORK, NULL);
	struct attach_target *t = at_seize(pid);
	struct user_regs_struct regs, again;
	ck_assert_int_eq(attach_target__get_regs(t, 0, &regs), -EBUSY);
	snprintf(msg, sizeof msg, "thread %d of process %d (hotloop) is running: stop the world "
		 "first (attach_target__stop)", (int)pid, (int)pid);
	ck_assert_str_eq(attach_target__errmsg(t), msg);
	ck_assert_int_eq(attach_target__stop(t), 0);
	ck_assert_int_eq(attach_target__get_regs(t, 0, &regs), 0);
	ck_assert_int_eq(attach_target__get_regs(t, pid, &again), 0);
	ck_assert_mem_eq(&regs, &again, sizeof regs);
	ck_assert_int_eq(attach_target__set_regs(t, pid, &regs), 0);
	ck_assert_int_eq(attach_target__get_regs(t, 12345678, &again), -ESRCH);

	size_t len = 16;
	ck_assert_int_eq(attach_target__get_xstate(t, 0, NULL, &len), -ENOSPC);
	ck_assert_uint_ge(len, 576);	/* legacy area + xsave header at least */
	unsigned char *xs = malloc(len), *xs2 = malloc(len), *xs3 = malloc(len);
	size_t l2 = len;
	ck_assert_int_eq(attach_target__get_xstate(t, 0, xs, &len), 0);
	/* xmm0..xmm15 sit at 160..415 of the legacy (FXSAVE) area: change
	 * xmm15 (the loop's live registers would show any harm). */
	memcpy(xs2, xs, len);
	for (int i = 0; i < 16; i++)
		xs2[160 + 15 * 16 + i] ^= 0xa5;
	ck_assert_int_eq(attach_target__set_xstate(t, 0, xs2, len), 0);
	ck_assert_int_eq(attach_target__get_xstate(t, 0, xs3, &l2), 0);
	ck_assert_uint_eq(l2, len);
	ck_assert_mem_eq(xs3 + 160, xs2 + 160, 256);
	ck_assert_int_eq(attach_target__set_xstate(t, 0, xs, len), 0);
	ck_assert_int_eq(attach_target__get_xstate(t, 0, xs3, &l2), 0);
	ck_assert_mem_eq(xs3, xs, 416);

	/* gs_base: set now, restored at detach. */
	uint64_t gs0 = regs.gs_base;
	ck_assert_int_eq(attach_target__set_gs_base(t, 0, 0x7f0012340000ull), 0);
	ck_assert_int_eq(attach_target__get_regs(t, 0, &again), 0);
	ck_assert_uint_eq(again.gs_base, 0x7f0012340000ull);
	ck_assert_uint_eq(again.rip, regs.rip);
	ck_assert_int_eq(attach_target__resume(t), 0);
	at_drain(&p);
	at_check_ticks(&p, 2, WORK_N);
	ck_assert_int_eq(attach_target__detach(t), 0);

	t = at_seize(pid);
	ck_assert_int_eq(attach_target__stop(t), 0);
	ck_assert_int_eq(attach_target__get_regs(t, 0, &again), 0);
	ck_assert_uint_eq(again.gs_base, gs0);
	ck_assert_int_eq(attach_target__detach(t), 0);
	free(xs);
	free(xs2);
	free(xs3);
	at_drain(&p);
	at_check_ticks(&p, 2, WORK_N);
	tu_kill(&p);
}
END_TEST

static void step_some(struct attach_target *t, pid_t pid)
{
	struct user_regs_struct a, b;
	int moved = 0;
	ck_assert_int_eq(attach_target__stop(t), 0);
	for (int i = 0; i < 50; i++) {
		ck_assert_int_eq(attach_target__get_regs(t, 0, &a), 0);
		ck_assert_int_eq(attach_target__step(t, 0), 0);
		ck_assert_int_eq(attach_target__get_regs(t, pid, &b), 0);
		/* One instruction: rip moves (a rep-prefixed one may repeat). */
		moved += b.rip != a.rip;
		ck_assert_uint_eq(b.rsp & 7, a.rsp & 7);
	}
	ck_assert_int_ge(moved, 25);
	ck_assert_int_eq(attach_target__resume(t), 0);
}

START_TEST(single_steps)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", WORK, NULL);
	struct attach_target *t = at_seize(pid);
	step_some(t, pid);
	ck_assert_int_eq(attach_target__detach(t), 0);
	at_drain(&p);
	at_check_ticks(&p, 2, WORK_N);
	tu_kill(&p);

	/* A target ignoring SIGTRAP keeps ignoring it (the kernel resets an
	 * ignored SIGTRAP to SIG_DFL when it traps). */
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "trap '' TRAP; exec %s -w %s", tu_path("tests/targets/hotloop"),
		 WORK);
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	pid = at_spawn_argv(&p, argv);
	t = at_seize(pid);
	step_some(t, pid);
	ck_assert_int_eq(attach_target__detach(t), 0);
	char path[64];
	snprintf(path, sizeof path, "grep SigIgn /proc/%d/status", (int)pid);
	char *out = tu_run(path, NULL);
	unsigned long long ign = strtoull(strchr(out, ':') + 1, NULL, 16);
	free(out);
	ck_assert_msg((ign >> (SIGTRAP - 1)) & 1, "SIGTRAP no longer ignored");
	at_drain(&p);
	at_check_ticks(&p, 2, WORK_N);
	tu_kill(&p);
}
END_TEST

static int on_tracer_fn(struct attach_target *t, void *arg)
{
	pid_t *caller = arg;
	struct user_regs_struct regs;
	if (gettid() == *caller)
		return -100;
	int r = attach_target__stop(t);
	if (r == 0)
		r = attach_target__get_regs(t, 0, &regs);
	if (r == 0)
		r = attach_target__resume(t);
	if (r == 0 && attach_target__detach(t) != -EDEADLK)
		r = -101;
	return r == 0 ? 42 : r;
}

START_TEST(calls_on_the_tracer_thread)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", WORK, NULL);
	struct attach_target *t = at_seize(pid);
	pid_t me = gettid();
	ck_assert_int_eq(attach_target__call(t, on_tracer_fn, &me), 42);
	ck_assert_int_eq(attach_target__detach(t), 0);
	at_drain(&p);
	at_check_ticks(&p, 2, WORK_N);
	tu_kill(&p);
}
END_TEST

static void exec_during_stops(const char *mode)
{
	struct tu_proc p;
	char msg[256], line[256];
	struct ev_log log = { 0 };
	const char *hot = tu_path("tests/targets/hotloop");
	pid_t pid = mode ? at_spawn(&p, "execer", "-d", "300", "-t", "3", mode, hot, "-w", WORK, NULL)
			 : at_spawn(&p, "execer", "-d", "300", hot, "-w", WORK, NULL);
	struct attach_target *t = at_seize(pid);
	attach_target__on_event(t, on_ev, &log);
	int r = 0;
	for (int i = 0; i < 10000 && r == 0; i++) {	/* ~10 s at most */
		r = attach_target__stop(t);
		if (r == 0)
			r = attach_target__resume(t);
		at_sleep_ms(1);
	}
	ck_assert_int_eq(r, -ECHILD);
	ck_assert_int_eq(attach_target__state(t), ATTACH_TARGET_EXECED);
	snprintf(msg, sizeof msg, "process %d (execer) called exec (now hotloop); padrone detached "
		 "from it and the new program runs untraced", (int)pid);
	ck_assert_str_eq(attach_target__errmsg(t), msg);
	ck_assert_int_eq(attach_target__why(t), ATTACH_TARGET_EXECED);
	ck_assert_int_eq(at_status(attach_target__why(t)), 10);
	ck_assert_int_eq(attach_target__stop(t), -ECHILD);
	ck_assert_int_eq(log.execs, 1);
	/* The new program runs, untraced, with the same PID. */
	ck_assert_int_gt(tu_wait_for(&p, "ready", line, sizeof line, 5000), 0);
	int npid = 0;
	sscanf(line, "ready %d", &npid);
	ck_assert_int_eq(npid, pid);
	ck_assert_int_eq(at_tracer(pid, 0), 0);
	at_check_ticks(&p, 2, WORK_N);
	ck_assert_int_eq(attach_target__detach(t), 0);
	at_check_ticks(&p, 1, WORK_N);
	tu_kill(&p);
}

START_TEST(reports_exec_during_stops)
{
	exec_during_stops(NULL);
	exec_during_stops("-x");	/* exec from a thread that is not the leader */
}
END_TEST

START_TEST(reports_the_target_exiting)
{
	struct tu_proc p;
	char msg[256];
	struct ev_log log = { 0 };
	pid_t pid = at_spawn(&p, "hotloop", "-w", "200000", "-d", "0.4", NULL);
	struct attach_target *t = at_seize(pid);
	attach_target__on_event(t, on_ev, &log);
	for (int i = 0; i < 5000 && attach_target__state(t) == ATTACH_OK; i++)
		at_sleep_ms(1);
	ck_assert_int_eq(attach_target__state(t), ATTACH_TARGET_EXITED);
	ck_assert_int_eq(log.process_exits, 1);
	ck_assert(WIFEXITED(log.status) && WEXITSTATUS(log.status) == 0);
	ck_assert_int_eq(attach_target__stop(t), -ESRCH);
	snprintf(msg, sizeof msg, "process %d (hotloop) has exited", (int)pid);
	ck_assert_str_eq(attach_target__errmsg(t), msg);
	ck_assert_int_eq(attach_target__why(t), ATTACH_TARGET_EXITED);
	ck_assert_int_eq(at_status(attach_target__why(t)), 9);
	ck_assert_int_eq(attach_target__detach(t), 0);
	char line[256];
	ck_assert_int_gt(tu_wait_for(&p, "done", line, sizeof line, 5000), 0);
	tu_kill(&p);
}
END_TEST

START_TEST(detaches_from_a_killed_target)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "threads", "-n", "2", "-l", "2", NULL);
	struct attach_target *t = at_seize(pid);
	ck_assert_int_eq(attach_target__stop(t), 0);
	kill(pid, SIGKILL);	/* while stopped */
	ck_assert_int_eq(attach_target__detach(t), 0);
	tu_kill(&p);

	pid = at_spawn(&p, "threads", "-n", "2", "-l", "2", NULL);
	t = at_seize(pid);
	kill(pid, SIGKILL);	/* while running */
	ck_assert_int_eq(attach_target__stop(t), -ESRCH);
	ck_assert_int_eq(attach_target__state(t), ATTACH_TARGET_EXITED);
	ck_assert_int_eq(attach_target__detach(t), 0);
	tu_kill(&p);
}
END_TEST

/* A process whose main thread is a vfork parent: it sleeps uninterruptibly
 * until its child (sleeping `ms`) exits; no ptrace stop can reach it. */
static pid_t vfork_parent(int ms)
{
	pid_t kid = fork();
	if (kid == 0) {
		setpgid(0, 0);
		if (vfork() == 0) {
			struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
			_exit(0);
		}
		for (;;)
			pause();
	}
	ck_assert(at_wait_state(kid, "D", 5000));
	return kid;
}

START_TEST(times_out_on_a_thread_that_cannot_stop)
{
	pid_t kid = vfork_parent(1500);
	struct attach_opts o = { .sz = sizeof o, .stop_timeout_ms = 200 };
	struct attach_target *t;
	struct attach_error e;
	ck_assert_int_eq(attach_seize(kid, &o, &t, &e), 0);
	ck_assert_int_eq(attach_target__stop(t), -ETIMEDOUT);
	char msg[256];
	snprintf(msg, sizeof msg, "thread %d of process %d (%s) did not stop within 200 ms (state "
		 "D: uninterruptible sleep, e.g. waiting for a vfork child or I/O)", (int)kid,
		 (int)kid, at_self_comm());
	ck_assert_str_eq(attach_target__errmsg(t), msg);
	ck_assert_int_eq(attach_target__why(t), ATTACH_TIMEOUT);
	ck_assert_int_eq(at_status(attach_target__why(t)), 11);
	ck_assert(!attach_target__is_stopped(t));
	/* Once the child is gone it runs again (in pause()), unharmed. */
	ck_assert(at_wait_state(kid, "S", 5000));
	ck_assert_int_eq(attach_target__stop(t), 0);
	ck_assert_int_eq(attach_target__resume(t), 0);
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert(at_wait_state(kid, "S", 2000));
	ck_assert_int_eq(at_tracer(kid, 0), 0);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);

	/* Detached while it still cannot stop: no failure, and free at once. */
	kid = vfork_parent(1000);
	ck_assert_int_eq(attach_seize(kid, &o, &t, &e), 0);
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert_int_eq(at_tracer(kid, 0), 0);
	ck_assert(at_wait_state(kid, "S", 5000));	/* back in pause() */
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
}
END_TEST

START_TEST(survives_padrone_dying)
{
	/* padrone exits (killed) with the world stopped: the kernel releases
	 * the target, which runs on unharmed (no PTRACE_O_EXITKILL). */
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "threads", "-n", "2", "-l", "2", "-w", "20000", NULL);
	pid_t kid = fork();
	if (kid == 0) {
		struct attach_target *t;
		struct attach_error e;
		if (attach_seize(pid, NULL, &t, &e) == 0 && attach_target__stop(t) == 0)
			raise(SIGKILL);
		_exit(1);
	}
	int st;
	ck_assert_int_eq(waitpid(kid, &st, 0), kid);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	for (int i = 0; i < 2000 && at_tasks_not_traced_by(pid, 0); i++)
		at_sleep_ms(1);
	ck_assert_int_eq(at_tasks_not_traced_by(pid, 0), 0);
	at_drain(&p);
	long c1 = at_threads_ok(&p);
	ck_assert_int_gt(at_threads_ok(&p), c1);
	tu_kill(&p);
}
END_TEST

START_TEST(works_with_a_zombie_leader)
{
	/* The main thread called pthread_exit: its zombie stays, the process
	 * lives on in its other threads. */
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "threads", "-X", "-n", "2", "-l", "2", "-w", "20000", NULL);
	ck_assert(at_wait_state(pid, "Z", 5000));
	struct attach_target *t = at_seize(pid);
	pid_t tids[64];
	int n = attach_target__threads(t, tids, 64);
	ck_assert_int_ge(n, 3);
	for (int i = 0; i < n; i++)
		ck_assert_int_ne(tids[i], pid);	/* a zombie cannot be seized */
	for (int i = 0; i < 10; i++) {
		ck_assert_int_eq(attach_target__stop(t), 0);
		assert_all_stopped(pid);
		ck_assert_int_eq(attach_target__resume(t), 0);
		at_sleep_ms(5);
	}
	/* Memory through a live thread; system calls on one too. */
	struct attach_maps *m;
	ck_assert_int_eq(attach_maps__read(tids[0], &m), 0);
	uint64_t a = attach_maps__at(m, 0)->start;
	attach_maps__free(m);
	unsigned char elf[4];
	ck_assert_int_eq(attach_target__read(t, a, elf, 4), 4);
	ck_assert_mem_eq(elf, "\177ELF", 4);
	uint64_t none[6] = { 0 };
	int64_t ret;
	ck_assert_int_eq(attach_target__syscall(t, 0, SYS_getpid, none, &ret), 0);
	ck_assert_int_eq(ret, pid);
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert_int_eq(at_tasks_not_traced_by(pid, 0), 0);
	at_drain(&p);
	long c = at_threads_ok(&p);
	ck_assert_int_gt(at_threads_ok(&p), c);
	tu_kill(&p);
}
END_TEST

/* LeakSanitizer (in the ASan build) stops the world with ptrace of its own
 * at exit; run its check while padrone holds a target stopped. */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

START_TEST(coexists_with_leak_sanitizer)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", WORK, NULL);
	struct attach_target *t = at_seize(pid);
	ck_assert_int_eq(attach_target__stop(t), 0);
	if (__lsan_do_recoverable_leak_check)
		ck_assert_int_eq(__lsan_do_recoverable_leak_check(), 0);
	ck_assert(attach_target__is_stopped(t));
	assert_all_stopped(pid);
	ck_assert_int_eq(attach_target__resume(t), 0);
	if (__lsan_do_recoverable_leak_check)
		ck_assert_int_eq(__lsan_do_recoverable_leak_check(), 0);
	ck_assert_int_eq(attach_target__stop(t), 0);
	ck_assert_int_eq(attach_target__resume(t), 0);
	ck_assert_int_eq(attach_target__detach(t), 0);
	at_drain(&p);
	at_check_ticks(&p, 2, WORK_N);
	tu_kill(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("attach-ctl");
	TCase *tc = tcase_create("stop");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, at_block_sigchld, NULL);
	tcase_add_test(tc, stops_and_resumes);
	tcase_add_test(tc, idle_cpus_poll_only_while_the_world_is_stopped);
	tcase_add_test(tc, stops_a_churning_process);
	tcase_add_test(tc, seizes_during_churn);
	tcase_add_test(tc, reports_thread_events);
	tcase_add_test(tc, loses_no_signal);
	tcase_add_test(tc, keeps_a_job_control_stop);
	tcase_add_test(tc, follows_job_control_while_attached);
	tcase_add_test(tc, round_trips_registers_and_xstate);
	tcase_add_test(tc, single_steps);
	tcase_add_test(tc, calls_on_the_tracer_thread);
	tcase_add_test(tc, reports_exec_during_stops);
	tcase_add_test(tc, reports_the_target_exiting);
	tcase_add_test(tc, detaches_from_a_killed_target);
	tcase_add_test(tc, times_out_on_a_thread_that_cannot_stop);
	tcase_add_test(tc, survives_padrone_dying);
	tcase_add_test(tc, works_with_a_zombie_leader);
	tcase_add_test(tc, coexists_with_leak_sanitizer);
	suite_add_tcase(s, tc);

	/* The host need not block SIGCHLD: the tracer then polls. */
	tc = tcase_create("polling");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, stops_and_resumes);
	tcase_add_test(tc, loses_no_signal);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
