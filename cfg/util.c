/* Small containers for cfg/: an open-addressing hash map and array growth. */
#include "cfg/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t hslot(uint64_t key, size_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (size_t)key & (cap - 1);
}

static int hmap_alloc(struct cfg_hmap *h, size_t cap)
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

int cfg_hmap_init(struct cfg_hmap *h, size_t hint)
{
	size_t cap = 16;
	while (cap < hint * 2)
		cap *= 2;
	return hmap_alloc(h, cap);
}

void cfg_hmap_fini(struct cfg_hmap *h)
{
	free(h->keys);
	free(h->vals);
	memset(h, 0, sizeof(*h));
}

void cfg_hmap_clear(struct cfg_hmap *h)
{
	if (h->keys)
		memset(h->keys, 0xff, h->cap * sizeof(*h->keys));
	h->len = 0;
}

uint32_t *cfg_hmap_get(const struct cfg_hmap *h, uint64_t key)
{
	if (!h->cap)
		return NULL;
	for (size_t i = hslot(key, h->cap);; i = (i + 1) & (h->cap - 1)) {
		if (h->keys[i] == key)
			return &h->vals[i];
		if (h->keys[i] == CFG_HMAP_EMPTY)
			return NULL;
	}
}

static void hmap_insert(struct cfg_hmap *h, uint64_t key, uint32_t val)
{
	size_t i = hslot(key, h->cap);
	while (h->keys[i] != CFG_HMAP_EMPTY && h->keys[i] != key)
		i = (i + 1) & (h->cap - 1);
	if (h->keys[i] == CFG_HMAP_EMPTY)
		h->len++;
	h->keys[i] = key;
	h->vals[i] = val;
}

int cfg_hmap_put(struct cfg_hmap *h, uint64_t key, uint32_t val)
{
	if (!h->cap || (h->len + 1) * 2 > h->cap) {
		struct cfg_hmap old = *h;
		if (hmap_alloc(h, old.cap ? old.cap * 2 : 16) < 0) {
			*h = old;
			return -ENOMEM;
		}
		for (size_t i = 0; i < old.cap; i++)
			if (old.keys[i] != CFG_HMAP_EMPTY)
				hmap_insert(h, old.keys[i], old.vals[i]);
		free(old.keys);
		free(old.vals);
	}
	hmap_insert(h, key, val);
	return 0;
}

int cfg_grow(void *pptr, size_t *cap, size_t n, size_t sz)
{
	void **p = pptr;
	if (n <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 8;
	while (nc < n)
		nc *= 2;
	void *np = realloc(*p, nc * sz);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}
