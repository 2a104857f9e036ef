/* prof_jit: a tiny JIT. It copies a hand-assembled spin loop into an
 * anonymous page, makes the page read+exec (never writable and executable
 * at once), announces it in /tmp/perf-PID.map as jit_spin_loop (after a
 * stale line for the whole page, which the later line must override, as a
 * JIT that re-emits code produces), then spends its time calling it.
 *
 * usage: prof_jit
 * Prints "ready jit START END" (the function's runtime range, hex), then
 * every 100 ms "rate R calls N checksum C": C is what one call
 * returns, which must never change ("BAD checksum" if one differs).
 * The map file is left for the test to remove (it kills the target).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define OFFSET 0x40	/* not at the page start: the map's start must be used */
#define SPINS 200000

/* uint64_t f(uint64_t n): spins n times, returns n * 2 + 1.
 *   mov  %rdi,%rcx          48 89 f9
 * 1:dec  %rcx               48 ff c9
 *   jnz  1b                 75 fb
 *   lea  0x1(%rdi,%rdi),%rax 48 8d 44 3f 01
 *   ret                     c3            */
static const uint8_t code[] = { 0x48, 0x89, 0xf9, 0x48, 0xff, 0xc9, 0x75, 0xfb,
				0x48, 0x8d, 0x44, 0x3f, 0x01, 0xc3 };

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The page, filled and then made read+exec. */
static uint8_t *emit(void)
{
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0xcc, (size_t)page);	/* int3 around the function */
	memcpy(p + OFFSET, code, sizeof(code));
	if (mprotect(p, (size_t)page, PROT_READ | PROT_EXEC) < 0)
		return NULL;
	return p;
}

static int write_map(const uint8_t *page, const uint8_t *fn)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f, "%lx %lx stale stub for the whole page\n", (unsigned long)(uintptr_t)page,
		sysconf(_SC_PAGESIZE));
	fprintf(f, "0x%lx 0x%zx jit_spin_loop\n", (unsigned long)(uintptr_t)fn, sizeof(code));
	return fclose(f);
}

int main(void)
{
	uint8_t *page = emit();

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!page || write_map(page, page + OFFSET) < 0) {
		perror("prof_jit");
		return 1;
	}
	uint64_t (*fn)(uint64_t);
	void *entry = page + OFFSET;
	memcpy(&fn, &entry, sizeof(fn));	/* ISO C has no object-to-function cast */
	uint64_t expect = 2ull * SPINS + 1;
	printf("ready jit %lx %lx\n", (unsigned long)(uintptr_t)entry,
	       (unsigned long)(uintptr_t)entry + sizeof(code));
	for (;;) {
		double start = now(), t;
		unsigned long calls = 0;
		do {
			if (fn(SPINS) != expect)
				printf("BAD checksum\n");
			calls++;
			t = now();
		} while (t - start < 0.1);
		printf("rate %.0f calls %lu checksum %016llx\n", (double)calls / (t - start), calls,
		       (unsigned long long)expect);
	}
}
