/* syscall-page.S: the page through which padrone runs a system call in a
 * target (attach/syscall-page.c).
 *
 * Never run inside padrone: it lives in .rodata and is copied, as it is,
 * into one read-only, executable page of the target. Position-independent;
 * the code reaches the frame through rip-relative references, which the
 * copy keeps.
 *
 * padrone points a stopped thread at `entry` with the system call's number
 * and arguments in its registers and every signal blocked, after writing
 * the frame: the registers the call and this code clobber, as the thread
 * must have them afterwards, its signal mask and where it goes on. While
 * padrone lives it stops the thread right after the first `syscall` and
 * puts everything back itself; the rest of the code runs only if padrone
 * died in between (SIGKILL): the thread then restores its own mask and
 * registers and goes on where it was, instead of running whatever bytes
 * follow a `syscall` found elsewhere in its code. No instruction after the
 * call changes the flags (the kernel returns them as they were); the stack
 * is not touched.
 */
	.intel_syntax noprefix
	.section .rodata.padrone_syscall_page, "a"
	.p2align 6

	.globl attach_scpage_begin, attach_scpage_frame, attach_scpage_entry, attach_scpage_end
	.hidden attach_scpage_begin, attach_scpage_frame, attach_scpage_entry, attach_scpage_end

attach_scpage_begin:
	.ascii "padrone syscall page 1\0"	/* found again by a later session */
	.p2align 4
/* struct attach__scframe (internal.h): the same order */
attach_scpage_frame:
.Lrip:	.quad 0
.Lrax:	.quad 0
.Lrcx:	.quad 0
.Lrdx:	.quad 0
.Lrsi:	.quad 0
.Lrdi:	.quad 0
.Lr8:	.quad 0
.Lr9:	.quad 0
.Lr10:	.quad 0
.Lr11:	.quad 0
.Lmask:	.quad 0
	.p2align 4
attach_scpage_entry:
	syscall
	/* rt_sigprocmask(SIG_SETMASK, &mask, NULL, 8) */
	mov eax, 14
	mov edi, 2
	lea rsi, [rip + .Lmask]
	mov edx, 0
	mov r10d, 8
	syscall
	mov rax, qword ptr [rip + .Lrax]
	mov rcx, qword ptr [rip + .Lrcx]
	mov rdx, qword ptr [rip + .Lrdx]
	mov rsi, qword ptr [rip + .Lrsi]
	mov rdi, qword ptr [rip + .Lrdi]
	mov r8, qword ptr [rip + .Lr8]
	mov r9, qword ptr [rip + .Lr9]
	mov r10, qword ptr [rip + .Lr10]
	mov r11, qword ptr [rip + .Lr11]
	jmp qword ptr [rip + .Lrip]
attach_scpage_end:

	.section .note.GNU-stack, "", @progbits
