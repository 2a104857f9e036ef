/* instr-sim.h: the cache simulation stage of an instrumentation (src/
 * internal). The consumers (a thread per ring) recover references; one
 * simulator thread ("padrone-sim") simulates them for the whole process,
 * as one cache shared by the threads sees them. A consumer hands its
 * references over in batches through a short queue of its own (a feed);
 * the simulator takes the feeds' batches in turn, so no consumer waits for
 * another, and recovery and simulation run on two CPUs at once.
 */
#ifndef PADRONE_SRC_INSTR_SIM_H
#define PADRONE_SRC_INSTR_SIM_H

#include "pipeline/pipeline.h"

#include <stdbool.h>
#include "pipeline/rep.h"

struct sim_stage;
struct sim_feed;

/* A stage simulating into *sim (read under the stage's lock: whoever
 * replaces it does so while no feed is open). Its thread starts here, and
 * takes the niceness *nice asks for before each batch (instr-nice.h;
 * NULL: its own).
 * 0 or a negative errno. */
int sim_stage__new(struct csim *const *sim, const _Atomic int *nice, struct sim_stage **out);
/* Stops the thread; every feed must be closed. */
void sim_stage__free(struct sim_stage *sg);
/* The simulator's results are read between these (it simulates no batch
 * meanwhile). */
void sim_stage__lock(struct sim_stage *sg);
void sim_stage__unlock(struct sim_stage *sg);

/* The references simulated from the next batch on are a new window's,
 * after off_s switched off, which followed a window on for on_s
 * (csim__window_begin, before that batch: a batch still queued from the
 * window before, which the time off nearly always leaves time to drain,
 * would count in the new one; windows with no batch between add up). */
void sim_stage__window(struct sim_stage *sg, double on_s, double off_s);
/* The window begins now, as sim_stage__window asks, if every batch handed
 * over was simulated (true); else nothing is done (false). */
bool sim_stage__window_if_idle(struct sim_stage *sg, double on_s, double off_s);
/* Every batch handed over was simulated. */
bool sim_stage__idle(struct sim_stage *sg);
/* The simulator thread's CPU time (the batches consumers handed over). */
double sim_stage__cpu_s(struct sim_stage *sg);

/* The feed's references from here on are a new window's, after a gap of
 * off, which followed a window on for on (csim__window_begin before the
 * first batch of them; the references so far are handed over first). For
 * a stream whose gaps are its own (CAB's sampling: units left out), on
 * and off counted in units. */
void sim_feed__window(struct sim_feed *f, double on, double off);

/* A consumer's feed: 0 or -ENOMEM. */
int sim_stage__open_feed(struct sim_stage *sg, struct sim_feed **out);
/* A rep_ref_sink (arg: the feed), on the consumer's thread only: copies
 * the references into the feed's batch, handing it over when full (and
 * waiting while the feed has its most batches queued). */
void sim_feed__refs(void *arg, const struct rep_ref *refs, size_t n);
/* While the consumer waits for room in its feed (the simulator behind),
 * alive(arg) is called on its thread about every 100 ms: its ring's
 * heartbeat (cab_consumer__beat), so that an exhaustive producer waits
 * for a consumer held up by the simulator rather than drop. */
void sim_feed__while_waiting(struct sim_feed *f, void (*alive)(void *arg), void *arg);
/* The feed's references come from rec's whole batches (it is rec's sink):
 * the feed keeps those arrays and gives rec empty ones rather than copy
 * them. Each array is freed by whichever holds it. */
void sim_feed__keep_batches(struct sim_feed *f, struct rep_recover *rec);
/* Hand over what the batch holds, and wake the simulator for whatever is
 * queued (the consumer's end). */
void sim_feed__flush(struct sim_feed *f);
/* Until every batch handed over is simulated (any thread). */
void sim_feed__drain(struct sim_feed *f);
/* Drain, then forget the feed. NULL is fine. */
void sim_feed__close(struct sim_feed *f);

#endif
