// SPDX-License-Identifier: GPL-2.0-only
/*
 * merge's inputs into one store: captures through the correlator (their
 * tracks moved into the host's pid, device and flow ranges, their forks
 * and namespace ids kept), and Chrome JSON (kineto's, or ours) with its
 * tracks mapped onto the captures' threads through the pid namespaces.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/strtab.h"
#include "base/vec.h"
#include "capture/capture.h"
#include "model/chrome_json.h"
#include "model/correlate.h"
#include "offline/merger.h"

/* ---- captures, through the correlator into the store ------------------ */

static void on_cap_track(void *ctx, const struct model_track *t)
{
	struct merger *m = ctx;
	struct host *h = &m->hosts[m->cur];
	uint64_t key = (uint64_t)m->cur << 56 | t->id;
	uint32_t idx = lookup(&m->track_of, key);
	struct model_track c = *t;
	char name[160];

	if (idx) { /* renamed */
		m->st.tracks[idx - 1].name = store_str(&m->st, t->name);
		return;
	}
	if (c.kind == TRACK_PROCESS || c.kind == TRACK_THREAD) {
		c.pid += h->pid_add;
		c.tid = c.kind == TRACK_THREAD ? c.tid + h->pid_add : 0;
		if (c.kind == TRACK_PROCESS && m->nhosts > 1) {
			snprintf(name, sizeof(name), "%s @%s", t->name, h->name);
			c.name = name;
		}
	}
	if (c.kind == TRACK_DEVICE) {
		c.rank += h->rank_add;
		if (m->nhosts > 1) {
			snprintf(name, sizeof(name), "%s @%s", t->name, h->name);
			c.name = name;
		}
	}
	c.parent = c.parent ? lookup(&m->track_of, (uint64_t)m->cur << 56 | c.parent) : 0;
	idx = store_track(&m->st, &c);
	remember(m, &m->track_of, key, idx);
	if (c.kind == TRACK_THREAD)
		remember(m, &m->thread_of, key2(c.pid, c.tid), idx);
	else if (c.kind == TRACK_PROCESS)
		remember(m, &m->process_of, c.pid, idx);
}

static uint64_t host_flow(const struct host *h, uint64_t id)
{
	return MODEL_FLOW_KIND(id) == FLOW_JOB ? id + h->flow_add : id;
}

static void on_cap_event(void *ctx, const struct model_event *e)
{
	struct merger *m = ctx;
	uint32_t idx = lookup(&m->track_of, (uint64_t)m->cur << 56 | e->track->id);
	struct model_event c;

	if (!idx)
		return;
	c = *e;
	c.ts = (uint64_t)wrap_add((int64_t)e->ts, m->shift);
	for (int i = 0; i < c.nflows; i++)
		c.flows[i] = host_flow(&m->hosts[m->cur], c.flows[i]);
	for (int i = 0; i < c.nterm; i++)
		c.term_flows[i] = host_flow(&m->hosts[m->cur], c.term_flows[i]);
	store_event(&m->st, idx - 1, &c, (uint8_t)m->cur);
}

void merge_note_clock(struct merger *m, struct host *h, const struct sbt_meta_clock *c)
{
	int64_t off = (int64_t)(c->realtime - c->boottime);

	if (!h->has_clock) {
		h->has_clock = true;
		h->offset = off;
	}
	h->drift = wrap_sub(off, h->offset);
	if (c->spread_ns > h->spread)
		h->spread = c->spread_ns;
	if (h == &m->hosts[0])
		m->st.clocks[m->st.nclocks < 2 ? m->st.nclocks++ : 1] = *c;
}

static void on_cap_clock(void *ctx, const struct sbt_meta_clock *c)
{
	struct merger *m = ctx;

	merge_note_clock(m, &m->hosts[m->cur], c);
}

/* Room for one more after n; -1 (the store's error set) when out of memory. */
static int grow(struct merger *m, void **vec, size_t *cap, size_t n, size_t sz)
{
	if (!vec_reserve(vec, cap, n + 1, sz))
		return 0;
	m->st.error = ENOMEM;
	return -1;
}

