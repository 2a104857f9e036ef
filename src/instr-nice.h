/* instr-nice.h: under an overhead budget, padrone's pipeline threads (a
 * consumer per ring, the simulator) run at the lowest priority, so that
 * they take only the CPU the target leaves: what they would take from the
 * target on a busy machine is then time its threads wait in the copy's
 * stub, which the budget measures (instr-budget.c), rather than time they
 * wait for a CPU, which it could not see. Each thread sets its own
 * niceness when it sees the wish change (on Linux, setpriority of
 * PRIO_PROCESS 0 is the calling thread's alone). */
#ifndef PADRONE_INSTR_NICE_H
#define PADRONE_INSTR_NICE_H

#include <limits.h>
#include <stdatomic.h>
#include <sys/resource.h>

#define INSTR_NICE_YIELD 19
#define INSTR_NICE_UNSET INT_MIN	/* a thread's "now" before its first look */

/* want: the niceness asked for (INSTR_NICE_UNSET: none yet); now: the
 * calling thread's, as it last set it. */
static inline void instr__follow_nice(const _Atomic int *want, int *now)
{
	int w = atomic_load_explicit(want, memory_order_relaxed);

	if (w == *now || w == INSTR_NICE_UNSET)
		return;
	/* back up may be refused (EACCES without CAP_SYS_NICE): then stay
	 * low, and do not ask again for each batch */
	(void)setpriority(PRIO_PROCESS, 0, w);
	*now = w;
}

#endif
