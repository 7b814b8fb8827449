/* SPDX-License-Identifier: GPL-2.0-only */
/* Clocks: BPF stamps records with CLOCK_BOOTTIME; captures carry snapshots
 * of BOOTTIME, MONOTONIC and REALTIME read close together, so traces from
 * other tools (Perfetto, kineto) can be aligned. */
#ifndef SBT_CLOCK_H
#define SBT_CLOCK_H

#include <stdint.h>

#include "events.h"

uint64_t sbt_now_boottime(void);
/* CLOCK_MONOTONIC in ms: for deadlines of sockets and children. */
long long sbt_now_mono_ms(void);
/* Fill the clock fields of a snapshot record (header included). */
void sbt_clock_snapshot(struct sbt_meta_clock *c);

#endif
