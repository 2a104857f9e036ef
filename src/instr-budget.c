/* instr-budget.c: instrument --max-overhead PCT (issue 11): a duty cycle
 * whose share on padrone chooses, and keeps choosing, so that the target
 * loses at most PCT% of its time.
 *
 * The method (man/padrone.1 states it): periods of BUDGET_PERIOD_MS (up
 * to BUDGET_PERIOD_MAX_MS when d is too small for 1 ms of it), on for a
 * fraction d of each, off for the rest. A cpu-clock sampler of
 * profile/ (no hardware PMU here) samples the target's threads; at each
 * window's end its samples are counted as on or off, and as in the
 * functions (original, copy, ring stub and gate: waiting for the consumer
 * is the copy's cost; a kernel sample is where its thread's user code
 * called the kernel, so the stub's system calls are the copy's) or not;
 * samples in a copy count as on in either window (a call begun on ends in
 * the copy, and its time is the copy's).
 * A thread asleep is not sampled by cpu-clock, so the time the target's
 * threads waited in the copies' ring stubs for the consumer, which each
 * stub measures itself around its wait (the ring's producer wait time,
 * the wake-up's latency included), counts as that many samples in the
 * copy as the sampler would have taken meanwhile.
 *
 * With f_off and f_on the functions' shares of the target's CPU time off
 * and on, the copy's slowdown of them is
 * s = (f_on / (1 - f_on)) / (f_off / (1 - f_off)). What the target loses is
 * then measured, not modelled: of the time q its threads spent in the
 * copies (asleep in the stub included, and the ends of calls begun on),
 * only 1/s was the function's own work, so the target lost q * (1 - 1/s)
 * of its time (and at least the time they slept there waiting for the
 * consumer, which is lost whatever s is: when the functions take nearly
 * all of the target's time, their shares cannot tell s), an overhead of
 * that over what is left. The time on is not a good measure of it: a
 * window of 1 ms may leave a thread waiting for the consumer for several
 * more, and the copy's cost per millisecond on is the pipeline's pace, not
 * the copy's CPU cost. Every BUDGET_EVERY_MS, with
 * d_was the share on over the same (decayed) time, the target is
 * PCT * d_was / overhead, kept within [BUDGET_MIN, BUDGET_MAX] (some time on
 * to measure the copy, some off to measure the original); d falls to it at
 * once, or rises half way to it, at most doubling: a feedback on the
 * measured loss, which follows it however it grows with d. The counts decay
 * each period, so a change of load shows within a few seconds. Without
 * samples in the functions while off, d stays at its minimum and the
 * estimate is unknown.
 */
#include "src/instr-nice.h"
#include "src/instr-state.h"
#include "codecache/codecache.h"
#include "pipeline/cab.h"
#include "profile/profile.h"
#include "util/util.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUDGET_PERIOD_MS 200u
#define BUDGET_PERIOD_MAX_MS 1000u	/* a share below 1/200: longer periods */
#define BUDGET_HZ 499u		/* ~0.9% of a busy thread's time (profile.h) */
#define BUDGET_START 0.01	/* before the first estimate */
#define BUDGET_MIN 0.001	/* 1 ms of the longest period */
#define BUDGET_MAX 0.95
#define BUDGET_EVERY_MS 1000u	/* between estimates (the end of a period after) */
#define BUDGET_DECAY 0.95	/* per 200 ms: the estimate rests on ~4 s */
/* an estimate needs at least these (decayed) samples */
#define BUDGET_MIN_OFF 50.0
#define BUDGET_MIN_ON 10.0
/* the functions' share of the samples off above which their shares cannot
 * tell the copy's slowdown, and the share of the time asleep in the stubs
 * under which nothing is known to be lost either */
#define BUDGET_BLIND 0.98
#define BUDGET_MIN_ASLEEP 0.001

/* The next period's windows: BUDGET_PERIOD_MS, or longer for a share
 * too small for 1 ms of it (a window is whole milliseconds). */
static void set_windows(struct instr_state *st)
{
	double d = st->budget.fraction;
	unsigned period = (unsigned)fmin(BUDGET_PERIOD_MAX_MS, fmax(BUDGET_PERIOD_MS, 1 / d));
	unsigned on = (unsigned)lround(d * period);

	if (on < 1)
		on = 1;
	if (on > period - 1)
		on = period - 1;
	st->duty_on_ms = on;
	st->duty_off_ms = period - on;
}

/* How long the target's threads have waited in all, in the copies' ring
 * stubs, for the consumers to free room (exhaustive mode), as the stubs
 * measured it: every active function's rings. */
