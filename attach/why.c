/* attach/why.c: reasons, their names and exit statuses, and the per-thread
 * error message of a target. */
#include "attach/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Exit statuses of padrone's programs, one per reason, documented in
 * padrone(1) and padroned(8):
 *
 *   0  ok
 *   1  (other failures of the program itself; not an attach reason)
 *   2  (usage errors; not an attach reason)
 *   3  no-process      no such PID
 *   4  zombie          the process exited and is not reaped yet
 *   5  kernel-thread   a kernel thread has no user space
 *   6  not-x86-64      a 32-bit (i386) or x32 program
 *   7  permission      uid, CAP_SYS_PTRACE, dumpable, yama, capabilities,
 *                     a security module or a user namespace said no
 *   8  already-traced  another tracer (named) holds the process
 *   9  target-exited   the process exited during the operation
 *  10  target-execed   the process called exec during the operation
 *  11  timeout         a thread did not stop in time
 *  12  system          anything else (the message says what)
 */
static const struct {
	int status;
	const char *name;
} why_table[] = {
	[ATTACH_OK] = { 0, "ok" },
	[ATTACH_NO_PROCESS] = { 3, "no-process" },
	[ATTACH_ZOMBIE] = { 4, "zombie" },
	[ATTACH_KERNEL_THREAD] = { 5, "kernel-thread" },
	[ATTACH_NOT_X86_64] = { 6, "not-x86-64" },
	[ATTACH_PERMISSION] = { 7, "permission" },
	[ATTACH_ALREADY_TRACED] = { 8, "already-traced" },
	[ATTACH_TARGET_EXITED] = { 9, "target-exited" },
	[ATTACH_TARGET_EXECED] = { 10, "target-execed" },
	[ATTACH_TIMEOUT] = { 11, "timeout" },
	[ATTACH_SYSTEM] = { 12, "system" },
};

int attach_why_exit_status(enum attach_why why)
{
	if ((unsigned)why >= sizeof why_table / sizeof why_table[0])
		return why_table[ATTACH_SYSTEM].status;
	return why_table[why].status;
}

const char *attach_why_name(enum attach_why why)
{
	if ((unsigned)why >= sizeof why_table / sizeof why_table[0])
		return "unknown";
	return why_table[why].name;
}

/* One message per (thread, target): the last operation's failure. */
static __thread struct {
	const struct attach_target *t;
	int err;
	char msg[ATTACH_MSG_MAX];
} tls_msg;

int attach__fail(const struct attach_target *t, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tls_msg.msg, sizeof tls_msg.msg, fmt, ap);
	va_end(ap);
	tls_msg.t = t;
	tls_msg.err = err;
	return err;
}

void attach__clear_msg(const struct attach_target *t)
{
	tls_msg.t = t;
	tls_msg.err = 0;
	tls_msg.msg[0] = '\0';
}

enum attach_why attach_target__why(const struct attach_target *t)
{
	if (tls_msg.t != t || tls_msg.err >= 0)
		return ATTACH_OK;
	switch (attach_target__state(t)) {
	case ATTACH_TARGET_EXITED:
		return ATTACH_TARGET_EXITED;
	case ATTACH_TARGET_EXECED:
		return ATTACH_TARGET_EXECED;
	default:
		return tls_msg.err == -ETIMEDOUT ? ATTACH_TIMEOUT : ATTACH_SYSTEM;
	}
}

const char *attach__msg(const struct attach_target *t)
{
	return tls_msg.t == t ? tls_msg.msg : "";
}

const char *attach_target__errmsg(const struct attach_target *t)
{
	return attach__msg(t);
}

int attach__seterr(struct attach_error *e, int err, enum attach_why why, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return err;
	e->err = err;
	e->why = why;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return err;
}

uint64_t attach__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
