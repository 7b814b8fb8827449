// SPDX-License-Identifier: GPL-2.0-only
/* Return sites from machine code: returns, tail calls, jump tables,
 * indirect jumps, cold parts, and the functions that must be refused. */
#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "events.h"
#include "probes/retsites.h"

#define BASE 0x1000

static struct ret_site sites[RETSITES_MAX];
static char why[160];

static int find_at(const uint8_t *code, size_t n, const char *name, int max)
{
	struct elf_func f = { "f", BASE, n, code, EM_X86_64 };

	why[0] = '\0';
	return retsites_find(&f, NULL, name, sites, max, why, sizeof(why));
}

#define FIND(...)                                                                                                      \
	({                                                                                                             \
		static const uint8_t c_[] = { __VA_ARGS__ };                                                           \
		find_at(c_, sizeof(c_), "f", RETSITES_MAX);                                                            \
	})

static void assert_site(int i, uint64_t off, int kind, int reg)
{
	assert_int_equal(sites[i].offset, BASE + off);
	assert_int_equal(sites[i].kind, kind);
	assert_int_equal(sites[i].reg, reg);
}

static void assert_refused(int n, const char *reason)
{
	assert_int_equal(n, -1);
	if (!strstr(why, reason))
		fail_msg("refused for '%s', expected '%s'", why, reason);
}

static void returns(void **state)
{
	(void)state;
	/* push rbp; mov rbp,rsp; pop rbp; ret */
	assert_int_equal(FIND(0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3), 1);
	assert_site(0, 5, SBT_SITE_RET, 0);
	/* two returns: test edi,edi; je +1; ret; ret */
	assert_int_equal(FIND(0x85, 0xff, 0x74, 0x01, 0xc3, 0xc3), 2);
	assert_site(0, 4, SBT_SITE_RET, 0);
	assert_site(1, 5, SBT_SITE_RET, 0);
	/* frame torn down from rbp: mov rsp,rbp; pop rbp; ret */
	assert_int_equal(FIND(0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xec, 0x5d, 0xc3), 1);
	/* a function that never returns: call abort-like; no sites, not refused */
	assert_int_equal(FIND(0x50, 0xe8, 0x00, 0x00, 0x00, 0x00), 0);
}

static void tail_calls(void **state)
{
	(void)state;
	/* nop; jmp rel32 out of the body */
	assert_int_equal(FIND(0x90, 0xe9, 0x00, 0x10, 0x00, 0x00), 1);
	assert_site(0, 1, SBT_SITE_TAIL, 0);
	/* jmp back to its own start: it leaves and enters again */
	assert_int_equal(FIND(0x90, 0xe9, 0xfa, 0xff, 0xff, 0xff), 1);
	assert_site(0, 1, SBT_SITE_TAIL, 0);
	/* jmp inside the body is no site: jmp +1; nop; ret */
	assert_int_equal(FIND(0xeb, 0x01, 0x90, 0xc3), 1);
	assert_site(0, 3, SBT_SITE_RET, 0);
	/* through a vtable slot: jmp [rax+0x18] */
	assert_int_equal(FIND(0xff, 0x60, 0x18), 1);
	assert_site(0, 0, SBT_SITE_TAIL, 0);
	/* through the GOT: jmp [rip+0x100] */
	assert_int_equal(FIND(0xff, 0x25, 0x00, 0x01, 0x00, 0x00), 1);
	assert_site(0, 0, SBT_SITE_TAIL, 0);
}

static void indirect_jumps(void **state)
{
	(void)state;
	/* jmp rax: BPF checks the target */
	assert_int_equal(FIND(0xff, 0xe0), 1);
	assert_site(0, 0, SBT_SITE_INDIRECT, SBT_REG_AX);
	/* jmp r11 */
	assert_int_equal(FIND(0x41, 0xff, 0xe3), 1);
	assert_site(0, 0, SBT_SITE_INDIRECT, SBT_REG_R11);
	/* a jump table: jmp [rax*8+0x1000]; ret */
	assert_int_equal(FIND(0xff, 0x24, 0xc5, 0x00, 0x10, 0x00, 0x00, 0xc3), 1);
	assert_site(0, 7, SBT_SITE_RET, 0);
}

