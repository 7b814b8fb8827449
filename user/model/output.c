// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <string.h>

#include "model/output.h"

/* A capture as a file sink: its records come through output_add, not the
 * model, so it has no track or event callbacks. */
static int cap_flush(void *w)
{
	return capture_flush(w);
}

static uint64_t cap_bytes(const void *w)
{
	return ((const struct capture_writer *)w)->bytes;
}

static int cap_close(void *w)
{
	return capture_close(w);
}

static int open_capture(struct output *o, FILE *f, char *err, size_t errlen)
{
	int ret = capture_create_file(&o->cap, f);

	if (ret) {
		snprintf(err, errlen, "%s", strerror(-ret));
		return ret;
	}
	o->raw = &o->cap;
	o->file = (struct model_sink){ .ctx = &o->cap, .flush = cap_flush, .bytes = cap_bytes, .close = cap_close };
	return 0;
}

static int open_perfetto(struct output *o, FILE *f, char *err, size_t errlen)
{
	struct perfetto_writer *w = perfetto_open_file(f, err, errlen);

	if (!w)
		return -EIO;
	o->file = perfetto_sink(w);
	return 0;
}

static int open_json(struct output *o, FILE *f, char *err, size_t errlen)
{
	struct chrome_writer *w = chrome_writer_open_file(f, err, errlen);

	if (!w)
		return -EIO;
	o->file = chrome_writer_sink(w);
	return 0;
}

/* What each format is called, on the command line and in a file's name,
 * and how its writer opens. */
static const struct format {
	const char *names[2]; /* --format's words */
	const char *ext[2]; /* a file's endings */
	const char *shown; /* in the summary */
	int (*open)(struct output *o, FILE *f, char *err, size_t errlen);
} formats[] = {
	[FMT_SBT] = { { "sbt", "capture" }, { ".sbt" }, "capture", open_capture },
	[FMT_PERFETTO] = { { "perfetto", "pftrace" },
			   { ".pftrace", ".perfetto-trace" },
			   "Perfetto trace",
			   open_perfetto },
	[FMT_JSON] = { { "json", "chrome" }, { ".json" }, "Chrome JSON trace", open_json },
};
#define NFORMATS ((int)(sizeof(formats) / sizeof(formats[0])))

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/* The format whose word (by_name) or ending s has, or FMT_NONE. */
static enum out_format format_of(const char *s, bool by_name)
{
	for (int f = FMT_NONE + 1; f < NFORMATS; f++)
		for (int k = 0; k < 2; k++) {
			const char *w = by_name ? formats[f].names[k] : formats[f].ext[k];

			if (w && (by_name ? !strcmp(s, w) : ends_with(s, w)))
				return (enum out_format)f;
		}
	return FMT_NONE;
}

int output_format(const char *path, const char *format, enum out_format *fmt, char *err, size_t errlen)
{
	*fmt = format_of(format ? format : path, format != NULL);
	if (*fmt != FMT_NONE)
		return 0;
	if (format)
		snprintf(err, errlen, "unknown format '%s'; hint: perfetto, json or sbt", format);
	else
		snprintf(err, errlen,
			 "cannot tell the format of '%s'; hint: name it .pftrace, .json or .sbt, or give --format",
			 path);
	return -1;
}

const char *output_format_name(enum out_format fmt)
{
	return fmt > FMT_NONE && (int)fmt < NFORMATS ? formats[fmt].shown : "none";
}

int output_open(struct output *o, const char *path, enum out_format fmt, bool with_report, char *err, size_t errlen)
{
	struct model_sink sinks[2];
	int n = 0, ret;
	FILE *f = NULL;

	memset(o, 0, sizeof(*o));
	o->fmt = path ? fmt : FMT_NONE;
	o->path = path;
	if (path && !(f = outfile_create(&o->file_name, path, err, errlen)))
		return -EIO;
	if (with_report) {
		o->rep = report_new();
		if (!o->rep)
			goto oom;
		sinks[n++] = report_sink(o->rep);
	}
	if (o->fmt != FMT_NONE && (ret = formats[o->fmt].open(o, f, err, errlen)))
		return ret;
	if (o->file.event) /* a capture takes the records, not the model */
		sinks[n++] = o->file;
	o->corr = correlator_new(sinks, n);
	if (o->corr)
		return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

void output_flush(struct output *o)
{
	int ret = o->file.flush ? o->file.flush(o->file.ctx) : 0;

	if (ret && !o->error)
		o->error = -ret;
}

uint64_t output_bytes(const struct output *o)
{
	if (!o->file.close)
		return o->bytes; /* closed (or none) */
	return o->file.bytes(o->file.ctx);
}

int output_commit(struct output *o)
{
	int ret = o->file_name.path ? outfile_commit(&o->file_name) : 0;

	if (ret && !o->error)
		o->error = -ret;
	return ret;
}

int output_close(struct output *o)
{
	int ret = 0;

	correlator_finish(o->corr);
	if (o->file.close)
		ret = o->file.close(o->file.ctx);
	o->file = (struct model_sink){ 0 };
	o->raw = NULL;
	if (ret && !o->error)
		o->error = -ret;
	/* what reached the disk, not what was handed to it */
	o->bytes = o->file_name.path ? outfile_size(&o->file_name) : 0;
	return -o->error;
}

int output_report(const struct output *o, FILE *out, enum report_format f)
{
	if (!o->rep)
		return 0;
	if (f == REPORT_JSON)
		return report_print_json(out, o->rep, correlator_stats(o->corr));
	if (f == REPORT_CSV)
		return report_print_csv(out, o->rep, correlator_stats(o->corr));
	report_print(out, o->rep, correlator_stats(o->corr));
	return 0;
}

void output_free(struct output *o)
{
	if (o->file.close)
		output_close(o);
	correlator_free(o->corr);
	report_free(o->rep);
	outfile_release(&o->file_name); /* never committed: the old file stays */
	memset(o, 0, sizeof(*o));
}
