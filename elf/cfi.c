/* cfi.c: .eh_frame's FDEs, walked with libdw (dwarf_next_cfi); the
 * DW_EH_PE pointers it leaves to its reader are decoded by elf_cursor.
 */
#include "elf/internal.h"

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <errno.h>
#include <string.h>

/* The FDE pointer encoding a CIE's augmentation gives ('R'), as libdw
 * leaves the augmentation data to its reader; -1 when it cannot tell. */
static int cie_fde_encoding(const Dwarf_CIE *cie)
{
	const char *aug = cie->augmentation;
	struct elf_cursor r = { cie->augmentation_data,
				cie->augmentation_data + cie->augmentation_data_size, 0, false };

	if (aug[0] != 'z')
		return aug[0] ? -1 : DW_EH_PE_absptr;
	for (size_t i = 1; aug[i] && !r.bad; i++) {
		switch (aug[i]) {
		case 'R':
			return (int)elf_cursor__u(&r, 1);
		case 'P': {
			uint8_t enc = (uint8_t)elf_cursor__u(&r, 1);
			elf_cursor__ptr(&r, enc & 0x7f, 0);
			break;
		}
		case 'L':
			elf_cursor__u(&r, 1);
			break;
		case 'S': case 'B':
			break;
		default:
			return -1;
		}
	}
	return r.bad ? -1 : DW_EH_PE_absptr;
}

/* A CIE's FDE encoding, found once per CIE (FDEs point back at theirs). */
struct cie_memo {
	Dwarf_Off off;
	int enc;
};

static int fde_encoding(const unsigned char *ident, Elf_Data *d, Dwarf_Off cie_off,
			struct cie_memo *memo)
{
	Dwarf_CFI_Entry e;
	Dwarf_Off next;

	if (memo->off == cie_off)
		return memo->enc;
	memo->off = cie_off;
	memo->enc = -1;
	if (dwarf_next_cfi(ident, d, true, cie_off, &next, &e) == 0 && dwarf_cfi_cie_p(&e))
		memo->enc = cie_fde_encoding(&e.cie);
	return memo->enc;
}

int elf_eh_frame__each_fde(const uint8_t *data, size_t len, uint64_t sec_addr, elf_fde_at_fn fn,
			   void *arg)
{
	static const unsigned char ident[EI_NIDENT] = {
		[EI_MAG0] = ELFMAG0, [EI_MAG1] = ELFMAG1, [EI_MAG2] = ELFMAG2,
		[EI_MAG3] = ELFMAG3, [EI_CLASS] = ELFCLASS64, [EI_DATA] = ELFDATA2LSB,
		[EI_VERSION] = EV_CURRENT,
	};
	Elf_Data d = { .d_buf = (void *)data, .d_type = ELF_T_BYTE, .d_size = len,
		       .d_version = EV_CURRENT };
	struct cie_memo memo = { (Dwarf_Off)-1, -1 };
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry e;
	int nfde = 0, r = 0;

	while (off < len && (r = dwarf_next_cfi(ident, &d, true, off, &next, &e)) == 0) {
		if (!dwarf_cfi_cie_p(&e)) {
			int enc = fde_encoding(ident, &d, e.fde.CIE_pointer, &memo);
			struct elf_cursor rd = { e.fde.start, e.fde.end,
						 sec_addr + (uint64_t)(e.fde.start - data), false };
			if (enc >= 0 && enc != DW_EH_PE_omit) {
				uint64_t start = elf_cursor__ptr(&rd, (uint8_t)enc, 0);
				uint64_t range = elf_cursor__ptr(&rd, (uint8_t)(enc & 0x0f), 0);
				if (!rd.bad && range) {
					fn(start, start + range, sec_addr + off, arg);
					nfde++;
				}
			}
		}
		if (next == (Dwarf_Off)-1 || next <= off)
			break;	/* the terminator */
		off = next;
	}
	if (r < 0 && !nfde)
		return -EINVAL;
	return nfde;
}

