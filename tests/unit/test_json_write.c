// SPDX-License-Identifier: GPL-2.0-only
/* The JSON writer: commas and colons placed by the structured calls, the
 * manifests' readable layout, escaping, numbers at their limits, memory
 * capped, and what it writes read back by the project's own reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "base/json.h"
#include "base/json_write.h"

static void compact_nesting(void **state)
{
	struct json_writer w;

	(void)state;
	assert_int_equal(jw_open(&w, NULL, 4096, false), 0);
	jw_object(&w);
	jw_key_uint(&w, "a", 0);
	jw_key(&w, "b");
	jw_array(&w);
	jw_int(&w, INT64_MIN);
	jw_uint(&w, UINT64_MAX);
	jw_object(&w);
	jw_end(&w);
	jw_array(&w);
	jw_end(&w);
	jw_bool(&w, true);
	jw_end(&w);
	jw_key_string(&w, "c", NULL);
	jw_key(&w, "d");
	jw_double(&w, 1.0 / 0.0);
	jw_key(&w, "e");
	jw_double(&w, 0.25);
	jw_end(&w);
	assert_string_equal(jw_text(&w), "{\"a\":0,\"b\":[-9223372036854775808,18446744073709551615,{},[],true],"
					 "\"c\":\"\",\"d\":null,\"e\":0.25}");
	jw_free(&w);
}

static void readable_layout(void **state)
{
	struct json_writer w, inner;

	(void)state;
	assert_int_equal(jw_open(&inner, NULL, 4096, true), 0);
	jw_array(&inner);
	jw_object(&inner);
	jw_key_uint(&inner, "x", 1);
	jw_key_bool(&inner, "y", false);
	jw_end(&inner);
	jw_uint(&inner, 2);
	jw_end(&inner);
	assert_string_equal(jw_text(&inner), "[{\"x\": 1, \"y\": false}, 2]");

	assert_int_equal(jw_open(&w, NULL, 4096, true), 0);
	jw_object(&w);
	jw_key_string(&w, "k", "v");
	jw_key(&w, "list");
	jw_raw(&w, jw_text(&inner), strlen(jw_text(&inner)));
	jw_key(&w, "o");
	jw_object(&w);
	jw_key_uint(&w, "n", 3);
	jw_key_uint(&w, "m", 4);
	jw_end(&w);
	jw_end(&w);
	assert_string_equal(
		jw_text(&w),
		"{\n  \"k\": \"v\",\n  \"list\": [{\"x\": 1, \"y\": false}, 2],\n  \"o\": {\"n\": 3, \"m\": 4}\n}");
	jw_free(&w);
	jw_free(&inner);
}

static void escaping(void **state)
{
	/* quote, backslash, a control byte, a cut UTF-8 sequence, a whole one */
	const char *s = "a\"b\\c\x01"
			"d\xc3"
			"e\xc3\xa9";
	struct json_writer w;
	struct json_doc d;

	(void)state;
	assert_int_equal(jw_open(&w, NULL, 4096, false), 0);
	jw_object(&w);
	jw_key_string(&w, "s\n", s);
	jw_end(&w);
	assert_string_equal(jw_text(&w), "{\"s\\u000a\":\"a\\\"b\\\\c\\u0001d\\ufffde\xc3\xa9\"}");
	assert_int_equal(json_parse(&d, jw_text(&w), strlen(jw_text(&w))), 0);
	assert_string_equal(json_get(&d.root, "s\n")->s, "a\"b\\c\x01"
							 "d\xef\xbf\xbd"
							 "e\xc3\xa9");
	json_free(&d);
	jw_free(&w);
}

static void long_string_and_memory_cap(void **state)
{
	size_t n = 100000;
	char *big = malloc(n + 1);
	struct json_writer w;

	(void)state;
	memset(big, 'q', n);
	big[n] = '\0';
	assert_int_equal(jw_open(&w, NULL, 2 * n, false), 0);
	jw_string(&w, big); /* far past the first buffer: grown */
	assert_non_null(jw_text(&w));
	assert_int_equal(strlen(jw_text(&w)), n + 2);
	jw_string(&w, big); /* past the cap: refused, not grown */
	assert_int_equal(w.error, EFBIG);
	assert_null(jw_text(&w));
	jw_free(&w);
	free(big);
}

static void to_a_file(void **state)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	struct json_writer w;

	(void)state;
	assert_non_null(f);
	assert_int_equal(jw_open(&w, f, 0, false), 0);
	jw_array(&w);
	for (int i = 0; i < 200000; i++) /* several megabytes: written out as it goes */
		jw_uint(&w, (uint64_t)i * 1000003);
	jw_end(&w);
	assert_int_equal(jw_flush(&w), 0);
	assert_int_equal(jw_bytes(&w), size);
	assert_null(jw_text(&w)); /* not a memory writer */
	jw_free(&w);
	fclose(f);
	{
		struct json_doc d;
		int64_t v;

		assert_int_equal(json_parse(&d, text, size), 0);
		assert_int_equal(d.root.n, 200000);
		assert_true(json_int(&d.root.items[199999], &v));
		assert_int_equal(v, 199999ll * 1000003);
		json_free(&d);
	}
	free(text);
}

static void misuse_is_an_error(void **state)
{
	struct json_writer w;

	(void)state;
	assert_int_equal(jw_open(&w, NULL, 4096, false), 0);
	jw_end(&w); /* nothing open */
	assert_int_equal(w.error, EINVAL);
	jw_free(&w);
	assert_int_equal(jw_open(&w, NULL, 4096, false), 0);
	for (int i = 0; i <= JW_DEPTH; i++)
		jw_array(&w);
	assert_int_equal(w.error, EINVAL);
	jw_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(compact_nesting), cmocka_unit_test(readable_layout),
		cmocka_unit_test(escaping),	   cmocka_unit_test(long_string_and_memory_cap),
		cmocka_unit_test(to_a_file),	   cmocka_unit_test(misuse_is_an_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
