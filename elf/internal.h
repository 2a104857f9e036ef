/* internal.h: what elf/'s files share; not part of the public API. */
#ifndef PADRONE_ELF_INTERNAL_H
#define PADRONE_ELF_INTERNAL_H

#include "elf/elf.h"

#include <gelf.h>

/* A cursor over little-endian bytes; bad once it ran past the end. */
struct rd {
	const uint8_t *p, *end;
	bool bad;
};

uint64_t elf__rd_n(struct rd *r, size_t n);
/* A DW_EH_PE_* encoded pointer; here is its link-time address. */
uint64_t elf__rd_encoded(struct rd *r, uint8_t enc, uint64_t here);

/* The GNU build-id note among the notes at file offset off, hex, into out
 * (left as is when there is none). */
void elf__build_id(Elf *elf, uint64_t off, uint64_t size, char out[41]);
/* The separate debug file of e (loaded from elf), opened: its fd, *out
 * its Elf, e->debug_path set; or -ENOENT. */
int elf__find_debug(struct elf_file *e, Elf *elf, const struct elf_load_opts *o, Elf **out);

#endif
