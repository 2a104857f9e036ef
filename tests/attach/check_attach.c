/* attach/: the refusals (each against a real process, with its exact
 * message and exit status), seize/detach, /proc/PID/maps and memory I/O. */
#include "attach/internal.h"
#include "tests/attach/helpers.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534

/* attach_seize must fail with exactly this. */
static void expect_refusal(pid_t pid, int err, enum attach_why why, int status, const char *msg)
{
	struct attach_target *t = (void *)1;
	struct attach_error e;
	int r = attach_seize(pid, NULL, &t, &e);
	ck_assert_int_eq(r, err);
	ck_assert_ptr_null(t);
	ck_assert_int_eq(e.err, err);
	ck_assert_msg(e.why == why, "why %s, want %s (%s)", at_why_name(e.why),
		      at_why_name(why), e.msg);
	ck_assert_int_eq(at_status(e.why), status);
	ck_assert_str_eq(e.msg, msg);
}

START_TEST(exit_statuses_are_distinct)
{
	static const int want[] = { 0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
	static const char *names[] = { "ok", "no-process", "zombie", "kernel-thread", "not-x86-64",
				       "permission", "already-traced", "target-exited",
				       "target-execed", "timeout", "system" };
	for (int w = ATTACH_OK; w <= ATTACH_SYSTEM; w++) {
		ck_assert_int_eq(at_status(w), want[w]);
		ck_assert_str_eq(at_why_name(w), names[w]);
		for (int v = ATTACH_OK; v < w; v++)
			ck_assert_int_ne(at_status(v), at_status(w));
	}
}
END_TEST

START_TEST(refuses_missing_process)
{
	char msg[256];
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);	/* reaped: the PID is free */
	snprintf(msg, sizeof msg, "no such process: PID %d does not exist", (int)pid);
	expect_refusal(pid, -ESRCH, ATTACH_NO_PROCESS, 3, msg);
	expect_refusal(0, -ESRCH, ATTACH_NO_PROCESS, 3, "no such process: 0 is not a valid PID");
	expect_refusal(-5, -ESRCH, ATTACH_NO_PROCESS, 3, "no such process: -5 is not a valid PID");
}
END_TEST

START_TEST(refuses_a_thread_id)
{
	struct tu_proc p;
	char msg[256];
	pid_t pid = at_spawn(&p, "threads", "-n", "0", "-l", "1", "-S", NULL);
	pid_t tid = 0;
	DIR *d;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	ck_assert_ptr_nonnull(d = opendir(path));
	struct dirent *de;
	while ((de = readdir(d)))
		if (atoi(de->d_name) > 0 && atoi(de->d_name) != pid)
			tid = atoi(de->d_name);
	closedir(d);
	ck_assert_int_gt(tid, 0);
	snprintf(msg, sizeof msg, "no such process: %d is a thread of process %d (threads), not a "
		 "process; attach to %d", (int)tid, (int)pid, (int)pid);
	expect_refusal(tid, -ESRCH, ATTACH_NO_PROCESS, 3, msg);
	tu_kill(&p);
}
END_TEST

START_TEST(refuses_a_zombie)
{
	char msg[512];
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	ck_assert(at_wait_state(pid, "Z", 5000));
	snprintf(msg, sizeof msg, "process %d (%s) is a zombie: it has exited and its parent %d "
		 "(%s) has not reaped it yet; there is nothing left to attach to", (int)pid,
		 at_self_comm(), (int)getpid(), at_self_comm());
	expect_refusal(pid, -ESRCH, ATTACH_ZOMBIE, 4, msg);
	/* Untouched: still ours to reap. */
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

/* kthreadd is PID 2 on every Linux; find another kernel thread otherwise. */
static pid_t some_kernel_thread(char *comm, size_t size)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;
	while (d && (de = readdir(d)) && !found) {
		struct attach__proc p;
		pid_t pid = atoi(de->d_name);
		if (pid > 0 && attach__proc_read(pid, &p) == 0 && (p.flags & 0x00200000ul)) {
			found = pid;
			snprintf(comm, size, "%s", p.comm);
		}
	}
	if (d)
		closedir(d);
	return found;
}

START_TEST(refuses_a_kernel_thread)
{
	char comm[64], msg[256];
	struct attach__proc p;
	pid_t pid = 2;
	if (attach__proc_read(2, &p) == 0 && (p.flags & 0x00200000ul))
		snprintf(comm, sizeof comm, "%s", p.comm);
	else
		pid = some_kernel_thread(comm, sizeof comm);
	ck_assert_int_gt(pid, 0);
	snprintf(msg, sizeof msg, "process %d (%s) is a kernel thread: it has no user space to "
		 "attach to", (int)pid, comm);
	expect_refusal(pid, -EPERM, ATTACH_KERNEL_THREAD, 5, msg);
}
END_TEST

/* Some kernels run no i386 programs (no IA32 emulation, or a hypervisor
 * without compatibility mode, as on some VMs): exec fails with ENOEXEC. */
