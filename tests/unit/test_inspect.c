// SPDX-License-Identifier: GPL-2.0-only
/* inspect finds each kind of violation it claims to, and passes good traces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/pb.h"
#include "model/perfetto.h"
#include "offline/inspect.h"

static char path[64];

static uint8_t *slurp(size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = malloc(1 << 20);

	assert_non_null(f);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

static uint64_t check(const uint8_t *buf, size_t len)
{
	struct inspect_result r = { .out = NULL };

	inspect_buffer(buf, len, &r);
	return r.violations;
}

static struct model_track lane = { .id = 7, .kind = TRACK_LANE, .name = "H2D DMA", .engine = 0 };
static struct model_track ctr = { .id = 8, .kind = TRACK_COUNTER, .name = "n", .unit = UNIT_COUNT };

/* Writes slices (start, dur) and a counter through the real writer. */
static uint64_t trace_of(const uint64_t (*slices)[2], int n, bool counter_on_lane, uint64_t flow_once)
{
	char err[128];
	struct perfetto_writer *w;
	struct model_sink s;
	size_t len;
	uint8_t *buf;
	uint64_t v;

	snprintf(path, sizeof(path), "/tmp/sbt-inspect-%d.pftrace", getpid());
	w = perfetto_open(path, err, sizeof(err));
	assert_non_null(w);
	s = perfetto_sink(w);
	s.track(s.ctx, &lane);
	s.track(s.ctx, &ctr);
	for (int i = 0; i < n; i++) {
		struct model_event e = { .kind = EV_SLICE,
					 .track = &lane,
					 .ts = slices[i][0],
					 .dur = slices[i][1],
					 .name = "job",
					 .cat = "c" };

		if (flow_once && i == 0)
			e.flows[e.nflows++] = flow_once;
		s.event(s.ctx, &e);
	}
	struct model_event c = {
		.kind = EV_COUNTER, .track = counter_on_lane ? &lane : &ctr, .ts = 1000, .name = "n", .value = 3
	};

	s.event(s.ctx, &c);
	assert_int_equal(perfetto_close(w), 0);
	buf = slurp(&len);
	v = check(buf, len);
	free(buf);
	unlink(path);
	return v;
}

static void good_traces_pass(void **state)
{
	static const uint64_t nested[][2] = { { 1000, 100 }, { 900, 500 }, { 2000, 10 } };

	(void)state;
	assert_int_equal(trace_of(nested, 3, false, 0), 0);
}

static void partial_overlap_is_found(void **state)
{
	/* [1000, 1600] and [1500, 2000] share a track and neither holds the other */
	static const uint64_t bad[][2] = { { 1000, 600 }, { 1500, 500 } };

	(void)state;
	assert_true(trace_of(bad, 2, false, 0) >= 1);
}

static void counter_on_slice_track_is_found(void **state)
{
	static const uint64_t one[][2] = { { 1000, 10 } };

	(void)state;
	assert_int_equal(trace_of(one, 1, true, 0), 1);
}

static void dangling_flow_is_found(void **state)
{
	static const uint64_t one[][2] = { { 1000, 10 } };

	(void)state;
	assert_int_equal(trace_of(one, 1, false, 42), 1);
}

/* Hand-made packets for what our writer never does. */
static size_t packet(uint8_t *out, struct pb *p)
{
	size_t len = p->len;

	assert_true(len < 128); /* a one-byte length */
	out[0] = 0x0a;
	out[1] = (uint8_t)len;
	memcpy(out + 2, p->buf, len);
	p->len = 0;
	return len + 2;
}

static size_t event(uint8_t *out, struct pb *p, uint64_t ts, int type, uint64_t track, uint64_t name_iid,
		    uint32_t flags)
{
	size_t te;

	pb_uint(p, 8, ts);
	pb_uint(p, 10, 1);
	if (flags)
		pb_uint(p, 13, flags);
	te = pb_begin(p, 11);
	pb_uint(p, 9, (uint64_t)type);
	pb_uint(p, 11, track);
	if (name_iid)
		pb_uint(p, 10, name_iid);
	pb_end(p, te);
	return packet(out, p);
}

static size_t descriptor(uint8_t *out, struct pb *p, uint64_t uuid)
{
	size_t td = pb_begin(p, 60);

	pb_uint(p, 1, uuid);
	pb_str(p, 2, "t");
	pb_end(p, td);
	return packet(out, p);
}

static size_t interned_name(uint8_t *out, struct pb *p, uint64_t iid, uint32_t flags)
{
	size_t id, en;

	pb_uint(p, 10, 1);
	pb_uint(p, 13, flags);
	id = pb_begin(p, 12);
	en = pb_begin(p, 2);
	pb_uint(p, 1, iid);
	pb_str(p, 2, "x");
	pb_end(p, en);
	pb_end(p, id);
	return packet(out, p);
}

