/* instr-duty.c: instrumentation switched off and on while it runs (issue
 * 11, PEBIL's duty cycles): by hand (instrument --on, --off) or by a
 * thread of padrone(d) that keeps a duty cycle (on ON_MS, off OFF_MS), so
 * that the timing is padrone's, never the target's. The copies, rings and
 * consumers stay; what changes is which way each thread's gate goes at the
 * function's entry (codecache's cc_instr__switch: a byte per thread, no
 * stop), so a call is recorded whole or not at all. Each function's time
 * switched off is kept: report says what fraction of the time its counts
 * cover, and scales them into estimates for the whole time.
 */
#include "src/instr-state.h"
#include "src/instr-sim.h"
#include "codecache/codecache.h"
#include "pipeline/cab.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The longest window asked for: an hour. */
#define DUTY_MAX_MS 3600000u

void instr__duty_init(struct instr_state *st)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&st->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);	/* as util_now_ns */
	pthread_cond_init(&st->duty_wake, &ca);
	pthread_condattr_destroy(&ca);
}

void instr__duty_destroy(struct instr_state *st)
{
	pthread_cond_destroy(&st->duty_wake);
	pthread_mutex_destroy(&st->lock);
}

static uint64_t func_ns(const struct func *f, uint64_t now)
{
	return f->before_ns + (f->active ? now : f->t1_ns) - f->t0_ns;
}

double instr__on_fraction(const struct func *f)
{
	uint64_t now = util_now_ns(), total = func_ns(f, now);
	uint64_t off = f->off_ns + (f->off_since ? (f->active ? now : f->t1_ns) - f->off_since : 0);

	return total && off < total ? 1.0 - (double)off / (double)total : total ? 0.0 : 1.0;
}

static int switch_func(struct func *f, bool on, uint64_t now)
{
	int rc = cc_instr__switch(f->in, on);

	if (rc < 0)
		return rc;
	if (!on && !f->off_since)
		f->off_since = now;
	if (on && f->off_since) {
		f->off_ns += now - f->off_since;
		f->off_since = 0;
	}
	return 0;
}

/* Every consumer drained its ring into the simulator's feed (switched
 * off: instr-workers.c, consumer_idle). */
static bool consumers_drained(struct instr_state *st)
{
	for (size_t i = 0; i < st->nf; i++)
		for (size_t k = 0; st->f[i].active && k < st->f[i].nw; k++)
			if (st->f[i].w[k].started && !atomic_load(&st->f[i].w[k].drained))
				return false;
	return true;
}

/* The simulated caches' next window, after a window on for on_s and a gap
 * of off_s: now, where the last one's references were all simulated (so
 * the windows are apart exactly), else before the next batch simulated. */
static void begin_window(struct instr_state *st, double on_s, double off_s)
{
	if (!consumers_drained(st) || !sim_stage__window_if_idle(st->stage, on_s, off_s))
		sim_stage__window(st->stage, on_s, off_s);
}

/* Every active function (st->lock held). The first failure (its function
 * in *failed); the others are switched all the same. */
static int switch_all(struct instr_state *st, bool on, const char **failed)
{
	uint64_t now = util_now_ns();
	int first = 0;

	if (on && st->off) {	/* before any call records: its window's first */
		begin_window(st, (double)(st->off_at - st->on_at) / 1e9,
			     (double)(now - st->off_at) / 1e9);
		now = util_now_ns();	/* (a large LL's lines take some ms to age) */
	}
	for (size_t i = 0; i < st->nf; i++) {
		struct func *f = &st->f[i];
		if (!f->active)
			continue;
		int rc = switch_func(f, on, now);
		if (rc < 0 && !first) {
			first = rc;
			*failed = f->name;
		}
	}
	if (on && st->off) {
		st->windows++;
		st->on_at = now;
	}
	if (!on && !st->off)
		st->off_at = now;
	st->switched |= !on;
	st->off = !on;
	return first;
}

void instr__switch_joined(struct instr_state *st, struct func *f)
{
	f->off_since = 0;
	if (!st->windows) {
		st->windows = 1;
		st->on_at = util_now_ns();
	}
	if (st->off)	/* as the others are: the next window takes it in */
		switch_func(f, false, util_now_ns());
	if (st->budget.pct)	/* as the others: the target never waits (instr-budget.c) */
		cc_instr__wait_when_full(f->in, false);
}

void instr__switch_left(struct func *f)
{
	if (f->off_since && f->t1_ns > f->off_since)
		f->off_ns += f->t1_ns - f->off_since;
	f->off_since = 0;
}

static bool any_active(const struct instr_state *st)
{
	for (size_t i = 0; st && i < st->nf; i++)
		if (st->f[i].active)
			return true;
	return false;
}

