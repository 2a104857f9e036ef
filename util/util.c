/* util.c: the shared helpers of util.h. */
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t util_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void util_timespec_add_ns(struct timespec *t, uint64_t ns)
{
	uint64_t nsec = (uint64_t)t->tv_nsec + ns % 1000000000ull;

	t->tv_sec += (time_t)(ns / 1000000000ull + nsec / 1000000000ull);
	t->tv_nsec = (long)(nsec % 1000000000ull);
}

void util_deadline_ns(struct timespec *t, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	util_timespec_add_ns(t, ns);
}

/* ------------------------------------------------------------ hash map */

static size_t hslot(uint64_t key, size_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (size_t)key & (cap - 1);
}

static int hmap_alloc(struct util_hmap *h, size_t cap)
{
	h->keys = malloc(cap * sizeof(*h->keys));
	h->vals = malloc(cap * sizeof(*h->vals));
	if (!h->keys || !h->vals) {
		free(h->keys);
		free(h->vals);
		h->keys = NULL;
		h->vals = NULL;
		return -ENOMEM;
	}
	memset(h->keys, 0xff, cap * sizeof(*h->keys));
	h->cap = cap;
	h->len = 0;
	return 0;
}

int util_hmap__init(struct util_hmap *h, size_t hint)
{
	size_t cap = 16;

	while (cap < hint * 2)
		cap *= 2;
	return hmap_alloc(h, cap);
}

void util_hmap__fini(struct util_hmap *h)
{
	free(h->keys);
	free(h->vals);
	memset(h, 0, sizeof(*h));
}

void util_hmap__clear(struct util_hmap *h)
{
	if (h->keys)
		memset(h->keys, 0xff, h->cap * sizeof(*h->keys));
	h->len = 0;
}

uint32_t *util_hmap__get(const struct util_hmap *h, uint64_t key)
{
	if (!h->cap || key == UTIL_HMAP_EMPTY)	/* it would match a free slot */
		return NULL;
	for (size_t i = hslot(key, h->cap);; i = (i + 1) & (h->cap - 1)) {
		if (h->keys[i] == key)
			return &h->vals[i];
		if (h->keys[i] == UTIL_HMAP_EMPTY)
			return NULL;
	}
}

static void hmap_insert(struct util_hmap *h, uint64_t key, uint32_t val)
{
	size_t i = hslot(key, h->cap);

	while (h->keys[i] != UTIL_HMAP_EMPTY && h->keys[i] != key)
		i = (i + 1) & (h->cap - 1);
	if (h->keys[i] == UTIL_HMAP_EMPTY)
		h->len++;
	h->keys[i] = key;
	h->vals[i] = val;
}

int util_hmap__put(struct util_hmap *h, uint64_t key, uint32_t val)
{
	if (key == UTIL_HMAP_EMPTY)
		return -EINVAL;
	if (!h->cap || (h->len + 1) * 2 > h->cap) {
		struct util_hmap old = *h;
		if (hmap_alloc(h, old.cap ? old.cap * 2 : 16) < 0) {
			*h = old;
			return -ENOMEM;
		}
		for (size_t i = 0; i < old.cap; i++)
			if (old.keys[i] != UTIL_HMAP_EMPTY)
				hmap_insert(h, old.keys[i], old.vals[i]);
		free(old.keys);
		free(old.vals);
	}
	hmap_insert(h, key, val);
	return 0;
}

/* ------------------------------------------------------------ searching */

size_t util_upper_bound(const void *base, size_t n, size_t size, size_t off, uint64_t key)
{
	const unsigned char *p = base;
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t k;
		memcpy(&k, p + mid * size + off, sizeof k);
		if (k <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ------------------------------------------------------------ options */

bool util_opts_copy(void *dst, size_t dst_size, const void *opts, size_t opts_size)
{
	const unsigned char *p = opts;

	if (!opts)
		return true;
	for (size_t i = dst_size; i < opts_size; i++)
		if (p[i])
			return false;
	memcpy(dst, opts, opts_size < dst_size ? opts_size : dst_size);
	return true;
}
