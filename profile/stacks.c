/* stacks.c: samples aggregated by distinct call chain.
 *
 * Every sample of a run lands here (the reader thread adds one per record),
 * so adding must not allocate per sample: chains are hashed, found in an
 * open-addressing table and counted; only a new chain appends its IPs.
 */
#include "profile/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void prof_stacks__init(struct prof_stacks *t)
{
	memset(t, 0, sizeof(*t));
}

void prof_stacks__fini(struct prof_stacks *t)
{
	free(t->ents);
	free(t->slots);
	free(t->ips);
	memset(t, 0, sizeof(*t));
}

void prof_stacks__clear(struct prof_stacks *t)
{
	t->n = 0;
	t->nips = 0;
	if (t->slots)
		memset(t->slots, 0, t->nslots * sizeof(*t->slots));
}

static uint64_t chain_hash(const uint64_t *ips, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;

	for (size_t i = 0; i < n; i++) {
		h ^= ips[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h ? h : 1;
}

static int grow_slots(struct prof_stacks *t)
{
	size_t ns = t->nslots ? t->nslots * 2 : 1024;
	uint32_t *s = calloc(ns, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		size_t j = t->ents[i].hash & (ns - 1);
		while (s[j])
			j = (j + 1) & (ns - 1);
		s[j] = (uint32_t)(i + 1);
	}
	free(t->slots);
	t->slots = s;
	t->nslots = ns;
	return 0;
}

int prof_stacks__add(struct prof_stacks *t, const uint64_t *ips, size_t n, uint64_t count)
{
	uint64_t h = chain_hash(ips, n);

	if ((t->n + 1) * 2 > t->nslots && grow_slots(t) < 0)
		return -ENOMEM;
	size_t j = h & (t->nslots - 1);
	for (; t->slots[j]; j = (j + 1) & (t->nslots - 1)) {
		struct prof_stack_ent *e = &t->ents[t->slots[j] - 1];
		if (e->hash == h && e->len == n &&
		    !memcmp(t->ips + e->off, ips, n * sizeof(*ips))) {
			e->count += count;
			return 0;
		}
	}
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 256;
		void *p = realloc(t->ents, nc * sizeof(*t->ents));
		if (!p)
			return -ENOMEM;
		t->ents = p;
		t->cap = nc;
	}
	if (t->nips + n > t->ips_cap) {
		size_t nc = t->ips_cap ? t->ips_cap : 4096;
		while (nc < t->nips + n)
			nc *= 2;
		void *p = realloc(t->ips, nc * sizeof(*t->ips));
		if (!p)
			return -ENOMEM;
		t->ips = p;
		t->ips_cap = nc;
	}
	memcpy(t->ips + t->nips, ips, n * sizeof(*ips));
	t->ents[t->n] = (struct prof_stack_ent){ .hash = h, .count = count, .off = t->nips, .len = n };
	t->nips += n;
	t->slots[j] = (uint32_t)(++t->n);
	return 0;
}

int prof_stacks__merge(struct prof_stacks *t, const struct prof_stacks *src)
{
	for (size_t i = 0; i < src->n; i++) {
		const struct prof_stack_ent *e = &src->ents[i];
		int r = prof_stacks__add(t, src->ips + e->off, e->len, e->count);
		if (r < 0)
			return r;
	}
	return 0;
}
