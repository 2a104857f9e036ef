/* progress.h: progress of a long command on a terminal (private to src/).
 *
 * Anything that takes longer than a second tells how far it is -- elapsed
 * of total, samples so far -- on one line of standard error, rewritten in
 * place and erased when done. Only when that stream is a terminal: nothing
 * of it reaches pipes, files, JSON or padroned's replies (memory streams).
 */
#ifndef PADRONE_SRC_PROGRESS_H
#define PADRONE_SRC_PROGRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct padrone_progress {
	FILE *tty;		/* NULL: not a terminal, show nothing */
	const char *what;	/* "profile" */
	const char *unit;	/* of the count: "samples" */
	bool shown;		/* a line is on the screen */
};

/* what: the command; unit: what is counted ("samples", "calls"). */
void padrone_progress_init(struct padrone_progress *p, FILE *err, const char *what,
			   const char *unit);
/* "profile: 3.0 of 10.0 s, 2991 samples" (count 0: not shown; total 0:
 * "cfg: 3.0 s"), once a second has gone by. */
void padrone_progress_show(struct padrone_progress *p, double elapsed_s, double total_s,
			   uint64_t count);
/* The progress callback of padrone_profile_opts and padrone_measure_opts,
 * for a struct padrone_progress *arg. */
void padrone_progress_cb(void *arg, double elapsed_s, double total_s, uint64_t count);
/* Erase the line, if one was shown. */
void padrone_progress_done(struct padrone_progress *p);

/* For work that tells nothing as it goes (cfg's first look at a big
 * module: its symbols, its code): a thread shows "cfg: 2.3 s" on a
 * terminal from the first second on, until padrone_ticker_stop erases
 * it. Nothing at all when err is no terminal. */
struct padrone_ticker {
	struct padrone_progress p;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool started, stop;
};

void padrone_ticker_start(struct padrone_ticker *t, FILE *err, const char *what);
void padrone_ticker_stop(struct padrone_ticker *t);

#endif