static uint64_t waited_ns(const struct instr_state *st)
{
	uint64_t ns = 0;

	for (size_t i = 0; i < st->nf; i++)
		for (size_t k = 0; st->f[i].active && k < st->f[i].nw; k++) {
			struct cab_stats cs;
			if (st->f[i].w[k].ring && cab_ring__stats(st->f[i].w[k].ring, &cs) == 0)
				ns += cs.producer_wait_ns;
		}
	return ns;
}

int instr__budget_start(struct instr_state *st, pid_t pid, double pct, char *why, size_t size)
{
	struct prof_opts o = { .sz = sizeof o, .freq_hz = BUDGET_HZ,
			       .ring_mode = PROF_RING_PER_THREAD };
	struct prof_error err = { 0 };
	struct instr_budget *b = &st->budget;
	int rc;

	/* this thread's is the process's own niceness, which the pipeline
	 * gets back after the budget (instr-nice.h) */
	errno = 0;
	int own = getpriority(PRIO_PROCESS, 0);
	*b = (struct instr_budget){ .pct = pct, .fraction = BUDGET_START,
				    .nice_before = errno ? 0 : own };
	snprintf(b->note, sizeof b->note, "too few samples yet");
	if ((rc = prof_sampler__open(pid, &o, &b->smp, &err)) < 0) {
		snprintf(why, size, "cannot sample the process: %s", err.msg);
		return rc;
	}
	if ((rc = prof_sampler__start(b->smp)) < 0) {
		snprintf(why, size, "cannot sample the process: %s",
			 prof_sampler__errmsg(b->smp));
		prof_sampler__free(b->smp);
		b->smp = NULL;
		return rc;
	}
	b->waited_ns = waited_ns(st);	/* the waits before the budget are not its */
	set_windows(st);
	atomic_store(&st->pipeline_nice, INSTR_NICE_YIELD);	/* yield to the target */
	return 0;
}

void instr__budget_stop(struct instr_state *st)
{
	if (st->budget.pct)
		atomic_store(&st->pipeline_nice, st->budget.nice_before);
	prof_sampler__free(st->budget.smp);
	st->budget.smp = NULL;
	st->budget.pct = 0;
}

static bool in_range(uint64_t pc, uint64_t addr, uint64_t size)
{
	return pc >= addr && pc - addr < size;
}

enum where { ELSEWHERE, IN_ORIGINAL, IN_COPY };

/* Where a sampled pc is: an active function's original, its copy (ring
 * stub and gate included), or neither. */
static enum where where(const struct instr_state *st, uint64_t pc)
{
	for (size_t i = 0; i < st->nf; i++) {
		const struct func *f = &st->f[i];
		uint64_t copy, copy_size;
		if (!f->active)
			continue;
		cc_instr__copy(f->in, &copy, &copy_size);
		if (in_range(pc, copy, copy_size))
			return IN_COPY;
		if (in_range(pc, f->entry, f->size))
			return IN_ORIGINAL;
	}
	return ELSEWHERE;
}

/* The sampler's counts since it was opened: in the originals, in the
 * copies, and all. A sample is where its thread ran user code (the first
 * user frame). */
static void count_samples(const struct instr_state *st, uint64_t n[3])
{
	size_t stacks = prof_sampler__stack_count(st->budget.smp);

	n[0] = n[1] = n[2] = 0;
	for (size_t i = 0; i < stacks; i++) {
		const uint64_t *ips;
		size_t nips, k = 0;
		uint64_t count;
		if (prof_sampler__stack(st->budget.smp, i, &ips, &nips, &count) < 0)
			continue;
		while (k < nips && ips[k] >= PROF_KERNEL_START)
			k++;
		n[2] += count;
		enum where w = k < nips ? where(st, ips[k]) : ELSEWHERE;
		if (w != ELSEWHERE)
			n[w == IN_ORIGINAL ? 0 : 1] += count;
	}
}

/* The samples the sampler would have taken of the threads while they
 * waited in the stubs, since the last window's end. */
static double samples_waited(struct instr_budget *b, const struct instr_state *st)
{
	uint64_t now = waited_ns(st);
	/* less than before: a function's rings went with it; from here on */
	uint64_t ns = now >= b->waited_ns ? now - b->waited_ns : 0;

	b->waited_ns = now;
	return (double)ns * BUDGET_HZ / 1e9;
}

void instr__budget_window_end(struct instr_state *st, bool on)
{
	struct instr_budget *b = &st->budget;
	uint64_t n[3];

	if (!b->smp)
		return;
	prof_sampler__stop(b->smp);	/* collects what is buffered */
	count_samples(st, n);
	double waited = samples_waited(b, st);
	if (n[0] >= b->prev[0] && n[1] >= b->prev[1] && n[2] >= b->prev[2]) {
		double orig = (double)(n[0] - b->prev[0]), copy = (double)(n[1] - b->prev[1]);
		double all = (double)(n[2] - b->prev[2]);
		/* the copy's time, the ends of calls begun on included, is
		 * instrumented time whatever the window */
		double on_in = copy + waited, on_all = copy + waited;
		if (on) {
			on_in += orig;
			on_all = all + waited;
		} else {
			b->in_off += orig;
			b->all_off += all - copy;
			b->samples_off += (uint64_t)(all - copy);
		}
		b->in_on += on_in;
		b->all_on += on_all;
		b->samples_on += (uint64_t)llround(on_all);
		b->in_copy += copy + waited;
		b->asleep += waited;
		b->busy += all + waited;
	}
	memcpy(b->prev, n, sizeof b->prev);
	prof_sampler__start(b->smp);	/* a failure shows as no samples */
}