static void hand_made_violations(void **state)
{
	uint8_t buf[4096];
	struct pb p = { 0 };
	size_t n;

	(void)state;
	/* a well-formed one first: it passes */
	n = descriptor(buf, &p, 5);
	n += interned_name(buf + n, &p, 1, 3);
	n += event(buf + n, &p, 100, 1, 5, 1, 2);
	n += event(buf + n, &p, 200, 2, 5, 0, 0);
	assert_int_equal(check(buf, n), 0);
	/* cut inside the last packet: framing */
	assert_true(check(buf, n - 2) >= 1);
	/* an END with nothing open, and a BEGIN that never ends */
	n = descriptor(buf, &p, 5);
	n += interned_name(buf + n, &p, 1, 3);
	n += event(buf + n, &p, 50, 2, 5, 0, 0);
	n += event(buf + n, &p, 100, 1, 5, 1, 2);
	assert_int_equal(check(buf, n), 2);
	/* a name iid that was never interned, and one used without the flag */
	n = descriptor(buf, &p, 5);
	n += interned_name(buf + n, &p, 1, 3);
	n += event(buf + n, &p, 100, 3, 5, 9, 2);
	n += event(buf + n, &p, 200, 3, 5, 1, 0);
	assert_int_equal(check(buf, n), 2);
	/* interned data on a sequence whose state was never cleared */
	n = descriptor(buf, &p, 5);
	n += interned_name(buf + n, &p, 1, 2);
	n += event(buf + n, &p, 100, 3, 5, 1, 2);
	assert_true(check(buf, n) >= 1);
	/* an event on a track nobody described */
	n = interned_name(buf, &p, 1, 3);
	n += event(buf + n, &p, 100, 3, 77, 1, 2);
	assert_int_equal(check(buf, n), 1);
	/* a one-ended flow is explained, not a violation, when data was lost */
	{
		size_t te;

		n = descriptor(buf, &p, 5);
		n += interned_name(buf + n, &p, 1, 3);
		pb_uint(&p, 8, 100);
		pb_uint(&p, 10, 1);
		pb_uint(&p, 13, 2);
		pb_uint(&p, 42, 1); /* previous_packet_dropped */
		te = pb_begin(&p, 11);
		pb_uint(&p, 9, 3);
		pb_uint(&p, 11, 5);
		pb_uint(&p, 10, 1);
		pb_fixed64(&p, 47, 9);
		pb_end(&p, te);
		n += packet(buf + n, &p);
		struct inspect_result r = { .out = NULL };

		assert_int_equal(inspect_buffer(buf, n, &r), 0);
		assert_int_equal(r.dangling_flows, 1);
	}
	/* not a trace at all */
	assert_true(check((const uint8_t *)"hello, world", 12) >= 1);
	pb_free(&p);
}

/* Past what inspect holds in memory, events and slices go to sorted runs
 * on disk and are merged: a long trace read from a file gets the same
 * verdicts, a partial overlap at its very end included. */
static void long_trace_from_file(void **state)
{
	const int n = 300000; /* slices: 600,000 events, more than one run */
	struct inspect_result r = { .out = NULL };
	char err[128];
	struct perfetto_writer *w;
	struct model_sink s;
	FILE *f;

	(void)state;
	for (int bad = 0; bad < 2; bad++) {
		snprintf(path, sizeof(path), "/tmp/sbt-inspect-long-%d.pftrace", getpid());
		w = perfetto_open(path, err, sizeof(err));
		assert_non_null(w);
		s = perfetto_sink(w);
		s.track(s.ctx, &lane);
		for (int i = 0; i < n; i++) {
			struct model_event e = { .kind = EV_SLICE,
						 .track = &lane,
						 .ts = 1000 + 100ull * i,
						 .dur = 50,
						 .name = "job",
						 .cat = "c" };

			s.event(s.ctx, &e);
		}
		if (bad) { /* starts inside the last slice, ends after it */
			struct model_event e = { .kind = EV_SLICE,
						 .track = &lane,
						 .ts = 1000 + 100ull * (n - 1) + 10,
						 .dur = 100,
						 .name = "late",
						 .cat = "c",
						 .depth = 1 };

			s.event(s.ctx, &e);
		}
		assert_int_equal(perfetto_close(w), 0);
		f = fopen(path, "rb");
		assert_non_null(f);
		memset(&r, 0, sizeof(r));
		inspect_fd(fileno(f), &r);
		fclose(f);
		unlink(path);
		assert_int_equal(r.slices, (uint64_t)n + (uint64_t)bad);
		assert_int_equal(r.violations, (uint64_t)bad);
	}
}

