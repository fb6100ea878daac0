/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The insn-count plugin's test guest: a 64 KiB firmware image (-bios) that
 * enters long mode with the first GiB mapped twice, at 0 and at
 * 0xffff800000000000, runs KLOOP iterations of a two-instruction loop at
 * the high ("kernel") address, ULOOP at the low ("user") one, and halts
 * with interrupts off.  Instructions at high addresses: 2 * KLOOP + 3.
 * Built by tests/unit/test_insn_count.py: gcc -c -DKLOOP=.. -DULOOP=..,
 * ld -Ttext=0 --oformat binary.
 */
	.set	BASE, 0xf0000			/* where the image's low 64 KiB sit */
	.set	HIGH, 0xffff800000000000	/* PML4 slot 256 */
	.code16
start:
	cli
	xorw	%ax, %ax
	movw	%ax, %ds
	movw	%ax, %es
	movw	$0x1000, %di			/* page tables at 0x1000-0x2fff: zeroed */
	movw	$0x1000, %cx
	rep stosw
	movl	$0x2003, 0x1000			/* PML4[0] -> PDPT */
	movl	$0x2003, 0x1800			/* PML4[256] -> PDPT */
	movl	$0x83, 0x2000			/* PDPT[0]: 1 GiB page at 0 */
	lgdtl	%cs:gdtr
	movl	%cr4, %eax
	orl	$0x20, %eax			/* PAE */
	movl	%eax, %cr4
	movl	$0x1000, %eax
	movl	%eax, %cr3
	movl	$0xc0000080, %ecx		/* EFER.LME */
	rdmsr
	orl	$0x100, %eax
	wrmsr
	movl	%cr0, %eax
	orl	$0x80000001, %eax		/* PG, PE */
	movl	%eax, %cr0
	ljmpl	$0x08, $(BASE + long64)
	.code64
long64:
	movl	$KLOOP, %ecx
	movabsq	$(HIGH + BASE + kloop), %rax
	jmp	*%rax
kloop:
	decl	%ecx
	jnz	kloop
	movl	$ULOOP, %ecx
	movl	$(BASE + uloop), %eax
	jmp	*%rax
uloop:
	decl	%ecx
	jnz	uloop
1:	hlt
	jmp	1b
	.p2align 3
gdt:
	.quad	0
	.quad	0x00209a0000000000		/* 64-bit code */
gdtr:
	.word	gdtr - gdt - 1
	.long	BASE + gdt
	.org	0xfff0				/* the reset vector */
	.code16
	ljmp	$0xf000, $start
	.org	0x10000
