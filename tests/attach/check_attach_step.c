/* attach/: single steps never change the target's signal mask, keep every
 * signal that arrives meanwhile, and step exactly one instruction of the
 * thread's own code. The target (tests/targets/stepsig) checks what it is
 * sent and says so in its own output. */
#include "attach/attach.h"
#include "tests/attach/helpers.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct stepsig {
	struct tu_proc p;
	pid_t pid, reporter;	/* the main thread (the one stepped) and the printer */
	uint64_t first, jump;	/* the spin loop's first instruction and its jump back */
};

static void stepsig_start(struct stepsig *s, bool sender)
{
	s->pid = sender ? at_spawn(&s->p, "stepsig", "-s", NULL) : at_spawn(&s->p, "stepsig", NULL);
	char line[256];
	ck_assert_int_gt(tu_wait_for(&s->p, "spin ", line, sizeof line, 10000), 0);
	unsigned long long a, b;
	ck_assert_int_eq(sscanf(line, "spin %llx %llx", &a, &b), 2);
	s->first = a;
	s->jump = b;
	ck_assert_int_eq(at_task_count(s->pid), 2);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "ls /proc/%d/task", (int)s->pid);
	char *out = tu_run(cmd, NULL);
	ck_assert_ptr_nonnull(out);
	for (char *w = strtok(out, "\n"); w; w = strtok(NULL, "\n"))
		if (atoi(w) != s->pid)
			s->reporter = atoi(w);
	free(out);
	ck_assert_int_gt(s->reporter, 0);
	/* The reporter has set up its mask once it prints (a new thread
	 * starts with every signal blocked, glibc's own too). */
	ck_assert_int_gt(tu_wait_for(&s->p, "tick ", line, sizeof line, 10000), 0);
}

/* One signal-set line of a task's status ("SigBlk:", "SigCgt:", ...), as
 * a mask. */
static unsigned long long sigfield(pid_t pid, pid_t tid, const char *field)
{
	char path[96], line[256];
	unsigned long long v = ~0ull;
	snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
	FILE *f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	size_t n = strlen(field);
	while (fgets(line, sizeof line, f))
		if (strncmp(line, field, n) == 0)
			v = strtoull(line + n, NULL, 16);
	fclose(f);
	ck_assert_msg(v != ~0ull, "no %s in %s", field, path);
	return v;
}

/* Wait (5 s at most) until the task's SigBlk is `mask`. */
static bool mask_becomes(pid_t pid, pid_t tid, unsigned long long mask)
{
	for (int i = 0; i < 5000; i++) {
		if (sigfield(pid, tid, "SigBlk:") == mask)
			return true;
		at_sleep_ms(1);
	}
	return false;
}

/* The next tick line's counts. */
struct ticks {
	long usr1, rt, ext, bad, trap, rt2;
};

static struct ticks next_tick(struct stepsig *s)
{
	char line[256];
	struct ticks k;
	long n;
	int got = tu_wait_for(&s->p, "tick ", line, sizeof line, 10000), st = 0;
	ck_assert_msg(got > 0, "no tick line (%d): stepsig %s, status %#x", got,
		      waitpid(s->pid, &st, WNOHANG) == s->pid ? "ended" : "runs", st);
	ck_assert_int_eq(sscanf(line, "tick %ld usr1 %ld rt %ld ext %ld bad %ld trap %ld rt2 %ld",
				&n, &k.usr1, &k.rt, &k.ext, &k.bad, &k.trap, &k.rt2), 7);
	return k;
}

/* Send SIGUSR1 with kill() and wait until the target says it handled it. */
static void handles_usr1(struct stepsig *s)
{
	long before = next_tick(s).ext;
	ck_assert_int_eq(kill(s->pid, SIGUSR1), 0);
	struct ticks k;
	for (int i = 0; i < 500 && (k = next_tick(s)).ext == before; i++)
		;
	ck_assert_int_eq(k.ext, before + 1);
}

/* SIGTERM and the done line; returns it. */
static void stop_target(struct stepsig *s, char *line, size_t size)
{
	ck_assert_int_eq(kill(s->pid, SIGTERM), 0);
	ck_assert_int_gt(tu_wait_for(&s->p, "done ", line, size, 10000), 0);
	int st = tu_wait(&s->p, 10000);
	ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "stepsig ended: %#x", st);
	tu_kill(&s->p);
}

