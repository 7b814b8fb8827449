// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach/attach.h"
#include "attach/metawrite.h"
#include "base/clock.h"
#include "base/json_write.h"
#include "base/log.h"
#include "base/procfs.h"
#include "daemon/cardscan.h"
#include "daemon/discovery.h"
#include "daemon/snapshot.h"
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

bool window_has(const struct detail_window *w, pid_t pid)
{
	for (int i = 0; i < w->nprocs; i++)
		if (w->procs[i].pid == pid)
			return true;
	for (int i = 0; i < w->nwaiting; i++)
		if (w->waiting[i].pid == pid)
			return true;
	return false;
}

static const char *const join_names[] = { "at_open", "first_call", "card" };

const char *window_join_name(enum window_join j)
{
	return join_names[j];
}

/* Traced and described: names, threads and cards (when read) first, so
 * that the records after them make sense. NULL when it cannot be traced. */
static struct window_proc *take(struct detail_window *w, struct attacher *a, struct meta_writer *mw, pid_t pid,
				enum window_join how, uint64_t seen, const struct cardscan_answer *cards)
{
	struct window_proc *p;

	if (w->nprocs == WINDOW_MAX_PROCS) {
		w->turned_away++;
		return NULL;
	}
	if (attach_trace_pid(a, pid))
		return NULL;
	p = &w->procs[w->nprocs++];
	*p = (struct window_proc){
		.pid = pid, .how = how, .seen = seen, .started = proc_start_boottime(pid), .carded = cards != NULL
	};
	metaw_proc(mw, pid, NULL);
	for (int i = 0; cards && i < cards->ngroups; i++)
		metaw_group(mw, pid, cards->groups[i]);
	metaw_thread_names(mw, &pid, 1);
	return p;
}

/* A search asked for PID (0: the places all share), said when it cannot be. */
static void ask(struct detail_window *w, struct discovery *q, pid_t pid, bool mapped_only, uint64_t deadline)
{
	int err = discovery_ask(q, pid, mapped_only, w->serial, deadline);

	if (err)
		sbt_warn("window: PID %d: its libraries are not looked for: %s", pid,
			 err == -EBUSY ? "too many searches under way" : strerror(-err));
}

/* Taken: its libraries asked for (those there at the opening share the
 * opening's budget), a newcomer said. */
static void taken(struct detail_window *w, struct discovery *q, struct window_proc *p)
{
	if (p->how == JOIN_AT_OPEN) {
		ask(w, q, p->pid, false, w->open_deadline);
		return;
	}
	w->joined++;
	/* a first call means its library is probed already: only what else it
	 * maps, and its calls are all there from that first call; one that
	 * took a card first may use a runtime not read yet: traced from when
	 * its search ends */
	if (p->how == JOIN_FIRST_CALL)
		p->traced_from = p->seen;
	ask(w, q, p->pid, p->how == JOIN_FIRST_CALL, sbt_now_boottime() + DISCOVERY_BUDGET_NS);
	sbt_info(1, "window: PID %d joined (%s), %d processes now\n", p->pid, window_join_name(p->how), w->nprocs);
}

/* A process comes in. One that holds a card is taken when its cards are
 * read, off the main loop (window_scanned); one that made a runtime call
 * is taken now (its calls are under way), and so is a card holder whose
 * cards cannot be asked for now: their cards are read later (window_cards). */
static void admit(struct detail_window *w, struct attacher *a, struct discovery *q, struct meta_writer *mw, pid_t pid,
		  enum window_join how, uint64_t seen)
{
	struct window_proc *p;

	if (w->nprocs + w->nwaiting >= WINDOW_MAX_PROCS) {
		w->turned_away++;
		return;
	}
	if (how != JOIN_FIRST_CALL && !cardscan_ask(w->scan, pid, w->serial)) {
		w->waiting[w->nwaiting++] = (struct window_wait){ pid, how, seen };
		return;
	}
	if ((p = take(w, a, mw, pid, how, seen, NULL)))
		taken(w, q, p);
}

int window_open(struct detail_window *w, struct attacher *a, struct discovery *q, struct meta_writer *mw,
		enum window_reason why, const pid_t *pids, int n, uint64_t now, uint64_t until)
{
	int err;

