/* SPDX-License-Identifier: GPL-2.0-only */
/* The text summary of a trace, in the spirit of `perf report --stdio`:
 * printed at the end of every run and by `spyre-bpftrace report FILE`. */
#ifndef SBT_REPORT_H
#define SBT_REPORT_H

#include <stdio.h>

#include "model/correlate.h"
#include "model/model.h"

struct report;
struct histogram;

struct report *report_new(void);
struct model_sink report_sink(struct report *r);
void report_print(FILE *out, const struct report *r, const struct correlate_stats *st);
/* The same as data (report_data.c): 0, or an error. */
int report_print_json(FILE *out, const struct report *r, const struct correlate_stats *st);
int report_print_csv(FILE *out, const struct report *r, const struct correlate_stats *st);
void report_free(struct report *r);

/* What the report holds, for the structured forms (report_data.c): each
 * call returns false past the last item. */
struct report_engine {
	const char *device, *engine;
	uint64_t jobs, bytes, busy_ns;
};
struct report_device {
	const char *name;
	uint64_t interrupts, by_interrupt, by_wait;
};
/* runtime functions (driver false) or vfio's (true), the most time first */
bool report_function(const struct report *r, bool driver, int i, const char **name, const struct histogram **h);
bool report_engine(const struct report *r, int i, struct report_engine *e);
bool report_device(const struct report *r, int i, struct report_device *d);
bool report_ioctl_error(const struct report *r, int i, const char **cmd_errno, uint64_t *count);

#endif
