// SPDX-License-Identifier: GPL-2.0-only
/* The daemon's flight recorder: what it keeps, what it drops (by age, by
 * room), and which records a window gives back; a snapshot over its bound
 * keeps its newest records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "capture/capture.h"
#include "daemon/recorder.h"
#include "daemon/snapshot.h"

#define SEC 1000000000ull

static void add(struct flight_recorder *r, uint64_t ts, uint16_t payload)
{
	uint8_t buf[sizeof(struct sbt_hdr) + 4096] = { 0 };
	struct sbt_hdr *h = (void *)buf;

	h->type = SBT_IOCTL;
	h->size = payload;
	h->ts = ts;
	recorder_add(r, h, ts);
}

static uint64_t seen_first, seen_last, seen_n;

static void count(void *ctx, const struct sbt_hdr *h)
{
	(void)ctx;
	if (!seen_n || h->ts < seen_first)
		seen_first = h->ts;
	if (h->ts > seen_last)
		seen_last = h->ts;
	seen_n++;
}

static uint64_t window(struct flight_recorder *r, uint64_t from, uint64_t to)
{
	uint64_t oldest, n;

	seen_first = seen_last = seen_n = 0;
	n = recorder_each(r, from, to, count, NULL, &oldest);
	assert_int_equal(n, seen_n);
	return n;
}

static void keeps_and_windows(void **state)
{
	struct flight_recorder r;

	(void)state;
	assert_int_equal(recorder_init(&r, 4, 60, 100), 0);
	for (uint64_t i = 0; i < 1000; i++)
		add(&r, 100 * SEC + i * SEC / 100, 56); /* 10 s of records */
	assert_int_equal(window(&r, 0, UINT64_MAX), 1000);
	assert_int_equal(window(&r, 105 * SEC, 106 * SEC), 101); /* both ends in */
	assert_int_equal(seen_first, 105 * SEC);
	assert_int_equal(seen_last, 106 * SEC);
	assert_int_equal(window(&r, 0, 99 * SEC), 0);
	assert_int_equal(r.dropped_records, 0);
	recorder_free(&r);
}

static void drops_by_age(void **state)
{
	struct flight_recorder r;

	(void)state;
	assert_int_equal(recorder_init(&r, 4, 10, 100), 0);
	/* a segment's worth, then another much later: the first ages out whole */
	for (int i = 0; i < 20000; i++)
		add(&r, 10 * SEC + (uint64_t)i, 56);
	add(&r, 100 * SEC, 56);
	assert_int_equal(window(&r, 0, 50 * SEC), 0);
	assert_int_equal(window(&r, 0, UINT64_MAX), 1);
	assert_int_equal(r.dropped_records, 20000); /* both segments: all of it older than T */
	recorder_free(&r);
}

static void drops_by_room(void **state)
{
	struct flight_recorder r;
	uint64_t n;

	(void)state;
	assert_int_equal(recorder_init(&r, 2, 3600, 100), 0); /* two segments */
	for (uint64_t i = 0; i < 100000; i++)
		add(&r, SEC + i, 1016); /* 1 KiB records: 1023 a segment */
	n = window(&r, 0, UINT64_MAX);
	assert_true(n > 1000 && n <= 2 * 1023);
	assert_int_equal(seen_last, SEC + 99999); /* the newest always kept */
	assert_int_equal(n + r.dropped_records, 100000);
	assert_true(recorder_bytes(&r) <= 2u << 20);
	recorder_free(&r);
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (uint64_t)st.st_size;
}

/* 200 KiB of records in a window, a 64 KiB bound: the snapshot is written
 * with its newest records only, under the bound, and says so. */
