/* Letting instrumented functions run for a while (instrument --for,
 * padroned --instrument): a wait that padrone_session__interrupt (^C, a
 * cancel, SIGTERM) or the process's end cuts short, telling a progress
 * callback the units recovered so far. Kept apart from src/instr.c: it uses
 * only the instrumentation's public calls. */
#include "src/session.h"
#include "util/util.h"

#include <errno.h>
#include <string.h>
#include <time.h>

/* How often the progress callback is told (each time, the units are
 * counted from a report). */
#define WAIT_SLICE_MS 250

static double seconds_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* The units the consumers have recovered so far, all threads. */
static uint64_t units_so_far(struct padrone_session *s)
{
	struct padrone_ireport *r;
	uint64_t units = 0;

	if (padrone_session__instr_report(s, &r) < 0)
		return 0;
	for (size_t i = 0; i < r->nthreads; i++)
		units += r->threads[i].units;
	padrone_ireport__free(r);
	return units;
}

int padrone_session__instr_wait(struct padrone_session *s, const struct padrone_instr_wait_opts *opts)
{
	struct padrone_instr_wait_opts o = { .sz = sizeof o };
	struct timespec t0;
	bool cut = false;
	int rc;

	if (!UTIL_OPTS_COPY(&o, opts))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, UTIL_OPTS_UNKNOWN);
	if (!padrone_session_target(s))
		return padrone_session_fail(s, PADRONE_NOT_ATTACHED, -ENOENT,
					    "not attached to a process");
	if (!(o.seconds > 0))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "the time to run "
					    "instrumented must be a positive number of seconds");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	padrone_session_wait_begin(s);
	for (double elapsed = 0; elapsed < o.seconds && !cut; elapsed = seconds_since(&t0)) {
		if (o.progress) {	/* the time once the units are counted: a report
					 * may wait for the consumers */
			uint64_t units = units_so_far(s);
			o.progress(o.progress_arg, seconds_since(&t0), o.seconds, units);
		}
		double left_ms = (o.seconds - elapsed) * 1000;
		cut = padrone_session_wait_interrupted(s, left_ms < WAIT_SLICE_MS ?
						       (int)left_ms + 1 : WAIT_SLICE_MS);
	}
	padrone_session_wait_end(s);
	if ((rc = padrone_session_fail_if_gone(s)) < 0)
		return rc;
	return cut ? 1 : 0;
}
