/* prof.bpf.c: the BPF sampling backend's kernel half.
 *
 * Attached to one cpu-clock (or cycles) perf event per CPU. Each sample of
 * any process lands here; only the target's tgid is kept. Samples are
 * aggregated in kernel maps keyed by thread, IP and stack ids (user and
 * kernel stacks in a STACK_TRACE map), so user space reads a summary
 * instead of a stream. Built from UAPI headers only (no vmlinux.h), so the
 * build does not depend on the build machine's BTF.
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "profile/bpf/prof-bpf.h"

const volatile __u32 target_tgid = 0;
const volatile __u32 user_only = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROF_BPF_MAX_KEYS);
	__type(key, struct prof_bpf_key);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, PROF_BPF_MAX_STACKS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, PROF_BPF_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PROF_BPF_NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &i);

	if (v)
		*v += 1;
}

SEC("perf_event")
int prof_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct prof_bpf_key key = {};
	__u64 one = 1, *v;
	int in_kernel;

	if ((__u32)(id >> 32) != target_tgid)
		return 0;
	in_kernel = (ctx->regs.cs & 3) == 0;
	if (in_kernel && user_only)
		return 0;
	key.tid = (__u32)id;
	key.ip = ctx->regs.rip;
	key.ustack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	key.kstack = in_kernel ? bpf_get_stackid(ctx, &stacks, 0) : -1;
	if (key.ustack < 0 || (in_kernel && key.kstack < 0))
		stat_inc(PROF_BPF_STAT_STACK_ERRORS);

	v = bpf_map_lookup_elem(&counts, &key);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return 0;
	}
	if (bpf_map_update_elem(&counts, &key, &one, BPF_NOEXIST) == 0)
		return 0;
	v = bpf_map_lookup_elem(&counts, &key);	/* another CPU inserted it */
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		stat_inc(PROF_BPF_STAT_LOST);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
