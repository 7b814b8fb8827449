// SPDX-License-Identifier: GPL-2.0-only
/* The capture file: round trip, a file cut at every byte, bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "capture/capture.h"

static char path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/sbt-unit-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

/* Three records of different lengths, one of them not a multiple of 8.
 * Fills where each starts, how long its body is, and where it ends. */
static size_t write_sample(uint64_t *start, uint64_t *body, uint64_t *ends)
{
	struct capture_writer w;
	struct sbt_call_enter e = {
		.h = { .type = SBT_CALL_ENTER, .size = sizeof(e) - sizeof(e.h), .tgid = 10, .tid = 11, .ts = 1000 },
		.probe_id = 3,
		.args = { 1, 2, 3, 4, 5, 6 }
	};
	struct {
		struct sbt_meta_proc p;
		char cmd[5];
	} proc = { .p = { .h = { .type = SBT_META_PROC, .size = sizeof(proc.p) - sizeof(proc.p.h) + 5 },
			  .pid = 10,
			  .cmdline_len = 5 },
		   .cmd = "a\0bc" };
	struct sbt_lost l = { .h = { .type = SBT_LOST, .size = sizeof(l) - sizeof(l.h), .ts = 2000 },
			      .count = 7,
			      .total = 7 };
	const struct sbt_hdr *recs[] = { &e.h, &proc.p.h, &l.h };

	assert_int_equal(capture_create(&w, path), 0);
	for (int i = 0; i < 3; i++) {
		start[i] = w.bytes;
		body[i] = sizeof(struct sbt_hdr) + recs[i]->size;
		assert_int_equal(capture_write(&w, recs[i]), 0);
		ends[i] = w.bytes;
	}
	assert_int_equal(w.records, 3);
	assert_int_equal(capture_close(&w), 0);
	return ends[2];
}

static void round_trip(void **state)
{
	struct capture_reader r;
	const struct sbt_hdr *h;
	uint64_t start[3], body[3], ends[3];

	(void)state;
	write_sample(start, body, ends);
	assert_int_equal(ends[0] % 8, 0);
	assert_int_equal(body[1] % 8, 5); /* the odd-sized record ... */
	assert_int_equal(ends[1] % 8, 0); /* ... was padded */
	assert_int_equal(capture_open(&r, path), 0);
	assert_int_equal(capture_next(&r, &h), CAPTURE_OK);
	assert_int_equal(h->type, SBT_CALL_ENTER);
	assert_int_equal(((const struct sbt_call_enter *)h)->args[5], 6);
	assert_int_equal(h->tid, 11);
	assert_int_equal(capture_next(&r, &h), CAPTURE_OK);
	assert_int_equal(h->type, SBT_META_PROC);
	assert_memory_equal(((const struct sbt_meta_proc *)h)->cmdline, "a\0bc", 5);
	assert_int_equal(capture_next(&r, &h), CAPTURE_OK);
	assert_int_equal(((const struct sbt_lost *)h)->count, 7);
	assert_int_equal(capture_next(&r, &h), CAPTURE_END);
	capture_close_reader(&r);
}

/* Cut the file at every length: a record reads back if and only if its
 * whole body comes before the cut, and the reader says END when the cut
 * falls on a record boundary or in the padding of the last record read,
 * TRUNCATED otherwise. */
static void cut_at_every_byte(void **state)
{
	uint64_t start[3], body[3], ends[3];
	size_t total = write_sample(start, body, ends);
	uint8_t *full = malloc(total);
	FILE *f = fopen(path, "rb");

	(void)state;
	assert_non_null(f);
	assert_int_equal(fread(full, 1, total, f), total);
	fclose(f);
	for (size_t cut = 0; cut <= total; cut++) {
		uint64_t *buf = calloc(1, total + 8); /* an 8-byte aligned copy */
		struct capture_reader r;
		const struct sbt_hdr *h;
		enum capture_status st;
		size_t want = 0, got = 0;

		memcpy(buf, full, cut);
		if (cut < sizeof(struct sbt_file_header)) {
			assert_int_equal(capture_open_mem(&r, buf, cut), -1);
			free(buf);
			continue;
		}
		while (want < 3 && cut >= start[want] + body[want])
			want++;
		assert_int_equal(capture_open_mem(&r, buf, cut), 0);
		while ((st = capture_next(&r, &h)) == CAPTURE_OK) {
			assert_int_equal(h->tgid, got == 1 ? 0 : got == 0 ? 10 : 0);
			got++;
		}
		assert_int_equal(got, want);
		assert_int_equal(st,
				 (want ? cut <= ends[want - 1] : cut == start[0]) ? CAPTURE_END : CAPTURE_TRUNCATED);
		free(buf);
	}
	free(full);
}

