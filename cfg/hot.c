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

ssize_t cfg_function__hottest_loop(const struct cfg_function *f)
{
	ssize_t best = -1;
	for (size_t l = 0; l < f->nloops; l++) {
		const struct cfg_loop *L = &f->loops[l];
		if (!L->samples)
			continue;
		if (best < 0 || L->samples > f->loops[best].samples ||
		    (L->samples == f->loops[best].samples && L->depth > f->loops[best].depth))
			best = (ssize_t)l;
	}
	return best;
}
