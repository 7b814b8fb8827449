// SPDX-License-Identifier: GPL-2.0-only
/*
 * Golden tests of the correlation engine on synthetic captures. Each
 * scenario is fed through capture_open_mem like a file, and its model
 * (as text) must equal tests/golden/NAME.txt; its Perfetto trace must pass
 * inspect and its Chrome JSON must parse. SBT_UPDATE_GOLDEN=1 rewrites the
 * golden files (read the diff before committing it).
 */
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
#include "json_check.h"
#include "model/chrome_json.h"
#include "model/correlate.h"
#include "model/perfetto.h"
#include "model/report.h"
#include "model_text.h"
#include "offline/inspect.h"
#include "synth.h"

#define T0 1000000000ull /* 1 s after boot */
#define PID 100
#define MAP_DMA SBT_VFIO_IOMMU_MAP_DMA

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = '\0';
		*len = (size_t)n;
	}
	return buf;
}

struct result {
	struct correlate_stats st;
	char *report;
};

/* Feed the capture to the engine with every sink, and check each output. */
static struct result run(const char *name, struct synth *s)
{
	char golden[512], pf_path[64], js_path[64], err[256], *text = NULL, *rep = NULL;
	size_t text_len = 0, rep_len = 0, len, at;
	FILE *text_f = open_memstream(&text, &text_len), *rep_f = open_memstream(&rep, &rep_len);
	struct perfetto_writer *pf;
	struct chrome_writer *js;
	struct report *report = report_new();
	struct capture_reader r;
	const struct sbt_hdr *h;
	struct correlator *c;
	struct result res;
	char *buf;

	snprintf(pf_path, sizeof(pf_path), "/tmp/sbt-golden-%d.pftrace", getpid());
	snprintf(js_path, sizeof(js_path), "/tmp/sbt-golden-%d.json", getpid());
	pf = perfetto_open(pf_path, err, sizeof(err));
	js = chrome_writer_open(js_path, err, sizeof(err));
	assert_non_null(pf);
	assert_non_null(js);
	struct model_sink sinks[] = { model_text_sink(text_f), perfetto_sink(pf), chrome_writer_sink(js),
				      report_sink(report) };

	c = correlator_new(sinks, 4);
	assert_non_null(c);
	assert_int_equal(capture_open_mem(&r, s->buf, s->len), 0);
	while (capture_next(&r, &h) == CAPTURE_OK)
		assert_int_equal(correlator_add(c, h), 0);
	correlator_finish(c);
	res.st = *correlator_stats(c);
	report_print(rep_f, report, &res.st);
	fclose(rep_f);
	res.report = rep;
	fclose(text_f);
	assert_int_equal(perfetto_close(pf), 0);
	assert_int_equal(chrome_writer_close(js), 0);

	/* 1. the model equals the golden file */
	snprintf(golden, sizeof(golden), "%s/tests/golden/%s.txt", getenv("SBT_SRC") ? getenv("SBT_SRC") : ".", name);
	if (getenv("SBT_UPDATE_GOLDEN")) {
		FILE *g = fopen(golden, "w");

		assert_non_null(g);
		fwrite(text, 1, text_len, g);
		fclose(g);
	}
	buf = slurp(golden, &len);
	if (!buf)
		fail_msg("no golden file %s; hint: SBT_UPDATE_GOLDEN=1 make unit", golden);
	if (len != text_len || memcmp(buf, text, len)) {
		fprintf(stderr, "--- golden %s\n%s\n--- got\n%s\n", golden, buf, text);
		fail_msg("%s: model differs from its golden file", name);
	}
	free(buf);
	free(text);
	/* 2. the Perfetto trace passes inspect */
	buf = slurp(pf_path, &len);
	assert_non_null(buf);
	struct inspect_result ir = { .out = stderr };

	if (inspect_buffer((const uint8_t *)buf, len, &ir))
		fail_msg("%s: Perfetto trace has %llu violations", name, (unsigned long long)ir.violations);
	assert_true(ir.packets > 0);
	free(buf);
	/* 3. the Chrome JSON parses */
	buf = slurp(js_path, &len);
	assert_non_null(buf);
	if (json_check(buf, len, &at))
		fail_msg("%s: invalid JSON at byte %zu: %.40s", name, at, buf + at);
	free(buf);
	unlink(pf_path);
	unlink(js_path);
	correlator_free(c);
	report_free(report);
	return res;
}

static void begin(struct synth *s)
{
	synth_init(s);
	synth_clock(s, T0);
	synth_proc(s, T0, PID, "infer");
	synth_spyre_probes(s);
	synth_thread_name(s, PID, PID, "infer");
}

static void nested_calls(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_end(&s, synth_job(&s, T0 + 1000, PID, PID, 65536, 0x100000));
	r = run("nested_calls", &s);
	assert_int_equal(r.st.calls, 13);
	assert_int_equal(r.st.ioctls, 2);
	assert_int_equal(r.st.jobs, 3); /* launchCompute > launchOperation is one job */
	assert_int_equal(r.st.unfinished_calls + r.st.unfinished_jobs + r.st.unpaired_returns, 0);
	assert_non_null(strstr(r.report, "flex::RuntimeStream::synchronize"));
	assert_non_null(strstr(r.report, "H2D DMA"));
	free(r.report);
	synth_free(&s);
}

