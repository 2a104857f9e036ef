/* status.c: the one table of failures: each padrone_why's exit status and
 * name (status.h). */
#include "src/status.h"

/* Exit statuses of padrone's programs, one per reason, documented in
 * padrone(1) and padroned(8):
 *
 *   0  ok
 *   1  not-attached    a command failed: here, it needs a process
 *   2  bad-request     a usage error, or a request that cannot be done as
 *                      asked (no such function, already replaced...)
 *   3  no-process      no such PID
 *   4  zombie          the process exited and is not reaped yet
 *   5  kernel-thread   a kernel thread has no user space
 *   6  not-x86-64      a 32-bit (i386) or x32 program
 *   7  permission      uid, CAP_SYS_PTRACE, dumpable, yama, capabilities,
 *                      a security module or a user namespace said no
 *   8  already-traced  another tracer (named) holds the process
 *   9  target-exited   the process exited during the operation
 *  10  target-execed   the process called exec during the operation
 *  11  timeout         a thread did not stop in time
 *  12  system          anything else (the message says what)
 * and 20, 21 of status.h, which are no reasons of a session's.
 */
static const struct {
	int status;
	const char *name;
} whys[] = {
	[PADRONE_OK] = { PADRONE_EXIT_OK, "ok" },
	[PADRONE_NOT_ATTACHED] = { PADRONE_EXIT_FAILURE, "not-attached" },
	[PADRONE_BAD_REQUEST] = { PADRONE_EXIT_USAGE, "bad-request" },
	[PADRONE_NO_PROCESS] = { 3, "no-process" },
	[PADRONE_ZOMBIE] = { 4, "zombie" },
	[PADRONE_KERNEL_THREAD] = { 5, "kernel-thread" },
	[PADRONE_NOT_X86_64] = { 6, "not-x86-64" },
	[PADRONE_PERMISSION] = { 7, "permission" },
	[PADRONE_ALREADY_TRACED] = { 8, "already-traced" },
	[PADRONE_TARGET_EXITED] = { 9, "target-exited" },
	[PADRONE_TARGET_EXECED] = { 10, "target-execed" },
	[PADRONE_TIMEOUT] = { 11, "timeout" },
	[PADRONE_SYSTEM] = { 12, "system" },
};

int padrone_why_exit_status(enum padrone_why why)
{
	if ((unsigned)why >= sizeof whys / sizeof whys[0])
		return whys[PADRONE_SYSTEM].status;
	return whys[why].status;
}

const char *padrone_why_name(enum padrone_why why)
{
	if ((unsigned)why >= sizeof whys / sizeof whys[0])
		return "unknown";
	return whys[why].name;
}

enum padrone_why padrone_why_from_attach(enum attach_why a)
{
	switch (a) {
	case ATTACH_OK: return PADRONE_OK;
	case ATTACH_NO_PROCESS: return PADRONE_NO_PROCESS;
	case ATTACH_ZOMBIE: return PADRONE_ZOMBIE;
	case ATTACH_KERNEL_THREAD: return PADRONE_KERNEL_THREAD;
	case ATTACH_NOT_X86_64: return PADRONE_NOT_X86_64;
	case ATTACH_PERMISSION: return PADRONE_PERMISSION;
	case ATTACH_ALREADY_TRACED: return PADRONE_ALREADY_TRACED;
	case ATTACH_TARGET_EXITED: return PADRONE_TARGET_EXITED;
	case ATTACH_TARGET_EXECED: return PADRONE_TARGET_EXECED;
	case ATTACH_TIMEOUT: return PADRONE_TIMEOUT;
	case ATTACH_SYSTEM: return PADRONE_SYSTEM;
	}
	return PADRONE_SYSTEM;
}
