// SPDX-License-Identifier: GPL-2.0-only
/* `spyre-bpftrace dump FILE`: a capture as text, one event per line. */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "capture/capture.h"
#include "capture/format.h"
#include "capture/meta.h"
#include "commands.h"

static const char dump_doc[] =
	"Print a capture, one event per line, in the manner of perf script.\n"
	"\n"
	"EXAMPLES:\n"
	"  spyre-bpftrace dump run.sbt\n"
	"  spyre-bpftrace dump run.sbt | grep ioctl";

struct dump_opts {
	const char *file;
};

static error_t dump_parse(int key, char *arg, struct argp_state *state)
{
	struct dump_opts *o = state->input;

	switch (key) {
	case ARGP_KEY_ARG:
		if (o->file)
			argp_error(state, "one capture file at a time");
		o->file = arg;
		return 0;
	case ARGP_KEY_END:
		if (!o->file)
			argp_error(state, "no capture file; hint: spyre-bpftrace dump FILE.sbt");
		return 0;
	default:
		return ARGP_ERR_UNKNOWN;
	}
}

int cmd_dump(int argc, char **argv)
{
	static const struct argp_option none[] = { { 0 } };
	static const struct argp argp = { none, dump_parse, "FILE", dump_doc, NULL, NULL, NULL };
	struct dump_opts o = { 0 };
	struct capture_reader r;
	struct capture_meta m;
	const struct sbt_hdr *h;
	enum capture_status st;
	char line[8192];
	int ret = 0;

	argp_parse(&argp, argc, argv, 0, NULL, &o);
	if (capture_open(&r, o.file)) {
		sbt_err("cannot read '%s': %s", o.file, r.error);
		return 1;
	}
	meta_init(&m);
	while ((st = capture_next(&r, &h)) == CAPTURE_OK) {
		meta_add(&m, h);
		sbt_format_record(h, &m, line, sizeof(line));
		if (puts(line) == EOF) {
			ret = errno == EPIPE ? 0 : 1;
			break;
		}
	}
	if (st == CAPTURE_TRUNCATED)
		sbt_err("%s ends inside a record (cut short?); %llu whole records read",
			o.file, (unsigned long long)r.records);
	else if (st == CAPTURE_CORRUPT) {
		sbt_err("%s: %s; %llu records read before it", o.file,
			r.error, (unsigned long long)r.records);
		ret = 1;
	}
	meta_free(&m);
	capture_close_reader(&r);
	return ret;
}