static void ioctl_errors(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_ioctl(&s, T0 + 100, T0 + 900, PID, PID, 5, SBT_FD_PATH, MAP_DMA, -25, 0x1000, 4096);
	synth_ioctl(&s, T0 + 1000, T0 + 1500, PID, PID, 6, SBT_FD_DEVICE, SBT_VFIO_DEVICE_SET_IRQS, -22, 0, 0);
	synth_ioctl(&s, T0 + 2000, T0 + 2100, PID, PID, 6, SBT_FD_DEVICE, 0x5401, -25, 0, 0);
	/* the same number as MAP_DMA, on a device fd, is PCI_HOT_RESET */
	synth_ioctl(&s, T0 + 3000, T0 + 3100, PID, PID, 6, SBT_FD_DEVICE, MAP_DMA, 0, 0, 0);
	synth_end(&s, T0 + 4000);
	r = run("ioctl_errors", &s);
	assert_int_equal(r.st.ioctls, 4);
	assert_int_equal(r.st.ioctl_errors, 3);
	assert_non_null(strstr(r.report, "VFIO_IOMMU_MAP_DMA ENOTTY"));
	assert_non_null(strstr(r.report, "VFIO_DEVICE_SET_IRQS EINVAL"));
	assert_non_null(strstr(r.report, "ioctl ENOTTY"));
	free(r.report);
	synth_free(&s);
}

static void lost_records(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	uint64_t t = synth_job(&s, T0 + 1000, PID, PID, 4096, 0x100000);

	/* the entry of this launch was lost: its return has no entry */
	synth_lost(&s, t + 10, 5, 5);
	synth_exit(&s, t + 5000, PID, PID, 2, 0, 0, 0);
	synth_end(&s, t + 6000);
	r = run("lost_records", &s);
	assert_int_equal(r.st.lost, 5);
	assert_int_equal(r.st.unpaired_returns, 1);
	assert_non_null(strstr(r.report, "WARNING: 5 records lost"));
	assert_non_null(strstr(r.report, "1 returns without entry"));
	free(r.report);
	synth_free(&s);
}

static void lost_returns(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	/* a submit whose return was lost, then one whose entry was lost: the
	 * second must not pair with the first's stale entry */
	synth_enter(&s, T0 + 100, PID, PID, 3, 0, 0, 1, 0);
	synth_exit(&s, T0 + 400, PID, PID, 3, 0, T0 + 300, 1);
	/* a launch whose callee lost its return */
	synth_enter(&s, T0 + 500, PID, PID, 2, 0, 0, 0, 4096);
	synth_enter(&s, T0 + 600, PID, PID, 3, 1, 0, 1, 0);
	synth_exit(&s, T0 + 900, PID, PID, 2, 0, T0 + 500, 0);
	synth_end(&s, T0 + 1000);
	r = run("lost_returns", &s);
	assert_int_equal(r.st.unfinished_calls, 2); /* both submits that never returned */
	assert_int_equal(r.st.unpaired_returns, 1); /* the submit whose entry was lost */
	assert_int_equal(r.st.calls, 2);
	free(r.report);
	synth_free(&s);
}

static void completion_without_launch(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_device(&s, PID, "0000:3a:00.0");
	synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
	synth_irq(&s, T0 + 500, T0 + 700, 40);
	synth_end(&s, T0 + 1000);
	r = run("completion_without_launch", &s);
	assert_int_equal(r.st.irqs, 1);
	assert_int_equal(r.st.unmatched_completions, 1);
	assert_non_null(strstr(r.report, "1 interrupts with no job in flight"));
	free(r.report);
	synth_free(&s);
}

static void interrupt_completes_job(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_device(&s, PID, "0000:3a:00.0");
	synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
	/* launchH2D, the card interrupts, synchronize returns */
	synth_enter(&s, T0 + 100, PID, PID, 2, 0, 0x10000, 0x20000, 8192);
	synth_exit(&s, T0 + 2000, PID, PID, 2, 0, T0 + 100, 0);
	synth_enter(&s, T0 + 3000, PID, PID, 7, 0, 0, 0, 0);
	synth_irq(&s, T0 + 50000, T0 + 52000, 40);
	synth_exit(&s, T0 + 60000, PID, PID, 7, 0, T0 + 3000, 0);
	synth_end(&s, T0 + 70000);
	r = run("interrupt_completes_job", &s);
	assert_int_equal(r.st.jobs, 1);
	assert_int_equal(r.st.unmatched_completions + r.st.unfinished_jobs, 0);
	assert_non_null(strstr(r.report, "PCI 0000:3a:00.0"));
	free(r.report);
	synth_free(&s);
}

/* Driver-level records: vfio's functions inside the ioctls that called
 * them, the DMA-mapped counter from the driver (counted once, not again by
 * the ioctl around it), the MSI handler inside its interrupt. */
