/* Replacement code from a file: a relocatable object (gcc -O3 -mavx2 -c),
 * a shared object, or a raw blob of position-independent code.
 *
 * Opening reads and checks the file and computes the layout; linking, once
 * the destination addresses are known, applies the relocations against
 * them and against the target's own symbols (found through a callback), and
 * fills caller-provided buffers. Nothing here touches a process.
 *
 * A relocatable object is split in two blocks placed independently: code
 * (its executable sections, then one 8-byte stub `jmp [rip+got]` per outside
 * function that may be out of rel32 reach) and data (everything else that is
 * allocated, COMMON symbols, then the GOT this loader synthesizes). A shared
 * object keeps its own layout: one block whose pages get each segment's
 * protection.
 */
#include "codecache/codecache.h"
#include "codecache/internal.h"

#include <Zydis/Zydis.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return a > 1 ? (v + a - 1) & ~(a - 1) : v;
}

static const char *sym_name(const struct cc_image *im, const GElf_Sym *s)
{
	GElf_Shdr sh;
	gelf_getshdr(im->symtab, &sh);
	const char *n = elf_strptr(im->elf, sh.sh_link, s->st_name);
	return n ? n : "?";
}

static bool get_sym(const struct cc_image *im, size_t i, GElf_Sym *s)
{
	return gelf_getsym(elf_getdata(im->symtab, NULL), (int)i, s) != NULL;
}

static const char *sect_name(const struct cc_image *im, size_t idx)
{
	size_t shstrndx;
	GElf_Shdr sh;
	Elf_Scn *scn = elf_getscn(im->elf, idx);

	if (!scn || !gelf_getshdr(scn, &sh) || elf_getshdrstrndx(im->elf, &shstrndx) < 0)
		return "?";
	const char *n = elf_strptr(im->elf, shstrndx, sh.sh_name);
	return n ? n : "?";
}

static const char *reloc_name(unsigned type)
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

static bool is_tls_reloc(unsigned type)
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

static bool is_got_reloc(unsigned type)
{
	return type == R_X86_64_GOTPCREL || type == R_X86_64_GOTPCRELX ||
	       type == R_X86_64_REX_GOTPCRELX || type == R_X86_64_GOTPCREL64 ||
	       type == R_X86_64_GOT64 || type == R_X86_64_GOTPLT64;
}

/* ---------------------------------------------------------------- open */

Elf_Scn *cc__find_section(Elf *e, unsigned type)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == type)
			return scn;
	return NULL;
}

/* The function to load: the one named, or the only global function. */
static int choose_symbol(struct cc_image *im, const char *want, struct cc_error *err)
{
	char list[256] = "";
	size_t nfound = 0, found = 0, len = 0;

	for (size_t i = 1; i < im->nsyms; i++) {
		GElf_Sym s;
		if (!get_sym(im, i, &s) || s.st_shndx == SHN_UNDEF ||
		    (GELF_ST_TYPE(s.st_info) != STT_FUNC && GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC))
			continue;
		const char *n = sym_name(im, &s);
		if (want) {
			if (strcmp(n, want) == 0) {
				found = i;
				nfound = 1;
				break;
			}
		} else if (GELF_ST_BIND(s.st_info) != STB_LOCAL) {
			found = i;
			nfound++;
		}
		if (GELF_ST_BIND(s.st_info) != STB_LOCAL && len < sizeof list - 2)
			len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", n);
	}
	if (nfound != 1) {
		if (want) {
			cc__err(err, -ENOENT, "%s has no function named %s%s%s", im->path, want,
				list[0] ? "; it defines " : "", list);
			if (err)
				err->no_symbol = true;
			return -ENOENT;
		}
		if (nfound == 0)
			return cc__err(err, -ENOENT, "%s defines no global function", im->path);
		return cc__err(err, -EINVAL, "%s defines several functions (%s): name one as %s:SYMBOL",
			    im->path, list, im->path);
	}
	GElf_Sym s;
	get_sym(im, found, &s);
	if (im->type == IT_REL && s.st_shndx >= im->shnum)
		return cc__err(err, -EINVAL, "%s is corrupt: %s is in section %u, which it does not "
			    "have", im->path, sym_name(im, &s), (unsigned)s.st_shndx);
	if (GELF_ST_TYPE(s.st_info) == STT_GNU_IFUNC)
		return cc__err(err, -ENOTSUP, "%s: %s is an IFUNC; load the implementation it selects",
			    im->path, sym_name(im, &s));
	im->symbol = strdup(sym_name(im, &s));
	im->sym_value = s.st_value;
	im->sym_shndx = s.st_shndx;
	return im->symbol ? 0 : -ENOMEM;
}

/* Code the object wants run before its functions are called: .init_array
 * and .preinit_array entries, .ctors (older compilers), .init code. The
 * loader only places it, and a function whose data a constructor should
 * have set up would return wrong results on every call. */
static bool is_constructors(const struct cc_image *im, size_t i, const GElf_Shdr *sh)
{
	const char *n = sect_name(im, i);

	return sh->sh_type == SHT_INIT_ARRAY || sh->sh_type == SHT_PREINIT_ARRAY ||
	       strcmp(n, ".ctors") == 0 || strncmp(n, ".ctors.", 7) == 0 || strcmp(n, ".init") == 0;
}

static int refuse_constructors(const struct cc_image *im, const char *what, struct cc_error *err)
{
	return cc__err(err, -ENOTSUP, "%s has constructors (%s), which padrone does not run: the "
		    "replacement would see its data uninitialised; set it up statically or at the "
		    "first call", im->path, what);
}

