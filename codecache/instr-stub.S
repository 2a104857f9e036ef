/* instr-stub.S: the ring stub of instrumented copies, copied into the
 * target's code cache once per instrumentation (never run in padrone).
 *
 * The commit code of a unit (instr-emit.c) calls it when the word at %gs:IS_PTR
 * is not CLEAR, with %ecx = the record's payload words, below the red zone
 * and with rax and rcx saved. It returns in %rax where the record goes: a
 * CLEAR word of the ring with IS_PTR already moved past the record, or, when
 * the record is dropped, the start of the junk area, which the following
 * units fill by the fast path (IS_PTR points past the record there). Every
 * other register and the flags are kept.
 * It follows cab_producer__slow (pipeline/cab.c): the guard sends it to the
 * next chunk, the end line wraps, a chunk start not yet consumed means the
 * ring is full: sampling mode drops (into the junk area, see instr-state.h);
 * exhaustive mode waits on a futex in the shared header, in slices, until
 * the chunk and half the ring after it are free (so that it then runs on
 * while the consumer works), and drops from then on if the consumer closed
 * the ring or its heartbeat is older than the timeout (padrone gone), or
 * padrone switched the mode to sampling meanwhile: the target is never
 * blocked for good. System calls only, no libc of the target. It runs with
 * every signal blocked but while it sleeps (.Lblock_signals says why), its
 * scratch on its own frame.
 * A thread that is not its row's owner (cloned or forked after padrone
 * died, so it inherited its parent's gs_base: .Lcheck_owner compares the
 * fs base and the pid) first moves itself to the sink row, off its
 * parent's ring; the fast path is unchanged, so it writes
 * there at most up to the next chunk's guard.
 */
#include "codecache/instr-state.h"

#define SYS_futex 202
#define SYS_clock_gettime 228
#define CLOCK_MONOTONIC 1
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define SYS_rt_sigprocmask 14
#define SIG_BLOCK 0
#define SIG_SETMASK 2
#define SYS_arch_prctl 158
#define SYS_getpid 39
#define ARCH_SET_GS 0x1001
#define ARCH_GET_FS 0x1003

/* The stub's locals, on its own frame (%rbp), never in the thread's block:
 * a signal handler that runs instrumented code can only get here once the
 * stub has restored the signal mask, but the block is shared with it. */
#define L_N 0			/* payload words of the record placed */
#define L_W 8			/* where it was to go; the result on the way out */
#define L_T0 16			/* when the wait began */
#define L_ENTERED 24		/* a new chunk was entered */
#define L_WSTART 32		/* the full chunk's first word */
#define L_WNEXT 40		/* the next chunk's first word */
#define L_WCHUNK 48		/* the chunk waited for */
#define L_MASK 56		/* the thread's signal mask on entry */
#define L_ALL 64		/* every signal */
#define L_SEQ 72		/* the consumer's sequence a wait sleeps on */
#define L_FS 80			/* the thread's fs base */
#define L_SIZE 88

	.section .rodata.padrone_instr, "a"
	.p2align 6
	.globl cc_istub_begin, cc_istub_end
	.hidden cc_istub_begin, cc_istub_end

cc_istub_begin:
	pushfq
	push %rdx
	push %rsi
	push %rdi
	push %r8
	push %r9
	push %r10
	push %r11
	push %rbp
	sub $L_SIZE, %rsp
	mov %rsp, %rbp
	mov %rcx, L_N(%rbp)
	call .Lblock_signals
	call .Lcheck_owner
	cld				/* for rep stos; popfq puts DF back */
	incq %gs:IS_STUB_CALLS
	movq $0, L_ENTERED(%rbp)
.Ltop:
	mov %gs:IS_PTR, %rax
	mov %gs:IS_SELF, %rdx
	lea IS_JUNK(%rdx), %rsi
	cmp %rsi, %rax
	jb .Lloop
	lea IS_SIZE(%rdx), %rsi
	cmp %rsi, %rax
	jae .Lloop
	call .Lempty_junk		/* the junk area is full */
	cmpq $IS_MODE_SINK, %gs:IS_MODE
	je .Ljunk
	mov %gs:IS_RESUME, %rax		/* dropping: is there room again? */
	mov %rax, %gs:IS_PTR
