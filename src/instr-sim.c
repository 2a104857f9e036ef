/* The cache simulation stage of an instrumentation (instr-sim.h).
 *
 * Before it, every consumer simulated its own references under one lock
 * taken in turn: with two busy threads, padroned spent about half its CPU
 * waking and waiting on that lock (perf: try_to_wake_up, futex waits)
 * rather than simulating, and simulation (three quarters of a consumer's
 * work) ran on the consumer's CPU only. Now a consumer hands its
 * references over in batches of its feed and goes on recovering; one thread
 * simulates the batches, feed after feed in turn (each feed's in order),
 * and sleeps when there are none. A lock is taken once per batch of
 * SIM_BATCH references on each side, and a thread sleeps only when it has
 * nothing to do (the simulator) or its feed is SIM_DEPTH batches ahead
 * (the consumer: the simulator gets to each feed at least once a round, so
 * no consumer waits long, as the heartbeat its producer watches needs).
 *
 * A batch is one of the recoverer's: the feed keeps the array it is handed
 * and gives the recoverer an empty one (rep_recover__set_batch), so no
 * reference is copied (the copy was a seventh of a consumer's time; other
 * sinks' batches, short or not the recoverer's, are still copied). A
 * sleeping simulator is woken when a feed has SIM_WAKE batches queued, or
 * when a consumer flushes, drains or waits, rather than for every batch:
 * the wake-ups, a futex call and a context switch each, cost about as much
 * as the copy did.
 *
 * Handing over has a price of its own: the simulator's CPU reads every
 * reference the consumer's wrote, and the consumer writes the next batches
 * into lines that CPU then holds. With a single busy consumer (one target
 * thread) that made recovery two and a half times slower than the
 * simulation it spared. So a consumer simulates a batch itself when
 * nothing of its feed is queued and no one else simulates (a try-lock,
 * never a wait), and hands over only when another thread simulates.
 */
#include "src/instr-sim.h"
#include "src/instr-nice.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_BATCH REP_RECOVER_BATCH	/* references: 48 KiB, some 20 µs of simulation */
#define SIM_DEPTH 6		/* a feed's batches: filling, queued, simulated */
#define SIM_WAKE 2		/* batches queued that wake a sleeping simulator */
#define SIM_ALIVE_NS 100000000	/* a waiting consumer says it is alive this often */

/* A window of the simulated caches to begin (csim__window_begin) after a
 * window on for on and a gap of off, which add up when asked again. */
struct window_ask {
	bool begin;
	double on, off;
};

static void ask_window(struct window_ask *w, double on, double off)
{
	w->begin = true;
	w->on += on;
	w->off += off;
}

struct sim_batch {
	size_t n;
	struct rep_ref *refs;	/* SIM_BATCH, from malloc (as the recoverer's) */
	struct window_ask window;	/* a feed's, to begin before these */
};

struct sim_feed {
	struct sim_stage *sg;
	struct sim_feed *next;			/* the stage's list (under m) */
	struct rep_recover *rec;		/* whose arrays the feed keeps, or NULL */
	struct sim_batch *fill;			/* the consumer's (no lock) */
	void (*alive)(void *arg);		/* sim_feed__while_waiting's */
	void *alive_arg;
	/* under the stage's m */
	struct sim_batch *queue[SIM_DEPTH];	/* handed over, oldest at head */
	unsigned head, queued;
	struct sim_batch *spare[SIM_DEPTH];	/* simulated, to be filled again */
	unsigned nspare;
	unsigned owned;				/* batches allocated */
	bool busy;				/* the simulator has one of them */
	struct window_ask window;		/* for the next batch queued */
};

struct sim_stage {
	pthread_mutex_t m;
	pthread_cond_t work;		/* the simulator waits for a batch */
	pthread_cond_t room;		/* a batch was simulated */
	unsigned room_waiters;
	bool sleeping, quit;
	struct window_ask window;	/* sim_stage__window's, not yet begun */
	struct sim_feed *feeds, *turn;	/* turn: the next feed to look at */
	pthread_mutex_t sim_lock;	/* the simulator's results */
	struct csim *const *sim;
	const _Atomic int *nice;	/* the niceness asked for (instr-nice.h) */
	pthread_t th;
};

/* The next feed with a batch queued, from where the last round stopped. */
static struct sim_feed *next_ready(struct sim_stage *sg)
{
	struct sim_feed *start = sg->turn ? sg->turn : sg->feeds;