static int refuse_rel_constructors(const struct cc_image *im, size_t i, const GElf_Shdr *sh,
				   struct cc_error *err)
{
	char what[96];

	if (sh->sh_flags & SHF_EXECINSTR)
		snprintf(what, sizeof what, "code in %s", sect_name(im, i));
	else
		snprintf(what, sizeof what, "%s: %" PRIu64 " entr%s", sect_name(im, i),
			 (uint64_t)sh->sh_size / 8, sh->sh_size == 8 ? "y" : "ies");
	return refuse_constructors(im, what, err);
}

/* The function at vaddr a of a shared object, by .symtab, or NULL. */
static const char *dyn_func_named(const struct cc_image *im, uint64_t a)
{
	for (size_t i = 1; i < im->nsyms; i++) {
		GElf_Sym s;
		if (get_sym(im, i, &s) && GELF_ST_TYPE(s.st_info) == STT_FUNC && s.st_value == a &&
		    s.st_shndx != SHN_UNDEF)
			return sym_name(im, &s);
	}
	return NULL;
}

/* What a shared object's .init_array slot at vaddr slot points to: the
 * addend of its R_X86_64_RELATIVE (PIC), else the word in the file. */
static uint64_t dyn_slot_value(const struct cc_image *im, uint64_t slot, const uint8_t *file_word)
{
	Elf_Scn *scn = NULL;
	uint64_t v = 0;

	while ((scn = elf_nextscn(im->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t k = 0; d && k < sh.sh_size / sizeof(Elf64_Rela); k++) {
			GElf_Rela r;
			if (gelf_getrela(d, (int)k, &r) && r.r_offset == slot &&
			    GELF_R_TYPE(r.r_info) == R_X86_64_RELATIVE)
				return (uint64_t)r.r_addend;
		}
	}
	if (file_word)
		memcpy(&v, file_word, 8);
	return v;
}

/* A shared object's constructors, but for the C runtime's frame_dummy
 * (crtbeginS.o's, in every gcc or clang -shared object; it only registers
 * transactional-memory clones, which replacement code has none of). */
static int check_dyn_constructors(const struct cc_image *im, struct cc_error *err)
{
	for (size_t i = 1; i < im->shnum; i++) {
		GElf_Shdr sh;
		Elf_Scn *scn = elf_getscn(im->elf, i);
		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_INIT_ARRAY && sh.sh_type != SHT_PREINIT_ARRAY))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (uint64_t k = 0; k < sh.sh_size / 8; k++) {
			const uint8_t *w = d && d->d_buf && d->d_size >= 8 * (k + 1) ?
					   (const uint8_t *)d->d_buf + 8 * k : NULL;
			uint64_t fn = dyn_slot_value(im, sh.sh_addr + 8 * k, w);
			const char *name = dyn_func_named(im, fn);
			if (name && strcmp(name, "frame_dummy") == 0)
				continue;
			char what[160];
			if (name)
				snprintf(what, sizeof what, "%s: %s", sect_name(im, i), name);
			else
				snprintf(what, sizeof what, "%s: the function at 0x%" PRIx64,
					 sect_name(im, i), fn);
			return refuse_constructors(im, what, err);
		}
	}
	return 0;
}

/* Relocatable object: place sections, COMMONs, count GOT slots and stubs. */
static int layout_rel(struct cc_image *im, struct cc_error *err)
{
	uint64_t code = 0, data = 0;

	for (size_t i = 1; i < im->shnum; i++) {
		GElf_Shdr sh;
		Elf_Scn *scn = elf_getscn(im->elf, i);
		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || sh.sh_size == 0)
			continue;
		if (sh.sh_type == SHT_NOTE || strcmp(sect_name(im, i), ".eh_frame") == 0)
			continue;	/* no unwinding through the code cache */
		if (is_constructors(im, i, &sh))
			return refuse_rel_constructors(im, i, &sh, err);
		if (sh.sh_flags & SHF_TLS)
			return cc__err(err, -ENOTSUP, "%s: section %s holds thread-local data, which "
				    "replacement code cannot have", im->path, sect_name(im, i));
		if (sh.sh_addralign > IMAGE_MAX_ALIGN)
			return cc__err(err, -ENOTSUP, "%s: section %s needs %" PRIu64 "-byte alignment; "
				    "the code cache aligns to %u", im->path, sect_name(im, i),
				    (uint64_t)sh.sh_addralign, IMAGE_MAX_ALIGN);
		struct isect *s = &im->sect[i];
		s->load = true;
		s->code = sh.sh_flags & SHF_EXECINSTR;
		s->nobits = sh.sh_type == SHT_NOBITS;
		s->size = sh.sh_size;
		uint64_t *pos = s->code ? &code : &data;
		*pos = align_up(*pos, sh.sh_addralign);
		s->off = *pos;
		*pos += sh.sh_size;
	}
	for (size_t i = 1; i < im->nsyms; i++) {
		GElf_Sym s;
		if (get_sym(im, i, &s) && s.st_shndx == SHN_COMMON) {
			if (s.st_value > IMAGE_MAX_ALIGN || s.st_size > IMAGE_MAX_SIZE)
				return cc__err(err, -EINVAL, "%s is corrupt: COMMON symbol %s has "
					    "alignment %" PRIu64 " and size %" PRIu64, im->path,
					    sym_name(im, &s), (uint64_t)s.st_value, (uint64_t)s.st_size);
			data = align_up(data, s.st_value);
			im->syms[i].common_off = data + 1;
			data += s.st_size;
		}
	}
	/* GOT slots and stubs, one per symbol that needs them. */
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(im->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || sh.sh_info >= im->shnum ||
		    !im->sect[sh.sh_info].load)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t k = 0; k < sh.sh_size / sh.sh_entsize; k++) {
			GElf_Rela r;
			gelf_getrela(d, (int)k, &r);
			unsigned type = GELF_R_TYPE(r.r_info);
			size_t si = GELF_R_SYM(r.r_info);
			GElf_Sym s;
			if (si == 0 || si >= im->nsyms || !get_sym(im, si, &s))
				continue;
			if (is_tls_reloc(type))
				return cc__err(err, -ENOTSUP, "%s: %s against %s (thread-local storage) "
					    "cannot be loaded into a code cache", im->path,
					    reloc_name(type), sym_name(im, &s));
			if (is_got_reloc(type) && !im->syms[si].got)
				im->syms[si].got = (uint32_t)++im->ngot;
			if ((type == R_X86_64_PLT32 || type == R_X86_64_PC32) &&
			    s.st_shndx == SHN_UNDEF && !im->syms[si].plt &&
			    GELF_ST_TYPE(s.st_info) != STT_OBJECT) {
				im->syms[si].plt = (uint32_t)++im->nplt;
				if (!im->syms[si].got)
					im->syms[si].got = (uint32_t)++im->ngot;
			}
		}
	}
	im->plt_off = align_up(code, 8);
	im->code_size = im->plt_off + im->nplt * PLT_STUB;
	im->got_off = align_up(data, 8);
	im->data_size = im->got_off + im->ngot * 8;
	if (im->code_size > IMAGE_MAX_SIZE || im->data_size > IMAGE_MAX_SIZE)
		return cc__err(err, -EFBIG, "%s needs %zu bytes of code and %zu of data, more than "
			    "the %u MiB a replacement may have", im->path, im->code_size,
			    im->data_size, IMAGE_MAX_SIZE >> 20);
	if (!im->sect[im->sym_shndx].load || !im->sect[im->sym_shndx].code)
		return cc__err(err, -EINVAL, "%s: %s is not in an executable section", im->path, im->symbol);
	return 0;
}