.Lloop:
	mov %gs:IS_PTR, %rax
	mov %rax, %rdx
	sub %gs:IS_DATA, %rdx
	mov %gs:IS_SHIFT, %rcx
	shr %cl, %rdx			/* rdx: the chunk */
	cmp %gs:IS_NCHUNKS, %rdx
	jb 2f
	mov %gs:IS_DATA, %rax		/* the end line: wrap */
	mov %rax, %gs:IS_PTR
	movq $1, L_ENTERED(%rbp)
	jmp .Lloop
2:	mov %rdx, %rsi
	shl %cl, %rsi
	add %gs:IS_DATA, %rsi		/* rsi: the chunk's first word */
	mov (%rax), %r8
	test %r8, %r8
	jnz .Lnotclear
	cmp %rsi, %rax			/* CLEAR: the record goes here */
	jne 3f
	cmpq $0, %gs:IS_GAP
	je 3f
	mov %rdx, %rcx			/* records were lost before this chunk */
	imul %gs:IS_META_STRIDE, %rcx
	add %gs:IS_META, %rcx
	movl $1, IS_META_GAP(%rcx)
	movq $0, %gs:IS_GAP
3:	cmpq $0, %gs:IS_DROPPING
	je 4f
	movq $0, %gs:IS_DROPPING	/* space appeared: a consumer is back */
	mov %gs:IS_A_PROD_DROPPING, %rcx
	movl $0, (%rcx)
4:	mov L_N(%rbp), %rcx
	lea 8(%rax,%rcx,8), %rcx
	mov %rcx, %gs:IS_PTR
	cmpq $0, L_ENTERED(%rbp)
	je .Lret
	mov %rax, L_W(%rbp)
	call .Lannounce
	mov L_W(%rbp), %rax
	jmp .Lret
.Lnotclear:
	cmp %rsi, %rax
	je .Lfull
	add %gs:IS_CHUNK_BYTES, %rsi	/* the guard: on to the next chunk */
	mov %rsi, %gs:IS_PTR
	movq $1, L_ENTERED(%rbp)
	jmp .Lloop
.Lfull:
	mov %rax, L_W(%rbp)
	cmpq $IS_MODE_EXHAUSTIVE, %gs:IS_MODE
	jne .Ldrop
	cmpq $0, %gs:IS_DROPPING
	jne .Ldrop
	cmpq $0, %gs:IS_QUIT
	jne .Ldrop
	call .Lwait
	test %rax, %rax
	jz .Ltop
	movq $1, %gs:IS_DROPPING	/* the consumer is gone: never wait again */
	mov %gs:IS_A_PROD_DROPPING, %rcx
	movl $1, (%rcx)
.Ldrop:
	mov L_W(%rbp), %rax
	mov %rax, %gs:IS_RESUME
	movq $1, %gs:IS_GAP
.Ljunk:					/* the record goes first into the junk area */
	mov %gs:IS_SELF, %rax
	lea IS_JUNK(%rax), %rax
	mov L_N(%rbp), %rcx
	lea 8(%rax,%rcx,8), %rcx
	mov %rcx, %gs:IS_PTR
.Lret:
	mov %rax, L_W(%rbp)
	call .Lrestore_signals
	mov L_W(%rbp), %rax
	add $L_SIZE, %rsp
	pop %rbp
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rdi
	pop %rsi
	pop %rdx
	popfq
	ret

/* The junk area up to %rax (IS_PTR) is full, %rdx is the block: count its
 * records as dropped (a ring's thread; header words give their lengths,
 * bounded, so that a unit a signal handler spoiled cannot lead the walk
 * astray), then clear it all and put the guard back. */
.Lempty_junk:
	cmpq $IS_MODE_SINK, %gs:IS_MODE
	je 3f
	lea IS_JUNK(%rdx), %rsi
	xor %r8d, %r8d
1:	cmp %rax, %rsi
	jae 2f
	mov (%rsi), %rcx
	shr $48, %rcx
	and $IS_MAX_SLOTS, %rcx
	lea 8(%rsi,%rcx,8), %rsi
	inc %r8
	jmp 1b
