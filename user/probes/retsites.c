// SPDX-License-Identifier: GPL-2.0-only
/* Finding a function's return sites with capstone: x86-64, ppc64 (IBM
 * Power) and s390x (IBM Z). */
#include <capstone/capstone.h>
#include <elf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "probes/retsites.h"

/* Functions that return twice or never return to their caller's frame the
 * usual way: a probe pair cannot describe them. */
static const char *const returns_twice[] = {
	"setjmp",  "_setjmp",	 "__setjmp",	"sigsetjmp", "__sigsetjmp",
	"savectx", "getcontext", "swapcontext", "vfork",     "__vfork",
};

static bool name_returns_twice(const char *name)
{
	const char *base = name, *p;

	/* the unqualified name: after the last "::" */
	while ((p = strstr(base, "::")))
		base = p + 2;
	for (size_t i = 0; i < sizeof(returns_twice) / sizeof(returns_twice[0]); i++)
		if (!strcmp(base, returns_twice[i]))
			return true;
	return strstr(base, "setjmp") != NULL;
}

static int x86_gpr(x86_reg r)
{
	switch (r) {
	case X86_REG_RAX: return SBT_REG_AX;
	case X86_REG_RBX: return SBT_REG_BX;
	case X86_REG_RCX: return SBT_REG_CX;
	case X86_REG_RDX: return SBT_REG_DX;
	case X86_REG_RSI: return SBT_REG_SI;
	case X86_REG_RDI: return SBT_REG_DI;
	case X86_REG_RBP: return SBT_REG_BP;
	case X86_REG_R8: return SBT_REG_R8;
	case X86_REG_R9: return SBT_REG_R9;
	case X86_REG_R10: return SBT_REG_R10;
	case X86_REG_R11: return SBT_REG_R11;
	case X86_REG_R12: return SBT_REG_R12;
	case X86_REG_R13: return SBT_REG_R13;
	case X86_REG_R14: return SBT_REG_R14;
	case X86_REG_R15: return SBT_REG_R15;
	default: return -1;
	}
}

/* An instruction that sets the stack pointer to somewhere else than its
 * own frame: a stack switch (longjmp, a coroutine swap). Frame set-up and
 * tear-down (push, pop, add/sub/and, mov from rbp, lea off rsp or rbp,
 * leave) is not. */
static bool x86_switches_stack(const cs_insn *in)
{
	const cs_x86 *x = &in->detail->x86;
	const cs_x86_op *dst = x->op_count ? &x->operands[0] : NULL;

	if (!dst || dst->type != X86_OP_REG || dst->reg != X86_REG_RSP)
		return false;
	switch (in->id) {
	case X86_INS_MOV:
		return x->op_count < 2 || x->operands[1].type != X86_OP_REG || x->operands[1].reg != X86_REG_RBP;
	case X86_INS_LEA:
		return x->op_count < 2 ||
		       (x->operands[1].mem.base != X86_REG_RSP && x->operands[1].mem.base != X86_REG_RBP);
	case X86_INS_POP:
	case X86_INS_XCHG:
	case X86_INS_CMOVA:
	case X86_INS_CMOVAE:
	case X86_INS_CMOVB:
	case X86_INS_CMOVBE:
	case X86_INS_CMOVE:
	case X86_INS_CMOVG:
	case X86_INS_CMOVGE:
	case X86_INS_CMOVL:
	case X86_INS_CMOVLE:
	case X86_INS_CMOVNE: return true;
	default: return false;
	}
}

__attribute__((format(printf, 3, 4))) static int refuse(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -1;
}

static int add(struct ret_site *out, int n, int max, uint64_t off, int kind, int reg, char *why, size_t len)
{
	if (n >= max)
		return refuse(why, len, "more than %d return sites", max);
	out[n] = (struct ret_site){ off, (uint8_t)kind, (uint8_t)reg };
	return n + 1;
}

/* The function's code: its entry part and, where the compiler split it,
 * its cold part (GCC's "f.cold"): jumps between them stay inside. */
struct body {
	uint64_t start, end; /* the part being decoded */
	uint64_t other_start, other_end; /* the other part, or empty */
	bool entry; /* the part with the entry */
};

static bool inside(const struct body *b, uint64_t t)
{
	uint64_t entry = b->entry ? b->start : b->other_start;

	/* a jump to the function's own entry re-enters it: a tail call */
	return t != entry && ((t >= b->start && t < b->end) || (t >= b->other_start && t < b->other_end));
}

