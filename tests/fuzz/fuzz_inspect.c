// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer target: any bytes as a Perfetto trace, through inspect. */
#include <stdint.h>
#include <stddef.h>

#include "offline/inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct inspect_result res = { 0 };

	inspect_buffer(data, size, &res);
	return 0;
}
