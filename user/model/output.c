// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <string.h>

#include "model/output.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

int output_format(const char *path, const char *format, enum out_format *fmt, char *err, size_t errlen)
{
	if (format) {
		if (!strcmp(format, "sbt") || !strcmp(format, "capture"))
			*fmt = FMT_SBT;
		else if (!strcmp(format, "perfetto") || !strcmp(format, "pftrace"))
			*fmt = FMT_PERFETTO;
		else if (!strcmp(format, "json") || !strcmp(format, "chrome"))
			*fmt = FMT_JSON;
		else {
			snprintf(err, errlen, "unknown format '%s'; hint: perfetto, json or sbt", format);
			return -1;
		}
		return 0;
	}
	if (ends_with(path, ".pftrace") || ends_with(path, ".perfetto-trace"))
		*fmt = FMT_PERFETTO;
	else if (ends_with(path, ".json"))
		*fmt = FMT_JSON;
	else if (ends_with(path, ".sbt"))
		*fmt = FMT_SBT;
	else {
		snprintf(err, errlen,
			 "cannot tell the format of '%s'; hint: name it .pftrace, .json or .sbt, or give --format",
			 path);
		return -1;
	}
	return 0;
}

const char *output_format_name(enum out_format fmt)
{
	switch (fmt) {
	case FMT_SBT: return "capture";
	case FMT_PERFETTO: return "Perfetto trace";
	case FMT_JSON: return "Chrome JSON trace";
	default: return "none";
	}
}

int output_open(struct output *o, const char *path, enum out_format fmt, bool with_report, char *err, size_t errlen)
{
	struct model_sink sinks[2];
	int n = 0, ret;
	FILE *f = NULL;

	memset(o, 0, sizeof(*o));
	o->fmt = path ? fmt : FMT_NONE;
	o->path = path;
	if (path && !(f = outfile_create(&o->file, path, err, errlen)))
		return -EIO;
	if (with_report) {
		o->rep = report_new();
		if (!o->rep)
			goto oom;
		sinks[n++] = report_sink(o->rep);
	}
	switch (o->fmt) {
	case FMT_SBT:
		if ((ret = capture_create_file(&o->cap, f))) {
			snprintf(err, errlen, "%s", strerror(-ret));
			return ret;
		}
		break;
	case FMT_PERFETTO:
		if (!(o->pf = perfetto_open_file(f, err, errlen)))
			return -EIO;
		sinks[n++] = perfetto_sink(o->pf);
		break;
	case FMT_JSON:
		if (!(o->js = chrome_writer_open_file(f, err, errlen)))
			return -EIO;
		sinks[n++] = chrome_writer_sink(o->js);
		break;
	case FMT_NONE: break;
	}
	o->corr = correlator_new(sinks, n);
	if (o->corr)
		return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

void output_flush(struct output *o)
{
	int ret = 0;

	if (o->fmt == FMT_SBT)
		ret = capture_flush(&o->cap);
	else if (o->pf)
		ret = perfetto_flush(o->pf);
	else if (o->js)
		ret = chrome_writer_flush(o->js);
	if (ret && !o->error)
		o->error = -ret;
}

uint64_t output_bytes(const struct output *o)
{
	if (!o->pf && !o->js && !o->cap.f)
		return o->bytes; /* closed */
	return o->fmt == FMT_SBT ? o->cap.bytes
	       : o->pf		 ? perfetto_bytes(o->pf)
	       : o->js		 ? chrome_writer_bytes(o->js)
				 : 0;
}

int output_commit(struct output *o)
{
	int ret = o->file.path ? outfile_commit(&o->file) : 0;

	if (ret && !o->error)
		o->error = -ret;
	return ret;
}

int output_close(struct output *o)
{
	int ret = 0;

	correlator_finish(o->corr);
	if (o->fmt == FMT_SBT)
		ret = capture_close(&o->cap);
	if (o->pf)
		ret = perfetto_close(o->pf);
	if (o->js)
		ret = chrome_writer_close(o->js);
	o->pf = NULL;
	o->js = NULL;
	if (ret && !o->error)
		o->error = -ret;
	/* what reached the disk, not what was handed to it */
	o->bytes = o->file.path ? outfile_size(&o->file) : 0;
	return -o->error;
}

void output_report(const struct output *o, FILE *out)
{
	if (o->rep)
		report_print(out, o->rep, correlator_stats(o->corr));
}

void output_free(struct output *o)
{
	if (o->pf || o->js || o->cap.f)
		output_close(o);
	correlator_free(o->corr);
	report_free(o->rep);
	outfile_release(&o->file); /* never committed: the old file stays */
	memset(o, 0, sizeof(*o));
}