/* A child of the test that seizes the target and steps its main thread
 * until it is killed; it writes one byte to `go` once stepping. */
static pid_t start_stepper(const struct stepsig *s, int go)
{
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c)
		return c;
	struct attach_target *t;
	struct attach_error e;
	if (attach_seize(s->pid, NULL, &t, &e) != 0 || attach_target__stop(t) != 0)
		_exit(3);
	for (unsigned long i = 0;; i++) {
		if (attach_target__step(t, s->pid) != 0)
			_exit(4);
		if (i == 0 && write(go, "s", 1) != 1)
			_exit(5);
		if (i % 32 == 31 && (attach_target__resume(t) != 0 || attach_target__stop(t) != 0))
			_exit(6);
	}
}

/* padrone killed in the middle of its steps, 50 times at random moments:
 * each time each thread's mask is its own, and the target handles SIGUSR1
 * (and at last SIGTERM) as before. Before the fix a step blocked every
 * signal but SIGTRAP while it ran, and a kill then left them blocked. */
START_TEST(a_killed_stepper_leaves_the_masks_alone)
{
	struct stepsig s;
	stepsig_start(&s, false);
	unsigned long long main0 = sigfield(s.pid, s.pid, "SigBlk:");
	unsigned long long rep0 = sigfield(s.pid, s.reporter, "SigBlk:");
	unsigned long long cgt0 = sigfield(s.pid, s.pid, "SigCgt:");
	srand((unsigned)time(NULL));
	for (int round = 0; round < 50; round++) {
		int go[2];
		ck_assert_int_eq(pipe(go), 0);
		pid_t c = start_stepper(&s, go[1]);
		char b;
		ck_assert_msg(read(go[0], &b, 1) == 1, "the stepper failed to start");
		close(go[0]);
		close(go[1]);
		struct timespec ts = { 0, (rand() % 20000) * 1000L };
		nanosleep(&ts, NULL);
		kill(c, SIGKILL);
		int st = 0;
		ck_assert_int_eq(waitpid(c, &st, 0), c);
		ck_assert_msg(WIFSIGNALED(st), "the stepper ended with %#x (round %d)", st, round);
		for (int i = 0; i < 5000 && (at_tracer(s.pid, s.pid) ||
					     at_tracer(s.pid, s.reporter)); i++)
			at_sleep_ms(1);
		ck_assert_int_eq(at_tracer(s.pid, s.pid), 0);
		ck_assert_int_eq(at_tracer(s.pid, s.reporter), 0);
		/* (a handler running, of the trap below, blocks its signal) */
		ck_assert_msg(mask_becomes(s.pid, s.pid, main0),
			      "round %d: the stepped thread's mask is %llx, not %llx", round,
			      sigfield(s.pid, s.pid, "SigBlk:"), main0);
		ck_assert_msg(mask_becomes(s.pid, s.reporter, rep0),
			      "round %d: the reporter's mask is %llx, not %llx", round,
			      sigfield(s.pid, s.reporter, "SigBlk:"), rep0);
		ck_assert_uint_eq(sigfield(s.pid, s.pid, "SigCgt:"), cgt0);
		int ost;
		ck_assert_msg(waitpid(s.pid, &ost, WNOHANG) == 0, "round %d: stepsig ended: %#x",
			      round, ost);
		at_drain(&s.p);
		handles_usr1(&s);
	}
	char line[256];
	stop_target(&s, line, sizeof line);
	/* and no step's trap ever reached the target's handler (the step
	 * guard took those of a kill while the trap flag was set or the
	 * thread sat in the trap's stop) */
	ck_assert_msg(strstr(line, " bad 0 trap 0 "), "%s", line);
}
END_TEST

/* Is a signal the thread does not block pending for it? */
static bool signal_pending(pid_t pid)
{
	unsigned long long pnd = sigfield(pid, pid, "SigPnd:") | sigfield(pid, pid, "ShdPnd:");
	return pnd & ~sigfield(pid, pid, "SigBlk:");
}