static void add_ms(struct timespec *t, unsigned ms)
{
	util_timespec_add_ns(t, (uint64_t)ms * 1000000u);
}

static bool before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Until the window ends at *end (true) or the thread is stopped (false). */
static bool wait_window(struct instr_state *st, const struct timespec *end)
{
	while (!st->duty_stop)
		if (pthread_cond_timedwait(&st->duty_wake, &st->lock, end) == ETIMEDOUT)
			return !st->duty_stop;
	return false;
}

/* Every `every` ms from *look until the window's end, until the
 * pipeline is idle (the budget's base begins); false when stopped. */
static bool watch_pipeline(struct instr_state *st, struct timespec *look, unsigned every,
			   const struct timespec *end)
{
	if (!every)
		return true;
	for (;;) {
		add_ms(look, every);
		if (!before(look, end))
			return true;
		if (!wait_window(st, look))
			return false;
		if (instr__budget_idle(st))
			return true;
	}
}

/* Before a window on: until everything the last one recorded was
 * simulated, for at most most_ms (false when the thread is stopped). A
 * pipeline that keeps up drains within a few ms of the window's end; one
 * that lags (its threads at niceness 19 under a budget, where the
 * scheduler may leave them on the target's CPU) would not drain in a
 * whole window off, which the wait would only make longer. */
#define DRAIN_MAX_MS 25u
static void wake_consumers(struct instr_state *st)
{
	for (size_t i = 0; i < st->nf; i++)	/* a napping consumer drains now */
		for (size_t k = 0; st->f[i].active && k < st->f[i].nw; k++)
			if (st->f[i].w[k].started)
				cab_ring__wake_consumer(st->f[i].w[k].ring);
}

static bool wait_drained(struct instr_state *st, unsigned most_ms)
{
	struct timespec until, step;

	wake_consumers(st);
	clock_gettime(CLOCK_MONOTONIC, &until);
	add_ms(&until, most_ms);
	while (!consumers_drained(st) || !sim_stage__idle(st->stage)) {
		clock_gettime(CLOCK_MONOTONIC, &step);
		add_ms(&step, 1);
		if (!before(&step, &until))
			return true;
		if (!wait_window(st, &step))
			return false;
	}
	return true;
}

/* Each window ends its length after the last one ended, not after the
 * switch that began it ran (a late wake-up does not stretch the next
 * window); a thread that fell more than a window behind starts afresh. */
static void *duty_main(void *arg)
{
	struct instr_state *st = arg;
	struct timespec next, now;

	pthread_mutex_lock(&st->lock);
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!st->duty_stop) {
		struct timespec look = next;
		unsigned every = st->off ? instr__budget_watch_ms(st) : 0;
		add_ms(&next, st->off ? st->duty_off_ms : st->duty_on_ms);
		if (!watch_pipeline(st, &look, every, &next) || !wait_window(st, &next))
			break;
		const char *failed = NULL;
		bool ended_on = !st->off;
		if (!ended_on && !wait_drained(st, DRAIN_MAX_MS < st->duty_off_ms / 4 ?
					       DRAIN_MAX_MS : st->duty_off_ms / 4))
			break;
		instr__budget_window_end(st, ended_on);
		switch_all(st, !ended_on, &failed);	/* a failure is tried again next time */
		if (!ended_on)
			instr__budget_period_end(st);	/* may change the windows */
		clock_gettime(CLOCK_MONOTONIC, &now);
		struct timespec late = next;
		add_ms(&late, st->off ? st->duty_off_ms : st->duty_on_ms);
		if (before(&late, &now))
			next = now;
	}
	pthread_mutex_unlock(&st->lock);
	return NULL;
}

void instr__settle(struct instr_state *st, unsigned most_ms)
{
	uint64_t until = util_now_ns() + (uint64_t)most_ms * 1000000u;

	pthread_mutex_lock(&st->lock);
	wake_consumers(st);
	while (!(consumers_drained(st) && sim_stage__idle(st->stage)) && util_now_ns() < until) {
		pthread_mutex_unlock(&st->lock);
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
		pthread_mutex_lock(&st->lock);
	}
	pthread_mutex_unlock(&st->lock);
}

void instr__duty_stop(struct instr_state *st)
{
	pthread_mutex_lock(&st->lock);
	bool running = st->duty_running;
	st->duty_stop = true;
	pthread_cond_broadcast(&st->duty_wake);
	pthread_mutex_unlock(&st->lock);
	if (running)
		pthread_join(st->duty, NULL);
	pthread_mutex_lock(&st->lock);
	st->duty_running = false;
	st->duty_stop = false;
	st->duty_on_ms = st->duty_off_ms = 0;
	instr__budget_stop(st);
	pthread_mutex_unlock(&st->lock);
}

