/* instr-state.h: the per-thread state block of an instrumented copy, which
 * each thread reaches through %gs (its gs_base points at its own block), and
 * the layout that the commit code (instr-emit.c) and the ring stub (instr-stub.S)
 * share. Byte offsets; every field is a u64 unless said otherwise. Plain
 * defines: included from assembly too.
 *
 * The fast path of a unit (instr-emit.c writes it per block): PTR is where the
 * next record goes; the word there is CLEAR when there is room. The stub
 * handles everything else as cab_producer__slow does (pipeline/cab.c):
 * the guard, wrapping, a full ring, gap flags, waits, drops and counters.
 * While records are dropped PTR points into the block's junk area, which
 * the fast path fills as it fills a chunk (CLEAR words, a guard of MAGIC
 * after them), so a dropped unit costs what a written one does; only when
 * the junk area is full does the stub run again: it counts the records
 * there as dropped, clears the area and, once RESUME is CLEAR again, goes
 * back to the ring (CAB's sampling: whole chunks' worth skipped at a time).
 * A thread with no ring writes into the junk area for good.
 */
#ifndef PADRONE_CODECACHE_INSTR_STATE_H
#define PADRONE_CODECACHE_INSTR_STATE_H

#define IS_PTR 0		/* the producer's pointer */
#define IS_SELF 8		/* this block's address */
#define IS_MAGICW 16		/* always CAB_MAGIC */
#define IS_RESUME 24		/* while dropping: where writing resumes */
#define IS_DATA 32		/* the ring's data area (target address) */
#define IS_SHIFT 40		/* log2 of the chunk's bytes */
#define IS_NCHUNKS 48
#define IS_CHUNK_BYTES 56
#define IS_META 64		/* struct cab_meta array (target address) */
#define IS_META_STRIDE 72
#define IS_MODE 80		/* IS_MODE_* */
#define IS_DROPPING 88		/* the consumer was judged gone */
#define IS_GAP 96		/* records dropped since the last one written */
#define IS_WAIT_NS 104		/* one futex wait, < 1 s */
#define IS_TIMEOUT_NS 112	/* no heartbeat this long: consumer gone */
#define IS_OWNER 120		/* the fs base (thread pointer) of the thread the
				 * row was given to; 0: none (the sink, a spare) */
#define IS_SINK 128		/* the sink row's address (a gs_base) */
#define IS_GATE 136		/* where the copy's gate goes (instr-emit.c): its
				 * "on" landing (the units) or its "off" one (the
				 * original); the two differ in the low byte only,
				 * so padrone switches a thread by writing one byte */
#define IS_OWNER_PID 144	/* the process of the row's thread, as the target
				 * sees its pid (its pid namespace's): a child
				 * forked while padrone is gone keeps its parent's
				 * fs base, not its pid; 0: not checked */
#define IS_CALLS 152		/* calls of the function by the row's thread, on
				 * or off, counted at the gate where the flags
				 * are dead at the entry (instr-emit.c) */
#define IS_LAST 160		/* u32: the unit whose commit came last, if it is
				 * one that may repeat (its id), else 0: a unit
				 * finding its own id there was the last one
				 * written (instr-emit.c, emit_repeat) */
/* 164..167 and 272..279 unused: the stub keeps its scratch words on its own
 * stack frame, which a signal handler's run of the copy cannot overwrite */
/* absolute addresses of the shared header's words (struct cab_layout) */
#define IS_A_PROD_SEQ 168	/* u32 */
#define IS_A_CONS_SLEEPING 176	/* u32 */
#define IS_A_CONS_SEQ 184	/* u32 */
#define IS_A_PROD_WAITING 192	/* u32 */
#define IS_A_CONS_STATE 200	/* u32 */
#define IS_A_HEARTBEAT 208	/* u64 */
#define IS_A_PROD_DROPPING 216	/* u32 */
#define IS_A_DROPPED_RECORDS 224
#define IS_A_DROPPED_WORDS 232
#define IS_A_PROD_WAITS 240
#define IS_A_PROD_WAIT_NS 248
#define IS_QUIT 256		/* padrone is undoing the copy and nobody consumes:
				 * never wait, drop */
#define IS_STUB_CALLS 264	/* times the stub ran (the slow path's cost) */
/* the shared area the block is in (instr-area.c): rows of IS_SECTIONS blocks, one
 * row per thread (gs_base at its start), a section per function; the
 * function in section k reaches its block as %gs:(k * IS_SIZE + OFF) */
#define IS_AREA 280
#define IS_AREA_SIZE 288
#define IS_META_GAP 4		/* offset of cab_meta.gap (u32), checked in instr-area.c */
#define IS_INTACT 504		/* u8: 1 from a unit's first capture into SLOTS
				 * until a commit of such a unit clears it: a
				 * commit that finds it clear writes its unit
				 * as spoiled (REP_S_SPOILED), since another
				 * unit's captures (a signal handler's) ran in
				 * between and overwrote the slots */
#define IS_SLOTS 512		/* the unit's slots as they are captured */
#define IS_MAX_SLOTS 63		/* a unit is at most 64 words */
#define IS_JUNK 1024		/* where dropped units go: CLEAR words ... */
#define IS_JUNK_END 9216	/* ... then a guard of 128 MAGIC words: twice a
				 * unit, see IS_GUARD_WORDS */
#define IS_SIZE 10240
/* The guard at the end of the junk area and of each ring chunk, in words:
 * a unit placed at a CLEAR word never runs past it, even from where a
 * signal handler's run of the copy can leave the pointer while padrone is
 * gone (nobody then moves the interrupted thread out of its reservation:
 * the pointer goes up to a unit past the CLEAR word it read). */
#define IS_GUARD_WORDS (2 * (IS_MAX_SLOTS + 1))
#define IS_SECTIONS 8		/* functions instrumented at once */
#define IS_ROW (IS_SECTIONS * IS_SIZE)

#define IS_MODE_EXHAUSTIVE 0
#define IS_MODE_SAMPLING 1
#define IS_MODE_SINK 2		/* no ring: every record goes nowhere (a thread
				 * padrone gave no ring, e.g. one cloned later) */
#define IS_CONSUMER_CLOSED 3	/* CAB_SIDE_CLOSED */

#endif
