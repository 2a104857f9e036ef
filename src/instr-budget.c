/* instr-budget.c: instrument --max-overhead PCT (issue 11): a duty cycle
 * whose share on padrone chooses, and keeps choosing, so that the target
 * loses at most PCT% of its time.
 *
 * The method (man/padrone.1 states it): periods of BUDGET_PERIOD_MS (up
 * to BUDGET_PERIOD_MAX_MS when d is too small for 1 ms of it, or too
 * large for an off window of 2 * BUDGET_SPLIT_MS), on for a
 * fraction d of each, off for the rest. A cpu-clock sampler of
 * profile/ (no hardware PMU here) samples the target: per CPU when it may
 * (events on the target's threads would cost each of them ~7.5 us per
 * context switch: in a run here, redis-server's time per request in off
 * windows was 24% above its native one with them, 4% per CPU); at each
 * window's end its samples are counted as on or off, and as in the
 * functions (original, copy and ring stub, gate and detour: waiting for
 * the consumer is the copy's cost; a kernel sample is where its thread's
 * user code called the kernel, so the stub's system calls are the copy's)
 * or not; samples in a copy count as on in either window (a call begun on
 * ends in the copy, and its time is the copy's), those in the gate and
 * the detour as the copy's on and as the cost of being switched off off.
 * A thread asleep is not sampled by cpu-clock, so the time the target's
 * threads waited in the copies' ring stubs for the consumer, which each
 * stub measures itself around its wait (the ring's producer wait time,
 * the wake-up's latency included), counts as that many samples in the
 * copy as the sampler would have taken meanwhile.
 *
 * With f_off and f_on the functions' shares of the target's CPU time off
 * and on, the copy's slowdown of them is
 * s = (f_on / (1 - f_on)) / (f_off / (1 - f_off)). Of the time q its threads
 * spent in the copies (asleep in the stub included, and the ends of calls
 * begun on), only 1/s was the function's own work, so the target lost
 * q * (1 - 1/s) of its time (and at least the time they slept there
 * waiting for the consumer, which is lost whatever s is), an overhead of
 * that over what is left. When the functions take nearly all the
 * target's time, their shares cannot tell s: that measure is blind.
 *
 * The other measure: the gate of each copy counts its thread's calls, on
 * or off (IS_CALLS), and the kernel counts each thread's time on a CPU and
 * waiting for one (/proc/PID/task/TID/schedstat, in ns: a thread that
 * padrone's pipeline keeps from its CPU loses that time too); with the
 * time it waited in the stubs, that is its busy time. Both are read at
 * each window's end, and in each off window of at least BUDGET_SPLIT_MS
 * once padrone's own CPU time shows its pipeline idle (the consumers have
 * caught up with the last window on: it may take most of the off window,
 * during which their work on the other CPUs slows the target's through
 * the memory and caches they share). From there to the window's end, the
 * busy time per call is the target's own (the base); over all windows, it
 * is what the target pays. Their ratio less one is the overhead: the
 * copy's own cost, the waits, and what the pipeline costs the target's
 * CPUs, which no share of samples shows. It needs the calls counted (the
 * flags dead at the entries), calls enough, and an idle pipeline now and
 * then (without one, the last base stands); a thread that loops inside a
 * function and never calls it shows nothing there, where the samples do.
 *
 * Both take the off windows as their base, so neither sees what being
 * switched off costs: the gate's count and jumps, and the detour, which a
 * call of a 20-ns function here pays about 2.5% for. Their share of the
 * samples off is that cost, which the estimate adds to the larger of the
 * two measures that are known (a budget is a ceiling), and which the time
 * on may not spend. The time on is not a good measure of the cost on: a
 * window of 1 ms may leave a thread waiting for the consumer for several
 * more, and the copy's cost per millisecond on is the pipeline's pace, not
 * the copy's CPU cost.
 * Every BUDGET_EVERY_MS, with d_was the share on over the same (decayed)
 * time, the target is (PCT - off - spread) * d_was / on, with off and on
 * the costs of being switched off and on above and spread how far the
 * last estimates strayed from their predictions, kept within [BUDGET_MIN,
 * BUDGET_MAX] (some time on to measure the copy, some off to measure the
 * original); d falls to it at once, or rises half way to it, at most
 * doubling: a feedback on the measured loss, which follows it however it
 * grows with d. The counts decay each period, so a change of load shows
 * within a few seconds. With neither measure, d stays at its minimum and
 * the estimate is unknown.
 */
