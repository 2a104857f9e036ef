/* attach/restart.c: restartable ranges of the target's code (attach.h).
 *
 * The table is written by any thread (under the target's lock) and read by
 * the tracer thread at each signal it delivers, so that a handler never
 * starts inside a range: the thread's PC goes back to the range's restart
 * first, and the kernel's signal frame keeps that PC for the return (what
 * rseq's abort does, done by the tracer).
 */
#include "attach/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>

static int by_lo(const void *a, const void *b)
{
	const struct attach_restart *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int attach_target__restart_add(struct attach_target *t, const struct attach_restart *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].lo >= r[i].hi || (r[i].restart >= r[i].lo && r[i].restart < r[i].hi &&
					   r[i].restart != r[i].lo))
			return attach__fail(t, -EINVAL, "a restartable range [0x%llx, 0x%llx) "
					    "that restarts at 0x%llx", (unsigned long long)r[i].lo,
					    (unsigned long long)r[i].hi,
					    (unsigned long long)r[i].restart);
	pthread_mutex_lock(&t->lock);
	struct attach_restart *v = realloc(t->restarts, (t->nrestarts + n + 1) * sizeof *v);
	if (!v) {
		pthread_mutex_unlock(&t->lock);
		return attach__fail(t, -ENOMEM, "out of memory");
	}
	memcpy(v + t->nrestarts, r, n * sizeof *v);
	t->restarts = v;
	t->nrestarts += n;
	qsort(v, t->nrestarts, sizeof *v, by_lo);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

void attach_target__restart_remove(struct attach_target *t, uint64_t lo, uint64_t hi)
{
	pthread_mutex_lock(&t->lock);
	size_t k = 0;
	for (size_t i = 0; i < t->nrestarts; i++)
		if (t->restarts[i].lo < lo || t->restarts[i].hi > hi)
			t->restarts[k++] = t->restarts[i];
	t->nrestarts = k;
	pthread_mutex_unlock(&t->lock);
}

/* Where a thread at pc must be before a handler runs: pc itself outside
 * every range. Ranges do not overlap (their owners' code does not). */
static uint64_t restart_of(struct attach_target *t, uint64_t pc)
{
	uint64_t to = pc;
	size_t lo = 0, hi = t->nrestarts;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (t->restarts[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && pc < t->restarts[lo - 1].hi)
		to = t->restarts[lo - 1].restart;
	return to;
}

void attach__restart_before_signal(struct attach_target *t, pid_t tid)
{
	pthread_mutex_lock(&t->lock);
	bool none = t->nrestarts == 0;
	pthread_mutex_unlock(&t->lock);
	if (none)
		return;	/* the usual case: no register read per signal */
	struct user_regs_struct regs;
	if (attach__ptrace(PTRACE_GETREGS, tid, NULL, &regs) < 0)
		return;	/* gone: nothing to deliver to */
	pthread_mutex_lock(&t->lock);
	uint64_t to = restart_of(t, regs.rip);
	pthread_mutex_unlock(&t->lock);
	if (to == regs.rip)
		return;
	regs.rip = to;
	attach__ptrace(PTRACE_SETREGS, tid, NULL, &regs);
}