static void snapshot_cut_to_fit(void **state)
{
	char dir[] = "/tmp/sbt-snapcut-XXXXXX", manifest[PATH_MAX + 32], text[4096] = "";
	struct snapshot_window w = { 0 };
	struct flight_recorder r;
	struct snapshot_job *j;
	char err[256] = "";
	uint64_t newest = 0, kept = 0;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(recorder_init(&r, 4, 3600, 100), 0);
	for (uint64_t i = 0; i < 2000; i++)
		add(&r, 100 * SEC + i * SEC / 1000, 72); /* 2 s of 104-byte records */
	w.from_boot = 100 * SEC;
	w.to_boot = 102 * SEC;
	w.from_realtime = w.from_boot + 7 * SEC;
	w.to_realtime = w.to_boot + 7 * SEC;
	assert_non_null(j = snapshot_collect(&r, &w, NULL, NULL, 0));
	snprintf(j->path, sizeof(j->path), "%s/snap.sbt", dir);
	j->max_bytes = 64 << 10;
	assert_int_equal(snapshot_write(j, err, sizeof(err)), 0);
	snprintf(manifest, sizeof(manifest), "%s.manifest.json", j->path);
	assert_true(file_size(j->path) + file_size(manifest) <= j->max_bytes);
	assert_true(j->cut);
	assert_int_equal(j->window_records, 2000);
	assert_true(j->records > 100 && j->records < 2000);
	/* what is left is the newest: nothing older than the cut, the last in */
	for (size_t off = 0; off < j->len; off += sbt_record_len((const void *)(j->buf + off))) {
		const struct sbt_hdr *h = (const void *)(j->buf + off);

		if (h->type >= SBT_META_CLOCK)
			continue;
		assert_true(h->ts >= j->kept_from_boot);
		newest = h->ts > newest ? h->ts : newest;
		kept++;
	}
	assert_int_equal(kept, j->records);
	assert_int_equal(newest, 100 * SEC + 1999 * SEC / 1000);
	assert_int_equal(j->kept_from_boot, 100 * SEC + (2000 - kept) * SEC / 1000);
	assert_non_null(f = fopen(manifest, "r"));
	assert_true(fread(text, 1, sizeof(text) - 1, f) > 0);
	fclose(f);
	assert_non_null(strstr(text, "\"cut_to_fit\": true"));
	assert_non_null(strstr(text, "\"records_in_window\": 2000"));
	snprintf(err, sizeof(err), "\"from_boottime_ns\": %llu, \"to_boottime_ns\": %llu, \"max_bytes\"",
		 (unsigned long long)j->kept_from_boot, (unsigned long long)w.to_boot);
	assert_non_null(strstr(text, err));
	unlink(manifest);
	unlink(j->path);
	rmdir(dir);
	snapshot_job_free(j);
	recorder_free(&r);
}

static void add_of(struct flight_recorder *r, uint32_t tgid, uint16_t type, uint64_t ts, uint16_t payload)
{
	uint8_t buf[sizeof(struct sbt_hdr) + 4096] = { 0 };
	struct sbt_hdr *h = (void *)buf;

	h->type = type;
	h->tgid = tgid;
	h->size = payload;
	h->ts = ts;
	recorder_add(r, h, ts);
}

static uint32_t of_pid;
static uint64_t of_n;

static void count_of(void *ctx, const struct sbt_hdr *h)
{
	(void)ctx;
	of_n += h->tgid == of_pid;
}

static uint64_t records_of(struct flight_recorder *r, uint32_t pid)
{
	uint64_t oldest;

	of_pid = pid;
	of_n = 0;
	recorder_each(r, 0, UINT64_MAX, count_of, NULL, &oldest);
	return of_n;
}

/* A process flooding the recorder holds at most its share: the others'
 * records stay, its own past the share are dropped and counted, and it
 * gets room again as its old records age out. Interrupts are nobody's. */
static void share_per_process(void **state)
{
	struct flight_recorder r;
	uint64_t ts = 1;
	size_t rec = sizeof(struct sbt_hdr) + 1000;

	(void)state;
	assert_int_equal(recorder_init(&r, 8, 60, 25), 0); /* 2 MiB each */
	for (int i = 0; i < 100; i++)
		add_of(&r, 7, SBT_IOCTL, ts++, 1000);
	for (int i = 0; i < 20000; i++) /* 20 MB: the recorder twice over */
		add_of(&r, 666, SBT_CALL_ENTER, ts++, 1000);
	assert_int_equal(records_of(&r, 7), 100);
	assert_true(recorder_held(&r, 666) <= 2u << 20);
	assert_true(recorder_held(&r, 666) > (2u << 20) - rec);
	assert_int_equal(records_of(&r, 666), recorder_held(&r, 666) / rec);
	assert_int_equal(r.over_share, 20000 - records_of(&r, 666));
	assert_int_equal(r.over_share_pid, 666);
	assert_int_equal(recorder_held(&r, 7), 100 * rec);
	/* a card's interrupts, whatever task they came in: kept */
	for (int i = 0; i < 3000; i++)
		add_of(&r, 666, SBT_IRQ, ts++, 1000);
	assert_int_equal(records_of(&r, 666), recorder_held(&r, 666) / rec + 3000);
	/* 61 s later all of it is old: room again, and the shares follow */
	add_of(&r, 666, SBT_CALL_ENTER, ts + 61000000000ull, 1000);
	assert_int_equal(recorder_held(&r, 666), rec);
	assert_int_equal(recorder_held(&r, 7), 0);
	recorder_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keeps_and_windows),
		cmocka_unit_test(drops_by_age),
		cmocka_unit_test(drops_by_room),
		cmocka_unit_test(snapshot_cut_to_fit),
		cmocka_unit_test(share_per_process),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