static bool kernel_runs_i386(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		execl(tu_path("tests/targets/m32"), "m32", (char *)NULL);
		_exit(errno == ENOEXEC ? 126 : 127);
	}
	ck_assert_int_gt(pid, 0);
	usleep(100 * 1000);
	kill(pid, SIGKILL);
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return !(WIFEXITED(st) && WEXITSTATUS(st) == 126);
}

START_TEST(refuses_a_32bit_process)
{
	struct tu_proc p;
	char msg[256];
	if (!kernel_runs_i386()) {
		struct attach_error e;
		fprintf(stderr, "# this kernel runs no i386 programs (exec: ENOEXEC): the refusal "
				"is checked on the program file alone\n");
		ck_assert_int_eq(attach__elf_check(tu_path("tests/targets/m32"), 42, "m32", &e),
				 -ENOEXEC);
		ck_assert_int_eq(e.why, ATTACH_NOT_X86_64);
		ck_assert_str_eq(e.msg, "process 42 (m32) is a 32-bit x86 (i386) program; padrone "
					"attaches to x86-64 programs only");
		return;
	}
	pid_t pid = at_spawn(&p, "m32", NULL);
	snprintf(msg, sizeof msg, "process %d (m32) is a 32-bit x86 (i386) program; padrone "
		 "attaches to x86-64 programs only", (int)pid);
	expect_refusal(pid, -ENOEXEC, ATTACH_NOT_X86_64, 6, msg);
	ck_assert_int_eq(at_tracer(pid, 0), 0);
	ck_assert(at_wait_state(pid, "S", 1000));	/* still sleeping in its loop */
	tu_kill(&p);
}
END_TEST

START_TEST(classifies_x32_and_x86_64_programs)
{
	struct attach_error e;
	ck_assert_int_eq(attach__elf_check(tu_path("tests/targets/x32"), 42, "x32", &e), -ENOEXEC);
	ck_assert_int_eq(e.why, ATTACH_NOT_X86_64);
	ck_assert_str_eq(e.msg, "process 42 (x32) is an x32 program (32-bit pointers on x86-64); "
				"padrone attaches to x86-64 programs only");
	ck_assert_int_eq(attach__elf_check(tu_path("tests/targets/m32"), 42, "m32", &e), -ENOEXEC);
	ck_assert_int_eq(attach__elf_check(tu_path("tests/targets/hotloop"), 42, "h", &e), 0);
	ck_assert_int_eq(attach__elf_check("/proc/self/exe", 42, "self", &e), 0);
	/* Not an ELF file at all. */
	ck_assert_int_eq(attach__elf_check(tu_srcpath("tests/targets/m32.S"), 42, "m", &e), -ENOEXEC);
	ck_assert_int_eq(e.why, ATTACH_NOT_X86_64);
}
END_TEST

/* Run attach_seize(pid) in a child that dropped root to uid/gid `id`
 * (losing every capability); returns its refusal. */
