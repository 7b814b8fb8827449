// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: any bytes as a capture file, through everything that
 * reads one: the reader, the metadata, the text decoder, the correlation
 * engine and the Perfetto and report sinks. The sanitizers judge.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "correlate.h"
#include "format.h"
#include "meta.h"
#include "perfetto.h"
#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *devnull(void)
{
	static FILE *f;

	if (!f)
		f = fopen("/dev/null", "w");
	return f ? f : stderr;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the reader wants 8-byte aligned data, as mmap gives */
	uint64_t *buf = malloc(size + 8);
	struct capture_reader r;
	struct capture_meta m;
	const struct sbt_hdr *h;
	struct perfetto_writer *pf;
	struct report *rep;
	struct correlator *c;
	char line[1024], err[64];

	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	if (capture_open_mem(&r, buf, size)) {
		free(buf);
		return 0;
	}
	pf = perfetto_open("/dev/null", err, sizeof(err));
	rep = report_new();
	struct model_sink sinks[] = { perfetto_sink(pf), report_sink(rep) };

	c = correlator_new(sinks, 2);
	meta_init(&m);
	while (capture_next(&r, &h) == CAPTURE_OK) {
		meta_add(&m, h);
		sbt_format_record(h, &m, line, sizeof(line));
		correlator_add(c, h);
	}
	correlator_finish(c);
	report_print(devnull(), rep, correlator_stats(c));
	meta_free(&m);
	correlator_free(c);
	perfetto_close(pf);
	report_free(rep);
	free(buf);
	return 0;
}
