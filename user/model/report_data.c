// SPDX-License-Identifier: GPL-2.0-only
/*
 * The report as data, for scripts and CI (`report --format json|csv`): the
 * same figures as the text report, in the schema docs/usage.md documents
 * ("spyre-bpftrace.report/1"). JSON also carries each function's latency
 * histogram (its non-empty buckets as [lowest ns, calls]): enough for a
 * later comparison of two runs to tell a change from noise.
 */
#include <inttypes.h>
#include <string.h>

#include "base/histogram.h"
#include "base/json_write.h"
#include "model/report.h"

static double busy_pct(uint64_t busy_ns, double span)
{
	return span > 0 ? 100.0 * (double)busy_ns / 1e9 / span : 0.0;
}

static double span_s(const struct correlate_stats *st)
{
	return st->last_ts > st->first_ts ? (double)(st->last_ts - st->first_ts) / 1e9 : 0;
}

static void json_functions(struct json_writer *w, const struct report *r, bool driver)
{
	const struct histogram *h;
	const char *name;

	jw_key(w, driver ? "driver_functions" : "functions");
	jw_array(w);
	for (int i = 0; report_function(r, driver, i, &name, &h); i++) {
		jw_object(w);
		jw_key_string(w, "name", name);
		jw_key_uint(w, "calls", h->count);
		jw_key_uint(w, "total_ns", h->sum);
		jw_key_uint(w, "mean_ns", h->count ? h->sum / h->count : 0);
		jw_key_uint(w, "p50_ns", hist_quantile(h, 0.5));
		jw_key_uint(w, "p99_ns", hist_quantile(h, 0.99));
		jw_key_uint(w, "min_ns", h->min);
		jw_key_uint(w, "max_ns", h->max);
		jw_key(w, "histogram");
		jw_array(w);
		for (int b = 0; b < HIST_BUCKETS; b++) {
			if (!h->buckets[b])
				continue;
			jw_array(w);
			jw_uint(w, hist_bucket_low(b));
			jw_uint(w, h->buckets[b]);
			jw_end(w);
		}
		jw_end(w);
		jw_end(w);
	}
	jw_end(w);
}

int report_print_json(FILE *out, const struct report *r, const struct correlate_stats *st)
{
	struct json_writer w;
	struct report_engine e;
	struct report_device d;
	const char *what;
	uint64_t n;
	double span = span_s(st);
	int err;

	if ((err = jw_open(&w, out, 0, true)))
		return err;
	jw_object(&w);
	jw_key_string(&w, "schema", "spyre-bpftrace.report/1");
	jw_key(&w, "run");
	jw_object(&w);
	jw_key_uint(&w, "records", st->records);
	jw_key(&w, "span_s");
	jw_double(&w, span);
	jw_key_uint(&w, "runtime_calls", st->calls);
	jw_key_uint(&w, "ioctls", st->ioctls);
	jw_key_uint(&w, "device_jobs", st->jobs);
	jw_key_uint(&w, "interrupts", st->irqs);
	jw_key_uint(&w, "lost", st->lost);
	jw_key_uint(&w, "implausible_dropped", st->implausible);
	jw_key_uint(&w, "unfinished_calls", st->unfinished_calls);
	jw_key_uint(&w, "unfinished_jobs", st->unfinished_jobs);
	jw_key_uint(&w, "unpaired_returns", st->unpaired_returns);
	jw_key_uint(&w, "unmatched_interrupts", st->unmatched_completions);
	jw_end(&w);
	json_functions(&w, r, false);
	json_functions(&w, r, true);
	jw_key(&w, "engines");
	jw_array(&w);
	for (int i = 0; report_engine(r, i, &e); i++) {
		jw_object(&w);
		jw_key_string(&w, "device", e.device);
		jw_key_string(&w, "engine", e.engine);
		jw_key_uint(&w, "jobs", e.jobs);
		jw_key_uint(&w, "bytes", e.bytes);
		jw_key_uint(&w, "busy_ns", e.busy_ns);
		jw_key(&w, "busy_pct");
		jw_double(&w, busy_pct(e.busy_ns, span));
		jw_key(&w, "gb_per_s");
		jw_double(&w, e.busy_ns ? (double)e.bytes / (double)e.busy_ns : 0.0);
		jw_end(&w);
	}
	jw_end(&w);
	jw_key(&w, "devices");
	jw_array(&w);
	for (int i = 0; report_device(r, i, &d); i++) {
		jw_object(&w);
		jw_key_string(&w, "name", d.name);
		jw_key_uint(&w, "interrupts", d.interrupts);
		jw_key_uint(&w, "jobs_ended_by_interrupt", d.by_interrupt);
		jw_key_uint(&w, "jobs_ended_by_wait", d.by_wait);
		jw_end(&w);
	}
	jw_end(&w);
	jw_key(&w, "ioctl_errors");
	jw_array(&w);
	for (int i = 0; report_ioctl_error(r, i, &what, &n); i++) {
		const char *sp = strrchr(what, ' ');
		char cmd[96];

		snprintf(cmd, sizeof(cmd), "%.*s", sp ? (int)(sp - what) : (int)strlen(what), what);
		jw_object(&w);
		jw_key_string(&w, "cmd", cmd);
		jw_key_string(&w, "errno", sp ? sp + 1 : "");
		jw_key_uint(&w, "count", n);
		jw_end(&w);
	}
	jw_end(&w);
	jw_end(&w);
	jw_put(&w, "\n", 1);
	err = jw_flush(&w);
	jw_free(&w);
	return err;
}