/* The writer builds an event behind one-byte lengths and makes them longer
 * at the end: a packet of 128 bytes or more (a long string argument, many
 * arguments, many flows) must still decode to what was written, and the
 * packet after it too. */
static void long_bodies_round_trip(void **state)
{
	static const struct model_track thr = { .id = 3, .kind = TRACK_THREAD, .name = "t", .pid = 1, .tid = 1 };
	uint64_t xflows[20], flows_seen = 0, strings_seen = 0, events = 0;
	char longs[301], err[128];
	struct perfetto_writer *w;
	struct model_sink s;
	size_t len;
	uint8_t *buf;

	(void)state;
	memset(longs, 'x', 300);
	longs[300] = 0;
	for (int i = 0; i < 20; i++)
		xflows[i] = 1000 + (uint64_t)i;
	snprintf(path, sizeof(path), "/tmp/sbt-inspect-lb-%d.pftrace", getpid());
	w = perfetto_open(path, err, sizeof(err));
	assert_non_null(w);
	s = perfetto_sink(w);
	s.track(s.ctx, &thr);
	/* strings that stay at their address (model.h's fixed): the writer
	 * keeps the short ones by address, so each goes twice */
	static const char *const fixed[] = { "0123456789abcdef", "container", "" };
	uint64_t fixed_seen = 0;

	/* long string; many args; many flows, both ends; strings either side
	 * of the longest a packet's bound holds without asking for room;
	 * fixed strings, twice */
	for (int k = 0; k < 7; k++) {
		struct model_event e = { .kind = EV_SLICE,
					 .track = &thr,
					 .ts = 100 + (uint64_t)k * 10,
					 .dur = 5,
					 .name = "call",
					 .cat = "runtime" };

		if (k == 0)
			e.args[e.nargs++] = (struct model_arg){ .name = "s", .type = ARG_STR, .s = longs };
		for (int i = 0; k == 1 && i < MODEL_MAX_ARGS; i++)
			e.args[e.nargs++] =
				(struct model_arg){ .name = "h", .type = ARG_HEX, .u = ~0ull - (uint64_t)i };
		if (k == 2) {
			e.xflows = xflows;
			e.nxflows = 20;
		}
		if (k == 3) {
			e.xterm = xflows;
			e.nxterm = 20;
		}
		for (int i = 0; k == 4 && i < MODEL_MAX_ARGS; i++)
			e.args[e.nargs++] =
				(struct model_arg){ .name = "s", .type = ARG_STR, .s = longs + 300 - 16 - i % 2 };
		for (int i = 0; k >= 5 && i < 3; i++)
			e.args[e.nargs++] =
				(struct model_arg){ .name = "f", .type = ARG_STR, .fixed = true, .s = fixed[i] };
		s.event(s.ctx, &e);
	}
	assert_int_equal(perfetto_close(w), 0);
	buf = slurp(&len);
	assert_int_equal(check(buf, len), 0);
	/* Trace.packet -> TracePacket.track_event -> its fields */
	struct pb_reader r = pb_reader_of(buf, len), pk, ev, da;
	struct pb_field f, pf, ef, af;

	PB_EACH(r, f)
	{
		pk = pb_sub(&f);
		PB_EACH(pk, pf)
		{
			if (pf.num != 11)
				continue;
			ev = pb_sub(&pf);
			events++;
			PB_EACH(ev, ef)
			{
				if (ef.num == 47 || ef.num == 48)
					flows_seen++;
				if (ef.num != 4)
					continue;
				da = pb_sub(&ef);
				PB_EACH(da, af)
				if (af.num == 6 && (af.len == 300 || af.len == 16 || af.len == 17) &&
				    !memcmp(af.d, longs, af.len))
					strings_seen++;
				else if (af.num == 6)
					for (int i = 0; i < 3; i++)
						fixed_seen +=
							af.len == strlen(fixed[i]) && !memcmp(af.d, fixed[i], af.len);
				assert_int_equal(da.error, 0);
			}
			assert_int_equal(ev.error, 0);
		}
		assert_int_equal(pk.error, 0);
	}
	assert_int_equal(r.error, 0);
	assert_int_equal(events, 14); /* seven begins, seven ends */
	assert_int_equal(strings_seen, 1 + MODEL_MAX_ARGS);
	assert_int_equal(fixed_seen, 6);
	assert_int_equal(flows_seen, 40);
	free(buf);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(good_traces_pass),
		cmocka_unit_test(partial_overlap_is_found),
		cmocka_unit_test(counter_on_slice_track_is_found),
		cmocka_unit_test(dangling_flow_is_found),
		cmocka_unit_test(hand_made_violations),
		cmocka_unit_test(long_trace_from_file),
		cmocka_unit_test(long_bodies_round_trip),
	};

	return cmocka_run_group_tests_name("inspect", tests, NULL, NULL);
}