static void seize_as(pid_t pid, uid_t id, struct attach_error *e, int *r)
{
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t kid = fork();
	if (kid == 0) {
		struct attach_error ke = { 0 };
		struct attach_target *t = NULL;
		int kr = -1;
		if (setgroups(0, NULL) == 0 && setgid(id) == 0 && setuid(id) == 0) {
			kr = attach_seize(pid, NULL, &t, &ke);
			if (t)
				attach_target__detach(t);
		}
		if (write(fds[1], &kr, sizeof kr) < 0 || write(fds[1], &ke, sizeof ke) < 0)
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	ck_assert_int_eq(read(fds[0], r, sizeof *r), (ssize_t)sizeof *r);
	ck_assert_int_eq(read(fds[0], e, sizeof *e), (ssize_t)sizeof *e);
	close(fds[0]);
	waitpid(kid, NULL, 0);
}

START_TEST(refuses_without_permission)
{
	struct tu_proc p;
	struct attach_error e;
	char msg[512];
	int r;
	pid_t pid = at_spawn(&p, "hotloop", "-w", "200000", NULL);
	seize_as(pid, NOBODY, &e, &r);
	snprintf(msg, sizeof msg, "permission denied: process %d (hotloop) runs as uid 0 (gid 0) "
		 "and padrone as uid %d (gid %d), without CAP_SYS_PTRACE; run padrone as the same "
		 "user or as root", (int)pid, NOBODY, NOBODY);
	ck_assert_int_eq(r, -EPERM);
	ck_assert_int_eq(e.why, ATTACH_PERMISSION);
	ck_assert_int_eq(at_status(e.why), 7);
	ck_assert_str_eq(e.msg, msg);
	ck_assert_int_eq(at_tracer(pid, 0), 0);
	at_drain(&p);
	at_check_ticks(&p, 2, 200000);
	tu_kill(&p);
}
END_TEST

START_TEST(refuses_a_process_that_is_not_dumpable)
{
	/* Same uid as padrone, but prctl(PR_SET_DUMPABLE, 0). */
	int go[2];
	ck_assert_int_eq(pipe(go), 0);
	pid_t kid = fork();
	if (kid == 0) {
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			_exit(1);
		prctl(PR_SET_DUMPABLE, 0);
		close(go[0]);
		if (write(go[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char c;
	close(go[1]);
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	close(go[0]);
	struct attach_error e;
	char msg[512];
	int r;
	seize_as(kid, NOBODY, &e, &r);
	snprintf(msg, sizeof msg, "permission denied: process %d (%s) is not dumpable (a setuid or "
		 "setgid program, or prctl(PR_SET_DUMPABLE, 0)) and padrone runs without "
		 "CAP_SYS_PTRACE; run padrone as root", (int)kid, at_self_comm());
	ck_assert_int_eq(r, -EPERM);
	ck_assert_int_eq(e.why, ATTACH_PERMISSION);
	ck_assert_str_eq(e.msg, msg);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
}
END_TEST

START_TEST(explains_yama_and_uids)
{
	struct attach__perm_facts f = {
		.pid = 10, .comm = "svc", .my_uid = 1000, .my_gid = 1000,
		.uid = { 1000, 1000, 1000 }, .gid = { 1000, 1000, 1000 },
		.dumpable = true, .yama_scope = -1,
	};
	char buf[512];
	ck_assert_int_eq(attach__perm_explain(&f, buf, sizeof buf), 0);
	f.yama_scope = 1;
	ck_assert_int_eq(attach__perm_explain(&f, buf, sizeof buf), 1);
	ck_assert_str_eq(buf, "permission denied: kernel.yama.ptrace_scope is 1 (only a process's "
			      "ancestors may trace it) and padrone runs without CAP_SYS_PTRACE; run "
			      "padrone as root or set kernel.yama.ptrace_scope=0");
	f.descendant = true;
	ck_assert_int_eq(attach__perm_explain(&f, buf, sizeof buf), 0);
	f.yama_scope = 2;
	ck_assert_int_eq(attach__perm_explain(&f, buf, sizeof buf), 1);
	ck_assert_str_eq(buf, "permission denied: kernel.yama.ptrace_scope is 2 (only "
			      "CAP_SYS_PTRACE may trace) and padrone runs without CAP_SYS_PTRACE; "
			      "run padrone as root or set kernel.yama.ptrace_scope=0");
	f.cap_sys_ptrace = true;
	ck_assert_int_eq(attach__perm_explain(&f, buf, sizeof buf), 0);
	f.yama_scope = 3;
	ck_assert_int_eq(attach__perm_explain(&f, buf, sizeof buf), 1);
	ck_assert_str_eq(buf, "permission denied: kernel.yama.ptrace_scope is 3, so no process may "
			      "be traced, not even by root (only a reboot lowers it)");
	/* A setuid program: uids differ among themselves. */
	f.cap_sys_ptrace = false;
	f.yama_scope = -1;
	f.uid[1] = 0;
	f.uid[2] = 0;
	ck_assert_int_eq(attach__perm_explain(&f, buf, sizeof buf), 1);
	ck_assert_str_eq(buf, "permission denied: process 10 (svc) runs as uids 1000/0/0 and gids "
			      "1000/1000/1000 (real/effective/saved) and padrone as uid 1000 (gid "
			      "1000), without CAP_SYS_PTRACE; run padrone as the same user or as root");
	/* Same ids, but capabilities padrone lacks (the capability module). */
	f.uid[1] = f.uid[2] = 1000;
	f.caps = 1ull << 13 | 1ull << 23 | 1ull << 63;
	f.my_caps = 1ull << 23;
	ck_assert_int_eq(attach__perm_explain(&f, buf, sizeof buf), 1);
	ck_assert_str_eq(buf, "permission denied: process 10 (svc) holds capabilities padrone "
			      "lacks (cap_net_raw, cap_63) and padrone runs without CAP_SYS_PTRACE; a "
			      "process may trace only processes whose capabilities it has: run "
			      "padrone as root");
	f.cap_sys_ptrace = true;
	ck_assert_int_eq(attach__perm_explain(&f, buf, sizeof buf), 0);
}
END_TEST

START_TEST(explains_a_refusal_the_facts_do_not_show)
{
	struct attach__perm_facts f = {
		.pid = 10, .comm = "svc", .my_uid = 0, .uid = { 0, 0, 0 }, .dumpable = true,
		.cap_sys_ptrace = true, .yama_scope = -1,
	};
	char buf[512];

	attach__perm_unexplained(&f, 0, buf, sizeof buf);
	ck_assert_str_eq(buf, "permission denied: the kernel refused padrone access to process 10 "
			      "(svc) although uids and capabilities allow it; a security module "
			      "forbids it (SELinux, AppArmor, Yama...)");
	snprintf(f.lsms, sizeof f.lsms, "lockdown,capability,yama,apparmor");
	f.foreign_userns = true;
	attach__perm_unexplained(&f, 12, buf, sizeof buf);
	ck_assert_str_eq(buf, "permission denied: the kernel refused padrone access to thread 12 "
			      "of process 10 (svc) although uids and capabilities allow it; padrone "
			      "runs in a user namespace of its own that the process is not in, where "
			      "its capabilities may not count, or a security module forbids it "
			      "(active: lockdown,capability,yama,apparmor)");
}
END_TEST

START_TEST(refuses_an_already_traced_process)
{
	struct tu_proc p, s;
	char msg[512], pidarg[16];
	pid_t pid = at_spawn(&p, "hotloop", "-w", "200000", NULL);
	snprintf(pidarg, sizeof pidarg, "%d", (int)pid);
	char *argv[] = { "strace", "-qq", "-o", "/dev/null", "-p", pidarg, NULL };
	ck_assert_int_eq(tu_spawn(&s, argv, false), 0);
	for (int i = 0; i < 5000 && at_tracer(pid, 0) != s.pid; i++)
		at_sleep_ms(1);
	ck_assert_int_eq(at_tracer(pid, 0), s.pid);
	snprintf(msg, sizeof msg, "process %d (hotloop) is already traced by process %d (strace); "
		 "a process can have only one tracer: detach that one first", (int)pid, (int)s.pid);
	expect_refusal(pid, -EBUSY, ATTACH_ALREADY_TRACED, 8, msg);
	ck_assert_int_eq(at_tracer(pid, 0), s.pid);	/* strace keeps it */
	/* strace detaches on SIGINT; then padrone can attach. */
	kill(s.pid, SIGINT);
	ck_assert(tu_wait(&s, 5000) >= 0);
	tu_kill(&s);
	struct attach_target *t = at_seize(pid);
	snprintf(msg, sizeof msg, "process %d (hotloop) is already traced by this process (%d): "
		 "attach to it only once", (int)pid, (int)getpid());
	expect_refusal(pid, -EBUSY, ATTACH_ALREADY_TRACED, 8, msg);
	ck_assert_int_eq(attach_target__detach(t), 0);
	at_drain(&p);
	at_check_ticks(&p, 2, 200000);
	tu_kill(&p);
}
END_TEST

/* A process of another user, traced by root: the refusal must name the
 * tracer, judged with the target's own uid (not the tracer's). */
START_TEST(names_the_tracer_of_another_users_process)
{
	struct tu_proc p, s;
	char msg[512], pidarg[16], uidarg[32], gidarg[32];
	struct attach_error e;
	int r;

	snprintf(uidarg, sizeof uidarg, "--reuid=%d", NOBODY);
	snprintf(gidarg, sizeof gidarg, "--regid=%d", NOBODY);
	const char *hotloop = tu_public_path("tests/targets/hotloop");
	ck_assert_ptr_nonnull(hotloop);
	char *targv[] = { "setpriv", uidarg, gidarg, "--clear-groups",
			  (char *)hotloop, "-w", "200000", NULL };
	pid_t pid = at_spawn_argv(&p, targv);
	snprintf(pidarg, sizeof pidarg, "%d", (int)pid);
	char *argv[] = { "strace", "-qq", "-o", "/dev/null", "-p", pidarg, NULL };
	ck_assert_int_eq(tu_spawn(&s, argv, false), 0);
	for (int i = 0; i < 5000 && at_tracer(pid, 0) != s.pid; i++)
		at_sleep_ms(1);
	ck_assert_int_eq(at_tracer(pid, 0), s.pid);
	seize_as(pid, NOBODY, &e, &r);
	snprintf(msg, sizeof msg, "process %d (hotloop) is already traced by process %d (strace); "
		 "a process can have only one tracer: detach that one first", (int)pid, (int)s.pid);
	ck_assert_int_eq(r, -EBUSY);
	ck_assert_str_eq(e.msg, msg);
	kill(s.pid, SIGINT);
	ck_assert(tu_wait(&s, 5000) >= 0);
	tu_kill(&s);
	at_drain(&p);
	at_check_ticks(&p, 2, 200000);
	tu_kill(&p);
}
END_TEST

START_TEST(undoes_a_partial_seize)
{
	/* One thread is under strace: the threads seized before it are let go. */
	struct tu_proc p, s;
	char msg[512], tidarg[16];
	pid_t pid = at_spawn(&p, "threads", "-n", "0", "-l", "3", "-S", NULL);
	pid_t tids[8];
	FILE *f;
	char cmd[64];
	int n = 0;
	snprintf(cmd, sizeof cmd, "ls /proc/%d/task", (int)pid);
	ck_assert_ptr_nonnull(f = popen(cmd, "r"));
	while (n < 8 && fscanf(f, "%d", &tids[n]) == 1)
		n++;
	pclose(f);
	ck_assert_int_eq(n, 4);
	pid_t victim = tids[3];
	snprintf(tidarg, sizeof tidarg, "%d", (int)victim);
	char *argv[] = { "strace", "-qq", "-o", "/dev/null", "-p", tidarg, NULL };
	ck_assert_int_eq(tu_spawn(&s, argv, false), 0);
	for (int i = 0; i < 5000 && at_tracer(pid, victim) != s.pid; i++)
		at_sleep_ms(1);
	ck_assert_int_eq(at_tracer(pid, victim), s.pid);
	snprintf(msg, sizeof msg, "thread %d of process %d (threads) is already traced by process "
		 "%d (strace); a thread can have only one tracer: detach that one first",
		 (int)victim, (int)pid, (int)s.pid);
	expect_refusal(pid, -EBUSY, ATTACH_ALREADY_TRACED, 8, msg);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(at_tracer(pid, tids[i]), 0);
	ck_assert_int_eq(at_tracer(pid, victim), s.pid);
	kill(s.pid, SIGINT);
	ck_assert(tu_wait(&s, 5000) >= 0);
	tu_kill(&s);
	ck_assert_int_eq(at_tasks_not_traced_by(pid, 0), 0);
	at_drain(&p);
	at_threads_ok(&p);
	tu_kill(&p);
}
END_TEST

/* --------------------------------------------------------- seize/detach */

START_TEST(seizes_and_detaches_a_single_thread)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", "200000", NULL);
	at_check_ticks(&p, 1, 200000);
	struct attach_target *t = at_seize(pid);
	ck_assert_int_eq(attach_target__pid(t), pid);
	ck_assert_int_eq(attach_target__state(t), ATTACH_OK);
	ck_assert(!attach_target__was_stopped(t));
	ck_assert(!attach_target__is_stopped(t));
	ck_assert_str_eq(attach_target__errmsg(t), "");
	pid_t tids[4];
	ck_assert_int_eq(attach_target__threads(t, tids, 4), 1);
	ck_assert_int_eq(tids[0], pid);
	ck_assert_int_eq(at_tracer(pid, 0), getpid());
	/* Seized, not stopped: it keeps ticking while attached. */
	at_drain(&p);
	at_check_ticks(&p, 2, 200000);
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert_int_eq(at_tracer(pid, 0), 0);
	at_drain(&p);
	at_check_ticks(&p, 3, 200000);
	tu_kill(&p);
}
END_TEST

START_TEST(seizes_every_thread)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "threads", "-n", "0", "-l", "6", NULL);
	struct attach_target *t = at_seize(pid);
	pid_t tids[16];
	ck_assert_int_eq(attach_target__threads(t, tids, 16), 7);
	ck_assert_int_eq(tids[0], pid);
	ck_assert_int_eq(at_task_count(pid), 7);
	ck_assert_int_eq(at_tasks_not_traced_by(pid, getpid()), 0);
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert_int_eq(at_tasks_not_traced_by(pid, 0), 0);
	at_threads_ok(&p);
	tu_kill(&p);
}
END_TEST

/* ------------------------------------------------------------ schedstat */

/* Spin on a CPU for ms milliseconds of the clock. */
static void spin_ms(unsigned ms)
{
	uint64_t until = util_now_ns() + ms * 1000000ull;
	while (util_now_ns() < until)
		;
}

/* The scheduler's count of a thread's time on a CPU grows while it runs
 * (it adds a running thread's time at each tick and switch) and not while
 * it sleeps; a thread that is gone has none. */
START_TEST(a_threads_time_on_a_cpu_grows_only_while_it_runs)
{
	pid_t me = (pid_t)syscall(SYS_gettid);
	uint64_t run0, run1, run2, wait;

	spin_ms(10);
	ck_assert_int_eq(attach_thread_sched_ns(getpid(), me, &run0, &wait), 0);
	ck_assert_uint_gt(run0, 0);
	spin_ms(30);
	ck_assert_int_eq(attach_thread_sched_ns(getpid(), me, &run1, NULL), 0);
	ck_assert_uint_gt(run1, run0);	/* a tick or more of it on a CPU */

	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	struct timespec ts = { 0, 50000000 };
	nanosleep(&ts, NULL);	/* asleep in pause() by now */
	int rc1 = attach_thread_sched_ns(child, child, &run1, NULL);
	nanosleep(&ts, NULL);
	int rc2 = attach_thread_sched_ns(child, child, &run2, NULL);
	kill(child, SIGKILL);	/* before any check: a failed one leaves no child */
	ck_assert_int_eq(waitpid(child, NULL, 0), child);
	ck_assert_int_eq(rc1, 0);
	ck_assert_int_eq(rc2, 0);
	ck_assert_uint_eq(run2, run1);
	ck_assert_int_eq(attach_thread_sched_ns(child, child, &run2, NULL), -ENOENT);
}
END_TEST

/* ------------------------------------------------------------------ maps */

/* A maps line printed the way fs/proc/task_mmu.c does: the name padded to
 * column 73 (seq_setwidth(72) + seq_pad(' ')), no name for anonymous ones. */
static size_t kline(char *out, unsigned long long start, unsigned long long end,
		    const char *perms, unsigned long long off, unsigned maj, unsigned min,
		    unsigned long long inode, const char *name)
{
	int n = sprintf(out, "%08llx-%08llx %s %08llx %02x:%02x %llu ", start, end, perms, off, maj,
			min, inode);
	if (name) {
		while (n < 72)
			out[n++] = ' ';
		out[n++] = ' ';
		n += sprintf(out + n, "%s", name);
	}
	out[n++] = '\n';
	out[n] = '\0';
	return (size_t)n;
}

START_TEST(parses_maps_lines)
{
	char text[4096];
	size_t len = 0;
	len += kline(text + len, 0x400000, 0x401000, "r-xp", 0, 8, 1, 1234, "/usr/bin/a b");
	len += kline(text + len, 0x601000, 0x602000, "rw-p", 0x1000, 8, 1, 1234, "/usr/bin/a b");
	len += kline(text + len, 0x7f0000000000, 0x7f0000001000, "rw-s", 0, 0, 5, 99,
		     "/memfd:cab (deleted)");
	len += kline(text + len, 0x7f0000002000, 0x7f0000003000, "---p", 0, 0, 0, 0, NULL);
	len += kline(text + len, 0x7f0000003000, 0x7f0000004000, "r--p", 0, 0, 0, 0, "[vvar]");
	/* A prefix longer than 72 columns: the name follows two blanks. */
	len += kline(text + len, 0xffffffffff600000ull, 0xffffffffff601000ull, "r-xp", 0x2000,
		     0xfd, 0, 18446744073709551615ull, "/x");
	len += kline(text + len, 0x7f0000006000, 0x7f0000007000, "r--p", 0, 8, 1, 77, "  two lead");
	len += kline(text + len, 0x7ffd00000000, 0x7ffd00021000, "rw-p", 0, 0, 0, 0, "[stack]");
	struct attach_maps *m;
	ck_assert_int_eq(attach__maps_parse(text, len, &m), 0);
	ck_assert_uint_eq(attach_maps__count(m), 8);
	const struct attach_map *a = attach_maps__at(m, 0);
	ck_assert_str_eq(a->path, "/usr/bin/a b");
	ck_assert_uint_eq(a->prot, ATTACH_MAP_R | ATTACH_MAP_X);
	ck_assert_uint_eq(a->inode, 1234);
	ck_assert_uint_eq(a->dev_major, 8);
	const struct attach_map *s = attach_maps__at(m, 2);
	ck_assert_str_eq(s->path, "/memfd:cab (deleted)");
	ck_assert_uint_eq(s->prot, ATTACH_MAP_R | ATTACH_MAP_W | ATTACH_MAP_SHARED);
	ck_assert_str_eq(attach_maps__at(m, 3)->path, "");
	ck_assert_uint_eq(attach_maps__at(m, 3)->prot, 0);
	ck_assert_str_eq(attach_maps__at(m, 4)->path, "[vvar]");
	ck_assert_str_eq(attach_maps__at(m, 5)->path, "  two lead");	/* leading blanks kept */
	ck_assert_str_eq(attach_maps__at(m, 6)->path, "[stack]");
	ck_assert_str_eq(attach_maps__at(m, 7)->path, "/x");	/* sorted last */
	ck_assert_uint_eq(attach_maps__at(m, 7)->offset, 0x2000);
	ck_assert_uint_eq(attach_maps__at(m, 7)->inode, 18446744073709551615ull);

	ck_assert_ptr_eq(attach_maps__find(m, 0x400000), a);
	ck_assert_ptr_eq(attach_maps__find(m, 0x400fff), a);
	ck_assert_ptr_null(attach_maps__find(m, 0x401000));
	ck_assert_ptr_null(attach_maps__find(m, 0x3fffff));
	ck_assert_ptr_eq(attach_maps__find(m, 0x7f0000000010), s);
	ck_assert_ptr_eq(attach_maps__first_of(m, "/usr/bin/a b"), a);
	ck_assert_ptr_null(attach_maps__first_of(m, "/usr/bin/a"));

	/* Gaps: closest to near, aligned, inside [lo, hi), off the stack's
	 * guard gap. */
	uint64_t at;
	ck_assert_int_eq(attach_maps__find_gap(m, 0, ~0ull, 0x1000, 0x1000, 0x401000, &at), 0);
	ck_assert_uint_eq(at, 0x401000);
	ck_assert_int_eq(attach_maps__find_gap(m, 0, ~0ull, 0x10000, 0x10000, 0x400800, &at), 0);
	ck_assert_uint_eq(at, 0x3f0000);
	ck_assert_int_eq(attach_maps__find_gap(m, 0x7f0000000000, 0x7f0000004000, 0x1000, 0x1000,
					      0x7f0000000000, &at), 0);
	ck_assert_uint_eq(at, 0x7f0000001000);
	ck_assert_int_eq(attach_maps__find_gap(m, 0x7f0000000000, 0x7f0000001000, 0x1000, 0x1000,
					      0, &at), -ENOSPC);
	ck_assert_int_eq(attach_maps__find_gap(m, 0x7ffc00000000, 0x7fffffffffff, 0x1000, 0x1000,
					      0x7ffd00000000, &at), 0);
	ck_assert(at + 0x1000 <= 0x7ffd00000000 - 256 * 4096 || at >= 0x7ffd00021000);
	attach_maps__free(m);

	ck_assert_int_eq(attach__maps_parse("garbage\n", 8, &m), -EINVAL);
}
END_TEST

START_TEST(reads_live_maps_with_odd_names)
{
	char path[] = "/tmp/padrone maps test XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 8192), 0);
	void *p = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	close(fd);

	struct attach_maps *m;
	ck_assert_int_eq(attach_maps__read(getpid(), &m), 0);
	const struct attach_map *a = attach_maps__first_of(m, path);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->start, (uintptr_t)p);
	ck_assert_uint_eq(a->end, (uintptr_t)p + 8192);
	ck_assert_ptr_eq(attach_maps__find(m, (uintptr_t)p + 100), a);
	for (size_t i = 1; i < attach_maps__count(m); i++)
		ck_assert_uint_le(attach_maps__at(m, i - 1)->end, attach_maps__at(m, i)->start);
	ck_assert_ptr_nonnull(attach_maps__first_of(m, "[stack]"));
	attach_maps__free(m);

	unlink(path);
	char deleted[128];
	snprintf(deleted, sizeof deleted, "%s (deleted)", path);
	ck_assert_int_eq(attach_maps__read(getpid(), &m), 0);
	a = attach_maps__first_of(m, deleted);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->start, (uintptr_t)p);
	/* A gap near the mapping, for a code cache within +-2 GiB. */
	uint64_t at;
	uint64_t near = (uintptr_t)p;
	ck_assert_int_eq(attach_maps__find_gap(m, near - (1ull << 31), near + (1ull << 31),
					      1 << 20, 4096, near, &at), 0);
	ck_assert_uint_eq(at % 4096, 0);
	for (size_t i = 0; i < attach_maps__count(m); i++) {
		const struct attach_map *x = attach_maps__at(m, i);
		ck_assert(at + (1 << 20) <= x->start || at >= x->end);
	}
	void *q = mmap((void *)(uintptr_t)at, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
		       MAP_FIXED_NOREPLACE, -1, 0);
	ck_assert_ptr_eq(q, (void *)(uintptr_t)at);
	munmap(q, 1 << 20);
	attach_maps__free(m);
	munmap(p, 8192);
	ck_assert_int_eq(attach_maps__read(999999999, &m), -ENOENT);
}
END_TEST

