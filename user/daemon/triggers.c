// SPDX-License-Identifier: GPL-2.0-only
#include "daemon/triggers.h"

static const char *const names[TRIG_N] = { "errors", "slow_ioctl", "lost" };

const char *trigger_name(enum trigger k)
{
	return k < TRIG_N ? names[k] : "none";
}

static bool enabled(const struct trigger_cfg *c, enum trigger k)
{
	return k == TRIG_ERRORS ? c->errors > 0 : k == TRIG_SLOW ? c->slow_ns > 0 : c->lost;
}

enum trigger triggers_check(struct triggers *t, const uint64_t totals[TRIG_N], uint64_t now)
{
	enum trigger fire = TRIG_N;

	if (!t->primed) {
		for (int k = 0; k < TRIG_N; k++)
			t->seen[k] = totals[k];
		t->primed = true;
		return TRIG_N;
	}
	for (int k = 0; k < TRIG_N; k++) {
		uint64_t grew = totals[k] >= t->seen[k] ? totals[k] - t->seen[k] : 0;
		bool over = k == TRIG_ERRORS ? grew >= t->cfg.errors : grew > 0;

		if (fire != TRIG_N && over && enabled(&t->cfg, (enum trigger)k))
			continue; /* its turn at the next check */
		t->seen[k] = totals[k];
		if (!enabled(&t->cfg, (enum trigger)k) || !over)
			continue;
		if (t->last[k] && now - t->last[k] < t->cfg.interval_ns) {
			t->held[k]++;
			continue;
		}
		t->last[k] = now;
		t->fired[k]++;
		fire = (enum trigger)k;
	}
	return fire;
}
