// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach/attach.h"
#include "attach/metawrite.h"
#include "base/log.h"
#include "daemon/window.h"

static const char *const reason_names[] = { "sample", "request", "trigger" };

const char *window_reason_name(enum window_reason r)
{
	return reason_names[r];
}

/* A random time in [0, span): rand_r is plenty for spreading samples. */
static uint64_t random_below(unsigned int *seed, uint64_t span)
{
	uint64_t r = ((uint64_t)rand_r(seed) << 31) ^ (uint64_t)rand_r(seed);

	return span ? r % span : 0;
}

/* The next sample: a start anywhere in the period that leaves room for the window. */
static void schedule(struct detail_window *w)
{
	w->next_sample = w->period_start + random_below(&w->seed, w->period_ns - w->sample_ns + 1);
}

void window_sampling(struct detail_window *w, double sample_s, double period_s, uint64_t now)
{
	w->sample_ns = sample_s > 0 ? (uint64_t)(sample_s * 1e9) : 0;
	w->period_ns = w->sample_ns ? (uint64_t)(period_s * 1e9) : 0;
	if (!w->sample_ns)
		return;
	if (!w->seed)
		w->seed = (unsigned int)(now ^ (now >> 32));
	w->period_start = now;
	schedule(w);
}

bool window_sample_due(struct detail_window *w, uint64_t now)
{
	if (!w->sample_ns || now < w->next_sample)
		return false;
	/* one sample a period; a daemon that fell behind starts anew from now */
	w->period_start += w->period_ns;
	if (w->period_start + w->period_ns <= now)
		w->period_start = now;
	schedule(w);
	return true;
}

static bool has_pid(const struct detail_window *w, pid_t pid)
{
	for (int i = 0; i < w->npids; i++)
		if (w->pids[i] == pid)
			return true;
	return false;
}

int window_add(struct detail_window *w, struct attacher *a, struct meta_writer *mw,
	       const pid_t *pids, int n)
{
	int joined = 0, first = w->npids, err;

	for (int i = 0; i < n && w->npids < SBT_MAX_PIDS; i++) {
		if (has_pid(w, pids[i]) || attach_trace_pid(a, pids[i]))
			continue;
		w->pids[w->npids++] = pids[i];
		/* names, threads and cards first: the records after them make sense */
		metaw_proc(mw, pids[i], NULL);
		metaw_groups_of(mw, pids[i]);
		metaw_thread_names(mw, &pids[i], 1);
		joined++;
	}
	/* every process first, so each library found goes on all of them */
	for (int i = first; i < w->npids; i++)
		if ((err = attach_runtime(a, w->pids[i])) < 0)
			sbt_info(1, "window: PID %d: %s\n", w->pids[i], strerror(-err));
	for (int i = first; i < w->npids && !a->interrupted; i++)
		if ((err = attach_find_libraries(a, w->pids[i], NULL)) < 0 && err != -EINTR)
			sbt_info(1, "window: PID %d: libraries: %s\n", w->pids[i], strerror(-err));
	return joined;
}

int window_open(struct detail_window *w, struct attacher *a, struct meta_writer *mw,
		enum window_reason why, const pid_t *pids, int n, uint64_t now, uint64_t until)
{
	w->open = true;
	w->reason = why;
	w->from = now;
	w->until = until;
	w->npids = 0;
	w->opened[why]++;
	mw->ngroups = 0; /* each window says its processes' cards again */
	window_add(w, a, mw, pids, n);
	return (int)attach_nuprobes(a);
}

void window_extend(struct detail_window *w, uint64_t until)
{
	if (until > w->until)
		w->until = until;
}

void window_close(struct detail_window *w, struct attacher *a, uint64_t now)
{
	struct window_past *p = &w->past[w->npast++ % WINDOW_HISTORY];

	for (int i = 0; i < w->npids; i++)
		attach_untrace_pid(a, w->pids[i]);
	p->from = w->from;
	p->to = now;
	p->reason = w->reason;
	p->procs = w->npids;
	w->open = false;
	w->npids = 0;
}

static size_t past_json(char *out, size_t len, size_t at, const struct detail_window *w,
			uint64_t from, uint64_t to, enum window_reason r, int procs, bool open)
{
	double weight = r == WIN_SAMPLE && w->sample_ns ? (double)w->period_ns / (double)w->sample_ns : 1;
	int n;

	if (at >= len)
		return at;
	n = snprintf(out + at, len - at,
		     "%s{\"from_boottime_ns\": %llu, \"to_boottime_ns\": %llu, \"reason\": \"%s\", "
		     "\"processes\": %d, \"sampling_weight\": %g%s}",
		     at > 1 ? ", " : "", (unsigned long long)from, (unsigned long long)to,
		     window_reason_name(r), procs, weight, open ? ", \"open\": true" : "");
	return n < 0 ? len : at + (size_t)n;
}

void window_json(const struct detail_window *w, uint64_t from, uint64_t to, char *out, size_t len)
{
	uint64_t first = w->npast > WINDOW_HISTORY ? w->npast - WINDOW_HISTORY : 0;
	size_t at = (size_t)snprintf(out, len, "[");

	for (uint64_t i = first; i < w->npast; i++) {
		const struct window_past *p = &w->past[i % WINDOW_HISTORY];

		if (p->to >= from && p->from <= to)
			at = past_json(out, len, at, w, p->from, p->to, p->reason, p->procs, false);
	}
	if (w->open && w->from <= to)
		at = past_json(out, len, at, w, w->from, w->until, w->reason, w->npids, true);
	if (at + 2 <= len)
		snprintf(out + at, len - at, "]");
	else if (len >= 3) /* too many for the room: still valid JSON */
		snprintf(out, len, "[]");
}
