/* SPDX-License-Identifier: GPL-2.0-only */
/* The model as Chrome JSON (chrome://tracing, Perfetto, TensorBoard,
 * aiu-trace-analyzer), with the in-process Spyre profiler's names. */
#ifndef SBT_CHROME_JSON_H
#define SBT_CHROME_JSON_H

#include <stdint.h>

#include "model/model.h"

/* The pids of the pseudo-processes: a card's (its rank added) and the
 * tracer's own track; merge reads them back from our JSON. */
#define CHROME_DEVICE_PID_BASE 1000000000u
#define CHROME_TRACER_PID (CHROME_DEVICE_PID_BASE - 1)

struct chrome_writer;

struct chrome_writer *chrome_writer_open(const char *path, char *err, size_t errlen);
/* The same on a stream the writer takes over (closed even on error). */
struct chrome_writer *chrome_writer_open_file(FILE *f, char *err, size_t errlen);
struct model_sink chrome_writer_sink(struct chrome_writer *w);
int chrome_writer_flush(struct chrome_writer *w);
uint64_t chrome_writer_bytes(const struct chrome_writer *w);
/* Ends the JSON document, closes. 0 or -errno. */
int chrome_writer_close(struct chrome_writer *w);

#endif
