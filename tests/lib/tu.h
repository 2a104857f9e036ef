/* tu: the small test toolkit shared by every room's Check suites.
 *
 * Tests run real programs: tu_spawn starts a target with its stdout on a
 * pipe, tu_read_line waits (bounded) for what it prints, tu_kill ends it and
 * reaps it. Every process a test starts must end in tu_kill or tu_wait.
 */
#ifndef PADRONE_TESTS_TU_H
#define PADRONE_TESTS_TU_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct tu_proc {
	pid_t pid;
	int out_fd;		/* read end of the target's stdout, or -1 */
	char buf[8192];		/* bytes read but not yet returned as lines */
	size_t len;
};

/* Path of a program built in the tree, e.g. tu_path("tests/targets/hotloop"). */
const char *tu_path(const char *rel);
/* Path of a source file, e.g. tu_srcpath("tests/cfg/corpus/switch.c"). */
const char *tu_srcpath(const char *rel);

/* A copy of the program tu_path(rel) in a directory every user can reach
 * (the checkout may not be: a clone in /root, mode 0700), for tests that
 * run it as another user. The copy and its directory are removed when the
 * calling process exits. NULL (and a message on stderr) if no such copy can
 * be made. */
const char *tu_public_path(const char *rel);

/* Start argv[0] with argv; its stdout (and stderr when merge_stderr) go to a
 * pipe read by tu_read_line. It dies with the calling thread (a test whose
 * assertion failed leaves no target behind). Returns 0 or -errno. */
int tu_spawn(struct tu_proc *p, char *const argv[], bool merge_stderr);
/* Read one line (without the newline) into line[size], waiting at most
 * timeout_ms. Returns the length, -ETIMEDOUT, or -EPIPE at end of output. */
int tu_read_line(struct tu_proc *p, char *line, size_t size, int timeout_ms);
/* Read lines until one starts with prefix; copies it into line. */
int tu_wait_for(struct tu_proc *p, const char *prefix, char *line, size_t size,
		int timeout_ms);
/* Wait for the process to exit by itself; returns its wait status or
 * -ETIMEDOUT (after which the caller should tu_kill). */
int tu_wait(struct tu_proc *p, int timeout_ms);
/* SIGKILL (after SIGCONT, in case it is stopped) and reap. Idempotent. */
void tu_kill(struct tu_proc *p);

/* Run a shell command, capture its stdout into a malloc'd string (caller
 * frees) and its exit status. Returns NULL on failure to run. */
char *tu_run(const char *cmd, int *status);

/* Is this process running under a sanitizer build? Some timing-sensitive
 * expectations are relaxed then. */
bool tu_sanitized(void);

/* Block SIGCHLD in the calling thread (call it first in main, so that every
 * thread inherits it), as padrone.h asks of every client of the library. */
void tu_block_sigchld(void);

/* Run a suite, printing TAP on stdout (one line per test case) for
 * automake's tap-driver. Returns the exit status for main. */
int tu_main(Suite *s);

#endif