#include "src/instr-nice.h"
#include "src/instr-state.h"
#include "attach/attach.h"
#include "codecache/codecache.h"
#include "pipeline/cab.h"
#include "profile/profile.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUDGET_PERIOD_MS 200u
#define BUDGET_PERIOD_MAX_MS 1000u	/* a share below 1/200 or above 0.8: longer periods */
#define BUDGET_HZ 499u		/* ~0.9% of a busy thread's time (profile.h) */
#define BUDGET_START 0.01	/* before the first estimate */
#define BUDGET_MIN 0.001	/* 1 ms of the longest period */
#define BUDGET_MAX 0.95
#define BUDGET_EVERY_MS 1000u	/* between estimates (the end of a period after) */
#define BUDGET_DECAY 0.95	/* per 200 ms: the estimate rests on ~4 s */
#define BUDGET_SPREAD_W 0.25	/* an estimate's weight in the spread */
/* an estimate needs at least these (decayed) samples */
#define BUDGET_MIN_OFF 50.0
#define BUDGET_MIN_ON 10.0
/* the functions' share of the samples off above which their shares cannot
 * tell the copy's slowdown, and the share of the time asleep in the stubs
 * under which nothing is known to be lost either */
#define BUDGET_BLIND 0.98
#define BUDGET_MIN_ASLEEP 0.001
/* the busy time per call: off windows at least this long are read once
 * more, when the pipeline idles; the base needs these many (decayed) calls
 * and ms */
#define BUDGET_SPLIT_MS 20u
/* how often padrone's own CPU time is looked at in an off window, and the
 * share of that time under which its pipeline counts as idle */
#define BUDGET_WATCH_MS 5u
#define BUDGET_IDLE 0.05
#define BUDGET_MIN_CALLS 200.0
#define BUDGET_MIN_BASE_MS 50.0

/* The next period's windows: BUDGET_PERIOD_MS, or longer for a share
 * too small for 1 ms of it (a window is whole milliseconds), or too large
 * for an off window of twice BUDGET_SPLIT_MS, where the busy time per
 * call is read once the pipeline idles: without it that measure's base
 * would go stale at a large share on. */
static void set_windows(struct instr_state *st)
{
	double d = st->budget.fraction;
	double want = fmax(1 / d, 2.0 * BUDGET_SPLIT_MS / (1 - d));
	unsigned period = (unsigned)fmin(BUDGET_PERIOD_MAX_MS, fmax(BUDGET_PERIOD_MS, want));
	unsigned on = (unsigned)lround(d * period);

	if (on < 1)
		on = 1;
	if (on > period - 1)
		on = period - 1;
	st->duty_on_ms = on;
	st->duty_off_ms = period - on;
}

static size_t rows_of(const struct instr_state *st)
{
	size_t n = 0;

	for (size_t i = 0; i < st->nf; i++)
		if (st->f[i].active && cc_instr__thread_count(st->f[i].in) > n)
			n = cc_instr__thread_count(st->f[i].in);
	return n;
}

/* Row i now: its thread, the calls of every active function, the stubs'
 * waits and the thread's time on or waiting for a CPU; false without a
 * thread or a reading (*uncounted: a gate does not count). */
