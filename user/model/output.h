/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Where records go: a raw capture (.sbt), or through the correlation engine
 * to a Perfetto or Chrome JSON trace; always to the report. `record` feeds
 * it live from the ring buffer, `convert` and `report` from a capture, the
 * same way.
 */
#ifndef SBT_OUTPUT_H
#define SBT_OUTPUT_H

#include <errno.h>
#include <stdio.h>

#include "base/outfile.h"
#include "capture/capture.h"
#include "model/chrome_json.h"
#include "model/correlate.h"
#include "model/perfetto.h"
#include "model/report.h"

enum out_format { FMT_NONE = 0, FMT_SBT, FMT_PERFETTO, FMT_JSON };

/* From --format (when given) or the file's extension. 0, or -1 with err. */
int output_format(const char *path, const char *format, enum out_format *fmt, char *err, size_t errlen);
const char *output_format_name(enum out_format fmt);

struct output {
	enum out_format fmt;
	const char *path;
	struct capture_writer cap; /* a capture's: it takes the records as they come */
	struct capture_writer *raw; /* &cap for a capture, else NULL */
	struct model_sink file; /* the file's writer (file.close NULL: none open) */
	struct report *rep;
	struct correlator *corr;
	struct outfile file_name; /* written under a temporary name until output_commit */
	int error; /* first write error (errno) */
	uint64_t bytes; /* on disk, once closed */
};

/* path NULL: no file, the report only. with_report: also build the report
 * (record and report print it; convert does not). The file is written
 * under a temporary name (outfile.h) until output_commit. 0, or -errno
 * with err. */
int output_open(struct output *o, const char *path, enum out_format fmt, bool with_report, char *err, size_t errlen);
/* The run is worth keeping: the file takes its name (replacing what was
 * there). Before it, output_free leaves an existing file untouched. 0 or
 * -errno. */
int output_commit(struct output *o);
/* One record: inline, the converter hands over millions. */
static inline void output_add(struct output *o, const struct sbt_hdr *h)
{
	if (o->raw && capture_write(o->raw, h) && !o->error)
		o->error = o->raw->error;
	if (correlator_add(o->corr, h) && !o->error)
		o->error = ENOMEM;
}
/* output_add as capture_each's callback (ctx: the output), for the
 * commands that read a capture through it; inline, so that the reader's
 * loop takes it in (14 instructions a record fewer). */
static inline int output_feed(void *ctx, const struct sbt_hdr *h)
{
	output_add(ctx, h);
	return 0;
}
void output_flush(struct output *o);
uint64_t output_bytes(const struct output *o);
/* Ends the model (unfinished work shown), closes files. 0 or -errno. */
int output_close(struct output *o);
enum report_format { REPORT_TEXT, REPORT_JSON, REPORT_CSV };
/* The report of what went through, in that form; 0 or an error. */
int output_report(const struct output *o, FILE *out, enum report_format f);
void output_free(struct output *o);

#endif
