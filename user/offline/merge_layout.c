// SPDX-License-Identifier: GPL-2.0-only
/*
 * merge's layout and links, on the store once every input is in: ops
 * nested around the calls on each thread (an op that would partly overlap
 * goes to an overflow track), calls and started processes linked to their
 * ops, imported flows bound to their slices and paired.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/vec.h"
#include "offline/merger.h"

/* ---- nesting and links --------------------------------------------------- */

struct slice_ref {
	uint32_t ev;
	uint64_t start, end;
	bool imported;
};

static int by_start(const void *a, const void *b)
{
	const struct slice_ref *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1; /* the longer first: it holds the other */
	if (x->imported != y->imported)
		return x->imported ? -1 : 1; /* the op around the call */
	return x->ev < y->ev ? -1 : x->ev > y->ev;
}

static bool is_call(const struct trace_store *s, const struct store_event *e, const struct model_track *t)
{
	return e->kind == EV_SLICE && t->kind == TRACK_THREAD && e->from != FROM_TORCH && e->cat &&
	       !strcmp(store_text(s, e->cat), "runtime");
}

/* The overflow track n (1 up) of a thread. */
static uint32_t overflow_track(struct merger *m, uint32_t thread, int n, uint32_t *cache)
{
	char name[192];

	if (cache[n - 1])
		return cache[n - 1] - 1;
	snprintf(name, sizeof(name), "%s: ops overlapping (%d)", m->st.tracks[thread].name, n);
	cache[n - 1] = merge_make_track(m, TRACK_LANE, m->st.tracks[thread].id, 0, 0, name, n) + 1;
	if (n > m->max_overflow)
		m->max_overflow = n;
	return cache[n - 1] - 1;
}

/*
 * One thread's slices, sorted: a stack of what is open. An op that does
 * not fit inside the top goes to the next overflow track; one of our
 * slices that does not fit takes the op it crosses off the thread instead
 * (ours are exact). A call is linked to the innermost op open around it.
 */
static void lay_out_thread(struct merger *m, uint32_t thread, struct slice_ref *s, size_t n, uint64_t *next_flow)
{
	uint32_t cache[MAX_OVERFLOW] = { 0 };
	/* both as big as they get: a thread's ops rarely overlap, or nest deep */
	struct slice_ref *rest = NULL;
	uint32_t *stack = NULL; /* indexes into s */
	size_t rest_cap = 0, stack_cap = 0;

	for (int level = 0; n && level <= MAX_OVERFLOW; level++) {
		size_t top = 0, nrest = 0, depth_imported;

		qsort(s, n, sizeof(*s), by_start);
		for (size_t i = 0; i < n; i++) {
			struct slice_ref *x = &s[i];

			while (top && s[stack[top - 1]].end <= x->start)
				top--;
			/* room for one more on the stack, and in rest */
			if (vec_reserve((void **)&stack, &stack_cap, top + 1, sizeof(*stack)) ||
			    vec_reserve((void **)&rest, &rest_cap, nrest + top + 1, sizeof(*rest))) {
				m->st.error = ENOMEM;
				goto out;
			}
			if (x->imported) {
				if (top && s[stack[top - 1]].end < x->end && level < MAX_OVERFLOW) {
					rest[nrest++] = *x; /* crosses the top */
					continue;
				}
				depth_imported = 0;
				for (size_t k = 0; k < top; k++)
					depth_imported += s[stack[k]].imported;
				m->st.ev[x->ev].depth =
					(uint8_t)(OP_DEPTH + (depth_imported < 100 ? depth_imported : 100));
				if (level)
					m->st.ev[x->ev].track = overflow_track(m, thread, level, cache);
				stack[top++] = (uint32_t)i;
				continue;
			}
			while (top && s[stack[top - 1]].imported && s[stack[top - 1]].end < x->end) {
				rest[nrest++] = s[stack[--top]]; /* the op gives way */
			}
			if (is_call(&m->st, &m->st.ev[x->ev], &m->st.tracks[thread])) {
				m->calls++;
				for (size_t k = top; k-- > 0;) {
					const struct store_event *op = &m->st.ev[s[stack[k]].ev];

					if (!s[stack[k]].imported)
						continue;
					if (op->own_ext != STORE_NO_EXT_ID)
						m->st.ev[x->ev].ext_id = op->own_ext;
					store_link(&m->st, s[stack[k]].ev, x->ev,
						   MODEL_FLOW_ID(FLOW_OP_CALL, ++*next_flow));
					m->calls_linked++;
					break;
				}
			}
			stack[top++] = (uint32_t)i;
		}
		/* what gave way or crossed goes around again, one track further */
		m->overflowed += nrest;
		if (nrest)
			memcpy(s, rest, nrest * sizeof(*s));
		n = nrest;
		if (n && level == MAX_OVERFLOW - 1)
			sbt_warn("%zu ops on %s overlap too much to lay out; some may nest wrongly", n,
				 m->st.tracks[thread].name);
		/* our slices never overflow: from here on all are imported */
	}
out:
	free(rest);
	free(stack);
}

