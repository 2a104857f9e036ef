/* jobs.c: padroned's commands on worker threads, sharing one session (see
 * jobs.h). The loop thread owns the list of jobs and its links; the fields
 * a worker also touches (state, in_wait, cancelled, holder, sampler) are
 * read and written under the lock. */
#include "src/jobs.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "src/session.h"

enum job_state {
	JOB_QUEUED,	/* waits for its turn */
	JOB_HOLDING,	/* runs, holding the session */
	JOB_SAMPLING,	/* its profile samples: the session is free for reads */
	JOB_RESUMING,	/* its sampling is over: wants the session back */
	JOB_DONE,	/* finished: its output waits for the loop */
};

struct job {
	struct job *next;
	struct padrone_jobs *jobs;
	void *owner;		/* NULL once forgotten */
	char client[64];
	int count;
	char **words;
	enum padrone_cmd_access access;	/* decided when it starts */
	enum job_state state;
	bool cancelled;		/* its client cancelled it, or padroned leaves */
	bool in_wait;		/* between the wait hook's begin and end */
	bool started;		/* its thread exists (join it) */
	bool noticed;		/* told what it waits for */
	char notice[192];	/* ... to be told at the end of this run */
	long queued_ms;		/* since when it waits for another client's job */
	pthread_t thread;
	char *out, *err;
	size_t out_len, err_len;
	int status;
};

struct padrone_jobs {
	struct padrone_ctl *ctl;
	struct padrone_jobs_ops ops;
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* holder changed: a resuming profile may go on */
	int fd;			/* eventfd: a worker has news for the loop */
	struct job *head, **tail;	/* jobs not answered yet, in arrival order */
	struct job *holder;	/* holds the session */
	struct job *sampler;	/* samples, the session let go */
	bool quit;		/* a finished job set ctl->quit */
	bool paused;		/* padrone_jobs_pause: nothing new starts */
};

/* The job the calling worker runs (the wait hook's caller). */
static _Thread_local struct job *current;

static void wake_loop(struct padrone_jobs *jobs)
{
	uint64_t one = 1;

	if (write(jobs->fd, &one, sizeof(one)) < 0) {
		/* an eventfd counter does not overflow from a few wake-ups */
	}
}

static void free_job(struct job *j)
{
	free(j->words);
	free(j->out);
	free(j->err);
	free(j);
}

/* ---------------------------------------------------------------- workers */

static void *worker(void *arg)
{
	struct job *j = arg;
	struct padrone_jobs *jobs = j->jobs;
	FILE *out = open_memstream(&j->out, &j->out_len);
	FILE *err = open_memstream(&j->err, &j->err_len);
	int status = PADRONE_EXIT_FAILURE;

	current = j;
	if (out && err)
		status = padrone_ctl_run(jobs->ctl, j->count, j->words, out, err);
	else if (err)
		fprintf(err, "padroned: out of memory\n");
	if (out)
		fclose(out);
	if (err)
		fclose(err);
	pthread_mutex_lock(&jobs->lock);
	j->status = status;
	j->state = JOB_DONE;
	pthread_mutex_unlock(&jobs->lock);
	wake_loop(jobs);
	return NULL;
}

/* The session's wait hook: a profile lets go of the session while it
 * samples and takes it back after; any job in a wait can be interrupted,
 * also one cancelled before its wait began. */
static void on_wait(struct padrone_session *s, bool begin, void *arg)
{
	struct padrone_jobs *jobs = arg;
	struct job *j = current;
	bool interrupt = false, released = false;

	if (!j)
		return;
	pthread_mutex_lock(&jobs->lock);
	j->in_wait = begin;
	if (begin) {
		interrupt = j->cancelled;
		if (j->access == PADRONE_ACCESS_SAMPLE && jobs->holder == j) {
			jobs->holder = NULL;
			jobs->sampler = j;
			j->state = JOB_SAMPLING;
			released = true;
		}
	} else if (jobs->sampler == j) {
		j->state = JOB_RESUMING;
		wake_loop(jobs);
		while (jobs->holder != j)
			pthread_cond_wait(&jobs->cond, &jobs->lock);
	}
	pthread_mutex_unlock(&jobs->lock);
	if (released)
		wake_loop(jobs);
	if (interrupt)
		padrone_session__interrupt(s);
}

/* ------------------------------------------------------------- lifetime */

int padrone_jobs_new(struct padrone_ctl *ctl, const struct padrone_jobs_ops *ops,
		     struct padrone_jobs **out)
{
	struct padrone_jobs *jobs = calloc(1, sizeof(*jobs));

	*out = NULL;
	if (!jobs)
		return -ENOMEM;
	jobs->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (jobs->fd < 0) {
		int e = -errno;
		free(jobs);
		return e;
	}
	jobs->ctl = ctl;
	jobs->ops = *ops;
	jobs->tail = &jobs->head;
	pthread_mutex_init(&jobs->lock, NULL);
	pthread_cond_init(&jobs->cond, NULL);
	padrone_session_set_wait_hook(ctl->session, on_wait, jobs);
	*out = jobs;
	return 0;
}

