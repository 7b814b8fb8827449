// SPDX-License-Identifier: GPL-2.0-only
#include <string.h>
#include <time.h>

#include "base/clock.h"

static uint64_t now(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t sbt_now_boottime(void)
{
	return now(CLOCK_BOOTTIME);
}

long long sbt_now_mono_ms(void)
{
	return (long long)(now(CLOCK_MONOTONIC) / 1000000);
}

void sbt_clock_snapshot(struct sbt_meta_clock *c)
{
	uint64_t best = UINT64_MAX;

	memset(c, 0, sizeof(*c));
	/* Read BOOTTIME and REALTIME between two MONOTONIC reads; keep the
	 * narrowest of several tries, so a preemption does not skew it. */
	for (int i = 0; i < 16; i++) {
		uint64_t m0 = now(CLOCK_MONOTONIC), b = now(CLOCK_BOOTTIME);
		uint64_t r = now(CLOCK_REALTIME), m1 = now(CLOCK_MONOTONIC);

		if (m1 - m0 < best) {
			best = m1 - m0;
			c->boottime = b;
			c->realtime = r;
			c->monotonic = m0 + (m1 - m0) / 2;
		}
	}
	c->spread_ns = best;
	c->h.type = SBT_META_CLOCK;
	c->h.size = sizeof(*c) - sizeof(c->h);
	c->h.ts = c->boottime;
}