	__atomic_store_n(&w->open, true, __ATOMIC_RELAXED); /* the drainer polls faster while open */
	w->serial++;
	w->reason = why;
	w->from = now;
	w->until = until;
	w->nprocs = 0;
	w->nwaiting = 0;
	w->joined = 0;
	w->opened[why]++;
	w->open_deadline = now + DISCOVERY_BUDGET_NS;
	w->libs_ready = now;
	mw->ngroups = 0; /* each window says its processes' cards again */
	/* which card's interrupt woke a stream's wait: while it is open */
	attach_window_hooks(a, true);
	/* the card holders: each taken when its cards are read, then what
	 * it can load asked for, each library found going on as it comes */
	for (int i = 0; i < n; i++)
		if (!window_has(w, pids[i]))
			admit(w, a, q, mw, pids[i], JOIN_AT_OPEN, now);
	/* a library rebuilt since an earlier window must not get its old offsets */
	attach_drop_changed_libraries(a);
	/* what is known goes on at once, newcomers caught from then */
	attach_catch_newcomers(a, true);
	if ((err = attach_runtime(a, ATTACH_EVERY_PROCESS)) < 0)
		sbt_info(1, "window: runtime probes: %s\n", strerror(-err));
	if (!w->nprocs && !w->nwaiting)
		ask(w, q, 0, false, w->open_deadline);
	return (int)attach_nuprobes(a);
}

int window_join(struct detail_window *w, struct attacher *a, struct discovery *q, struct meta_writer *mw, pid_t pid,
		enum window_join how, uint64_t seen)
{
	int before = w->nprocs + w->nwaiting;

	if (!w->open || window_has(w, pid))
		return 0;
	admit(w, a, q, mw, pid, how, seen);
	return w->nprocs + w->nwaiting > before;
}

void window_scanned(struct detail_window *w, struct attacher *a, struct discovery *q, struct meta_writer *mw,
		    const struct cardscan_answer *c)
{
	struct window_proc *p;

	if (!w->open || c->tag != w->serial)
		return; /* an earlier window's */
	if (c->capped)
		sbt_info(1, "window: PID %d: over %zu open files: the first %zu looked at for its cards\n", c->pid,
			 w->scan->fd_max, w->scan->fd_max);
	for (int i = 0; i < w->nwaiting; i++) {
		struct window_wait e = w->waiting[i];

		if (e.pid != c->pid)
			continue;
		w->waiting[i] = w->waiting[--w->nwaiting];
		if ((p = take(w, a, mw, e.pid, e.how, e.seen, c)))
			taken(w, q, p);
		return;
	}
	for (int i = 0; i < w->nprocs; i++) {
		p = &w->procs[i];
		if (p->pid != c->pid || p->carded)
			continue;
		for (int k = 0; k < c->ngroups; k++)
			metaw_group(mw, p->pid, c->groups[k]);
		p->carded = true;
		p->carding = false;
	}
}

void window_searched(struct detail_window *w, const struct discovery_job *j, int found)
{
	if (!w->open || j->tag != w->serial)
		return; /* an earlier window's: what it found is kept for the next */
	if (found > 0)
		w->libs_ready = j->done_ns;
	if (j->partial)
		return; /* a library read; the search goes on */
	/* a process's calls are all there from when the last library it may
	 * use went on (none new: those it has were on already) */
	for (int i = 0; i < w->nprocs; i++) {
		struct window_proc *p = &w->procs[i];

		if (!p->traced_from && p->pid == j->pid)
			p->traced_from = w->libs_ready;
	}
}

void window_cards(struct detail_window *w, const pid_t *pids, int n)
{
	for (int i = 0; i < w->nprocs; i++) {
		struct window_proc *p = &w->procs[i];

		for (int k = 0; k < n && !p->carded && !p->carding; k++)
			if (pids[k] == p->pid && !cardscan_ask(w->scan, p->pid, w->serial))
				p->carding = true; /* else asked again at the next tick */
	}
}

void window_extend(struct detail_window *w, uint64_t until)
{
	if (until > w->until)
		w->until = until;
}

void window_close(struct detail_window *w, struct attacher *a, struct discovery *q, struct meta_writer *mw,
		  uint64_t now)
{
	struct window_past *p = &w->past[w->npast++ % WINDOW_HISTORY];

	/* no one joins from now; the threads made meanwhile get their names */
	attach_catch_newcomers(a, false);
	discovery_cancel(q);
	w->nwaiting = 0; /* their cards' answers are an earlier window's now */
	for (int i = 0; i < w->nprocs; i++)
		if (proc_exists(w->procs[i].pid))
			metaw_thread_names(mw, &w->procs[i].pid, 1);
	attach_window_hooks(a, false);
	/* untraced first: the uprobes, until they are gone, record nothing */
	attach_untrace_all(a);
	attach_forget(a, ATTACH_EVERY_PROCESS);
	attach_untrace_all(a); /* one that joined while the first emptying ran */
	/* a search not answered in time: its process may miss calls throughout */
	for (int i = 0; i < w->nprocs; i++)
		if (!w->procs[i].traced_from)
			w->procs[i].traced_from = now;
	p->from = w->from;
	p->to = now;
	p->reason = w->reason;
	p->procs = w->nprocs;
	p->joined = w->joined;
	memcpy(p->detail, w->procs,
	       (size_t)(w->nprocs < WINDOW_PAST_PROCS ? w->nprocs : WINDOW_PAST_PROCS) * sizeof(p->detail[0]));
	__atomic_store_n(&w->open, false, __ATOMIC_RELAXED);
	w->nprocs = 0;
}

