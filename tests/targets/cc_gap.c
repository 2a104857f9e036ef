/* cc_gap: a thread whose frame pointer points below its stack, in code
 * without unwind information. A stack walker that follows frame pointers
 * reads there; read through /proc/PID/mem (or ptrace), such an address
 * makes the kernel grow the stack down to it (and, as far as padrone's
 * own RLIMIT_STACK lets it, does: unlimited, a request of hundreds of GB
 * fails and is logged as __vm_enough_memory ... comm: padrone).
 *
 * cc_gap [MIB [cfi]]: finds its [stack] in /proc/self/maps, prints "ready
 * START" (the stack mapping's start, hex), then sleeps forever in hold(),
 * which sets %rbp MIB (default 1) MiB below START; with "cfi", in
 * hold_cfi(), the same with unwind information that says its frame is at
 * %rbp (so that even a walk by unwind information reads there).
 * gap_other() is never called (something to patch).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void hold(uint64_t rbp, const struct timespec *ts);
__asm__(".text\n"
	".globl hold\n"
	".type hold, @function\n"
	"hold:\n"
	"	push %rbp\n"
	"	mov %rdi, %rbp\n"
	"	mov %rsi, %rdi\n"
	"	xor %esi, %esi\n"
	"1:	mov $35, %eax\n"	/* nanosleep(ts, NULL), again and again */
	"	syscall\n"
	"	jmp 1b\n"
	".size hold, .-hold\n"
	".globl hold_cfi\n"
	".type hold_cfi, @function\n"
	"hold_cfi:\n"
	"	.cfi_startproc\n"
	"	push %rbp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbp, -16\n"
	"	mov %rdi, %rbp\n"
	"	.cfi_def_cfa_register %rbp\n"
	"	mov %rsi, %rdi\n"
	"	xor %esi, %esi\n"
	"1:	mov $35, %eax\n"
	"	syscall\n"
	"	jmp 1b\n"
	"	.cfi_endproc\n"
	".size hold_cfi, .-hold_cfi\n");

void hold_cfi(uint64_t rbp, const struct timespec *ts);

__attribute__((noipa)) long gap_other(long x)
{
	return x * 5 + 3;
}

int main(int argc, char **argv)
{
	unsigned long mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 1;
	unsigned long long lo = 0, hi;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof line, f))
		if (strstr(line, "[stack]"))
			sscanf(line, "%llx-%llx", &lo, &hi);
	if (f)
		fclose(f);
	if (!lo)
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %llx\n", lo);
	struct timespec ts = { 1, 0 };
	if (argc > 2 && !strcmp(argv[2], "cfi"))
		hold_cfi(lo - (mib << 20), &ts);
	hold(lo - (mib << 20), &ts);
}
