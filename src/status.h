/* status.h: why a command failed, as the user sees it (private to src/).
 *
 * The library rooms say why an operation failed in their own terms (a
 * negative errno, attach/'s enum attach_why, codecache/'s cc_error); the
 * session turns those into enum padrone_why (padrone.h); src/status.c maps
 * each padrone_why to its exit status and its name, in one table. The
 * statuses are padrone(1)'s and padroned(8)'s EXIT STATUS sections.
 */
#ifndef PADRONE_SRC_STATUS_H
#define PADRONE_SRC_STATUS_H

#include "attach/attach.h"
#include "src/padrone.h"

/* The statuses that are no padrone_why's (those are 3 to 12; 1 and 2 are
 * also PADRONE_NOT_ATTACHED's and PADRONE_BAD_REQUEST's). */
enum {
	PADRONE_EXIT_OK = 0,
	PADRONE_EXIT_FAILURE = 1,	/* a command failed (its message says why) */
	PADRONE_EXIT_USAGE = 2,		/* bad command line: unknown command, bad arguments */
	PADRONE_EXIT_PROTOCOL = 20,	/* padroned could not be talked to, or refused us */
	PADRONE_EXIT_SERVED = 21,	/* padroned: another padroned already serves the process */
};

/* attach/'s reason as the session's (ATTACH_X is PADRONE_X). */
__attribute__((visibility("hidden"))) enum padrone_why padrone_why_from_attach(enum attach_why a);

#endif
