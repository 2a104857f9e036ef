/* progress.c: one line of progress on a terminal, erased when done. */
#include "src/progress.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

/* Shorter commands say nothing: a line that flashes is noise. */
#define PROGRESS_AFTER_S 1.0

void padrone_progress_init(struct padrone_progress *p, FILE *err, const char *what,
			   const char *unit)
{
	int fd = err ? fileno(err) : -1;	/* -1 for memory streams */

	p->tty = fd >= 0 && isatty(fd) ? err : NULL;
	p->what = what;
	p->unit = unit;
	p->shown = false;
}

void padrone_progress_show(struct padrone_progress *p, double elapsed_s, double total_s,
			   uint64_t count)
{
	if (!p->tty || elapsed_s < PROGRESS_AFTER_S)
		return;
	if (total_s > 0)
		fprintf(p->tty, "\r\033[K%s: %.1f of %.1f s", p->what, elapsed_s, total_s);
	else
		fprintf(p->tty, "\r\033[K%s: %.1f s", p->what, elapsed_s);
	if (count)
		fprintf(p->tty, ", %llu %s", (unsigned long long)count, p->unit);
	fflush(p->tty);
	p->shown = true;
}

void padrone_progress_cb(void *arg, double elapsed_s, double total_s, uint64_t count)
{
	padrone_progress_show(arg, elapsed_s, total_s, count);
}

void padrone_progress_done(struct padrone_progress *p)
{
	if (p->shown) {
		fputs("\r\033[K", p->tty);
		fflush(p->tty);
	}
	p->shown = false;
}

/* ---------------------------------------------------------------- ticker */

#define TICK_NS 100000000L	/* the line's refresh */

static void *tick(void *arg)
{
	struct padrone_ticker *t = arg;
	uint64_t t0 = util_now_ns();

	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		struct timespec until;
		util_deadline_ns(&until, TICK_NS);
		if (pthread_cond_timedwait(&t->cond, &t->lock, &until) == ETIMEDOUT && !t->stop)
			padrone_progress_show(&t->p, (double)(util_now_ns() - t0) / 1e9, 0, 0);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

void padrone_ticker_start(struct padrone_ticker *t, FILE *err, const char *what)
{
	padrone_progress_init(&t->p, err, what, "");
	t->started = t->stop = false;
	if (!t->p.tty)
		return;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	/* without a thread the work goes on, silent as before */
	t->started = pthread_create(&t->thread, NULL, tick, t) == 0;
	if (!t->started) {
		pthread_cond_destroy(&t->cond);
		pthread_mutex_destroy(&t->lock);
	}
}

void padrone_ticker_stop(struct padrone_ticker *t)
{
	if (!t->started)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	t->started = false;
	padrone_progress_done(&t->p);
}
