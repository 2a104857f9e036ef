/* fuzz.h: what every harness of tests/fuzz defines (libFuzzer's entry
 * point), and a helper to hand an input to readers that want a file. */
#ifndef PADRONE_TESTS_FUZZ_H
#define PADRONE_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a file: a memfd's /proc/self/fd path in path (closed by
 * fuzz_file_close). Returns the fd or -1. */
int fuzz_file(const uint8_t *data, size_t size, char *path, size_t len);
void fuzz_file_close(int fd);

#endif