static bool read_row(const struct instr_state *st, size_t i, struct budget_row *r,
		     bool *uncounted)
{
	*r = (struct budget_row){ 0 };
	for (size_t k = 0; k < st->nf; k++) {
		const struct func *f = &st->f[k];
		struct cab_stats cs;
		uint64_t calls;
		pid_t tid;
		if (!f->active || i >= cc_instr__thread_count(f->in))
			continue;
		struct cab_ring *ring = cc_instr__ring(f->in, i, &tid);
		int rc = cc_instr__calls(f->in, i, &calls);
		*uncounted |= rc == -ENOTSUP;
		if (rc < 0 || !tid || (r->tid && tid != r->tid))
			return false;
		r->tid = tid;
		r->calls += calls;
		if (ring && cab_ring__stats(ring, &cs) == 0)
			r->wait_ns += cs.producer_wait_ns;
	}
	uint64_t run, wait;
	if (!r->tid || attach_thread_sched_ns(st->budget.pid, r->tid, &run, &wait) < 0)
		return false;
	r->busy_ns = run + wait;	/* time the pipeline keeps it from a CPU is lost too */
	return true;
}

/* Every row read; the threads' busy time (ns) and calls since the last
 * reading (a row whose thread changed, or whose counts went back, from
 * this one on); their waits in the stubs kept for the samples too
 * (b->unsampled_ns). */
static void read_rows(struct instr_state *st, double *ns, double *calls)
{
	struct instr_budget *b = &st->budget;
	size_t n = rows_of(st);

	*ns = *calls = 0;
	if (n > b->nrows) {
		struct budget_row *more = realloc(b->rows, n * sizeof *more);
		if (!more)
			return;
		memset(more + b->nrows, 0, (n - b->nrows) * sizeof *more);
		b->rows = more;
		b->nrows = n;
	}
	b->uncounted = false;
	for (size_t i = 0; i < n; i++) {
		struct budget_row now, *was = &b->rows[i];
		if (!read_row(st, i, &now, &b->uncounted)) {
			was->tid = 0;
			continue;
		}
		if (was->tid == now.tid && now.calls >= was->calls && now.busy_ns >= was->busy_ns &&
		    now.wait_ns >= was->wait_ns) {
			double waited = (double)(now.wait_ns - was->wait_ns);
			*ns += (double)(now.busy_ns - was->busy_ns) + waited;
			*calls += (double)(now.calls - was->calls);
			b->unsampled_ns += waited;
		}
		*was = now;
	}
}

/* The busy time and calls since the last reading, into all windows' and,
 * for the rest of an off window once the pipeline idled, the base. */
static void count_calls(struct instr_state *st, bool base)
{
	struct instr_budget *b = &st->budget;
	double ns, calls;

	read_rows(st, &ns, &calls);
	b->all_ns += ns;
	b->all_calls += calls;
	if (base) {
		b->base_ns += ns;
		b->base_calls += calls;
		b->base_new = true;
	}
}

unsigned instr__budget_watch_ms(struct instr_state *st)
{
	struct instr_budget *b = &st->budget;

	if (!b->smp || st->duty_off_ms < BUDGET_SPLIT_MS)
		return 0;
	b->own_ns = instr__thread_cpu_ns(CLOCK_PROCESS_CPUTIME_ID);	/* its pipeline's, mostly */
	b->own_at = util_now_ns();
	return BUDGET_WATCH_MS;
}

bool instr__budget_idle(struct instr_state *st)
{
	struct instr_budget *b = &st->budget;
	uint64_t own = instr__thread_cpu_ns(CLOCK_PROCESS_CPUTIME_ID), at = util_now_ns();
	bool idle = at > b->own_at && own - b->own_ns < BUDGET_IDLE * (double)(at - b->own_at);

	b->own_ns = own;
	b->own_at = at;
	if (idle) {
		count_calls(st, false);	/* the base from here to the window's end */
		b->split = true;
	}
	return idle;
}

