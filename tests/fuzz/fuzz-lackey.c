/* fuzz-lackey: padrone-sim's reader of `valgrind --tool=lackey
 * --trace-mem=yes` traces on hostile text, line by line and whole. */
#include "tests/fuzz/fuzz.h"

#include <stdio.h>
#include <string.h>

#include "pipeline/pipeline.h"

static int discard(void *arg, const struct rep_ref *refs, size_t n)
{
	uint64_t *sum = arg;
	for (size_t i = 0; i < n; i++)
		*sum += refs[i].addr + refs[i].size;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	uint64_t last_pc = 0, sum = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		struct rep_ref ref;
		const char *why;
		if (csim_lackey_parse_line(p, len, last_pc, &ref, &why) > 0)
			last_pc = ref.pc;
		p += len + 1;
	}
	FILE *f = size ? fmemopen((void *)data, size, "r") : NULL;
	struct csim_lackey *lk;
	if (f && csim_lackey__open(f, "fuzz", &lk) == 0) {
		csim_lackey__run(lk, 64, discard, &sum);
		csim_lackey__close(lk);
	}
	if (f)
		fclose(f);
	return 0;
}