static void refused(void **state)
{
	static const uint8_t ret[] = { 0x90, 0xc3 };
	static const uint8_t rets[] = { 0xc3 - 0x33, 0xc3, 0xc3, 0xc3 };
	struct elf_func f = { "f", BASE, sizeof(ret), ret, EM_AARCH64 };

	(void)state;
	assert_refused(FIND(0xc3), "bare return");
	/* mov rsp,rdi: a stack switch */
	assert_refused(FIND(0x48, 0x89, 0xfc, 0xc3), "switches stacks");
	/* mov rsp,[rdi+0x30] (longjmp) */
	assert_refused(FIND(0x48, 0x8b, 0x67, 0x30, 0xff, 0x67, 0x38), "switches stacks");
	/* je out of the body: taken or not, a probe cannot tell */
	assert_refused(FIND(0x85, 0xff, 0x0f, 0x84, 0x00, 0x10, 0x00, 0x00, 0xc3), "conditional jump");
	assert_refused(FIND(0xcb), "far return");
	/* 0x06 is no instruction in 64-bit mode */
	assert_refused(FIND(0x90, 0x06, 0xc3), "cannot decode");
	assert_refused(find_at(ret, sizeof(ret), "flex_sim_setjmp", RETSITES_MAX), "returns twice");
	assert_refused(find_at(ret, sizeof(ret), "ns::Ctx::vfork", RETSITES_MAX), "returns twice");
	assert_int_equal(find_at(ret, sizeof(ret), "ns::setjmp_user::run", RETSITES_MAX), 1);
	assert_refused(find_at(rets, sizeof(rets), "f", 2), "more than 2 return sites");
	assert_refused(find_at(ret, 0, "f", RETSITES_MAX), "no size");
	assert_refused(retsites_find(&f, NULL, "f", sites, RETSITES_MAX, why, sizeof(why)),
		       "decoded on x86-64, ppc64 and s390x only");
}

static void cold_part(void **state)
{
	/* hot at 0x1000: test; je cold; ret -- cold at 0x2000: nop; ret; jmp back to hot+0x8 */
	static const uint8_t hot[] = { 0x85, 0xff, 0x0f, 0x84, 0xf8, 0x0f, 0x00, 0x00, 0xc3 };
	static const uint8_t cold[] = { 0x90, 0xc3, 0xe9, 0x01, 0xf0, 0xff, 0xff };
	struct elf_func h = { "f", BASE, sizeof(hot), hot, EM_X86_64 };
	struct elf_func c = { "f.cold", 0x2000, sizeof(cold), cold, EM_X86_64 };

	(void)state;
	assert_int_equal(retsites_find(&h, &c, "f", sites, RETSITES_MAX, why, sizeof(why)), 2);
	assert_site(0, 8, SBT_SITE_RET, 0);
	assert_int_equal(sites[1].offset, 0x2001);
	/* without its cold part, the je leaves the body */
	assert_refused(retsites_find(&h, NULL, "f", sites, RETSITES_MAX, why, sizeof(why)), "conditional jump");
}

static int find_arch(const uint8_t *code, size_t n, int machine)
{
	struct elf_func f = { "f", BASE, n, code, machine, machine == EM_S390 };

	why[0] = '\0';
	return retsites_find(&f, NULL, "f", sites, RETSITES_MAX, why, sizeof(why));
}

#define FIND_ON(machine, ...)                                                                                          \
	({                                                                                                             \
		static const uint8_t c_[] = { __VA_ARGS__ };                                                           \
		find_arch(c_, sizeof(c_), machine);                                                                    \
	})

/* ppc64le: little-endian words */
#define PPC(w) ((w)&0xff), (((w) >> 8) & 0xff), (((w) >> 16) & 0xff), ((unsigned)(w) >> 24)

