/* cfi.c: .eh_frame's FDEs, walked with libdw (dwarf_next_cfi); the
 * DW_EH_PE pointers it leaves to its reader are decoded by elf_cursor, and
 * the CFA at a function's first byte is libdw's (dwarf_cfi_addrframe).
 */
#include "elf/internal.h"

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char eh_ident[EI_NIDENT] = {
	[EI_MAG0] = ELFMAG0, [EI_MAG1] = ELFMAG1, [EI_MAG2] = ELFMAG2,
	[EI_MAG3] = ELFMAG3, [EI_CLASS] = ELFCLASS64, [EI_DATA] = ELFDATA2LSB,
	[EI_VERSION] = EV_CURRENT,
};

/* The pointer encodings a CIE's augmentation gives for its FDEs ('R') and
 * their LSDAs ('L'), as libdw leaves the augmentation data to its reader. */
struct cie_encodings {
	int fde;		/* -1 when the CIE cannot be read */
	int lsda;		/* DW_EH_PE_omit when none */
	bool aug_z;		/* FDEs carry augmentation data */
};

static struct cie_encodings cie_encodings(const Dwarf_CIE *cie)
{
	const char *aug = cie->augmentation;
	struct elf_cursor r = { cie->augmentation_data,
				cie->augmentation_data + cie->augmentation_data_size, 0, false };
	struct cie_encodings enc = { DW_EH_PE_absptr, DW_EH_PE_omit, aug[0] == 'z' };

	if (aug[0] != 'z') {
		if (aug[0])
			enc.fde = -1;
		return enc;
	}
	for (size_t i = 1; aug[i] && !r.bad; i++) {
		switch (aug[i]) {
		case 'R':
			enc.fde = (int)elf_cursor__u(&r, 1);
			break;
		case 'P': {
			uint8_t pe = (uint8_t)elf_cursor__u(&r, 1);
			elf_cursor__ptr(&r, pe & 0x7f, 0);
			break;
		}
		case 'L':
			enc.lsda = (int)elf_cursor__u(&r, 1);
			break;
		case 'S': case 'B':
			break;
		default:
			enc.fde = -1;
			return enc;
		}
	}
	if (r.bad)
		enc.fde = -1;
	return enc;
}

/* A CIE's encodings, found once per CIE (FDEs point back at theirs). */
struct cie_memo {
	Dwarf_Off off;
	struct cie_encodings enc;
};

static struct cie_encodings fde_encodings(Elf_Data *d, Dwarf_Off cie_off, struct cie_memo *memo)
{
	Dwarf_CFI_Entry e;
	Dwarf_Off next;

	if (memo->off == cie_off)
		return memo->enc;
	memo->off = cie_off;
	memo->enc = (struct cie_encodings){ -1, DW_EH_PE_omit, false };
	if (dwarf_next_cfi(eh_ident, d, true, cie_off, &next, &e) == 0 && dwarf_cfi_cie_p(&e))
		memo->enc = cie_encodings(&e.cie);
	return memo->enc;
}

/* An FDE's range and LSDA, from the bytes libdw leaves after its CIE
 * pointer; false when they cannot be read or the range is empty. */
static bool fde_decode(const Dwarf_FDE *fde, struct cie_encodings enc, uint64_t at,
		       struct elf_fde *out)
{
	struct elf_cursor rd = { fde->start, fde->end, at, false };

	if (enc.fde < 0 || enc.fde == DW_EH_PE_omit)
		return false;
	out->start = elf_cursor__ptr(&rd, (uint8_t)enc.fde, 0);
	out->end = out->start + elf_cursor__ptr(&rd, (uint8_t)(enc.fde & 0x0f), 0);
	out->lsda = 0;
	out->entry = false;
	if (enc.aug_z) {
		uint64_t alen = elf_cursor__uleb(&rd);
		if (!rd.bad && alen && alen <= (uint64_t)(rd.end - rd.p) && enc.lsda != DW_EH_PE_omit) {
			struct elf_cursor a = { rd.p, rd.p + alen, rd.addr, false };
			uint64_t lsda = elf_cursor__ptr(&a, (uint8_t)enc.lsda, 0);
			if (!a.bad)
				out->lsda = lsda;
		}
	}
	return !rd.bad && out->end > out->start;
}

/* Calls fn for every FDE of .eh_frame (data at sec_addr). */
static int walk(const uint8_t *data, size_t len, uint64_t sec_addr,
		void (*fn)(const struct elf_fde *f, uint64_t fde_addr, void *arg), void *arg)
{
	Elf_Data d = { .d_buf = (void *)data, .d_type = ELF_T_BYTE, .d_size = len,
		       .d_version = EV_CURRENT };
	struct cie_memo memo = { (Dwarf_Off)-1, { -1, DW_EH_PE_omit, false } };
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry e;
	int nfde = 0, r = 0;

	while (off < len && (r = dwarf_next_cfi(eh_ident, &d, true, off, &next, &e)) == 0) {
		struct elf_fde f;
		if (!dwarf_cfi_cie_p(&e) &&
		    fde_decode(&e.fde, fde_encodings(&d, e.fde.CIE_pointer, &memo),
			       sec_addr + (uint64_t)(e.fde.start - data), &f)) {
			fn(&f, sec_addr + off, arg);
			nfde++;
		}
		if (next == (Dwarf_Off)-1 || next <= off)
			break;	/* the terminator */
		off = next;
	}
	if (r < 0 && !nfde)
		return -EINVAL;
	return nfde;
}

