/* fuzz-elf: hostile bytes where padrone expects a module of the target:
 * elf/'s ELF loader as it reads the [vdso] from the target's memory
 * (symbols, PLT, build-id, segments) and its .eh_frame parser; cfg/'s ELF
 * reader (sections, .eh_frame_hdr) and a CFG built from the bytes as code
 * -- decoding, jump tables, calls -- both from the file and as a target's
 * memory through a reader of its own. */
#include "tests/fuzz/fuzz.h"

#include <string.h>

#include "cfg/cfg.h"
#include "elf/elf.h"

#define BASE 0x400000ull

struct mem {
	const uint8_t *data;
	size_t size;
};

static ssize_t mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct mem *m = ctx;

	if (addr < BASE || addr - BASE >= m->size)
		return -14;	/* -EFAULT: an unmapped page */
	size_t off = (size_t)(addr - BASE), n = m->size - off < len ? m->size - off : len;
	memcpy(buf, m->data + off, n);
	return (ssize_t)n;
}

static void count_fde(uint64_t start, uint64_t end, uint64_t fde, void *arg)
{
	*(uint64_t *)arg += end - start + fde;
}

static void build(struct cfg_reader *r, uint64_t addr)
{
	struct cfg_build_opts o = { .sz = sizeof(o), .max_insns = 20000, .max_blocks = 2000 };
	struct cfg_function *f;

	if (cfg_function__build(r, addr, &o, &f) >= 0 || f)
		cfg_function__free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[256], path[64];
	struct elf_file *e;
	uint64_t sum = 0;

	if (elf_file__load(-1, data, size, NULL, &e, why, sizeof(why)) == 0) {
		for (size_t i = 0; i < e->nfns; i++)
			(void)elf_file__find(e, e->fns[i].start);
		elf_file__free(e);
	}
	elf_eh_frame__each_fde(data, size, BASE, count_fde, &sum);

	/* as code in a target's memory */
	struct mem m = { data, size };
	struct cfg_reader_ops ops = { .sz = sizeof(ops), .read = mem_read };
	struct cfg_reader *r;
	if (size && cfg_reader__new(&ops, &m, NULL, &r) == 0) {
		build(r, BASE);
		cfg_reader__free(r);
	}
	/* as an ELF file: its entry and first FDE's function */
	int fd = fuzz_file(data, size, path, sizeof(path));
	if (fd >= 0 && cfg_reader__open_elf(path, 0, NULL, &r) == 0) {
		uint64_t entry;
		if (cfg_reader__function_at(r, BASE, &entry) == 0)
			build(r, entry);
		cfg_reader__free(r);
	}
	if (fd >= 0)
		fuzz_file_close(fd);
	return 0;
}
