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
 *
 * The page also holds the step guard (attach/step.c): while padrone
 * single-steps a thread, SIGTRAP's action is `trap`, so that a padrone
 * killed with the step's trap on its way (the trap flag set, or the thread
 * in the trap's stop) leaves that trap to this handler, not to the
 * target's action (the default one kills). The handler puts the target's
 * own action back from the page (padrone wrote it there before it armed the
 * guard), blocks SIGTRAP again in the thread if the thread had it blocked
 * (padrone unblocked it for the step), and returns to the thread's next
 * instruction: the step's trap, and only it (si_code TRAP_TRACE), is
 * swallowed; any other SIGTRAP is queued again to the thread, to be
 * delivered as it would have been once the handler returns.
 */
	.intel_syntax noprefix
	.section .rodata.padrone_syscall_page, "a"
	.p2align 6

	.globl attach_scpage_begin, attach_scpage_frame, attach_scpage_entry, attach_scpage_end
	.hidden attach_scpage_begin, attach_scpage_frame, attach_scpage_entry, attach_scpage_end
	.globl attach_scpage_trap_old, attach_scpage_trap_reblock, attach_scpage_trap
	.hidden attach_scpage_trap_old, attach_scpage_trap_reblock, attach_scpage_trap
	.globl attach_scpage_restorer
	.hidden attach_scpage_restorer

attach_scpage_begin:
	.ascii "padrone syscall page 2\0"	/* found again by a later session */
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
/* the step guard's data: the target's own SIGTRAP action (the kernel's
 * struct sigaction: handler, flags, restorer, mask), and the mask bit to
 * set again in the interrupted thread's context */
attach_scpage_trap_old:
	.quad 0, 0, 0, 0
attach_scpage_trap_reblock:
	.quad 0
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

	.p2align 4
/* The step guard: a SIGTRAP handler (SA_SIGINFO, SA_RESTORER with
 * `restorer`). rdi: the signal, rsi: its siginfo, rdx: the ucontext. The
 * kernel restores every register at rt_sigreturn. */
attach_scpage_trap:
	mov r12, rsi
	mov r13, rdx
	/* rt_sigaction(SIGTRAP, &old, NULL, 8): the target's own again */
	mov eax, 13
	mov edi, 5
	lea rsi, [rip + attach_scpage_trap_old]
	xor edx, edx
	mov r10d, 8
	syscall
	/* ucontext.uc_sigmask (offset 296): SIGTRAP blocked again if it was */
	mov rax, qword ptr [rip + attach_scpage_trap_reblock]
	or qword ptr [r13 + 296], rax
	/* si_code (offset 8) TRAP_TRACE: the step's own trap, swallowed */
	cmp dword ptr [r12 + 8], 2
	je 1f
	/* rt_tgsigqueueinfo(getpid(), gettid(), SIGTRAP, siginfo): any
	 * other SIGTRAP comes again, to the action now in place */
	mov eax, 39
	syscall
	mov r14, rax
	mov eax, 186
	syscall
	mov rdi, r14
	mov rsi, rax
	mov edx, 5
	mov r10, r12
	mov eax, 297
	syscall
1:	ret
attach_scpage_restorer:
	/* rt_sigreturn */
	mov eax, 15
	syscall
attach_scpage_end:

	.section .note.GNU-stack, "", @progbits
