/* Functions the relocator is tested on. Built four times as shared objects
 * (gcc and clang, -O0 and -O2); the test relocates each function into a
 * buffer, calls the copy and the original, and compares. Each function
 * exercises one kind of instruction a relocator must get right. */
#include <stdlib.h>
#include <string.h>

#define CORPUS __attribute__((noinline, used)) 

/* Short backward and forward branches (rel8 in the original). */
CORPUS int cc_sum(const int *a, int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += a[i] & 1 ? a[i] * 3 : a[i];
	return s;
}

/* A dense switch: a jump table read rip-relatively. */
CORPUS int cc_switch(int x)
{
	switch (x) {
	case 0: return 17;
	case 1: return x * 5 + 1;
	case 2: return 44;
	case 3: return x ^ 0x55;
	case 4: return 9;
	case 5: return x << 3;
	case 6: return 123;
	case 7: return -x;
	case 8: return 5000;
	default: return -1;
	}
}

/* Recursion. */
CORPUS long cc_fib(int n)
{
	return n < 2 ? n : cc_fib(n - 1) + cc_fib(n - 2);
}

/* A call through the PLT to libc. */
CORPUS size_t cc_strlen_plus(const char *s)
{
	return strlen(s) + 1;
}

/* Read-modify-write of a static variable, rip-relative. */
CORPUS int cc_counter(int k)
{
	static int counter;
	counter += k;
	return counter;
}

/* Floating-point constants from .rodata. */
CORPUS double cc_poly(double x)
{
	return 3.25 * x * x - 1.5 * x + 0.125;
}

/* An indirect call. */
CORPUS int cc_apply(int (*f)(int), int x)
{
	return f(x) + f(x + 1);
}

/* A table-driven checksum: lea of a table in .rodata, indexed. */
static const unsigned char cc_tab[16] = { 7, 3, 9, 1, 14, 0, 5, 11, 2, 8, 13, 4, 10, 6, 15, 12 };
CORPUS unsigned cc_crc(const unsigned char *p, size_t n)
{
	unsigned h = 0x811c9dc5u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ cc_tab[p[i] & 15]) * 16777619u + cc_tab[p[i] >> 4];
	return h;
}

/* A comparison of a global with an immediate after the displacement. */
volatile unsigned char cc_flag = 3;
CORPUS int cc_flag_is(int v)
{
	return cc_flag == 3 ? v + 1 : v - 1;
}

/* A tail call to another function. */
CORPUS int cc_helper(int x)
{
	return x * 7 + 3;
}
CORPUS int cc_tail(int x)
{
	return cc_helper(x + 1);
}

/* A function pointer taken rip-relatively and passed to libc. */
static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}
CORPUS int cc_sorted_median(int *a, int n)
{
	qsort(a, (size_t)n, sizeof *a, cmp_int);
	return a[n / 2];
}

/* A small state machine: many short conditional branches. */
CORPUS int cc_words(const char *s)
{
	int words = 0, in = 0;
	for (; *s; s++) {
		if (*s == ' ' || *s == '\t' || *s == '\n')
			in = 0;
		else if (!in) {
			in = 1;
			words++;
		}
	}
	return words;
}

/* Instructions compilers do not emit, written by hand: loop, jrcxz,
 * jecxz, loopne, loope. */
CORPUS long cc_asm_loop(long n)
{
	long acc = 0;
	if (n <= 0)
		return 0;
	__asm__ volatile("1: add %%rcx, %0\n\t"
			 "loop 1b\n\t"
			 : "+r"(acc), "+c"(n) : : "cc");
	return acc;
}

CORPUS long cc_asm_jrcxz(long x)
{
	long r;
	__asm__ volatile("mov %1, %%rcx\n\t"
			 "mov $7, %0\n\t"
			 "jrcxz 1f\n\t"
			 "mov $11, %0\n\t"
			 "1:\n\t"
			 : "=&r"(r) : "r"(x) : "rcx");
	return r;
}

CORPUS long cc_asm_jecxz(long x)
{
	long r;
	__asm__ volatile("mov %1, %%rcx\n\t"
			 "mov $5, %0\n\t"
			 "jecxz 1f\n\t"
			 "mov $13, %0\n\t"
			 "1:\n\t"
			 : "=&r"(r) : "r"(x) : "rcx");
	return r;
}

/* Index one past the first ':' in s[0..max), or max. */
CORPUS long cc_asm_loopne(const char *s, long max)
{
	const char *p = s;
	long c = max;
	if (max <= 0)
		return 0;
	__asm__ volatile("1: cmpb $58, (%0)\n\t"
			 "lea 1(%0), %0\n\t"
			 "loopne 1b\n\t"
			 : "+r"(p), "+c"(c) : : "cc", "memory");
	return p - s;
}

/* Number of leading spaces in s[0..max) plus one (loope). */
CORPUS long cc_asm_loope(const char *s, long max)
{
	const char *p = s;
	long c = max;
	if (max <= 0)
		return 0;
	__asm__ volatile("1: cmpb $32, (%0)\n\t"
			 "lea 1(%0), %0\n\t"
			 "loope 1b\n\t"
			 : "+r"(p), "+c"(c) : : "cc", "memory");
	return p - s;
}

/* For the patching checks: too short for a 5-byte jump (at -O2), and a
 * loop whose head is the first instruction. */
CORPUS void cc_nothing(void)
{
}

__asm__(".text\n"
	".globl cc_entry_loop\n"
	".type cc_entry_loop, @function\n"
	"cc_entry_loop:\n"
	"	dec %rdi\n"
	"	jnz cc_entry_loop\n"
	"	mov $42, %eax\n"
	"	ret\n"
	".size cc_entry_loop, .-cc_entry_loop\n");

/* A caller with direct calls to a function (hidden: no PLT in between). */
__attribute__((visibility("hidden"), noinline)) int cc_callee(int x)
{
	return x * 3 + 1;
}
CORPUS int cc_caller(int x)
{
	return cc_callee(x) + cc_callee(x + 1) * 2;
}

/* A jump table one of whose targets is inside the first bytes: only a CFG
 * that follows jump tables sees that branch. */
__asm__(".text\n"
	".globl cc_table_loop\n"
	".type cc_table_loop, @function\n"
	"cc_table_loop:\n"
	"	mov %edi, %eax\n"
	"1:	dec %eax\n"
	"	cmp $1, %eax\n"
	"	ja 2f\n"
	"	lea 3f(%rip), %rdx\n"
	"	movslq (%rdx,%rax,4), %rcx\n"
	"	add %rdx, %rcx\n"
	"	jmp *%rcx\n"
	"2:	ret\n"
	".size cc_table_loop, .-cc_table_loop\n"
	".section .rodata\n"
	".p2align 2\n"
	"3:	.long 1b - 3b, 2b - 3b\n"
	".text\n");