/* Shared object: the span of its PT_LOAD segments, one protection each. */
static int layout_dyn(struct cc_image *im, struct cc_error *err)
{
	size_t n;
	uint64_t lo = UINT64_MAX, hi = 0;

	if (elf_getphdrnum(im->elf, &n) < 0)
		return cc__err(err, -EINVAL, "%s: no program headers", im->path);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(im->elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_TLS && ph.p_memsz)
			return cc__err(err, -ENOTSUP, "%s has thread-local storage, which replacement "
				    "code cannot have", im->path);
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		if (ph.p_filesz > ph.p_memsz || ph.p_offset > im->file_size ||
		    ph.p_filesz > im->file_size - ph.p_offset || ph.p_memsz > IMAGE_MAX_SIZE ||
		    ph.p_vaddr > (1ULL << 47))
			return cc__err(err, -EINVAL, "%s is corrupt: segment %zu (offset 0x%" PRIx64
				    ", %" PRIu64 " bytes in the file, %" PRIu64 " in memory) does not "
				    "fit the file or the %u MiB a replacement may have", im->path, i,
				    (uint64_t)ph.p_offset, (uint64_t)ph.p_filesz,
				    (uint64_t)ph.p_memsz, IMAGE_MAX_SIZE >> 20);
		if (im->nsegs == CC_IMAGE_MAX_SEGS)
			return cc__err(err, -E2BIG, "%s has too many segments", im->path);
		struct cc_image_seg *sg = &im->segs[im->nsegs++];
		sg->off = ph.p_vaddr & ~4095ULL;
		sg->size = align_up(ph.p_vaddr + ph.p_memsz, 4096) - sg->off;
		sg->prot = CC_PROT_R | (ph.p_flags & PF_W ? CC_PROT_W : 0) |
			   (ph.p_flags & PF_X ? CC_PROT_X : 0);
		if (sg->prot == (CC_PROT_R | CC_PROT_W | CC_PROT_X))
			return cc__err(err, -EPERM, "%s has a segment both writable and executable",
				    im->path);
		if (sg->off < lo)
			lo = sg->off;
		if (sg->off + sg->size > hi)
			hi = sg->off + sg->size;
	}
	if (im->nsegs == 0)
		return cc__err(err, -EINVAL, "%s has no loadable segment", im->path);
	for (size_t i = 0; i < im->nsegs; i++) {
		for (size_t j = i + 1; j < im->nsegs; j++) {
			struct cc_image_seg *a = &im->segs[i], *b = &im->segs[j];
			if (a->off < b->off + b->size && b->off < a->off + a->size &&
			    ((a->prot | b->prot) & (CC_PROT_W | CC_PROT_X)) == (CC_PROT_W | CC_PROT_X))
				return cc__err(err, -EPERM, "%s: a writable and an executable segment "
					    "share a page (link with -z separate-code)", im->path);
		}
	}
	int rc = check_dyn_constructors(im, err);
	if (rc < 0)
		return rc;
	im->vbase = lo;
	im->span = hi - lo;
	if (im->span > IMAGE_MAX_SIZE)
		return cc__err(err, -EFBIG, "%s spans %" PRIu64 " bytes, more than the %u MiB a "
			    "replacement may have", im->path, im->span, IMAGE_MAX_SIZE >> 20);
	for (size_t i = 0; i < im->nsegs; i++)
		im->segs[i].off -= lo;
	return 0;
}

/* A PIE executable is ET_DYN too; it names its interpreter. */
static bool has_interp(Elf *e)
{
	size_t n;
	GElf_Phdr ph;

	if (elf_getphdrnum(e, &n) < 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_INTERP)
			return true;
	return false;
}

