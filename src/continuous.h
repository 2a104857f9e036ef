/* continuous.h: padroned's continuous profiling and following a service by
 * name (private to src/).
 *
 * Continuous profiling keeps a sampler of its own running on the process
 * beside the session padroned serves commands with: every period it stops
 * it, starts the next one at once (the gap is the time to open the events),
 * and writes what the last one sampled as a pprof file into a directory,
 * renamed into place when complete, keeping only the newest files. A fleet
 * collects those with the tools it has; there is no aggregator of ours.
 */
#ifndef PADRONE_SRC_CONTINUOUS_H
#define PADRONE_SRC_CONTINUOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "src/padrone.h"

#define PADRONE_CONTINUOUS_KEEP 100	/* files kept by default */

struct padrone_continuous_opts {
	double every_s;		/* the period, >= 1 s */
	const char *dir;	/* where the files go (created if missing) */
	unsigned keep;		/* newest files kept; 0: PADRONE_CONTINUOUS_KEEP */
	unsigned hz;		/* 0: 999 */
	enum padrone_backend backend;
	bool force;
};

struct padrone_continuous;

/* Start sampling the process s is attached to. 0 or -errno with err. */
int padrone_continuous_start(struct padrone_session *s, const struct padrone_continuous_opts *o,
			     struct padrone_continuous **out, char *err, size_t errlen);
/* Readable when a period has ended: then call padrone_continuous_rotate. */
int padrone_continuous_fd(const struct padrone_continuous *c);
/* End the period: the next one starts, the last one's file is written (its
 * path in written, "" if it had no sample). 0 or -errno with err; sampling
 * goes on either way. */
int padrone_continuous_rotate(struct padrone_continuous *c, char *written, size_t wlen,
			      char *err, size_t errlen);
/* Stop sampling; with write_last, the period under way is written too if
 * it lasted a second or more. */
void padrone_continuous_stop(struct padrone_continuous *c, bool write_last);

/* The process a service name means: the oldest one whose name (comm),
 * argv[0] or executable's base name is name, that this user may trace,
 * other than padroned itself. 0 and *pid, or -ESRCH. */
int padrone_pidof(const char *name, pid_t *pid);

#endif