void padrone_jobs_free(struct padrone_jobs *jobs)
{
	if (!jobs)
		return;
	padrone_session_set_wait_hook(jobs->ctl->session, NULL, NULL);
	pthread_mutex_destroy(&jobs->lock);
	pthread_cond_destroy(&jobs->cond);
	close(jobs->fd);
	free(jobs);
}

int padrone_jobs_fd(const struct padrone_jobs *jobs)
{
	return jobs->fd;
}

int padrone_jobs_submit(struct padrone_jobs *jobs, void *owner, const char *client, int count,
			char **words, long now_ms)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j) {
		free(words);
		return -ENOMEM;
	}
	j->jobs = jobs;
	j->owner = owner;
	snprintf(j->client, sizeof(j->client), "%s", client);
	j->count = count;
	j->words = words;
	j->queued_ms = now_ms;
	*jobs->tail = j;	/* the lock guards no links: only this thread has them */
	jobs->tail = &j->next;
	wake_loop(jobs);	/* the next run may start it */
	return 0;
}

int padrone_jobs_count(const struct padrone_jobs *jobs, const void *owner)
{
	int n = 0;

	for (const struct job *j = jobs->head; j; j = j->next)
		n += !owner || j->owner == owner;
	return n;
}

/* ------------------------------------------------------------ scheduling */

static bool has_earlier_of_owner(const struct padrone_jobs *jobs, const struct job *j)
{
	for (const struct job *e = jobs->head; e != j; e = e->next)
		if (j->owner && e->owner == j->owner)
			return true;
	return false;
}

/* Take the finished jobs out of the list (locked); returns them. */
static struct job *take_done(struct padrone_jobs *jobs)
{
	struct job *done = NULL, **done_tail = &done, **pp = &jobs->head;

	while (*pp) {
		struct job *j = *pp;
		if (j->state != JOB_DONE) {
			pp = &j->next;
			continue;
		}
		*pp = j->next;
		if (jobs->holder == j)
			jobs->holder = NULL;
		j->next = NULL;
		*done_tail = j;
		done_tail = &j->next;
	}
	jobs->tail = pp;
	return done;
}

static void start(struct padrone_jobs *jobs, struct job *j)
{
	j->state = JOB_HOLDING;
	jobs->holder = j;
	if (pthread_create(&j->thread, NULL, worker, j) == 0) {
		j->started = true;
		return;
	}
	jobs->holder = NULL;
	j->state = JOB_DONE;
	j->err = strdup("padroned: cannot start a thread for the command\n");
	j->err_len = j->err ? strlen(j->err) : 0;
	wake_loop(jobs);
}

/* Give the session back to a profile done sampling (locked), before
 * anything else starts. */
static void resume_sampler(struct padrone_jobs *jobs)
{
	struct job *s = jobs->sampler;

	if (jobs->holder || !s || s->state != JOB_RESUMING)
		return;
	jobs->sampler = NULL;
	jobs->holder = s;
	s->state = JOB_HOLDING;
	pthread_cond_broadcast(&jobs->cond);
}

/* Start the first job in order that may run now, if the session is free
 * (locked). */
static void start_next(struct padrone_jobs *jobs)
{
	struct job *s = jobs->sampler;

	if (jobs->paused || jobs->holder || (s && s->state == JOB_RESUMING))
		return;
	for (struct job *j = jobs->head; j; j = j->next) {
		if (j->state != JOB_QUEUED || has_earlier_of_owner(jobs, j))
			continue;
		/* Safe now: no job uses the session (a sampler only waits). */
		j->access = padrone_cmd_access(jobs->ctl, j->words[0]);
		if (s && j->access != PADRONE_ACCESS_READ)
			continue;
		start(jobs, j);
		if (jobs->holder)
			return;
	}
}

/* What a waiting job waits for (locked), or NULL: nothing, or only its own
 * client's earlier command (that client knows). */
static const struct job *blocker(const struct padrone_jobs *jobs, const struct job *j)
{
	if (has_earlier_of_owner(jobs, j))
		return NULL;
	return jobs->holder ? jobs->holder : jobs->sampler;
}

/* Prepare the notices due (locked); returns ms until the next, or -1. */
static int prepare_notices(struct padrone_jobs *jobs, long now)
{
	long next = -1;

	for (struct job *j = jobs->head; j; j = j->next) {
		if (j->state != JOB_QUEUED || j->noticed || !j->owner)
			continue;
		if (has_earlier_of_owner(jobs, j)) {
			j->queued_ms = now;	/* its own wait starts when it is next */
			continue;
		}
		long left = j->queued_ms + PADRONE_JOBS_NOTICE_MS - now;
		const struct job *b = blocker(jobs, j);
		if (left > 0 && b) {
			next = next < 0 || left < next ? left : next;
			continue;
		}
		if (!b)
			continue;
		snprintf(j->notice, sizeof(j->notice), "padroned: busy: waiting for %s of %s\n",
			 b->words[0], b->client);
		j->noticed = true;
	}
	return (int)next;
}

