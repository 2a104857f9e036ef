/* internal.h: what elf/'s files share; not part of the public API. */
#ifndef PADRONE_ELF_INTERNAL_H
#define PADRONE_ELF_INTERNAL_H

#include "elf/elf.h"
#include "util/util.h"

#include <gelf.h>

/* The GNU build-id note among the notes at file offset off, hex, into out
 * (left as is when there is none). */
void elf__build_id(Elf *elf, uint64_t off, uint64_t size, char out[41]);
/* The separate debug file of e (loaded from elf), opened: its fd, *out
 * its Elf, e->debug_path set; or -ENOENT. */
int elf__find_debug(struct elf_file *e, Elf *elf, const struct elf_load_opts *o, Elf **out);

#endif