/* What the correlator does not hand on: forks and namespace ids. */
static void note_record(struct merger *m, const struct sbt_hdr *h)
{
	uint32_t add = m->hosts[m->cur].pid_add;

	if (h->type == SBT_TASK_NEW && (((const struct sbt_task *)h)->flags & 1)) {
		const struct sbt_task *t = (const void *)h;

		if (grow(m, (void **)&m->forks, &m->forks_cap, m->nforks, sizeof(*m->forks)))
			return;
		m->forks[m->nforks++] = (struct fork_rec){ t->h.tgid + add, t->ppid + add,
							   (uint64_t)wrap_add((int64_t)h->ts, m->shift) };
	} else if (h->type == SBT_META_NSPID) {
		const struct sbt_meta_nspid *n = (const void *)h;

		if (grow(m, (void **)&m->ns, &m->ns_cap, m->nns, sizeof(*m->ns)))
			return;
		m->ns[m->nns++] = (struct nsmap){ n->ns_tgid, n->ns_tid, n->h.tgid + add, n->h.tid + add };
	}
}

/* Our Chrome JSON: the process starts and namespace ids it keeps in
 * otherData, as a capture's records would give them. */
void merge_note_our_facts(struct merger *m, const struct chrome_trace *t)
{
	const struct json_value *other = chrome_other(t);
	const struct json_value *starts = json_get(other, "process_starts");
	const struct json_value *ns = json_get(other, "pid_namespaces");
	uint32_t add = m->hosts[m->cur].pid_add;

	for (uint32_t i = 0; starts && starts->type == JSON_ARRAY && i < starts->n; i++) {
		int64_t pid, ppid, ts;

		if (!json_int(json_get(&starts->items[i], "pid"), &pid) ||
		    !json_int(json_get(&starts->items[i], "ppid"), &ppid) ||
		    !json_int(json_get(&starts->items[i], "ts_ns"), &ts) ||
		    grow(m, (void **)&m->forks, &m->forks_cap, m->nforks, sizeof(*m->forks)))
			continue;
		m->forks[m->nforks++] = (struct fork_rec){ (uint32_t)pid + add, (uint32_t)ppid + add,
							   (uint64_t)wrap_add(ts, m->shift) };
	}
	for (uint32_t i = 0; ns && ns->type == JSON_ARRAY && i < ns->n; i++) {
		int64_t pid, tid, ns_pid, ns_tid;
		const struct json_value *e = &ns->items[i];

		if (!json_int(json_get(e, "pid"), &pid) || !json_int(json_get(e, "tid"), &tid) ||
		    !json_int(json_get(e, "ns_pid"), &ns_pid) || !json_int(json_get(e, "ns_tid"), &ns_tid) ||
		    grow(m, (void **)&m->ns, &m->ns_cap, m->nns, sizeof(*m->ns)))
			continue;
		m->ns[m->nns++] =
			(struct nsmap){ (uint32_t)ns_pid, (uint32_t)ns_tid, (uint32_t)pid + add, (uint32_t)tid + add };
	}
}

/* The capture's host and clock, from a first look at its metadata. */
int merge_peek_capture(struct host *h, const char *path)
{
	struct capture_reader r;
	const struct sbt_hdr *rec;
	int seen = 0;

	if (capture_open(&r, path))
		return -1;
	while (seen != 3 && capture_next(&r, &rec) == CAPTURE_OK) {
		if (rec->type == SBT_META_HOST) {
			const struct sbt_meta_host *mh = (const void *)rec;

			snprintf(h->name, sizeof(h->name), "%.*s", (int)sizeof(mh->hostname), mh->hostname);
			seen |= 1;
		} else if (rec->type == SBT_META_CLOCK && !(seen & 2)) {
			const struct sbt_meta_clock *c = (const void *)rec;

			h->offset = (int64_t)(c->realtime - c->boottime);
			h->has_clock = true;
			seen |= 2;
		}
	}
	capture_close_reader(&r);
	return 0;
}

struct cap_read {
	struct merger *m;
	struct correlator *c;
};

static int read_one(void *ctx, const struct sbt_hdr *h)
{
	struct cap_read *r = ctx;

	note_record(r->m, h);
	if (correlator_add(r->c, h))
		r->m->st.error = ENOMEM;
	return 0;
}

int merge_read_capture(struct merger *m, const char *path)
{
	struct model_sink sink = { m, on_cap_track, on_cap_event, on_cap_clock, NULL };
	struct cap_read r = { m, correlator_new(&sink, 1) };
	int ret;

	m->hosts[m->cur].has_clock = false; /* note_clock takes the first again, and the drift */
	if (!r.c) {
		sbt_err("out of memory");
		return -1;
	}
	/* a damaged capture: what came before the damage is merged, and the
	 * command says so in its exit status */
	ret = capture_each(path, read_one, &r, NULL);
	correlator_finish(r.c);
	correlator_free(r.c);
	if (ret)
		m->damaged = true;
	return 0;
}