/* Every section inside the file, tables of whole entries of their type:
 * what libelf does not check before handing out sizes and counts that
 * layout and linking then allocate and loop by. */
static int check_sections(struct cc_image *im, struct cc_error *err)
{
	for (size_t i = 1; i < im->shnum; i++) {
		GElf_Shdr sh;
		Elf_Scn *scn = elf_getscn(im->elf, i);
		if (!scn || !gelf_getshdr(scn, &sh))
			return cc__err(err, -EINVAL, "%s is corrupt: cannot read section header %zu",
				    im->path, i);
		bool in_file = sh.sh_type == SHT_NOBITS ||
			       (sh.sh_offset <= im->file_size &&
				sh.sh_size <= im->file_size - sh.sh_offset);
		if (!in_file)
			return cc__err(err, -EINVAL, "%s is corrupt: section %s (%" PRIu64 " bytes at "
				    "offset 0x%" PRIx64 ") ends past the end of the file (%" PRIu64
				    " bytes)", im->path, sect_name(im, i), (uint64_t)sh.sh_size,
				    (uint64_t)sh.sh_offset, im->file_size);
		size_t want = sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM ? sizeof(Elf64_Sym) :
			      sh.sh_type == SHT_RELA ? sizeof(Elf64_Rela) :
			      sh.sh_type == SHT_REL ? sizeof(Elf64_Rel) : 0;
		bool table = sh.sh_type == SHT_RELA || sh.sh_type == SHT_REL;
		if (want && (sh.sh_entsize != want || sh.sh_size % want || sh.sh_link >= im->shnum ||
			     (table && sh.sh_info >= im->shnum)))
			return cc__err(err, -EINVAL, "%s is corrupt: section %s is not a table of "
				    "%zu-byte entries linked to a section of the file", im->path,
				    sect_name(im, i), want);
	}
	return 0;
}

static int open_elf(struct cc_image *im, const char *symbol, struct cc_error *err)
{
	GElf_Ehdr eh;

	elf_version(EV_CURRENT);
	im->elf = elf_begin(im->fd, ELF_C_READ, NULL);
	if (!im->elf || elf_kind(im->elf) != ELF_K_ELF || !gelf_getehdr(im->elf, &eh))
		return cc__err(err, -ENOEXEC, "%s is not an ELF file (for raw code, load it as raw)",
			    im->path);
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64)
		return cc__err(err, -ENOEXEC, "%s is not x86-64 ELF", im->path);
	if (eh.e_type == ET_REL)
		im->type = IT_REL;
	else if (eh.e_type == ET_DYN && !has_interp(im->elf))
		im->type = IT_DYN;
	else
		return cc__err(err, -ENOEXEC, "%s is an executable; give a relocatable object "
			    "(cc -c) or a shared object (cc -shared)", im->path);
	if (elf_getshdrnum(im->elf, &im->shnum) < 0)
		return cc__err(err, -ENOEXEC, "%s: no section headers", im->path);
	struct stat st;
	if (fstat(im->fd, &st) < 0)
		return cc__err(err, -errno, "%s: %s", im->path, strerror(errno));
	im->file_size = (uint64_t)st.st_size;
	int rc = check_sections(im, err);
	if (rc < 0)
		return rc;
	/* A shared object's static functions are only in .symtab; its
	 * dynamic relocations use .dynsym (link_dyn). */
	im->symtab = cc__find_section(im->elf, SHT_SYMTAB);
	if (!im->symtab && im->type == IT_DYN)
		im->symtab = cc__find_section(im->elf, SHT_DYNSYM);
	if (!im->symtab)
		return cc__err(err, -ENOEXEC, "%s has no symbol table", im->path);
	GElf_Shdr sh;
	gelf_getshdr(im->symtab, &sh);
	im->nsyms = sh.sh_size / sh.sh_entsize;
	im->sect = calloc(im->shnum, sizeof *im->sect);
	im->syms = calloc(im->nsyms ? im->nsyms : 1, sizeof *im->syms);
	if (!im->sect || !im->syms)
		return cc__err(err, -ENOMEM, "out of memory");
	rc = choose_symbol(im, symbol, err);
	if (rc < 0)
		return rc;
	return im->type == IT_REL ? layout_rel(im, err) : layout_dyn(im, err);
}

static int open_raw(struct cc_image *im, struct cc_error *err)
{
	struct stat st;

	if (fstat(im->fd, &st) < 0)
		return cc__err(err, -errno, "%s: %s", im->path, strerror(errno));
	if (st.st_size == 0)
		return cc__err(err, -EINVAL, "%s is empty", im->path);
	im->raw_len = (size_t)st.st_size;
	im->raw = malloc(im->raw_len);
	if (!im->raw)
		return cc__err(err, -ENOMEM, "out of memory");
	if (pread(im->fd, im->raw, im->raw_len, 0) != (ssize_t)im->raw_len)
		return cc__err(err, -EIO, "%s: short read", im->path);
	im->type = IT_RAW;
	im->code_size = im->raw_len;
	im->symbol = strdup("(raw)");
	return 0;
}

int cc_image__open(const char *path, const struct cc_image_opts *opts, struct cc_image **out,
		   struct cc_error *err)
{
	struct cc_image_opts o = { .sz = sizeof o };
	int rc;