static void driver_level(void **state)
{
	const uint32_t card = 0x3a << 8; /* 0000:3a:00.0 */
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_device(&s, PID, "0000:3a:00.0");
	synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
	/* Map (runtime) > MAP_DMA ioctl > container ioctl > type1 > pinning */
	synth_enter(&s, T0 + 100, PID, PID, 1, 0, 0x7f0000100000, 8192, 0x100000);
	synth_drv(&s, T0 + 400, T0 + 900, PID, PID, SBT_DRV_PIN_PAGES, 0, card, 2, 2, 0x7f0000100000, 2, 0);
	synth_drv(&s, T0 + 300, T0 + 1200, PID, PID, SBT_DRV_TYPE1_IOCTL, SBT_VFIO_IOMMU_MAP_DMA, card, 1, 0, 0x100000,
		  8192, 0x7f0000100000);
	synth_drv(&s, T0 + 250, T0 + 1300, PID, PID, SBT_DRV_CONTAINER_IOCTL, SBT_VFIO_IOMMU_MAP_DMA, SBT_BDF_NONE, 0,
		  0, 0, 0, 0);
	synth_ioctl(&s, T0 + 200, T0 + 1400, PID, PID, 4, SBT_FD_CONTAINER, SBT_VFIO_IOMMU_MAP_DMA, 0, 0x100000, 8192);
	synth_exit(&s, T0 + 1500, PID, PID, 1, 0, T0 + 100, 0);
	/* a device ioctl that failed in the driver */
	synth_drv(&s, T0 + 2100, T0 + 2200, PID, PID, SBT_DRV_DEVICE_IOCTL, SBT_VFIO_IO(11), card, 0, -22, 0, 0, 0);
	synth_ioctl(&s, T0 + 2000, T0 + 2300, PID, PID, 6, SBT_FD_DEVICE, SBT_VFIO_IO(11), -22, 0, 0);
	/* launchH2D; the card's MSI handler runs inside its interrupt; wait */
	synth_enter(&s, T0 + 3000, PID, PID, 2, 0, 0x10000, 0x20000, 8192);
	synth_exit(&s, T0 + 4000, PID, PID, 2, 0, T0 + 3000, 0);
	synth_enter(&s, T0 + 5000, PID, PID, 7, 0, 0, 0, 0);
	synth_drv(&s, T0 + 50500, T0 + 51500, 0, 0, SBT_DRV_MSI, 0, card, 1, 1, 40, 0, 0);
	synth_irq(&s, T0 + 50000, T0 + 52000, 40);
	synth_exit(&s, T0 + 60000, PID, PID, 7, 0, T0 + 5000, 0);
	/* unmapped again: the counter returns to 0 */
	synth_drv(&s, T0 + 61000, T0 + 62000, PID, PID, SBT_DRV_TYPE1_IOCTL, SBT_VFIO_IOMMU_UNMAP_DMA, card, 0, 0,
		  0x100000, 8192, 0);
	synth_ioctl(&s, T0 + 60500, T0 + 62500, PID, PID, 4, SBT_FD_CONTAINER, SBT_VFIO_IOMMU_UNMAP_DMA, 0, 0x100000,
		    8192);
	synth_end(&s, T0 + 70000);
	r = run("driver_level", &s);
	assert_int_equal(r.st.driver_calls, 6);
	/* the report's own table, one row per function and command */
	assert_non_null(strstr(r.report, "# vfio function (driver level)"));
	{
		static const char map_row[] = "\n  vfio_iommu_type1_ioctl VFIO_IOMMU_MAP_DMA ";
		const char *row = strstr(r.report, map_row);
		unsigned long calls = 0;
		double total_ms = 0;

		assert_non_null(row);
		assert_int_equal(sscanf(row + sizeof(map_row) - 1, "%lu %lf", &calls, &total_ms), 2);
		assert_int_equal(calls, 1);
		assert_true(total_ms > 0.0008 && total_ms < 0.0011); /* 900 ns */
	}
	assert_non_null(strstr(r.report, "\n  vfio_msihandler "));
	assert_int_equal(r.st.jobs, 1);
	assert_int_equal(r.st.unmatched_completions + r.st.unfinished_jobs, 0);
	free(r.report);
	synth_free(&s);
}

/* The JSON writer escapes what JSON needs escaped and writes numbers as
 * printf did: every kind of value once, checked byte for byte. */
static void json_values(void **state)
{
	char path[] = "/tmp/sbt-json-XXXXXX", err[128], *text;
	struct model_track t = { .id = 1, .kind = TRACK_THREAD, .pid = 7, .tid = 8, .name = "a\"b\\c\001d" };
	struct model_event e = {
		.kind = EV_SLICE, .track = &t, .ts = 1234567, .dur = 5, .name = "x", .cat = "c", .nargs = 5
	};
	struct chrome_writer *w;
	struct model_sink k;
	size_t len, at;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	e.args[0] = (struct model_arg){ .name = "u", .type = ARG_UINT, .u = UINT64_MAX };
	e.args[1] = (struct model_arg){ .name = "i", .type = ARG_INT, .i = INT64_MIN };
	e.args[2] = (struct model_arg){ .name = "h", .type = ARG_HEX, .u = 0xdeadbeef0 };
	e.args[3] = (struct model_arg){ .name = "s", .type = ARG_STR, .s = "tab\there" };
	/* a string that stays (written from the name cache) */
	e.args[4] = (struct model_arg){ .name = "f", .type = ARG_STR, .fixed = true, .s = "tab\there" };
	w = chrome_writer_open(path, err, sizeof(err));
	assert_non_null(w);
	k = chrome_writer_sink(w);
	k.track(k.ctx, &t);
	k.event(k.ctx, &e);
	/* names are written from a cache by their address: each twice, one
	 * that needs escaping, one longer than the cache holds, and a
	 * "runtime" category shown as kineto names it */
	for (int i = 0; i < 2; i++) {
		struct model_event f = {
			.kind = EV_INSTANT, .track = &t, .ts = 9, .cat = "runtime", .name = "q\"\xc3\xa9\xff<"
		};

		k.event(k.ctx, &f);
		f.name = "a name longer than the cache keeps for one: sixty-four bytes and more";
		f.cat = NULL;
		k.event(k.ctx, &f);
	}
	assert_int_equal(chrome_writer_close(w), 0);
	text = slurp(path, &len);
	unlink(path);
	assert_non_null(text);
	assert_int_equal(json_check(text, len, &at), 0);
	for (int i = 0; i < 2; i++) {
		const char *want[] = {
			"{\"ph\":\"i\",\"name\":\"q\\\"\xc3\xa9\\ufffd<\",\"cat\":\"cuda_runtime\",\"pid\":7,",
			"{\"ph\":\"i\",\"name\":\"a name longer than the cache keeps for one: sixty-four "
			"bytes and more\",\"cat\":\"\",\"pid\":7,"
		};
		const char *one = strstr(text, want[i]);

		assert_non_null(one);
		assert_non_null(strstr(one + 1, want[i])); /* and again, from the cache */
	}
	assert_non_null(strstr(text, "\"name\":\"a\\\"b\\\\c\\u0001d\""));
	assert_non_null(strstr(text, "{\"ph\":\"X\",\"name\":\"x\",\"cat\":\"c\",\"pid\":7,\"tid\":8,"
				     "\"ts\":1234.567,\"dur\":0.005,\"args\":{\"u\":18446744073709551615,"
				     "\"i\":-9223372036854775808,\"h\":\"0xdeadbeef0\",\"s\":\"tab\\u0009here\","
				     "\"f\":\"tab\\u0009here\"}}"));
	free(text);
}