/* The time in which a process's calls may be missing from the window: from
 * the window's start (or the process's, if later) to its probes being in
 * place; none for one whose first call joined it. */
static uint64_t may_miss_ns(const struct window_past *p, const struct window_proc *q)
{
	uint64_t since = q->how == JOIN_CARD && q->started > p->from ? q->started : p->from;
	uint64_t from = q->traced_from ? q->traced_from : p->to; /* 0: its search not done yet */

	if (q->how == JOIN_FIRST_CALL || from <= since)
		return 0;
	return from - since;
}

static void past_json(struct json_writer *out, const struct detail_window *w, const struct window_past *p, bool open)
{
	double weight = p->reason == WIN_SAMPLE && w->sample_ns ? (double)w->period_ns / (double)w->sample_ns : 1;
	int shown = p->procs < WINDOW_PAST_PROCS ? p->procs : WINDOW_PAST_PROCS;

	jw_object(out);
	jw_key_uint(out, "from_boottime_ns", p->from);
	jw_key_uint(out, "to_boottime_ns", p->to);
	jw_key_string(out, "reason", window_reason_name(p->reason));
	jw_key_uint(out, "processes", (uint64_t)p->procs);
	jw_key_uint(out, "joined", (uint64_t)p->joined);
	jw_key(out, "sampling_weight");
	jw_double(out, weight);
	if (open)
		jw_key_bool(out, "open", true);
	jw_key(out, "traced");
	jw_array(out);
	for (int i = 0; i < shown; i++) {
		const struct window_proc *q = &p->detail[i];

		jw_object(out);
		jw_key_uint(out, "pid", (uint64_t)q->pid);
		jw_key_string(out, "joined", window_join_name(q->how));
		jw_key_uint(out, "seen_boottime_ns", q->seen);
		jw_key_uint(out, "traced_from_boottime_ns", q->traced_from);
		jw_key_uint(out, "calls_may_be_missing_ns", may_miss_ns(p, q));
		jw_key_bool(out, "held_card", q->carded);
		jw_end(out);
	}
	jw_end(out);
	jw_end(out);
}

int window_leave_out(const struct detail_window *w, uint64_t from, uint64_t to, struct snapshot_leave_out *out, int max)
{
	uint64_t first = w->npast > WINDOW_HISTORY ? w->npast - WINDOW_HISTORY : 0;
	int n = 0;

	for (uint64_t i = first; i < w->npast; i++) {
		const struct window_past *p = &w->past[i % WINDOW_HISTORY];
		int shown = p->procs < WINDOW_PAST_PROCS ? p->procs : WINDOW_PAST_PROCS;

		if (p->to < from || p->from > to)
			continue;
		for (int k = 0; k < shown && n < max; k++)
			if (p->detail[k].how == JOIN_FIRST_CALL && !p->detail[k].carded)
				out[n++] = (struct snapshot_leave_out){ (uint32_t)p->detail[k].pid, p->from, p->to };
	}
	return n;
}

/* The most window_json writes: a window's head, and each process described. */
#define WINDOW_JSON_MAX ((size_t)(WINDOW_HISTORY + 1) * (256 + WINDOW_PAST_PROCS * 192) + 16)

char *window_json(const struct detail_window *w, uint64_t from, uint64_t to)
{
	uint64_t first = w->npast > WINDOW_HISTORY ? w->npast - WINDOW_HISTORY : 0;
	struct json_writer out;
	char *text;

	if (jw_open(&out, NULL, WINDOW_JSON_MAX, true))
		return NULL;
	jw_array(&out);
	for (uint64_t i = first; i < w->npast; i++) {
		const struct window_past *p = &w->past[i % WINDOW_HISTORY];

		if (p->to >= from && p->from <= to)
			past_json(&out, w, p, false);
	}
	if (w->open && w->from <= to) {
		struct window_past now; /* the open one, as it stands */

		now = (struct window_past){ w->from, w->until, w->reason, w->nprocs, w->joined, { { 0 } } };
		memcpy(now.detail, w->procs,
		       (size_t)(w->nprocs < WINDOW_PAST_PROCS ? w->nprocs : WINDOW_PAST_PROCS) * sizeof(now.detail[0]));
		past_json(&out, w, &now, true);
	}
	jw_end(&out);
	/* too many for the room (not expected): still valid JSON */
	text = strdup(jw_text(&out) ? jw_text(&out) : "[]");
	jw_free(&out);
	return text;
}
