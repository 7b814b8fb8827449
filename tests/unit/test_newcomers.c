// SPDX-License-Identifier: GPL-2.0-only
/* What the daemon's ring-buffer thread tells its main loop in a detail
 * window: each process that turns up, once, by what it did first; the
 * first VFIO ioctl of one that joined by a call; each group fd once;
 * nothing from before the window or after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/newcomers.h"

static void rec(struct newcomers *n, uint16_t type, uint32_t tgid, uint64_t ts, int fd, uint16_t kind)
{
	struct sbt_ioctl r = { 0 };

	r.h.type = type;
	r.h.tgid = tgid;
	r.h.tid = tgid;
	r.h.ts = ts;
	r.h.size = type == SBT_IOCTL ? sizeof(r) - sizeof(r.h) : 0;
	r.fd = fd;
	r.fd_kind = kind;
	newcomers_note(n, &r.h);
}

static void tells(void **state)
{
	struct newcomers n;
	struct newcomer got[8];
	pid_t open_with[] = { 100 };

	(void)state;
	assert_int_equal(newcomers_init(&n), 0);
	/* before any window: nothing */
	rec(&n, SBT_CALL_ENTER, 200, 50, 0, 0);
	assert_int_equal(newcomers_take(&n, got, 8), 0);

	newcomers_start(&n, open_with, 1, 1000);
	rec(&n, SBT_CALL_ENTER, 100, 1001, 0, 0); /* in the window from its start */
	rec(&n, SBT_IOCTL, 300, 999, 4, SBT_FD_GROUP); /* from before the window, still in the buffer */
	rec(&n, SBT_CALL_ENTER, 200, 1002, 0, 0); /* a newcomer by its first call */
	rec(&n, SBT_CALL_EXIT, 200, 1003, 0, 0);
	rec(&n, SBT_IOCTL, 400, 1004, 5, SBT_FD_CONTAINER); /* a newcomer by a card */
	rec(&n, SBT_IOCTL, 200, 1005, 6, SBT_FD_GROUP); /* the first takes a card */
	rec(&n, SBT_IOCTL, 200, 1006, 6, SBT_FD_GROUP); /* the same group again */
	rec(&n, SBT_IOCTL, 100, 1007, 7, SBT_FD_CONTAINER); /* known, carded: nothing */
	assert_int_equal(newcomers_take(&n, got, 8), 4);
	assert_int_equal(got[0].kind, NEWS_JOINED);
	assert_int_equal(got[0].pid, 200);
	assert_int_equal(got[0].how, JOIN_FIRST_CALL);
	assert_int_equal(got[0].seen, 1002);
	assert_int_equal(got[1].kind, NEWS_JOINED);
	assert_int_equal(got[1].pid, 400);
	assert_int_equal(got[1].how, JOIN_CARD);
	assert_int_equal(got[2].kind, NEWS_CARD);
	assert_int_equal(got[2].pid, 200);
	assert_int_equal(got[3].kind, NEWS_GROUP);
	assert_int_equal(got[3].pid, 200);
	assert_int_equal(got[3].fd, 6);
	assert_int_equal(newcomers_take(&n, got, 8), 0);

	/* taken in pieces when more came than asked for */
	for (uint32_t p = 500; p < 505; p++)
		rec(&n, SBT_CALL_ENTER, p, 2000, 0, 0);
	assert_int_equal(newcomers_take(&n, got, 3), 3);
	assert_int_equal(newcomers_take(&n, got, 3), 2);
	assert_int_equal(got[1].pid, 504);

	/* the window closed: nothing; the next one starts afresh */
	newcomers_stop(&n);
	rec(&n, SBT_CALL_ENTER, 600, 3000, 0, 0);
	assert_int_equal(newcomers_take(&n, got, 8), 0);
	newcomers_start(&n, NULL, 0, 4000);
	rec(&n, SBT_CALL_ENTER, 200, 4001, 0, 0);
	assert_int_equal(newcomers_take(&n, got, 8), 1);
	assert_int_equal(got[0].pid, 200);
	newcomers_free(&n);
}

static void full_queue_tells_later(void **state)
{
	struct newcomers n;
	struct newcomer got[NEWCOMERS_QUEUE];

	(void)state;
	assert_int_equal(newcomers_init(&n), 0);
	newcomers_start(&n, NULL, 0, 1);
	for (uint32_t p = 1; p <= NEWCOMERS_QUEUE + 1; p++)
		rec(&n, SBT_CALL_ENTER, p, 10, 0, 0);
	assert_int_equal(n.overflow, 1);
	assert_int_equal(newcomers_take(&n, got, NEWCOMERS_QUEUE), NEWCOMERS_QUEUE);
	/* the one with no room then is told at its next record */
	rec(&n, SBT_CALL_ENTER, NEWCOMERS_QUEUE + 1, 11, 0, 0);
	assert_int_equal(newcomers_take(&n, got, NEWCOMERS_QUEUE), 1);
	assert_int_equal(got[0].pid, NEWCOMERS_QUEUE + 1);
	newcomers_free(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(tells),
		cmocka_unit_test(full_queue_tells_later),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
