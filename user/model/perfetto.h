/* SPDX-License-Identifier: GPL-2.0-only */
/* The model as a Perfetto protobuf trace, written as a stream: each packet
 * is written whole, so a file cut at a packet boundary is a valid trace. */
#ifndef SBT_PERFETTO_H
#define SBT_PERFETTO_H

#include <stdint.h>
#include <stdio.h>

#include "model/model.h"

struct perfetto_writer;

/* NULL with err filled when the file cannot be created. */
struct perfetto_writer *perfetto_open(const char *path, char *err, size_t errlen);
/* The same on a stream the writer takes over (closed even on error). */
struct perfetto_writer *perfetto_open_file(FILE *f, char *err, size_t errlen);
struct model_sink perfetto_sink(struct perfetto_writer *w);
/* Write out what is buffered (whole packets only). 0 or -errno. */
int perfetto_flush(struct perfetto_writer *w);
uint64_t perfetto_bytes(const struct perfetto_writer *w);
/* Flush and close. 0 or -errno (the first error seen). */
int perfetto_close(struct perfetto_writer *w);

#endif
