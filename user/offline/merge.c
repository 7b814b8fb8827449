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

#include "base/hashmap.h"
#include "base/log.h"
#include "base/vec.h"
#include "capture/capture.h"
#include "commands.h"
#include "model/correlate.h"
#include "model/output.h"
#include "offline/chrome_read.h"
#include "offline/tracestore.h"

#define MAX_INPUTS 64
#define HOST_PID_SHIFT 22 /* above Linux's PID_MAX_LIMIT: another host's pids */
#define OURS_DEVICE_PID 1000000000ll /* chrome_json.c's pseudo-pids */
#define OURS_TRACER_PID (OURS_DEVICE_PID - 1)
#define OP_DEPTH 128 /* imported slices' depths start here: their own sequences */
#define MAX_OVERFLOW 8
#define FROM_TORCH 255

struct merge_opts {
	const char *paths[MAX_INPUTS];
	int n;
	const char *out, *format;
};

/* A process a capture saw fork: the op its parent was in gets an arrow to
 * its first runtime call. */
struct fork_rec {
	uint32_t child, parent; /* store pids */
	uint64_t ts;
};

struct nsmap {
	uint32_t ns_tgid, ns_tid, tgid, tid; /* store ids */
};

struct host {
	const char *path;
	char name[64];
	int64_t offset; /* REALTIME - BOOTTIME at the first snapshot */
	int64_t drift; /* how far that moved by the last snapshot */
	uint64_t spread;
	bool has_clock;
	uint32_t pid_add; /* added to its pids and tids */
	int rank_add; /* added to its device ranks */
	uint64_t flow_add; /* added to its job flow ids */
};

struct merger {
	struct trace_store st;
	struct host hosts[MAX_INPUTS];
	int nhosts;
	struct hashmap track_of; /* (host << 56 | input track id) -> store index + 1 */
	struct hashmap thread_of; /* (pid << 32 | tid) -> store index + 1, host-made pids */
	struct hashmap process_of; /* pid -> store index + 1 */
	struct fork_rec *forks;
	size_t nforks, forks_cap;
	struct nsmap *ns;
	size_t nns, ns_cap;
	int cur; /* the host being read */
	int64_t shift; /* added to its times */
	uint32_t nimported; /* imported thread tracks, for their kineto ids */
	/* what the summary says */
	uint64_t ops, calls, calls_linked, spawns_linked, overflowed, flows_paired;
	int max_overflow;
};

static uint64_t key2(uint32_t a, uint32_t b)
{
	return (uint64_t)a << 32 | b;
}

static uint32_t lookup(const struct hashmap *m, uint64_t key)
{
	return (uint32_t)(uintptr_t)hm_get(m, key); /* index + 1, 0 = none */
}

static void remember(struct merger *m, struct hashmap *map, uint64_t key, uint32_t idx)
{
	if (hm_put(map, key, (void *)(uintptr_t)(idx + 1)))
		m->st.error = ENOMEM;
}

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
	c.ts = (uint64_t)((int64_t)e->ts + m->shift);
	for (int i = 0; i < c.nflows; i++)
		c.flows[i] = host_flow(&m->hosts[m->cur], c.flows[i]);
	for (int i = 0; i < c.nterm; i++)
		c.term_flows[i] = host_flow(&m->hosts[m->cur], c.term_flows[i]);
	store_event(&m->st, idx - 1, &c, (uint8_t)m->cur);
}

static void note_clock(struct merger *m, struct host *h, const struct sbt_meta_clock *c)
{
	int64_t off = (int64_t)(c->realtime - c->boottime);

	if (!h->has_clock) {
		h->has_clock = true;
		h->offset = off;
	}
	h->drift = off - h->offset;
	if (c->spread_ns > h->spread)
		h->spread = c->spread_ns;
	if (h == &m->hosts[0])
		m->st.clocks[m->st.nclocks < 2 ? m->st.nclocks++ : 1] = *c;
}

static void on_cap_clock(void *ctx, const struct sbt_meta_clock *c)
{
	struct merger *m = ctx;

	note_clock(m, &m->hosts[m->cur], c);
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
							   (uint64_t)((int64_t)h->ts + m->shift) };
	} else if (h->type == SBT_META_NSPID) {
		const struct sbt_meta_nspid *n = (const void *)h;

		if (grow(m, (void **)&m->ns, &m->ns_cap, m->nns, sizeof(*m->ns)))
			return;
		m->ns[m->nns++] = (struct nsmap){ n->ns_tgid, n->ns_tid, n->h.tgid + add, n->h.tid + add };
	}
}