	for (struct sim_feed *f = start; f; f = f->next)
		if (f->queued)
			return f;
	for (struct sim_feed *f = sg->feeds; f && f != start; f = f->next)
		if (f->queued)
			return f;
	return NULL;
}

/* The stage's window asked, if one is to begin (m held). */
static struct window_ask take_window(struct sim_stage *sg)
{
	struct window_ask w = sg->window;

	sg->window = (struct window_ask){ 0 };
	return w;
}

/* (sim_lock held) */
static void run_batch(struct sim_stage *sg, const struct rep_ref *refs, size_t n,
		      struct window_ask w)
{
	if (w.begin)	/* -ENOMEM: the lines stay fresh, as in one long window */
		csim__window_begin(*sg->sim, w.on, w.off);
	csim__refs(*sg->sim, refs, n);	/* -ENOMEM: a PC's row lost, as before */
}

static void simulate(struct sim_stage *sg, struct sim_batch *b, struct window_ask w)
{
	pthread_mutex_lock(&sg->sim_lock);
	run_batch(sg, b->refs, b->n, w);
	pthread_mutex_unlock(&sg->sim_lock);
}

static void *simulator(void *arg)
{
	struct sim_stage *sg = arg;
	int nice = INSTR_NICE_UNSET;

	pthread_mutex_lock(&sg->m);
	for (;;) {
		struct sim_feed *f = next_ready(sg);
		if (!f) {
			if (sg->quit)
				break;
			sg->sleeping = true;
			pthread_cond_wait(&sg->work, &sg->m);
			sg->sleeping = false;
			continue;
		}
		struct sim_batch *b = f->queue[f->head];
		f->head = (f->head + 1) % SIM_DEPTH;
		f->queued--;
		f->busy = true;
		sg->turn = f->next;
		struct window_ask window = take_window(sg);
		if (b->window.begin)	/* (a stage's and a feed's: one or the other) */
			window = b->window;
		b->window = (struct window_ask){ 0 };
		pthread_mutex_unlock(&sg->m);
		if (sg->nice)
			instr__follow_nice(sg->nice, &nice);
		simulate(sg, b, window);
		pthread_mutex_lock(&sg->m);
		b->n = 0;
		f->spare[f->nspare++] = b;
		f->busy = false;
		if (sg->room_waiters)
			pthread_cond_broadcast(&sg->room);
	}
	pthread_mutex_unlock(&sg->m);
	return NULL;
}

int sim_stage__new(struct csim *const *sim, const _Atomic int *nice, struct sim_stage **out)
{
	struct sim_stage *sg = calloc(1, sizeof *sg);

	*out = NULL;
	if (!sg)
		return -ENOMEM;
	sg->sim = sim;
	sg->nice = nice;
	pthread_mutex_init(&sg->m, NULL);
	pthread_mutex_init(&sg->sim_lock, NULL);
	pthread_cond_init(&sg->work, NULL);
	pthread_condattr_t monotonic;
	pthread_condattr_init(&monotonic);
	pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
	pthread_cond_init(&sg->room, &monotonic);
	pthread_condattr_destroy(&monotonic);
	int rc = pthread_create(&sg->th, NULL, simulator, sg);
	if (rc != 0) {
		free(sg);
		return -rc;
	}
	pthread_setname_np(sg->th, "padrone-sim");
	*out = sg;
	return 0;
}

void sim_stage__free(struct sim_stage *sg)
{
	if (!sg)
		return;
	pthread_mutex_lock(&sg->m);
	sg->quit = true;
	pthread_cond_signal(&sg->work);
	pthread_mutex_unlock(&sg->m);
	pthread_join(sg->th, NULL);
	pthread_cond_destroy(&sg->room);
	pthread_cond_destroy(&sg->work);
	pthread_mutex_destroy(&sg->sim_lock);
	pthread_mutex_destroy(&sg->m);
	free(sg);
}

void sim_stage__lock(struct sim_stage *sg)
{
	pthread_mutex_lock(&sg->sim_lock);
}

void sim_stage__unlock(struct sim_stage *sg)
{
	pthread_mutex_unlock(&sg->sim_lock);
}

void sim_stage__window(struct sim_stage *sg, double on_s, double off_s)
{
	pthread_mutex_lock(&sg->m);
	ask_window(&sg->window, on_s, off_s);
	pthread_mutex_unlock(&sg->m);
}