	*out = NULL;
	if (!UTIL_OPTS_COPY(&o, opts))
		return cc__err(err, -EINVAL, UTIL_OPTS_UNKNOWN);
	struct cc_image *im = calloc(1, sizeof *im);
	if (!im || !(im->path = strdup(path))) {
		free(im);
		return cc__err(err, -ENOMEM, "out of memory");
	}
	im->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (im->fd < 0) {
		rc = cc__err(err, -errno, "cannot open %s: %s", path, strerror(errno));
		goto err;
	}
	rc = o.raw ? open_raw(im, err) : open_elf(im, o.symbol, err);
	if (rc < 0)
		goto err;
	*out = im;
	return 0;
err:
	cc_image__free(im);
	return rc;
}

void cc_image__free(struct cc_image *im)
{
	if (!im)
		return;
	if (im->elf)
		elf_end(im->elf);
	if (im->fd >= 0)
		close(im->fd);
	free(im->raw);
	free(im->sect);
	free(im->syms);
	free(im->symbol);
	free(im->path);
	free(im);
}

const char *cc_image__symbol(const struct cc_image *im) { return im->symbol; }
const char *cc_image__path(const struct cc_image *im) { return im->path; }

void cc_image__layout(const struct cc_image *im, struct cc_image_layout *l)
{
	memset(l, 0, sizeof *l);
	if (im->type == IT_DYN) {
		l->fixed = true;
		l->code_size = im->span;
		l->nsegs = im->nsegs;
		memcpy(l->segs, im->segs, sizeof im->segs);
		return;
	}
	l->code_size = im->code_size;
	l->data_size = im->data_size;
}

/* ---------------------------------------------------------------- link */

struct linkctx {
	const struct cc_image *im;
	uint64_t code, data;		/* where the blocks go */
	uint8_t *code_buf, *data_buf;
	cc_resolve_fn resolve;
	void *arg;
	struct cc_error *err;
};

/* The address of symbol si (REL), resolving outside ones. */
static int sym_addr(struct linkctx *cx, size_t si, uint64_t *addr)
{
	const struct cc_image *im = cx->im;
	GElf_Sym s;

	if (si == 0) {
		*addr = 0;
		return 0;
	}
	get_sym(im, si, &s);
	if (s.st_shndx == SHN_ABS) {
		*addr = s.st_value;
		return 0;
	}
	if (s.st_shndx == SHN_COMMON) {
		*addr = cx->data + im->syms[si].common_off - 1;
		return 0;
	}
	if (s.st_shndx != SHN_UNDEF && s.st_shndx < im->shnum && s.st_shndx != SHN_XINDEX) {
		const struct isect *sc = &im->sect[s.st_shndx];
		if (!sc->load)
			return cc__err(cx->err, -EINVAL, "%s: %s is in section %s, which is not loaded",
				    im->path, sym_name(im, &s), sect_name(im, s.st_shndx));
		*addr = (sc->code ? cx->code : cx->data) + sc->off + s.st_value;
		return 0;
	}
	const char *name = sym_name(im, &s);
	int rc = cx->resolve ? cx->resolve(cx->arg, name, addr) : -ENOENT;
	if (rc == 0)
		return 0;
	if (rc == -ENOTSUP)
		return cc__err(cx->err, rc, "%s needs %s, which the target defines as an IFUNC padrone "
			    "cannot see through", im->path, name);
	if (rc == -ENOTUNIQ)
		return cc__err(cx->err, rc, "%s needs %s, which the target defines more than once",
			    im->path, name);
	if (GELF_ST_BIND(s.st_info) == STB_WEAK) {
		*addr = 0;
		return 0;
	}
	return cc__err(cx->err, -ENOENT, "%s needs %s, which the target does not define",
		    im->path, name);
}

static bool fits_s32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

static int put(struct linkctx *cx, uint8_t *at, int64_t v, int width, bool is_signed,
	       unsigned type, const char *what, uint64_t where)
{
	if (width == 4) {
		if (is_signed ? !fits_s32(v) : (uint64_t)v > UINT32_MAX)
			return cc__err(cx->err, -ERANGE, "%s: %s to %s at 0x%" PRIx64 " does not fit in "
				    "32 bits%s", cx->im->path, reloc_name(type), what, where,
				    type == R_X86_64_32 || type == R_X86_64_32S ?
				    " (compile the replacement with -fPIC)" :
				    type == R_X86_64_PC32 ? " (out of +-2 GiB reach; compile the "
				    "replacement with -fPIC so outside data goes through the GOT)" : "");
		int32_t w = (int32_t)v;
		memcpy(at, &w, 4);
	} else {
		memcpy(at, &v, 8);
	}
	return 0;
}

