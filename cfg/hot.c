/* Hot-loop attribution: samples (ip, count) onto blocks and loops. */
#include "cfg/internal.h"

uint64_t cfg_function__attribute(struct cfg_function *f, const struct cfg_sample *s, size_t n)
{
	uint64_t inside = 0;
	for (size_t i = 0; i < f->nblocks; i++)
		f->blocks[i].samples = 0;
	for (size_t l = 0; l < f->nloops; l++)
		f->loops[l].samples = 0;
	for (size_t i = 0; i < n; i++) {
		ssize_t b = cfg_function__block_at(f, s[i].ip);
		if (b < 0)
			continue;
		f->blocks[b].samples += s[i].count;
		inside += s[i].count;
		for (int32_t l = f->blocks[b].loop; l >= 0; l = f->loops[l].parent)
			f->loops[l].samples += s[i].count;
	}
	return inside;
}

/* Samples in the loop's own blocks, nested loops' excluded. */
static uint64_t self_samples(const struct cfg_function *f, size_t l)
{
	uint64_t s = 0;
	const struct cfg_loop *L = &f->loops[l];
	for (uint32_t i = 0; i < L->block_count; i++)
		if (f->blocks[L->blocks[i]].loop == (int32_t)l)
			s += f->blocks[L->blocks[i]].samples;
	return s;
}

ssize_t cfg_function__hottest_loop(const struct cfg_function *f)
{
	ssize_t best = -1;
	uint64_t bs = 0;
	for (size_t l = 0; l < f->nloops; l++) {
		uint64_t s = self_samples(f, l);
		if (!s)
			continue;
		if (best < 0 || s > bs || (s == bs && f->loops[l].depth > f->loops[best].depth)) {
			best = (ssize_t)l;
			bs = s;
		}
	}
	return best;
}
