// SPDX-License-Identifier: GPL-2.0-only
/* Every string written is valid UTF-8: the checker, the replacement, and a
 * thread named with invalid bytes through both writers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/utf8.h"

static void char_lengths(void **state)
{
	(void)state;
	assert_int_equal(utf8_char_len("a"), 1);
	assert_int_equal(utf8_char_len("\xc3\xa9"), 2); /* é */
	assert_int_equal(utf8_char_len("\xe2\x82\xac"), 3); /* € */
	assert_int_equal(utf8_char_len("\xf0\x9f\x98\x80"), 4);
	assert_int_equal(utf8_char_len("\xc3"), 0); /* cut: the NUL ends it */
	assert_int_equal(utf8_char_len("\xe2\x82"), 0);
	assert_int_equal(utf8_char_len("\xc0\xaf"), 0); /* overlong '/' */
	assert_int_equal(utf8_char_len("\xe0\x80\xaf"), 0); /* overlong */
	assert_int_equal(utf8_char_len("\xed\xa0\x80"), 0); /* surrogate */
	assert_int_equal(utf8_char_len("\xf4\x90\x80\x80"), 0); /* above U+10FFFF */
	assert_int_equal(utf8_char_len("\xff"), 0);
	assert_int_equal(utf8_char_len("\x80"), 0);
}

static void sanitize(void **state)
{
	char out[64];

	(void)state;
	assert_true(utf8_valid("plain"));
	assert_true(utf8_valid("caf\xc3\xa9"));
	assert_false(utf8_valid("bad\xff"));
	/* a name cut at 15 bytes inside a character */
	assert_false(utf8_valid("worker-\xe2\x82\xac\xe2\x82\xac\xe2\x82"));
	assert_int_equal(utf8_sanitize("a\xff"
				       "b",
				       out, sizeof(out)),
			 5);
	assert_string_equal(out, "a\xef\xbf\xbd"
				 "b");
	utf8_sanitize("x\xe2\x82", out, sizeof(out));
	assert_string_equal(out, "x\xef\xbf\xbd\xef\xbf\xbd");
	assert_true(utf8_valid(out));
	/* cut only between characters */
	assert_int_equal(utf8_sanitize("\xff\xff", out, 5), 3);
	assert_string_equal(out, "\xef\xbf\xbd");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(char_lengths),
		cmocka_unit_test(sanitize),
	};

	return cmocka_run_group_tests_name("utf8", tests, NULL, NULL);
}
