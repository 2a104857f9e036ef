/* jobs.h: the commands padroned runs for its clients (private to src/).
 *
 * Every COMMAND a client sends becomes a job. Jobs run on worker threads
 * against the one session padroned holds and share it by what each command
 * does to it (padrone_cmd_access, from the command's flags):
 *   - one job at a time holds the session, in the order the jobs came;
 *   - a profile lets go of the session while it samples (the session's wait
 *     hook, session.h): meanwhile commands that only read it (info, bt, cfg,
 *     loops, disas, help, hot of the last profile) hold it in turn, while
 *     another profile and every command that may change the process wait
 *     for the profile to end; when its sampling is over the profile takes
 *     the session back before anything else starts;
 *   - a client's own commands run in the order it sent them.
 * A job that has waited PADRONE_JOBS_NOTICE_MS for another client's is told
 * once what it waits for: "padroned: busy: waiting for profile of client 3
 * (pid 4242)". So at most two workers exist: the holder and a sampling
 * profile.
 *
 * Cancelling (the client's CANCEL, or its hanging up): a job still waiting
 * is answered at once; a running one is interrupted as ^C interrupts it in
 * padrone (a profile ends with what it sampled, a measure with the calls
 * timed so far); other commands are bounded and finish. A job whose client
 * has gone finishes unseen.
 *
 * Everything here is called from the server's loop, one thread: the
 * workers report through padrone_jobs_fd, and the loop then calls
 * padrone_jobs_run, which answers finished jobs and starts the next ones.
 * Long-lived background work (live instrumentation's analysis threads, to
 * come) is not a job: it runs on threads of its own, and only the commands
 * that start, query or stop it go through here.
 */
#ifndef PADRONE_SRC_JOBS_H
#define PADRONE_SRC_JOBS_H

#include <stdbool.h>
#include <stddef.h>

#include "src/cmd.h"

#define PADRONE_JOBS_NOTICE_MS 100

struct padrone_jobs;

/* How jobs talk back to their clients (owner: the server's connection). */
struct padrone_jobs_ops {
	/* A finished job's output and exit status (text not NUL-terminated).
	 * Not called for a job whose owner was forgotten. */
	void (*reply)(void *owner, const char *out, size_t out_len, const char *err,
		      size_t err_len, int status);
	/* One line for the owner's standard error while its job waits. */
	void (*notice)(void *owner, const char *line);
};
/* The callbacks must not call back into padrone_jobs_*. */

/* Jobs on ctl's session (which gets the wait hook). 0 or -errno. */
int padrone_jobs_new(struct padrone_ctl *ctl, const struct padrone_jobs_ops *ops,
		     struct padrone_jobs **out);
/* Only once padrone_jobs_count(jobs, NULL) is 0. */
void padrone_jobs_free(struct padrone_jobs *jobs);
/* Readable when a worker has news: then call padrone_jobs_run. */
int padrone_jobs_fd(const struct padrone_jobs *jobs);

/* Queue a command: words as padrone_msg_unpack_words made them (one
 * allocation, taken over), count >= 1; client names the owner in others'
 * notices ("client 3 (pid 4242)"). 0 or -ENOMEM (words then freed). */
int padrone_jobs_submit(struct padrone_jobs *jobs, void *owner, const char *client, int count,
			char **words, long now_ms);
/* Cancel owner's jobs (see above); waiting ones are answered with a line
 * saying so and status 1. forget: the owner has gone; nothing of its jobs
 * is reported to it again. */
void padrone_jobs_cancel(struct padrone_jobs *jobs, void *owner, bool forget);
/* Cancel every job: the waiting ones are answered "not run: why". */
void padrone_jobs_stop(struct padrone_jobs *jobs, const char *why);

/* Answer finished jobs, start those whose turn it is, send the notices
 * due. Returns the ms until a notice falls due (-1: none). */
int padrone_jobs_run(struct padrone_jobs *jobs, long now_ms);
/* Has a finished job set ctl->quit (detach, quit)? Then no job starts
 * any more. Read ctl->quit only through this while jobs may run. */
bool padrone_jobs_quit(const struct padrone_jobs *jobs);
/* Start nothing new (paused) or go on. While paused, a profile back from
 * sampling still gets the session back and finishes. */
void padrone_jobs_pause(struct padrone_jobs *jobs, bool paused);
/* Does no job use the session now (a profile may be sampling: it does not
 * touch the session until it is given it back)? Then, with the jobs
 * paused, the loop's thread may use the session itself. */
bool padrone_jobs_session_free(struct padrone_jobs *jobs);
/* Jobs of owner (NULL: of anyone) not answered yet. */
int padrone_jobs_count(const struct padrone_jobs *jobs, const void *owner);

#endif
