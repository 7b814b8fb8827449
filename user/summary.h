/* SPDX-License-Identifier: GPL-2.0-only */
/* Counts of what a capture holds, printed at the end of a run. */
#ifndef SBT_SUMMARY_H
#define SBT_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "events.h"
#include "meta.h"

#define SUMMARY_MAX_PROBES 256
#define SUMMARY_MAX_IOCTLS 64
#define SUMMARY_MAX_IRQS 64

struct summary {
	uint64_t by_type[SBT_TYPE_MAX];
	struct {
		uint64_t calls, returns, unpaired, total_ns;
	} probes[SUMMARY_MAX_PROBES];
	struct {
		uint32_t cmd;
		uint16_t fd_kind;
		uint64_t calls, errors, total_ns;
		int last_errno;
	} ioctls[SUMMARY_MAX_IOCTLS];
	int nioctls;
	struct {
		int irq;
		uint64_t count;
	} irqs[SUMMARY_MAX_IRQS];
	int nirqs;
	uint64_t lost, iommu_mapped_bytes, first_ts, last_ts;
};

void summary_add(struct summary *s, const struct sbt_hdr *h);
void summary_print(FILE *out, const struct summary *s, const struct capture_meta *m);

#endif
