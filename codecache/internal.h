/* internal.h: what codecache/'s files share and nobody else sees. */
#ifndef PADRONE_CODECACHE_INTERNAL_H
#define PADRONE_CODECACHE_INTERNAL_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>

/* The instruction at addr in Intel syntax, for messages. */
void cc_insn_text(const void *bytes, size_t len, uint64_t addr, char *buf, size_t size);
/* A 5-byte jmp/call rel32 placed at `at` going to target; -ERANGE when out
 * of reach. */
int cc_encode_jmp(uint64_t at, uint64_t target, uint8_t buf[5]);
int cc_encode_call(uint64_t at, uint64_t target, uint8_t buf[5]);

#endif
