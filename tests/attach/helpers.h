/* Helpers shared by attach/'s test suites: starting targets, reading what
 * they print and what /proc says about them. */
#ifndef PADRONE_TESTS_ATTACH_HELPERS_H
#define PADRONE_TESTS_ATTACH_HELPERS_H

#include "attach/attach.h"
#include "src/status.h"
#include "tests/lib/tu.h"

#include <stdbool.h>
#include <stdint.h>

/* Start a target built in tests/targets with its arguments (NULL-ended)
 * and wait for its "ready PID" line; returns the pid. */
pid_t at_spawn(struct tu_proc *p, const char *target, ...);
/* The same with a ready-made argv (argv[0] a full path). */
pid_t at_spawn_argv(struct tu_proc *p, char *const argv[]);
/* The "hot_function 0xADDR" of a hotloop's ready line (at_spawn keeps it). */
uint64_t at_hot_function(void);

/* The exit status padrone gives a reason of attach/'s (src/status.c's
 * table), and its name: what a user sees of it. */
static inline int at_status(enum attach_why w)
{
	return padrone_why_exit_status(padrone_why_from_attach(w));
}
static inline const char *at_why_name(enum attach_why w)
{
	return padrone_why_name(padrone_why_from_attach(w));
}

/* Read the next `n` "tick N checksum X" lines of a hotloop run with -w
 * work and check each X against `hotloop -e N -w work`. Fails the test on
 * a mismatch or an "error" line. Returns the last tick number. */
long at_check_ticks(struct tu_proc *p, int n, long work);
/* Wait for the threads target's next "tick N created C errors E" line and
 * check E == 0; returns C. */
long at_threads_ok(struct tu_proc *p);
/* Skip what the target printed so far: lines until 2 ms pass without one,
 * or 200 ms in all. */
void at_drain(struct tu_proc *p);

/* /proc facts. */
pid_t at_tracer(pid_t pid, pid_t tid);	/* the process tracing a task (tid 0: pid), 0 if none */
char at_state(pid_t pid, pid_t tid);	/* state letter, 0 if gone */
int at_task_count(pid_t pid);
/* Every task of pid traced by `tracer` (0: by nobody)? Returns how many
 * tasks do not match. */
int at_tasks_not_traced_by(pid_t pid, pid_t tracer);
/* Wait until the task's state is one of `states` (e.g. "tT"). */
bool at_wait_state(pid_t pid, const char *states, int timeout_ms);
/* Block SIGCHLD in the calling thread (what padrone's programs do). */
void at_block_sigchld(void);
/* This process's comm. */
const char *at_self_comm(void);
void at_sleep_ms(int ms);

/* Seize with ck_assert on success. */
struct attach_target *at_seize(pid_t pid);

#endif