/* Where one step from a must land in the spin loop. */
static uint64_t after(const struct stepsig *s, uint64_t a)
{
	return a == s->jump ? s->first : a + 1;
}

/* Thousands of steps while a sender keeps signals coming: each step runs
 * exactly one instruction of the loop (never the handler's), and every
 * signal is handled once, in order, with its own siginfo. */
START_TEST(signals_during_steps_are_kept)
{
	struct stepsig s;
	stepsig_start(&s, true);
	unsigned long long main0 = ~0ull;	/* its own: as first seen in the loop */
	struct attach_target *t = at_seize(s.pid);
	int checked = 0, with_signal = 0, steps = 0;
	double step_us[2] = { 0, 0 };	/* time in steps without, with a signal pending */
	for (int round = 0; round < 3000 && checked < 2000; round++) {
		ck_assert_int_eq(attach_target__stop(t), 0);
		for (int i = 0; i < 10; i++, steps++) {
			struct user_regs_struct a, b;
			ck_assert_int_eq(attach_target__get_regs(t, s.pid, &a), 0);
			bool pending = signal_pending(s.pid);
			with_signal += pending;
			struct timespec t0, t1;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			int r = attach_target__step(t, s.pid);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			step_us[pending] += (double)(t1.tv_sec - t0.tv_sec) * 1e6 +
				       (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
			ck_assert_msg(r == 0, "step: %d %s", r, attach_target__errmsg(t));
			ck_assert_int_eq(attach_target__get_regs(t, s.pid, &b), 0);
			if (a.rip < s.first || a.rip > s.jump)
				continue;	/* stopped in a handler: not ours to check */
			ck_assert_msg(b.rip == after(&s, a.rip), "a step from %llx went to %llx",
				      a.rip, b.rip);
			/* (in a handler the mask holds the handler's signals) */
			if (main0 == ~0ull)
				main0 = sigfield(s.pid, s.pid, "SigBlk:");
			ck_assert_uint_eq(sigfield(s.pid, s.pid, "SigBlk:"), main0);
			checked++;
		}
		ck_assert_int_eq(attach_target__resume(t), 0);
		/* The signals held come now: let their handlers return, so
		 * that most rounds find the thread back in its loop (the
		 * rounds that do not are not counted). */
		at_sleep_ms(2);
	}
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert_int_ge(checked, 2000);
	ck_assert_int_ge(with_signal, 100);
	char line[256];
	stop_target(&s, line, sizeof line);
	long u, us, r, rs, ext, bad, trap;
	ck_assert_int_eq(sscanf(line, "done usr1 %ld sent %ld rt %ld rtsent %ld ext %ld bad %ld "
				"trap %ld", &u, &us, &r, &rs, &ext, &bad, &trap), 7);
	ck_assert_msg(bad == 0 && trap == 0 && ext == 0, "%s", line);
	ck_assert_msg(us - u <= 1 && rs - r <= 4 && u >= 100 && r >= 400, "%s", line);
	printf("# %d steps (%d checked), %d with a signal pending: %.0f us a step with, %.0f "
	       "without; %s\n", steps, checked, with_signal, step_us[1] / with_signal,
	       step_us[0] / (steps - with_signal), line);
}
END_TEST

/* The reporter thread blocks every signal, SIGTRAP too, and the process
 * handles SIGTRAP: SIGTRAP is unblocked for each step (by padrone, for the
 * step guard; a trap forced on a blocked signal would also reset its
 * handler), and the mask and the handler both come back. */
START_TEST(a_thread_blocking_sigtrap_keeps_its_mask_and_handler)
{
	struct stepsig s;
	stepsig_start(&s, false);
	unsigned long long rep0 = sigfield(s.pid, s.reporter, "SigBlk:");
	unsigned long long cgt0 = sigfield(s.pid, s.pid, "SigCgt:");
	ck_assert(rep0 & (1ull << (SIGTRAP - 1)));
	ck_assert(cgt0 & (1ull << (SIGTRAP - 1)));
	struct attach_target *t = at_seize(s.pid);
	ck_assert_int_eq(attach_target__stop(t), 0);
	for (int i = 0; i < 20; i++) {
		int r = attach_target__step(t, s.reporter);
		ck_assert_msg(r == 0, "step: %d %s", r, attach_target__errmsg(t));
		ck_assert_uint_eq(sigfield(s.pid, s.reporter, "SigBlk:"), rep0);
		ck_assert_uint_eq(sigfield(s.pid, s.pid, "SigCgt:"), cgt0);
	}
	ck_assert_int_eq(attach_target__resume(t), 0);
	ck_assert_int_eq(attach_target__detach(t), 0);
	ck_assert_uint_eq(sigfield(s.pid, s.pid, "SigCgt:"), cgt0);
	at_drain(&s.p);
	handles_usr1(&s);
	char line[256];
	stop_target(&s, line, sizeof line);
	ck_assert_msg(strstr(line, " bad 0 trap 0"), "%s", line);
}
END_TEST

/* A tracer of its own (a child process) stops the target, steps thread
 * tid `steps` times, resumes and detaches, SIGKILLing itself at point k of
 * its steps (attach/step.c's PADRONE_TEST_KILL_IN_STEP; 0: never). True
 * when it died there, false when it finished first. */
static bool stepper_killed_at(pid_t pid, pid_t tid, int steps, unsigned k)
{
	pid_t c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		char v[16];
		snprintf(v, sizeof v, "%u", k);
		if (k)
			setenv("PADRONE_TEST_KILL_IN_STEP", v, 1);
		struct attach_target *t;
		struct attach_error e;
		if (attach_seize(pid, NULL, &t, &e) != 0 || attach_target__stop(t) != 0)
			_exit(3);
		for (int i = 0; i < steps; i++)
			if (attach_target__step(t, tid) != 0)
				_exit(4);
		_exit(attach_target__resume(t) == 0 && attach_target__detach(t) == 0 ? 0 : 5);
	}
	int st;
	ck_assert_int_eq(waitpid(c, &st, 0), c);
	bool killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
	ck_assert_msg(killed || (WIFEXITED(st) && WEXITSTATUS(st) == 0),
		      "the stepper ended with %#x (point %u)", st, k);
	for (int i = 0; i < 5000 && at_tracer(pid, tid); i++)
		at_sleep_ms(1);
	ck_assert_int_eq(at_tracer(pid, tid), 0);
	return killed;
}

