// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer target: any bytes as the head of a request to the daemon's
 * /metrics server, as its connection would hold them (NUL ended, at most
 * 8 KiB). Oracle: a request is refused with 400 or 405, or taken with a
 * path that starts with '/', has no query and lies inside the request. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *req;
	const char *url = NULL;
	bool head = false;
	int r;

	if (size > 8191)
		return 0;
	req = malloc(size + 1);
	if (!req)
		return 0;
	memcpy(req, data, size);
	req[size] = 0;
	r = http_parse_request(req, &url, &head);
	if (r && r != 400 && r != 405)
		abort();
	if (!r && (!url || url < req || url >= req + size || url[0] != '/' || strchr(url, '?') ||
		   strchr(url, ' ')))
		abort();
	free(req);
	return 0;
}