/* ---- Chrome JSON (kineto's, or ours), into the store -------------------- */

static uint64_t id_key(const struct chrome_id *id)
{
	if (id->is_num)
		return (uint64_t)id->num;
	return fnv1a(id->str) | 1ull << 63; /* apart from numbers */
}

static bool device_cat(const char *cat)
{
	return !strcmp(cat, "kernel") || !strcmp(cat, "gpu_memcpy") || !strcmp(cat, "gpu_memset") ||
	       !strcmp(cat, "gpu_user_annotation");
}

void merge_gather_names(void *ctx, const struct chrome_event *e)
{
	struct chrome_input *in = ctx;
	struct chrome_names *n = &in->names;
	const struct json_value *name;

	if (e->ph == 'X' || e->ph == 'i' || e->ph == 'I' || e->ph == 'B')
		hm_put(device_cat(e->cat) ? &n->device_pid : &n->cpu_pid, id_key(&e->pid), (void *)1);
	if (e->ph != 'M' || !(name = json_get(e->args, "name")) || name->type != JSON_STRING || !name->s[0])
		return;
	/* the event's text is gone after this: the store keeps the name */
	if (!strcmp(e->name, "process_name"))
		hm_put(&n->proc, id_key(&e->pid), (void *)store_str(&in->m->st, name->s));
	else if (!strcmp(e->name, "thread_name"))
		hm_put(&n->thread, id_key(&e->pid) * 31 + id_key(&e->tid), (void *)store_str(&in->m->st, name->s));
}

void merge_input_free(struct chrome_input *in)
{
	chrome_close(&in->t);
	hm_free(&in->names.proc);
	hm_free(&in->names.thread);
	hm_free(&in->names.device_pid);
	hm_free(&in->names.cpu_pid);
}

/* The store pid of a process the trace calls ns_pid: through the captures'
 * namespace records, else as it is (a process in our namespace). */
static uint32_t host_pid(const struct merger *m, int64_t ns_pid, int64_t ns_tid, uint32_t *tid)
{
	for (size_t i = 0; i < m->nns; i++)
		if (m->ns[i].ns_tgid == (uint32_t)ns_pid && m->ns[i].ns_tid == (uint32_t)ns_tid) {
			*tid = m->ns[i].tid;
			return m->ns[i].tgid;
		}
	for (size_t i = 0; i < m->nns; i++)
		if (m->ns[i].ns_tgid == (uint32_t)ns_pid) {
			/* its main thread, or one the capture has no record of: a
			 * thread id of its own, apart from real ones */
			*tid = ns_tid == ns_pid ? m->ns[i].tgid : 1u << 31 | (uint32_t)ns_tid;
			return m->ns[i].tgid;
		}
	*tid = (uint32_t)ns_tid;
	return (uint32_t)ns_pid;
}

uint32_t merge_make_track(struct merger *m, enum model_track_kind kind, uint32_t parent, uint32_t pid, uint32_t tid,
			  const char *name, int rank)
{
	struct model_track t = { .kind = kind,
				 .parent = parent ? parent : 0,
				 .pid = pid,
				 .tid = tid,
				 .name = name,
				 .rank = rank,
				 .engine = -1 };

	return store_track(&m->st, &t);
}

/* The store track of an imported event's (pid, tid): a capture's thread
 * when it is one, else one made for it (a process the captures did not
 * trace, a device, kineto's own pseudo-processes). */
