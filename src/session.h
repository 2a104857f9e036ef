/* session.h: what src/'s other files may see of a session (private). */
#ifndef PADRONE_SRC_SESSION_H
#define PADRONE_SRC_SESSION_H

#include "src/padrone.h"
#include "src/report.h"	/* PADRONE_HIDDEN */

struct attach_target;

/* The seized process, or NULL with the session's error set (not attached,
 * exited, exec'd). */
PADRONE_HIDDEN struct attach_target *padrone__session_target(struct padrone_session *s);
/* The one failure path: set the session's reason and message, return err. */
PADRONE_HIDDEN int padrone__session_fail(struct padrone_session *s, enum padrone_why why,
					 int err, const char *msg);
/* Clear the last failure. */
PADRONE_HIDDEN void padrone__session_ok(struct padrone_session *s);

#endif
