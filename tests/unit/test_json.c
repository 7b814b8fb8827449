// SPDX-License-Identifier: GPL-2.0-only
/* The JSON reader `merge` takes PyTorch traces with: times read exactly as
 * decimals, strings decoded, bad input refused with where. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/json.h"

static int64_t dec(const char *text, int scale)
{
	struct json_doc d;
	int64_t v = -42424242;

	assert_int_equal(json_parse(&d, text, strlen(text)), 0);
	if (!json_decimal(&d.root, scale, &v))
		v = -42424242;
	json_free(&d);
	return v;
}

static void decimals_exact(void **state)
{
	(void)state;
	/* kineto's ts: µs with ns decimals, larger than a double holds exactly */
	assert_int_equal(dec("5383847349833.467", 3), 5383847349833467ll);
	assert_int_equal(dec("7889238000000.001", 3), 7889238000000001ll);
	assert_int_equal(dec("12.3456", 3), 12346); /* rounded to the nearest */
	assert_int_equal(dec("12.3454", 3), 12345);
	assert_int_equal(dec("1e3", 3), 1000000);
	assert_int_equal(dec("1.5E-1", 3), 150);
	assert_int_equal(dec("-2.25", 3), -2250);
	assert_int_equal(dec("0", 3), 0);
	assert_int_equal(dec("42", 0), 42);
	assert_int_equal(dec("9223372036854775807", 0), INT64_MAX);
	assert_int_equal(dec("9223372036854775808", 0), -42424242); /* out of range */
	assert_int_equal(dec("1e40", 3), -42424242);
	assert_int_equal(dec("\"12\"", 3), -42424242); /* not a number */
}

static void integers(void **state)
{
	struct json_doc d;
	const char *text = "{\"a\": 17, \"b\": 1.5, \"c\": -3, \"d\": 2e2}";
	int64_t v;

	(void)state;
	assert_int_equal(json_parse(&d, text, strlen(text)), 0);
	assert_true(json_int(json_get(&d.root, "a"), &v));
	assert_int_equal(v, 17);
	assert_false(json_int(json_get(&d.root, "b"), &v));
	assert_true(json_int(json_get(&d.root, "c"), &v));
	assert_int_equal(v, -3);
	assert_false(json_int(json_get(&d.root, "d"), &v)); /* an exponent is not an integer's text */
	assert_null(json_get(&d.root, "e"));
	json_free(&d);
}

static void strings_decoded(void **state)
{
	struct json_doc d;
	const char *text = "[\"a\\\"b\\\\c\\n\", \"\\u00e9\\u20ac\\ud83d\\ude00\", \"\\ud800x\", \"aten::mm\"]";

	(void)state;
	assert_int_equal(json_parse(&d, text, strlen(text)), 0);
	assert_int_equal(d.root.type, JSON_ARRAY);
	assert_int_equal(d.root.n, 4);
	assert_string_equal(d.root.items[0].s, "a\"b\\c\n");
	assert_string_equal(d.root.items[1].s, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	assert_string_equal(d.root.items[2].s, "\xef\xbf\xbdx"); /* a lone surrogate: U+FFFD */
	assert_string_equal(d.root.items[3].s, "aten::mm");
	json_free(&d);
}

static void refuse(const char *text, const char *what)
{
	struct json_doc d;

	assert_int_equal(json_parse(&d, text, strlen(text)), -1);
	if (!strstr(d.error, what))
		fail_msg("'%s': error '%s' does not say '%s'", text, d.error, what);
	json_free(&d);
}

static void bad_input(void **state)
{
	char deep[2000];

	(void)state;
	refuse("{\"traceEvents\": [", "unexpected end");
	refuse("{\"a\" 1}", "expected ':'");
	refuse("[1,]", "bad number");
	refuse("[1 2]", "expected ',' or ']'");
	refuse("\"a\tb\"", "control character");
	refuse("[01]", "expected ',' or ']'");
	refuse("[tru]", "bad literal");
	refuse("{}\n{}", "text after the JSON value at line 2");
	memset(deep, '[', sizeof(deep) - 1);
	deep[sizeof(deep) - 1] = 0;
	refuse(deep, "nested too deeply");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decimals_exact),
		cmocka_unit_test(integers),
		cmocka_unit_test(strings_decoded),
		cmocka_unit_test(bad_input),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