2:	mov %gs:IS_A_DROPPED_RECORDS, %rcx
	add %r8, (%rcx)
	lea IS_JUNK(%rdx), %r8
	sub %r8, %rax
	shr $3, %rax
	mov %gs:IS_A_DROPPED_WORDS, %rcx
	add %rax, (%rcx)
3:	lea IS_JUNK(%rdx), %rdi
	mov $(IS_JUNK_END - IS_JUNK) / 8, %ecx
	xor %eax, %eax
	rep stosq
	mov %gs:IS_MAGICW, %rax
	mov $(IS_SIZE - IS_JUNK_END) / 8, %ecx
	rep stosq
	ret

/* Every signal blocked, the thread's mask kept in L_MASK: the stub changes
 * the block's words in several steps (the pointer, the gap, dropping), so a
 * handler running instrumented code in between would place its units where
 * the interrupted one goes. Only the ring stub pays for it (two system
 * calls a chunk); a signal that comes meanwhile is delivered at the
 * restore, its handler then sees a consistent block. A wait for the
 * consumer sleeps with the thread's own mask, so that its signals are not
 * held for as long as the consumer lags: a handler that ran meanwhile may
 * have moved the pointer (written into the chunk waited for, dropped), so
 * the wait then starts the stub again from what the handler left. */
.Lblock_signals:
	movq $-1, L_ALL(%rbp)
	mov $SYS_rt_sigprocmask, %eax
	mov $SIG_BLOCK, %edi
	lea L_ALL(%rbp), %rsi
	lea L_MASK(%rbp), %rdx
	mov $8, %r10d
	syscall
	ret

.Lrestore_signals:
	mov $SYS_rt_sigprocmask, %eax
	mov $SIG_SETMASK, %edi
	lea L_MASK(%rbp), %rsi
	xor %edx, %edx
	mov $8, %r10d
	syscall
	ret

/* Is this thread the row's owner (its fs base the one padrone recorded)?
 * Not when it was cloned while nobody gave it a row of its own (padrone
 * gone): it inherited its parent's gs_base, and two writers on one ring
 * spoil each other's units. It then takes the sink row for good, with
 * arch_prctl (the kernel keeps its gs_base from then on). */
.Lcheck_owner:
	cmpq $0, %gs:IS_OWNER
	je 1f
	cmpq $0, %gs:IS_OWNER_PID
	je 2f
	mov $SYS_getpid, %eax		/* a forked child: same fs base, other pid */
	syscall
	cmp %gs:IS_OWNER_PID, %rax
	jne 3f
2:	mov $SYS_arch_prctl, %eax
	mov $ARCH_GET_FS, %edi
	lea L_FS(%rbp), %rsi
	syscall
	test %rax, %rax
	jnz 1f
	mov L_FS(%rbp), %rax
	cmp %gs:IS_OWNER, %rax
	je 1f
3:	mov $SYS_arch_prctl, %eax
	mov $ARCH_SET_GS, %edi
	mov %gs:IS_SINK, %rsi
	syscall
1:	ret

/* The producer moved on: bump prod_seq, wake a sleeping consumer. */
.Lannounce:
	mov %gs:IS_A_PROD_SEQ, %rdi
	lock incl (%rdi)
	mov %gs:IS_A_CONS_SLEEPING, %rcx
	cmpl $0, (%rcx)
	je 1f
	mov $SYS_futex, %eax
	mov $FUTEX_WAKE, %esi
	mov $0x7fffffff, %edx
	xor %r10d, %r10d
	xor %r8d, %r8d
	xor %r9d, %r9d
	syscall
1:	ret

/* %rax: CLOCK_MONOTONIC in ns. */
.Lnow:
	sub $16, %rsp
	mov $SYS_clock_gettime, %eax
	mov $CLOCK_MONOTONIC, %edi
	mov %rsp, %rsi
	syscall
	mov (%rsp), %rax
	imul $1000000000, %rax, %rax
	add 8(%rsp), %rax
	add $16, %rsp
	ret