int padrone_jobs_run(struct padrone_jobs *jobs, long now_ms)
{
	uint64_t v;

	if (read(jobs->fd, &v, sizeof(v)) < 0) {
		/* nothing pending: this run is the loop's own */
	}
	pthread_mutex_lock(&jobs->lock);
	struct job *done = take_done(jobs);
	pthread_mutex_unlock(&jobs->lock);
	for (struct job *j = done; j; j = j->next)
		if (j->started)
			pthread_join(j->thread, NULL);
	/* Joined: what they did to ctl is seen. After detach nothing starts. */
	jobs->quit |= jobs->ctl->quit;
	pthread_mutex_lock(&jobs->lock);
	resume_sampler(jobs);
	if (!jobs->quit)
		start_next(jobs);
	int next = prepare_notices(jobs, now_ms);
	bool idle = done && !jobs->head;
	pthread_mutex_unlock(&jobs->lock);

	while (done) {
		struct job *j = done;
		done = j->next;
		if (j->owner)
			jobs->ops.reply(j->owner, j->out, j->out_len, j->err, j->err_len, j->status);
		free_job(j);
	}
	for (struct job *j = jobs->head; j; j = j->next) {
		if (j->notice[0]) {
			jobs->ops.notice(j->owner, j->notice);
			j->notice[0] = '\0';
		}
	}
	/* Each command runs on a thread of its own, and so does each
	 * instrumented thread's consumer: glibc gives threads arenas of their
	 * own, whose freed pages stay with padroned (its RSS crept up by
	 * 0.2 MB an instrument cycle in the soak). Given back whenever the
	 * last command has ended. */
	if (idle)
		malloc_trim(0);
	return next;
}

bool padrone_jobs_quit(const struct padrone_jobs *jobs)
{
	return jobs->quit;
}

void padrone_jobs_pause(struct padrone_jobs *jobs, bool paused)
{
	pthread_mutex_lock(&jobs->lock);
	jobs->paused = paused;
	pthread_mutex_unlock(&jobs->lock);
	wake_loop(jobs);
}

bool padrone_jobs_session_free(struct padrone_jobs *jobs)
{
	pthread_mutex_lock(&jobs->lock);
	bool resuming = jobs->sampler && jobs->sampler->state == JOB_RESUMING;
	bool free_now = !jobs->holder && !resuming;
	pthread_mutex_unlock(&jobs->lock);
	return free_now;
}

/* ------------------------------------------------------------ cancelling */

/* Cancel the jobs of owner (every job when why is given): the waiting ones
 * come out of the list, answered with a line saying so (and why). */
static void cancel(struct padrone_jobs *jobs, void *owner, bool forget, const char *why)
{
	struct job *waiting = NULL, **pp = &jobs->head;
	bool interrupt = false;

	pthread_mutex_lock(&jobs->lock);
	while (*pp) {
		struct job *j = *pp;
		if (!why && j->owner != owner) {
			pp = &j->next;
			continue;
		}
		if (j->state == JOB_QUEUED) {
			*pp = j->next;
			j->next = waiting;
			waiting = j;
			continue;
		}
		j->cancelled = true;
		interrupt |= j->in_wait;	/* else its wait's begin sees cancelled */
		if (forget)
			j->owner = NULL;
		pp = &j->next;
	}
	jobs->tail = pp;
	pthread_mutex_unlock(&jobs->lock);
	/* At most one job waits at a time (a holder that reads never does). */
	if (interrupt)
		padrone_session__interrupt(jobs->ctl->session);
	while (waiting) {
		struct job *j = waiting;
		char line[256];
		waiting = j->next;
		if (!forget && j->owner) {
			if (why)
				snprintf(line, sizeof(line), "padroned: %s was not run: %s\n",
					 j->words[0], why);
			else
				snprintf(line, sizeof(line), "padroned: %s cancelled before it began\n",
					 j->words[0]);
			jobs->ops.reply(j->owner, NULL, 0, line, strlen(line), PADRONE_EXIT_FAILURE);
		}
		free_job(j);
	}
	wake_loop(jobs);	/* what waited behind them may start */
}

void padrone_jobs_cancel(struct padrone_jobs *jobs, void *owner, bool forget)
{
	cancel(jobs, owner, forget, NULL);
}

void padrone_jobs_stop(struct padrone_jobs *jobs, const char *why)
{
	cancel(jobs, NULL, false, why);
}