/* Under a budget the pipeline yields to the target (niceness 19), so the
 * target must never wait for it: a unit that finds its ring full is
 * dropped, counted as lost, as in sample mode (instr__switch_joined does
 * the same for a function instrumented meanwhile). */
static void producers_wait(struct instr_state *st, bool wait)
{
	for (size_t i = 0; i < st->nf; i++)
		if (st->f[i].active)
			cc_instr__wait_when_full(st->f[i].in, wait);
}

int instr__budget_start(struct instr_state *st, pid_t pid, double pct, char *why, size_t size)
{
	struct prof_opts o = { .sz = sizeof o, .freq_hz = BUDGET_HZ,
			       .ring_mode = PROF_RING_AUTO };
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
	snprintf(b->calls_note, sizeof b->calls_note, "too few calls yet");
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
	b->pid = pid;
	double ns, calls;
	read_rows(st, &ns, &calls);	/* the time, calls and waits before it are not its */
	b->unsampled_ns = 0;
	set_windows(st);
	atomic_store(&st->pipeline_nice, INSTR_NICE_YIELD);	/* yield to the target */
	producers_wait(st, false);
	return 0;
}

void instr__budget_stop(struct instr_state *st)
{
	if (st->budget.pct) {
		atomic_store(&st->pipeline_nice, st->budget.nice_before);
		producers_wait(st, true);
	}
	prof_sampler__free(st->budget.smp);
	st->budget.smp = NULL;
	st->budget.pct = 0;
	free(st->budget.rows);
	st->budget.rows = NULL;
	st->budget.nrows = 0;
}

static bool in_range(uint64_t pc, uint64_t addr, uint64_t size)
{
	return pc >= addr && pc - addr < size;
}

enum where { ELSEWHERE, IN_ORIGINAL, IN_COPY, IN_SWITCH };
_Static_assert(IN_SWITCH + 1 == BUDGET_WHERE, "instr-state.h counts as many places");

/* Where a sampled pc is: an active function's original, its copy (ring
 * stub included), the way a call goes switched off besides the original's
 * own code (the copy's gate, the detour), or none of them. */
static enum where where(const struct instr_state *st, uint64_t pc)
{
	for (size_t i = 0; i < st->nf; i++) {
		const struct func *f = &st->f[i];
		uint64_t copy, copy_size, gate[2], detour[2];
		if (!f->active)
			continue;
		cc_instr__off_path(f->in, gate, detour);
		if (in_range(pc, gate[0], gate[1]) || in_range(pc, detour[0], detour[1]))
			return IN_SWITCH;
		cc_instr__copy(f->in, &copy, &copy_size);
		if (in_range(pc, copy, copy_size))
			return IN_COPY;
		if (in_range(pc, f->entry, f->size))
			return IN_ORIGINAL;
	}
	return ELSEWHERE;
}

/* The sampler's counts since it was opened, by enum where. A sample is
 * where its thread ran user code (the first user frame). */
static void count_samples(const struct instr_state *st, uint64_t n[BUDGET_WHERE])
{
	size_t stacks = prof_sampler__stack_count(st->budget.smp);

	memset(n, 0, BUDGET_WHERE * sizeof *n);
	for (size_t i = 0; i < stacks; i++) {
		const uint64_t *ips;
		size_t nips, k = 0;
		uint64_t count;
		if (prof_sampler__stack(st->budget.smp, i, &ips, &nips, &count) < 0)
			continue;
		while (k < nips && ips[k] >= PROF_KERNEL_START)
			k++;
		n[k < nips ? where(st, ips[k]) : ELSEWHERE] += count;
	}
}

/* The samples the sampler would have taken of the threads while they
 * waited in the stubs, since the last window's end. */
static double samples_waited(struct instr_budget *b)
{
	double ns = b->unsampled_ns;

	b->unsampled_ns = 0;
	return ns * BUDGET_HZ / 1e9;
}

