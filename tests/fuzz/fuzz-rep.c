/* fuzz-rep: REP files (padrone-sim --rep) on hostile bytes: the header and
 * static block table, every stream section, and recovery of the memory
 * references from them. */
#include "tests/fuzz/fuzz.h"

#include <stdio.h>

#include "pipeline/rep.h"

static void discard(void *arg, const struct rep_ref *refs, size_t n)
{
	uint64_t *sum = arg;
	for (size_t i = 0; i < n; i++)
		*sum += refs[i].addr;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof(path));
	struct rep_reader *r;
	uint64_t sum = 0;

	if (fd < 0)
		return 0;
	if (rep_reader__open(path, &r) == 0) {
		uint64_t tid, off;
		const uint64_t *words;
		size_t n;
		while (rep_reader__next(r, &tid, &words, &n, &off) == 1)
			for (size_t i = 0; i < n; i++)
				sum += words[i];
		rep_reader__close(r);
	}
	if (rep_reader__open(path, &r) == 0) {
		struct rep_recover *rec;
		if (rep_recover__new(rep_reader__table(r), discard, &sum, &rec) == 0) {
			rep_reader__replay(r, rec);
			rep_recover__free(rec);
		}
		rep_reader__close(r);
	}
	fuzz_file_close(fd);
	return 0;
}
