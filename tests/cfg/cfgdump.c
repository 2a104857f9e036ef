/* cfgdump: print cfg/'s view of an ELF file (a tool for the tests and for
 * looking at what cfg/ sees).
 *   cfgdump [-j|-d|-t|-s] FILE FUNC|0xADDR   one function: JSON, dot, text, disas
 *   cfgdump -r FILE                         every FDE function: "entry start end" per range
 */
#include "cfg/cfg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int one(struct cfg_reader *r, const char *what, enum cfg_format fmt)
{
	uint64_t addr;
	char *end;
	addr = strtoull(what, &end, 0);
	if (*end || end == what) {
		if (cfg_reader__lookup(r, what, &addr) < 0) {
			fprintf(stderr, "cfgdump: %s\n", cfg_reader__errmsg(r));
			return 1;
		}
	}
	struct cfg_function *f;
	struct cfg_build_opts bo = { .sz = sizeof(bo), .find_entry = true };
	if (cfg_function__build(r, addr, &bo, &f) < 0) {
		fprintf(stderr, "cfgdump: %s\n", cfg_reader__errmsg(r));
		return 1;
	}
	struct cfg_write_opts wo = { .sz = sizeof(wo), .format = fmt };
	cfg_function__write(f, stdout, &wo);
	cfg_function__free(f);
	return 0;
}

static int ranges(struct cfg_reader *r)
{
	uint64_t *starts;
	size_t n;
	uint64_t lo = 0;
	/* the module: any address of the image; its lowest is known to the
	 * reader as the first function */
	if (cfg_reader__function_starts(r, 0x400000, &starts, &n) < 0 &&
	    cfg_reader__function_starts(r, 0x1000, &starts, &n) < 0) {
		fprintf(stderr, "cfgdump: %s\n", cfg_reader__errmsg(r));
		return 1;
	}
	(void)lo;
	for (size_t i = 0; i < n; i++) {
		struct cfg_function *f;
		if (cfg_function__build(r, starts[i], NULL, &f) < 0)
			continue;
		for (size_t k = 0; k < cfg_function__range_count(f); k++) {
			const struct cfg_range *rg = cfg_function__range(f, k);
			printf("%#lx %#lx %#lx\n", (unsigned long)starts[i], (unsigned long)rg->start,
			       (unsigned long)rg->end);
		}
		uint64_t at;
		const char *msg;
		if (cfg_function__error(f, &at, &msg))
			fprintf(stderr, "%#lx: %s\n", (unsigned long)starts[i], msg);
		cfg_function__free(f);
	}
	free(starts);
	return 0;
}

int main(int argc, char **argv)
{
	enum cfg_format fmt = CFG_FORMAT_TEXT;
	bool all = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-j"))
			fmt = CFG_FORMAT_JSON;
		else if (!strcmp(argv[i], "-d"))
			fmt = CFG_FORMAT_DOT;
		else if (!strcmp(argv[i], "-s"))
			fmt = CFG_FORMAT_DISAS;
		else if (!strcmp(argv[i], "-t"))
			fmt = CFG_FORMAT_TEXT;
		else if (!strcmp(argv[i], "-r"))
			all = true;
	}
	if (i >= argc || (!all && i + 1 >= argc)) {
		fprintf(stderr, "usage: cfgdump [-j|-d|-t|-s] FILE FUNC|ADDR\n       cfgdump -r FILE\n");
		return 2;
	}
	struct cfg_reader *r;
	if (cfg_reader__open_elf(argv[i], 0, NULL, &r) < 0) {
		fprintf(stderr, "cfgdump: cannot open %s\n", argv[i]);
		return 1;
	}
	int rc = all ? ranges(r) : one(r, argv[i + 1], fmt);
	cfg_reader__free(r);
	return rc;
}
