// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace merge TORCH.json CAPTURE.sbt -o OUT`: one timeline of a
 * PyTorch profiler (kineto) trace and our captures (or our Chrome JSON),
 * from one host or several.
 *
 * - Clock: every host's trace is put on the first host's CLOCK_BOOTTIME.
 *   kineto's ts is REALTIME µs minus baseTimeNanoseconds, so
 *   BOOTTIME = ts * 1000 + base - (REALTIME - BOOTTIME), the difference
 *   from the capture's clock snapshot; another host's BOOTTIME is moved by
 *   the difference of the two hosts' (REALTIME - BOOTTIME).
 * - Tracks: kineto's pid and tid are the ids inside the process's pid
 *   namespace; the capture's nspid records map them to the tracer's, so
 *   ops land on the very thread tracks our runtime calls are on.
 * - Nesting: on each thread, our slices are laid out by the correlator and
 *   stay; an op that would partly overlap one of them (or an op already
 *   placed) goes to a child track of the thread, so no track ever holds a
 *   broken nesting.
 * - Links: each runtime call gets the External id of the innermost op
 *   around it and an arrow from that op; a child process's first call an
 *   arrow from the op its parent was in when it forked.
 */
#include <argp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/spill.h"
#include "capture/capture.h"
#include "commands.h"
#include "model/output.h"
#include "offline/merger.h"

struct merge_opts {
	const char *paths[MAX_INPUTS];
	int n;
	const char *out, *format;
};

/* ---- the command -------------------------------------------------------- */

