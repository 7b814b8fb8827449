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
#include "capture/reorder.h"
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
	assert_int_equal(recorder_init(&r, 4, 60, NULL, NULL), 0);
	for (uint64_t i = 0; i < 1000; i++)
		add(&r, 100 * SEC + i * SEC / 100, 56); /* 10 s of records */
	assert_int_equal(window(&r, 0, UINT64_MAX), 1000);
	assert_int_equal(window(&r, 105 * SEC, 106 * SEC), 101); /* both ends in */
	assert_int_equal(seen_first, 105 * SEC);
	assert_int_equal(seen_last, 106 * SEC);
	assert_int_equal(window(&r, 0, 99 * SEC), 0);
	assert_int_equal(r.aged + r.evicted, 0);
	recorder_free(&r);
}

static void drops_by_age(void **state)
{
	struct flight_recorder r;

	(void)state;
	assert_int_equal(recorder_init(&r, 4, 10, NULL, NULL), 0);
	/* several segments' worth, then one much later: the first age out whole */
	for (int i = 0; i < 20000; i++)
		add(&r, 10 * SEC + (uint64_t)i, 56);
	add(&r, 100 * SEC, 56);
	assert_int_equal(window(&r, 0, 50 * SEC), 0);
	assert_int_equal(window(&r, 0, UINT64_MAX), 1);
	assert_int_equal(r.aged, 20000); /* all of it older than T, the segment being filled too */
	assert_int_equal(r.evicted, 0);
	recorder_free(&r);
}