/* Numbers as printf writes them, at every length: the writer makes their
 * digits itself, eight at a time (a time's whole seconds once for all the
 * times in that second). Each value once as an arg and as a ts. */
static void json_numbers(void **state)
{
	char path[] = "/tmp/sbt-json-XXXXXX", err[128], want[64], *text, *at;
	struct model_track t = { .id = 1, .kind = TRACK_THREAD, .pid = 7, .tid = 8, .name = "t" };
	struct model_event e = { .kind = EV_SLICE, .track = &t, .name = "x", .cat = "c", .nargs = 1 };
	uint64_t vals[64];
	int n = 0, fd = mkstemp(path);
	struct chrome_writer *w;
	struct model_sink k;
	size_t len;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	for (uint64_t p10 = 1, k10 = 0; k10 < 20; k10++, p10 *= 10) {
		vals[n++] = p10 - 1;
		vals[n++] = p10;
	}
	vals[n++] = UINT64_MAX;
	vals[n++] = 100000000ull * 100000000ull - 1;
	/* times in one second, then back a second, then into it again: the
	 * writer keeps the seconds' digits of the last */
	vals[n++] = 5000000001ull;
	vals[n++] = 5999999999ull;
	vals[n++] = 4000000007ull;
	vals[n++] = 5000123456ull;
	vals[n++] = 86400000001000ull;
	w = chrome_writer_open(path, err, sizeof(err));
	assert_non_null(w);
	k = chrome_writer_sink(w);
	k.track(k.ctx, &t);
	for (int i = 0; i < n; i++) {
		e.ts = vals[i];
		e.args[0] = (struct model_arg){ .name = "u", .type = ARG_UINT, .u = vals[i] };
		k.event(k.ctx, &e);
	}
	assert_int_equal(chrome_writer_close(w), 0);
	text = slurp(path, &len);
	unlink(path);
	assert_non_null(text);
	at = text;
	for (int i = 0; i < n; i++) {
		snprintf(want, sizeof(want), "\"ts\":%llu.%03llu,", (unsigned long long)(vals[i] / 1000),
			 (unsigned long long)(vals[i] % 1000));
		if (!(at = strstr(at, want)))
			fail_msg("ts of %llu: no %s", (unsigned long long)vals[i], want);
		snprintf(want, sizeof(want), "\"u\":%llu}", (unsigned long long)vals[i]);
		if (!(at = strstr(at, want)))
			fail_msg("arg %llu: no %s", (unsigned long long)vals[i], want);
	}
	free(text);
}

/* A thread's record over a second before its newest cannot be true and
 * is dropped, whichever threads' records came between; another thread
 * half a second back is its own and kept. */
static void thread_going_back(void **state)
{
	const uint64_t s1 = 1000000000ull;
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_thread_name(&s, PID, PID + 1, "infer-2");
	synth_enter(&s, T0 + 3 * s1, PID, PID, 7, 0, 0, 0, 0);
	synth_exit(&s, T0 + 3 * s1 + 1000, PID, PID, 7, 0, T0 + 3 * s1, 0);
	synth_enter(&s, T0 + 3 * s1 + 2000, PID, PID + 1, 7, 0, 0, 0, 0);
	synth_exit(&s, T0 + 3 * s1 + 3000, PID, PID + 1, 7, 0, T0 + 3 * s1 + 2000, 0);
	synth_enter(&s, T0 + s1, PID, PID, 7, 0, 0, 0, 0); /* two seconds back */
	synth_enter(&s, T0 + 3 * s1 - s1 / 2, PID, PID + 1, 7, 0, 0, 0, 0); /* half a second */
	synth_end(&s, T0 + 4 * s1);
	r = run("thread_going_back", &s);
	assert_int_equal(r.st.implausible, 1);
	assert_int_equal(r.st.calls, 2);
	free(r.report);
	synth_free(&s);
}

static void launch_without_completion(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_enter(&s, T0 + 100, PID, PID, 2, 0, 0x10000, 0x20000, 4096);
	synth_exit(&s, T0 + 900, PID, PID, 2, 0, T0 + 100, 0);
	/* synchronize is still waiting when the trace ends */
	synth_enter(&s, T0 + 1000, PID, PID, 7, 0, 0, 0, 0);
	synth_end(&s, T0 + 5000);
	r = run("launch_without_completion", &s);
	assert_int_equal(r.st.unfinished_jobs, 1);
	assert_int_equal(r.st.unfinished_calls, 1);
	free(r.report);
	synth_free(&s);
}

/* The trace ends inside a launch call (Ctrl-C): the call's mark and the
 * job's mark are the two ends of the job's flow. */
static void launch_cut_short(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_enter(&s, T0 + 100, PID, PID, 2, 0, 0x10000, 0x20000, 4096);
	synth_end(&s, T0 + 5000);
	r = run("launch_cut_short", &s);
	assert_int_equal(r.st.unfinished_calls, 1);
	assert_int_equal(r.st.unfinished_jobs, 1);
	free(r.report);
	synth_free(&s);
}

static void pid_reuse(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	uint64_t t = synth_job(&s, T0 + 1000, PID, PID, 4096, 0x100000);

	synth_task(&s, SBT_TASK_EXIT, t, PID, PID, 0, 1, "infer");
	/* a new process gets the same pid */
	synth_task(&s, SBT_TASK_NEW, t + 1000, PID, PID, 1, 1, "train");
	t = synth_job(&s, t + 2000, PID, PID, 8192, 0x200000);
	synth_end(&s, t);
	r = run("pid_reuse", &s);
	assert_int_equal(r.st.jobs, 6);
	free(r.report);
	synth_free(&s);
}