/* Our Chrome JSON: the process starts and namespace ids it keeps in
 * otherData, as a capture's records would give them. */
static void note_our_facts(struct merger *m, const struct chrome_trace *t)
{
	const struct json_value *other = json_get(&t->doc.root, "otherData");
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
							   (uint64_t)(ts + m->shift) };
	}
	for (uint32_t i = 0; ns && ns->type == JSON_ARRAY && i < ns->n; i++) {
		int64_t pid, tid, ns_pid, ns_tid;
		const struct json_value *e = &ns->items[i];

		if (!json_int(json_get(e, "pid"), &pid) || !json_int(json_get(e, "tid"), &tid) ||
		    !json_int(json_get(e, "ns_pid"), &ns_pid) || !json_int(json_get(e, "ns_tid"), &ns_tid) ||
		    grow(m, (void **)&m->ns, &m->ns_cap, m->nns, sizeof(*m->ns)))
			continue;
		m->ns[m->nns++] = (struct nsmap){ (uint32_t)ns_pid, (uint32_t)ns_tid, (uint32_t)pid + add,
						  (uint32_t)tid + add };
	}
}

/* The capture's host and clock, from a first look at its metadata. */
static int peek_capture(struct host *h, const char *path)
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

static int read_capture(struct merger *m, const char *path)
{
	struct model_sink sink = { m, on_cap_track, on_cap_event, on_cap_clock, NULL };
	struct capture_reader r;
	const struct sbt_hdr *rec;
	enum capture_status st;
	struct correlator *c;
	struct host *h = &m->hosts[m->cur];

	h->has_clock = false; /* note_clock takes the first again, and the drift */
	if (capture_open(&r, path)) {
		sbt_err("cannot read '%s': %s", path, r.error);
		return -1;
	}
	if (!(c = correlator_new(&sink, 1))) {
		capture_close_reader(&r);
		sbt_err("out of memory");
		return -1;
	}
	while ((st = capture_next(&r, &rec)) == CAPTURE_OK) {
		note_record(m, rec);
		if (correlator_add(c, rec))
			m->st.error = ENOMEM;
	}
	correlator_finish(c);
	if (st == CAPTURE_TRUNCATED)
		sbt_warn("%s ends inside a record (cut short?); used the %llu whole ones", path,
			 (unsigned long long)r.records);
	else if (st == CAPTURE_CORRUPT)
		sbt_warn("%s: %s; used the %llu records before it", path, r.error,
			 (unsigned long long)r.records);
	correlator_free(c);
	capture_close_reader(&r);
	return 0;
}

/* ---- Chrome JSON (kineto's, or ours), into the store -------------------- */

struct names {
	struct hashmap proc; /* pid key -> name */
	struct hashmap thread; /* (pid, tid) key -> name */
	struct hashmap device_pid; /* pid key -> 1: only device work on it (kineto) */
	struct hashmap cpu_pid; /* pid key -> 1: host work on it */
};

