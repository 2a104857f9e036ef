/* x32: an x32 (ILP32 on x86-64) ELF program, for the "not x86-64" check of
 * the ELF header. Most kernels (this one too) cannot run x32 programs, so
 * tests only classify the file; it would just exit 0.
 */
	.text
	.globl _start
_start:
	movl $(60 | 0x40000000), %eax	/* exit, with __X32_SYSCALL_BIT */
	xorl %edi, %edi
	syscall
	.section .note.GNU-stack, "", @progbits