void instr__switch_reset(struct instr_state *st)
{
	pthread_mutex_lock(&st->lock);
	st->off = false;
	pthread_mutex_unlock(&st->lock);
}

static int active_state(struct padrone_session *s, struct instr_state **out)
{
	struct instr_state *st = padrone_session_target(s) ? padrone_session_ext(s, "instr") :
		NULL;

	if (!padrone_session_target(s))
		return padrone_session_fail(s, PADRONE_NOT_ATTACHED, -ENOENT,
					    "not attached to a process");
	if (!any_active(st))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -ENOENT, "nothing is "
					    "instrumented to switch: instrument FUNC first");
	*out = st;
	return 0;
}

int padrone_session__instr_switch(struct padrone_session *s, bool on)
{
	struct instr_state *st;
	const char *failed = NULL;
	int rc;

	if ((rc = active_state(s, &st)) < 0)
		return rc;
	instr__duty_stop(st);	/* by hand: the duty cycle ends */
	pthread_mutex_lock(&st->lock);
	rc = switch_all(st, on, &failed);
	pthread_mutex_unlock(&st->lock);
	if (rc < 0) {
		int gone = padrone_session_fail_if_left(s);
		return gone < 0 ? gone : padrone_session_fail(s, PADRONE_SYSTEM, rc, "cannot switch "
							     "%s %s: %s", failed, on ? "on" : "off",
							     strerror(-rc));
	}
	return 0;
}

/* The duty thread, its windows set (st->lock held): 0 or a negative errno. */
static int start_duty_thread(struct instr_state *st)
{
	if (pthread_create(&st->duty, NULL, duty_main, st) != 0)
		return -EAGAIN;
	st->duty_running = true;
	pthread_setname_np(st->duty, "padrone-duty");
	return 0;
}

int padrone_session__instr_duty(struct padrone_session *s, unsigned on_ms, unsigned off_ms)
{
	struct instr_state *st;
	int rc;

	if (!on_ms || !off_ms || on_ms > DUTY_MAX_MS || off_ms > DUTY_MAX_MS)
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "a duty cycle's "
					    "windows are 1 to %u ms, not %u/%u", DUTY_MAX_MS, on_ms,
					    off_ms);
	if ((rc = active_state(s, &st)) < 0)
		return rc;
	instr__duty_stop(st);	/* a new cycle begins with a whole window */
	pthread_mutex_lock(&st->lock);
	const char *failed = NULL;
	rc = st->off ? switch_all(st, true, &failed) : 0;
	st->duty_on_ms = on_ms;
	st->duty_off_ms = off_ms;
	st->switched = true;	/* the results cover the windows from now on */
	if (rc == 0)
		rc = start_duty_thread(st);
	if (rc < 0)
		st->duty_on_ms = st->duty_off_ms = 0;
	pthread_mutex_unlock(&st->lock);
	if (rc < 0)
		return padrone_session_fail(s, PADRONE_SYSTEM, rc, "cannot start the duty cycle: %s",
					    failed ? "a function did not switch on" : strerror(-rc));
	return 0;
}

int padrone_session__instr_budget(struct padrone_session *s, double pct)
{
	struct instr_state *st;
	char why[640] = "";
	int rc;

	if (!(pct > 0 && pct <= 100))
		return padrone_session_fail(s, PADRONE_BAD_REQUEST, -EINVAL, "an overhead budget "
					    "is more than 0 and at most 100%%, not %g", pct);
	if ((rc = active_state(s, &st)) < 0)
		return rc;
	instr__duty_stop(st);
	pthread_mutex_lock(&st->lock);
	const char *failed = NULL;
	rc = st->off ? switch_all(st, true, &failed) : 0;
	if (rc == 0 && (rc = instr__budget_start(st, padrone_session__pid(s), pct, why,
						 sizeof why)) == 0) {
		st->switched = true;
		if ((rc = start_duty_thread(st)) < 0)
			snprintf(why, sizeof why, "%s", strerror(-rc));
	} else if (failed) {
		snprintf(why, sizeof why, "a function did not switch on");
	}
	if (rc < 0) {	/* switched off, not left on at any cost */
		instr__budget_stop(st);
		st->duty_on_ms = st->duty_off_ms = 0;
		switch_all(st, false, &failed);
	}
	pthread_mutex_unlock(&st->lock);
	if (rc < 0)
		return padrone_session_fail(s, PADRONE_SYSTEM, rc, "cannot keep an overhead "
					    "budget: %s (the functions stay instrumented, switched "
					    "off)", why);
	return 0;
}