/* The copy's slowdown of the functions' own code, from their shares of
 * the samples on and off (b->f_off as estimate set it). */
static double slowdown(struct instr_budget *b)
{
	/* one sample more outside the functions, so that a share on near 1,
	 * from few samples, does not make the slowdown infinite */
	b->f_on = b->in_on / (b->all_on + 1);
	double odds_off = b->f_off < 1 ? b->f_off / (1 - b->f_off) : 2 * b->all_off;
	double odds_on = b->f_on > 0 ? b->f_on / (1 - b->f_on) : 0;
	return fmax(1.0, odds_on / odds_off);
}

/* The fraction that keeps the target within the budget, and the estimate
 * behind it; false when the samples cannot say (the note says why). */
static bool estimate(struct instr_budget *b, double *target)
{
	if (b->all_off < BUDGET_MIN_OFF || b->period_ms <= 0) {
		snprintf(b->note, sizeof b->note, "too few samples yet");
		return false;
	}
	if (b->in_off <= 0) {
		snprintf(b->note, sizeof b->note, "no samples in the functions while off");
		b->known = false;
		*target = BUDGET_MIN;
		return false;
	}
	if (b->all_on < BUDGET_MIN_ON) {	/* (at the least time on, a blind one stays so) */
		if (!b->blind)
			snprintf(b->note, sizeof b->note, "too few samples yet");
		return false;
	}
	b->f_off = b->in_off / b->all_off;
	/* asleep in the stub, a thread does nothing of its own: that much is
	 * lost whatever s says (when the functions take nearly all the
	 * target's time, their shares on and off cannot tell s) */
	double asleep = b->busy > 0 ? b->asleep / b->busy : 0;
	/* and with nothing asleep either (the pipeline keeps up: a pointer
	 * chase, whose copy costs it 10%, read as costing nothing), the
	 * copy's cost is not measured at all: the least time on, not the
	 * most */
	b->blind = b->f_off >= BUDGET_BLIND && asleep < BUDGET_MIN_ASLEEP;
	if (b->blind) {
		snprintf(b->note, sizeof b->note, "the functions take nearly all the samples and "
			 "nothing waits: the copy's cost cannot be measured");
		b->known = false;
		*target = BUDGET_MIN;
		return false;
	}
	b->slowdown = slowdown(b);
	b->q = b->busy > 0 ? b->in_copy / b->busy : 0;
	double lost = fmin(fmax(b->q * (1 - 1 / b->slowdown), asleep), 0.99);
	double was = b->on_ms / b->period_ms;	/* the share on it was lost at */
	b->overhead = 100 * lost / (1 - lost);
	b->cost = b->overhead / 100 / was;	/* per unit of d */
	*target = b->cost > 0 ? fmin(BUDGET_MAX, fmax(BUDGET_MIN, b->pct / 100 / b->cost)) :
		BUDGET_MAX;
	b->known = true;
	return true;
}

/* Down to the target at once (the target is losing more than it may),
 * up half way but at most twice as high (a second's too few samples in the
 * copy must not put it on most of the time). */
static double next_fraction(double now, double target)
{
	return target <= now ? target : fmin(0.5 * now + 0.5 * target, 2 * now);
}

void instr__budget_period_end(struct instr_state *st)
{
	struct instr_budget *b = &st->budget;
	double target = b->fraction;

	if (!b->smp)
		return;
	unsigned period_ms = st->duty_on_ms + st->duty_off_ms;	/* the one that ended */
	b->since_ms += period_ms;
	b->on_ms += st->duty_on_ms;
	b->period_ms += period_ms;
	if (b->since_ms >= BUDGET_EVERY_MS) {
		b->since_ms = 0;
		estimate(b, &target);
		b->fraction = next_fraction(b->fraction, target);
	}
	double decay = pow(BUDGET_DECAY, period_ms / (double)BUDGET_PERIOD_MS);
	b->in_on *= decay;
	b->all_on *= decay;
	b->in_off *= decay;
	b->all_off *= decay;
	b->in_copy *= decay;
	b->asleep *= decay;
	b->busy *= decay;
	b->on_ms *= decay;
	b->period_ms *= decay;
	set_windows(st);
}