static uint64_t id_key(const struct chrome_id *id)
{
	uint64_t h = 1469598103934665603ull;

	if (id->is_num)
		return (uint64_t)id->num;
	for (const char *s = id->str; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h | 1ull << 63; /* apart from numbers */
}

static bool device_cat(const char *cat)
{
	return !strcmp(cat, "kernel") || !strcmp(cat, "gpu_memcpy") || !strcmp(cat, "gpu_memset") ||
	       !strcmp(cat, "gpu_user_annotation");
}

static void gather_names(const struct chrome_trace *t, struct names *n)
{
	struct chrome_event e;

	for (uint32_t i = 0; i < chrome_count(t); i++) {
		const struct json_value *name;

		if (!chrome_event(t, i, &e))
			continue;
		if (e.ph == 'X' || e.ph == 'i' || e.ph == 'I' || e.ph == 'B')
			hm_put(device_cat(e.cat) ? &n->device_pid : &n->cpu_pid, id_key(&e.pid), (void *)1);
		if (e.ph != 'M' || !(name = json_get(e.args, "name")) || name->type != JSON_STRING || !name->s[0])
			continue;
		if (!strcmp(e.name, "process_name"))
			hm_put(&n->proc, id_key(&e.pid), (void *)name->s);
		else if (!strcmp(e.name, "thread_name"))
			hm_put(&n->thread, id_key(&e.pid) * 31 + id_key(&e.tid), (void *)name->s);
	}
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

static uint32_t make_track(struct merger *m, enum model_track_kind kind, uint32_t parent,
			   uint32_t pid, uint32_t tid, const char *name, int rank)
{
	struct model_track t = { .kind = kind, .parent = parent ? parent : 0, .pid = pid, .tid = tid,
				 .name = name, .rank = rank, .engine = -1 };

	return store_track(&m->st, &t);
}

/* The store track of an imported event's (pid, tid): a capture's thread
 * when it is one, else one made for it (a process the captures did not
 * trace, a device, kineto's own pseudo-processes). */
static uint32_t import_track(struct merger *m, const struct chrome_trace *t, struct names *n,
			     const struct chrome_event *e, struct hashmap *made)
{
	uint64_t pk = id_key(&e->pid), tk = pk * 31 + id_key(&e->tid);
	uint32_t idx = lookup(made, tk), pidx, pid, tid;
	const char *pname = hm_get(&n->proc, pk), *tname = hm_get(&n->thread, tk);
	bool ours = t->kind == CHROME_OURS;
	char buf[64];

	if (idx)
		return idx - 1;
	if (e->pid.is_num && e->tid.is_num && e->pid.num >= 0 && e->pid.num < OURS_TRACER_PID &&
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
				pidx = make_track(m, TRACK_PROCESS, 0, pid, 0, pname ? pname : buf, 0) + 1;
				remember(m, &m->process_of, pid, pidx - 1);
			}
			snprintf(buf, sizeof(buf), "thread %u", tid);
			idx = make_track(m, TRACK_THREAD, 0, pid, tid, tname ? tname : buf, 0) + 1;
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
		if (ours && e->pid.is_num && e->pid.num == OURS_TRACER_PID)
			pidx = make_track(m, TRACK_GLOBAL, 0, 0, 0, pname ? pname : buf, 0) + 1;
		else /* our cards keep their numbers; others' come after */
			pidx = make_track(m, ours ? TRACK_DEVICE : TRACK_GROUP, 0, 0, 0, pname ? pname : buf,
					  ours && e->pid.is_num && e->pid.num > OURS_DEVICE_PID
						  ? (int)(e->pid.num - OURS_DEVICE_PID) + m->hosts[m->cur].rank_add
						  : 1000 + (int)(m->st.ntracks % 1000)) + 1;
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
	idx = make_track(m, TRACK_LANE, m->st.tracks[pidx - 1].id, 0, 0, tname ? tname : buf,
			 (int)(e->tid.is_num ? e->tid.num % 100000 : 0));
	remember(m, made, tk, idx);
	return idx;
}

/* A counter track under a process or device group, by name. */
static uint32_t counter_track(struct merger *m, uint32_t parent, const char *name,
			      struct hashmap *made)
{
	uint64_t k = (uint64_t)parent << 32 ^ (uint64_t)(uintptr_t)store_str(&m->st, name);
	uint32_t idx = lookup(made, k);
	struct model_track t = { .kind = TRACK_COUNTER, .parent = m->st.tracks[parent].id,
				 .name = name, .engine = -1 };

	if (idx)
		return idx - 1;
	idx = store_track(&m->st, &t);
	remember(m, made, k, idx);
	return idx;
}

/* An imported event's args as model args: numbers as numbers, the rest
 * (arrays, objects, fractions) as their text; External id first. */
static void import_args(const struct chrome_event *ce, struct model_event *e, char *texts,
			size_t texts_len)
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

/* A flow end of the imported trace, bound to its slice once all are placed. */
struct flow_end {
	uint64_t id; /* with its kind */
	uint32_t track;
	uint64_t ts;
	bool start, enclosing;
	uint8_t from; /* the input it came from: bound to that input's slices */
	uint32_t ev; /* the slice, once bound; UINT32_MAX if none */
};

struct flows {
	struct flow_end *v;
	size_t n, cap;
};

static int flow_kind(const char *cat)
{
	return !strcmp(cat, "ac2g") ? FLOW_AC2G : !strcmp(cat, "fwdbwd") ? FLOW_FWDBWD : FLOW_OTHER;
}

/* The imported trace's events, in its order; flow ends into fl. */
static void import_chrome(struct merger *m, const struct chrome_trace *t, int64_t ts_add,
			  uint8_t from, struct flows *fl)
{
	struct names n = { 0 };
	struct hashmap made = { 0 };
	char texts[MODEL_MAX_ARGS * 256];

	gather_names(t, &n);
	for (uint32_t i = 0; i < chrome_count(t); i++) {
		struct chrome_event ce;
		struct model_event e;
		uint32_t track;

		if (!chrome_event(t, i, &ce) || !ce.has_ts)
			continue;
		memset(&e, 0, sizeof(e));
		e.ts = (uint64_t)(ce.ts_ns + ts_add);
		e.name = ce.name;
		e.cat = ce.cat;
		switch (ce.ph) {
		case 'X':
			track = import_track(m, t, &n, &ce, &made);
			e.kind = EV_SLICE;
			e.dur = (uint64_t)ce.dur_ns;
			e.depth = OP_DEPTH;
			/* ours: calls back under the model's category */
			if (t->kind == CHROME_OURS && !strcmp(e.cat, "cuda_runtime"))
				e.cat = "runtime";
			else if (t->kind == CHROME_KINETO)
				m->ops++;
			break;
		case 'i':
		case 'I':
			track = import_track(m, t, &n, &ce, &made);
			e.kind = EV_INSTANT;
			e.depth = MODEL_DEPTH_INSTANTS;
			break;
		case 'C': {
			const struct json_value *a = ce.args;

			track = import_track(m, t, &n, &ce, &made);
			if (m->st.tracks[track].kind == TRACK_THREAD ||
			    m->st.tracks[track].kind == TRACK_LANE) { /* counters go on the process */
				uint32_t p = m->st.tracks[track].kind == TRACK_THREAD
						     ? lookup(&m->process_of, m->st.tracks[track].pid)
						     : (uint32_t)m->st.tracks[track].parent;
				if (p)
					track = p - 1;
			}
			track = counter_track(m, track, ce.name, &made);
			e.kind = EV_COUNTER;
			if (!a || !a->n || !json_decimal(&a->members[0].v, 0, &e.value))
				continue;
			break;
		}
		case 's':
		case 'f':
			if (!ce.has_id ||
			    grow(m, (void **)&fl->v, &fl->cap, fl->n, sizeof(*fl->v)))
				continue;
			fl->v[fl->n++] = (struct flow_end){
				MODEL_FLOW_ID(flow_kind(ce.cat), (uint64_t)ce.id),
				import_track(m, t, &n, &ce, &made), e.ts, ce.ph == 's',
				ce.ph == 's' || ce.bp_enclosing, from, UINT32_MAX };
			continue;
		default: /* M (names, read above), B/E (kineto writes none), t */
			continue;
		}
		import_args(&ce, &e, texts, sizeof(texts));
		store_event(&m->st, track, &e, from);
	}
	hm_free(&n.proc);
	hm_free(&n.thread);
	hm_free(&n.device_pid);
	hm_free(&n.cpu_pid);
	hm_free(&made);
}

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

static bool is_call(const struct store_event *e, const struct model_track *t)
{
	return e->kind == EV_SLICE && t->kind == TRACK_THREAD && e->from != FROM_TORCH &&
	       e->cat && !strcmp(e->cat, "runtime");
}

/* The overflow track n (1 up) of a thread. */
static uint32_t overflow_track(struct merger *m, uint32_t thread, int n, uint32_t *cache)
{
	char name[192];

	if (cache[n - 1])
		return cache[n - 1] - 1;
	snprintf(name, sizeof(name), "%s: ops overlapping (%d)", m->st.tracks[thread].name, n);
	cache[n - 1] = make_track(m, TRACK_LANE, m->st.tracks[thread].id, 0, 0, name, n) + 1;
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
static void lay_out_thread(struct merger *m, uint32_t thread, struct slice_ref *s, size_t n,
			   uint64_t *next_flow)
{
	uint32_t cache[MAX_OVERFLOW] = { 0 };
	struct slice_ref *rest = malloc((n ? n : 1) * sizeof(*rest));
	uint32_t *stack = malloc((n ? n : 1) * sizeof(*stack)); /* indexes into s */

	if (!rest || !stack) {
		m->st.error = ENOMEM;
		goto out;
	}
	for (int level = 0; n && level <= MAX_OVERFLOW; level++) {
		size_t top = 0, nrest = 0, depth_imported;

		qsort(s, n, sizeof(*s), by_start);
		for (size_t i = 0; i < n; i++) {
			struct slice_ref *x = &s[i];

			while (top && s[stack[top - 1]].end <= x->start)
				top--;
			if (x->imported) {
				if (top && s[stack[top - 1]].end < x->end && level < MAX_OVERFLOW) {
					rest[nrest++] = *x; /* crosses the top */
					continue;
				}
				depth_imported = 0;
				for (size_t k = 0; k < top; k++)
					depth_imported += s[stack[k]].imported;
				m->st.ev[x->ev].depth = (uint8_t)(OP_DEPTH + (depth_imported < 100 ? depth_imported : 100));
				if (level)
					m->st.ev[x->ev].track = overflow_track(m, thread, level, cache);
				stack[top++] = (uint32_t)i;
				continue;
			}
			while (top && s[stack[top - 1]].imported && s[stack[top - 1]].end < x->end) {
				rest[nrest++] = s[stack[--top]]; /* the op gives way */
			}
			if (is_call(&m->st.ev[x->ev], &m->st.tracks[thread])) {
				m->calls++;
				for (size_t k = top; k-- > 0;) {
					const struct store_event *op = &m->st.ev[s[stack[k]].ev];

					if (!s[stack[k]].imported)
						continue;
					for (int a = 0; a < op->nargs; a++)
						if (!strcmp(m->st.args[op->args + a].name, "External id"))
							m->st.ev[x->ev].ext_id = m->st.args[op->args + a].i;
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

static void link_spawns(struct merger *m, uint64_t *next_flow)
{
	for (size_t f = 0; f < m->nforks; f++) {
		uint32_t op = op_at(m, m->forks[f].parent, m->forks[f].ts), first = UINT32_MAX;

		if (op == UINT32_MAX)
			continue;
		for (size_t i = 0; i < m->st.nev; i++) {
			const struct store_event *e = &m->st.ev[i];
			const struct model_track *t = &m->st.tracks[e->track];

			if (is_call(e, t) && t->pid == m->forks[f].child &&
			    (first == UINT32_MAX || e->ts < m->st.ev[first].ts))
				first = (uint32_t)i;
		}
		if (first == UINT32_MAX)
			continue;
		for (int a = 0; a < m->st.ev[op].nargs; a++)
			if (!strcmp(m->st.args[m->st.ev[op].args + a].name, "External id") &&
			    m->st.ev[first].ext_id == STORE_NO_EXT_ID)
				m->st.ev[first].ext_id = m->st.args[m->st.ev[op].args + a].i;
		store_link(&m->st, op, first, MODEL_FLOW_ID(FLOW_SPAWN, ++*next_flow));
		m->spawns_linked++;
	}
}

/* Threads with imported slices: lay each out. */
static void lay_out(struct merger *m, uint64_t *next_flow)
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

		if (e->kind != EV_SLICE || m->st.tracks[e->track].kind != TRACK_THREAD ||
		    !has_op[e->track])
			continue;
		all[at[e->track] + count[e->track]++] =
			(struct slice_ref){ (uint32_t)i, e->ts, e->ts + e->dur, e->from == FROM_TORCH };
	}
	for (size_t t = 0; t < nt; t++)
		if (has_op[t])
			lay_out_thread(m, (uint32_t)t, all + at[t], count[t], next_flow);
	for (size_t i = 0; i < m->st.nev; i++) /* calls on threads with no op */
		if (!has_op[m->st.ev[i].track] && is_call(&m->st.ev[i], &m->st.tracks[m->st.ev[i].track]))
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
static void bind_flows(struct merger *m, struct flows *fl)
{
	struct slice_key *k = malloc((m->st.nev ? m->st.nev : 1) * sizeof(*k));
	size_t n = 0;

	if (!k) {
		m->st.error = ENOMEM;
		return;
	}
	for (size_t i = 0; i < m->st.nev; i++)
		if (m->st.ev[i].kind == EV_SLICE)
			k[n++] = (struct slice_key){ (uint64_t)m->st.ev[i].from << 32 |
							     home_track(m, m->st.ev[i].track),
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
static void pair_flows(struct merger *m, struct flows *fl)
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

/* ---- the command -------------------------------------------------------- */

static error_t merge_parse(int key, char *arg, struct argp_state *state)
{
	struct merge_opts *o = state->input;

	switch (key) {
	case 'o': o->out = arg; break;
	case 1000: o->format = arg; break;
	case ARGP_KEY_ARG:
		if (o->n == MAX_INPUTS)
			argp_error(state, "at most %d inputs", MAX_INPUTS);
		o->paths[o->n++] = arg;
		break;
	case ARGP_KEY_END:
		if (o->n < 2)
			argp_error(state, "merge needs two traces or more; hint: merge TORCH.json CAPTURE.sbt -o OUT.pftrace");
		if (!o->out)
			argp_error(state, "no output; hint: -o OUT.pftrace or -o OUT.json");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
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
	struct model_event e = { .kind = EV_INSTANT, .name = "clocks aligned", .cat = "tracer",
				 .depth = MODEL_DEPTH_INSTANTS };
	uint32_t idx = store_track(&m->st, &t);

	e.ts = first_op > 0 ? (uint64_t)first_op : 0;
	e.args[e.nargs++] = (struct model_arg){ .name = "torch trace", .type = ARG_STR, .s = torch };
	e.args[e.nargs++] = (struct model_arg){ .name = "rule", .type = ARG_STR,
		.s = "BOOTTIME = ts_us * 1000 + baseTimeNanoseconds - (REALTIME - BOOTTIME)" };
	e.args[e.nargs++] = (struct model_arg){ .name = "baseTimeNanoseconds", .type = ARG_INT, .i = base };
	e.args[e.nargs++] = (struct model_arg){ .name = "realtime_minus_boottime_ns", .type = ARG_INT,
						.i = h->offset };
	e.args[e.nargs++] = (struct model_arg){ .name = "spread_ns", .type = ARG_UINT,
						.u = h->spread + (uint64_t)llabs(h->drift) };
	store_event(&m->st, idx, &e, FROM_TORCH - 1);
}

int cmd_merge(int argc, char **argv)
{
	static const struct argp_option options[] = {
		{ "output", 'o', "FILE", 0, "OUT.pftrace (Perfetto) or OUT.json (Chrome JSON)", 0 },
		{ "format", 1000, "FMT", 0, "perfetto or json, whatever -o's extension", 0 },
		{ 0 }
	};
	static const struct argp argp = {
		options, merge_parse, "TORCH.json CAPTURE.sbt [MORE.sbt|OURS.json...]",
		"Merge a PyTorch profiler trace (torch.profiler, kineto) with captures into one "
		"timeline: ops on the threads of the runtime calls they made, an arrow and its "
		"External id from each op to each call inside it, and from the op that started a "
		"process to that process's first call. Captures (or this tool's Chrome JSON) of "
		"several hosts join as one trace, a process per host; the PyTorch trace is "
		"optional then.\n\nEXAMPLES:\n"
		"  spyre-bpftrace merge torch.json run.sbt -o run.pftrace\n"
		"  spyre-bpftrace merge torch.json run.sbt -o run.json\n"
		"  spyre-bpftrace merge host1.sbt host2.sbt -o job.pftrace",
		NULL, NULL, NULL
	};
	struct merge_opts o = { 0 };
	struct merger *m = calloc(1, sizeof(*m));
	struct chrome_trace torch = { 0 }, ours[MAX_INPUTS];
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

	if (!m) {
		sbt_err("out of memory");
		return 1;
	}
	store_init(&m->st);
	argp_parse(&argp, argc, argv, 0, NULL, &o);
	if (output_format(o.out, o.format, &fmt, err, sizeof(err)) || fmt == FMT_SBT) {
		sbt_err("%s", fmt == FMT_SBT ? "merge writes .pftrace or .json; hint: -o OUT.pftrace" : err);
		free(m);
		return 2;
	}
	/* every input read and checked before the output is touched */
	for (int i = 0; i < o.n; i++) {
		const char *p = o.paths[i];
		struct host *h;

		if (is_capture(p)) {
			kinds[m->nhosts] = 0;
		} else {
			struct chrome_trace *t = torch_path ? &ours[nours] : &torch;

			if (chrome_open(t, p, err, sizeof(err))) {
				sbt_err("%s", err);
				goto done;
			}
			if (t->kind == CHROME_KINETO) {
				if (torch_path) {
					sbt_err("two PyTorch traces ('%s', '%s'); hint: merge one at a time", torch_path, p);
					chrome_close(t);
					goto done;
				}
				torch_path = p;
				continue;
			}
			if (t == &torch) { /* ours, read before any kineto one */
				ours[nours] = torch;
				memset(&torch, 0, sizeof(torch));
			}
			kinds[m->nhosts] = 1;
			nours++;
		}
		h = &m->hosts[m->nhosts++];
		h->path = p;
		if (kinds[m->nhosts - 1] == 0 && peek_capture(h, p)) {
			sbt_err("cannot read '%s'", p);
			goto done;
		}
		if (kinds[m->nhosts - 1] == 1) {
			const struct chrome_trace *t = &ours[nours - 1];

			h->has_clock = true;
			h->offset = (int64_t)(t->clocks[0].realtime - t->clocks[0].boottime);
			snprintf(h->name, sizeof(h->name), "%s", p);
		}
		if (!h->has_clock) {
			sbt_err("'%s' has no clock snapshot: it cannot be aligned; hint: record it again "
				"with this version", p);
			goto done;
		}
	}
	if (!m->nhosts) {
		sbt_err("no capture to merge '%s' with; hint: merge %s CAPTURE.sbt -o OUT.pftrace",
			torch_path, torch_path);
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
		m->shift = m->hosts[i].offset - m->hosts[0].offset;
		if (kinds[i] == 0) {
			if (read_capture(m, m->hosts[i].path))
				goto done;
		} else {
			struct chrome_trace *t = &ours[k++];

			for (int c = 0; c < t->nclocks; c++)
				note_clock(m, &m->hosts[i], &t->clocks[c]);
			note_our_facts(m, t);
			import_chrome(m, t, m->shift, (uint8_t)i, &fl);
		}
	}
	if (torch_path) {
		int64_t add = torch.base_ns - m->hosts[0].offset;

		import_chrome(m, &torch, add, FROM_TORCH, &fl);
		for (size_t i = 0; i < m->st.nev; i++)
			if (m->st.ev[i].from == FROM_TORCH && m->st.ev[i].kind == EV_SLICE &&
			    (first_op < 0 || (int64_t)m->st.ev[i].ts < first_op))
				first_op = (int64_t)m->st.ev[i].ts;
		note_alignment(m, torch_path, torch.base_ns, first_op);
	}
	lay_out(m, &next_flow);
	link_spawns(m, &next_flow);
	bind_flows(m, &fl);
	pair_flows(m, &fl);
	if (m->st.error) {
		sbt_err("out of memory merging; hint: merge a shorter window");
		goto done;
	}
	if (output_open(&out, o.out, fmt, false, err, sizeof(err))) {
		sbt_err("cannot write '%s': %s", o.out, err);
		output_free(&out);
		goto done;
	}
	sink = out.pf ? perfetto_sink(out.pf) : json_sink(out.js);
	store_replay(&m->st, &sink, 1);
	if (output_close(&out) || output_commit(&out)) {
		sbt_err("writing '%s' failed: %s", o.out, strerror(out.error));
		output_free(&out);
		goto done;
	}
	if (torch_path) {
		struct host *h = &m->hosts[0];

		sbt_warn("clocks: %s's REALTIME put on %s's BOOTTIME with REALTIME - BOOTTIME = %lld ns "
			 "(spread %llu ns, moved %lld ns over the capture)",
			 torch_path, h->path, (long long)h->offset, (unsigned long long)h->spread,
			 (long long)h->drift);
		sbt_warn("%llu ops; %llu of %llu runtime calls inside an op, linked; processes linked to "
			 "the op that started them: %llu; flows of the PyTorch trace kept: %llu; ops on "
			 "overlap tracks: %llu",
			 (unsigned long long)m->ops, (unsigned long long)m->calls_linked,
			 (unsigned long long)m->calls, (unsigned long long)m->spawns_linked,
			 (unsigned long long)m->flows_paired, (unsigned long long)m->overflowed);
		if (m->ops && !m->calls_linked && !m->spawns_linked && m->calls)
			sbt_warn("no runtime call fell inside an op: is %s from the same run? (its pids "
				 "must be the traced processes)", torch_path);
	}
	sbt_warn("%s %s (%.1f KiB) from %d input%s", output_format_name(fmt), o.out,
		 (double)out.bytes / 1024.0, o.n, o.n > 1 ? "s" : "");
	output_free(&out);
	ret = 0;
done:
	chrome_close(&torch);
	for (int i = 0; i < nours; i++)
		chrome_close(&ours[i]);
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