/* ---------------------------------------------------------------- memory */

/* The bytes of the file behind addr, from /proc/PID/exe. */
static void file_bytes(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct attach_maps *m;
	ck_assert_int_eq(attach_maps__read(pid, &m), 0);
	const struct attach_map *a = attach_maps__find(m, addr);
	ck_assert_ptr_nonnull(a);
	char exe[64];
	snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
	int fd = open(exe, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, (off_t)(addr - a->start + a->offset)), (ssize_t)len);
	close(fd);
	attach_maps__free(m);
}

START_TEST(reads_memory_both_ways)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", "200000", NULL);
	uint64_t hot = at_hot_function();
	ck_assert_uint_ne(hot, 0);
	struct attach_target *t = at_seize(pid);
	unsigned char want[64], got[64];
	file_bytes(pid, hot, want, sizeof want);
	for (int fallback = 0; fallback < 2; fallback++) {
		attach__force_mem_fallback = fallback;
		memset(got, 0, sizeof got);
		ck_assert_int_eq(attach_target__read(t, hot, got, sizeof got), 64);
		ck_assert_mem_eq(got, want, sizeof want);

		/* Short at the end of a mapping followed by a hole. */
		struct attach_maps *m;
		ck_assert_int_eq(attach_maps__read(pid, &m), 0);
		uint64_t end = 0;
		for (size_t i = 0; i + 1 < attach_maps__count(m) && !end; i++)
			if (attach_maps__at(m, i)->end < attach_maps__at(m, i + 1)->start &&
			    (attach_maps__at(m, i)->prot & ATTACH_MAP_R))
				end = attach_maps__at(m, i)->end;
		attach_maps__free(m);
		ck_assert_uint_ne(end, 0);
		unsigned char buf[16000];
		ck_assert_int_eq(attach_target__read(t, end - 100, buf, sizeof buf), 100);

		/* Below the stack: never grows it (/proc/PID/mem would: the
		 * kernel takes the gap there for the stack growing down) */
		uint64_t stack = 0, stack_after = 1;
		ck_assert_int_eq(attach_maps__read(pid, &m), 0);
		for (size_t i = 0; i < attach_maps__count(m); i++)
			if (!strcmp(attach_maps__at(m, i)->path, "[stack]"))
				stack = attach_maps__at(m, i)->start;
		attach_maps__free(m);
		ck_assert_uint_ne(stack, 0);
		ck_assert_int_eq(attach_target__read(t, stack - 65536, buf, 16), -EFAULT);
		ck_assert_int_eq(attach_target__read(t, stack - 65536, buf, 65536 + 16), -EFAULT);
		ck_assert_int_eq(attach_maps__read(pid, &m), 0);
		for (size_t i = 0; i < attach_maps__count(m); i++)
			if (!strcmp(attach_maps__at(m, i)->path, "[stack]"))
				stack_after = attach_maps__at(m, i)->start;
		attach_maps__free(m);
		ck_assert_msg(stack_after == stack, "a read at 0x%" PRIx64 " grew the stack of "
			      "process %d from 0x%" PRIx64 " to 0x%" PRIx64, stack - 65536, (int)pid,
			      stack, stack_after);

		char msg[256];
		ck_assert_int_eq(attach_target__read(t, 0x1000, buf, 16), -EFAULT);
		snprintf(msg, sizeof msg, "cannot read 16 bytes at 0x1000 in process %d (hotloop): "
			 "not mapped", (int)pid);
		ck_assert_str_eq(attach_target__errmsg(t), msg);
	}
	attach__force_mem_fallback = false;
	ck_assert_int_eq(attach_target__detach(t), 0);
	tu_kill(&p);
}
END_TEST