#define SIGTRAP_BIT (1ull << (SIGTRAP - 1))

/* padrone killed at each point of its steps (the guard armed, a step's
 * trap flag set, the thread in the trap's stop) never lets the step's
 * SIGTRAP reach the target: hotloop, whose SIGTRAP is SIG_DFL (it would
 * die of it), runs on with right checksums. A guard left armed (killed
 * before any trap) is SIGTRAP's action until the next session, which puts
 * SIG_DFL back. */
START_TEST(a_killed_stepper_never_lets_its_trap_through)
{
	struct tu_proc p;
	pid_t pid = at_spawn(&p, "hotloop", "-w", "200000", NULL);
	at_check_ticks(&p, 1, 200000);
	ck_assert_uint_eq(sigfield(pid, pid, "SigCgt:") & SIGTRAP_BIT, 0);
	int killed = 0;
	for (unsigned k = 1; k < 16; k++) {
		if (!stepper_killed_at(pid, pid, 3, k))
			break;
		killed++;
		int st;
		ck_assert_msg(waitpid(pid, &st, WNOHANG) == 0, "point %u: hotloop ended: %#x", k, st);
		at_drain(&p);
		at_check_ticks(&p, 2, 200000);
		ck_assert_int_eq(stepper_killed_at(pid, pid, 1, 0), false);	/* a clean session */
		ck_assert_msg((sigfield(pid, pid, "SigCgt:") & SIGTRAP_BIT) == 0,
			      "point %u: SIGTRAP is still caught after a clean session", k);
	}
	ck_assert_int_eq(killed, 7);	/* the guard, then 3 steps' two points each */
	at_check_ticks(&p, 2, 200000);
	tu_kill(&p);
}
END_TEST

/* The same with stepsig, which handles SIGTRAP itself: its handler never
 * sees the step's trap; the reporter thread, which blocks SIGTRAP, has it
 * blocked again (by the guard when padrone died in the trap's stop); and
 * a SIGTRAP sent while a dead padrone's guard is armed reaches the
 * target's own handler (the guard puts it back, then passes the signal
 * on). */
