/* eh-frame-hdr.c: the header of .eh_frame_hdr (PT_GNU_EH_FRAME), the one
 * reader of it for every room: where .eh_frame is, and the binary search
 * table of (function start, FDE) pairs that follows the header when the
 * linker wrote one (LSB, "Exception Frames"). The bytes may come from a
 * file or from a process's memory; addr is where they stand. */
#include "elf/internal.h"

#include <dwarf.h>
#include <errno.h>

/* The only table encoding linkers write, and the only one libunwind and a
 * binary search over int32 pairs can use. */
#define TABLE_ENC (DW_EH_PE_datarel | DW_EH_PE_sdata4)

int elf_eh_frame_hdr__read(const uint8_t *h, size_t len, uint64_t addr,
			   struct elf_eh_frame_hdr *out)
{
	*out = (struct elf_eh_frame_hdr){ 0 };
	if (len < 4 || h[0] != 1)
		return -EINVAL;
	struct elf_cursor c = { h + 4, h + len, addr + 4, false };
	out->eh_frame = elf_cursor__ptr(&c, h[1], addr);
	if (c.bad || h[1] == DW_EH_PE_omit)
		return -EINVAL;
	uint64_t count = elf_cursor__ptr(&c, h[2], addr);
	if (c.bad || h[2] == DW_EH_PE_omit || h[3] != TABLE_ENC)
		return 0;	/* .eh_frame found; no table to search */
	out->table = c.addr;
	out->count = count;
	return 0;
}