static void drops_by_room(void **state)
{
	struct flight_recorder r;
	uint64_t n;

	(void)state;
	assert_int_equal(recorder_init(&r, 2, 3600, NULL, NULL), 0); /* 32 segments */
	for (uint64_t i = 0; i < 100000; i++)
		add(&r, SEC + i, 1016); /* 1 KiB records: 63 a segment */
	n = window(&r, 0, UINT64_MAX);
	assert_int_equal(n, 31 * 63 + 100000 % 63); /* 31 full segments, the newest being filled */
	assert_int_equal(seen_first, SEC + 100000 - n); /* the newest kept, none missing */
	assert_int_equal(seen_last, SEC + 99999);
	assert_int_equal(n + r.evicted, 100000);
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
	assert_int_equal(recorder_init(&r, 4, 3600, NULL, NULL), 0);
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
	if (type == SBT_IRQ && sizeof(*h) + payload >= sizeof(struct sbt_irq))
		((struct sbt_irq *)h)->start_ts = ts; /* began then, as the reorder step reads it */
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

/* Users by pid, for the tests: pid / 1000 (pid 7: root). */
static uint32_t uid_by_thousands(void *ctx, uint32_t tgid)
{
	(void)ctx;
	return tgid / 1000;
}

/* Alone, a busy job may fill the whole recorder, and it keeps its newest
 * records, every one: nothing is dropped over a share. */
static void lone_job_keeps_its_last(void **state)
{
	struct flight_recorder r;
	size_t rec = sizeof(struct sbt_hdr) + 1000;
	uint64_t n, per = RECORDER_SEGMENT / rec, total = 30000;

	(void)state;
	assert_int_equal(recorder_init(&r, 8, 3600, uid_by_thousands, NULL), 0); /* 128 segments */
	for (uint64_t i = 0; i < total; i++) /* 30 MB: the recorder nearly four times over */
		add_of(&r, 5000, SBT_CALL_ENTER, SEC + i, 1000);
	n = records_of(&r, 5000);
	assert_int_equal(n, 127 * per + total % per); /* all of it but the newest segment's room */
	assert_int_equal(window(&r, 0, UINT64_MAX), n);
	assert_int_equal(seen_first, SEC + total - n); /* the newest, none missing */
	assert_int_equal(seen_last, SEC + total - 1);
	assert_int_equal(r.evicted, total - n);
	assert_int_equal(r.nevicted_uids, 1);
	assert_int_equal(r.evicted_by_uid[0].uid, 5);
	recorder_free(&r);
}

/* Many processes of one user flood a recorder that holds another user's
 * job: the flood evicts only its own records, the job keeps all of its,
 * and what went is said by user and by time. */
static void one_user_cannot_evict_another(void **state)
{
	struct recorder_evicted_uid by[4];
	struct flight_recorder r;
	uint64_t ts = SEC, all;
	bool sure;

	(void)state;
	assert_int_equal(recorder_init(&r, 4, 3600, uid_by_thousands, NULL), 0);
	for (int i = 0; i < 9; i++)
		add_of(&r, 7, SBT_IOCTL, ts++, 100); /* root's job: 9 ioctls */
	for (int i = 0; i < 40000; i++) /* 200 processes of user 65, the recorder ten times over */
		add_of(&r, 65000 + (uint32_t)(i % 200), SBT_IOCTL, ts++, 1000);
	for (int i = 0; i < 3000; i++) /* a card's interrupts, in whatever task: the kernel's */
		add_of(&r, 65000, SBT_IRQ, ts++, 100);
	assert_int_equal(records_of(&r, 7), 9);
	assert_true(r.evicted > 30000);
	assert_int_equal(r.nevicted_uids, 1);
	assert_int_equal(r.evicted_by_uid[0].uid, 65);
	assert_int_equal(r.evicted_by_uid[0].records, r.evicted);
	/* the kernel's records are kept beside the flood's newest */
	assert_int_equal(window(&r, ts - 3000, ts), 3000);
	/* a window over the flood: its evictions, all of user 65 */
	assert_int_equal(recorder_evicted_in(&r, SEC, ts, by, 4, &all, &sure), 1);
	assert_true(sure);
	assert_int_equal(all, r.evicted);
	assert_int_equal(by[0].uid, 65);
	/* a window before anything was evicted: none */
	assert_int_equal(recorder_evicted_in(&r, 0, SEC / 2, by, 4, &all, &sure), 0);
	assert_int_equal(all, 0);
	recorder_free(&r);
}

/* Within one user, the process holding the most gives way first. */
static void within_a_user_the_largest_goes_first(void **state)
{
	struct flight_recorder r;
	uint64_t ts = SEC;

	(void)state;
	assert_int_equal(recorder_init(&r, 2, 3600, uid_by_thousands, NULL), 0);
	for (int i = 0; i < 500; i++)
		add_of(&r, 3001, SBT_CALL_ENTER, ts++, 1000);
	for (int i = 0; i < 20000; i++)
		add_of(&r, 3002, SBT_CALL_ENTER, ts++, 1000);
	assert_int_equal(records_of(&r, 3001), 500);
	assert_true(records_of(&r, 3002) > 1000);
	recorder_free(&r);
}

/* A pid used again by another user's process: an account of its own, so
 * the new process's records never count as the old one's user's. */
static uint32_t uid_given(void *ctx, uint32_t tgid)
{
	(void)tgid;
	return *(uint32_t *)ctx;
}

static int live_accounts(const struct flight_recorder *r)
{
	int live = 0;

	for (size_t i = 0; i <= r->nseg; i++)
		live += r->acct[i].newest >= 0;
	return live;
}

static void pid_used_again_by_another_user(void **state)
{
	struct flight_recorder r;
	uint64_t ts = SEC;
	uint32_t uid = 1;
	size_t rec = sizeof(struct sbt_hdr) + 1000;

	(void)state;
	assert_int_equal(recorder_init(&r, 4, 3600, uid_given, &uid), 0);
	for (int i = 0; i < 70; i++) /* more than a segment */
		add_of(&r, 1500, SBT_CALL_ENTER, ts++, 1000);
	uid = RECORDER_UID_UNKNOWN; /* gone, as /proc says: the same account goes on */
	for (int i = 0; i < 70; i++)
		add_of(&r, 1500, SBT_CALL_ENTER, ts++, 1000);
	assert_int_equal(live_accounts(&r), 1);
	uid = 2; /* another user's process now: asked at its next segment */
	for (int i = 0; i < 70; i++)
		add_of(&r, 1500, SBT_CALL_ENTER, ts++, 1000);
	assert_int_equal(live_accounts(&r), 2);
	assert_int_equal(recorder_held(&r, 1500), 210 * rec);
	for (size_t i = 0; i <= r.nseg; i++)
		if (r.acct[i].newest >= 0)
			assert_true(r.acct[i].uid == 1 || r.acct[i].uid == 2);
	recorder_free(&r);
}

/* The records of several processes come back in the order they came in
 * (when each began), whatever account each is in. */
static uint64_t last_ts;
static bool in_order;

static void check_order(void *ctx, const struct sbt_hdr *h)
{
	(void)ctx;
	in_order &= reorder_began(h) >= last_ts;
	last_ts = reorder_began(h);
}

static void merged_in_time_order(void **state)
{
	struct flight_recorder r;
	uint64_t oldest;

	(void)state;
	assert_int_equal(recorder_init(&r, 8, 3600, uid_by_thousands, NULL), 0); /* room for all */
	for (uint64_t i = 0; i < 30000; i++)
		add_of(&r, (uint32_t)(1000 + (i * 7919) % 13), i % 50 ? SBT_IOCTL : SBT_IRQ, SEC + i, 100);
	last_ts = 0;
	in_order = true;
	assert_int_equal(recorder_each(&r, 0, UINT64_MAX, check_order, NULL, &oldest), 30000);
	assert_true(in_order);
	assert_int_equal(oldest, SEC);
	recorder_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keeps_and_windows),
		cmocka_unit_test(drops_by_age),
		cmocka_unit_test(drops_by_room),
		cmocka_unit_test(snapshot_cut_to_fit),
		cmocka_unit_test(lone_job_keeps_its_last),
		cmocka_unit_test(one_user_cannot_evict_another),
		cmocka_unit_test(within_a_user_the_largest_goes_first),
		cmocka_unit_test(pid_used_again_by_another_user),
		cmocka_unit_test(merged_in_time_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
