/* stubs.S: code templates copied into a target's code cache.
 *
 * Never run inside padrone: they live in .rodata and are copied, with the
 * fixups named below patched, into the target. Position-independent; every
 * internal reference uses a local label.
 *
 * The measuring stub wraps one function without traps. At the function's
 * entry it claims a sample index, files {return slot, original return
 * address, index, rdtsc} in a hash table keyed by the address of the return
 * slot on the stack (unique among live frames of all threads, so recursion
 * and threads need no thread identity), swaps the return address for its
 * handler, and continues into the function. The handler takes rdtsc again,
 * finds the entry by the same key, stores the sample, and returns to the
 * original address. Every register it touches is saved: a caller compiled
 * with -fipa-ra may keep values in "caller-saved" registers across a call
 * it knows does not clobber them.
 *
 * Data block (little-endian u64 fields, offsets fixed):
 *   0 limit     samples wanted (N)
 *   8 started   indices claimed (lock xadd); at >= limit the stub passes
 *  16 (unused)  completion is read from the samples: a sample is written
 *               last, so the handler needs no further locked instruction
 *  24 skipped   calls not timed: no room in the table (sample = ~0)
 *  32 mask      table entries - 1 (a power of two)
 *  40 table     address of the table: entries {slot, ret, t0, idx}, key
 *               0 = empty, 1 = deleted
 *  48 samples   address of u64 samples[N] (tsc ticks; 0 = not yet)
 */
	.intel_syntax noprefix

/* The registers both halves touch, saved and restored alike. */
	.macro save_scratch
	push rax
	push rcx
	push rdx
	push rsi
	push rdi
	push r8
	push r11
	.endm

	.macro restore_scratch
	pop r11
	pop r8
	pop rdi
	pop rsi
	pop rdx
	pop rcx
	pop rax
	.endm

/* After save_scratch: rcx = the key (the address of the return slot), rdx =
 * its hash (the table index before masking), esi = how many entries to
 * probe. Entry and handler must agree on both. */
	.macro slot_key
	lea rcx, [rsp + 56]
	mov rdx, rcx
	shr rdx, 4
	mov rsi, rcx
	shr rsi, 13
	xor rdx, rsi
	mov esi, 16
	.endm
	.section .rodata.padrone_stubs, "a"
	.p2align 6

	.globl cc_mstub_begin, cc_mstub_ret, cc_mstub_end
	.globl cc_mstub_fix_data1, cc_mstub_fix_data2, cc_mstub_fix_cont
	.hidden cc_mstub_begin, cc_mstub_ret, cc_mstub_end
	.hidden cc_mstub_fix_data1, cc_mstub_fix_data2, cc_mstub_fix_cont

cc_mstub_begin:
	save_scratch			/* the return slot is at rsp + 56 */
	lea r11, [rip + 0]		/* data block: disp32 patched */
cc_mstub_fix_data1:
	mov rax, [r11 + 8]
	cmp rax, [r11]
	jae .Lpass			/* all N claimed: cheap way through */
	mov eax, 1
	lock xadd [r11 + 8], rax
	cmp rax, [r11]
	jae .Lpass
	mov rdi, rax			/* rdi: sample index */
	slot_key			/* rcx: key, rdx: its hash, esi: probes */
.Lprobe:
	and rdx, [r11 + 32]
	mov r8, rdx
	shl r8, 5
	add r8, [r11 + 40]		/* r8: entry */
	mov rax, [r8]
	cmp rax, rcx
	je .Ltake			/* a stale entry of this very slot */
	cmp rax, 1
	ja .Lnext			/* a live frame's */
	lock cmpxchg [r8], rcx		/* claim an empty or deleted entry */
	je .Ltake
.Lnext:
	inc rdx
	dec esi
	jnz .Lprobe
	mov rax, [r11 + 48]		/* no room: the call runs untimed */
	mov qword ptr [rax + rdi * 8], -1
	lock inc qword ptr [r11 + 24]
	jmp .Lpass
.Ltake:
	mov [r8 + 24], rdi
	mov rax, [rcx]
	mov [r8 + 8], rax		/* the original return address */
	lea rax, [rip + .Lret]
	mov [rcx], rax
	rdtsc
	shl rdx, 32
	or rax, rdx
	mov [r8 + 16], rax		/* t0, last: bookkeeping is not timed */
.Lpass:
	restore_scratch
	.byte 0xe9			/* jmp rel32 to the function's continuation */
	.long 0
cc_mstub_fix_cont:

	.p2align 4
cc_mstub_ret:
.Lret:
	lea rsp, [rsp - 8]		/* back onto the return slot, flags intact */
	save_scratch
	rdtsc
	shl rdx, 32
	or rax, rdx
	mov rdi, rax			/* t1 */
	lea r11, [rip + 0]
cc_mstub_fix_data2:
	slot_key
.Lfind:
	and rdx, [r11 + 32]
	mov r8, rdx
	shl r8, 5
	add r8, [r11 + 40]
	cmp [r8], rcx
	je .Lfound
	inc rdx
	dec esi
	jnz .Lfind
	ud2				/* cannot happen: the entry filed it */
.Lfound:
	sub rdi, [r8 + 16]
	mov rax, [r8 + 24]
	mov rdx, [r11 + 48]
	mov [rdx + rax * 8], rdi
	mov rax, [r8 + 8]
	mov [rcx], rax			/* return where the caller expects */
	mov qword ptr [r8], 1		/* deleted */
	restore_scratch
	ret
cc_mstub_end:

	.section .note.GNU-stack, "", @progbits