static int link_rela(struct linkctx *cx, Elf_Scn *scn, const GElf_Shdr *sh)
{
	const struct cc_image *im = cx->im;
	const struct isect *tgt = &im->sect[sh->sh_info];
	uint8_t *base = (tgt->code ? cx->code_buf : cx->data_buf) + tgt->off;
	uint64_t vbase = (tgt->code ? cx->code : cx->data) + tgt->off;
	Elf_Data *d = elf_getdata(scn, NULL);
	uint64_t got = cx->data + im->got_off;
	int rc;

	for (size_t k = 0; k < sh->sh_size / sh->sh_entsize; k++) {
		GElf_Rela r;
		gelf_getrela(d, (int)k, &r);
		unsigned type = GELF_R_TYPE(r.r_info);
		size_t si = GELF_R_SYM(r.r_info);
		uint64_t S, P = vbase + r.r_offset;
		int64_t A = r.r_addend;
		uint8_t *at = base + r.r_offset;
		GElf_Sym s = { 0 };
		const char *what = "?";

		if (type == R_X86_64_NONE)
			continue;
		if (r.r_offset + (type == R_X86_64_64 || type == R_X86_64_PC64 ? 8 : 4) > tgt->size)
			return cc__err(cx->err, -EINVAL, "%s: relocation outside its section", im->path);
		if (si) {
			get_sym(im, si, &s);
			what = GELF_ST_TYPE(s.st_info) == STT_SECTION ? sect_name(im, s.st_shndx)
								       : sym_name(im, &s);
		}
		if ((rc = sym_addr(cx, si, &S)) < 0)
			return rc;
		uint64_t G = si && im->syms[si].got ? got + 8 * (im->syms[si].got - 1) : 0;
		if (G)	/* the synthesized GOT slot holds the symbol's address */
			memcpy(cx->data_buf + (G - cx->data), &S, 8);
		switch (type) {
		case R_X86_64_64:
			rc = put(cx, at, (int64_t)(S + A), 8, false, type, what, P);
			break;
		case R_X86_64_PC64:
			rc = put(cx, at, (int64_t)(S + A - P), 8, true, type, what, P);
			break;
		case R_X86_64_PC32:
		case R_X86_64_PLT32:
			/* an outside function out of reach goes through its stub */
			if (im->syms[si].plt && !fits_s32((int64_t)(S + A - P)))
				S = cx->code + im->plt_off + PLT_STUB * (im->syms[si].plt - 1);
			rc = put(cx, at, (int64_t)(S + A - P), 4, true, type, what, P);
			break;
		case R_X86_64_32:
			rc = put(cx, at, (int64_t)(S + A), 4, false, type, what, P);
			break;
		case R_X86_64_32S:
			rc = put(cx, at, (int64_t)(S + A), 4, true, type, what, P);
			break;
		case R_X86_64_GOTPCREL:
		case R_X86_64_GOTPCRELX:
		case R_X86_64_REX_GOTPCRELX:
			rc = put(cx, at, (int64_t)(G + A - P), 4, true, type, what, P);
			break;
		case R_X86_64_GOTPCREL64:
			rc = put(cx, at, (int64_t)(G + A - P), 8, true, type, what, P);
			break;
		case R_X86_64_GOTPC32:
			rc = put(cx, at, (int64_t)(got + A - P), 4, true, type, what, P);
			break;
		case R_X86_64_GOTPC64:
			rc = put(cx, at, (int64_t)(got + A - P), 8, true, type, what, P);
			break;
		case R_X86_64_GOTOFF64:
			rc = put(cx, at, (int64_t)(S + A - got), 8, true, type, what, P);
			break;
		case R_X86_64_GOT64:
		case R_X86_64_GOTPLT64:
			rc = put(cx, at, (int64_t)(G - got + A), 8, true, type, what, P);
			break;
		case R_X86_64_SIZE32:
			rc = put(cx, at, (int64_t)(s.st_size + A), 4, false, type, what, P);
			break;
		case R_X86_64_SIZE64:
			rc = put(cx, at, (int64_t)(s.st_size + A), 8, false, type, what, P);
			break;
		default:
			return cc__err(cx->err, -ENOTSUP, "%s: %s (type %u) against %s is not supported "
				    "in replacement code", im->path, reloc_name(type), type, what);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int link_rel(struct linkctx *cx)
{
	const struct cc_image *im = cx->im;
	int rc;

	for (size_t i = 1; i < im->shnum; i++) {
		const struct isect *s = &im->sect[i];
		if (!s->load || s->nobits)
			continue;
		Elf_Data *d = elf_getdata(elf_getscn(im->elf, i), NULL);
		if (!d || d->d_size != s->size)
			return cc__err(cx->err, -EINVAL, "%s: cannot read section %s", im->path,
				    sect_name(im, i));
		memcpy((s->code ? cx->code_buf : cx->data_buf) + s->off, d->d_buf, s->size);
	}
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(im->elf, scn))) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_REL)
			return cc__err(cx->err, -ENOTSUP, "%s: REL relocations (without addend) are "
				    "not used on x86-64", im->path);
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || sh.sh_info >= im->shnum ||
		    !im->sect[sh.sh_info].load)
			continue;
		if ((rc = link_rela(cx, scn, &sh)) < 0)
			return rc;
	}
	/* stubs: jmp [rip + slot]; int3; int3 */
	for (size_t si = 1; si < im->nsyms; si++) {
		if (!im->syms[si].plt)
			continue;
		uint64_t at = cx->code + im->plt_off + PLT_STUB * (im->syms[si].plt - 1);
		uint64_t slot = cx->data + im->got_off + 8 * (im->syms[si].got - 1);
		uint8_t *p = cx->code_buf + (at - cx->code);
		uint64_t S;
		if ((rc = sym_addr(cx, si, &S)) < 0)
			return rc;
		memcpy(cx->data_buf + (slot - cx->data), &S, 8);
		int64_t disp = (int64_t)(slot - (at + 6));
		if (!fits_s32(disp))
			return cc__err(cx->err, -ERANGE, "%s: the code and data of the code cache are "
				    "out of reach of each other", im->path);
		int32_t d32 = (int32_t)disp;
		p[0] = 0xff;
		p[1] = 0x25;
		memcpy(p + 2, &d32, 4);
		p[6] = p[7] = 0xcc;
	}
	return 0;
}