static void power(void **state)
{
	(void)state;
	/* mflr r0; nop; blr */
	assert_int_equal(FIND_ON(EM_PPC64, PPC(0x7c0802a6), PPC(0x60000000), PPC(0x4e800020)), 1);
	assert_site(0, 8, SBT_SITE_RET, 0);
	/* bl +16 (a call comes back); blr */
	assert_int_equal(FIND_ON(EM_PPC64, PPC(0x48000011), PPC(0x4e800020)), 1);
	assert_site(0, 4, SBT_SITE_RET, 0);
	/* nop; b +0x100: leaves for another function */
	assert_int_equal(FIND_ON(EM_PPC64, PPC(0x60000000), PPC(0x48000100)), 1);
	assert_site(0, 4, SBT_SITE_TAIL, 0);
	/* bne +8 stays inside; nop; blr */
	assert_int_equal(FIND_ON(EM_PPC64, PPC(0x40820008), PPC(0x60000000), PPC(0x4e800020)), 1);
	assert_site(0, 8, SBT_SITE_RET, 0);
	/* nop; beqlr; blr: a conditional return */
	assert_refused(FIND_ON(EM_PPC64, PPC(0x60000000), PPC(0x4d820020), PPC(0x4e800020)), "returns conditionally");
	/* nop; bctr: a jump table or a pointer */
	assert_refused(FIND_ON(EM_PPC64, PPC(0x60000000), PPC(0x4e800420)), "indirect branch");
	/* bne +0x100 out of the body */
	assert_refused(FIND_ON(EM_PPC64, PPC(0x40820100), PPC(0x4e800020)), "leaves by a conditional branch");
}

static void z(void **state)
{
	(void)state;
	/* refused by default: not proven safe on s390x (retsites.c) */
	assert_refused(FIND_ON(EM_S390, 0x07, 0xfe), "not enabled on s390x yet");
	setenv("SBT_S390_RETURN_PROBES", "1", 1);
	/* lgr %r1,%r2; br %r14 */
	assert_int_equal(FIND_ON(EM_S390, 0xb9, 0x04, 0x00, 0x12, 0x07, 0xfe), 1);
	assert_site(0, 4, SBT_SITE_RET, 0);
	/* brasl %r14,+0x100 (a call); br %r14 */
	assert_int_equal(FIND_ON(EM_S390, 0xc0, 0xe5, 0x00, 0x00, 0x00, 0x80, 0x07, 0xfe), 1);
	assert_site(0, 6, SBT_SITE_RET, 0);
	/* lgr; jg +0x100: a tail call */
	assert_int_equal(FIND_ON(EM_S390, 0xb9, 0x04, 0x00, 0x12, 0xc0, 0xf4, 0x00, 0x00, 0x00, 0x80), 1);
	assert_site(0, 4, SBT_SITE_TAIL, 0);
	/* jne +6 (inside); br %r14; br %r14 */
	assert_int_equal(FIND_ON(EM_S390, 0xa7, 0x74, 0x00, 0x03, 0x07, 0xfe, 0x07, 0xfe), 2);
	assert_site(0, 4, SBT_SITE_RET, 0);
	assert_site(1, 6, SBT_SITE_RET, 0);
	/* lgr; ber %r14; br %r14: a conditional return */
	assert_refused(FIND_ON(EM_S390, 0xb9, 0x04, 0x00, 0x12, 0x07, 0x8e, 0x07, 0xfe), "branch through a register");
	/* nopr (bcr 0,%r0) is padding; cij %r2,0,8,+6 (compare and jump, inside) */
	assert_int_equal(FIND_ON(EM_S390, 0x07, 0x00, 0xec, 0x28, 0x00, 0x03, 0x00, 0x7e, 0x07, 0xfe, 0x07, 0xfe), 2);
	/* br %r1: through a register */
	assert_refused(FIND_ON(EM_S390, 0xb9, 0x04, 0x00, 0x12, 0x07, 0xf1), "branch through a register");
	/* jne +0x100 out of the body */
	assert_refused(FIND_ON(EM_S390, 0xa7, 0x74, 0x00, 0x80, 0x07, 0xfe), "leaves by a conditional jump");
	/* exrl %r3,+0x10 (which capstone 4 does not know); lgr; br %r14 */
	assert_int_equal(FIND_ON(EM_S390, 0xc6, 0x30, 0x00, 0x00, 0x00, 0x08, 0xb9, 0x04, 0x00, 0x12, 0x07, 0xfe), 1);
	assert_site(0, 10, SBT_SITE_RET, 0);
	unsetenv("SBT_S390_RETURN_PROBES");
	/* another machine */
	assert_refused(FIND_ON(EM_AARCH64, 0xc0, 0x03, 0x5f, 0xd6), "decoded on x86-64, ppc64 and s390x only");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(returns), cmocka_unit_test(tail_calls), cmocka_unit_test(indirect_jumps),
		cmocka_unit_test(refused), cmocka_unit_test(cold_part),	 cmocka_unit_test(power),
		cmocka_unit_test(z),
	};

	return cmocka_run_group_tests_name("retsites", tests, NULL, NULL);
}