static uint32_t import_track(struct merger *m, const struct chrome_trace *t, const struct chrome_names *n,
			     const struct chrome_event *e, struct hashmap *made)
{
	uint64_t pk = id_key(&e->pid), tk = pk * 31 + id_key(&e->tid);
	uint32_t idx = lookup(made, tk), pidx, pid, tid;
	const char *pname = hm_get(&n->proc, pk), *tname = hm_get(&n->thread, tk);
	bool ours = t->kind == CHROME_OURS;
	char buf[64];

	if (idx)
		return idx - 1;
	if (e->pid.is_num && e->tid.is_num && e->pid.num >= 0 && e->pid.num < CHROME_TRACER_PID &&
	    (ours || hm_get(&n->cpu_pid, pk) || !hm_get(&n->device_pid, pk))) {
		/* an OS process and thread */
		uint32_t add = ours ? m->hosts[m->cur].pid_add : 0;

		pid = ours ? (uint32_t)e->pid.num : host_pid(m, e->pid.num, e->tid.num, &tid);
		if (ours)
			tid = (uint32_t)e->tid.num;
		pid += add;
		tid += ours ? add : 0;
		idx = lookup(&m->thread_of, key2(pid, tid));
		if (!idx) {
			pidx = lookup(&m->process_of, pid);
			if (!pidx) {
				snprintf(buf, sizeof(buf), "pid %u", pid);
				pidx = merge_make_track(m, TRACK_PROCESS, 0, pid, 0, pname ? pname : buf, 0) + 1;
				remember(m, &m->process_of, pid, pidx - 1);
			}
			snprintf(buf, sizeof(buf), "thread %u", tid);
			idx = merge_make_track(m, TRACK_THREAD, 0, pid, tid, tname ? tname : buf, 0) + 1;
			remember(m, &m->thread_of, key2(pid, tid), idx - 1);
		}
		remember(m, made, tk, idx - 1);
		return idx - 1;
	}
	/* a group of lanes: a device, or a pseudo-process */
	pidx = lookup(made, pk * 31 + 7);
	if (!pidx) {
		/* kineto puts its global instants (Record Window End) on pid
		 * "", which it names nowhere: never an empty name */
		if (!pname && e->pid.is_num)
			snprintf(buf, sizeof(buf), "pid %lld", (long long)e->pid.num);
		else if (!pname)
			snprintf(buf, sizeof(buf), "%s", e->pid.str[0] ? e->pid.str : "no pid (global events)");
		if (ours && e->pid.is_num && e->pid.num == CHROME_TRACER_PID)
			pidx = merge_make_track(m, TRACK_GLOBAL, 0, 0, 0, pname ? pname : buf, 0) + 1;
		else /* our cards keep their numbers; others' come after */
			pidx = merge_make_track(m, ours ? TRACK_DEVICE : TRACK_GROUP, 0, 0, 0, pname ? pname : buf,
						ours && e->pid.is_num && e->pid.num > CHROME_DEVICE_PID_BASE
							? (int)(e->pid.num - CHROME_DEVICE_PID_BASE) +
								  m->hosts[m->cur].rank_add
							: 1000 + (int)(m->st.ntracks % 1000)) +
			       1;
		remember(m, made, pk * 31 + 7, pidx - 1);
	}
	if (m->st.tracks[pidx - 1].kind == TRACK_GLOBAL) {
		remember(m, made, tk, pidx - 1);
		return pidx - 1;
	}
	if (!tname && e->tid.is_num)
		snprintf(buf, sizeof(buf), "%lld", (long long)e->tid.num);
	else if (!tname)
		snprintf(buf, sizeof(buf), "%s", e->tid.str[0] ? e->tid.str : "no tid");
	idx = merge_make_track(m, TRACK_LANE, m->st.tracks[pidx - 1].id, 0, 0, tname ? tname : buf,
			       (int)(e->tid.is_num ? e->tid.num % 100000 : 0));
	remember(m, made, tk, idx);
	return idx;
}

/* A counter track under a process or device group, by name. */
static uint32_t counter_track(struct merger *m, uint32_t parent, const char *name, struct hashmap *made)
{
	uint64_t k = (uint64_t)parent << 32 ^ (uint64_t)(uintptr_t)store_str(&m->st, name);
	uint32_t idx = lookup(made, k);
	struct model_track t = { .kind = TRACK_COUNTER, .parent = m->st.tracks[parent].id, .name = name, .engine = -1 };

	if (idx)
		return idx - 1;
	idx = store_track(&m->st, &t);
	remember(m, made, k, idx);
	return idx;
}

/* An imported event's args as model args: numbers as numbers, the rest
 * (arrays, objects, fractions) as their text; External id first. */
static void import_args(const struct chrome_event *ce, struct model_event *e, char *texts, size_t texts_len)
{
	const struct json_value *a = ce->args;
	size_t used = 0;

	if (!a)
		return;
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < a->n && e->nargs < MODEL_MAX_ARGS; i++) {
			const struct json_member *mb = &a->members[i];
			struct model_arg *out = &e->args[e->nargs];
			bool ext = !strcmp(mb->key, "External id");

			if (ext != (pass == 0))
				continue;
			out->name = mb->key;
			out->fixed = false; /* its strings live as long as the event */
			if (mb->v.type == JSON_NUMBER && json_int(&mb->v, &out->i)) {
				out->type = ARG_INT;
			} else if (mb->v.type == JSON_STRING) {
				out->type = ARG_STR;
				out->s = mb->v.s;
			} else {
				size_t n = mb->v.rawlen < 255 ? mb->v.rawlen : 255;

				if (used + n + 1 > texts_len)
					continue;
				memcpy(texts + used, mb->v.raw, n);
				texts[used + n] = 0;
				out->type = ARG_STR;
				out->s = texts + used;
				used += n + 1;
			}
			e->nargs++;
		}
}