/* The samples since the last window's end, by enum where, and *all of
 * them; false when the sampler's counts went back. */
static bool samples_since(struct instr_budget *b, const uint64_t n[BUDGET_WHERE],
			  double d[BUDGET_WHERE], double *all)
{
	*all = 0;
	for (int w = 0; w < BUDGET_WHERE; w++) {
		if (n[w] < b->prev[w])
			return false;
		d[w] = (double)(n[w] - b->prev[w]);
		*all += d[w];
	}
	return true;
}

void instr__budget_window_end(struct instr_state *st, bool on)
{
	struct instr_budget *b = &st->budget;
	uint64_t n[BUDGET_WHERE];
	double d[BUDGET_WHERE];

	if (!b->smp)
		return;
	prof_sampler__stop(b->smp);	/* collects what is buffered */
	count_calls(st, !on && b->split);	/* the stubs' waits with them */
	b->split = false;
	count_samples(st, n);
	double waited = samples_waited(b);
	double all;
	if (samples_since(b, n, d, &all)) {
		double orig = d[IN_ORIGINAL], sw = d[IN_SWITCH];
		/* the copy's time, the ends of calls begun on included, is
		 * instrumented time whatever the window; on, the gate is the
		 * copy's way in */
		double copy = d[IN_COPY] + (on ? sw : 0);
		double on_in = copy + waited, on_all = copy + waited;
		if (on) {
			on_in += orig;
			on_all = all + waited;
		} else {
			/* off, the gate and detour are the functions' cost of being
			 * switched off, which the original alone does not pay */
			b->in_off += orig + sw;
			b->in_switch += sw;
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

/* The overhead from the samples (a fraction): 1 when known, 0 when there
 * are too few samples yet, -1 when they cannot tell it (b->note says
 * why). */
static int overhead_by_samples(struct instr_budget *b, double *overhead)
{
	if (b->all_off < BUDGET_MIN_OFF || b->period_ms <= 0) {
		snprintf(b->note, sizeof b->note, "too few samples yet");
		return 0;
	}
	if (b->in_off <= 0) {
		snprintf(b->note, sizeof b->note, "no samples in the functions while off");
		return -1;
	}
	if (b->all_on < BUDGET_MIN_ON) {	/* (at the least time on, a blind one stays so) */
		if (!b->blind)
			snprintf(b->note, sizeof b->note, "too few samples yet");
		return b->blind ? -1 : 0;
	}
	b->f_off = b->in_off / b->all_off;
	/* asleep in the stub, a thread does nothing of its own: that much is
	 * lost whatever s says (when the functions take nearly all the
	 * target's time, their shares on and off cannot tell s) */
	double asleep = b->busy > 0 ? b->asleep / b->busy : 0;
	/* and with nothing asleep either (the pipeline keeps up: a pointer
	 * chase, whose copy costs it 10%, read as costing nothing), the
	 * copy's cost is not measured at all */
	b->blind = b->f_off >= BUDGET_BLIND && asleep < BUDGET_MIN_ASLEEP;
	if (b->blind) {
		snprintf(b->note, sizeof b->note, "the functions take nearly all the samples and "
			 "nothing waits: the copy's cost cannot be measured");
		return -1;
	}
	b->slowdown = slowdown(b);
	b->q = b->busy > 0 ? b->in_copy / b->busy : 0;
	double lost = fmin(fmax(b->q * (1 - 1 / b->slowdown), asleep), 0.99);
	*overhead = lost / (1 - lost);
	return 1;
}

/* What being switched off costs the target (a fraction): its share of
 * the time off spent in the gates and detours. Both other measures take
 * the off windows as their base, so neither sees it; 0 until there are
 * samples enough. */
static double overhead_off(const struct instr_budget *b)
{
	if (b->all_off < BUDGET_MIN_OFF)
		return 0;
	double share = fmin(b->in_switch / b->all_off, 0.99);
	return share / (1 - share);
}

/* The overhead from the busy time per call (a fraction): false when the
 * calls are not counted or too few. */
static bool overhead_by_calls(struct instr_budget *b, double *overhead)
{
	if (b->uncounted) {
		snprintf(b->calls_note, sizeof b->calls_note, "a function's calls are not "
			 "counted (the flags are live at its entry)");
		return false;
	}
	if (b->base_calls < BUDGET_MIN_CALLS || b->base_ns < BUDGET_MIN_BASE_MS * 1e6 ||
	    b->all_calls < BUDGET_MIN_CALLS) {
		snprintf(b->calls_note, sizeof b->calls_note, "too few calls yet");
		return false;
	}
	b->ns_per_call_base = b->base_ns / b->base_calls;
	b->ns_per_call = b->all_ns / b->all_calls;
	*overhead = fmax(0, b->ns_per_call / b->ns_per_call_base - 1);
	return true;
}

/* How far the overhead of being on strayed from what the cost per unit
 * of d before predicted (a fraction; a standard deviation over the last
 * estimates, exponentially weighted: BUDGET_SPREAD_W each, so the last
 * four or so); 0 at the first. In points rather than per unit of d, where
 * a small share on would turn a point of noise into a large spread. */
static double overhead_spread(struct instr_budget *b, double on_overhead, double was)
{
	double cost = on_overhead / was;

	if (!b->estimates++) {
		b->cost_mean = cost;
		b->spread_var = 0;
		return 0;
	}
	double delta = on_overhead - b->cost_mean * was;
	b->cost_mean += BUDGET_SPREAD_W * (cost - b->cost_mean);
	b->spread_var = (1 - BUDGET_SPREAD_W) * (b->spread_var + BUDGET_SPREAD_W * delta * delta);
	return sqrt(b->spread_var);
}

/* The fraction that keeps the target within the budget, and the estimate
 * behind it: what being switched off costs plus the larger of the two
 * measures of being on that are known; false when neither is (the note
 * says why; *target the least share when they cannot be). The time on may
 * cost what is left of the budget less one spread: a budget is a
 * ceiling, and the estimates move by a point or two from one second to
 * the next. */
static bool estimate(struct instr_budget *b, double *target)
{
	double by_samples = 0, by_calls = 0, off = overhead_off(b);
	int samples = overhead_by_samples(b, &by_samples);
	bool calls = overhead_by_calls(b, &by_calls);

	if (samples <= 0 && !calls) {	/* not yet: the last estimate stands */
		if (samples < 0) {
			b->known = b->by_samples = b->by_calls = false;
			b->estimates = 0;
			*target = BUDGET_MIN;
		}
		return false;
	}
	b->by_samples = samples > 0;
	b->by_calls = calls;
	b->overhead_samples = 100 * by_samples;
	b->overhead_calls = 100 * by_calls;
	double was = b->on_ms / b->period_ms;	/* the share on it was lost at */
	double on = fmax(by_samples, by_calls);	/* what being on cost */
	double spread = overhead_spread(b, on, was);
	double room = b->pct / 100 - off - spread;	/* what the time on may cost */
	b->overhead_off = 100 * off;
	b->overhead = 100 * (off + on);
	b->cost = on / was;	/* per unit of d */
	b->spread = 100 * spread;
	*target = room <= 0 ? BUDGET_MIN : b->cost > 0 ?
		fmin(BUDGET_MAX, fmax(BUDGET_MIN, room / b->cost)) : BUDGET_MAX;
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
	b->in_switch *= decay;
	b->asleep *= decay;
	b->busy *= decay;
	b->all_ns *= decay;
	b->all_calls *= decay;
	if (b->base_new) {	/* kept while no off window is long enough to read */
		b->base_ns *= decay;
		b->base_calls *= decay;
	}
	b->base_new = false;
	b->on_ms *= decay;
	b->period_ms *= decay;
	set_windows(st);
}
