/* prof-bpf.h: what the BPF program and profile/bpf.c agree on. */
#ifndef PADRONE_PROF_BPF_H
#define PADRONE_PROF_BPF_H

#define PROF_BPF_MAX_KEYS 16384
#define PROF_BPF_MAX_STACKS 16384
#define PROF_BPF_STACK_DEPTH 127	/* the kernel's perf_event_max_stack */

enum {
	PROF_BPF_STAT_LOST = 0,		/* no room left in counts */
	PROF_BPF_STAT_STACK_ERRORS = 1,	/* a stack could not be stored */
	PROF_BPF_NSTATS = 2,
};

struct prof_bpf_key {
	__u32 tid;
	__s32 ustack;		/* stack id, or a negative errno */
	__s32 kstack;		/* -1 for a user-mode sample */
	__u32 pad;
	__u64 ip;
};

#endif
