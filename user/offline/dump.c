// SPDX-License-Identifier: GPL-2.0-only
/* `spyre-bpftrace dump FILE`: a capture as text, one event per line. */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "capture/capture.h"
#include "capture/format.h"
#include "capture/meta.h"
#include "commands.h"

static const char dump_doc[] = "Print a capture, one event per line, in the manner of perf script.\n"
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
	default: return ARGP_ERR_UNKNOWN;
	}
}

struct dumper {
	struct capture_meta m;
	char line[8192];
	int ret;
};

static int dump_one(void *ctx, const struct sbt_hdr *h)
{
	struct dumper *d = ctx;

	meta_add(&d->m, h);
	sbt_format_record(h, &d->m, d->line, sizeof(d->line));
	if (puts(d->line) == EOF) {
		d->ret = errno == EPIPE ? 0 : 1; /* a reader gone (| head) is no error */
		return -1;
	}
	return 0;
}

int cmd_dump(int argc, char **argv)
{
	static const struct argp_option none[] = { { 0 } };
	static const struct argp argp = { none, dump_parse, "FILE", dump_doc, NULL, NULL, NULL };
	struct dump_opts o = { 0 };
	struct dumper *d = calloc(1, sizeof(*d));
	int ret;

	if (!d) {
		sbt_err("out of memory");
		return 1;
	}
	argp_parse(&argp, argc, argv, 0, NULL, &o);
	meta_init(&d->m);
	ret = capture_each(o.file, dump_one, d, NULL);
	meta_free(&d->m);
	ret = ret < 0 ? d->ret : ret;
	free(d);
	return ret;
}
