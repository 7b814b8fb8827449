// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer target: any bytes as the kubelet's ListPodResourcesResponse
 * (the daemon's spyre_device_allocation_info). Oracle: every string it
 * keeps is a printable label value, and there are no more allocations
 * than device ids can fit in the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/kubelet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void printable(const char *s, size_t size)
{
	size_t n = strnlen(s, size);

	if (n == size)
		abort();
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] == 0x7f || s[i] == '"' || s[i] == '\\')
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct allocations a = { 0 };

	kubelet_parse(data, size, "*", &a);
	if (a.n > size / 2 + 1)
		abort();
	for (size_t i = 0; i < a.n; i++) {
		printable(a.v[i].device, sizeof(a.v[i].device));
		printable(a.v[i].resource, sizeof(a.v[i].resource));
		printable(a.v[i].pod, sizeof(a.v[i].pod));
		printable(a.v[i].namespace, sizeof(a.v[i].namespace));
		printable(a.v[i].container, sizeof(a.v[i].container));
	}
	kubelet_free(&a);
	return 0;
}
