/* cc_side: code that branches into the first bytes of other functions, as
 * hand-written assembly does (glibc's mempcpy variants `jmp memmove+3`).
 *
 * twice_plus(x) = 2x + 1: `lea (%rdi,%rdi),%rax` then, at twice_plus+4, a
 * side entry `add $1,%rax; ret`, which plus_one(x) = x + 1 jumps to.
 * thrice_plus(x) = 3x + 1, the same shape, its side entry reached only
 * through a jump table: pick(0, x) = x + 1 by way of thrice_plus+4,
 * pick(1, x) = x. A jump written over the first 5 bytes of twice_plus or
 * thrice_plus would break plus_one or pick(0, .).
 *
 * cc_side: prints "ready", then every ~100 ms "round N ok" (or "round N BAD
 * what") after checking each function on many inputs.
 */
#include <stdio.h>
#include <time.h>

long twice_plus(long x);
long plus_one(long x);
long thrice_plus(long x);
long pick(long sel, long x);

__asm__(".text\n"
	".globl twice_plus\n"
	".type twice_plus, @function\n"
	"twice_plus:\n"
	"	lea (%rdi,%rdi), %rax\n"
	".Ltwice_side:\n"
	"	add $1, %rax\n"
	"	ret\n"
	".size twice_plus, .-twice_plus\n"
	".globl plus_one\n"
	".type plus_one, @function\n"
	"plus_one:\n"
	"	mov %rdi, %rax\n"
	"	jmp .Ltwice_side\n"
	".size plus_one, .-plus_one\n"
	".globl thrice_plus\n"
	".type thrice_plus, @function\n"
	"thrice_plus:\n"
	"	lea (%rdi,%rdi,2), %rax\n"
	".Lthrice_side:\n"
	"	add $1, %rax\n"
	"	ret\n"
	".size thrice_plus, .-thrice_plus\n"
	".globl pick\n"
	".type pick, @function\n"
	"pick:\n"
	"	mov %rsi, %rax\n"
	"	cmp $1, %rdi\n"
	"	ja .Lpick_out\n"
	"	lea .Lpick_table(%rip), %rdx\n"
	"	movslq (%rdx,%rdi,4), %rcx\n"
	"	add %rdx, %rcx\n"
	"	jmp *%rcx\n"
	".Lpick_out:\n"
	"	ret\n"
	".size pick, .-pick\n"
	".section .rodata\n"
	".align 4\n"
	".Lpick_table:\n"
	"	.long .Lthrice_side - .Lpick_table\n"
	"	.long .Lpick_out - .Lpick_table\n"
	".text\n");

static const char *check(long x)
{
	if (twice_plus(x) != 2 * x + 1)
		return "twice_plus";
	if (plus_one(x) != x + 1)
		return "plus_one";
	if (thrice_plus(x) != 3 * x + 1)
		return "thrice_plus";
	if (pick(0, x) != x + 1)
		return "pick(0)";
	if (pick(1, x) != x)
		return "pick(1)";
	return NULL;
}

int main(void)
{
	struct timespec nap = { 0, 100000000 };

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	for (long round = 0;; round++) {
		const char *bad = NULL;
		for (long x = -1000; x < 1000 && !bad; x++)
			bad = check(x * 7919);
		if (bad)
			printf("round %ld BAD %s\n", round, bad);
		else
			printf("round %ld ok\n", round);
		nanosleep(&nap, NULL);
	}
}
