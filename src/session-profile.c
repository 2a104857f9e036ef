/* session-profile.c: the session's profiles: sampling the attached process
 * (profile/), waiting interruptibly, and the report that replaces the last
 * one. */
#include "src/padrone.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "attach/attach.h"
#include "elf/elf.h"
#include "profile/profile.h"
#include "src/report.h"
#include "src/session.h"
#include "src/status.h"
#include "src/session-state.h"

#define DEFAULT_SECONDS 2.0

/* ---------------------------------------------------------------- profile */

/* How often a profile tells its progress callback. */
#define PROGRESS_INTERVAL_S 0.25

static void read_cpu_time(pid_t pid, uint64_t *user_ns, uint64_t *system_ns);

/* The process's CPU time now, kept as the profile's end unless it is gone
 * (the kernel's accounting goes with it: the last reading stands). */
static void note_cpu_time(pid_t pid, uint64_t *user_ns, uint64_t *system_ns)
{
	uint64_t u, sys;

	read_cpu_time(pid, &u, &sys);
	if (u >= *user_ns && sys >= *system_ns && (u || sys)) {
		*user_ns = u;
		*system_ns = sys;
	}
}

/* Sleep for the profile's length, or less when interrupted or the target
 * goes away; tell o's progress callback how far it is on the way, and keep
 * the process's CPU time in *user_ns and *system_ns as it goes. */
static void wait_profile(struct padrone_session *s, const struct prof_sampler *smp,
			 const struct padrone_profile_opts *o, double seconds, uint64_t *user_ns,
			 uint64_t *system_ns)
{
	struct timespec t0, now;
	pid_t pid = attach_target__pid(s->t);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		note_cpu_time(pid, user_ns, system_ns);
		clock_gettime(CLOCK_MONOTONIC, &now);
		double elapsed = (double)(now.tv_sec - t0.tv_sec) +
				 (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		double left = seconds - elapsed;
		if (left <= 0)
			return;
		if (o->progress) {
			struct prof_totals t;
			prof_sampler__totals(smp, &t);
			o->progress(o->progress_arg, elapsed, seconds, t.samples);
		}
		if (left > PROGRESS_INTERVAL_S)
			left = PROGRESS_INTERVAL_S;
		struct pollfd pfd[2] = {
			{ .fd = s->interrupt_fd, .events = POLLIN },
			{ .fd = s->event_fd, .events = POLLIN },
		};
		int r = poll(pfd, 2, (int)(left * 1000) + 1);
		if (r > 0)
			return;
		if (r < 0 && errno != EINTR)
			return;
	}
}

/* The process's CPU time so far (all its threads, living and dead), from
 * the kernel's accounting in /proc/PID/stat; 0 when unreadable. */
static void read_cpu_time(pid_t pid, uint64_t *user_ns, uint64_t *system_ns)
{
	char path[64];
	struct padrone_thread th = { 0 };

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	*user_ns = *system_ns = 0;
	if (session__read_stat_file(path, &th) == 0) {
		*user_ns = th.user_ms * 1000000ull;
		*system_ns = th.system_ms * 1000000ull;
	}
}

/* What a profile measured besides its samples: when it began, the process's
 * CPU time meanwhile (the kernel's accounting: user and system), whether
 * kernel code was sampled. */
struct profile_facts {
	uint64_t start_ns;	/* CLOCK_REALTIME */
	uint64_t user0, system0, user1, system1;
	bool user_only;
};

/* The report of a profile: hot's ranking (taken; NULL: no samples), or
 * the sampler's totals t. */
static int build_report(struct padrone_session *s, const struct prof_totals *t,
			struct prof_hot *hot, const struct profile_facts *pf)
{
	struct padrone_report *r = padrone_report_new(attach_target__pid(s->t), t, hot);

	if (!r)
		return session__fail(s, PADRONE_SYSTEM, -ENOMEM, "out of memory");
	padrone_report_set_kernel(r, pf->user_only, pf->user1 - pf->user0,
				  pf->system1 - pf->system0);
	padrone_report_set_start(r, pf->start_ns);
	padrone_report_free(s->report);
	s->report = r;
	return 0;
}

/* Drop an interrupt that came while nobody was profiling. */
static void drain(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof(v)) > 0)
		;
}

/* From here to profile_end an interrupt ends the profile: also one that
 * comes while the sampler is being set up (loading the BPF program takes a
 * while), which the wait then sees at once. Older ones are dropped. */
static void profile_begin(struct padrone_session *s)
{
	drain(s->interrupt_fd);
	atomic_store(&s->profiling, true);
	if (atomic_load(&s->leaving))
		session__wake_profile(s);
}

static void profile_end(struct padrone_session *s)
{
	atomic_store(&s->profiling, false);
	drain(s->interrupt_fd);
}

void padrone_session_set_wait_hook(struct padrone_session *s, padrone_wait_hook_fn fn, void *arg)
{
	s->wait_hook = fn;
	s->wait_hook_arg = arg;
}

