/* SPDX-License-Identifier: GPL-2.0-only */
/* One record as one line of text, in the manner of `perf script`. */
#ifndef SBT_FORMAT_H
#define SBT_FORMAT_H

#include <stddef.h>

#include "capture/meta.h"
#include "events.h"

/* Writes "comm tgid/tid [cpu] secs.nsecs: type key=value..." into buf
 * (always NUL-ended, cut to len). Returns the length it wanted. */
int sbt_format_record(const struct sbt_hdr *h, const struct capture_meta *m, char *buf, size_t len);

#endif
