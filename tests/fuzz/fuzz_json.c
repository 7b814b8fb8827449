// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer target: any bytes as a Chrome JSON trace for `merge`: the JSON
 * reader, whole and as a stream, the trace's classification and every
 * event decoded, twice. Oracle: a number read as an integer agrees with
 * strtoll on its text; what the stream reads is JSON read whole; the
 * second read gives as many events as the first. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offline/chrome_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const struct json_value *v, int depth)
{
	int64_t i, d;

	switch (v->type) {
	case JSON_NUMBER:
		if (json_int(v, &i)) {
			char text[32];

			if (v->rawlen < sizeof(text)) {
				memcpy(text, v->raw, v->rawlen);
				text[v->rawlen] = 0;
				if (strtoll(text, NULL, 10) != i)
					abort();
			}
		}
		json_decimal(v, 3, &d);
		break;
	case JSON_ARRAY:
		for (uint32_t k = 0; k < v->n; k++)
			walk(&v->items[k], depth + 1);
		break;
	case JSON_OBJECT:
		for (uint32_t k = 0; k < v->n; k++) {
			if (json_get(v, v->members[k].key) == NULL)
				abort(); /* every member found by its key */
			walk(&v->members[k].v, depth + 1);
		}
		break;
	default:
		break;
	}
}

static void count_event(void *ctx, const struct chrome_event *e)
{
	(void)e;
	++*(uint32_t *)ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct chrome_trace t;
	struct json_doc doc;
	char err[512];
	char *text = malloc(size ? size : 1);
	uint32_t n = 0;
	bool whole;

	if (!text)
		return 0;
	memcpy(text, data, size);
	whole = !json_parse(&doc, text, size);
	if (whole)
		walk(&doc.root, 0);
	json_free(&doc);
	/* read as a stream, an event at a time: it takes its own copy */
	if (!chrome_parse(&t, text, size, "fuzz", count_event, &n, err, sizeof(err))) {
		uint32_t again = 0;

		/* what the stream took is JSON read whole, and a second read
		 * sees what the first saw */
		if (!whole || chrome_each(&t, count_event, &again, err, sizeof(err)) || again != n)
			abort();
		chrome_close(&t);
	}
	return 0;
}