static void two_devices(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_proc(&s, T0, PID + 1, "infer2");
	synth_device(&s, PID, "0000:3a:00.0");
	synth_device(&s, PID + 1, "0000:3b:00.0");
	synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
	synth_irq_info(&s, 41, "vfio-msi[0](0000:3b:00.0)");
	synth_enter(&s, T0 + 100, PID, PID, 2, 0, 0, 0, 4096);
	synth_exit(&s, T0 + 500, PID, PID, 2, 0, T0 + 100, 0);
	synth_enter(&s, T0 + 200, PID + 1, PID + 1, 6, 0, 0, 0, 8192);
	synth_exit(&s, T0 + 600, PID + 1, PID + 1, 6, 0, T0 + 200, 0);
	/* the second card finishes first */
	synth_irq(&s, T0 + 3000, T0 + 3100, 41);
	synth_irq(&s, T0 + 4000, T0 + 4100, 40);
	synth_end(&s, T0 + 5000);
	r = run("two_devices", &s);
	assert_int_equal(r.st.jobs, 2);
	assert_int_equal(r.st.unmatched_completions + r.st.unfinished_jobs, 0);
	assert_non_null(strstr(r.report, "PCI 0000:3a:00.0"));
	assert_non_null(strstr(r.report, "PCI 0000:3b:00.0"));
	free(r.report);
	synth_free(&s);
}

/* One process, two cards, a stream each: a job goes to the card whose
 * interrupt woke the wait on its stream (through the card's completion
 * thread), even though it was launched before that was known, and that
 * card's interrupt completes it; a wake-up of a thread in no wait says
 * nothing; a stream that never waited keeps its job on the process's
 * own device. The wake-ups come just before their interrupts, as the
 * loader's reorder puts them; the second card becomes known after the
 * first jobs were launched (the daemon describes cards as it learns). */
static void streams_on_cards(void **state)
{
	const uint64_t sa = 0xa000, sb = 0xb000, sc = 0xc000;
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_thread_name(&s, PID, PID + 1, "infer-b");
	synth_device(&s, PID, "0000:3a:00.0");
	synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
	synth_irq_info(&s, 41, "vfio-msi[0](0000:3b:00.0)");
	synth_enter_on(&s, T0 + 100, PID, PID, P_H2D, 0, sa, 0, 0, 4096);
	synth_exit(&s, T0 + 500, PID, PID, P_H2D, 0, T0 + 100, 0);
	synth_enter_on(&s, T0 + 200, PID, PID + 1, P_H2D, 0, sb, 0, 0, 8192);
	synth_exit(&s, T0 + 600, PID, PID + 1, P_H2D, 0, T0 + 200, 0);
	/* its second card is known only now: the jobs it launched on "its
	 * card" go back to its own device until their streams' cards are */
	synth_device(&s, PID, "0000:3b:00.0");
	synth_enter_on(&s, T0 + 700, PID, PID, P_SYNC, 0, sa, 0, 0, 0);
	synth_enter_on(&s, T0 + 800, PID, PID + 1, P_SYNC, 0, sb, 0, 0, 0);
	/* the second card finishes first: its completion thread, then B */
	synth_wake(&s, T0 + 3050, PID, PID + 2, 41, T0 + 3000, 0, 0);
	synth_wake(&s, T0 + 3200, PID, PID + 1, 41, T0 + 3000, 1, PID + 2);
	synth_irq(&s, T0 + 3000, T0 + 3100, 41);
	synth_exit(&s, T0 + 3300, PID, PID + 1, P_SYNC, 0, T0 + 800, 0);
	synth_wake(&s, T0 + 4050, PID, PID + 3, 40, T0 + 4000, 0, 0);
	synth_wake(&s, T0 + 4150, PID, PID, 40, T0 + 4000, 1, PID + 3);
	synth_irq(&s, T0 + 4000, T0 + 4100, 40);
	synth_exit(&s, T0 + 4200, PID, PID, P_SYNC, 0, T0 + 700, 0);
	/* a stream that never waits: no card known for it */
	synth_enter_on(&s, T0 + 4500, PID, PID + 4, P_H2D, 0, sc, 0, 0, 1024);
	synth_exit(&s, T0 + 4600, PID, PID + 4, P_H2D, 0, T0 + 4500, 0);
	synth_end(&s, T0 + 5000);
	r = run("streams_on_cards", &s);
	assert_int_equal(r.st.jobs, 3);
	assert_int_equal(r.st.streams_on_cards, 2);
	assert_int_equal(r.st.unmatched_completions, 0);
	assert_int_equal(r.st.jobs_without_card, 0);
	assert_int_equal(r.st.unfinished_jobs, 1);
	assert_non_null(strstr(r.report, "# PCI 0000:3a:00.0"));
	assert_non_null(strstr(r.report, "# PCI 0000:3b:00.0"));
	free(r.report);
	synth_free(&s);
}

/* A stream whose wait the other card's interrupt wakes is that card's from
 * then on (the newest evidence wins: a runtime may move a stream), its job
 * in flight with it; what the first card completed stays there. */
