/* The ELF file reader: an executable or shared object laid out at its
 * link-time addresses plus a bias, as the loader would map it. Names come
 * from .symtab when present, then from what the in-memory view offers. */
#include "cfg/internal.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct elf_seg {
	uint64_t vaddr, memsz, filesz, offset;
	bool exec;
};

struct elf_ctx {
	const uint8_t *map;
	size_t size;
	uint64_t bias;
	struct elf_seg segs[64];
	size_t nsegs;
};

static const struct elf_seg *seg_of(const struct elf_ctx *e, uint64_t addr)
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
		const struct elf_seg *s = seg_of(e, a);
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
	const struct elf_seg *s = seg_of(e, addr - e->bias);
	return s && s->exec;
}

static void elf_destroy(void *ctx)
{
	struct elf_ctx *e = ctx;
	if (e->map)
		munmap((void *)e->map, e->size);
	free(e);
}

/* .symtab (and .dynsym) functions, .plt ranges. */
static int read_sections(struct cfg_reader *r, struct cfg_module *m, Elf *elf, uint64_t bias)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *sname = elf_strptr(elf, shstrndx, sh.sh_name);
		if (sname && strncmp(sname, ".plt", 4) == 0) {
			uint64_t lo = sh.sh_addr + bias, hi = lo + sh.sh_size;
			if (!m->plt_lo || lo < m->plt_lo)
				m->plt_lo = lo;
			if (hi > m->plt_hi)
				m->plt_hi = hi;
		}
		if (sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 1; i < n; i++) {
			GElf_Sym s;
			if (!gelf_getsym(d, (int)i, &s))
				continue;
			int t = GELF_ST_TYPE(s.st_info);
			if ((t != STT_FUNC && t != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF ||
			    !s.st_value)
				continue;
			const char *nm = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!nm)
				continue;
			char *copy = strdup(nm);
			if (!copy || cfg_grow(&m->pool, &m->cpool, m->npool + 1, sizeof(*m->pool)) < 0) {
				free(copy);
				return cfg_reader_err(r, -ENOMEM, "out of memory reading symbols");
			}
			m->pool[m->npool++] = copy;
			if (cfg_module_add_sym(m, s.st_value + bias, s.st_size, copy) < 0)
				return cfg_reader_err(r, -ENOMEM, "out of memory reading symbols");
		}
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
	int err = cfg_reader_alloc(&ops, e, &r);
	if (err < 0) {
		free(e);
		return err;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		cfg_reader_err(r, err, "cannot open %s: %s", path, strerror(errno));
		goto fail;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		err = cfg_reader_err(r, -ENOEXEC, "%s is not an ELF file (too short)", path);
		goto fail;
	}
	e->size = (size_t)st.st_size;
	void *map = mmap(NULL, e->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		err = -errno;
		cfg_reader_err(r, err, "cannot map %s: %s", path, strerror(errno));
		goto fail;
	}
	e->map = map;
	elf_version(EV_CURRENT);
	Elf *elf = elf_memory((char *)e->map, e->size);
	GElf_Ehdr eh;
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		if (elf)
			elf_end(elf);
		err = cfg_reader_err(r, -ENOEXEC, "%s is not an x86-64 ELF file", path);
		goto fail;
	}
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t i = 0; i < eh.e_phnum && e->nsegs < 64; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		/* mapped by whole pages, as the kernel does */
		uint64_t skew = ph.p_vaddr & 4095;
		e->segs[e->nsegs++] = (struct elf_seg){ ph.p_vaddr - skew, ph.p_memsz + skew,
							ph.p_filesz + skew, ph.p_offset - skew,
							(ph.p_flags & PF_X) != 0 };
		if (ph.p_vaddr < lo)
			lo = ph.p_vaddr;
		if (ph.p_vaddr + ph.p_memsz > hi)
			hi = ph.p_vaddr + ph.p_memsz;
	}
	if (!e->nsegs) {
		elf_end(elf);
		err = cfg_reader_err(r, -ENOEXEC, "%s has no loadable segment", path);
		goto fail;
	}
	struct cfg_module *m;
	if ((err = cfg_reader_add_module(r, &m)) < 0) {
		elf_end(elf);
		goto fail;
	}
	m->path = strdup(path);
	m->lo = (lo & ~(uint64_t)4095) + bias;
	m->hi = hi + bias;
	m->parsed = true;
	err = read_sections(r, m, elf, bias);
	elf_end(elf);
	if (err < 0)
		goto fail;
	cfg_module_parse_memory(r, m, m->lo);
	cfg_module_sort(m);
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
