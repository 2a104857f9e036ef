/* cursor.c: DWARF's encodings over little-endian bytes, for every reader
 * of unwind and exception tables (elf/'s .eh_frame walk, cfg/'s FDEs and
 * LSDAs read from a process's memory): ULEB128, SLEB128, and the DW_EH_PE
 * pointers that libdw leaves to its callers. */
#include "elf/internal.h"

#include <dwarf.h>
#include <string.h>

static void advance(struct elf_cursor *c, size_t n)
{
	c->p += n;
	c->addr += n;
}

uint64_t elf_cursor__u(struct elf_cursor *c, size_t n)
{
	uint64_t v = 0;

	if (n > 8 || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		c->p = c->end;
		return 0;
	}
	memcpy(&v, c->p, n);	/* x86-64: little endian */
	advance(c, n);
	return v;
}

/* LEB128, unsigned or sign-extended from its last byte's bit 6; bits past
 * 64 are dropped. */
static uint64_t leb128(struct elf_cursor *c, bool is_signed)
{
	uint64_t v = 0;
	unsigned shift = 0;

	while (c->p < c->end) {
		uint8_t byte = *c->p;
		advance(c, 1);
		if (shift < 64)
			v |= (uint64_t)(byte & 0x7f) << shift;
		shift += 7;
		if (!(byte & 0x80)) {
			if (is_signed && shift < 64 && (byte & 0x40))
				v |= -((uint64_t)1 << shift);
			return v;
		}
	}
	c->bad = true;
	return v;
}

uint64_t elf_cursor__uleb(struct elf_cursor *c)
{
	return leb128(c, false);
}

int64_t elf_cursor__sleb(struct elf_cursor *c)
{
	return (int64_t)leb128(c, true);
}

uint64_t elf_cursor__ptr(struct elf_cursor *c, uint8_t enc, uint64_t datarel)
{
	uint64_t at = c->addr, v;

	if (enc == DW_EH_PE_omit)
		return 0;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr: v = elf_cursor__u(c, 8); break;
	case DW_EH_PE_uleb128: v = elf_cursor__uleb(c); break;
	case DW_EH_PE_udata2: v = elf_cursor__u(c, 2); break;
	case DW_EH_PE_udata4: v = elf_cursor__u(c, 4); break;
	case DW_EH_PE_udata8: v = elf_cursor__u(c, 8); break;
	case DW_EH_PE_sleb128: v = (uint64_t)elf_cursor__sleb(c); break;
	case DW_EH_PE_sdata2: v = (uint64_t)(int64_t)(int16_t)elf_cursor__u(c, 2); break;
	case DW_EH_PE_sdata4: v = (uint64_t)(int64_t)(int32_t)elf_cursor__u(c, 4); break;
	case DW_EH_PE_sdata8: v = elf_cursor__u(c, 8); break;
	default: c->bad = true; return 0;
	}
	switch (enc & 0x70) {
	case DW_EH_PE_absptr: break;
	case DW_EH_PE_pcrel: v += at; break;
	case DW_EH_PE_datarel: v += datarel; break;
	default: c->bad = true; break;
	}
	return v;
}