/* The innermost imported slice on any thread of pid that holds ts. */
static uint32_t op_at(const struct merger *m, uint32_t pid, uint64_t ts)
{
	uint32_t best = UINT32_MAX;
	uint64_t best_len = UINT64_MAX;

	for (size_t i = 0; i < m->st.nev; i++) {
		const struct store_event *e = &m->st.ev[i];
		const struct model_track *t = &m->st.tracks[e->track];

		if (e->from != FROM_TORCH || e->kind != EV_SLICE)
			continue;
		if (t->kind == TRACK_LANE && t->parent)
			t = &m->st.tracks[t->parent - 1];
		if (t->kind != TRACK_THREAD || t->pid != pid || e->ts > ts || e->ts + e->dur < ts)
			continue;
		if (e->dur < best_len) {
			best = (uint32_t)i;
			best_len = e->dur;
		}
	}
	return best;
}

void merge_link_spawns(struct merger *m, uint64_t *next_flow)
{
	for (size_t f = 0; f < m->nforks; f++) {
		uint32_t op = op_at(m, m->forks[f].parent, m->forks[f].ts), first = UINT32_MAX;

		if (op == UINT32_MAX)
			continue;
		for (size_t i = 0; i < m->st.nev; i++) {
			const struct store_event *e = &m->st.ev[i];
			const struct model_track *t = &m->st.tracks[e->track];

			if (is_call(&m->st, e, t) && t->pid == m->forks[f].child &&
			    (first == UINT32_MAX || e->ts < m->st.ev[first].ts))
				first = (uint32_t)i;
		}
		if (first == UINT32_MAX)
			continue;
		if (m->st.ev[op].own_ext != STORE_NO_EXT_ID && m->st.ev[first].ext_id == STORE_NO_EXT_ID)
			m->st.ev[first].ext_id = m->st.ev[op].own_ext;
		store_link(&m->st, op, first, MODEL_FLOW_ID(FLOW_SPAWN, ++*next_flow));
		m->spawns_linked++;
	}
}

/* Threads with imported slices: lay each out. */
void merge_lay_out(struct merger *m, uint64_t *next_flow)
{
	size_t nt = m->st.ntracks;
	size_t *count = calloc(nt + 1, sizeof(*count)), *at = calloc(nt + 1, sizeof(*at));
	bool *has_op = calloc(nt + 1, sizeof(*has_op));
	struct slice_ref *all = malloc((m->st.nev ? m->st.nev : 1) * sizeof(*all));

	if (!count || !at || !has_op || !all) {
		m->st.error = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < m->st.nev; i++) {
		const struct store_event *e = &m->st.ev[i];

		if (e->kind != EV_SLICE || m->st.tracks[e->track].kind != TRACK_THREAD)
			continue;
		count[e->track]++;
		if (e->from == FROM_TORCH)
			has_op[e->track] = true;
	}
	for (size_t t = 0; t < nt; t++)
		at[t + 1] = at[t] + count[t];
	memset(count, 0, (nt + 1) * sizeof(*count));
	for (size_t i = 0; i < m->st.nev; i++) {
		const struct store_event *e = &m->st.ev[i];

		if (e->kind != EV_SLICE || m->st.tracks[e->track].kind != TRACK_THREAD || !has_op[e->track])
			continue;
		all[at[e->track] + count[e->track]++] =
			(struct slice_ref){ (uint32_t)i, e->ts, e->ts + e->dur, e->from == FROM_TORCH };
	}
	for (size_t t = 0; t < nt; t++)
		if (has_op[t])
			lay_out_thread(m, (uint32_t)t, all + at[t], count[t], next_flow);
	for (size_t i = 0; i < m->st.nev; i++) /* calls on threads with no op */
		if (!has_op[m->st.ev[i].track] && is_call(&m->st, &m->st.ev[i], &m->st.tracks[m->st.ev[i].track]))
			m->calls++;
out:
	free(count);
	free(at);
	free(has_op);
	free(all);
}

