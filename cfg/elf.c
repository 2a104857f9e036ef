/* The ELF file reader: an executable or shared object laid out at its
 * link-time addresses plus a bias, as the loader would map it. Names come
 * from elf/ (the file's symbol tables and its debug file), then from what
 * the in-memory view offers. */
#include "cfg/internal.h"
#include "elf/elf.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct cfg_elf_seg {
	uint64_t vaddr, memsz, filesz, offset;
	bool exec;
};

struct elf_ctx {
	const uint8_t *map;
	size_t size;
	uint64_t bias;
	struct cfg_elf_seg segs[64];
	size_t nsegs;
	struct elf_file *file;	/* its symbols' names live here */
};

static const struct cfg_elf_seg *seg_of(const struct elf_ctx *e, uint64_t addr)
{
	for (size_t i = 0; i < e->nsegs; i++)
		if (addr >= e->segs[i].vaddr && addr < e->segs[i].vaddr + e->segs[i].memsz)
			return &e->segs[i];
	return NULL;
}

static ssize_t elf_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct elf_ctx *e = ctx;
	size_t done = 0;
	while (done < len) {
		uint64_t a = addr + done - e->bias;
		const struct cfg_elf_seg *s = seg_of(e, a);
		if (!s)
			break;
		uint64_t off = a - s->vaddr;
		size_t n = (size_t)(s->vaddr + s->memsz - a);
		if (n > len - done)
			n = len - done;
		for (size_t i = 0; i < n; i++) {	/* .bss reads as zeros */
			uint64_t o = off + i;
			((uint8_t *)buf)[done + i] =
				o < s->filesz && s->offset + o < e->size ? e->map[s->offset + o] : 0;
		}
		done += n;
	}
	return done ? (ssize_t)done : -EFAULT;
}

static bool elf_is_code(void *ctx, uint64_t addr)
{
	const struct elf_ctx *e = ctx;
	const struct cfg_elf_seg *s = seg_of(e, addr - e->bias);
	return s && s->exec;
}

static void elf_destroy(void *ctx)
{
	struct elf_ctx *e = ctx;
	if (e->map)
		munmap((void *)e->map, e->size);
	elf_file__free(e->file);
	free(e);
}

/* The functions elf/ knows by name (the file's tables and its debug
 * file's, every alias, and the PLT stubs' NAME@plt). */
static int add_symbols(struct cfg_reader *r, struct cfg_module *m, const struct elf_file *f,
		       uint64_t bias)
{
	for (size_t i = 0; i < f->nsyms; i++) {
		const struct elf_sym *s = &f->syms[i];
		if (s->kind == ELF_SYM_DATA || !s->value)
			continue;
		if (cfg__module_add_sym(m, s->value + bias, s->size, s->name) < 0)
			return cfg__reader_err(r, -ENOMEM, "out of memory reading symbols");
	}
	return 0;
}

int cfg_reader__open_elf(const char *path, uint64_t bias, const struct cfg_reader_opts *opts,
			 struct cfg_reader **out)
{
	(void)opts;
	if (!path || !out)
		return -EINVAL;
	*out = NULL;
	struct elf_ctx *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->bias = bias;
	struct cfg_reader_ops ops = {
		.sz = sizeof(ops), .read = elf_read, .is_code = elf_is_code, .destroy = elf_destroy,
	};
	struct cfg_reader *r;
	int err = cfg__reader_alloc(&ops, e, &r);
	if (err < 0) {
		free(e);
		return err;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		cfg__reader_err(r, err, "cannot open %s: %s", path, strerror(errno));
		goto fail;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		err = cfg__reader_err(r, -ENOEXEC, "%s is not an ELF file (too short)", path);
		goto fail;
	}
	e->size = (size_t)st.st_size;
	char why[256];
	/* the file's own tables only: with a debug file's names, the .cold
	 * parts that have FDEs of their own (8 in libc) would stop counting as
	 * functions, and bench/cfg-libc's figures compare file and memory */
	struct elf_load_opts lo_opts = { .sz = sizeof lo_opts, .path = path, .names = true,
					 .no_debug_file = true };
	if (elf_file__load(fd, NULL, 0, &lo_opts, &e->file, why, sizeof why) < 0) {
		close(fd);
		err = cfg__reader_err(r, -ENOEXEC, "%s is not an x86-64 ELF file", path);
		goto fail;
	}
	void *map = mmap(NULL, e->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		err = -errno;
		cfg__reader_err(r, err, "cannot map %s: %s", path, strerror(errno));
		goto fail;
	}
	e->map = map;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < e->file->nsegs && e->nsegs < 64; i++) {
		const struct elf_seg *ph = &e->file->segs[i];
		/* mapped by whole pages, as the kernel does */
		uint64_t skew = ph->vaddr & 4095;
		e->segs[e->nsegs++] = (struct cfg_elf_seg){ ph->vaddr - skew, ph->memsz + skew,
							    ph->filesz + skew, ph->offset - skew,
							    ph->exec };
		if (ph->vaddr < lo)
			lo = ph->vaddr;
		if (ph->vaddr + ph->memsz > hi)
			hi = ph->vaddr + ph->memsz;
	}
	if (!e->nsegs) {
		err = cfg__reader_err(r, -ENOEXEC, "%s has no loadable segment", path);
		goto fail;
	}
	struct cfg_module *m;
	if ((err = cfg__reader_add_module(r, &m)) < 0)
		goto fail;
	m->path = strdup(path);
	m->lo = (lo & ~(uint64_t)4095) + bias;
	m->hi = hi + bias;
	m->parsed = true;
	err = add_symbols(r, m, e->file, bias);
	if (err < 0)
		goto fail;
	cfg__module_parse_memory(r, m, m->lo);
	cfg__module_sort(m);
	r->err[0] = '\0';
	*out = r;
	return 0;
fail:
	cfg_reader__free(r);
	return err;
}

int cfg_elf_load_bias(const char *path, uint64_t base, uint64_t *bias)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -ENOEXEC;
	Elf64_Ehdr eh;

	if (fd < 0)
		return -errno;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
		goto out;
	if (eh.e_type == ET_EXEC) {
		*bias = 0;
		rc = 0;
		goto out;
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != sizeof(ph))
			break;
		if (ph.p_type == PT_LOAD) {
			*bias = base - (ph.p_vaddr & ~(uint64_t)0xfff);
			rc = 0;
			break;
		}
	}
out:
	close(fd);
	return rc;
}
