/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Where a function returns: its body decoded with capstone, so that each
 * return instruction and each jump out of the body can carry a plain uprobe
 * (no uretprobe, which would rewrite the traced program's stack).
 */
#ifndef SBT_RETSITES_H
#define SBT_RETSITES_H

#include <stddef.h>
#include <stdint.h>

#include "probes/elfsyms.h"

#define RETSITES_MAX 64 /* return sites of one function; more: refused */

struct ret_site {
	uint64_t offset; /* file offset of the instruction */
	uint8_t kind; /* enum sbt_site_kind */
	uint8_t reg; /* SBT_SITE_INDIRECT: enum sbt_x86_reg holding the target */
};

/*
 * Decode f's body, and its cold part when the compiler split one off (GCC's
 * "f.cold", entered by jumps from f, never called; NULL if none). Returns
 * how many sites were written to out (0: the function never returns), or
 * -1 when the function cannot be probed safely, with the one-line reason in
 * why: it returns twice (setjmp, vfork), switches stacks, cannot be
 * decoded, leaves by a conditional jump, or has more than max sites.
 * `name` is the demangled name.
 */
int retsites_find(const struct elf_func *f, const struct elf_func *cold, const char *name, struct ret_site *out,
		  int max, char *why, size_t whylen);

#endif
