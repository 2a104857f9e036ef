/* The cfg/ test corpus: small functions covering what cfg/ must handle,
 * compiled by the tests with gcc and clang at -O0/-O2/-O3, PIE and not. */
#ifndef CFG_CORPUS_H
#define CFG_CORPUS_H

#define NOINLINE __attribute__((noinline))

extern volatile int corpus_sink;

long switches_run(int n);
long loops_run(int n);
long irreducible_run(int n);
long noreturn_run(int n);
long tailcalls_run(int n);
long cold_run(int n);
long cleanup_run(int n);

#endif