static bool in_group(const cs_insn *in, int group)
{
	for (int i = 0; i < in->detail->groups_count; i++)
		if (in->detail->groups[i] == group)
			return true;
	return false;
}

/* One instruction: -1 refused, else the new count of sites. */
static int x86_classify(const cs_insn *in, const struct body *b, struct ret_site *out, int n, int max, char *why,
			size_t len)
{
	const cs_x86 *x = &in->detail->x86;
	const cs_x86_op *op = x->op_count ? &x->operands[0] : NULL;
	unsigned long at = (unsigned long)(in->address - b->start);

	if (x86_switches_stack(in))
		return refuse(why, len, "switches stacks (%s %s at +0x%lx)", in->mnemonic, in->op_str, at);
	switch (in->id) {
	case X86_INS_RET:
		if (b->entry && in->address == b->start)
			return refuse(why, len, "its body is a bare return");
		return add(out, n, max, in->address, SBT_SITE_RET, 0, why, len);
	case X86_INS_RETF:
	case X86_INS_RETFQ:
	case X86_INS_IRET:
	case X86_INS_IRETQ:
	case X86_INS_LJMP: return refuse(why, len, "far return or jump at +0x%lx", at);
	case X86_INS_JMP:
		if (op && op->type == X86_OP_IMM) {
			if (inside(b, (uint64_t)op->imm))
				return n;
			return add(out, n, max, in->address, SBT_SITE_TAIL, 0, why, len);
		}
		if (op && op->type == X86_OP_REG) {
			int reg = x86_gpr(op->reg);

			if (reg < 0)
				return refuse(why, len, "indirect jump through an odd register at +0x%lx", at);
			return add(out, n, max, in->address, SBT_SITE_INDIRECT, reg, why, len);
		}
		/* memory: with an index register a jump table (stays in the
		 * body); without, a vtable or GOT slot (a tail call) */
		if (op && op->type == X86_OP_MEM && op->mem.index != X86_REG_INVALID)
			return n;
		return add(out, n, max, in->address, SBT_SITE_TAIL, 0, why, len);
	default: break;
	}
	if (in_group(in, X86_GRP_JUMP)) {
		/* conditional: leaves the body only when taken, which a probe
		 * on the instruction cannot tell */
		if (op && op->type == X86_OP_IMM && !inside(b, (uint64_t)op->imm))
			return refuse(why, len, "leaves by a conditional jump at +0x%lx", at);
		if (op && op->type != X86_OP_IMM)
			return refuse(why, len, "conditional indirect jump at +0x%lx", at);
	}
	return n;
}

/* The target of a direct branch, if its last operand is one. */
static bool branch_target(const cs_insn *in, int machine, uint64_t *t)
{
	if (machine == EM_PPC64) {
		const cs_ppc *p = &in->detail->ppc;

		if (!p->op_count || p->operands[p->op_count - 1].type != PPC_OP_IMM)
			return false;
		*t = (uint64_t)p->operands[p->op_count - 1].imm;
		return true;
	}
	const cs_sysz *z = &in->detail->sysz;

	if (!z->op_count || z->operands[z->op_count - 1].type != SYSZ_OP_IMM)
		return false;
	*t = (uint64_t)z->operands[z->op_count - 1].imm;
	return true;
}

/* Power: blr returns; b leaves for another function (a tail call) or
 * stays; a conditional return (beqlr, ...) or a conditional branch out
 * cannot be told taken from not by a probe; bctr may be a jump table or a
 * tail call through a pointer, which the decoder cannot tell apart. */