/* (m held) */
static bool all_simulated(const struct sim_stage *sg)
{
	for (const struct sim_feed *f = sg->feeds; f; f = f->next)
		if (f->queued || f->busy)
			return false;
	return true;
}

bool sim_stage__idle(struct sim_stage *sg)
{
	pthread_mutex_lock(&sg->m);
	bool idle = all_simulated(sg);
	pthread_mutex_unlock(&sg->m);
	return idle;
}

double sim_stage__cpu_s(struct sim_stage *sg)
{
	clockid_t clock;
	struct timespec ts;

	if (pthread_getcpuclockid(sg->th, &clock) != 0 || clock_gettime(clock, &ts) != 0)
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool sim_stage__window_if_idle(struct sim_stage *sg, double on_s, double off_s)
{
	pthread_mutex_lock(&sg->m);
	bool idle = all_simulated(sg);
	if (idle) {
		struct window_ask w = take_window(sg);	/* one asked before, never begun */
		pthread_mutex_lock(&sg->sim_lock);
		csim__window_begin(*sg->sim, on_s + w.on, off_s + w.off);
		pthread_mutex_unlock(&sg->sim_lock);
	}
	pthread_mutex_unlock(&sg->m);
	return idle;
}

int sim_stage__open_feed(struct sim_stage *sg, struct sim_feed **out)
{
	struct sim_feed *f = calloc(1, sizeof *f);

	*out = NULL;
	if (!f)
		return -ENOMEM;
	f->sg = sg;
	pthread_mutex_lock(&sg->m);
	f->next = sg->feeds;
	sg->feeds = f;
	pthread_mutex_unlock(&sg->m);
	*out = f;
	return 0;
}

void sim_feed__while_waiting(struct sim_feed *f, void (*alive)(void *arg), void *arg)
{
	f->alive = alive;
	f->alive_arg = arg;
}

/* Until a batch is simulated, or a slice passes and the consumer says it
 * is alive (m held). */
static void wait_room(struct sim_feed *f)
{
	struct sim_stage *sg = f->sg;
	struct timespec until;

	sg->room_waiters++;
	if (!f->alive) {
		pthread_cond_wait(&sg->room, &sg->m);
	} else {
		util_deadline_ns(&until, SIM_ALIVE_NS);
		if (pthread_cond_timedwait(&sg->room, &sg->m, &until) == ETIMEDOUT)
			f->alive(f->alive_arg);
	}
	sg->room_waiters--;
}

/* A batch to fill: a simulated one, a new one while the feed has fewer
 * than SIM_DEPTH, else the next one simulated (m held). NULL: out of
 * memory, and the references are lost (as a simulator's row would be). */
static struct sim_batch *empty_batch(struct sim_feed *f)
{
	struct sim_stage *sg = f->sg;

	while (!f->nspare && f->owned == SIM_DEPTH) {
		if (sg->sleeping)	/* every batch but this is queued */
			pthread_cond_signal(&sg->work);
		wait_room(f);
	}
	if (f->nspare)
		return f->spare[--f->nspare];
	struct sim_batch *b = malloc(sizeof *b);
	if (b && !(b->refs = malloc(SIM_BATCH * sizeof *b->refs))) {
		free(b);
		b = NULL;
	}
	if (b) {
		b->n = 0;
		f->owned++;
	}
	return b;
}

static void free_batch(struct sim_batch *b)
{
	if (b)
		free(b->refs);
	free(b);
}

/* The batch being filled to the simulator, if it holds any. A sleeping
 * simulator is woken once SIM_WAKE batches wait, or for any if wake (m
 * held). */
static void queue_fill(struct sim_feed *f, bool wake)
{
	struct sim_stage *sg = f->sg;

	if (f->fill && f->fill->n) {
		f->fill->window = f->window;
		f->window = (struct window_ask){ 0 };
		f->queue[(f->head + f->queued) % SIM_DEPTH] = f->fill;
		f->queued++;
		f->fill = NULL;
	}
	if (sg->sleeping && f->queued && (wake || f->queued >= SIM_WAKE))
		pthread_cond_signal(&sg->work);
}

/* The batch being filled to the simulator, and a fresh one to fill. */
static void hand_over(struct sim_feed *f)
{
	struct sim_stage *sg = f->sg;

	pthread_mutex_lock(&sg->m);
	queue_fill(f, false);
	if (!f->fill)
		f->fill = empty_batch(f);
	pthread_mutex_unlock(&sg->m);
}

void sim_feed__keep_batches(struct sim_feed *f, struct rep_recover *rec)
{
	f->rec = rec;
}

/* A whole batch of the recoverer's, while none is being filled: keep its
 * array, give it the empty one. */
static bool keep_batch(struct sim_feed *f, const struct rep_ref *refs, size_t n)
{
	if (!f->rec || n != SIM_BATCH || (f->fill && f->fill->n))
		return false;
	if (!f->fill)
		hand_over(f);
	if (!f->fill)
		return false;
	struct rep_ref *empty = f->fill->refs;
	f->fill->refs = (struct rep_ref *)refs;	/* the recoverer's, now ours */
	f->fill->n = n;
	rep_recover__set_batch(f->rec, empty);
	hand_over(f);
	return true;
}

/* The refs simulated by the consumer itself, when nothing of its feed
 * waits and no one else simulates: handing a batch to the simulator's CPU
 * cost the consumer more than simulating it (every reference's 24 bytes
 * written into lines that CPU last held: a loop's units were recovered at
 * 30 M/s handed over, 75 M/s kept). */
static bool simulate_here(struct sim_feed *f, const struct rep_ref *refs, size_t n)
{
	struct sim_stage *sg = f->sg;
	struct window_ask w = { 0 };

	pthread_mutex_lock(&sg->m);
	bool here = !f->queued && !f->busy && pthread_mutex_trylock(&sg->sim_lock) == 0;
	if (here) {
		w = f->window.begin ? f->window : take_window(sg);
		f->window = (struct window_ask){ 0 };
		f->busy = true;
	}
	pthread_mutex_unlock(&sg->m);
	if (!here)
		return false;
	if (f->fill && f->fill->n) {	/* copied earlier, the consumer's still */
		run_batch(sg, f->fill->refs, f->fill->n, w);
		f->fill->n = 0;
		w = (struct window_ask){ 0 };
	}
	run_batch(sg, refs, n, w);
	pthread_mutex_unlock(&sg->sim_lock);
	pthread_mutex_lock(&sg->m);
	f->busy = false;
	if (sg->room_waiters)
		pthread_cond_broadcast(&sg->room);
	pthread_mutex_unlock(&sg->m);
	return true;
}

void sim_feed__refs(void *arg, const struct rep_ref *refs, size_t n)
{
	struct sim_feed *f = arg;

	if (simulate_here(f, refs, n) || keep_batch(f, refs, n))
		return;
	if (f->fill && f->fill->n + n > SIM_BATCH && n <= SIM_BATCH)
		hand_over(f);	/* a batch stays whole: a loop's run is never cut */
	while (n) {
		if (!f->fill || f->fill->n == SIM_BATCH)
			hand_over(f);
		if (!f->fill)
			return;
		size_t k = SIM_BATCH - f->fill->n < n ? SIM_BATCH - f->fill->n : n;
		memcpy(f->fill->refs + f->fill->n, refs, k * sizeof *refs);
		f->fill->n += k;
		refs += k;
		n -= k;
	}
}

void sim_feed__window(struct sim_feed *f, double on, double off)
{
	pthread_mutex_lock(&f->sg->m);
	queue_fill(f, false);
	ask_window(&f->window, on, off);
	pthread_mutex_unlock(&f->sg->m);
}

void sim_feed__flush(struct sim_feed *f)
{
	pthread_mutex_lock(&f->sg->m);
	queue_fill(f, true);
	pthread_mutex_unlock(&f->sg->m);
}

void sim_feed__drain(struct sim_feed *f)
{
	struct sim_stage *sg = f->sg;

	pthread_mutex_lock(&sg->m);
	if (f->queued && sg->sleeping)
		pthread_cond_signal(&sg->work);
	while (f->queued || f->busy) {
		sg->room_waiters++;
		pthread_cond_wait(&sg->room, &sg->m);
		sg->room_waiters--;
	}
	pthread_mutex_unlock(&sg->m);
}

void sim_feed__close(struct sim_feed *f)
{
	if (!f)
		return;
	struct sim_stage *sg = f->sg;
	sim_feed__drain(f);
	pthread_mutex_lock(&sg->m);
	for (struct sim_feed **p = &sg->feeds; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			break;
		}
	if (sg->turn == f)
		sg->turn = f->next;
	pthread_mutex_unlock(&sg->m);
	free_batch(f->fill);
	for (unsigned i = 0; i < f->nspare; i++)
		free_batch(f->spare[i]);
	free(f);
}
