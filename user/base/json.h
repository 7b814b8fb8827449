/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A small JSON reader for the traces `merge` takes in (kineto's, and our
 * own Chrome JSON): a text to a tree in one arena. Numbers keep
 * their text, so a timestamp in microseconds with nanosecond decimals is
 * read exactly (json_decimal_ns), not through a double.
 */
#ifndef SBT_JSON_H
#define SBT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json_member;

struct json_value {
	enum json_type type;
	uint32_t n; /* string: bytes; array, object: elements */
	const char *raw; /* the value's text in the input (for numbers, arrays as text) */
	size_t rawlen;
	union {
		bool b;
		const char *s; /* decoded, NUL ended (may hold a NUL if the text had \u0000) */
		struct json_value *items;
		struct json_member *members;
	};
};

struct json_member {
	const char *key;
	struct json_value v;
};

struct json_doc {
	struct json_value root;
	void *arena; /* blocks, freed together */
	char error[160]; /* set when json_parse fails: what and where (line:column) */
};

/* Parses text[0..len) (which must outlive the document). 0, or -1 with
 * doc->error set; -ENOMEM-style failures say "out of memory". */
int json_parse(struct json_doc *doc, const char *text, size_t len);
/* The same on a document parsed before (or zeroed), whose memory it
 * reuses: the earlier document's values are gone. For reading many small
 * documents one after another. */
int json_parse_again(struct json_doc *doc, const char *text, size_t len);
void json_free(struct json_doc *doc);

/* The member named key of an object, or NULL. */
const struct json_value *json_get(const struct json_value *obj, const char *key);
/* A number's text as an integer. false if not a number or not integral in range. */
bool json_int(const struct json_value *v, int64_t *out);
/* A number of units with up to 9 decimals, times 10^scale, rounded to the
 * nearest (e.g. scale 3 turns microseconds "12.3456" into 12346 ns).
 * false if not a number or out of range. */
bool json_decimal(const struct json_value *v, int scale, int64_t *out);

#endif
