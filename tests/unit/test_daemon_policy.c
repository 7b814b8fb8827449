// SPDX-License-Identifier: GPL-2.0-only
/* The daemon's policies, apart from BPF: when a trigger fires (and when it
 * is held back), when sampled windows come, what the spool keeps under
 * its bound, and the kubelet's answer read. */
#include <setjmp.h>
#include <stdarg.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/json.h"
#include "daemon/kubelet.h"
#include "daemon/spool.h"
#include "daemon/triggers.h"
#include "daemon/window.h"

#define SEC 1000000000ull

static enum trigger check(struct triggers *t, uint64_t errors, uint64_t slow, uint64_t lost, uint64_t now)
{
	uint64_t totals[TRIG_N] = { errors, slow, lost };

	return triggers_check(t, totals, now);
}

static void test_trigger_burst_and_rate_limit(void **state)
{
	struct triggers t = { .cfg = { .errors = 5, .slow_ns = SEC, .lost = true, .interval_ns = 60 * SEC } };

	(void)state;
	/* what was there before the daemon looked is no burst */
	assert_int_equal(check(&t, 1000, 3, 7, 1 * SEC), TRIG_N);
	assert_int_equal(check(&t, 1004, 3, 7, 6 * SEC), TRIG_N); /* 4 < 5 */
	assert_int_equal(check(&t, 1009, 3, 7, 11 * SEC), TRIG_ERRORS); /* 5 in a check */
	assert_int_equal(check(&t, 1020, 3, 7, 16 * SEC), TRIG_N); /* too soon: held */
	assert_int_equal(t.held[TRIG_ERRORS], 1);
	assert_int_equal(check(&t, 1030, 3, 7, 72 * SEC), TRIG_ERRORS); /* a minute on */
	assert_int_equal(t.fired[TRIG_ERRORS], 2);
}

static void test_trigger_one_per_check(void **state)
{
	struct triggers t = { .cfg = { .errors = 1, .slow_ns = SEC, .lost = true, .interval_ns = SEC } };

	(void)state;
	check(&t, 0, 0, 0, SEC);
	/* all three at once: one now, the others at the next checks */
	assert_int_equal(check(&t, 3, 1, 1, 5 * SEC), TRIG_ERRORS);
	assert_int_equal(check(&t, 3, 1, 1, 10 * SEC), TRIG_SLOW);
	assert_int_equal(check(&t, 3, 1, 1, 15 * SEC), TRIG_LOST);
	assert_int_equal(check(&t, 3, 1, 1, 20 * SEC), TRIG_N);
}

static void test_trigger_off(void **state)
{
	struct triggers t = { .cfg = { .errors = 0, .slow_ns = 0, .lost = false, .interval_ns = SEC } };

	(void)state;
	check(&t, 0, 0, 0, SEC);
	assert_int_equal(check(&t, 100, 100, 100, 5 * SEC), TRIG_N);
	assert_string_equal(trigger_name(TRIG_SLOW), "slow_ioctl");
}

/* Over many periods: one sample in each, inside it, leaving room for the window. */
static void test_sampling_once_per_period(void **state)
{
	struct detail_window w = { .seed = 42 };
	uint64_t start = 1000 * SEC, period = 60 * SEC, len = 10 * SEC, now;
	int per[100] = { 0 };

	(void)state;
	window_sampling(&w, 10, 60, start);
	for (now = start; now < start + 100 * period; now += SEC / 4) {
		if (!window_sample_due(&w, now))
			continue;
		per[(now - start) / period]++;
		assert_true((now - start) % period <= period - len + SEC / 4);
	}
	for (int i = 0; i < 100; i++)
		assert_int_equal(per[i], 1);
	window_sampling(&w, 0, 0, start);
	assert_false(window_sample_due(&w, start + 1000 * period));
}

static void test_window_json_weights(void **state)
{
	struct detail_window *w = calloc(1, sizeof(*w));
	struct json_doc d;
	char *out;

	(void)state;
	w->seed = 1;
	window_sampling(w, 5, 300, 0);
	w->past[0] = (struct window_past){ 10 * SEC, 15 * SEC, WIN_SAMPLE, 2 };
	w->past[1] = (struct window_past){ 100 * SEC, 104 * SEC, WIN_REQUEST, 1 };
	w->npast = 2;
	out = window_json(w, 0, 50 * SEC);
	assert_non_null(strstr(out, "\"reason\": \"sample\""));
	assert_non_null(strstr(out, "\"sampling_weight\": 60"));
	assert_null(strstr(out, "request")); /* outside the snapshot */
	free(out);

	/* the most a manifest can hold: every window of the history full, each
	 * process with the longest numbers, and the open one */
	for (int i = 0; i < WINDOW_HISTORY; i++) {
		struct window_past *p = &w->past[i];

		*p = (struct window_past){ UINT64_MAX - 1, UINT64_MAX, WIN_SAMPLE, INT32_MAX, INT32_MAX };
		for (int k = 0; k < WINDOW_PAST_PROCS; k++)
			p->detail[k] =
				(struct window_proc){ INT32_MAX, JOIN_FIRST_CALL, UINT64_MAX, UINT64_MAX, 0, true };
	}
	w->npast = WINDOW_HISTORY;
	w->open = true;
	w->from = 0;
	w->nprocs = WINDOW_PAST_PROCS;
	memcpy(w->procs, w->past[0].detail, sizeof(w->past[0].detail));
	out = window_json(w, 0, UINT64_MAX);
	assert_int_equal(json_parse(&d, out, strlen(out)), 0);
	assert_int_equal(d.root.n, WINDOW_HISTORY + 1); /* all there, not cut to [] */
	assert_int_equal(json_get(&d.root.items[0], "traced")->n, WINDOW_PAST_PROCS);
	json_free(&d);
	free(out);
	free(w);
}

