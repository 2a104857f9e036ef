/* image-check.c: what an image's code may run (instructions this CPU
 * lacks) and whether it calls out of itself, read by decoding the file's
 * code with Zydis. */
#include "codecache/image.h"

#include <Zydis/Zydis.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

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