static void stream_changes_card(void **state)
{
	const uint64_t sa = 0xa000;
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_device(&s, PID, "0000:3a:00.0");
	synth_device(&s, PID, "0000:3b:00.0");
	synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
	synth_irq_info(&s, 41, "vfio-msi[0](0000:3b:00.0)");
	synth_enter_on(&s, T0 + 100, PID, PID, P_H2D, 0, sa, 0, 0, 4096);
	synth_exit(&s, T0 + 200, PID, PID, P_H2D, 0, T0 + 100, 0);
	synth_enter_on(&s, T0 + 300, PID, PID, P_SYNC, 0, sa, 0, 0, 0);
	synth_wake(&s, T0 + 1050, PID, PID, 40, T0 + 1000, 0, 0);
	synth_irq(&s, T0 + 1000, T0 + 1100, 40);
	synth_exit(&s, T0 + 1200, PID, PID, P_SYNC, 0, T0 + 300, 0);
	synth_enter_on(&s, T0 + 2000, PID, PID, P_H2D, 0, sa, 0, 0, 8192);
	synth_exit(&s, T0 + 2100, PID, PID, P_H2D, 0, T0 + 2000, 0);
	synth_enter_on(&s, T0 + 2200, PID, PID, P_SYNC, 0, sa, 0, 0, 0);
	synth_wake(&s, T0 + 3050, PID, PID, 41, T0 + 3000, 0, 0);
	synth_irq(&s, T0 + 3000, T0 + 3100, 41);
	synth_exit(&s, T0 + 3200, PID, PID, P_SYNC, 0, T0 + 2200, 0);
	synth_end(&s, T0 + 5000);
	r = run("stream_changes_card", &s);
	assert_int_equal(r.st.jobs, 2);
	assert_int_equal(r.st.streams_on_cards, 2);
	assert_int_equal(r.st.unmatched_completions + r.st.unfinished_jobs + r.st.jobs_without_card, 0);
	assert_non_null(strstr(r.report, "# PCI 0000:3a:00.0"));
	assert_non_null(strstr(r.report, "# PCI 0000:3b:00.0"));
	free(r.report);
	synth_free(&s);
}

/* How many of the cards' jobs the report says only a wait ended. */
static unsigned long ended_by_wait(const char *report)
{
	const char *key = "jobs ended by a wait (no interrupt seen)";
	unsigned long n = 0;

	for (const char *at = report; (at = strstr(at, key)); at += strlen(key))
		n += strtoul(at + strlen(key), NULL, 10);
	return n;
}

/* One process, two cards, a stream each, three jobs each (H2D, compute,
 * D2H, then a wait). Stream B's wait is woken by card 3b from the first
 * job; stream A's thread is not asleep when 3a finishes its first two
 * jobs (no wake-up), only for the third: 3a's first two interrupts find
 * no job in its queue and are held until A is put on 3a; then every job
 * of A ends by its own interrupt, in order. */
static void held_until_woken(void **state)
{
	const uint64_t sa = 0xa000, sb = 0xb000;
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_thread_name(&s, PID, PID + 1, "infer-b");
	synth_device(&s, PID, "0000:3a:00.0");
	synth_device(&s, PID, "0000:3b:00.0");
	synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
	synth_irq_info(&s, 41, "vfio-msi[0](0000:3b:00.0)");
	for (int k = 0; k < 3; k++) {
		static const int probes[3] = { P_H2D, P_COMPUTE, P_D2H };

		synth_enter_on(&s, T0 + 100 + k * 10, PID, PID, probes[k], 0, sa, 0, 0, 4096);
		synth_exit(&s, T0 + 105 + k * 10, PID, PID, probes[k], 0, T0 + 100 + k * 10, 0);
		synth_enter_on(&s, T0 + 200 + k * 10, PID, PID + 1, probes[k], 0, sb, 0, 0, 4096);
		synth_exit(&s, T0 + 205 + k * 10, PID, PID + 1, probes[k], 0, T0 + 200 + k * 10, 0);
	}
	synth_enter_on(&s, T0 + 300, PID, PID, P_SYNC, 0, sa, 0, 0, 0);
	synth_enter_on(&s, T0 + 310, PID, PID + 1, P_SYNC, 0, sb, 0, 0, 0);
	/* 3a: no wake-up for A; 3b: B woken through its completion thread */
	synth_irq(&s, T0 + 1000, T0 + 1100, 40);
	synth_wake(&s, T0 + 1050, PID, PID + 3, 41, T0 + 1000, 0, 0);
	synth_wake(&s, T0 + 1200, PID, PID + 1, 41, T0 + 1000, 1, PID + 3);
	synth_irq(&s, T0 + 1000, T0 + 1100, 41);
	synth_irq(&s, T0 + 2000, T0 + 2100, 40);
	synth_irq(&s, T0 + 2000, T0 + 2100, 41);
	synth_irq(&s, T0 + 3000, T0 + 3100, 41);
	synth_exit(&s, T0 + 3200, PID, PID + 1, P_SYNC, 0, T0 + 310, 0);
	/* A asleep at last: 3a's third interrupt wakes it */
	synth_wake(&s, T0 + 3550, PID, PID + 2, 40, T0 + 3500, 0, 0);
	synth_wake(&s, T0 + 3650, PID, PID, 40, T0 + 3500, 1, PID + 2);
	synth_irq(&s, T0 + 3500, T0 + 3600, 40);
	synth_exit(&s, T0 + 3700, PID, PID, P_SYNC, 0, T0 + 300, 0);
	synth_end(&s, T0 + 5000);
	r = run("held_until_woken", &s);
	assert_int_equal(r.st.jobs, 6);
	assert_int_equal(r.st.streams_on_cards, 2);
	assert_int_equal(r.st.streams_by_elimination, 0);
	assert_int_equal(r.st.irqs_held, 2);
	assert_int_equal(r.st.unmatched_completions + r.st.unfinished_jobs + r.st.jobs_without_card, 0);
	assert_int_equal(ended_by_wait(r.report), 0);
	free(r.report);
	synth_free(&s);
}