/* Shared object: copy segments, apply its dynamic relocations. */
static int link_dyn(struct linkctx *cx)
{
	const struct cc_image *im = cx->im;
	size_t n;
	uint64_t B = cx->code - im->vbase;	/* load bias */

	elf_getphdrnum(im->elf, &n);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(im->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (ph.p_filesz && pread(im->fd, cx->code_buf + (ph.p_vaddr - im->vbase), ph.p_filesz,
					 (off_t)ph.p_offset) != (ssize_t)ph.p_filesz)
			return cc__err(cx->err, -EIO, "%s: short read", im->path);
	}
	Elf_Scn *dynsym = cc__find_section(im->elf, SHT_DYNSYM);
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(im->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !(sh.sh_flags & SHF_ALLOC))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		GElf_Shdr ssh;
		Elf_Data *sd = dynsym ? elf_getdata(dynsym, NULL) : NULL;
		if (dynsym)
			gelf_getshdr(dynsym, &ssh);
		for (size_t k = 0; k < sh.sh_size / sh.sh_entsize; k++) {
			GElf_Rela r;
			gelf_getrela(d, (int)k, &r);
			unsigned type = GELF_R_TYPE(r.r_info);
			size_t si = GELF_R_SYM(r.r_info);
			uint64_t S = 0, off = r.r_offset - im->vbase;
			int rc;
			const char *name = "";
			if (off + 8 > im->span)
				return cc__err(cx->err, -EINVAL, "%s: relocation outside the image", im->path);
			if (si && sd) {
				GElf_Sym s;
				gelf_getsym(sd, (int)si, &s);
				name = elf_strptr(im->elf, ssh.sh_link, s.st_name);
				if (!name)
					name = "?";
				if (s.st_shndx != SHN_UNDEF)
					S = B + s.st_value;
				else if ((rc = cx->resolve ? cx->resolve(cx->arg, name, &S) :
					      -ENOENT) == -ENOTUNIQ)
					return cc__err(cx->err, rc, "%s needs %s, which the target "
						    "defines more than once", im->path, name);
				else if (rc < 0 && GELF_ST_BIND(s.st_info) != STB_WEAK)
					return cc__err(cx->err, -ENOENT, "%s needs %s, which the target "
						    "does not define", im->path, name);
			}
			uint64_t v;
			switch (type) {
			case R_X86_64_NONE:
				continue;
			case R_X86_64_RELATIVE:
				v = B + (uint64_t)r.r_addend;
				break;
			case R_X86_64_GLOB_DAT:
			case R_X86_64_JUMP_SLOT:
				v = S;
				break;
			case R_X86_64_64:
				v = S + (uint64_t)r.r_addend;
				break;
			default:
				return cc__err(cx->err, -ENOTSUP, "%s: dynamic relocation %s against %s is "
					    "not supported in replacement code", im->path,
					    reloc_name(type), name[0] ? name : "(none)");
			}
			memcpy(cx->code_buf + off, &v, 8);
		}
	}
	return 0;
}

int cc_image__link(const struct cc_image *im, uint64_t code, uint64_t data, cc_resolve_fn resolve,
		   void *arg, void *code_buf, void *data_buf, uint64_t *entry, struct cc_error *err)
{
	struct linkctx cx = { im, code, data, code_buf, data_buf, resolve, arg, err };
	int rc;

	switch (im->type) {
	case IT_RAW:
		memcpy(code_buf, im->raw, im->raw_len);
		*entry = code;
		return 0;
	case IT_REL:
		memset(code_buf, 0xcc, im->code_size);	/* padding traps */
		memset(data_buf, 0, im->data_size);
		if ((rc = link_rel(&cx)) < 0)
			return rc;
		*entry = code + im->sect[im->sym_shndx].off + im->sym_value;
		return 0;
	case IT_DYN:
		memset(code_buf, 0, im->span);
		if ((rc = link_dyn(&cx)) < 0)
			return rc;
		*entry = code - im->vbase + im->sym_value;
		return 0;
	}
	return -EINVAL;
}

/* ---------------------------------------------------------------- code */

/* Each instruction of the image's code, decoded from the file (relocation
 * fields do not change what an instruction is): fn(arg, instruction, its
 * bytes, its section (0: raw), its offset there). A byte that decodes to
 * nothing is skipped. */
typedef int (*insn_fn)(void *arg, const ZydisDecodedInstruction *d, const uint8_t *bytes,
		       size_t shndx, uint64_t off);

static int decode_all(const uint8_t *code, size_t size, size_t shndx, insn_fn fn, void *arg)
{
	ZydisDecoder dec;
	int rc;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t pos = 0; pos < size;) {
		ZydisDecodedInstruction d;
		if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, code + pos, size - pos, &d))) {
			pos++;
			continue;
		}
		if ((rc = fn(arg, &d, code + pos, shndx, pos)) != 0)
			return rc;
		pos += d.length;
	}
	return 0;
}

