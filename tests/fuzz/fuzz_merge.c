// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: `merge` of a PyTorch (kineto) trace and a capture,
 * both from the input, through everything merge does: the JSON and
 * capture readers, the store, the clock alignment, the layout and links,
 * and the Chrome JSON and Perfetto writers. Input: a 4-byte little-endian
 * length, that many bytes of JSON, the rest a capture. Oracle: whatever
 * merge writes is valid JSON and valid UTF-8 (else abort); the sanitizers
 * judge the rest. Seeded with the committed real run (make fuzz-seeds).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/utf8.h"
#include "commands.h"
#include "json_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char dir[64], torch[96], cap[96], out_json[96], out_pf[96];

static void clean_up(void)
{
	const char *files[] = { torch, cap, out_json, out_pf };

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		unlink(files[i]);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/sbt-fuzz-merge-%d", (int)getpid());
	mkdir(dir, 0700);
	snprintf(torch, sizeof(torch), "%s/torch.json", dir);
	snprintf(cap, sizeof(cap), "%s/cap.sbt", dir);
	snprintf(out_json, sizeof(out_json), "%s/out.json", dir);
	snprintf(out_pf, sizeof(out_pf), "%s/out.pftrace", dir);
	sbt_log_quiet(1);
	atexit(clean_up);
	return 0;
}

static int put(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f)
		return -1;
	if (n && fwrite(p, 1, n, f) != n) {
		fclose(f);
		return -1;
	}
	return fclose(f);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = 0;
		*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv_json[] = { "merge", torch, cap, "-o", out_json, NULL };
	char *argv_pf[] = { "merge", torch, cap, "-o", out_pf, NULL };
	uint32_t jlen;
	size_t len, at;
	char *js;

	if (size < 4)
		return 0;
	jlen = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 24;
	if (jlen > size - 4)
		jlen = (uint32_t)(size - 4);
	if (put(torch, data + 4, jlen) || put(cap, data + 4 + jlen, size - 4 - jlen))
		return 0;
	unlink(out_json);
	if (cmd_merge(5, argv_json) == 0 || access(out_json, F_OK) == 0) {
		js = slurp(out_json, &len);
		if (!js)
			abort();
		if (json_check(js, len, &at) || strlen(js) != len || !utf8_valid(js)) {
			fprintf(stderr, "merge wrote invalid JSON or UTF-8 (at byte %zu)\n", at);
			abort();
		}
		free(js);
		cmd_merge(5, argv_pf);
	}
	return 0;
}
