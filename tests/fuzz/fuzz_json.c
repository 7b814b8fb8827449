// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer target: any bytes as a Chrome JSON trace for `merge`: the JSON
 * reader, the trace's classification and every event decoded. Oracle: a
 * number read as an integer agrees with strtoll on its text. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct chrome_trace t;
	struct chrome_event e;
	struct json_doc doc;
	char err[512];
	char *text = malloc(size ? size : 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	if (!json_parse(&doc, text, size))
		walk(&doc.root, 0);
	json_free(&doc);
	if (!chrome_parse(&t, text, size, "fuzz", err, sizeof(err))) {
		for (uint32_t i = 0; i < chrome_count(&t); i++)
			chrome_event(&t, i, &e);
		chrome_close(&t);
	}
	return 0;
}