/* As above, but A is never asleep when 3a finishes (no wake-up at all):
 * its wait returns with its jobs on no card; of its process's cards only
 * 3a raised interrupts that found no job meanwhile, so A is 3a's and those
 * interrupts end its jobs. With no wake-up at all and both cards done
 * before either wait returns, that is ambiguous: the waits end the jobs,
 * the interrupts found none (counted, never guessed). */
static void card_by_elimination(void **state)
{
	for (int both = 0; both < 2; both++) {
		const uint64_t sa = 0xa000, sb = 0xb000;
		struct synth s;
		struct result r;

		(void)state;
		begin(&s);
		synth_thread_name(&s, PID, PID + 1, "infer-b");
		synth_device(&s, PID, "0000:3a:00.0");
		synth_device(&s, PID, "0000:3b:00.0");
		synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
		synth_irq_info(&s, 41, "vfio-msi[0](0000:3b:00.0)");
		synth_enter_on(&s, T0 + 100, PID, PID, P_H2D, 0, sa, 0, 0, 4096);
		synth_exit(&s, T0 + 105, PID, PID, P_H2D, 0, T0 + 100, 0);
		synth_enter_on(&s, T0 + 110, PID, PID, P_D2H, 0, sa, 0, 0, 4096);
		synth_exit(&s, T0 + 115, PID, PID, P_D2H, 0, T0 + 110, 0);
		synth_enter_on(&s, T0 + 200, PID, PID + 1, P_H2D, 0, sb, 0, 0, 4096);
		synth_exit(&s, T0 + 205, PID, PID + 1, P_H2D, 0, T0 + 200, 0);
		synth_enter_on(&s, T0 + 300, PID, PID + 1, P_SYNC, 0, sb, 0, 0, 0);
		if (!both) { /* B's wait woken by 3b */
			synth_wake(&s, T0 + 950, PID, PID + 3, 41, T0 + 900, 0, 0);
			synth_wake(&s, T0 + 960, PID, PID + 1, 41, T0 + 900, 1, PID + 3);
		}
		synth_irq(&s, T0 + 900, T0 + 1000, 41);
		if (!both)
			synth_exit(&s, T0 + 1100, PID, PID + 1, P_SYNC, 0, T0 + 300, 0);
		synth_irq(&s, T0 + 2000, T0 + 2100, 40);
		synth_irq(&s, T0 + 3000, T0 + 3100, 40);
		/* both cards finished before either wait returned */
		if (both)
			synth_exit(&s, T0 + 3150, PID, PID + 1, P_SYNC, 0, T0 + 300, 0);
		/* A's wait starts after its card finished: nothing wakes it */
		synth_enter_on(&s, T0 + 3200, PID, PID, P_SYNC, 0, sa, 0, 0, 0);
		synth_exit(&s, T0 + 3300, PID, PID, P_SYNC, 0, T0 + 3200, 0);
		synth_end(&s, T0 + 5000);
		r = run(both ? "card_by_elimination_ambiguous" : "card_by_elimination", &s);
		assert_int_equal(r.st.jobs, 3);
		assert_int_equal(r.st.unfinished_jobs, 0);
		if (!both) {
			assert_int_equal(r.st.streams_on_cards, 2);
			assert_int_equal(r.st.streams_by_elimination, 1);
			assert_int_equal(r.st.irqs_held, 2);
			assert_int_equal(r.st.unmatched_completions + r.st.jobs_without_card, 0);
			assert_int_equal(ended_by_wait(r.report), 0);
		} else {
			assert_int_equal(r.st.streams_on_cards, 0);
			assert_int_equal(r.st.unmatched_completions, 3);
			assert_int_equal(r.st.jobs_without_card, 3);
		}
		free(r.report);
		synth_free(&s);
	}
}

/* A container per card: the driver mapped each stream's buffer in its
 * card's own container, so a launch given that buffer puts the stream on
 * the card at once, no wake-up needed (--no-wake-hook, or a polling
 * runtime); each card's interrupt ends its own job, none is held. */
static void card_by_mapping(void **state)
{
	const uint64_t sa = 0xa000, sb = 0xb000, va = 0x7f0000100000, vb = 0x7f0000200000;
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_thread_name(&s, PID, PID + 1, "infer-b");
	synth_device(&s, PID, "0000:3a:00.0");
	synth_device(&s, PID, "0000:3b:00.0");
	synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
	synth_irq_info(&s, 41, "vfio-msi[0](0000:3b:00.0)");
	synth_drv(&s, T0 + 10, T0 + 20, PID, PID, SBT_DRV_TYPE1_IOCTL, SBT_VFIO_IOMMU_MAP_DMA, 0x3a << 8, 1, 0,
		  0x100000, 4096, va);
	synth_drv(&s, T0 + 30, T0 + 40, PID, PID + 1, SBT_DRV_TYPE1_IOCTL, SBT_VFIO_IOMMU_MAP_DMA, 0x3b << 8, 1, 0,
		  0x100000, 4096, vb);
	synth_enter_on(&s, T0 + 100, PID, PID, P_H2D, 0, sa, va, 0x5000, 4096);
	synth_exit(&s, T0 + 105, PID, PID, P_H2D, 0, T0 + 100, 0);
	synth_enter_on(&s, T0 + 200, PID, PID + 1, P_D2H, 0, sb, 0x6000, vb, 4096);
	synth_exit(&s, T0 + 205, PID, PID + 1, P_D2H, 0, T0 + 200, 0);
	synth_enter_on(&s, T0 + 300, PID, PID, P_SYNC, 0, sa, 0, 0, 0);
	synth_enter_on(&s, T0 + 310, PID, PID + 1, P_SYNC, 0, sb, 0, 0, 0);
	/* 3b finishes first */
	synth_irq(&s, T0 + 1000, T0 + 1100, 41);
	synth_irq(&s, T0 + 2000, T0 + 2100, 40);
	synth_exit(&s, T0 + 2200, PID, PID + 1, P_SYNC, 0, T0 + 310, 0);
	synth_exit(&s, T0 + 2300, PID, PID, P_SYNC, 0, T0 + 300, 0);
	synth_end(&s, T0 + 5000);
	r = run("card_by_mapping", &s);
	assert_int_equal(r.st.jobs, 2);
	assert_int_equal(r.st.streams_on_cards, 2);
	assert_int_equal(r.st.streams_by_mapping, 2);
	assert_int_equal(r.st.irqs_held, 0);
	assert_int_equal(r.st.unmatched_completions + r.st.unfinished_jobs + r.st.jobs_without_card, 0);
	assert_int_equal(ended_by_wait(r.report), 0);
	free(r.report);
	synth_free(&s);
}