static void bad_files(void **state)
{
	uint64_t buf[16] = { 0 };
	struct sbt_file_header *fh = (void *)buf;
	struct sbt_hdr *h = (void *)(buf + 2);
	struct capture_reader r;
	const struct sbt_hdr *rec;

	(void)state;
	memcpy(fh->magic, "NOTMAGIC", 8);
	assert_int_equal(capture_open_mem(&r, buf, sizeof(buf)), -1);
	assert_non_null(strstr(r.error, "bad magic"));
	memcpy(fh->magic, SBT_MAGIC, 8);
	fh->version = 99;
	fh->header_size = 16;
	assert_int_equal(capture_open_mem(&r, buf, sizeof(buf)), -1);
	assert_non_null(strstr(r.error, "version 99"));
	fh->version = SBT_FORMAT_VERSION;
	assert_int_equal(capture_open_mem(&r, (char *)buf + 1, sizeof(buf) - 8), -1);
	/* a known type with too short a payload is corrupt, not read past */
	h->type = SBT_IOCTL;
	h->size = 8;
	assert_int_equal(capture_open_mem(&r, buf, sizeof(buf)), 0);
	assert_int_equal(capture_next(&r, &rec), CAPTURE_CORRUPT);
	assert_non_null(strstr(r.error, "needs"));
	/* type 0 (zeroes) is corrupt */
	h->type = 0;
	assert_int_equal(capture_open_mem(&r, buf, sizeof(buf)), 0);
	assert_int_equal(capture_next(&r, &rec), CAPTURE_CORRUPT);
	/* an unknown type is skipped over and counted */
	h->type = 500;
	h->size = 8;
	assert_int_equal(capture_open_mem(&r, buf, 16 + 24 + 8), 0);
	assert_int_equal(capture_next(&r, &rec), CAPTURE_OK);
	assert_int_equal(r.unknown, 1);
	assert_int_equal(capture_next(&r, &rec), CAPTURE_END);
	assert_int_equal(capture_open(&r, "/nonexistent/x.sbt"), -1);
	assert_non_null(strstr(r.error, "No such file"));
	assert_int_equal(capture_open(&r, "/tmp"), -1);
}

/* A file cut short while it is read (a capture still being written, a
 * full disk): the reader ends at the cut, as a cut-short capture. Mapped,
 * this was SIGBUS. Records span more than the read window, so the cut
 * comes after the open. */
static void cut_while_read(void **state)
{
	char path[] = "/tmp/sbt-cut-XXXXXX";
	int fd = mkstemp(path);
	struct capture_writer w;
	struct capture_reader r;
	const struct sbt_hdr *rec;
	struct sbt_call_enter e = {
		.h = { .type = SBT_CALL_ENTER, .size = sizeof(e) - sizeof(e.h), .tgid = 1, .tid = 1, .ts = 1 }
	};
	uint64_t n = 0, total = (12u << 20) / sizeof(e);
	enum capture_status st;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(capture_create(&w, path), 0);
	for (uint64_t i = 0; i < total; i++)
		assert_int_equal(capture_write(&w, &e.h), 0);
	assert_int_equal(capture_close(&w), 0);
	assert_int_equal(capture_open(&r, path), 0);
	assert_int_equal(truncate(path, (6u << 20) + 5), 0);
	while ((st = capture_next(&r, &rec)) == CAPTURE_OK)
		n++;
	assert_int_equal(st, CAPTURE_TRUNCATED);
	assert_true(n >= ((4u << 20) - 16) / sizeof(e) && n < total);
	capture_close_reader(&r);
	unlink(path);
}

static void unwritable(void **state)
{
	struct capture_writer w;

	(void)state;
	assert_int_equal(capture_create(&w, "/nonexistent/dir/x.sbt"), -2); /* ENOENT */
	assert_int_equal(capture_create(&w, "/tmp"), -21); /* EISDIR */
	assert_int_equal(capture_close(&w), 0); /* closing a writer that never opened */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(cut_at_every_byte, setup, teardown),
		cmocka_unit_test(bad_files),
		cmocka_unit_test(unwritable),
		cmocka_unit_test(cut_while_read),
	};

	return cmocka_run_group_tests_name("capture", tests, NULL, NULL);
}
