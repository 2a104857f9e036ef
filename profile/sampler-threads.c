/* sampler-threads.c: the sampler's threads: which the target has
 * (/proc/PID/task), events for those not covered yet, and the samples of
 * new threads kept apart until it is known whether an inherited event
 * covers them too (sampler.c's header says why). */
#include "profile/sampler-state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>


/* ------------------------------------------------------------ threads */

/* A tid as the map's key: zero-extended, so that even the -1 a sample may
 * carry is a key (sign-extended it would be the map's empty marker). */
static uint64_t tid_key(pid_t tid)
{
	return (uint64_t)(uint32_t)tid;
}

struct thr *sampler__thr_get(struct prof_sampler *s, pid_t tid, bool create)
{
	const uint32_t *i = util_hmap__get(&s->thr_by_tid, tid_key(tid));

	if (i)
		return &s->thrs[*i];
	if (!create)
		return NULL;
	if (s->nthr == s->thrcap) {
		size_t nc = s->thrcap ? s->thrcap * 2 : 64;
		void *p = realloc(s->thrs, nc * sizeof(*s->thrs));
		if (!p)
			return NULL;
		s->thrs = p;
		s->thrcap = nc;
	}
	if (util_hmap__put(&s->thr_by_tid, tid_key(tid), (uint32_t)s->nthr) < 0)
		return NULL;
	struct thr *t = &s->thrs[s->nthr++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	return t;
}

/* ------------------------------------------------------------ scanning */

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* The tids in /proc/PID/task, sorted, the main thread first. */
static int list_tasks(pid_t pid, pid_t **out, size_t *n)
{
	char path[64];
	size_t cap = 64, k = 0;
	pid_t *v = malloc(cap * sizeof(*v));
	DIR *d;
	struct dirent *de;

	if (!v)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d) {
		free(v);
		return -errno == -ENOENT ? -ESRCH : -errno;
	}
	while ((de = readdir(d))) {
		char *e;
		long t = strtol(de->d_name, &e, 10);
		if (*e || t <= 0)
			continue;
		if (k == cap) {
			void *p = realloc(v, (cap *= 2) * sizeof(*v));
			if (!p) {
				closedir(d);
				free(v);
				return -ENOMEM;
			}
			v = p;
		}
		v[k++] = (pid_t)t;
	}
	closedir(d);
	qsort(v, k, sizeof(*v), cmp_pid);
	for (size_t i = 0; i < k; i++)
		if (v[i] == pid) {
			memmove(v + 1, v, i * sizeof(*v));
			v[0] = pid;
			break;
		}
	*out = v;
	*n = k;
	return 0;
}

/* Opens events on every thread not known yet. first: the very first scan,
 * whose threads cannot carry inherited events. Returns how many threads
 * got events, or -errno. */
static int scan_once(struct prof_sampler *s, bool first, bool enabled)
{
	pid_t *tids;
	size_t n;
	int r = list_tasks(s->pid, &tids, &n), added = 0;

	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		struct thr *t = sampler__thr_get(s, tids[i], false);
		if (t && (t->direct || t->inherited))
			continue;
		if (!first && enabled) {
			/* its FORK record may be waiting in a ring */
			sampler__drain_all(s);
			t = sampler__thr_get(s, tids[i], false);
			if (t && (t->direct || t->inherited))
				continue;
		}
		r = sampler__open_thread(s, tids[i], enabled);
		if (r == -ESRCH)
			continue;	/* exited meanwhile */
		if (r < 0)
			break;
		t = sampler__thr_get(s, tids[i], true);
		if (!t) {
			r = -ENOMEM;
			break;
		}
		t->direct = true;
		t->new_thread = !first;
		if (!first) {
			t->probation = true;
			t->prob = calloc(1, sizeof(*t->prob));
			if (t->prob)
				prof_stacks__init(t->prob);
		}
		added++;
	}
	free(tids);
	return r < 0 && r != -ESRCH ? r : added;
}

/* Scans until a scan finds no thread without events. */
int sampler__scan_until_stable(struct prof_sampler *s, bool first, bool enabled)
{
	for (int round = 0; round < 1000; round++) {
		int r = scan_once(s, first && round == 0, enabled);
		if (r <= 0)
			return r;
	}
	return 0;
}

/* Records the threads present now, so the bpf backend can tell new ones. */
void sampler__note_initial_threads(struct prof_sampler *s)
{
	pid_t *tids;
	size_t n;

	if (list_tasks(s->pid, &tids, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct thr *t = sampler__thr_get(s, tids[i], true);
		if (t)
			t->direct = true;
	}
	free(tids);
}

/* Samples of threads whose probation ended without a double cover join
 * the rest. */
void sampler__settle_probation(struct prof_sampler *s)
{
	for (size_t i = 0; i < s->nthr; i++) {
		struct thr *t = &s->thrs[i];
		if (!t->probation || t->dropped)
			continue;
		if (t->prob) {
			prof_stacks__merge(&s->stacks, t->prob);
			prof_stacks__fini(t->prob);
			free(t->prob);
			t->prob = NULL;
		}
		t->samples += t->prob_samples;
		s->tot.samples += t->prob_samples;
		t->prob_samples = 0;
		t->probation = false;
	}
}