/* The ring is full at chunk rdx (first word at rsi): wait until it and the
 * chunk half a ring after it are free (%rax 0: the consumer frees chunks in
 * order, so all between are too) or the consumer is gone (%rax 1). Waking
 * at every chunk freed would let the thread run for a chunk and wait again,
 * a futex round trip per chunk. The consumer stays two chunks behind the
 * one being written, so it can free at most NCHUNKS - 2: at most
 * NCHUNKS - 3 after this one. */
.Lwait:
	mov %rsi, L_WSTART(%rbp)
	mov %gs:IS_NCHUNKS, %rax
	shr $1, %rax
	mov %gs:IS_NCHUNKS, %rcx
	sub $3, %rcx
	cmp %rcx, %rax
	jbe 0f
	mov %rcx, %rax
0:	add %rdx, %rax
	cmp %gs:IS_NCHUNKS, %rax
	jb 1f
	sub %gs:IS_NCHUNKS, %rax
1:	mov %rax, L_WCHUNK(%rbp)
	mov %gs:IS_SHIFT, %rcx
	shl %cl, %rax
	add %gs:IS_DATA, %rax
	mov %rax, L_WNEXT(%rbp)
	call .Lannounce			/* a sleeping consumer must wake to free space */
	call .Lnow
	mov %rax, L_T0(%rbp)
	mov %gs:IS_A_PROD_WAITS, %rcx
	incq (%rcx)
.Lwloop:
	mov %gs:IS_PTR, %rcx		/* a handler ran meanwhile and moved on: */
	cmp L_W(%rbp), %rcx		/* start again from what it left */
	jne .Lwmoved
	mov %gs:IS_A_CONS_SEQ, %rdi
	mov (%rdi), %edx		/* edx: the sequence slept on */
	mov %rdx, L_SEQ(%rbp)
	mov %gs:IS_A_PROD_WAITING, %rcx
	mov L_WCHUNK(%rbp), %r8
	add $2, %r8			/* wake me when chunk WCHUNK is freed */
	xchg %r8d, (%rcx)		/* a full barrier, as the seq_cst store */
	mov L_WSTART(%rbp), %rcx
	cmpq $0, (%rcx)
	jne 2f
	mov L_WNEXT(%rbp), %rcx
	cmpq $0, (%rcx)
	jne 2f
	xor %eax, %eax
	jmp .Lwdone
2:	cmpq $0, %gs:IS_QUIT
	jne .Lwgone
	cmpq $IS_MODE_EXHAUSTIVE, %gs:IS_MODE	/* told not to wait any more */
	jne .Lwgone
	mov %gs:IS_A_CONS_STATE, %rcx
	cmpl $IS_CONSUMER_CLOSED, (%rcx)
	je .Lwgone
	call .Lnow
	mov %gs:IS_A_HEARTBEAT, %rcx
	mov (%rcx), %rcx
	cmp L_T0(%rbp), %rcx
	jae 3f
	mov L_T0(%rbp), %rcx
3:	cmp %rcx, %rax
	jbe 4f
	sub %rcx, %rax
	cmp %gs:IS_TIMEOUT_NS, %rax
	ja .Lwgone
4:	call .Lrestore_signals		/* handlers may run while it sleeps */
	mov L_SEQ(%rbp), %rdx
	mov %gs:IS_A_CONS_SEQ, %rdi
	sub $16, %rsp
	movq $0, (%rsp)
	mov %gs:IS_WAIT_NS, %rax
	mov %rax, 8(%rsp)
	mov %rsp, %r10
	xor %esi, %esi			/* FUTEX_WAIT, shared: the consumer is another process */
	xor %r8d, %r8d
	xor %r9d, %r9d
	mov $SYS_futex, %eax
	syscall
	add $16, %rsp
	call .Lblock_signals
	jmp .Lwloop
.Lwmoved:
	xor %eax, %eax
	jmp .Lwdone
.Lwgone:
	mov $1, %eax
.Lwdone:
	mov %gs:IS_A_PROD_WAITING, %rcx
	movl $0, (%rcx)
	push %rax
	call .Lnow
	sub L_T0(%rbp), %rax
	mov %gs:IS_A_PROD_WAIT_NS, %rcx
	add %rax, (%rcx)
	pop %rax
	ret
cc_istub_end:

	.section .note.GNU-stack, "", @progbits
