// SPDX-License-Identifier: GPL-2.0-only
/* Finding a function's return sites with capstone (x86-64). */
#include <capstone/capstone.h>
#include <elf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "events.h"
#include "retsites.h"

/* Functions that return twice or never return to their caller's frame the
 * usual way: a probe pair cannot describe them. */
static const char *const returns_twice[] = {
	"setjmp", "_setjmp", "__setjmp", "sigsetjmp", "__sigsetjmp", "savectx",
	"getcontext", "swapcontext", "vfork", "__vfork",
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
		return x->op_count < 2 || x->operands[1].type != X86_OP_REG ||
		       x->operands[1].reg != X86_REG_RBP;
	case X86_INS_LEA:
		return x->op_count < 2 || (x->operands[1].mem.base != X86_REG_RSP &&
					   x->operands[1].mem.base != X86_REG_RBP);
	case X86_INS_POP:
	case X86_INS_XCHG:
	case X86_INS_CMOVA: case X86_INS_CMOVAE: case X86_INS_CMOVB: case X86_INS_CMOVBE:
	case X86_INS_CMOVE: case X86_INS_CMOVG: case X86_INS_CMOVGE: case X86_INS_CMOVL:
	case X86_INS_CMOVLE: case X86_INS_CMOVNE:
		return true;
	default:
		return false;
	}
}

__attribute__((format(printf, 3, 4))) static int refuse(char *why, size_t len,
							  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -1;
}

static int add(struct ret_site *out, int n, int max, uint64_t off, int kind, int reg, char *why,
	       size_t len)
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
	return t != entry && ((t >= b->start && t < b->end) ||
			      (t >= b->other_start && t < b->other_end));
}

static bool in_group(const cs_insn *in, int group)
{
	for (int i = 0; i < in->detail->groups_count; i++)
		if (in->detail->groups[i] == group)
			return true;
	return false;
}

/* One instruction: -1 refused, else the new count of sites. */
static int x86_classify(const cs_insn *in, const struct body *b, struct ret_site *out, int n,
			int max, char *why, size_t len)
{
	const cs_x86 *x = &in->detail->x86;
	const cs_x86_op *op = x->op_count ? &x->operands[0] : NULL;
	unsigned long at = (unsigned long)(in->address - b->start);

	if (x86_switches_stack(in))
		return refuse(why, len, "switches stacks (%s %s at +0x%lx)", in->mnemonic,
			      in->op_str, at);
	switch (in->id) {
	case X86_INS_RET:
		if (b->entry && in->address == b->start)
			return refuse(why, len, "its body is a bare return");
		return add(out, n, max, in->address, SBT_SITE_RET, 0, why, len);
	case X86_INS_RETF: case X86_INS_RETFQ: case X86_INS_IRET: case X86_INS_IRETQ:
	case X86_INS_LJMP:
		return refuse(why, len, "far return or jump at +0x%lx", at);
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
	default:
		break;
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

/* Decode one part; -1 refused, else the count of sites in out. */
static int decode(csh cs, const uint8_t *code, const struct body *b, struct ret_site *out, int n,
		  int max, char *why, size_t whylen)
{
	cs_insn *in = cs_malloc(cs);
	size_t left = b->end - b->start;
	uint64_t addr = b->start, next = b->start;

	while (n >= 0 && left && cs_disasm_iter(cs, &code, &left, &addr, in)) {
		n = x86_classify(in, b, out, n, max, why, whylen);
		next = addr;
	}
	cs_free(in, 1);
	if (n >= 0 && next != b->end)
		return refuse(why, whylen, "cannot decode its %s at +0x%lx of 0x%lx",
			      b->entry ? "body" : "cold part", (unsigned long)(next - b->start),
			      (unsigned long)(b->end - b->start));
	return n;
}

int retsites_find(const struct elf_func *f, const struct elf_func *cold, const char *name,
		  struct ret_site *out, int max, char *why, size_t whylen)
{
	struct body hot = { f->offset, f->offset + f->size, 0, 0, true }, part;
	csh cs;
	int n;

	if (name_returns_twice(name))
		return refuse(why, whylen, "returns twice, like setjmp");
	if (f->machine != EM_X86_64)
		return refuse(why, whylen,
			      "return sites are decoded on x86-64 only so far (ELF machine %d)",
			      f->machine);
	if (!f->size || !f->code || (cold && !cold->code))
		return refuse(why, whylen, "its symbol gives no size");
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return refuse(why, whylen, "capstone cannot decode x86-64");
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	if (cold) {
		hot.other_start = cold->offset;
		hot.other_end = cold->offset + cold->size;
		part = (struct body){ hot.other_start, hot.other_end, hot.start, hot.end, false };
	}
	n = decode(cs, f->code, &hot, out, 0, max, why, whylen);
	if (n >= 0 && cold)
		n = decode(cs, cold->code, &part, out, n, max, why, whylen);
	cs_close(&cs);
	return n;
}