static void put(const char *dir, const char *name, size_t bytes, int age)
{
	char path[512];
	struct timeval tv[2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "w"));
	for (size_t i = 0; i < bytes; i++)
		fputc('x', f);
	fclose(f);
	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= age;
	tv[1] = tv[0];
	utimes(path, tv);
}

static bool exists(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static void test_spool_trim(void **state)
{
	char state_dir[] = "/tmp/sbt-spool-XXXXXX", dir[256], err[256], path[512];
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(state_dir));
	assert_int_equal(spool_open(state_dir, dir, sizeof(dir), err, sizeof(err)), 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	put(dir, "a.pftrace", 4000, 30);
	put(dir, "a.pftrace.manifest.json", 100, 30);
	put(dir, "b.pftrace", 4000, 20);
	put(dir, "b.pftrace.manifest.json", 100, 20);
	put(dir, "c.pftrace", 4000, 10);
	put(dir, "c.pftrace.manifest.json", 100, 10);
	assert_int_equal(spool_usage(dir), 12300);
	/* the oldest goes, with its manifest */
	assert_int_equal(spool_trim(dir, 9000, NULL), 1);
	assert_false(exists(dir, "a.pftrace") || exists(dir, "a.pftrace.manifest.json"));
	assert_true(exists(dir, "b.pftrace") && exists(dir, "c.pftrace.manifest.json"));
	/* the newest is kept over an older one, however old its mtime */
	put(dir, "d.pftrace", 4000, 1000);
	snprintf(path, sizeof(path), "%s/d.pftrace", dir);
	assert_int_equal(spool_trim(dir, 8300, path), 1);
	assert_true(exists(dir, "d.pftrace") && exists(dir, "c.pftrace"));
	assert_false(exists(dir, "b.pftrace"));
	/* one alone over the bound goes too, and says so */
	put(dir, "e.pftrace", 20000, 0);
	snprintf(path, sizeof(path), "%s/e.pftrace", dir);
	assert_int_equal(spool_trim(dir, 10000, path), -EFBIG);
	assert_false(exists(dir, "e.pftrace"));
	assert_true(spool_usage(dir) <= 10000);
	spool_name(dir, "errors", 1796250192528894227ull, path, sizeof(path));
	assert_non_null(strstr(path, "-errors-20261202T"));
	assert_non_null(strstr(path, ".528Z.pftrace"));
	snprintf(path, sizeof(path), "rm -rf %s", state_dir);
	assert_int_equal(system(path), 0);
}

/* One pod, one container, a Spyre resource with two ids (one without its
 * PCI domain, one not a PCI address), cpu ids and a topology to skip. */
static const uint8_t list_reply[] = {
	0x0a, 0x2d, 0x0a, 0x01, 'p',  0x12, 0x01, 'n',	0x1a, 0x25, 0x0a, 0x01, 'c',  0x12, 0x1d, 0x0a,
	0x09, 'i',  'b',  'm',	'.',  'c',  'o',  'm',	'/',  's',  0x12, 0x07, '3',  'b',  ':',  '0',
	'0',  '.',  '0',  0x12, 0x01, 'x',  0x1a, 0x04, 0x0a, 0x02, 0x08, 0x01, 0x1a, 0x01, 0x02,
};

static void test_kubelet_reply(void **state)
{
	struct allocations a = { 0 };

	(void)state;
	assert_int_equal(kubelet_parse(list_reply, sizeof(list_reply), "ibm.com/*", &a), 0);
	assert_int_equal(a.n, 2);
	assert_string_equal(a.v[0].device, "0000:3b:00.0");
	assert_string_equal(a.v[1].device, "x");
	assert_string_equal(a.v[0].pod, "p");
	assert_string_equal(a.v[0].namespace, "n");
	assert_string_equal(a.v[0].container, "c");
	assert_string_equal(a.v[0].resource, "ibm.com/s");
	kubelet_free(&a);
	assert_int_equal(kubelet_parse(list_reply, sizeof(list_reply), "nvidia.com/*", &a), 0);
	assert_int_equal(a.n, 0);
	/* cut short inside a length: damaged, nothing kept */
	assert_int_equal(kubelet_parse(list_reply, 20, "*", &a), -EBADMSG);
	kubelet_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trigger_burst_and_rate_limit),
		cmocka_unit_test(test_trigger_one_per_check),
		cmocka_unit_test(test_trigger_off),
		cmocka_unit_test(test_sampling_once_per_period),
		cmocka_unit_test(test_window_json_weights),
		cmocka_unit_test(test_spool_trim),
		cmocka_unit_test(test_kubelet_reply),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
