/* continuous.c: one pprof file per period while padroned serves, and the
 * process a service's name means. */
#include "src/continuous.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "profile/profile.h"
#include "src/export.h"
#include "src/session.h"

/* Files are padrone-COMM-PID-TIME.pb.gz: a fleet's tools see the service,
 * the process and when, and the directory lists in time order per process. */
#define FILE_PREFIX "padrone-"
#define FILE_SUFFIX ".pb.gz"

struct padrone_continuous {
	struct padrone_session *s;
	struct padrone_continuous_opts o;
	pid_t pid;
	char comm[32];
	int timer_fd;
	struct prof_sampler *smp;	/* the period under way */
	uint64_t started_ns;		/* CLOCK_REALTIME */
};

static uint64_t now_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The process's name, made safe for a file name. */
static void read_comm(pid_t pid, char *comm, size_t size)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	snprintf(comm, size, "process");
	if (!(f = fopen(path, "re")))
		return;
	if (fgets(comm, (int)size, f))
		comm[strcspn(comm, "\n")] = '\0';
	fclose(f);
	for (char *c = comm; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_' && *c != '.')
			*c = '_';
}

static int open_sampler(struct padrone_continuous *c, struct prof_sampler **out, char *err,
			size_t errlen)
{
	struct prof_opts po = {
		.sz = sizeof(po),
		.freq_hz = c->o.hz,
		.backend = c->o.backend == PADRONE_BACKEND_BPF ? PROF_BACKEND_BPF : PROF_BACKEND_RING,
		.force = c->o.force,
	};
	struct prof_error pe = { 0 };
	int r = prof_sampler__open(c->pid, &po, out, &pe);

	if (r < 0) {
		snprintf(err, errlen, "%s", pe.msg);
		return r;
	}
	if ((r = prof_sampler__start(*out)) < 0) {
		snprintf(err, errlen, "%s", prof_sampler__errmsg(*out));
		prof_sampler__free(*out);
		*out = NULL;
	}
	return r;
}

static int make_dir(const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s is not a directory", dir);
		return -ENOTDIR;
	}
	if (access(dir, W_OK) < 0) {
		snprintf(err, errlen, "cannot write in %s: %s", dir, strerror(errno));
		return -errno;
	}
	return 0;
}

int padrone_continuous_start(struct padrone_session *s, const struct padrone_continuous_opts *o,
			     struct padrone_continuous **out, char *err, size_t errlen)
{
	struct padrone_continuous *c = calloc(1, sizeof(*c));
	int r;

	*out = NULL;
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->s = s;
	c->o = *o;
	if (!c->o.keep)
		c->o.keep = PADRONE_CONTINUOUS_KEEP;
	c->pid = padrone_session__pid(s);
	read_comm(c->pid, c->comm, sizeof(c->comm));
	c->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (c->timer_fd < 0) {
		r = -errno;
		snprintf(err, errlen, "timerfd: %s", strerror(-r));
		free(c);
		return r;
	}
	if ((r = make_dir(o->dir, err, errlen)) < 0 || (r = open_sampler(c, &c->smp, err, errlen)) < 0) {
		close(c->timer_fd);
		free(c);
		return r;
	}
	c->started_ns = now_ns(CLOCK_REALTIME);
	struct itimerspec its = { 0 };
	uint64_t period_ns = (uint64_t)(o->every_s * 1e9);
	its.it_value.tv_sec = its.it_interval.tv_sec = (time_t)(period_ns / 1000000000ull);
	its.it_value.tv_nsec = its.it_interval.tv_nsec = (long)(period_ns % 1000000000ull);
	timerfd_settime(c->timer_fd, 0, &its, NULL);
	*out = c;
	return 0;
}

int padrone_continuous_fd(const struct padrone_continuous *c)
{
	return c->timer_fd;
}

/* --------------------------------------------------------------- files */

struct old_file {
	char *name;
	struct timespec mtime;
};

static int older_first(const void *a, const void *b)
{
	const struct old_file *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

static bool ours(const char *name)
{
	size_t len = strlen(name), pl = strlen(FILE_PREFIX), sl = strlen(FILE_SUFFIX);

	return len > pl + sl && strncmp(name, FILE_PREFIX, pl) == 0 &&
	       strcmp(name + len - sl, FILE_SUFFIX) == 0;
}

/* Keep the newest `keep` of our files in dir (other files are left alone). */
static void prune(const char *dir, unsigned keep)
{
	DIR *d = opendir(dir);
	struct old_file *files = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		struct stat st;
		if (!ours(e->d_name) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct old_file *p = realloc(files, nc * sizeof(*p));
			if (!p)
				break;
			files = p;
			cap = nc;
		}
		if (!(files[n].name = strdup(e->d_name)))
			break;
		files[n++].mtime = st.st_mtim;
	}
	if (n > keep) {
		qsort(files, n, sizeof(*files), older_first);
		for (size_t i = 0; i < n - keep; i++)
			unlinkat(dirfd(d), files[i].name, 0);
	}
	for (size_t i = 0; i < n; i++)
		free(files[i].name);
	free(files);
	closedir(d);
}

struct period {
	const struct prof_hot *hot;
	const struct padrone_export_meta *meta;
};

static int write_period(FILE *f, void *arg, char *err, size_t errlen)
{
	struct period *p = arg;
	return padrone_export_pprof(p->hot, p->meta, f, err, errlen);
}

