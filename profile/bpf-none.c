/* bpf-none.c: the BPF backend of a padrone configured with --disable-bpf.
 *
 * Opening it fails with the reason, so the sampler falls back to the ring
 * backend and the report says why, as when the kernel refuses the program.
 */
#include "profile/internal.h"

#include <errno.h>

int prof_bpf__open(pid_t pid, unsigned freq_hz, bool user_only, bool pmu, struct prof_bpf **out,
		   char *why, size_t whylen)
{
	*out = NULL;
	prof__fmt(why, whylen, "this padrone was built without the BPF backend (configure --disable-bpf)");
	return -EOPNOTSUPP;
}

int prof_bpf__enable(struct prof_bpf *b, bool on)
{
	return -EOPNOTSUPP;
}

int prof_bpf__collect(struct prof_bpf *b, struct prof_stacks *stacks, prof_bpf_thread_fn cb,
		      void *arg, uint64_t *lost, uint64_t *stack_errors, uint64_t *throttled)
{
	return -EOPNOTSUPP;
}

void prof_bpf__free(struct prof_bpf *b)
{
}