struct slice_key {
	uint64_t key; /* from << 32 | track (an overflow's: its thread's) */
	uint64_t ts;
	uint32_t ev;
};

static int by_key(const void *a, const void *b)
{
	const struct slice_key *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The thread an overflow track belongs to, else the track itself. */
static uint32_t home_track(const struct merger *m, uint32_t track)
{
	const struct model_track *t = &m->st.tracks[track];

	if (t->kind == TRACK_LANE && t->parent && m->st.tracks[t->parent - 1].kind == TRACK_THREAD)
		return (uint32_t)t->parent - 1;
	return track;
}

#define BIND_SCAN 4096 /* how far back to look for the slice around a flow end */

/* Each imported flow end to its slice: the innermost of its input's on its
 * thread that holds ts ("enclosing"), or the first that starts at or
 * after it. Slices sorted by (input, track, start), each end looked up. */
void merge_bind_flows(struct merger *m, struct flows *fl)
{
	struct slice_key *k = malloc((m->st.nev ? m->st.nev : 1) * sizeof(*k));
	size_t n = 0;

	if (!k) {
		m->st.error = ENOMEM;
		return;
	}
	for (size_t i = 0; i < m->st.nev; i++)
		if (m->st.ev[i].kind == EV_SLICE)
			k[n++] =
				(struct slice_key){ (uint64_t)m->st.ev[i].from << 32 | home_track(m, m->st.ev[i].track),
						    m->st.ev[i].ts, (uint32_t)i };
	qsort(k, n, sizeof(*k), by_key);
	for (size_t f = 0; f < fl->n; f++) {
		struct flow_end *x = &fl->v[f];
		struct slice_key want = { (uint64_t)x->from << 32 | x->track, x->ts, 0 };
		size_t lo = 0, hi = n; /* first slice after (key, ts) */
		uint64_t best_len = UINT64_MAX;

		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (by_key(&k[mid], &want) <= 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (!x->enclosing) {
			/* the first at or after ts: back over equal starts */
			while (lo > 0 && k[lo - 1].key == want.key && k[lo - 1].ts == x->ts)
				lo--;
			if (lo < n && k[lo].key == want.key)
				x->ev = k[lo].ev;
			continue;
		}
		for (size_t j = lo, seen = 0; j-- > 0 && k[j].key == want.key && seen < BIND_SCAN; seen++) {
			const struct store_event *e = &m->st.ev[k[j].ev];

			if (x->ev != UINT32_MAX && e->ts < m->st.ev[x->ev].ts)
				break; /* starts before the innermost found: holds it */
			if (x->ts <= e->ts + e->dur && e->dur < best_len) {
				x->ev = k[j].ev;
				best_len = e->dur;
			}
		}
	}
	free(k);
}

static int by_flow(const void *a, const void *b)
{
	const struct flow_end *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if (x->start != y->start)
		return x->start ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Starts and ends of one id paired in order: an arrow each. */
void merge_pair_flows(struct merger *m, struct flows *fl)
{
	qsort(fl->v, fl->n, sizeof(*fl->v), by_flow);
	for (size_t i = 0, j; i < fl->n; i = j) {
		size_t s = i, e;

		for (j = i; j < fl->n && fl->v[j].id == fl->v[i].id; j++)
			;
		for (e = s; e < j && fl->v[e].start; e++)
			;
		for (size_t k = 0; s + k < j && fl->v[s + k].start && e + k < j; k++) {
			if (fl->v[s + k].ev == UINT32_MAX || fl->v[e + k].ev == UINT32_MAX)
				continue;
			store_link(&m->st, fl->v[s + k].ev, fl->v[e + k].ev, fl->v[s + k].id);
			m->flows_paired++;
		}
	}
}
