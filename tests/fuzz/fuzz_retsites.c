// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: any bytes as a function's body (the first byte picks
 * x86-64, ppc64le or s390x and splits off a cold part), through the
 * return-site decoder. Every site found must lie inside the code given.
 */
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>

#include "events.h"
#include "probes/retsites.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int machines[] = { EM_X86_64, EM_PPC64, EM_S390 };
	struct ret_site sites[RETSITES_MAX];
	size_t split = size ? data[0] % (size + 1) : 0;
	int m = size ? machines[data[0] % 3] : EM_X86_64;
	struct elf_func hot = { "f", 0x1000, split, data, m, m == EM_S390 };
	struct elf_func cold = { "f.cold", 0x9000, size - split, data + split, m, m == EM_S390 };
	char why[160];

	setenv("SBT_S390_RETURN_PROBES", "1", 0); /* decode s390x too */
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
