/* attach/why.c: why an operation on a target failed, and the per-thread
 * error message of a target. */
#include "attach/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