static int each_insn(const struct cc_image *im, insn_fn fn, void *arg)
{
	int rc;

	if (im->type == IT_RAW)
		return decode_all(im->raw, im->raw_len, 0, fn, arg);
	for (size_t i = 1; i < im->shnum; i++) {
		GElf_Shdr sh;
		Elf_Scn *scn = elf_getscn(im->elf, i);
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    (sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (d && d->d_buf && (rc = decode_all(d->d_buf, d->d_size, i, fn, arg)) != 0)
			return rc;
	}
	return 0;
}

/* "f+0x12": the function of the image holding offset off of section
 * shndx, or "" when no symbol covers it. */
static void func_at(const struct cc_image *im, size_t shndx, uint64_t off, char *buf, size_t size)
{
	GElf_Shdr sh;
	uint64_t at = off;

	buf[0] = '\0';
	if (im->type == IT_RAW)
		return;
	if (im->type == IT_DYN && gelf_getshdr(elf_getscn(im->elf, shndx), &sh))
		at += sh.sh_addr;	/* a shared object's symbols hold addresses */
	for (size_t i = 1; i < im->nsyms; i++) {
		GElf_Sym s;
		if (get_sym(im, i, &s) && GELF_ST_TYPE(s.st_info) == STT_FUNC && s.st_shndx == shndx &&
		    at >= s.st_value && at < s.st_value + (s.st_size ? s.st_size : 1)) {
			snprintf(buf, size, "%s+0x%" PRIx64, sym_name(im, &s), at - s.st_value);
			return;
		}
	}
}

/* ".text+0x1a (f+0xa)", or "offset 0x1a" of raw code. */
static void where(const struct cc_image *im, size_t shndx, uint64_t off, char *buf, size_t size)
{
	char fn[160];

	if (im->type == IT_RAW) {
		snprintf(buf, size, "offset 0x%" PRIx64, off);
		return;
	}
	func_at(im, shndx, off, fn, sizeof fn);
	snprintf(buf, size, "%s+0x%" PRIx64 "%s%s%s", sect_name(im, shndx), off, fn[0] ? " (" : "",
		 fn, fn[0] ? ")" : "");
}

struct cpu_check {
	const struct cc_image *im;
	struct cc_error *err;
};

static int check_insn_isa(void *arg, const ZydisDecodedInstruction *d, const uint8_t *bytes,
			  size_t shndx, uint64_t off)
{
	struct cpu_check *cx = arg;
	char buf[96], text[96], at[224];
	bool endbr = d->mnemonic == ZYDIS_MNEMONIC_ENDBR32 || d->mnemonic == ZYDIS_MNEMONIC_ENDBR64;
	const char *lack = cc__isa_lacking(ZydisISASetGetString(d->meta.isa_set), endbr, buf,
					   sizeof buf);

	if (!lack)
		return 0;
	cc_insn_text(bytes, d->length, off, text, sizeof text);
	where(cx->im, shndx, off, at, sizeof at);
	return cc__err(cx->err, -ENOTSUP, "%s: `%s` at %s needs %s, which this CPU lacks "
		    "(it would die of SIGILL there): build the replacement for this CPU "
		    "(e.g. -march=native)", cx->im->path, text, at, lack);
}

int cc_image__check_cpu(const struct cc_image *im, struct cc_error *err)
{
	struct cpu_check cx = { im, err };

	return each_insn(im, check_insn_isa, &cx);
}

/* REL: the symbol a relocation in [off, off + len) of section shndx
 * refers to (its target for a call or jump), or NULL. */
static const char *reloc_target(const struct cc_image *im, size_t shndx, uint64_t off, size_t len,
				GElf_Sym *sym)
{
	Elf_Scn *scn = NULL;

	if (im->type != IT_REL)
		return NULL;
	while ((scn = elf_nextscn(im->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || sh.sh_info != shndx)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t k = 0; d && k < sh.sh_size / sizeof(Elf64_Rela); k++) {
			GElf_Rela r;
			size_t si;
			if (gelf_getrela(d, (int)k, &r) && r.r_offset >= off && r.r_offset < off + len &&
			    (si = GELF_R_SYM(r.r_info)) && si < im->nsyms && get_sym(im, si, sym))
				return GELF_ST_TYPE(sym->st_info) == STT_SECTION ?
				       sect_name(im, sym->st_shndx) : sym_name(im, sym);
		}
	}
	return NULL;
}

struct call_find {
	const struct cc_image *im;
	uint64_t lo, hi;	/* the loaded function, in its section */
	char *buf;
	size_t size;
};

/* A call, a jmp through a register, memory or a GOT slot, or (REL) a jmp
 * relocated to a function: code that may run other code, which an
 * exception can then come from. */
static int find_call(void *arg, const ZydisDecodedInstruction *d, const uint8_t *bytes,
		     size_t shndx, uint64_t off)
{
	struct call_find *cf = arg;
	const struct cc_image *im = cf->im;
	char text[96], at[224];
	GElf_Sym s;

	if ((im->type == IT_REL && shndx != im->sym_shndx) || off < cf->lo || off >= cf->hi)
		return 0;
	bool jmp = d->meta.category == ZYDIS_CATEGORY_UNCOND_BR;
	const char *to = reloc_target(im, shndx, off, d->length, &s);
	bool to_code = to && (GELF_ST_TYPE(s.st_info) == STT_FUNC || s.st_shndx == SHN_UNDEF);
	if (d->meta.category != ZYDIS_CATEGORY_CALL && !(jmp && (!d->raw.imm[0].is_relative || to_code)))
		return 0;
	if (to)
		snprintf(text, sizeof text, "%s %s", ZydisMnemonicGetString(d->mnemonic), to);
	else
		cc_insn_text(bytes, d->length, off, text, sizeof text);
	where(im, shndx, off, at, sizeof at);
	snprintf(cf->buf, cf->size, "`%s` at %s", text, at);
	return 1;
}

bool cc_image__calls_out(const struct cc_image *im, char *why, size_t size)
{
	struct call_find cf = { im, 0, UINT64_MAX, why, size };

	/* a relocatable object: only the function loaded (a symbol without a
	 * size: the rest of its section); a shared object or raw code: all */
	if (im->type == IT_REL) {
		GElf_Sym s;
		for (size_t i = 1; i < im->nsyms; i++)
			if (get_sym(im, i, &s) && s.st_shndx == im->sym_shndx &&
			    s.st_value == im->sym_value && s.st_size) {
				cf.lo = s.st_value;
				cf.hi = s.st_value + s.st_size;
				break;
			}
		if (cf.hi == UINT64_MAX)
			cf.lo = im->sym_value;
	}
	return each_insn(im, find_call, &cf) == 1;
}