static int ppc_classify(const cs_insn *in, const struct body *b, struct ret_site *out, int n, int max, char *why,
			size_t len)
{
	const char *m = in->mnemonic;
	size_t ml = strlen(m);
	unsigned long at = (unsigned long)(in->address - b->start);
	uint64_t t;

	/* a branch that sets the link register (capstone's mnemonics end in
	 * l: bl, bctrl, blrl, bgel, ...; and bla) is a call: it comes back */
	if (m[0] != 'b' || m[ml - 1] == 'l' || !strcmp(m, "bla"))
		return n;
	if (!strcmp(m, "blr")) {
		if (b->entry && in->address == b->start)
			return refuse(why, len, "its body is a bare return");
		return add(out, n, max, in->address, SBT_SITE_RET, 0, why, len);
	}
	if (ml > 2 && !strcmp(m + ml - 2, "lr"))
		return refuse(why, len, "returns conditionally (%s at +0x%lx)", m, at);
	if (strstr(m, "ctr"))
		return refuse(why, len, "indirect branch (%s at +0x%lx)", m, at);
	if (!branch_target(in, EM_PPC64, &t))
		return refuse(why, len, "branch it cannot follow (%s %s at +0x%lx)", m, in->op_str, at);
	if (inside(b, t))
		return n;
	if (!strcmp(m, "b") || !strcmp(m, "ba"))
		return add(out, n, max, in->address, SBT_SITE_TAIL, 0, why, len);
	return refuse(why, len, "leaves by a conditional branch at +0x%lx", at);
}

/* Z: compare and then jump (how 'j') or branch ('b'): c, an optional l
 * (logical), an optional g (64-bit), r or i (register or immediate). */
static bool sysz_compare_and(const char *m, char how)
{
	if (m[0] != 'c')
		return false;
	m += 1 + (m[1] == 'l');
	m += m[0] == 'g';
	return (m[0] == 'r' || m[0] == 'i') && m[1] == how;
}

/* Z's relative branches, told by mnemonic (capstone 4 puts most of them
 * in no group): j/jg always, j<cond>, jg<cond>, brc, brcl, brct..., and
 * compare-and-jump (crj, cgrj, cij, cgij, clrj, clgrj, clij, clgij with
 * a condition). */
static bool sysz_relative_branch(const char *m)
{
	return m[0] == 'j' || !strncmp(m, "brc", 3) || !strncmp(m, "brx", 3) || sysz_compare_and(m, 'j');
}

/* Z: branches to a register or an address in memory (br, b<cond>r, bc,
 * b, bct...) and compare-and-branch to one (crb, cgib, ...). */
static bool sysz_register_branch(const char *m)
{
	return m[0] == 'b' || sysz_compare_and(m, 'b');
}

/* Z: br %r14 returns; j/jg leave for another function or stay; a relative
 * branch out on a condition cannot be told taken from not; any other
 * branch through a register (a table, a pointer, a conditional return)
 * cannot be followed. */
static int sysz_classify(const cs_insn *in, const struct body *b, struct ret_site *out, int n, int max, char *why,
			 size_t len)
{
	const cs_sysz *z = &in->detail->sysz;
	const char *m = in->mnemonic;
	unsigned long at = (unsigned long)(in->address - b->start);
	uint64_t t;

	if (in->id == SYSZ_INS_BRASL || in->id == SYSZ_INS_BRAS || in->id == SYSZ_INS_BASR || !strcmp(m, "bas") ||
	    !strcmp(m, "balr") || !strcmp(m, "bal"))
		return n; /* calls */
	if (in->id == SYSZ_INS_BR && z->op_count == 1 && z->operands[0].type == SYSZ_OP_REG &&
	    z->operands[0].reg == SYSZ_REG_14) {
		if (b->entry && in->address == b->start)
			return refuse(why, len, "its body is a bare return");
		return add(out, n, max, in->address, SBT_SITE_RET, 0, why, len);
	}
	if (in->id == SYSZ_INS_BCR && z->op_count && z->operands[0].type == SYSZ_OP_IMM && z->operands[0].imm == 0)
		return n; /* nopr: never taken */
	if (sysz_relative_branch(m)) {
		if (!branch_target(in, EM_S390, &t))
			return refuse(why, len, "jump it cannot follow (%s %s at +0x%lx)", m, in->op_str, at);
		if (inside(b, t))
			return n;
		if (in->id == SYSZ_INS_J || in->id == SYSZ_INS_JG)
			return add(out, n, max, in->address, SBT_SITE_TAIL, 0, why, len);
		return refuse(why, len, "leaves by a conditional jump at +0x%lx", at);
	}
	if (sysz_register_branch(m))
		return refuse(why, len, "branch through a register (%s %s at +0x%lx)", m, in->op_str, at);
	return n;
}

static int classify(int machine, const cs_insn *in, const struct body *b, struct ret_site *out, int n, int max,
		    char *why, size_t len)
{
	switch (machine) {
	case EM_PPC64: return ppc_classify(in, b, out, n, max, why, len);
	case EM_S390: return sysz_classify(in, b, out, n, max, why, len);
	default: return x86_classify(in, b, out, n, max, why, len);
	}
}