START_TEST(writes_read_only_text_and_restores_it)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", "200000", NULL);
	uint64_t hot = at_hot_function();
	struct attach_target *t = at_seize(pid);
	unsigned char orig[32], bad[32], back[32];
	ck_assert_int_eq(attach_target__read(t, hot, orig, sizeof orig), 32);
	for (int i = 0; i < 32; i++)
		bad[i] = orig[i] ^ 0x5a;
	ck_assert_int_eq(attach_target__stop(t), 0);
	ck_assert(attach_target__is_stopped(t));
	ck_assert_int_eq(attach_target__write(t, hot, bad, sizeof bad), 0);
	ck_assert_int_eq(attach_target__read(t, hot, back, sizeof back), 32);
	ck_assert_mem_eq(back, bad, sizeof bad);
	ck_assert_int_eq(attach_target__write(t, hot, orig, sizeof orig), 0);
	ck_assert_int_eq(attach_target__read(t, hot, back, sizeof back), 32);
	ck_assert_mem_eq(back, orig, sizeof orig);
	ck_assert_int_eq(attach_target__resume(t), 0);
	ck_assert(!attach_target__is_stopped(t));
	/* The mapping itself stayed r-x. */
	struct attach_maps *m;
	ck_assert_int_eq(attach_maps__read(pid, &m), 0);
	ck_assert_uint_eq(attach_maps__find(m, hot)->prot, ATTACH_MAP_R | ATTACH_MAP_X);
	attach_maps__free(m);
	char msg[256];
	ck_assert_int_eq(attach_target__write(t, 0x1000, orig, 8), -EFAULT);
	snprintf(msg, sizeof msg, "cannot write 8 bytes at 0x1000 in process %d (hotloop): not "
		 "mapped", (int)pid);
	ck_assert_str_eq(attach_target__errmsg(t), msg);
	ck_assert_int_eq(attach_target__detach(t), 0);
	at_drain(&p);
	at_check_ticks(&p, 3, 200000);
	tu_kill(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("attach");
	TCase *tc = tcase_create("refusals");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, at_block_sigchld, NULL);
	tcase_add_test(tc, exit_statuses_are_distinct);
	tcase_add_test(tc, refuses_missing_process);
	tcase_add_test(tc, refuses_a_thread_id);
	tcase_add_test(tc, refuses_a_zombie);
	tcase_add_test(tc, refuses_a_kernel_thread);
	tcase_add_test(tc, refuses_a_32bit_process);
	tcase_add_test(tc, classifies_x32_and_x86_64_programs);
	tcase_add_test(tc, refuses_without_permission);
	tcase_add_test(tc, refuses_a_process_that_is_not_dumpable);
	tcase_add_test(tc, explains_yama_and_uids);
	tcase_add_test(tc, explains_a_refusal_the_facts_do_not_show);
	tcase_add_test(tc, refuses_an_already_traced_process);
	tcase_add_test(tc, names_the_tracer_of_another_users_process);
	tcase_add_test(tc, undoes_a_partial_seize);
	suite_add_tcase(s, tc);

	tc = tcase_create("seize");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, at_block_sigchld, NULL);
	tcase_add_test(tc, seizes_and_detaches_a_single_thread);
	tcase_add_test(tc, seizes_every_thread);
	suite_add_tcase(s, tc);

	tc = tcase_create("schedstat");
	tcase_add_test(tc, a_threads_time_on_a_cpu_grows_only_while_it_runs);
	suite_add_tcase(s, tc);

	tc = tcase_create("maps");
	tcase_add_test(tc, parses_maps_lines);
	tcase_add_test(tc, reads_live_maps_with_odd_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("memory");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, at_block_sigchld, NULL);
	tcase_add_test(tc, reads_memory_both_ways);
	tcase_add_test(tc, writes_read_only_text_and_restores_it);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
