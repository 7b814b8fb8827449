// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace convert IN.sbt -o OUT` and `spyre-bpftrace report IN.sbt`:
 * a capture through the correlation engine, exactly as `record` feeds it
 * live, to a Perfetto or Chrome JSON trace, or to the text report.
 */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "capture/capture.h"
#include "commands.h"
#include "model/output.h"

struct convert_opts {
	const char *in, *out, *format;
	bool report;
};

enum { OPT_FORMAT = 1000 };

static error_t convert_parse(int key, char *arg, struct argp_state *state)
{
	struct convert_opts *o = state->input;

	switch (key) {
	case 'o':
		if (o->out)
			argp_error(state, "-o given twice; hint: one output a conversion");
		o->out = arg;
		break;
	case OPT_FORMAT: o->format = arg; break;
	case ARGP_KEY_ARG:
		if (o->in)
			argp_error(state, "one capture at a time");
		o->in = arg;
		break;
	case ARGP_KEY_END:
		if (!o->in)
			argp_error(state, "no capture file given; hint: %s IN.sbt%s", o->report ? "report" : "convert",
				   o->report ? "" : " -o OUT.pftrace");
		if (!o->report && !o->out)
			argp_error(state, "no output; hint: -o OUT.pftrace or -o OUT.json");
		break;
	default: return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static int run(int argc, char **argv, bool report)
{
	static const struct argp_option convert_options[] = {
		{ "output", 'o', "FILE", 0, "OUT.pftrace (Perfetto) or OUT.json (Chrome JSON)", 0 },
		{ "format", OPT_FORMAT, "FMT", 0, "perfetto or json, whatever -o's extension", 0 },
		{ 0 }
	};
	static const struct argp_option report_options[] = {
		{ "format", OPT_FORMAT, "FMT", 0, "text (the default), json or csv (docs/usage.md: the schema)", 0 },
		{ 0 }
	};
	static const struct argp convert_argp = { convert_options,
						  convert_parse,
						  "IN.sbt",
						  "Convert a capture to a Perfetto or Chrome JSON trace.\n\nEXAMPLES:\n"
						  "  spyre-bpftrace convert run.sbt -o run.pftrace\n"
						  "  spyre-bpftrace convert run.sbt -o run.json",
						  NULL,
						  NULL,
						  NULL };
	static const struct argp report_argp = {
		report_options,
		convert_parse,
		"IN.sbt",
		"Print the summary of a capture: per runtime function the calls and their times "
		"(mean, p50, p99, max), per device engine the busy time, bytes and GB/s, "
		"interrupts, ioctl errors, unfinished work and lost records; as text for eyes, or "
		"JSON or CSV for scripts.\n\nEXAMPLES:\n"
		"  spyre-bpftrace report run.sbt\n"
		"  spyre-bpftrace report run.sbt --format json > run.report.json\n"
		"  spyre-bpftrace report run.sbt --format csv | grep ^function",
		NULL,
		NULL,
		NULL
	};
	struct convert_opts o = { .report = report };
	enum out_format fmt = FMT_NONE;
	enum report_format rfmt = REPORT_TEXT;
	struct capture_reader in;
	struct output out;
	char err[512];
	int ret;

	argp_parse(report ? &report_argp : &convert_argp, argc, argv, 0, NULL, &o);
	if (report && o.format) {
		if (!strcmp(o.format, "json"))
			rfmt = REPORT_JSON;
		else if (!strcmp(o.format, "csv"))
			rfmt = REPORT_CSV;
		else if (strcmp(o.format, "text")) {
			sbt_err("unknown report format '%s'; hint: --format text, json or csv", o.format);
			return 2;
		}
	}
	if (!report && output_format(o.out, o.format, &fmt, err, sizeof(err))) {
		sbt_err("%s", err);
		return 2;
	}
	if (fmt == FMT_SBT) {
		sbt_err("convert writes .pftrace or .json; hint: -o OUT.pftrace");
		return 2;
	}
	/* the input first: a capture that cannot be read touches no output */
	if (capture_open(&in, o.in)) {
		sbt_err("cannot read '%s': %s", o.in, in.error);
		return 1;
	}
	capture_close_reader(&in);
	if (output_open(&out, report ? NULL : o.out, fmt, report, err, sizeof(err))) {
		sbt_err("cannot write '%s': %s", o.out, err);
		output_free(&out);
		return 1;
	}
	/* what was read before damage is written all the same */
	ret = capture_each(o.in, output_feed, &out, NULL);
	if (correlator_stats(out.corr)->implausible)
		sbt_warn("%s: %llu records dropped: they could not be true (a damaged capture?)", o.in,
			 (unsigned long long)correlator_stats(out.corr)->implausible);
	if (output_close(&out) || output_commit(&out)) {
		sbt_err("writing '%s' failed: %s", o.out, strerror(out.error));
		ret = 1;
	}
	if (report) {
		if (output_report(&out, stdout, rfmt)) {
			sbt_err("writing the report failed: %s", strerror(errno));
			ret = 1;
		}
	} else if (!ret)
		sbt_note("%s %s (%.1f KiB) from %s", output_format_name(fmt), o.out, (double)out.bytes / 1024.0, o.in);
	output_free(&out);
	return ret;
}

int cmd_convert(int argc, char **argv)
{
	return run(argc, argv, false);
}

int cmd_report(int argc, char **argv)
{
	return run(argc, argv, true);
}
