// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: any bytes as a function's x86-64 body (the first byte
 * splits off a cold part), through the return-site decoder. Every site
 * found must lie inside the code given.
 */
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>

#include "events.h"
#include "retsites.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ret_site sites[RETSITES_MAX];
	size_t split = size ? data[0] % (size + 1) : 0;
	struct elf_func hot = { "f", 0x1000, split, data, EM_X86_64 };
	struct elf_func cold = { "f.cold", 0x9000, size - split, data + split, EM_X86_64 };
	char why[160];
	int n = retsites_find(&hot, size - split ? &cold : NULL, "f", sites, RETSITES_MAX, why,
			      sizeof(why));

	for (int i = 0; i < n; i++) {
		uint64_t at = sites[i].offset;

		if (!((at >= hot.offset && at < hot.offset + hot.size) ||
		      (at >= cold.offset && at < cold.offset + cold.size)) ||
		    sites[i].kind < SBT_SITE_RET || sites[i].kind > SBT_SITE_INDIRECT)
			abort();
	}
	return 0;
}