/* Decode one part; -1 refused, else the count of sites in out. */
static int decode(csh cs, int machine, const uint8_t *code, const struct body *b, struct ret_site *out, int n, int max,
		  char *why, size_t whylen)
{
	const uint8_t *start = code;
	cs_insn *in = cs_malloc(cs);
	size_t left = b->end - b->start;
	uint64_t addr = b->start, next = b->start;

	for (;;) {
		while (n >= 0 && left && cs_disasm_iter(cs, &code, &left, &addr, in)) {
			n = classify(machine, in, b, out, n, max, why, whylen);
			next = addr;
		}
		/* capstone 4 does not know z10's EXRL (c6x0: execute the
		 * instruction at a relative address; compilers use it for
		 * variable-length moves): it neither branches nor returns */
		if (machine != EM_S390 || n < 0 || left < 6 || code[0] != 0xc6 || (code[1] & 0x0f))
			break;
		code += 6;
		left -= 6;
		addr += 6;
		next = addr;
	}
	cs_free(in, 1);
	/* ppc64: the code may end in a traceback table, which opens with a
	 * zero word (no instruction) */
	if (machine == EM_PPC64 && n >= 0 && next != b->end && b->end - next >= 4 &&
	    !memcmp(start + (next - b->start), "\0\0\0\0", 4))
		next = b->end;
	if (n >= 0 && next != b->end)
		return refuse(why, whylen, "cannot decode its %s at +0x%lx of 0x%lx", b->entry ? "body" : "cold part",
			      (unsigned long)(next - b->start), (unsigned long)(b->end - b->start));
	return n;
}

/* ppc64: little-endian (ppc64le) or big-endian, as the file says */
static int open_decoder(const struct elf_func *f, csh *cs)
{
	switch (f->machine) {
	case EM_PPC64:
		return cs_open(CS_ARCH_PPC, CS_MODE_64 | (f->big_endian ? CS_MODE_BIG_ENDIAN : CS_MODE_LITTLE_ENDIAN),
			       cs) != CS_ERR_OK;
	case EM_S390: return cs_open(CS_ARCH_SYSZ, CS_MODE_BIG_ENDIAN, cs) != CS_ERR_OK;
	default: return cs_open(CS_ARCH_X86, CS_MODE_64, cs) != CS_ERR_OK;
	}
}

int retsites_find(const struct elf_func *f, const struct elf_func *cold, const char *name, struct ret_site *out,
		  int max, char *why, size_t whylen)
{
	struct body hot = { f->offset, f->offset + f->size, 0, 0, true }, part;
	csh cs;
	int n;

	if (name_returns_twice(name))
		return refuse(why, whylen, "returns twice, like setjmp");
	if (f->machine != EM_X86_64 && f->machine != EM_PPC64 && f->machine != EM_S390)
		return refuse(why, whylen, "return sites are decoded on x86-64, ppc64 and s390x only (ELF machine %d)",
			      f->machine);
	/* Decoded, but not probed: under QEMU's TCG, the only s390x here, the
	 * kernel resumed a uprobe'd `br %r14` at the next instruction and the
	 * process died. Until proven on a real Z, returns are not probed there
	 * unless asked for (docs/power-and-z.md). */
	if (f->machine == EM_S390 && !getenv("SBT_S390_RETURN_PROBES"))
		return refuse(why, whylen,
			      "return probes are not enabled on s390x yet (not proven "
			      "safe; SBT_S390_RETURN_PROBES=1 to try)");
	if (!f->size || !f->code || (cold && !cold->code))
		return refuse(why, whylen, "its symbol gives no size");
	if (open_decoder(f, &cs))
		return refuse(why, whylen, "capstone cannot decode ELF machine %d", f->machine);
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	if (cold) {
		hot.other_start = cold->offset;
		hot.other_end = cold->offset + cold->size;
		part = (struct body){ hot.other_start, hot.other_end, hot.start, hot.end, false };
	}
	n = decode(cs, f->machine, f->code, &hot, out, 0, max, why, whylen);
	if (n >= 0 && cold)
		n = decode(cs, f->machine, cold->code, &part, out, n, max, why, whylen);
	cs_close(&cs);
	return n;
}
