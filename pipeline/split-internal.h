/* split-internal.h: what the set splitter (split.c) and its simulator
 * workers (split-worker.c) share: the rings' record format, the slots
 * where a cut reference's parts meet, the worker and splitter state. Not
 * part of pipeline.h. */
#ifndef PADRONE_PIPELINE_SPLIT_INTERNAL_H
#define PADRONE_PIPELINE_SPLIT_INTERNAL_H

#include "pipeline/cab.h"
#include "pipeline/csim-internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define SPLIT_MAX_WORKERS 64
#define SPLIT_NSLOTS 65536	/* at most: slot ids travel in 16 bits of rep_ref.pad */

/* rep_ref.pad[0] on the rings. */
#define PART_CUT 0x01u		/* one part of a reference cut across workers */
#define PART_NOCOUNT 0x02u	/* per-line mode: not the first part */

/* ------------------------------------------------------------- rings */

/* Each worker is fed through a CAB ring (cab.h) used within this process:
 * records of up to SPLIT_STAGE references (3 words each) behind a header
 * whose tag says what follows. Long records: a header per 85 references
 * rather than per 21 makes the worker's walk over the ring cheaper. */
#define SPLIT_TAG_REFS 1u
#define SPLIT_STAGE 85			/* 255 payload words */
#define SPLIT_RECORD_WORDS (1 + 3 * SPLIT_STAGE)

static inline double thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void backoff(unsigned *spins)
{
	if (++*spins < 64) {
		__builtin_ia32_pause();
	} else if (*spins < 256) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
}

/* -------------------------------------------------------------- slots */

/* Where the parts of one cut reference meet (Cachegrind mode). */
struct split_slot {
	/* Per level: parts reported (low 16 bits) + 65536 * parts that
	 * missed. */
	_Atomic uint32_t lv[CSIM_NLEVELS];
	_Atomic uint32_t done;		/* parts finished */
	_Atomic uint32_t busy;		/* 1 from routing until counted */
	uint32_t parts;
} __attribute__((aligned(64)));	/* a line each: no false sharing between neighbours */

#define SLOT_COUNT(v) ((v) & 0xffffu)
#define SLOT_MISSES(v) ((v) >> 16)

/* ------------------------------------------------------------ workers */

/* A reference (or part) that could not go on yet. */
struct item {
	uint64_t pc, addr;
	uint32_t size;
	uint8_t type, kind;
	int8_t level;		/* the level to access next, or (waiting) the
				 * level whose verdict it waits for */
	int8_t reg;		/* first registered level, -1 if none */
	bool waiting;		/* a cut part waiting for its partners */
	bool cut;
	uint16_t slot;
};

struct worker {
	struct csim_split *sp;
	unsigned id;
	pthread_t thread;
	bool started;
	struct cab_ring *ring;
	struct cab_producer *prod;	/* the splitter's end */
	struct cab_consumer *cons;	/* the worker's end */
	uint64_t consumed;		/* references taken from the ring */
	struct csim_levels L;
	struct csim_result *res;
	int32_t *krank;
	/* Deferred items, a growable ring in stream order. */
	struct item *items;
	size_t icap, ihead, icount;
	/* Per deeper level and local set: deferred items registered there
	 * (they block fresh entries). */
	uint32_t *preg[CSIM_NLEVELS];
	uint64_t deferred;
	double cpu;		/* seconds of CPU, measured at exit */
	double busy;		/* of which simulating (not waiting for input) */
	int err;
};

struct csim_split {
	struct csim_config cfg;
	unsigned nworkers, bits, rshift;
	uint64_t kmask;
	uint8_t *owner;			/* key -> worker (key % workers) */
	struct worker *w;
	struct split_slot *slots;
	uint32_t nslots, next_slot;
	struct rep_ref *stage;		/* SPLIT_STAGE per worker */
	size_t *nstage;
	/* Set while someone waits on data still in a ring's current chunk (a
	 * CAB consumer only sees whole chunks): idle workers then drain. */
	_Atomic int hurry;
	struct csim_split_stats st;
	struct csim_result *result;
	bool finished;
	_Atomic int abort;
	char errmsg[256];
};

/* Is lv a level whose sets a worker may keep only in part (its own)? */
static inline bool split__deeper(int lv)
{
	return lv == CSIM_L2 || lv == CSIM_LL;
}

/* A worker thread's body: arg is its struct worker. */
void *split__worker_main(void *arg);

#endif
