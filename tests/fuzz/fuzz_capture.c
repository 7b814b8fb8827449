// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: any bytes as a capture file, through everything that
 * reads one: the reader, the metadata, the text decoder, the correlation
 * engine, the report, and both writers, in memory. The Chrome JSON written
 * must be valid JSON and valid UTF-8 whatever the capture (else abort);
 * the Perfetto trace goes through inspect. The sanitizers judge the rest.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "capture/capture.h"
#include "capture/format.h"
#include "capture/meta.h"
#include "json_check.h"
#include "model/chrome_json.h"
#include "model/correlate.h"
#include "model/perfetto.h"
#include "model/report.h"
#include "offline/inspect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* the writers' 1 MiB buffers come from the heap and are reused, not
	 * mapped and unmapped for every input */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	return 0;
}

static FILE *devnull(void)
{
	static FILE *f;

	if (!f)
		f = fopen("/dev/null", "w");
	return f ? f : stderr;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the reader wants 8-byte aligned data */
	uint64_t *buf = malloc(size + 8);
	char *pf_out = NULL, *js_out = NULL, line[1024], err[64];
	size_t pf_len = 0, js_len = 0, at;
	struct inspect_result res = { 0 };
	struct capture_reader r;
	struct capture_meta m;
	const struct sbt_hdr *h;
	struct perfetto_writer *pf;
	struct chrome_writer *js;
	struct report *rep;
	struct correlator *c;

	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	if (capture_open_mem(&r, buf, size)) {
		free(buf);
		return 0;
	}
	pf = perfetto_open_file(open_memstream(&pf_out, &pf_len), err, sizeof(err));
	js = chrome_writer_open_file(open_memstream(&js_out, &js_len), err, sizeof(err));
	rep = report_new();
	if (!pf || !js || !rep)
		abort();
	struct model_sink sinks[] = { perfetto_sink(pf), chrome_writer_sink(js), report_sink(rep) };

	c = correlator_new(sinks, 3);
	meta_init(&m);
	while (capture_next(&r, &h) == CAPTURE_OK) {
		meta_add(&m, h);
		sbt_format_record(h, &m, line, sizeof(line));
		correlator_add(c, h);
	}
	correlator_finish(c);
	capture_close_reader(&r); /* a capture of the other byte order holds a buffer */
	report_print(devnull(), rep, correlator_stats(c));
	meta_free(&m);
	correlator_free(c);
	perfetto_close(pf);
	chrome_writer_close(js);
	report_free(rep);
	if (json_check(js_out, js_len, &at)) {
		fprintf(stderr, "invalid JSON at byte %zu: %.60s\n", at, js_out + at);
		abort();
	}
	if (strlen(js_out) != js_len || !utf8_valid(js_out)) {
		fprintf(stderr, "Chrome JSON is not valid UTF-8\n");
		abort();
	}
	inspect_buffer((const uint8_t *)pf_out, pf_len, &res);
	free(pf_out);
	free(js_out);
	free(buf);
	return 0;
}