static int flow_kind(const char *cat)
{
	return !strcmp(cat, "ac2g") ? FLOW_AC2G : !strcmp(cat, "fwdbwd") ? FLOW_FWDBWD : FLOW_OTHER;
}

struct import {
	struct merger *m;
	struct chrome_input *in;
	int64_t ts_add;
	uint8_t from;
	struct flows *fl;
	struct hashmap made; /* key -> store track index + 1 */
	char texts[MODEL_MAX_ARGS * 256];
};

/* One event of the imported trace into the store; a flow end into fl. */
static void import_one(void *ctx, const struct chrome_event *ce)
{
	struct import *im = ctx;
	struct merger *m = im->m;
	const struct chrome_trace *t = &im->in->t;
	const struct chrome_names *n = &im->in->names;
	struct flows *fl = im->fl;
	struct model_event e;
	uint32_t track;

	if (!ce->has_ts)
		return;
	memset(&e, 0, sizeof(e));
	e.ts = (uint64_t)wrap_add(ce->ts_ns, im->ts_add);
	e.name = ce->name;
	e.cat = ce->cat;
	switch (ce->ph) {
	case 'X':
		track = import_track(m, t, n, ce, &im->made);
		e.kind = EV_SLICE;
		e.dur = (uint64_t)ce->dur_ns;
		e.depth = OP_DEPTH;
		/* ours: calls back under the model's category */
		if (t->kind == CHROME_OURS && !strcmp(e.cat, "cuda_runtime"))
			e.cat = "runtime";
		else if (t->kind == CHROME_KINETO)
			m->ops++;
		break;
	case 'i':
	case 'I':
		track = import_track(m, t, n, ce, &im->made);
		e.kind = EV_INSTANT;
		e.depth = MODEL_DEPTH_INSTANTS;
		break;
	case 'C': {
		const struct json_value *a = ce->args;

		track = import_track(m, t, n, ce, &im->made);
		if (m->st.tracks[track].kind == TRACK_THREAD ||
		    m->st.tracks[track].kind == TRACK_LANE) { /* counters go on the process */
			uint32_t p = m->st.tracks[track].kind == TRACK_THREAD
					     ? lookup(&m->process_of, m->st.tracks[track].pid)
					     : (uint32_t)m->st.tracks[track].parent;
			if (p)
				track = p - 1;
		}
		track = counter_track(m, track, ce->name, &im->made);
		e.kind = EV_COUNTER;
		if (!a || !a->n || !json_decimal(&a->members[0].v, 0, &e.value))
			return;
		break;
	}
	case 's':
	case 'f':
		if (!ce->has_id || grow(m, (void **)&fl->v, &fl->cap, fl->n, sizeof(*fl->v)))
			return;
		fl->v[fl->n++] = (struct flow_end){ MODEL_FLOW_ID(flow_kind(ce->cat), (uint64_t)ce->id),
						    import_track(m, t, n, ce, &im->made),
						    e.ts,
						    ce->ph == 's',
						    ce->ph == 's' || ce->bp_enclosing,
						    im->from,
						    UINT32_MAX };
		return;
	default: /* M (names, read at open), B/E (kineto writes none), t */ return;
	}
	import_args(ce, &e, im->texts, sizeof(im->texts));
	store_event(&m->st, track, &e, im->from);
}

int merge_import_chrome(struct merger *m, struct chrome_input *in, int64_t ts_add, uint8_t from, struct flows *fl)
{
	struct import *im = calloc(1, sizeof(*im));
	char err[512];
	int ret;

	if (!im) {
		sbt_err("out of memory");
		return -1;
	}
	*im = (struct import){ .m = m, .in = in, .ts_add = ts_add, .from = from, .fl = fl };
	ret = chrome_each(&in->t, import_one, im, err, sizeof(err));
	if (ret)
		sbt_err("%s", err);
	hm_free(&im->made);
	free(im);
	return ret;
}
