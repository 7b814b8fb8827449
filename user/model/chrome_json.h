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

struct json_writer;

struct json_writer *json_open(const char *path, char *err, size_t errlen);
/* The same on a stream the writer takes over (closed even on error). */
struct json_writer *json_open_file(FILE *f, char *err, size_t errlen);
struct model_sink json_sink(struct json_writer *w);
int json_flush(struct json_writer *w);
uint64_t json_bytes(const struct json_writer *w);
/* Ends the JSON document, closes. 0 or -errno. */
int json_close(struct json_writer *w);

#endif
