/* image.h: what the files of replacement images share (image.c: opening a
 * file and laying it out; image-link.c: relocating it for its destination;
 * image-check.c: what its code may run and call). Not part of codecache.h. */
#ifndef PADRONE_CODECACHE_IMAGE_H
#define PADRONE_CODECACHE_IMAGE_H

#include "codecache/codecache.h"
#include "codecache/internal.h"

#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>

#define PLT_STUB 8	/* ff 25 disp32 (jmp [rip+slot]) + 2 bytes of int3 */
/* The most code or data one image may need: far more than any replacement
 * function, and bounding what opening and linking (the dry run included)
 * allocate and touch before the code cache is asked. */
#define IMAGE_MAX_SIZE (256u << 20)
#define IMAGE_MAX_ALIGN 64u	/* cc_cache__alloc's alignment of a block */

enum itype { IT_RAW, IT_REL, IT_DYN };

struct isect {
	bool load;		/* placed in a block */
	bool code;		/* in the code block (else data) */
	bool nobits;
	uint64_t off;		/* offset in its block */
	uint64_t size;
};

struct isym {
	uint32_t got;		/* 1 + GOT slot, or 0 */
	uint32_t plt;		/* 1 + PLT stub, or 0 */
	uint64_t common_off;	/* REL: COMMON symbol's offset in data, +1 */
};

struct cc_image {
	char *path;
	enum itype type;
	int fd;
	Elf *elf;
	uint8_t *raw;		/* IT_RAW: the file */
	size_t raw_len;
	char *symbol;		/* the chosen function */
	uint64_t sym_value;	/* REL: offset in its section; DYN: vaddr */
	size_t sym_shndx;
	size_t shnum;
	uint64_t file_size;
	struct isect *sect;	/* by section index */
	Elf_Scn *symtab;	/* REL: .symtab, DYN: .dynsym */
	size_t nsyms;
	struct isym *syms;
	size_t code_size, data_size, ngot, nplt;
	uint64_t got_off, plt_off;	/* in data / code */
	uint64_t vbase, span;	/* DYN: lowest page and size of the span */
	struct cc_image_seg segs[CC_IMAGE_MAX_SEGS];
	size_t nsegs;
};

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
	return a > 1 ? (v + a - 1) & ~(a - 1) : v;
}

static inline const char *sym_name(const struct cc_image *im, const GElf_Sym *s)
{
	GElf_Shdr sh;
	gelf_getshdr(im->symtab, &sh);
	const char *n = elf_strptr(im->elf, sh.sh_link, s->st_name);
	return n ? n : "?";
}

static inline bool get_sym(const struct cc_image *im, size_t i, GElf_Sym *s)
{
	return gelf_getsym(elf_getdata(im->symtab, NULL), (int)i, s) != NULL;
}

static inline const char *sect_name(const struct cc_image *im, size_t idx)
{
	size_t shstrndx;
	GElf_Shdr sh;
	Elf_Scn *scn = elf_getscn(im->elf, idx);

	if (!scn || !gelf_getshdr(scn, &sh) || elf_getshdrstrndx(im->elf, &shstrndx) < 0)
		return "?";
	const char *n = elf_strptr(im->elf, shstrndx, sh.sh_name);
	return n ? n : "?";
}

static inline const char *reloc_name(unsigned type)
{
	static const char *const names[] = {
		[R_X86_64_NONE] = "R_X86_64_NONE", [R_X86_64_64] = "R_X86_64_64",
		[R_X86_64_PC32] = "R_X86_64_PC32", [R_X86_64_GOT32] = "R_X86_64_GOT32",
		[R_X86_64_PLT32] = "R_X86_64_PLT32", [R_X86_64_COPY] = "R_X86_64_COPY",
		[R_X86_64_GLOB_DAT] = "R_X86_64_GLOB_DAT", [R_X86_64_JUMP_SLOT] = "R_X86_64_JUMP_SLOT",
		[R_X86_64_RELATIVE] = "R_X86_64_RELATIVE", [R_X86_64_GOTPCREL] = "R_X86_64_GOTPCREL",
		[R_X86_64_32] = "R_X86_64_32", [R_X86_64_32S] = "R_X86_64_32S",
		[R_X86_64_16] = "R_X86_64_16", [R_X86_64_PC16] = "R_X86_64_PC16",
		[R_X86_64_8] = "R_X86_64_8", [R_X86_64_PC8] = "R_X86_64_PC8",
		[R_X86_64_DTPMOD64] = "R_X86_64_DTPMOD64", [R_X86_64_DTPOFF64] = "R_X86_64_DTPOFF64",
		[R_X86_64_TPOFF64] = "R_X86_64_TPOFF64", [R_X86_64_TLSGD] = "R_X86_64_TLSGD",
		[R_X86_64_TLSLD] = "R_X86_64_TLSLD", [R_X86_64_DTPOFF32] = "R_X86_64_DTPOFF32",
		[R_X86_64_GOTTPOFF] = "R_X86_64_GOTTPOFF", [R_X86_64_TPOFF32] = "R_X86_64_TPOFF32",
		[R_X86_64_PC64] = "R_X86_64_PC64", [R_X86_64_GOTOFF64] = "R_X86_64_GOTOFF64",
		[R_X86_64_GOTPC32] = "R_X86_64_GOTPC32", [R_X86_64_GOT64] = "R_X86_64_GOT64",
		[R_X86_64_GOTPCREL64] = "R_X86_64_GOTPCREL64", [R_X86_64_GOTPC64] = "R_X86_64_GOTPC64",
		[R_X86_64_GOTPLT64] = "R_X86_64_GOTPLT64", [R_X86_64_PLTOFF64] = "R_X86_64_PLTOFF64",
		[R_X86_64_SIZE32] = "R_X86_64_SIZE32", [R_X86_64_SIZE64] = "R_X86_64_SIZE64",
		[R_X86_64_GOTPC32_TLSDESC] = "R_X86_64_GOTPC32_TLSDESC",
		[R_X86_64_TLSDESC_CALL] = "R_X86_64_TLSDESC_CALL", [R_X86_64_TLSDESC] = "R_X86_64_TLSDESC",
		[R_X86_64_IRELATIVE] = "R_X86_64_IRELATIVE", [R_X86_64_RELATIVE64] = "R_X86_64_RELATIVE64",
		[R_X86_64_GOTPCRELX] = "R_X86_64_GOTPCRELX", [R_X86_64_REX_GOTPCRELX] = "R_X86_64_REX_GOTPCRELX",
	};
	return type < sizeof names / sizeof names[0] && names[type] ? names[type] : "an unknown relocation";
}

static inline bool is_tls_reloc(unsigned type)
{
	switch (type) {
	case R_X86_64_DTPMOD64: case R_X86_64_DTPOFF64: case R_X86_64_TPOFF64:
	case R_X86_64_TLSGD: case R_X86_64_TLSLD: case R_X86_64_DTPOFF32:
	case R_X86_64_GOTTPOFF: case R_X86_64_TPOFF32: case R_X86_64_GOTPC32_TLSDESC:
	case R_X86_64_TLSDESC_CALL: case R_X86_64_TLSDESC:
		return true;
	}
	return false;
}

static inline bool is_got_reloc(unsigned type)
{
	return type == R_X86_64_GOTPCREL || type == R_X86_64_GOTPCRELX ||
	       type == R_X86_64_REX_GOTPCRELX || type == R_X86_64_GOTPCREL64 ||
	       type == R_X86_64_GOT64 || type == R_X86_64_GOTPLT64;
}

#endif