static void overlapping_jobs(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	/* three copies in flight at once, then one synchronize */
	for (int i = 0; i < 3; i++) {
		synth_enter(&s, T0 + 100 + i * 1000, PID, PID, 2, 0, 0, 0, 4096u << i);
		synth_exit(&s, T0 + 600 + i * 1000, PID, PID, 2, 0, T0 + 100 + i * 1000, 0);
	}
	synth_enter(&s, T0 + 5000, PID, PID, 7, 0, 0, 0, 0);
	synth_exit(&s, T0 + 9000, PID, PID, 7, 0, T0 + 5000, 0);
	/* and one more that starts after the others ended: back on lane 1 */
	synth_enter(&s, T0 + 10000, PID, PID, 2, 0, 0, 0, 4096);
	synth_exit(&s, T0 + 10500, PID, PID, 2, 0, T0 + 10000, 0);
	synth_enter(&s, T0 + 11000, PID, PID, 7, 0, 0, 0, 0);
	synth_exit(&s, T0 + 12000, PID, PID, 7, 0, T0 + 11000, 0);
	synth_end(&s, T0 + 13000);
	r = run("overlapping_jobs", &s);
	assert_int_equal(r.st.jobs, 4);
	free(r.report);
	synth_free(&s);
}

/* DMA sizes a damaged capture can carry: the DMA-mapped count stops at
 * int64's ends instead of overflowing (UBSan, which the unit tests run
 * under, stops at a signed overflow; the fuzzer found this one). */
static void huge_dma_sizes(void **state)
{
	struct synth s;
	struct result r;

	(void)state;
	begin(&s);
	synth_device(&s, PID, "0000:3a:00.0");
	synth_ioctl(&s, T0 + 100, T0 + 200, PID, PID, 4, SBT_FD_CONTAINER, SBT_VFIO_IOMMU_MAP_DMA, 0, 0x100000, 4096);
	synth_ioctl(&s, T0 + 300, T0 + 400, PID, PID, 4, SBT_FD_CONTAINER, SBT_VFIO_IOMMU_MAP_DMA, 0, 0x200000,
		    0x7ffffffffffff000);
	synth_ioctl(&s, T0 + 500, T0 + 600, PID, PID, 4, SBT_FD_CONTAINER, SBT_VFIO_IOMMU_UNMAP_DMA, 0, 0x100000,
		    UINT64_MAX);
	synth_ioctl(&s, T0 + 700, T0 + 800, PID, PID, 4, SBT_FD_CONTAINER, SBT_VFIO_IOMMU_UNMAP_DMA, 0, 0x100000,
		    UINT64_MAX);
	/* an allocation of UINT64_MAX bytes, freed: the count comes back to 0 */
	synth_enter(&s, T0 + 900, PID, PID, P_ALLOC, 0, UINT64_MAX, 0, 0);
	synth_exit(&s, T0 + 950, PID, PID, P_ALLOC, 0, T0 + 900, 0x7f2000000000);
	synth_enter(&s, T0 + 960, PID, PID, P_FREE, 0, 0x7f2000000000, 0, 0);
	synth_exit(&s, T0 + 990, PID, PID, P_FREE, 0, T0 + 960, 0);
	synth_end(&s, T0 + 1000);
	r = run("huge_dma_sizes", &s);
	free(r.report);
	synth_free(&s);
}

static void many_threads(void **state)
{
	struct synth s;
	struct result r;
	uint64_t t = T0 + 1000;

	(void)state;
	begin(&s);
	for (uint32_t i = 1; i <= 16; i++) {
		synth_task(&s, SBT_TASK_NEW, t, PID, PID + i, PID, 0, "worker");
		t = synth_job(&s, t + 100, PID, PID + i, 4096 * i, 0x100000 * i);
	}
	synth_end(&s, t);
	r = run("many_threads", &s);
	assert_int_equal(r.st.jobs, 48);
	assert_int_equal(r.st.calls, 16 * 13);
	free(r.report);
	synth_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nested_calls),
		cmocka_unit_test(ioctl_errors),
		cmocka_unit_test(lost_records),
		cmocka_unit_test(lost_returns),
		cmocka_unit_test(completion_without_launch),
		cmocka_unit_test(interrupt_completes_job),
		cmocka_unit_test(driver_level),
		cmocka_unit_test(json_values),
		cmocka_unit_test(json_numbers),
		cmocka_unit_test(thread_going_back),
		cmocka_unit_test(streams_on_cards),
		cmocka_unit_test(stream_changes_card),
		cmocka_unit_test(held_until_woken),
		cmocka_unit_test(card_by_elimination),
		cmocka_unit_test(card_by_mapping),
		cmocka_unit_test(launch_without_completion),
		cmocka_unit_test(launch_cut_short),
		cmocka_unit_test(pid_reuse),
		cmocka_unit_test(two_devices),
		cmocka_unit_test(overlapping_jobs),
		cmocka_unit_test(many_threads),
		cmocka_unit_test(huge_dma_sizes),
	};

	return cmocka_run_group_tests_name("correlate", tests, NULL, NULL);
}