/* Write what smp sampled since started_ns; "" in path if nothing. */
static int write_file(struct padrone_continuous *c, struct prof_sampler *smp, uint64_t started_ns,
		      char *path, size_t plen, char *err, size_t errlen)
{
	struct prof_symbolizer *sym;
	struct prof_hot *hot = NULL;
	struct prof_error pe = { 0 };
	struct prof_totals t;
	int r;

	*path = '\0';
	prof_sampler__totals(smp, &t);
	if (!prof_sampler__stack_count(smp))
		return 0;
	if ((r = padrone_session_symbolizer(c->s, &sym)) < 0) {
		snprintf(err, errlen, "%s", padrone_session__errmsg(c->s));
		return r;
	}
	if ((r = prof_hot__build(smp, sym, &hot, &pe)) < 0) {
		snprintf(err, errlen, "%s", pe.msg);
		return r;
	}
	char stamp[32], comment[160];
	time_t secs = (time_t)(started_ns / 1000000000ull);
	struct tm tm;
	gmtime_r(&secs, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	snprintf(path, plen, "%s/" FILE_PREFIX "%s-%d-%s.%03uZ" FILE_SUFFIX, c->o.dir, c->comm,
		 (int)c->pid, stamp, (unsigned)(started_ns / 1000000ull % 1000));
	snprintf(comment, sizeof(comment), "padrone %s: process %d (%s), %s at %u Hz, backend %s",
		 padrone_version(), (int)c->pid, c->comm, t.event, t.freq_hz,
		 prof_backend_name(t.backend));
	struct padrone_export_meta meta = {
		.pid = c->pid,
		.hz = t.freq_hz,
		.start_ns = started_ns,
		.duration_ns = t.duration_ns,
		.comment = comment,
	};
	struct period p = { hot, &meta };
	r = padrone_export_atomic(path, write_period, &p, err, errlen);
	prof_hot__free(hot);
	if (r < 0)
		*path = '\0';
	else
		prune(c->o.dir, c->o.keep);
	return r;
}

int padrone_continuous_rotate(struct padrone_continuous *c, char *written, size_t wlen,
			      char *err, size_t errlen)
{
	uint64_t ticks;
	struct prof_sampler *done = c->smp, *next = NULL;
	uint64_t started = c->started_ns;

	*written = '\0';
	if (read(c->timer_fd, &ticks, sizeof(ticks)) < 0 && errno == EAGAIN)
		return 0;	/* not yet */
	prof_sampler__stop(done);
	/* the next period first: the gap is opening its events */
	int r = open_sampler(c, &next, err, errlen);
	c->smp = next;
	c->started_ns = now_ns(CLOCK_REALTIME);
	if (r < 0) {
		prof_sampler__free(done);
		return r;
	}
	r = write_file(c, done, started, written, wlen, err, errlen);
	prof_sampler__free(done);
	return r;
}

void padrone_continuous_stop(struct padrone_continuous *c, bool write_last)
{
	char path[4096], err[256];

	if (!c)
		return;
	if (c->smp) {
		prof_sampler__stop(c->smp);
		if (write_last && now_ns(CLOCK_REALTIME) - c->started_ns >= 1000000000ull)
			write_file(c, c->smp, c->started_ns, path, sizeof(path), err, sizeof(err));
		prof_sampler__free(c->smp);
	}
	close(c->timer_fd);
	free(c);
}

/* ------------------------------------------------------------- pidof */

/* Does process pid go by name (its comm, argv[0] or executable's base
 * name)? Its start time (clock ticks since boot) in *start. */
static bool named(pid_t pid, const char *name, unsigned long long *start)
{
	char path[64], buf[4096];
	FILE *f;
	bool match = false;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
	char state;
	if (!open_paren || !close_paren ||
	    sscanf(close_paren + 2, "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
				    "%*s %*s %*s %*s %*s %llu", &state, start) != 2 ||
	    state == 'Z' || state == 'X')
		return false;
	/* comm is cut to 15 characters */
	size_t clen = (size_t)(close_paren - open_paren - 1);
	if (clen == strlen(name) || (clen == 15 && strlen(name) > 15))
		match = strncmp(open_paren + 1, name, clen) == 0;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if (!match && (f = fopen(path, "re"))) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';	/* argv[0] ends at its NUL */
		const char *base = strrchr(buf, '/');
		match = n && strcmp(base ? base + 1 : buf, name) == 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	ssize_t len = match ? 0 : readlink(path, buf, sizeof(buf) - 1);
	if (len > 0) {
		buf[len] = '\0';
		const char *base = strrchr(buf, '/');
		match = strcmp(base ? base + 1 : buf, name) == 0;
	}
	return match;
}

int padrone_pidof(const char *name, pid_t *pid)
{
	DIR *d = opendir("/proc");
	unsigned long long best_start = ~0ull;
	struct dirent *e;

	*pid = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char *end;
		long p = strtol(e->d_name, &end, 10);
		unsigned long long start;
		struct stat st;
		char path[64];
		if (*end || p <= 0 || p == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%ld", p);
		/* another user's process is not ours to trace */
		if (stat(path, &st) < 0 || (geteuid() != 0 && st.st_uid != geteuid()))
			continue;
		if (named((pid_t)p, name, &start) && start < best_start) {
			best_start = start;
			*pid = (pid_t)p;
		}
	}
	closedir(d);
	return *pid ? 0 : -ESRCH;
}
