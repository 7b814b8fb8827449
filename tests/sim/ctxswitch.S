/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A setjmp/longjmp pair of the simulator's own (x86-64): functions that
 * return twice and that switch stacks. The tracer must refuse to probe
 * them, with a reason, and carry on. buf: rbx rbp r12 r13 r14 r15 rsp rip.
 */
	.text
	.globl flex_sim_setjmp
	.type flex_sim_setjmp, @function
flex_sim_setjmp:
	movq %rbx, 0(%rdi)
	movq %rbp, 8(%rdi)
	movq %r12, 16(%rdi)
	movq %r13, 24(%rdi)
	movq %r14, 32(%rdi)
	movq %r15, 40(%rdi)
	leaq 8(%rsp), %rdx
	movq %rdx, 48(%rdi)
	movq (%rsp), %rdx
	movq %rdx, 56(%rdi)
	xorl %eax, %eax
	ret
	.size flex_sim_setjmp, .-flex_sim_setjmp

	.globl flex_sim_longjmp
	.type flex_sim_longjmp, @function
flex_sim_longjmp:
	movl %esi, %eax
	movq 0(%rdi), %rbx
	movq 8(%rdi), %rbp
	movq 16(%rdi), %r12
	movq 24(%rdi), %r13
	movq 32(%rdi), %r14
	movq 40(%rdi), %r15
	movq 48(%rdi), %rsp
	jmpq *56(%rdi)
	.size flex_sim_longjmp, .-flex_sim_longjmp

	.section .note.GNU-stack,"",@progbits