START_TEST(a_killed_stepper_leaves_sigtrap_to_the_target)
{
	struct stepsig s;
	stepsig_start(&s, false);
	unsigned long long rep0 = sigfield(s.pid, s.reporter, "SigBlk:");
	unsigned long long cgt0 = sigfield(s.pid, s.pid, "SigCgt:");
	ck_assert(rep0 & SIGTRAP_BIT);
	for (unsigned k = 1; k < 8; k++) {
		pid_t tid = k % 2 ? s.reporter : s.pid;
		if (!stepper_killed_at(s.pid, tid, 3, k))
			continue;
		ck_assert_msg(mask_becomes(s.pid, s.reporter, rep0),
			      "point %u: the reporter's mask is %llx, not %llx", k,
			      sigfield(s.pid, s.reporter, "SigBlk:"), rep0);
		ck_assert_uint_eq(sigfield(s.pid, s.pid, "SigCgt:"), cgt0);
		at_drain(&s.p);
		ck_assert_int_eq(next_tick(&s).trap, 0);
	}
	/* killed with the guard armed and no step yet: a SIGTRAP from
	 * outside goes to the target's handler */
	ck_assert(stepper_killed_at(s.pid, s.pid, 1, 1));
	at_drain(&s.p);
	ck_assert_int_eq(kill(s.pid, SIGTRAP), 0);
	struct ticks tk;
	for (int i = 0; i < 500 && (tk = next_tick(&s)).trap == 0; i++)
		;
	ck_assert_int_eq(tk.trap, 1);
	ck_assert_int_eq(tk.bad, 0);
	char line[256];
	stop_target(&s, line, sizeof line);
	ck_assert_msg(strstr(line, " bad 0 trap 1 "), "%s", line);
}
END_TEST

/* More signals than a step can hold, queued while the world is stopped:
 * the step gives up with a reason, the thread unmoved, and the target
 * gets every one, in order, when the world resumes. */
START_TEST(a_flood_of_signals_gives_up_the_step_and_keeps_them)
{
	struct stepsig s;
	stepsig_start(&s, false);
	struct attach_target *t = at_seize(s.pid);
	ck_assert_int_eq(attach_target__stop(t), 0);
	enum { FLOOD = 40 };
	for (int i = 1; i <= FLOOD; i++)
		ck_assert_int_eq(sigqueue(s.pid, SIGRTMIN + 1, (union sigval){ .sival_int = i }),
				 0);
	struct user_regs_struct a, b;
	ck_assert_int_eq(attach_target__get_regs(t, s.pid, &a), 0);
	ck_assert_int_eq(attach_target__step(t, s.pid), -EAGAIN);
	ck_assert_msg(strstr(attach_target__errmsg(t), "signals arrived before its instruction"),
		      "%s", attach_target__errmsg(t));
	ck_assert_int_eq(attach_target__get_regs(t, s.pid, &b), 0);
	ck_assert_uint_eq(b.rip, a.rip);
	ck_assert_int_eq(attach_target__resume(t), 0);
	struct ticks k;
	for (int i = 0; i < 500 && (k = next_tick(&s)).rt2 < FLOOD; i++)
		;
	ck_assert_int_eq(k.rt2, FLOOD);
	ck_assert_int_eq(k.bad, 0);
	ck_assert_int_eq(attach_target__detach(t), 0);
	char line[256];
	stop_target(&s, line, sizeof line);
	ck_assert_msg(strstr(line, " bad 0 trap 0 rt2 40"), "%s", line);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("attach-step");
	TCase *tc = tcase_create("step");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, at_block_sigchld, NULL);
	tcase_add_test(tc, a_killed_stepper_leaves_the_masks_alone);
	tcase_add_test(tc, signals_during_steps_are_kept);
	tcase_add_test(tc, a_thread_blocking_sigtrap_keeps_its_mask_and_handler);
	tcase_add_test(tc, a_flood_of_signals_gives_up_the_step_and_keeps_them);
	tcase_add_test(tc, a_killed_stepper_never_lets_its_trap_through);
	tcase_add_test(tc, a_killed_stepper_leaves_sigtrap_to_the_target);
	suite_add_tcase(s, tc);
	return tu_main(s);
}
