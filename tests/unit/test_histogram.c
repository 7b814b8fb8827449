// SPDX-License-Identifier: GPL-2.0-only
/* The latency histogram's quantiles and buckets, and Mann-Whitney's test of
 * two of them (diff's judge of noise) against values worked by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/histogram.h"

static struct histogram *of(const uint64_t *v, int n)
{
	struct histogram *h = calloc(1, sizeof(*h));

	for (int i = 0; i < n; i++)
		hist_add(h, v[i]);
	return h;
}

static void buckets_hold_their_values(void **state)
{
	(void)state;
	for (int b = 1; b < HIST_BUCKETS; b++)
		assert_true(hist_bucket_low(b) > hist_bucket_low(b - 1));
	/* exact below 64, then 32 buckets a power of two */
	assert_int_equal(hist_bucket_low(63), 63);
	assert_int_equal(hist_bucket_low(64), 64);
	assert_int_equal(hist_bucket_low(64 + 32), 128);
}

static void mann_whitney_by_hand(void **state)
{
	/* values below 64 land in buckets of their own: no ties but real ones.
	 * a = {1,2,3}, b = {4,5,6}: every b above every a, U_b = 9, mean 4.5,
	 * var = 9 * 7 / 12 = 5.25, z = 4.5 / sqrt(5.25) */
	static const uint64_t a[] = { 1, 2, 3 }, b[] = { 4, 5, 6 }, c[] = { 1, 2, 3 };
	struct histogram *ha = of(a, 3), *hb = of(b, 3), *hc = of(c, 3), empty = { 0 };

	(void)state;
	assert_true(fabs(hist_mann_whitney_z(ha, hb) - 4.5 / sqrt(5.25)) < 1e-9);
	assert_true(fabs(hist_mann_whitney_z(hb, ha) + 4.5 / sqrt(5.25)) < 1e-9);
	assert_true(fabs(hist_mann_whitney_z(ha, hc)) < 1e-12); /* the same: 0 */
	assert_true(hist_mann_whitney_z(ha, &empty) == 0 && hist_mann_whitney_z(&empty, ha) == 0);
	free(ha);
	free(hb);
	free(hc);
}

static void mann_whitney_large_shift(void **state)
{
	/* 1,000 calls about 10 us against 1,000 about 11 us: far beyond
	 * p < 0.001 (|z| > 3.29); the same spread with no shift: near 0 */
	struct histogram *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b)), *c = calloc(1, sizeof(*c));

	(void)state;
	srand(7);
	for (int i = 0; i < 1000; i++) {
		uint64_t jitter = (uint64_t)(rand() % 2000);

		hist_add(a, 9000 + jitter);
		hist_add(b, 10000 + jitter + 100);
		hist_add(c, 9000 + (uint64_t)(rand() % 2000));
	}
	assert_true(hist_mann_whitney_z(a, b) > 10);
	assert_true(fabs(hist_mann_whitney_z(a, c)) < 3.29);
	free(a);
	free(b);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(buckets_hold_their_values),
					    cmocka_unit_test(mann_whitney_by_hand),
					    cmocka_unit_test(mann_whitney_large_shift) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
