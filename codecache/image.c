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
 *
 * This file opens and lays out; image-link.c links, image-check.c checks
 * the code.
 */
#include "codecache/image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