struct at_ctx {
	elf_fde_at_fn fn;
	void *arg;
};

static void call_at(const struct elf_fde *f, uint64_t fde_addr, void *arg)
{
	struct at_ctx *c = arg;
	c->fn(f->start, f->end, fde_addr, c->arg);
}

int elf_eh_frame__each_fde(const uint8_t *data, size_t len, uint64_t sec_addr, elf_fde_at_fn fn,
			   void *arg)
{
	struct at_ctx c = { fn, arg };
	return walk(data, len, sec_addr, call_at, &c);
}

/* ------------------------------------------------------------ CFA at entry */

/* An ELF image in memory holding only .eh_frame at sec_addr, for libdw's
 * CFI (dwarf_getcfi_elf wants an Elf; the bytes come from a process). */
struct eh_image {
	Elf64_Ehdr eh;
	Elf64_Shdr sh[3];	/* null, .eh_frame, .shstrtab */
	char names[24];
	uint8_t data[];
};

static struct eh_image *eh_image_new(const uint8_t *data, size_t len, uint64_t sec_addr)
{
	static const char names[] = "\0.eh_frame\0.shstrtab";
	struct eh_image *im = calloc(1, sizeof(*im) + len);

	if (!im)
		return NULL;
	memcpy(im->eh.e_ident, eh_ident, EI_NIDENT);
	im->eh.e_type = ET_DYN;
	im->eh.e_machine = EM_X86_64;
	im->eh.e_version = EV_CURRENT;
	im->eh.e_ehsize = sizeof(im->eh);
	im->eh.e_shoff = offsetof(struct eh_image, sh);
	im->eh.e_shentsize = sizeof(Elf64_Shdr);
	im->eh.e_shnum = 3;
	im->eh.e_shstrndx = 2;
	im->sh[1] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC,
				  .sh_addr = sec_addr, .sh_offset = offsetof(struct eh_image, data),
				  .sh_size = len, .sh_addralign = 8 };
	im->sh[2] = (Elf64_Shdr){ .sh_name = 11, .sh_type = SHT_STRTAB,
				  .sh_offset = offsetof(struct eh_image, names),
				  .sh_size = sizeof(names), .sh_addralign = 1 };
	memcpy(im->names, names, sizeof(names));
	memcpy(im->data, data, len);
	return im;
}

/* Does the function start with its CFA at rsp + 8 (DWARF register 7), the
 * return address just pushed: the state a call leaves? */
static bool entry_state(Dwarf_CFI *cfi, const struct elf_fde *f)
{
	Dwarf_Frame *fr = NULL;
	Dwarf_Op *ops;
	size_t nops;
	Dwarf_Addr lo, hi;
	bool entry = false;

	if (dwarf_cfi_addrframe(cfi, f->start, &fr) == 0 &&
	    dwarf_frame_info(fr, &lo, &hi, NULL) >= 0 && lo == f->start &&
	    dwarf_frame_cfa(fr, &ops, &nops) == 0 && nops == 1 && ops[0].atom == DW_OP_bregx)
		entry = ops[0].number == 7 && ops[0].number2 == 8;
	free(fr);
	return entry;
}

struct fde_vec {
	struct elf_fde *v;
	size_t n, cap;
	bool nomem;
};

static void collect(const struct elf_fde *f, uint64_t fde_addr, void *arg)
{
	struct fde_vec *l = arg;
	(void)fde_addr;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		struct elf_fde *v = realloc(l->v, cap * sizeof(*v));
		if (!v) {
			l->nomem = true;
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = *f;
}

int elf_eh_frame__fdes(const uint8_t *data, size_t len, uint64_t sec_addr, struct elf_fde **out,
		       size_t *n)
{
	struct fde_vec l = { 0 };
	int rc = walk(data, len, sec_addr, collect, &l);

	*out = NULL;
	*n = 0;
	if (rc < 0 || l.nomem) {
		free(l.v);
		return rc < 0 ? rc : -ENOMEM;
	}
	elf_version(EV_CURRENT);
	struct eh_image *im = l.n ? eh_image_new(data, len, sec_addr) : NULL;
	Elf *elf = im ? elf_memory((char *)im, sizeof(*im) + len) : NULL;
	Dwarf_CFI *cfi = elf ? dwarf_getcfi_elf(elf) : NULL;
	for (size_t i = 0; cfi && i < l.n; i++)
		l.v[i].entry = entry_state(cfi, &l.v[i]);
	rc = l.n && !cfi ? (im ? -EINVAL : -ENOMEM) : 0;
	if (cfi)
		dwarf_cfi_end(cfi);
	if (elf)
		elf_end(elf);
	free(im);
	if (rc < 0) {
		free(l.v);
		return rc;
	}
	*out = l.v;
	*n = l.n;
	return 0;
}