/* A CSV field: quoted, its quotes doubled (names hold commas: C++ templates). */
static void csv_field(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

static void csv_row(FILE *out, const char *section, const char *name, const char *metric, double v)
{
	fprintf(out, "%s,", section);
	csv_field(out, name);
	fprintf(out, ",%s,%.17g\n", metric, v);
}

int report_print_csv(FILE *out, const struct report *r, const struct correlate_stats *st)
{
	static const char *const sections[2] = { "function", "driver_function" };
	const struct histogram *h;
	struct report_engine e;
	struct report_device d;
	const char *name;
	char key[160];
	uint64_t n;
	double span = span_s(st);

	fprintf(out, "section,name,metric,value\n");
	csv_row(out, "run", "", "records", (double)st->records);
	csv_row(out, "run", "", "span_s", span);
	csv_row(out, "run", "", "runtime_calls", (double)st->calls);
	csv_row(out, "run", "", "ioctls", (double)st->ioctls);
	csv_row(out, "run", "", "device_jobs", (double)st->jobs);
	csv_row(out, "run", "", "interrupts", (double)st->irqs);
	csv_row(out, "run", "", "lost", (double)st->lost);
	for (int k = 0; k < 2; k++)
		for (int i = 0; report_function(r, k == 1, i, &name, &h); i++) {
			csv_row(out, sections[k], name, "calls", (double)h->count);
			csv_row(out, sections[k], name, "total_ns", (double)h->sum);
			csv_row(out, sections[k], name, "p50_ns", (double)hist_quantile(h, 0.5));
			csv_row(out, sections[k], name, "p99_ns", (double)hist_quantile(h, 0.99));
			csv_row(out, sections[k], name, "max_ns", (double)h->max);
		}
	for (int i = 0; report_engine(r, i, &e); i++) {
		snprintf(key, sizeof(key), "%s/%s", e.device, e.engine);
		csv_row(out, "engine", key, "jobs", (double)e.jobs);
		csv_row(out, "engine", key, "bytes", (double)e.bytes);
		csv_row(out, "engine", key, "busy_pct", busy_pct(e.busy_ns, span));
	}
	for (int i = 0; report_device(r, i, &d); i++)
		csv_row(out, "device", d.name, "interrupts", (double)d.interrupts);
	for (int i = 0; report_ioctl_error(r, i, &name, &n); i++)
		csv_row(out, "ioctl_error", name, "count", (double)n);
	return fflush(out) ? -1 : 0;
}
