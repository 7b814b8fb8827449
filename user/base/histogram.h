/* SPDX-License-Identifier: GPL-2.0-only */
/* Latency histogram in bounded memory: exact below 64 ns, then 32 buckets
 * per power of two (quantiles within about 3%). */
#ifndef SBT_HISTOGRAM_H
#define SBT_HISTOGRAM_H

#include <stdint.h>

#define HIST_SUB 32
#define HIST_BUCKETS (64 + 58 * HIST_SUB)

struct histogram {
	uint64_t count, sum, max, min;
	uint32_t buckets[HIST_BUCKETS];
};

void hist_add(struct histogram *h, uint64_t v);
/* n values counted in the bucket of value low (a histogram read back from
 * its buckets; the caller sets sum, min and max). */
void hist_add_bucket(struct histogram *h, uint64_t low, uint32_t n);
/* The lowest value bucket b holds. */
uint64_t hist_bucket_low(int b);
/* The value at quantile q (0..1): the middle of its bucket, within [min, max]. */
uint64_t hist_quantile(const struct histogram *h, double q);

/* Mann-Whitney's U test of b against a from their buckets (values in one
 * bucket count as ties): the z score of b's calls being longer (> 0) or
 * shorter (< 0) than a's; 0 when either is empty. The normal
 * approximation with the tie correction. */
double hist_mann_whitney_z(const struct histogram *a, const struct histogram *b);

#endif
