// SPDX-License-Identifier: GPL-2.0-only
/* The daemon's flight recorder: what it keeps, what it drops (by age, by
 * room), and which records a window gives back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "recorder.h"

#define SEC 1000000000ull

static void add(struct flight_recorder *r, uint64_t ts, uint16_t payload)
{
	uint8_t buf[sizeof(struct sbt_hdr) + 4096] = { 0 };
	struct sbt_hdr *h = (void *)buf;

	h->type = SBT_IOCTL;
	h->size = payload;
	h->ts = ts;
	recorder_add(r, h, ts);
}

static uint64_t seen_first, seen_last, seen_n;

static void count(void *ctx, const struct sbt_hdr *h)
{
	(void)ctx;
	if (!seen_n || h->ts < seen_first)
		seen_first = h->ts;
	if (h->ts > seen_last)
		seen_last = h->ts;
	seen_n++;
}

static uint64_t window(struct flight_recorder *r, uint64_t from, uint64_t to)
{
	uint64_t oldest, n;

	seen_first = seen_last = seen_n = 0;
	n = recorder_each(r, from, to, count, NULL, &oldest);
	assert_int_equal(n, seen_n);
	return n;
}

static void keeps_and_windows(void **state)
{
	struct flight_recorder r;

	(void)state;
	assert_int_equal(recorder_init(&r, 4, 60), 0);
	for (uint64_t i = 0; i < 1000; i++)
		add(&r, 100 * SEC + i * SEC / 100, 56); /* 10 s of records */
	assert_int_equal(window(&r, 0, UINT64_MAX), 1000);
	assert_int_equal(window(&r, 105 * SEC, 106 * SEC), 101); /* both ends in */
	assert_int_equal(seen_first, 105 * SEC);
	assert_int_equal(seen_last, 106 * SEC);
	assert_int_equal(window(&r, 0, 99 * SEC), 0);
	assert_int_equal(r.dropped_records, 0);
	recorder_free(&r);
}

static void drops_by_age(void **state)
{
	struct flight_recorder r;

	(void)state;
	assert_int_equal(recorder_init(&r, 4, 10), 0);
	/* a segment's worth, then another much later: the first ages out whole */
	for (int i = 0; i < 20000; i++)
		add(&r, 10 * SEC + (uint64_t)i, 56);
	add(&r, 100 * SEC, 56);
	assert_int_equal(window(&r, 0, 50 * SEC), 0);
	assert_int_equal(window(&r, 0, UINT64_MAX), 1);
	assert_int_equal(r.dropped_records, 20000); /* both segments: all of it older than T */
	recorder_free(&r);
}

static void drops_by_room(void **state)
{
	struct flight_recorder r;
	uint64_t n;

	(void)state;
	assert_int_equal(recorder_init(&r, 2, 3600), 0); /* two segments */
	for (uint64_t i = 0; i < 100000; i++)
		add(&r, SEC + i, 1016); /* 1 KiB records: 1023 a segment */
	n = window(&r, 0, UINT64_MAX);
	assert_true(n > 1000 && n <= 2 * 1023);
	assert_int_equal(seen_last, SEC + 99999); /* the newest always kept */
	assert_int_equal(n + r.dropped_records, 100000);
	assert_true(recorder_bytes(&r) <= 2u << 20);
	recorder_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keeps_and_windows),
		cmocka_unit_test(drops_by_age),
		cmocka_unit_test(drops_by_room),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
