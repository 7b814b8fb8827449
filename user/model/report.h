/* SPDX-License-Identifier: GPL-2.0-only */
/* The text summary of a trace, in the spirit of `perf report --stdio`:
 * printed at the end of every run and by `spyre-bpftrace report FILE`. */
#ifndef SBT_REPORT_H
#define SBT_REPORT_H

#include <stdio.h>

#include "model/correlate.h"
#include "model/model.h"

struct report;

struct report *report_new(void);
struct model_sink report_sink(struct report *r);
void report_print(FILE *out, const struct report *r, const struct correlate_stats *st);
void report_free(struct report *r);

#endif
