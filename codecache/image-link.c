/* image-link.c: an opened image relocated for where its blocks go, against
 * its own blocks and the target's symbols (found through the caller's
 * resolver), into the caller's buffers. Nothing here touches a process. */
#include "codecache/image.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
