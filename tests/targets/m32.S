/* m32: a 32-bit x86 (i386) program, static and without libc, for the
 * "not x86-64" error. Built with gcc -m32 -nostdlib (binutils only: no
 * 32-bit libc is needed).
 *
 * usage: m32
 * output: "ready PID", then it sleeps 1 s at a time for 60 s and exits 0.
 */
	.text
	.globl _start
_start:
	movl $20, %eax			/* getpid */
	int $0x80
	leal end, %edi			/* digits go right before "\n" */
	movl $10, %ecx
1:	xorl %edx, %edx
	divl %ecx
	addb $'0', %dl
	decl %edi
	movb %dl, (%edi)
	testl %eax, %eax
	jnz 1b
	movl $4, %eax			/* write(1, "ready ", 6) */
	movl $1, %ebx
	leal ready, %ecx
	movl $6, %edx
	int $0x80
	movl $4, %eax			/* write(1, digits, n + 1) */
	movl $1, %ebx
	movl %edi, %ecx
	leal end + 1, %edx
	subl %edi, %edx
	int $0x80
	movl $60, %esi
2:	movl $162, %eax			/* nanosleep(&ts, NULL) */
	leal ts, %ebx
	xorl %ecx, %ecx
	int $0x80
	decl %esi
	jnz 2b
	movl $1, %eax			/* exit(0) */
	xorl %ebx, %ebx
	int $0x80

	.data
ready:	.ascii "ready "
digits:	.space 12
end:	.ascii "\n"
ts:	.long 1, 0
	.section .note.GNU-stack, "", @progbits
