// SPDX-License-Identifier: GPL-2.0-only
/* The sandboxed child a library is read in (base/sandbox.h) and the
 * checks on its answer (probes/sitecodec.h): a child that crashes, calls
 * outside its allow-list, grows past its memory, answers too much or is
 * stopped costs only its answer; one that lies is not believed. */
#include <errno.h>
#include <fcntl.h>
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

#include "base/sandbox.h"
#include "events.h"
#include "probes/sitecodec.h"

static int run(sandbox_work_fn work, size_t max, char *err, uint8_t **out, size_t *len)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), ret;

	assert_true(fd >= 0);
	ret = sandbox_run(fd, work, NULL, max, NULL, NULL, out, len, err, 256);
	close(fd);
	return ret;
}

/* What it may no longer do: open a file. */
static int forbidden(int in, int out, void *ctx)
{
	int opened = open("/etc/hostname", O_RDONLY); /* outside the allow-list: killed here */

	(void)in;
	(void)ctx;
	return write(out, &opened, sizeof(opened)) == sizeof(opened) ? 0 : 1;
}

static int answer(int in, int out, void *ctx)
{
	(void)in;
	(void)ctx;
	return write(out, "uid ok", 6) == 6 ? 0 : 1;
}

static int crash(int in, int out, void *ctx)
{
	(void)in;
	(void)out;
	(void)ctx;
	abort();
}

static int grow(int in, int out, void *ctx)
{
	size_t n = 0;

	(void)in;
	(void)ctx;
	/* past its bound, allocation fails (it is told, not the host) */
	for (int i = 0; i < 64; i++) {
		void *p = malloc(16u << 20);

		if (!p)
			break;
		memset(p, 1, 16u << 20);
		n += 16u << 20;
	}
	return write(out, &n, sizeof(n)) == sizeof(n) ? 0 : 1;
}

static int chatty(int in, int out, void *ctx)
{
	static char buf[65536];

	(void)in;
	(void)ctx;
	for (;;)
		if (write(out, buf, sizeof(buf)) < 0)
			return 1;
}

static void child_outcomes(void **state)
{
	char err[256];
	uint8_t *out;
	size_t len;

	(void)state;
	/* a forbidden call is the end of the child, said */
	assert_int_equal(run(forbidden, 1024, err, &out, &len), -ECHILD);
	assert_non_null(strstr(err, "signal 31 (a system call outside its allow-list)"));
	assert_int_equal(run(answer, 1024, err, &out, &len), 0);
	assert_int_equal(len, 6);
	assert_memory_equal(out, "uid ok", 6);
	free(out);
	assert_int_equal(run(crash, 1024, err, &out, &len), -ECHILD);
	assert_non_null(strstr(err, "died of signal"));
	assert_int_equal(run(chatty, 100000, err, &out, &len), -E2BIG);
	assert_non_null(strstr(err, "over 100000 bytes"));
	/* past its memory it is refused more (or, where a sanitizer's
	 * allocator dies of it, it dies): the parent goes on either way */
	if (!run(grow, 1024, err, &out, &len)) {
		assert_int_equal(len, sizeof(size_t));
		assert_true(*(size_t *)out <= SANDBOX_MEMORY);
		free(out);
	} else {
		assert_non_null(strstr(err, "the library reader"));
	}
}

static int slow(int in, int out, void *ctx)
{
	char c;

	(void)out;
	(void)ctx;
	return read(in, &c, 1) < 0; /* a pipe nobody writes: forever */
}

static int asked;

static bool stop_after_a_few(void *ctx)
{
	(void)ctx;
	return ++asked > 3;
}

static void stopped_is_killed(void **state)
{
	int p[2];
	char err[256];
	uint8_t *out;
	size_t len;

	(void)state;
	assert_int_equal(pipe(p), 0);
	asked = 0;
	assert_int_equal(sandbox_run(p[0], slow, NULL, 1024, stop_after_a_few, NULL, &out, &len, err, sizeof(err)),
			 -EINTR);
	close(p[0]);
	close(p[1]);
}

/* ---- the answer's checks ------------------------------------------------- */

static int seen;

static int count_site(void *ctx, const struct site_found *s)
{
	(void)ctx;
	(void)s;
	seen++;
	return 0;
}

/* An answer written by sitecodec_write, then changed in one place. */
static uint8_t *encoded(size_t *len, const struct probe_site *sites, size_t n, const struct probe_spec *specs)
{
	struct probe_set ps = { .sites = (struct probe_site *)sites, .n = n };
	int p[2];
	uint8_t *buf = malloc(65536);
	ssize_t got;

	assert_int_equal(pipe(p), 0);
	assert_int_equal(sitecodec_write(p[1], 0, "", "a note", &ps, specs, 2), 0);
	close(p[1]);
	got = read(p[0], buf, 65536);
	close(p[0]);
	assert_true(got > 0);
	*len = (size_t)got;
	return buf;
}

static void lies_are_not_believed(void **state)
{
	static const struct probe_spec specs[2] = { { "libflex.so", "a", 0, -1, false },
						    { "libflex.so", "b", 0, -1, false } };
	struct ret_site rets[2] = { { 0x1010, SBT_SITE_RET, 0 }, { 0x1020, SBT_SITE_TAIL, 0 } };
	struct probe_site sites[2] = {
		{ .name = "a",
		  .symbol = "_Z1av",
		  .pattern = "a",
		  .offset = 0x1000,
		  .size = 0x40,
		  .rets = rets,
		  .nrets = 2 },
		{ .name = "b",
		  .symbol = "_Z1bv",
		  .pattern = "b",
		  .offset = 0x2000,
		  .size = 0x40,
		  .refused = (char *)"its body is a bare return" },
	};
	char err[256], cerr[64], note[64];
	int child_ret;
	size_t len;
	uint8_t *buf = encoded(&len, sites, 2, specs);

	(void)state;
	seen = 0;
	assert_int_equal(sitecodec_read(buf, len, 2, 0x10000, &child_ret, cerr, sizeof(cerr), note, sizeof(note),
					count_site, NULL, err, sizeof(err)),
			 0);
	assert_int_equal(seen, 2);
	assert_string_equal(note, "a note");
	/* a file too small for the places it names */
	assert_int_equal(sitecodec_read(buf, len, 2, 0x1800, &child_ret, cerr, sizeof(cerr), note, sizeof(note),
					count_site, NULL, err, sizeof(err)),
			 -EPROTO);
	/* a spec it was never given */
	assert_int_equal(sitecodec_read(buf, len, 1, 0x10000, &child_ret, cerr, sizeof(cerr), note, sizeof(note),
					count_site, NULL, err, sizeof(err)),
			 -EPROTO);
	/* cut short anywhere, or with a byte more */
	for (size_t cut = 0; cut < len; cut++)
		assert_int_equal(sitecodec_read(buf, cut, 2, 0x10000, &child_ret, cerr, sizeof(cerr), note,
						sizeof(note), count_site, NULL, err, sizeof(err)),
				 -EPROTO);
	free(buf);
	/* a return site past the file, a count past the cap */
	rets[1].offset = 0x20000;
	buf = encoded(&len, sites, 2, specs);
	assert_int_equal(sitecodec_read(buf, len, 2, 0x10000, &child_ret, cerr, sizeof(cerr), note, sizeof(note),
					count_site, NULL, err, sizeof(err)),
			 -EPROTO);
	assert_non_null(strstr(err, "not believed"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(child_outcomes),
		cmocka_unit_test(stopped_is_killed),
		cmocka_unit_test(lies_are_not_believed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
