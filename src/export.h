/* export.h: a profile in the formats other tools read (private to
 * libpadrone; padrone.h has the session's padrone_session__write_profile).
 *
 * The writers take a prof_hot -- the ranking with its symbolized chains --
 * rather than a session, so padroned's continuous profiling, which keeps
 * its own sampler running beside the session, writes the same files.
 */
#ifndef PADRONE_SRC_EXPORT_H
#define PADRONE_SRC_EXPORT_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "src/report.h"

struct prof_hot;

/* What a profile file says besides its samples. */
struct padrone_export_meta {
	pid_t pid;		/* whose maps name the mappings (if it still runs) */
	unsigned hz;		/* the sampling rate: a sample is 1/hz s of CPU */
	uint64_t start_ns;	/* CLOCK_REALTIME when sampling began */
	uint64_t duration_ns;
	const char *comment;	/* one line kept in the file, or NULL */
};

/* gzipped profile.proto (pprof's format) with sample types samples/count
 * and cpu/nanoseconds; h NULL writes a profile without samples. 0 or
 * -errno with err. */
PADRONE_HIDDEN int padrone_export_pprof(const struct prof_hot *h,
					const struct padrone_export_meta *m, FILE *out,
					char *err, size_t errlen);
/* Folded stacks: "root;...;leaf COUNT" per distinct stack of functions,
 * sorted. 0 or -errno with err. */
PADRONE_HIDDEN int padrone_export_folded(const struct prof_hot *h, FILE *out, char *err,
					 size_t errlen);

/* The session's last profile in fmt on f (padrone_session__write_profile
 * for a stream: padroned's replies are memory streams). 0 or -errno with
 * the reason in the session. */
struct padrone_session;
PADRONE_HIDDEN int padrone_session_export(struct padrone_session *s, enum padrone_format fmt,
					  FILE *f);

/* Write path through a temporary file beside it, renamed into place once
 * write(f, arg) returned 0 and the data is flushed: a reader sees the old
 * file or the whole new one. 0 or -errno with err. */
PADRONE_HIDDEN int padrone_export_atomic(const char *path,
					 int (*write)(FILE *f, void *arg, char *err,
						      size_t errlen),
					 void *arg, char *err, size_t errlen);

#endif
