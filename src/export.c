/* export.c: the session's last profile written in a format other tools
 * read, to a descriptor or to a file renamed into place. */
#include "src/export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/session.h"

static const char *const format_names[] = {
	[PADRONE_FORMAT_PPROF] = "pprof",
	[PADRONE_FORMAT_FOLDED] = "folded",
	[PADRONE_FORMAT_JSON] = "json",
};

int padrone_format_parse(const char *name, enum padrone_format *out)
{
	for (size_t i = 0; i < sizeof(format_names) / sizeof(format_names[0]); i++) {
		if (name && strcmp(name, format_names[i]) == 0) {
			*out = (enum padrone_format)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *padrone_format_name(enum padrone_format fmt)
{
	return (unsigned)fmt < sizeof(format_names) / sizeof(format_names[0]) ?
		       format_names[fmt] : "unknown";
}

int padrone_export_atomic(const char *path, int (*write)(FILE *f, void *arg, char *err,
							 size_t errlen),
			  void *arg, char *err, size_t errlen)
{
	char *tmp = NULL;

	if (asprintf(&tmp, "%s.tmp-%d", path, (int)getpid()) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = -errno;
		snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(-e));
		free(tmp);
		return e;
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int e = -errno;
		close(fd);
		unlink(tmp);
		free(tmp);
		snprintf(err, errlen, "%s", strerror(-e));
		return e;
	}
	int r = write(f, arg, err, errlen);
	if (fflush(f) != 0 && r == 0) {
		r = -errno;
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(-r));
	}
	if (r == 0 && fsync(fileno(f)) < 0 && errno != EINVAL) {
		r = -errno;
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(-r));
	}
	if (fclose(f) != 0 && r == 0) {
		r = -errno;
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(-r));
	}
	if (r == 0 && rename(tmp, path) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(-r));
	}
	if (r < 0)
		unlink(tmp);
	free(tmp);
	return r;
}

/* ------------------------------------------------------------- sessions */

struct session_export {
	struct padrone_session *s;
	enum padrone_format fmt;
};

static int write_session(FILE *f, void *arg, char *err, size_t errlen)
{
	struct session_export *x = arg;
	const struct padrone_report *rep = padrone_session__report(x->s);
	const struct prof_hot *h = padrone_session_hot(x->s);

	if (x->fmt == PADRONE_FORMAT_JSON) {
		char *json = padrone_report__json(rep, 0);
		if (!json) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		int r = fprintf(f, "%s\n", json) < 0 ? -EIO : 0;
		free(json);
		if (r < 0)
			snprintf(err, errlen, "writing the report: %s", strerror(EIO));
		return r;
	}
	if (x->fmt == PADRONE_FORMAT_FOLDED)	/* h NULL: not one sample */
		return h ? padrone_export_folded(h, f, err, errlen) : 0;
	char comment[160];
	snprintf(comment, sizeof(comment), "padrone %s: process %d, %s at %u Hz, backend %s",
		 padrone_version(), (int)padrone_report__pid(rep), padrone_report__event(rep),
		 padrone_report__frequency_hz(rep), padrone_report__backend(rep));
	struct padrone_export_meta m = {
		.pid = padrone_report__pid(rep),
		.hz = padrone_report__frequency_hz(rep),
		.start_ns = padrone_report__start_ns(rep),
		.duration_ns = (uint64_t)(padrone_report__duration_s(rep) * 1e9),
		.comment = comment,
	};
	return padrone_export_pprof(h, &m, f, err, errlen);
}

/* Is there a profile to write, in a known format? */
static int check_export(struct padrone_session *s, enum padrone_format fmt)
{
	if ((unsigned)fmt > PADRONE_FORMAT_JSON)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL,
					    "unknown profile format %d", (int)fmt);
	if (!padrone_session__report(s))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOENT,
					    "no profile to write: run a profile first");
	return 0;
}

int padrone_session_export(struct padrone_session *s, enum padrone_format fmt, FILE *f)
{
	struct session_export x = { .s = s, .fmt = fmt };
	char err[256] = "";
	int r = check_export(s, fmt);

	if (r < 0)
		return r;
	r = write_session(f, &x, err, sizeof(err));
	if (r == 0 && fflush(f) != 0) {
		r = -errno;
		snprintf(err, sizeof(err), "cannot write the profile: %s", strerror(-r));
	}
	return r < 0 ? padrone_session_fail(s, PADRONE_SYSTEM, r, "%s", err) : 0;
}

int padrone_session__write_profile(struct padrone_session *s, enum padrone_format fmt, int fd)
{
	int dup_fd = dup(fd);
	FILE *f = dup_fd >= 0 ? fdopen(dup_fd, "w") : NULL;

	if (!f) {
		int e = -errno;
		if (dup_fd >= 0)
			close(dup_fd);
		return padrone_session_fail(s, PADRONE_SYSTEM, e, "cannot write the profile: %s",
					    strerror(-e));
	}
	int r = padrone_session_export(s, fmt, f);
	if (fclose(f) != 0 && r == 0) {
		r = -errno;
		padrone_session_fail(s, PADRONE_SYSTEM, r, "cannot write the profile: %s",
				     strerror(-r));
	}
	return r;
}

int padrone_session__save_profile(struct padrone_session *s, enum padrone_format fmt,
				  const char *path)
{
	struct session_export x = { .s = s, .fmt = fmt };
	char err[512] = "";
	int r = check_export(s, fmt);

	if (r < 0)
		return r;
	r = padrone_export_atomic(path, write_session, &x, err, sizeof(err));
	return r < 0 ? padrone_session_fail(s, PADRONE_SYSTEM, r, "%s", err) : 0;
}
