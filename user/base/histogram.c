// SPDX-License-Identifier: GPL-2.0-only
#include <math.h>

#include "base/histogram.h"

static int bucket_of(uint64_t v)
{
	int exp;

	if (v < 64)
		return (int)v;
	exp = 63 - __builtin_clzll(v); /* 6 .. 63 */
	return 64 + (exp - 6) * HIST_SUB + (int)((v >> (exp - 5)) & (HIST_SUB - 1));
}

uint64_t hist_bucket_low(int b)
{
	int exp;

	if (b < 64)
		return (uint64_t)b;
	exp = (b - 64) / HIST_SUB + 6;
	return (1ull << exp) + ((uint64_t)((b - 64) % HIST_SUB) << (exp - 5));
}

void hist_add(struct histogram *h, uint64_t v)
{
	int b = bucket_of(v);

	if (!h->count || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->count++;
	h->sum += v;
	if (b < HIST_BUCKETS)
		h->buckets[b]++;
}

void hist_add_bucket(struct histogram *h, uint64_t low, uint32_t n)
{
	int b = bucket_of(low);

	if (b < HIST_BUCKETS) {
		h->buckets[b] += n;
		h->count += n;
	}
}

uint64_t hist_quantile(const struct histogram *h, double q)
{
	uint64_t rank, seen = 0;

	if (!h->count)
		return 0;
	rank = (uint64_t)(q * (double)(h->count - 1)) + 1;
	for (int b = 0; b < HIST_BUCKETS; b++) {
		seen += h->buckets[b];
		if (seen >= rank) {
			uint64_t lo = hist_bucket_low(b), hi = b + 1 < HIST_BUCKETS ? hist_bucket_low(b + 1) : lo;
			uint64_t mid = lo + (hi - lo) / 2;

			return mid < h->min ? h->min : mid > h->max ? h->max : mid;
		}
	}
	return h->max;
}

double hist_mann_whitney_z(const struct histogram *a, const struct histogram *b)
{
	double n1 = (double)a->count, n2 = (double)b->count, n = n1 + n2, u = 0, below = 0, ties = 0, mean, var;

	if (!a->count || !b->count)
		return 0;
	/* U of b: for each of b's values, a's values below it, ties a half */
	for (int k = 0; k < HIST_BUCKETS; k++) {
		double x = a->buckets[k], y = b->buckets[k], t = x + y;

		u += y * (below + x / 2);
		below += x;
		ties += t * t * t - t;
	}
	mean = n1 * n2 / 2;
	var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)));
	return var > 0 ? (u - mean) / sqrt(var) : 0;
}
