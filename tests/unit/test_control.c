// SPDX-License-Identifier: GPL-2.0-only
/* The daemon's control protocol: each request line parsed, or refused with
 * one error line and a hint; a path with spaces survives whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/control.h"

static struct control_request r;
static char err[256];

static int parse(const char *line)
{
	err[0] = 0;
	return control_parse_request(line, &r, err, sizeof(err));
}

static void requests(void **state)
{
	(void)state;
	assert_int_equal(parse("status"), 0);
	assert_int_equal(r.verb, CONTROL_STATUS);
	assert_int_equal(parse("record 2.500 /tmp/w.pftrace"), 0);
	assert_int_equal(r.verb, CONTROL_RECORD);
	assert_true(r.seconds == 2.5);
	assert_string_equal(r.path, "/tmp/w.pftrace");
	assert_int_equal(parse("record 1 -"), 0);
	assert_string_equal(r.path, ""); /* the spool */
	assert_int_equal(parse("snapshot 1000 2000 /x/a b.json"), 0);
	assert_int_equal(r.verb, CONTROL_SNAPSHOT);
	assert_int_equal(r.from, 1000);
	assert_int_equal(r.to, 2000);
	assert_string_equal(r.path, "/x/a b.json"); /* the whole rest of the line */
	assert_int_equal(parse("snapshot 1764710000000000000 1764710060000000000 -"), 0);
	assert_int_equal(parse("cost 5.000"), 0);
	assert_int_equal(r.verb, CONTROL_COST);
	assert_true(r.seconds == 5);
}

static void refusals(void **state)
{
	static const struct {
		const char *line, *answer;
	} bad[] = {
		{ "frobnicate", "error: unknown request; hint:" },
		{ "", "error: unknown request; hint:" },
		{ "status now", "error: unknown request; hint:" },
		{ "record 100000 -", "error: a window is 0.1 to 3600 s; hint:" },
		{ "record 0 -", "error: a window is 0.1 to 3600 s; hint:" },
		{ "record -1 -", "error: unknown request; hint:" },
		{ "record 1 relative/path", "error: unknown request; hint:" },
		{ "record 1 /a\tb", "error: unknown request; hint:" },
		{ "record 1", "error: unknown request; hint:" },
		{ "record 1x /a", "error: unknown request; hint:" },
		{ "snapshot 5 1 -", "error: unknown request; hint:" },
		{ "snapshot 1 90000000000000 -", "error: a snapshot is at most 24 h; hint:" },
		{ "snapshot 1 2", "error: unknown request; hint:" },
		{ "snapshot 99999999999999999999999 1 -", "error: unknown request; hint:" },
		{ "snapshot 1 2 /a\x7f", "error: unknown request; hint:" },
		{ "cost 61", "error: a cost measure is 0.1 to 60 s; hint:" },
		{ "cost 0", "error: a cost measure is 0.1 to 60 s; hint:" },
		{ "cost", "error: unknown request; hint:" },
		{ "cost 5 /x", "error: unknown request; hint:" },
		{ "cost -1", "error: unknown request; hint:" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i].line), -1);
		assert_true(!strncmp(err, bad[i].answer, strlen(bad[i].answer)));
		assert_true(err[strlen(err) - 1] == '\n');
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(requests),
		cmocka_unit_test(refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
