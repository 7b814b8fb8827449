// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: any bytes as command lines (NUL-separated words),
 * through the record option parser, and each word as a --probe spec, a
 * --device spec and a glob for --vfio-path.
 */
#include <argp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attach/devfilter.h"
#include "probes/probes.h"
#include "record/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), *argv[66], err[512];
	struct record_opts o;
	int argc = 1;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	argv[0] = "spyre-bpftrace";
	for (char *w = text; argc < 65 && w <= text + size; w += strlen(w) + 1) {
		struct probe_spec spec;
		struct sbt_dev_filter f;
		size_t pl, sl;
		bool star;

		argv[argc++] = w;
		if (!probe_spec_parse(w, &spec, err, sizeof(err)))
			probe_spec_free(&spec);
		devfilter_parse(w, &f);
		arg_split_glob(w, 63, &pl, &sl, &star);
	}
	argv[argc] = NULL;
	if (!cli_parse_record(argc, argv, &o, ARGP_NO_EXIT | ARGP_NO_ERRS | ARGP_NO_HELP, err,
			      sizeof(err)))
		cli_free_record(&o);
	else
		cli_free_record(&o);
	free(text);
	return 0;
}