static error_t merge_parse(int key, char *arg, struct argp_state *state)
{
	struct merge_opts *o = state->input;

	switch (key) {
	case 'o':
		if (o->out)
			argp_error(state, "-o given twice; hint: one output a merge");
		o->out = arg;
		break;
	case 1000: o->format = arg; break;
	case ARGP_KEY_ARG:
		if (o->n == MAX_INPUTS)
			argp_error(state, "at most %d inputs", MAX_INPUTS);
		o->paths[o->n++] = arg;
		break;
	case ARGP_KEY_END:
		if (o->n < 2)
			argp_error(state,
				   "merge needs two traces or more; hint: merge TORCH.json CAPTURE.sbt -o OUT.pftrace");
		if (!o->out)
			argp_error(state, "no output; hint: -o OUT.pftrace or -o OUT.json");
		break;
	default: return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static bool is_capture(const char *path)
{
	struct capture_reader r;

	if (capture_open(&r, path))
		return false;
	capture_close_reader(&r);
	return true;
}

/* A marker on the output's own track saying how the clocks were aligned. */
static void note_alignment(struct merger *m, const char *torch, int64_t base, int64_t first_op)
{
	struct host *h = &m->hosts[0];
	struct model_track t = { .kind = TRACK_GLOBAL, .name = "spyre-bpftrace merge", .engine = -1 };
	struct model_event e = {
		.kind = EV_INSTANT, .name = "clocks aligned", .cat = "tracer", .depth = MODEL_DEPTH_INSTANTS
	};
	uint32_t idx = store_track(&m->st, &t);

	e.ts = first_op > 0 ? (uint64_t)first_op : 0;
	e.args[e.nargs++] = (struct model_arg){ .name = "torch trace", .type = ARG_STR, .s = torch };
	e.args[e.nargs++] =
		(struct model_arg){ .name = "rule",
				    .type = ARG_STR,
				    .s = "BOOTTIME = ts_us * 1000 + baseTimeNanoseconds - (REALTIME - BOOTTIME)" };
	e.args[e.nargs++] = (struct model_arg){ .name = "baseTimeNanoseconds", .type = ARG_INT, .i = base };
	e.args[e.nargs++] = (struct model_arg){ .name = "realtime_minus_boottime_ns", .type = ARG_INT, .i = h->offset };
	e.args[e.nargs++] =
		(struct model_arg){ .name = "spread_ns", .type = ARG_UINT, .u = h->spread + (uint64_t)llabs(h->drift) };
	store_event(&m->st, idx, &e, FROM_TORCH - 1);
}

/* Why the store could not keep everything. */
static void say_store_error(const struct merger *m)
{
	if (m->st.error == ENOMEM)
		sbt_err("out of memory merging; hint: merge a shorter window");
	else
		sbt_err("merging needs room for the events' args in %s: %s; hint: set TMPDIR to a "
			"directory with room",
			spill_tmpdir(), strerror(m->st.error));
}

int cmd_merge(int argc, char **argv)
{
	static const struct argp_option options[] = {
		{ "output", 'o', "FILE", 0, "OUT.pftrace (Perfetto) or OUT.json (Chrome JSON)", 0 },
		{ "format", 1000, "FMT", 0, "perfetto or json, whatever -o's extension", 0 },
		{ 0 }
	};
	static const struct argp argp = {
		options,
		merge_parse,
		"TORCH.json CAPTURE.sbt [MORE.sbt|OURS.json...]",
		"Merge a PyTorch profiler trace (torch.profiler, kineto) with captures into one "
		"timeline: ops on the threads of the runtime calls they made, an arrow and its "
		"External id from each op to each call inside it, and from the op that started a "
		"process to that process's first call. Captures (or this tool's Chrome JSON) of "
		"several hosts join as one trace, a process per host; the PyTorch trace is "
		"optional then.\n\nEXAMPLES:\n"
		"  spyre-bpftrace merge torch.json run.sbt -o run.pftrace\n"
		"  spyre-bpftrace merge torch.json run.sbt -o run.json\n"
		"  spyre-bpftrace merge host1.sbt host2.sbt -o job.pftrace",
		NULL,
		NULL,
		NULL
	};
	struct merge_opts o = { 0 };
	struct merger *m = calloc(1, sizeof(*m));
	struct chrome_input *torch = calloc(MAX_INPUTS + 1, sizeof(*torch)), *ours = torch + 1;
	const char *torch_path = NULL;
	struct flows fl = { 0 };
	enum out_format fmt;
	struct output out;
	struct model_sink sink;
	uint64_t next_flow = 0;
	int64_t first_op = -1;
	char err[512];
	int ret = 1, nours = 0;
	int kinds[MAX_INPUTS]; /* 0 capture, 1 ours (JSON) */

	if (!m || !torch) {
		sbt_err("out of memory");
		free(m);
		free(torch);
		return 1;
	}
	store_init(&m->st);
	argp_parse(&argp, argc, argv, 0, NULL, &o);
	if (output_format(o.out, o.format, &fmt, err, sizeof(err)) || fmt == FMT_SBT) {
		sbt_err("%s", fmt == FMT_SBT ? "merge writes .pftrace or .json; hint: -o OUT.pftrace" : err);
		free(m);
		free(torch);
		return 2;
	}
	/* every input read and checked before the output is touched */
	for (int i = 0; i < o.n; i++) {
		const char *p = o.paths[i];
		struct host *h;

		if (is_capture(p)) {
			kinds[m->nhosts] = 0;
		} else {
			struct chrome_input *in = torch_path ? &ours[nours] : torch;

			in->m = m;
			if (chrome_open(&in->t, p, merge_gather_names, in, err, sizeof(err))) {
				sbt_err("%s", err);
				merge_input_free(in);
				goto done;
			}
			if (in->t.kind == CHROME_KINETO) {
				if (torch_path) {
					sbt_err("two PyTorch traces ('%s', '%s'); hint: merge one at a time",
						torch_path, p);
					merge_input_free(in);
					goto done;
				}
				torch_path = p;
				continue;
			}
			if (in == torch) { /* ours, read before any kineto one */
				ours[nours] = *torch;
				memset(torch, 0, sizeof(*torch));
			}
			kinds[m->nhosts] = 1;
			nours++;
		}
		h = &m->hosts[m->nhosts++];
		h->path = p;
		if (kinds[m->nhosts - 1] == 0 && merge_peek_capture(h, p)) {
			sbt_err("cannot read '%s'", p);
			goto done;
		}
		if (kinds[m->nhosts - 1] == 1) {
			const struct chrome_trace *t = &ours[nours - 1].t;

			h->has_clock = true;
			h->offset = (int64_t)(t->clocks[0].realtime - t->clocks[0].boottime);
			snprintf(h->name, sizeof(h->name), "%s", p);
		}
		if (!h->has_clock) {
			sbt_err("'%s' has no clock snapshot: it cannot be aligned; hint: record it again "
				"with this version",
				p);
			goto done;
		}
	}
	if (!m->nhosts) {
		sbt_err("no capture to merge '%s' with; hint: merge %s CAPTURE.sbt -o OUT.pftrace", torch_path,
			torch_path);
		goto done;
	}
	/* hosts after the first: their own pid, device and flow id ranges
	 * when they are other machines */
	for (int i = 1, other = 0; i < m->nhosts; i++) {
		bool same = false;

		for (int j = 0; j < i; j++)
			same |= !strcmp(m->hosts[i].name, m->hosts[j].name) && kinds[i] == 0 && kinds[j] == 0;
		if (!same)
			other++;
		m->hosts[i].pid_add = (uint32_t)other << HOST_PID_SHIFT;
		m->hosts[i].rank_add = 64 * other;
		m->hosts[i].flow_add = (uint64_t)i << 41;
	}
	for (int i = 0, k = 0; i < m->nhosts; i++) {
		m->cur = i;
		m->shift = wrap_sub(m->hosts[i].offset, m->hosts[0].offset);
		if (kinds[i] == 0) {
			if (merge_read_capture(m, m->hosts[i].path))
				goto done;
		} else {
			struct chrome_input *in = &ours[k++];

			for (int c = 0; c < in->t.nclocks; c++)
				merge_note_clock(m, &m->hosts[i], &in->t.clocks[c]);
			merge_note_our_facts(m, &in->t);
			if (merge_import_chrome(m, in, m->shift, (uint8_t)i, &fl))
				goto done;
		}
	}
	if (torch_path) {
		int64_t add = wrap_sub(torch->t.base_ns, m->hosts[0].offset);

		if (merge_import_chrome(m, torch, add, FROM_TORCH, &fl))
			goto done;
		for (size_t i = 0; i < m->st.nev; i++)
			if (m->st.ev[i].from == FROM_TORCH && m->st.ev[i].kind == EV_SLICE &&
			    (first_op < 0 || (int64_t)m->st.ev[i].ts < first_op))
				first_op = (int64_t)m->st.ev[i].ts;
		note_alignment(m, torch_path, torch->t.base_ns, first_op);
	}
	merge_lay_out(m, &next_flow);
	merge_link_spawns(m, &next_flow);
	merge_bind_flows(m, &fl);
	merge_pair_flows(m, &fl);
	if (m->st.error) {
		say_store_error(m);
		goto done;
	}
	if (output_open(&out, o.out, fmt, false, err, sizeof(err))) {
		sbt_err("cannot write '%s': %s", o.out, err);
		output_free(&out);
		goto done;
	}
	sink = out.file;
	store_replay(&m->st, &sink, 1);
	if (m->st.error) {
		say_store_error(m);
		output_free(&out);
		goto done;
	}
	if (output_close(&out) || output_commit(&out)) {
		sbt_err("writing '%s' failed: %s", o.out, strerror(out.error));
		output_free(&out);
		goto done;
	}
	if (torch_path) {
		struct host *h = &m->hosts[0];

		sbt_note("clocks: %s's REALTIME put on %s's BOOTTIME with REALTIME - BOOTTIME = %lld ns "
			 "(spread %llu ns, moved %lld ns over the capture)",
			 torch_path, h->path, (long long)h->offset, (unsigned long long)h->spread, (long long)h->drift);
		sbt_note("%llu ops; %llu of %llu runtime calls inside an op, linked; processes linked to "
			 "the op that started them: %llu; flows of the PyTorch trace kept: %llu; ops on "
			 "overlap tracks: %llu",
			 (unsigned long long)m->ops, (unsigned long long)m->calls_linked, (unsigned long long)m->calls,
			 (unsigned long long)m->spawns_linked, (unsigned long long)m->flows_paired,
			 (unsigned long long)m->overflowed);
		if (m->ops && !m->calls_linked && !m->spawns_linked && m->calls)
			sbt_warn("no runtime call fell inside an op: is %s from the same run? (its pids "
				 "must be the traced processes)",
				 torch_path);
	}
	sbt_note("%s %s (%.1f KiB) from %d input%s", output_format_name(fmt), o.out, (double)out.bytes / 1024.0, o.n,
		 o.n > 1 ? "s" : "");
	output_free(&out);
	ret = m->damaged; /* written from what could be read; said above */
done:
	merge_input_free(torch);
	for (int i = 0; i < nours; i++)
		merge_input_free(&ours[i]);
	free(torch);
	free(fl.v);
	hm_free(&m->track_of);
	hm_free(&m->thread_of);
	hm_free(&m->process_of);
	free(m->forks);
	free(m->ns);
	store_free(&m->st);
	free(m);
	return ret;
}