static void call_wait_hook(struct padrone_session *s, bool begin)
{
	if (s->wait_hook)
		s->wait_hook(s, begin, s->wait_hook_arg);
}

/* Other commands' waits share the profile's interrupt (measure's). */
void padrone_session_wait_begin(struct padrone_session *s)
{
	profile_begin(s);
	call_wait_hook(s, true);
}

void padrone_session_wait_end(struct padrone_session *s)
{
	call_wait_hook(s, false);
	profile_end(s);
}

bool padrone_session_wait_interrupted(struct padrone_session *s, int ms)
{
	struct pollfd pfd[2] = {
		{ .fd = s->interrupt_fd, .events = POLLIN },
		{ .fd = s->event_fd, .events = POLLIN },
	};
	int r = poll(pfd, s->event_fd >= 0 ? 2 : 1, ms);

	return r > 0;
}

static int run_sampler(struct padrone_session *s, struct prof_sampler *smp,
		       const struct padrone_profile_opts *o, struct profile_facts *pf)
{
	pid_t pid = attach_target__pid(s->t);
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	pf->start_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	read_cpu_time(pid, &pf->user0, &pf->system0);
	int r = prof_sampler__start(smp);

	if (r < 0)
		return session__fail(s, PADRONE_SYSTEM, r, "%s", prof_sampler__errmsg(smp));
	call_wait_hook(s, true);
	pf->user1 = pf->user0;
	pf->system1 = pf->system0;
	wait_profile(s, smp, o, o->seconds > 0 ? o->seconds : DEFAULT_SECONDS, &pf->user1,
		     &pf->system1);
	call_wait_hook(s, false);
	note_cpu_time(pid, &pf->user1, &pf->system1);
	r = prof_sampler__stop(smp);
	return r < 0 ? session__fail(s, PADRONE_SYSTEM, r, "%s", prof_sampler__errmsg(smp)) : 0;
}

int padrone_session__profile(struct padrone_session *s, const struct padrone_profile_opts *opts)
{
	struct padrone_profile_opts o = { .sz = sizeof(o) };
	struct prof_sampler *smp = NULL;
	struct prof_hot *hot = NULL;
	struct profile_facts pf = { 0 };
	struct prof_error err = { 0 };
	int r;

	if (!UTIL_OPTS_COPY(&o, opts))
		return session__fail(s, PADRONE_BAD_REQUEST, -EINVAL, UTIL_OPTS_UNKNOWN);
	if ((r = session__need_target(s)) < 0)
		return r;
	if (o.seconds < 0 || o.seconds != o.seconds)
		return session__fail(s, PADRONE_BAD_REQUEST, -EINVAL, "a profile cannot last %g seconds",
			    o.seconds);
	struct prof_opts po = {
		.sz = sizeof(po),
		.freq_hz = o.hz,
		.backend = o.backend == PADRONE_BACKEND_BPF ? PROF_BACKEND_BPF : PROF_BACKEND_RING,
		.force = o.force,
		.user_only = o.user_only,
	};
	pf.user_only = o.user_only;
	/* the maps as they are while it lives: what names its samples if it
	 * exits or execs meanwhile */
	if ((r = session__need_symbolizer(s)) < 0)
		return r;
	profile_begin(s);
	r = prof_sampler__open(attach_target__pid(s->t), &po, &smp, &err);
	if (r < 0) {
		profile_end(s);
		return session__fail(s, r == -EINVAL ? PADRONE_BAD_REQUEST : PADRONE_SYSTEM, r, "%s",
			    err.msg);
	}
	r = run_sampler(s, smp, &o, &pf);
	profile_end(s);
	enum attach_why ended = attach_target__state(s->t);
	if (ended != ATTACH_OK)
		prof_symbolizer__gone(s->sym);	/* keep what it had mapped */
	else if (r == 0)
		r = session__need_symbolizer(s);
	/* No sample at all (a stopped process): nothing to rank. */
	if (r == 0 && prof_sampler__stack_count(smp) > 0 &&
	    (r = prof_hot__build(smp, s->sym, &hot, &err)) < 0)
		session__fail(s, PADRONE_SYSTEM, r, "%s", err.msg);
	if (r == 0) {
		struct prof_totals t;
		prof_sampler__totals(smp, &t);
		r = build_report(s, &t, hot, &pf);	/* takes hot */
		if (r == 0)
			padrone_report_set_ended(s->report, padrone_why_from_attach(ended));
	} else {
		prof_hot__free(hot);
	}
	prof_sampler__free(smp);
	/* gone during the profile: the report of what was sampled until then
	 * stays, and the status says what happened */
	if (r == 0 && ended != ATTACH_OK)
		r = session__need_target(s);
	if (r == 0)
		session__ok(s);
	return r;
}

const struct padrone_report *padrone_session__report(const struct padrone_session *s)
{
	return s->report;
}

const struct prof_hot *padrone_session_hot(const struct padrone_session *s)
{
	return padrone_report_hot(s->report);
}

