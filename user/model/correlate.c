// SPDX-License-Identifier: GPL-2.0-only
/* The correlation engine; what it builds is described in correlate.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fibhash.h"
#include "base/hashmap.h"
#include "base/strtab.h"
#include "capture/names.h"
#include "model/correlate.h"

#define MAX_LANES 32
#define MAX_PENDING_FLOWS 64
#define MAX_HELD_IRQS 64 /* per card: interrupts waiting for their jobs' card */
#define MAX_CARDS 16 /* per process, for telling its streams' cards apart */
#define MAX_MAPPED (1 << 16) /* per process: buffers whose card is known */

_Static_assert(SBT_MAX_DEPTH <= 32, "open frames are a 32-bit mask");

static const char *const engine_names[ENGINE_MAX] = { "H2D DMA", "Compute", "D2H DMA" };
/* the in-process Spyre profiler's names, so existing tools read them */
/* as kineto-spyre names them, which aiu-trace-analyzer's TORCH dialect reads */
static const char *const job_names[ENGINE_MAX] = { "Memcpy (HtoD)", "Compute", "Memcpy (DtoH)" };
static const char *const job_cats[ENGINE_MAX] = { "gpu_memcpy", "kernel", "gpu_memcpy" };

struct job {
	uint64_t id, start, bytes;
	uint64_t stream; /* the launch's stream (its this), 0 when not known */
	int engine;
	uint32_t pid, tid;
	struct device *dev;
	struct job *next; /* the device's queue of jobs in flight, oldest first */
};

struct device {
	char name[64];
	struct model_track track, irq_track, mapped_track, inflight_track[ENGINE_MAX];
	struct model_track lanes[ENGINE_MAX][MAX_LANES];
	uint64_t lane_busy_until[ENGINE_MAX][MAX_LANES];
	int nlanes[ENGINE_MAX];
	int64_t inflight[ENGINE_MAX], mapped;
	struct job *head, *tail;
	/* a card's interrupts that found no job in its queue while its
	 * process had jobs on no card yet: held, in order, until a stream is
	 * put on the card (its wait was not asleep when the card finished, so
	 * no wake-up said which card it was) or until no job can come */
	struct held_irq {
		uint64_t start, end;
		int32_t irq, ret;
	} held[MAX_HELD_IRQS];
	int nheld;
	uint32_t holder; /* the process a device record gave the card to */
};

struct frame {
	uint32_t probe;
	uint64_t ts, job;
	uint64_t args[SBT_MAX_ARGS];
	bool open;
};

struct thread {
	uint32_t tid, pid;
	char name[SBT_COMM_LEN];
	struct model_track track;
	struct frame frames[SBT_MAX_DEPTH];
	uint32_t open_mask; /* bit d: frames[d].open, so scans skip closed frames */
	/* a launch left by a tail jump at this depth + 1 (0: none): the call
	 * that follows it at that depth is its continuation, not a new job */
	uint32_t tail_launch_depth;
	/* jobs this thread launched that are in flight: a job by its memory
	 * and its id, which is 0 once it ended (job_end) and another once the
	 * memory holds the next job: an entry whose ids differ is gone */
	struct open_job {
		struct job *j;
		uint64_t id;
	} open_jobs[MAX_PENDING_FLOWS];
	int nopen;
	/* jobs completed by an interrupt: their flow ends at the next wait */
	uint64_t done_jobs[MAX_PENDING_FLOWS];
	int ndone;
	/* when the driver last counted a DMA mapping of this thread's: the
	 * ioctl around it must not count it again */
	uint64_t drv_mapped_ts;
};

struct process {
	uint32_t pid;
	bool exited;
	char name[SBT_COMM_LEN];
	struct model_track track, alloc_track;
	struct device *dev;
	int ncards; /* device records seen: more than one, and jobs stay here */
	struct device *cards[MAX_CARDS]; /* the first MAX_CARDS of them */
	struct hashmap allocs; /* pointer -> size + 1 */
	/* memory mapped for DMA in one card's own container: vaddr -> card */
	struct hashmap mapped_card;
	int64_t allocated;
};

#define TS_NONE UINT64_MAX /* no thread's newest time held: no tid (32 bits) is */

struct correlator {
	struct model_sink sinks[CORRELATE_MAX_SINKS];
	int nsinks;
	/* the sinks that take events, apart: every record makes one or two */
	struct {
		void (*fn)(void *ctx, const struct model_event *e);
		void *ctx;
	} ev[CORRELATE_MAX_SINKS];
	int nev;
	struct capture_meta meta;
	struct correlate_stats st;
	struct hashmap procs, threads, devices_by_irq;
	struct hashmap streams; /* stream_key(pid, stream) -> the card its jobs run on */
	struct hashmap thread_ts; /* tid -> 1 + its newest record's ts, for the sanity checks */
	/* the thread_ts entry of the thread being read, held here: records of
	 * one thread come in runs, the map is touched when the thread changes */
	uint64_t ts_tid; /* TS_NONE: none held yet */
	uint64_t ts_newest; /* 1 + ts, 0: none yet */
	uint64_t newest_ts; /* of any record so far */
	/* newest_ts - MAX_JUMP_NS (unsigned), and 2 * MAX_JUMP_NS, or 0 and
	 * UINT64_MAX before the first record: a record an hour or more away
	 * from newest_ts is ts - jump_base > jump_span, in one subtraction */
	uint64_t jump_base, jump_span;
	struct thread *last_thread; /* records of one thread come in runs */
	struct process *last_proc; /* and so of one process */
	struct device **devices;
	int ndevices;
	struct model_track global;
	bool global_announced;
	uint64_t next_track, next_job;
	struct job *spare_jobs; /* ended jobs, linked by next, for the next ones */
	struct strtab names; /* interrupt names: stable strings (model.h) */
	const char *irq_names[1024];
};

/* ---- emitting -------------------------------------------------------- */

/* Hands what the model made to every sink that takes that kind of thing
 * (member: track, event, task, clock or lost). */
#define TO_SINKS(c, member, ...)                                                                                       \
	do {                                                                                                           \
		for (int i_ = 0; i_ < (c)->nsinks; i_++)                                                               \
			if ((c)->sinks[i_].member)                                                                     \
				(c)->sinks[i_].member((c)->sinks[i_].ctx, __VA_ARGS__);                                \
	} while (0)

static void announce(struct correlator *c, struct model_track *t)
{
	t->announced = true;
	TO_SINKS(c, track, t);
}

static void emit(struct correlator *c, const struct model_event *e)
{
	for (int i = 0; i < c->nev; i++)
		c->ev[i].fn(c->ev[i].ctx, e);
}

static void new_track(struct correlator *c, struct model_track *t, enum model_track_kind kind, uint64_t parent,
		      const char *name)
{
	memset(t, 0, sizeof(*t));
	t->id = ++c->next_track;
	t->kind = kind;
	t->parent = parent;
	t->name = name;
	t->engine = -1;
}

/* A model event with no args or flows yet. The arrays are left as they are:
 * sinks read them only up to nargs, nflows and nterm (and zeroing ~400
 * bytes per event was a tenth of the converter's time). */
static inline void event_init(struct model_event *e, enum model_event_kind kind, const struct model_track *track,
			      uint64_t ts, const char *name, const char *cat, uint8_t depth)
{
	e->kind = kind;
	e->track = track;
	e->ts = ts;
	e->dur = 0;
	e->name = name;
	e->cat = cat;
	e->nargs = e->nflows = e->nterm = e->nxflows = e->nxterm = 0;
	e->value = 0;
	e->depth = depth;
}

static void arg_u(struct model_event *e, const char *name, uint64_t v)
{
	if (e->nargs < MODEL_MAX_ARGS)
		e->args[e->nargs++] = (struct model_arg){ .name = name, .type = ARG_UINT, .u = v };
}

static void arg_i(struct model_event *e, const char *name, int64_t v)
{
	if (e->nargs < MODEL_MAX_ARGS)
		e->args[e->nargs++] = (struct model_arg){ .name = name, .type = ARG_INT, .i = v };
}

static void arg_x(struct model_event *e, const char *name, uint64_t v)
{
	if (e->nargs < MODEL_MAX_ARGS)
		e->args[e->nargs++] = (struct model_arg){ .name = name, .type = ARG_HEX, .u = v };
}

/* v: a literal, a name, a static table's: unchanged for the whole trace */
static void arg_s(struct model_event *e, const char *name, const char *v)
{
	if (e->nargs < MODEL_MAX_ARGS)
		e->args[e->nargs++] = (struct model_arg){ .name = name, .type = ARG_STR, .fixed = true, .s = v };
}

/* A byte count moved by n bytes, up or down: a damaged record can give
 * any size, so the count stops at int64's ends instead of overflowing. */
static inline void add_bytes(int64_t *v, uint64_t n, bool up)
{
	int64_t d = n > INT64_MAX ? INT64_MAX : (int64_t)n;

	if (__builtin_add_overflow(*v, up ? d : -d, v))
		*v = up ? INT64_MAX : INT64_MIN;
}

static void counter(struct correlator *c, const struct model_track *t, uint64_t ts, int64_t v)
{
	struct model_event e;

	event_init(&e, EV_COUNTER, t, ts, t->name, NULL, 0);
	e.value = v;
	emit(c, &e);
}

/* ---- processes, threads, devices -------------------------------------- */

static struct process *process_lookup(struct correlator *c, uint32_t pid, bool fresh);

/* The process of a record: the last one's, checked inline, nearly always. */
static inline struct process *process_of(struct correlator *c, uint32_t pid, bool fresh)
{
	struct process *p = c->last_proc;

	if (p && p->pid == pid && !fresh)
		return p;
	return process_lookup(c, pid, fresh);
}

static struct process *process_lookup(struct correlator *c, uint32_t pid, bool fresh)
{
	struct process *p = c->last_proc;

	if (!p || p->pid != pid)
		p = hm_get(&c->procs, pid);
	if (p && !(fresh && p->exited))
		return c->last_proc = p;
	c->last_proc = NULL;
	if (p) { /* the pid was reused: a new process, new tracks */
		hm_del(&c->procs, pid);
		hm_free(&p->allocs);
		hm_free(&p->mapped_card);
		free(p);
	}
	p = calloc(1, sizeof(*p));
	if (!p || hm_put(&c->procs, pid, p)) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	snprintf(p->name, sizeof(p->name), "%s", meta_thread_name(&c->meta, pid));
	new_track(c, &p->track, TRACK_PROCESS, 0, p->name);
	p->track.pid = pid;
	announce(c, &p->track);
	return p;
}

static struct thread *thread_lookup(struct correlator *c, uint32_t pid, uint32_t tid);

/* The thread of a record: records of one thread come in runs, so the last
 * one is checked here, inline, before any lookup. */
static inline struct thread *thread_of(struct correlator *c, uint32_t pid, uint32_t tid)
{
	struct thread *t = c->last_thread;

	if (t && t->tid == tid && t->pid == pid)
		return t;
	return thread_lookup(c, pid, tid);
}

static struct thread *thread_lookup(struct correlator *c, uint32_t pid, uint32_t tid)
{
	struct thread *t = hm_get(&c->threads, tid);
	struct process *p;

	if (t && t->pid == pid)
		return c->last_thread = t;
	if (t) { /* tid reused by another process */
		hm_del(&c->threads, tid);
		free(t);
		c->last_thread = NULL;
	}
	if (!(p = process_of(c, pid, false)))
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t || hm_put(&c->threads, tid, t)) {
		free(t);
		return NULL;
	}
	t->tid = tid;
	t->pid = pid;
	snprintf(t->name, sizeof(t->name), "%s", meta_thread_name(&c->meta, tid));
	new_track(c, &t->track, TRACK_THREAD, p->track.id, t->name);
	t->track.pid = pid;
	t->track.tid = tid;
	announce(c, &t->track);
	return c->last_thread = t;
}

static void rename_thread(struct correlator *c, uint32_t pid, uint32_t tid, const char *comm)
{
	struct thread *t = hm_get(&c->threads, tid);
	struct process *p = hm_get(&c->procs, pid);

	if (t && t->pid == pid && strncmp(t->name, comm, sizeof(t->name))) {
		snprintf(t->name, sizeof(t->name), "%.15s", comm);
		announce(c, &t->track);
	}
	if (p && pid == tid && strncmp(p->name, comm, sizeof(p->name))) {
		snprintf(p->name, sizeof(p->name), "%.15s", comm);
		announce(c, &p->track);
	}
}

static struct device *new_device(struct correlator *c, const char *name)
{
	struct device *d = calloc(1, sizeof(*d)), **grown;

	if (!d)
		return NULL;
	grown = realloc(c->devices, (c->ndevices + 1) * sizeof(*grown));
	if (!grown) {
		free(d);
		return NULL;
	}
	c->devices = grown;
	c->devices[c->ndevices++] = d;
	snprintf(d->name, sizeof(d->name), "%s", name);
	new_track(c, &d->track, TRACK_DEVICE, 0, d->name);
	d->track.rank = c->ndevices;
	announce(c, &d->track);
	new_track(c, &d->irq_track, TRACK_LANE, d->track.id, "Interrupts");
	d->irq_track.rank = 100;
	new_track(c, &d->mapped_track, TRACK_COUNTER, d->track.id, "DMA-mapped bytes");
	d->mapped_track.unit = UNIT_BYTES;
	d->mapped_track.rank = 200;
	for (int e = 0; e < ENGINE_MAX; e++) {
		static const char *const names[ENGINE_MAX] = { "jobs in flight: H2D DMA", "jobs in flight: Compute",
							       "jobs in flight: D2H DMA" };

		new_track(c, &d->inflight_track[e], TRACK_COUNTER, d->track.id, names[e]);
		d->inflight_track[e].unit = UNIT_COUNT;
		d->inflight_track[e].rank = 201 + e;
	}
	return d;
}

/* The device a process's jobs run on: the card a device record named, else
 * one device of its own (until driver-level probes say which card it is). */
static struct device *device_of(struct correlator *c, struct process *p)
{
	char name[64];

	if (!p->dev) {
		snprintf(name, sizeof(name), "Spyre device (pid %u)", p->pid);
		p->dev = new_device(c, name);
	}
	return p->dev;
}

static struct model_track *lane_track(struct correlator *c, struct device *d, int engine, uint64_t start, uint64_t end)
{
	int l;

	/* the first lane free since this job's start: no partial overlaps */
	for (l = 0; l < d->nlanes[engine]; l++)
		if (d->lane_busy_until[engine][l] <= start)
			break;
	if (l == MAX_LANES)
		return NULL;
	if (l == d->nlanes[engine]) {
		struct model_track *t = &d->lanes[engine][l];
		static char lane_names[ENGINE_MAX][MAX_LANES][24];

		if (l == 0)
			snprintf(lane_names[engine][l], sizeof(lane_names[0][0]), "%s", engine_names[engine]);
		else
			snprintf(lane_names[engine][l], sizeof(lane_names[0][0]), "%s #%d", engine_names[engine],
				 l + 1);
		new_track(c, t, TRACK_LANE, d->track.id, lane_names[engine][l]);
		t->engine = engine;
		t->lane = l;
		t->rank = engine * MAX_LANES + l;
		announce(c, t);
		d->nlanes[engine]++;
	}
	d->lane_busy_until[engine][l] = end;
	return &d->lanes[engine][l];
}

/* Tracks that may stay unused are announced at their first event. */
static void announce_once(struct correlator *c, struct model_track *t)
{
	if (!t->announced)
		announce(c, t);
}

/* ---- jobs ---------------------------------------------------------------- */

static void inflight(struct correlator *c, struct device *d, int engine, uint64_t ts, int delta)
{
	d->inflight[engine] += delta;
	announce_once(c, &d->inflight_track[engine]);
	counter(c, &d->inflight_track[engine], ts, d->inflight[engine]);
}

static uint64_t stream_key(uint32_t pid, uint64_t stream)
{
	return stream * FIBHASH_MUL ^ pid;
}

/* Onto a device's queue of jobs in flight, by start (at the tail, nearly
 * always: jobs start in order). */
static void enqueue(struct device *d, struct job *j)
{
	struct job **pp = &d->head, *prev = NULL;

	if (d->tail && d->tail->start <= j->start) {
		prev = d->tail;
		pp = &prev->next;
	}
	while (*pp && (*pp)->start <= j->start) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	j->next = *pp;
	*pp = j;
	if (d->tail == prev)
		d->tail = j;
	j->dev = d;
}

/* A job launched on a stream: on the card the stream is known to run on,
 * else the process's (one card, or its own device track). */
/* Jobs come and go by the tens of thousands: an ended one is kept for the
 * next instead of going back to malloc. */
static struct job *job_new(struct correlator *c)
{
	struct job *j = c->spare_jobs;

	if (!j)
		return malloc(sizeof(*j));
	c->spare_jobs = j->next;
	return j;
}

static void job_end(struct correlator *c, struct job *j)
{
	j->id = 0; /* a thread's entry for it is stale from now on */
	j->next = c->spare_jobs;
	c->spare_jobs = j;
}

static struct job *start_job(struct correlator *c, struct process *p, uint32_t tid, int engine, uint64_t ts,
			     uint64_t bytes, uint64_t stream)
{
	struct device *d = p && stream ? hm_get(&c->streams, stream_key(p->pid, stream)) : NULL;
	struct job *j;

	if (!d && p)
		d = device_of(c, p);
	j = d ? job_new(c) : NULL;
	if (!j)
		return NULL;
	*j = (struct job){ .id = ++c->next_job,
			   .start = ts,
			   .bytes = bytes,
			   .stream = stream,
			   .engine = engine,
			   .pid = p->pid,
			   .tid = tid };
	enqueue(d, j);
	inflight(c, d, engine, ts, +1);
	c->st.jobs++;
	return j;
}

static void unlink_job(struct job *j)
{
	struct device *d = j->dev;
	struct job **pp = &d->head, *prev = NULL;

	while (*pp && *pp != j) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return;
	*pp = j->next;
	if (d->tail == j)
		d->tail = prev;
}

/* The thread's entry i goes (the last takes its place). */
static void remove_open_job(struct thread *t, int i)
{
	t->open_jobs[i] = t->open_jobs[--t->nopen];
}

static void drop_open_job(struct thread *t, uint64_t id)
{
	for (int i = 0; i < t->nopen; i++)
		if (t->open_jobs[i].id == id) {
			remove_open_job(t, i);
			return;
		}
}

/* The job of a thread's entry, or NULL when it has ended. */
static inline struct job *open_job(const struct thread *t, int i)
{
	return t->open_jobs[i].j->id == t->open_jobs[i].id ? t->open_jobs[i].j : NULL;
}

/* A job is done at ts: draw it on a free lane of its engine. */
static void complete_job(struct correlator *c, struct job *j, uint64_t ts, const char *how)
{
	struct model_event e;
	struct thread *t = hm_get(&c->threads, j->tid);

	unlink_job(j);
	if (memcmp(j->dev->name, "PCI ", 4)) /* name is char[64]: 4 bytes to read */
		c->st.jobs_without_card++;
	event_init(&e, EV_SLICE, lane_track(c, j->dev, j->engine, j->start, ts), j->start, job_names[j->engine],
		   job_cats[j->engine], 0);
	e.dur = ts > j->start ? ts - j->start : 0;
	if (j->bytes)
		arg_u(&e, "bytes", j->bytes);
	arg_u(&e, "correlation", j->id);
	arg_s(&e, "completed_by", how);
	e.flows[e.nflows++] = j->id;
	if (e.track)
		emit(c, &e);
	inflight(c, j->dev, j->engine, ts, -1);
	if (t && t->pid == j->pid)
		drop_open_job(t, j->id);
	job_end(c, j);
}

/* ---- records ---------------------------------------------------------- */

static bool launches(int role)
{
	return role == SBT_ROLE_COPY_IN || role == SBT_ROLE_COPY_OUT || role == SBT_ROLE_COMPUTE ||
	       role == SBT_ROLE_LAUNCH;
}

static int engine_of(int role)
{
	return role == SBT_ROLE_COPY_IN ? ENGINE_H2D : role == SBT_ROLE_COPY_OUT ? ENGINE_D2H : ENGINE_COMPUTE;
}

/* A mark for a call that will get no slice; a launch's mark is its end of
 * the job's flow, so the flow still connects two events. */
static void unfinished_frame(struct correlator *c, struct thread *t, int d, const char *what)
{
	const struct meta_probe *mp = meta_probe(&c->meta, t->frames[d].probe);
	struct model_event e;

	t->frames[d].open = false;
	c->st.unfinished_calls++;
	event_init(&e, EV_INSTANT, &t->track, t->frames[d].ts, what, "runtime", MODEL_DEPTH_INSTANTS);
	arg_s(&e, "function", mp ? mp->name : "?");
	if (t->frames[d].job) {
		arg_u(&e, "correlation", t->frames[d].job);
		e.flows[e.nflows++] = t->frames[d].job;
	}
	emit(c, &e);
}

/* Frames from depth d down whose returns never came (their records were
 * lost): marks at their entries, counted, never stretched into slices. */
static void drop_open_frames(struct correlator *c, struct thread *t, uint32_t open);

/* Frames at depth d and deeper still open lost their returns: ended as
 * unfinished. Nearly always none, told inline. */
static inline void drop_frames(struct correlator *c, struct thread *t, uint32_t d)
{
	uint32_t open = d < 32 ? t->open_mask & ~((1u << d) - 1) : 0;

	if (open)
		drop_open_frames(c, t, open);
}

static void drop_open_frames(struct correlator *c, struct thread *t, uint32_t open)
{
	uint32_t d;

	for (; open; open &= open - 1) {
		d = (uint32_t)__builtin_ctz(open);
		t->open_mask &= ~(1u << d);
		unfinished_frame(c, t, (int)d, "call without return");
	}
}

static void place_by_elimination(struct correlator *c, struct thread *t);
static void place_by_mapping(struct correlator *c, struct process *p, const __u64 *args, uint64_t ts);
static void settle_cards_of(struct correlator *c, uint32_t pid);

static void on_call_enter(struct correlator *c, const struct sbt_call_enter *r)
{
	const struct meta_probe *p = meta_probe(&c->meta, r->probe_id);
	struct thread *t = thread_of(c, r->h.tgid, r->h.tid);
	struct frame *f;
	bool nested_launch;

	if (!t || r->depth >= SBT_MAX_DEPTH)
		return;
	drop_frames(c, t, r->depth); /* whatever is still open here lost its return */
	/* launchCompute tail-calling launchOperation is one job, as nested */
	nested_launch = t->tail_launch_depth == r->depth + 1;
	t->tail_launch_depth = 0;
	f = &t->frames[r->depth];
	/* field by field: the args are copied whole, not zeroed first */
	f->probe = r->probe_id;
	f->ts = r->h.ts;
	f->job = 0;
	f->open = true;
	memcpy(f->args, r->args, sizeof(f->args));
	t->open_mask |= 1u << r->depth;
	if (!p || !launches(p->role))
		return;
	/* launchCompute calling launchOperation is one job, not two */
	for (uint32_t open = t->open_mask & ((1u << r->depth) - 1); open; open &= open - 1) {
		const struct meta_probe *q = meta_probe(&c->meta, t->frames[__builtin_ctz(open)].probe);

		nested_launch |= q && launches(q->role);
	}
	if (!nested_launch) {
		uint64_t bytes = p->bytes_arg >= 0 && p->bytes_arg < SBT_MAX_ARGS ? r->args[p->bytes_arg] : 0;
		struct process *proc = process_of(c, r->h.tgid, false);

		if (proc && proc->ncards > 1 && proc->mapped_card.n)
			place_by_mapping(c, proc, r->args, r->h.ts);
		/* the runtime's stream methods: the stream is their this */
		struct job *j = start_job(c, proc, r->h.tid, engine_of(p->role), r->h.ts, bytes, r->args[0]);

		if (j) {
			f->job = j->id;
			if (t->nopen < MAX_PENDING_FLOWS)
				t->open_jobs[t->nopen++] = (struct open_job){ j, j->id };
		}
	}
}

static void track_alloc(struct correlator *c, struct process *p, const struct meta_probe *mp, const struct frame *f,
			int64_t ret, uint64_t ts)
{
	uint64_t size = 0;

	if (mp->role == SBT_ROLE_ALLOC && ret && mp->bytes_arg >= 0 && mp->bytes_arg < SBT_MAX_ARGS) {
		/* stored plus one (0 is "none"): a damaged size is cut to what
		 * the count can take, so that even UINT64_MAX is un-counted */
		size = f->args[mp->bytes_arg] > INT64_MAX ? INT64_MAX : f->args[mp->bytes_arg];
		if (hm_put(&p->allocs, (uint64_t)ret, (void *)(uintptr_t)(size + 1)))
			return;
		add_bytes(&p->allocated, size, true);
	} else if (mp->role == SBT_ROLE_FREE) {
		void *v = hm_del(&p->allocs, f->args[1]); /* free(this, ptr) */

		hm_del(&p->mapped_card, f->args[1]);

		if (!v)
			return;
		add_bytes(&p->allocated, (uintptr_t)v - 1, false);
	} else {
		return;
	}
	if (!p->alloc_track.id) {
		new_track(c, &p->alloc_track, TRACK_COUNTER, p->track.id, "runtime-allocated bytes");
		p->alloc_track.unit = UNIT_BYTES;
		p->alloc_track.pid = p->pid;
		announce(c, &p->alloc_track);
	}
	counter(c, &p->alloc_track, ts, p->allocated);
}

static inline __attribute__((always_inline)) void on_call_exit(struct correlator *c, const struct sbt_call_exit *r)
{
	const struct meta_probe *mp = meta_probe(&c->meta, r->probe_id);
	struct thread *t = thread_of(c, r->h.tgid, r->h.tid);
	struct model_event e;
	struct frame *f;

	if (!t)
		return;
	t->tail_launch_depth = (r->flags & SBT_CALL_TAIL) && mp && launches(mp->role) ? r->depth + 1 : 0;
	event_init(&e, EV_SLICE, &t->track, 0, mp ? mp->name : "unknown probe", "runtime", 0);
	f = r->depth < SBT_MAX_DEPTH ? &t->frames[r->depth] : NULL;
	if ((r->flags & SBT_CALL_UNPAIRED) || !f) {
		/* BPF had no entry for it either: a mark, not a made-up slice */
		struct model_event m;

		c->st.unpaired_returns++;
		event_init(&m, EV_INSTANT, &t->track, r->h.ts, "return without entry", "runtime", MODEL_DEPTH_INSTANTS);
		arg_s(&m, "function", e.name);
		emit(c, &m);
		return;
	}
	/* entered before the call open at its depth, or before its caller:
	 * no lost record explains that, a damaged one does */
	if ((f->open && r->entry_ts < f->ts) ||
	    (r->depth && (t->open_mask >> (r->depth - 1) & 1) && r->entry_ts < t->frames[r->depth - 1].ts)) {
		c->st.implausible++;
		return;
	}
	if (r->depth + 1 < SBT_MAX_DEPTH)
		drop_frames(c, t, r->depth + 1); /* callees still open lost their returns */
	/* BPF's entry time is the truth: a frame with another start is a call
	 * whose return was lost, and this call's entry record was lost */
	if (f->open && (f->probe != r->probe_id || f->ts != r->entry_ts))
		drop_frames(c, t, r->depth);
	c->st.calls++;
	e.depth = (uint8_t)r->depth;
	e.ts = r->entry_ts;
	e.dur = r->h.ts - r->entry_ts;
	if (!f->open) {
		c->st.unpaired_returns++;
		arg_s(&e, "entry", "lost");
		emit(c, &e);
		return;
	}
	f->open = false;
	t->open_mask &= ~(1u << r->depth);
	if (mp && mp->bytes_arg >= 0 && mp->bytes_arg < SBT_MAX_ARGS)
		arg_u(&e, "bytes", f->args[mp->bytes_arg]);
	if (r->flags & SBT_CALL_TAIL)
		arg_s(&e, "left by", "tail call");
	else if (r->ret)
		arg_x(&e, "ret", (uint64_t)r->ret);
	if (f->job) {
		arg_u(&e, "correlation", f->job);
		e.flows[e.nflows++] = f->job;
	}
	if (mp && mp->role == SBT_ROLE_WAIT) {
		/* the jobs this thread launched are done by now; jobs an
		 * interrupt completed end their flow here */
		if (t->nopen)
			place_by_elimination(c, t);
		bool by_wait = t->nopen > 0;

		while (t->nopen) {
			struct job *j = open_job(t, 0);

			if (j && j->start <= f->ts) {
				if (e.nterm < MODEL_MAX_FLOWS)
					e.term_flows[e.nterm++] = j->id;
				complete_job(c, j, r->h.ts, "wait");
			} else {
				remove_open_job(t, 0);
			}
		}
		if (by_wait)
			settle_cards_of(c, t->pid);
		for (int i = 0; i < t->ndone && e.nterm < MODEL_MAX_FLOWS; i++)
			e.term_flows[e.nterm++] = t->done_jobs[i];
		t->ndone = 0;
	}
	if (mp && (mp->role == SBT_ROLE_ALLOC || mp->role == SBT_ROLE_FREE)) {
		struct process *p = process_of(c, r->h.tgid, false);

		if (p)
			track_alloc(c, p, mp, f, r->ret, r->h.ts);
	}
	emit(c, &e);
}

static void on_ioctl(struct correlator *c, const struct sbt_ioctl *r)
{
	struct thread *t = thread_of(c, r->h.tgid, r->h.tid);
	const char *cmd = sbt_vfio_cmd_name(r->cmd, r->fd_kind);
	struct model_event e;

	if (!t)
		return;
	c->st.ioctls++;
	event_init(&e, EV_SLICE, &t->track, 0, cmd ? cmd : "ioctl", "ioctl", 0);
	if (t->open_mask) /* inside the innermost open call */
		e.depth = (uint8_t)(32 - __builtin_clz(t->open_mask));
	e.ts = r->start_ts;
	e.dur = r->h.ts > r->start_ts ? r->h.ts - r->start_ts : 0;
	arg_i(&e, "fd", r->fd);
	arg_s(&e, "fd_kind", sbt_fd_kind_name(r->fd_kind));
	if (!cmd)
		arg_x(&e, "cmd", r->cmd);
	arg_i(&e, "ret", r->ret);
	if (r->ret < 0 && r->ret > -4096) {
		arg_s(&e, "error", sbt_errno_name((int)-r->ret));
		c->st.ioctl_errors++;
	}
	if (r->decoded == SBT_DEC_DMA_MAP || r->decoded == SBT_DEC_DMA_UNMAP) {
		if (r->decoded == SBT_DEC_DMA_MAP)
			arg_x(&e, "vaddr", r->u.dma.vaddr);
		arg_x(&e, "iova", r->u.dma.iova);
		arg_u(&e, "size", r->u.dma.size);
		arg_x(&e, "flags", r->u.dma.flags);
		bool driver_counted = t->drv_mapped_ts >= r->start_ts && t->drv_mapped_ts <= r->h.ts;
		struct process *p = r->ret == 0 && !driver_counted ? process_of(c, r->h.tgid, false) : NULL;

		if (p) {
			struct device *d = device_of(c, p);

			if (d) {
				add_bytes(&d->mapped, r->u.dma.size, r->decoded == SBT_DEC_DMA_MAP);
				announce_once(c, &d->mapped_track);
				counter(c, &d->mapped_track, r->h.ts, d->mapped);
			}
		}
	} else if (r->decoded == SBT_DEC_SET_IRQS) {
		arg_u(&e, "index", r->u.irqs.index);
		arg_u(&e, "start", r->u.irqs.start);
		arg_u(&e, "count", r->u.irqs.count);
	} else if (r->decoded == SBT_DEC_SPAPR_REGISTER || r->decoded == SBT_DEC_SPAPR_UNREGISTER) {
		arg_x(&e, "vaddr", r->u.dma.vaddr);
		arg_u(&e, "size", r->u.dma.size);
	} else if (r->decoded == SBT_DEC_SPAPR_INFO || r->decoded == SBT_DEC_SPAPR_CREATE ||
		   r->decoded == SBT_DEC_SPAPR_REMOVE) {
		arg_x(&e, "window_start", r->u.window.start);
		if (r->decoded != SBT_DEC_SPAPR_REMOVE)
			arg_u(&e, "window_size", r->u.window.size);
		if (r->decoded == SBT_DEC_SPAPR_CREATE) {
			arg_u(&e, "page_shift", r->u.window.page_shift);
			arg_u(&e, "levels", r->u.window.levels);
		}
	}
	emit(c, &e);
}

static void on_dma(struct correlator *c, const struct sbt_hdr *h)
{
	struct thread *t = thread_of(c, h->tgid, h->tid);
	struct model_event e;

	if (!t)
		return;
	event_init(&e, EV_INSTANT, &t->track, h->ts, NULL, "dma", MODEL_DEPTH_INSTANTS);
	if (h->type == SBT_IOMMU_MAP || h->type == SBT_IOMMU_UNMAP) {
		const struct sbt_iommu *r = (const void *)h;

		e.name = h->type == SBT_IOMMU_MAP ? "iommu map" : "iommu unmap";
		arg_x(&e, "iova", r->iova);
		arg_u(&e, "size", r->size);
		if (h->type == SBT_IOMMU_MAP)
			arg_x(&e, "paddr", r->paddr);
	} else {
		const struct sbt_dma *r = (const void *)h;

		e.name = h->type == SBT_DMA_MAP ? "dma map" : "dma unmap";
		arg_x(&e, "addr", r->addr);
		arg_u(&e, "size", r->size);
	}
	emit(c, &e);
}

/* The PCI address in an interrupt name such as vfio-msi[0](0000:01:00.0). */
static bool bdf_of(const char *name, char *out, size_t len)
{
	const char *s = sbt_bdf_find(name, NULL);

	if (s)
		snprintf(out, len, "%.12s", s);
	return s != NULL;
}

/* The device of a card, by its PCI address: one, whoever asks first. */
static struct device *pci_device(struct correlator *c, const char *bdf)
{
	char label[64];

	snprintf(label, sizeof(label), "PCI %.16s", bdf);
	for (int i = 0; i < c->ndevices; i++)
		if (!strcmp(c->devices[i]->name, label))
			return c->devices[i];
	return new_device(c, label);
}

static const char *irq_name(const struct correlator *c, int irq)
{
	return irq >= 0 && irq < 1024 && c->irq_names[irq] ? c->irq_names[irq] : "";
}

static struct device *irq_device(struct correlator *c, int irq)
{
	const char *name = irq_name(c, irq);
	struct device *d = hm_get(&c->devices_by_irq, (uint64_t)irq);
	char bdf[16], label[64];

	if (d)
		return d;
	if (bdf_of(name, bdf, sizeof(bdf))) {
		d = pci_device(c, bdf);
	} else {
		snprintf(label, sizeof(label), "irq %d %s", irq, name);
		d = new_device(c, label);
	}
	if (d)
		hm_put(&c->devices_by_irq, (uint64_t)irq, d);
	return d;
}

/* A job in flight moves to another device's queue; the in-flight counters
 * move at ts. */
static void move_job(struct correlator *c, struct job *j, struct device *to, uint64_t ts)
{
	struct device *from = j->dev;

	unlink_job(j);
	inflight(c, from, j->engine, ts, -1);
	enqueue(to, j);
	inflight(c, to, j->engine, ts, +1);
}

/* ---- interrupts held for a card's jobs ------------------------------ */

/* The interrupt's slice on its card; it ends job j (the card's oldest in
 * flight), or none. */
static void irq_done(struct correlator *c, struct device *d, const struct held_irq *h, struct job *j)
{
	struct model_event e;

	announce_once(c, &d->irq_track);
	event_init(&e, EV_SLICE, &d->irq_track, h->start, irq_name(c, h->irq)[0] ? irq_name(c, h->irq) : "irq", "irq",
		   0);
	e.dur = h->end > h->start ? h->end - h->start : 0;
	arg_i(&e, "irq", h->irq);
	arg_i(&e, "ret", h->ret);
	if (j) {
		struct thread *t = hm_get(&c->threads, j->tid);
		uint64_t id = j->id;

		e.flows[e.nflows++] = id;
		complete_job(c, j, h->start, "interrupt");
		if (t && t->ndone < MAX_PENDING_FLOWS)
			t->done_jobs[t->ndone++] = id;
	} else {
		c->st.unmatched_completions++;
		arg_s(&e, "unmatched", "no job in flight");
	}
	emit(c, &e);
}

/* Whether a job launched by ts may still turn out to be card d's: its
 * process drives several cards and has such a job on no card yet. */
static bool job_may_come(struct correlator *c, const struct device *d, uint64_t ts)
{
	struct process *p = d->holder ? hm_get(&c->procs, d->holder) : NULL;

	return p && p->ncards > 1 && p->dev && p->dev != d && p->dev->head && p->dev->head->start <= ts;
}

/* The held interrupts meet the card's queue, oldest first: each ends the
 * oldest job launched before it; one that no job can come for any more
 * (or, with force, at the end) found none. */
static void settle_held(struct correlator *c, struct device *d, bool force)
{
	int i;

	for (i = 0; i < d->nheld; i++) {
		const struct held_irq *h = &d->held[i];

		if (d->head && d->head->start <= h->start)
			irq_done(c, d, h, d->head);
		else if (!force && job_may_come(c, d, h->start))
			break;
		else
			irq_done(c, d, h, NULL);
	}
	memmove(d->held, d->held + i, (size_t)(d->nheld - i) * sizeof(d->held[0]));
	d->nheld -= i;
}

/* A stream's jobs run on card d: those in flight elsewhere move to its
 * queue (they were launched before it was known), by start, and meet the
 * interrupts the card raised meanwhile; the in-flight counters move at ts,
 * when it became known (or at the first such interrupt, if earlier). */
static void put_stream(struct correlator *c, uint32_t pid, uint64_t stream, struct device *d, uint64_t ts)
{
	uint64_t key = stream_key(pid, stream);

	if (hm_get(&c->streams, key) == d || hm_put(&c->streams, key, d))
		return;
	c->st.streams_on_cards++;
	if (d->nheld && d->held[0].start < ts)
		ts = d->held[0].start;
	for (int i = 0; i < c->ndevices; i++) {
		struct device *from = c->devices[i];

		if (from == d)
			continue;
		for (struct job *j = from->head, *next; j; j = next) {
			next = j->next;
			if (j->pid == pid && j->stream == stream)
				move_job(c, j, d, ts);
		}
	}
	settle_held(c, d, false);
}

/* A wait returned with jobs of its stream still on no card (no wake-up
 * said which: the thread was not asleep when its card finished). If of
 * its process's cards exactly one raised interrupts since the first of
 * them that found no job, that card ran them: the stream is put there. */
static void place_by_elimination(struct correlator *c, struct thread *t)
{
	struct process *p = hm_get(&c->procs, t->pid);

	if (!p || p->ncards < 2 || !p->dev)
		return;
	for (int i = 0; i < t->nopen; i++) {
		struct job *j = open_job(t, i);
		struct device *only = NULL;
		int n = 0;

		if (!j || j->dev != p->dev || !j->stream)
			continue;
		for (int k = 0; k < p->ncards && k < MAX_CARDS; k++) {
			struct device *d = p->cards[k];

			if (d && d->nheld && d->held[d->nheld - 1].start >= j->start) {
				only = d;
				n++;
			}
		}
		if (n == 1) {
			c->st.streams_by_elimination++;
			put_stream(c, p->pid, j->stream, only, c->newest_ts);
		}
	}
}

/* A launch on a stream of a process that drives several cards, given a
 * buffer (an argument past the stream) that the driver mapped for DMA in
 * one card's own container: the stream runs on that card. A shared
 * container's mappings say nothing (no card in the driver's record). */
static void place_by_mapping(struct correlator *c, struct process *p, const __u64 *args, uint64_t ts)
{
	for (int i = 1; i <= 3 && i < SBT_MAX_ARGS; i++) {
		struct device *d = args[i] ? hm_get(&p->mapped_card, args[i]) : NULL;

		if (!d)
			continue;
		if (hm_get(&c->streams, stream_key(p->pid, args[0])) != d) {
			c->st.streams_by_mapping++;
			put_stream(c, p->pid, args[0], d, ts);
		}
		return;
	}
}

/* After a wait ended its jobs: held interrupts no job can come for any
 * more are let go. */
static void settle_cards_of(struct correlator *c, uint32_t pid)
{
	struct process *p = hm_get(&c->procs, pid);

	for (int k = 0; p && k < p->ncards && k < MAX_CARDS; k++)
		if (p->cards[k] && p->cards[k]->nheld)
			settle_held(c, p->cards[k], false);
}

/* A card's interrupt woke a thread (or the thread it woke): a thread
 * waiting on a stream (the outermost wait open on it, whose this is the
 * stream) learns that stream's card. */
static void on_wake(struct correlator *c, const struct sbt_wake *w)
{
	struct thread *t = hm_get(&c->threads, w->h.tid);
	const char *name = irq_name(c, w->irq);
	char bdf[16];
	uint64_t stream = 0;

	if (!t || t->pid != w->h.tgid || !bdf_of(name, bdf, sizeof(bdf)))
		return;
	for (uint32_t open = t->open_mask; open && !stream; open &= open - 1) {
		const struct frame *f = &t->frames[__builtin_ctz(open)];
		const struct meta_probe *mp = meta_probe(&c->meta, f->probe);

		if (mp && mp->role == SBT_ROLE_WAIT)
			stream = f->args[0];
	}
	/* the moment: where the loader put the record, just before the
	 * interrupt */
	if (stream)
		put_stream(c, w->h.tgid, stream, pci_device(c, bdf), w->irq_start_ts ? w->irq_start_ts - 1 : w->h.ts);
}

static void on_irq(struct correlator *c, const struct sbt_irq *r)
{
	struct device *d = irq_device(c, r->irq);
	struct held_irq h = { r->start_ts, r->h.ts, r->irq, r->ret };

	if (!d)
		return;
	c->st.irqs++;
	/* a card completes its jobs in order: the oldest one is done, unless
	 * it may not be in the card's queue yet (or older interrupts wait) */
	if (d->nheld || (!d->head && job_may_come(c, d, r->start_ts))) {
		if (d->nheld == MAX_HELD_IRQS) { /* bounded: the oldest found none */
			irq_done(c, d, &d->held[0], NULL);
			memmove(d->held, d->held + 1, (MAX_HELD_IRQS - 1) * sizeof(d->held[0]));
			d->nheld--;
		}
		d->held[d->nheld++] = h;
		c->st.irqs_held++;
		settle_held(c, d, false);
		return;
	}
	irq_done(c, d, &h, d->head);
}

/* The card of a driver-level record: by its PCI address, where one. */
static struct device *drv_device(struct correlator *c, const struct sbt_drv *r)
{
	char bdf[16];

	if (r->bdf == SBT_BDF_NONE)
		return NULL;
	sbt_bdf_str(r->bdf, bdf, sizeof(bdf));
	return pci_device(c, bdf);
}

/* vfio's MSI handler: inside the interrupt's slice on its card's track; the
 * driver's word on which card an interrupt number belongs to. */
static void on_msi(struct correlator *c, const struct sbt_drv *r, struct device *d)
{
	struct model_event e;
	uint64_t irq = r->args[0];

	if (!d)
		return;
	if (!hm_get(&c->devices_by_irq, irq))
		hm_put(&c->devices_by_irq, irq, d);
	announce_once(c, &d->irq_track);
	event_init(&e, EV_SLICE, &d->irq_track, r->start_ts, sbt_drv_func_name(r->func), "driver", 1);
	e.dur = r->h.ts > r->start_ts ? r->h.ts - r->start_ts : 0;
	arg_u(&e, "irq", irq);
	arg_i(&e, "ret", r->ret);
	emit(c, &e);
}

/* A vfio function returned: a slice inside the ioctl that called it. */
static void on_drv(struct correlator *c, const struct sbt_drv *r)
{
	struct device *d = drv_device(c, r);
	const char *cmd = sbt_drv_cmd_name(r);
	struct model_event e;
	struct thread *t;
	bool map = r->decoded == SBT_DEC_DMA_MAP, unmap = r->decoded == SBT_DEC_DMA_UNMAP;

	c->st.driver_calls++;
	if (r->func == SBT_DRV_MSI) {
		on_msi(c, r, d);
		return;
	}
	t = thread_of(c, r->h.tgid, r->h.tid);
	if (!t)
		return;
	event_init(&e, EV_SLICE, &t->track, r->start_ts, sbt_drv_func_name(r->func), "driver", 0);
	/* below the ioctl, which is below the innermost open runtime call */
	e.depth = (uint8_t)((t->open_mask ? 32 - __builtin_clz(t->open_mask) : 0) + 1 +
			    (r->level < SBT_MAX_DEPTH ? r->level : SBT_MAX_DEPTH));
	e.dur = r->h.ts > r->start_ts ? r->h.ts - r->start_ts : 0;
	if (cmd)
		arg_s(&e, "cmd", cmd);
	if (d)
		arg_s(&e, "device", d->name + 4); /* past "PCI " */
	else if (r->cards == SBT_DRV_SHARED)
		arg_s(&e, "device", "several (shared container)");
	if (r->vendor) {
		arg_x(&e, "vendor", r->vendor);
		arg_x(&e, "device_id", r->device);
	}
	arg_i(&e, "ret", r->ret);
	if (r->ret < 0 && r->ret > -4096)
		arg_s(&e, "error", sbt_errno_name((int)-r->ret));
	if (map || unmap) {
		arg_x(&e, "iova", r->args[0]);
		arg_u(&e, "size", r->args[1]);
		if (map)
			arg_x(&e, "vaddr", r->args[2]);
	} else if (r->decoded == SBT_DEC_SPAPR_REGISTER || r->decoded == SBT_DEC_SPAPR_UNREGISTER) {
		arg_x(&e, "vaddr", r->args[0]);
		arg_u(&e, "size", r->args[1]);
	} else if (r->func == SBT_DRV_PIN_PAGES || r->func == SBT_DRV_UNPIN_PAGES || r->func == SBT_DRV_SPAPR_PIN) {
		arg_x(&e, r->func == SBT_DRV_UNPIN_PAGES ? "iova" : "vaddr", r->args[0]);
		arg_u(&e, "pages", r->args[1]);
	}
	emit(c, &e);
	/* a mapping of one card's container is that card's; a shared
	 * container's is left to the process-level count of the ioctl */
	if ((map || unmap) && r->ret == 0 && d) {
		add_bytes(&d->mapped, r->args[1], map);
		announce_once(c, &d->mapped_track);
		counter(c, &d->mapped_track, r->h.ts, d->mapped);
		t->drv_mapped_ts = r->h.ts;
		if (map) {
			struct process *p = process_of(c, r->h.tgid, false);

			if (p && p->mapped_card.n < MAX_MAPPED)
				hm_put(&p->mapped_card, r->args[2], d);
		}
	}
}

/* Calls still open when the thread or the trace ended. */
static void flush_frames(struct correlator *c, struct thread *t)
{
	for (uint32_t open = t->open_mask; open; open &= open - 1)
		unfinished_frame(c, t, __builtin_ctz(open), "unfinished call");
	t->open_mask = 0;
}

static void on_task(struct correlator *c, const struct sbt_task *r)
{
	struct thread *t;
	struct process *p;

	switch (r->h.type) {
	case SBT_TASK_NEW:
		if (r->flags & 1)
			process_of(c, r->h.tgid, true);
		thread_of(c, r->h.tgid, r->h.tid);
		rename_thread(c, r->h.tgid, r->h.tid, r->comm);
		break;
	case SBT_TASK_COMM:
		thread_of(c, r->h.tgid, r->h.tid);
		rename_thread(c, r->h.tgid, r->h.tid, r->comm);
		break;
	case SBT_TASK_EXIT:
		t = hm_get(&c->threads, r->h.tid);
		if (t && t->pid == r->h.tgid) {
			flush_frames(c, t);
			hm_del(&c->threads, r->h.tid);
			free(t);
			c->last_thread = NULL;
		}
		if ((r->flags & 1) && (p = hm_get(&c->procs, r->h.tgid)))
			p->exited = true;
		break;
	}
}

static void on_lost(struct correlator *c, const struct sbt_lost *r)
{
	struct model_event e = { .kind = EV_INSTANT,
				 .track = &c->global,
				 .ts = r->h.ts,
				 .name = "records lost",
				 .cat = "tracer",
				 .depth = MODEL_DEPTH_INSTANTS };

	c->st.lost += r->count;
	if (!c->global_announced) {
		c->global_announced = true;
		announce(c, &c->global);
	}
	arg_u(&e, "count", r->count);
	arg_u(&e, "total", r->total);
	TO_SINKS(c, lost, r->h.ts, r->count);
	emit(c, &e);
}

/* A capture damaged on disk can hold records that cannot be true; each is
 * dropped and counted (the report and convert say how many), never drawn. */
#define MAX_JUMP_NS (3600ull * 1000000000ull) /* the loader writes a clock every 10 s */
#define MAX_BACK_NS 1000000000ull /* one thread's records come in order */

/* Record types that happen on a thread, in its order (an interrupt's tid
 * is whom it interrupted, a driver call's may be an interrupt's): bit t. */
#define THREAD_TYPES                                                                                                   \
	((1u << SBT_CALL_ENTER) | (1u << SBT_CALL_EXIT) | (1u << SBT_IOCTL) | (1u << SBT_IOMMU_MAP) |                  \
	 (1u << SBT_IOMMU_UNMAP) | (1u << SBT_DMA_MAP) | (1u << SBT_DMA_UNMAP) | (1u << SBT_TASK_NEW) |                \
	 (1u << SBT_TASK_COMM) | (1u << SBT_TASK_EXIT) | (1u << SBT_LIB_OPEN) | (1u << SBT_WAKE))
_Static_assert(SBT_WAKE<32 && SBT_META_CLOCK> SBT_WAKE, "thread types fit the mask");

static inline bool on_thread(uint16_t type)
{
	return type < 32 && (THREAD_TYPES >> type & 1);
}

/* type: h->type, a constant where add_record() is specialized */
static inline __attribute__((always_inline)) bool implausible(struct correlator *c, const struct sbt_hdr *h,
							      uint16_t type)
{
	uint64_t start = 0, prev;

	/* an hour away from everything around it (unsigned: both ways) */
	if (h->ts - c->jump_base > c->jump_span)
		return true;
	switch (type) {
	case SBT_CALL_EXIT: start = ((const struct sbt_call_exit *)h)->entry_ts; break;
	case SBT_IOCTL: start = ((const struct sbt_ioctl *)h)->start_ts; break;
	case SBT_IRQ: start = ((const struct sbt_irq *)h)->start_ts; break;
	case SBT_DRV: start = ((const struct sbt_drv *)h)->start_ts; break;
	default: break;
	}
	/* ends before it begins (unsigned: a huge difference), or an hour after */
	if (start && h->ts - start > MAX_JUMP_NS)
		return true;
	if (on_thread(type)) {
		if (c->ts_tid != h->tid) {
			/* out of memory putting it back: check less, drop nothing */
			if (c->ts_tid != TS_NONE && c->ts_newest)
				hm_put(&c->thread_ts, c->ts_tid, (void *)(uintptr_t)c->ts_newest);
			c->ts_tid = h->tid;
			c->ts_newest = (uint64_t)(uintptr_t)hm_get(&c->thread_ts, h->tid);
		}
		prev = c->ts_newest;
		if (prev && h->ts + MAX_BACK_NS < prev - 1)
			return true;
		if (h->ts + 1 > prev)
			c->ts_newest = h->ts + 1;
	}
	return false;
}

/* ---- what the capture says about itself -------------------------------- */

static void on_proc(struct correlator *c, const struct sbt_meta_proc *p)
{
	process_of(c, p->pid, true);
	rename_thread(c, p->pid, p->pid, p->comm);
}

static void on_thread_name(struct correlator *c, const struct sbt_thread_name *n)
{
	if (hm_get(&c->threads, n->h.tid) || n->h.tid == n->h.tgid)
		rename_thread(c, n->h.tgid, n->h.tid, n->comm);
}

static void on_irq_name(struct correlator *c, const struct sbt_meta_irq *q)
{
	char name[sizeof(q->name)];
	bool added;
	uint64_t id;

	snprintf(name, sizeof(name), "%.*s", (int)sizeof(name) - 1, q->name);
	if (q->irq < 1024 && (id = strtab_id(&c->names, name, &added)))
		c->irq_names[q->irq] = strtab_str(&c->names, id);
}

/* From now on the process's jobs run on that card, where its interrupts
 * land; a process driving several cards keeps its own device: which card
 * ran which job is not in these records. */
static void on_card(struct correlator *c, const struct sbt_meta_device *m)
{
	struct process *p = process_of(c, m->pid, false);
	struct device *card, *own;

	if (!p || !m->bdf[0] || !(card = pci_device(c, m->bdf)))
		return;
	card->holder = p->pid;
	for (int k = 0; k < p->ncards && k < MAX_CARDS; k++)
		if (p->cards[k] == card)
			return; /* said again */
	if (p->ncards < MAX_CARDS)
		p->cards[p->ncards] = card;
	if (++p->ncards == 1) {
		p->dev = card;
		return;
	}
	if (p->ncards != 2)
		return;
	/* several cards: its jobs in flight were on the first only because it
	 * had one; back to its own device, from where the wake-ups put each
	 * stream's on its card */
	card = p->dev;
	p->dev = NULL;
	own = NULL;
	for (struct job *j = card ? card->head : NULL, *next; j; j = next) {
		next = j->next;
		if (j->pid != p->pid || (j->stream && hm_get(&c->streams, stream_key(p->pid, j->stream))))
			continue;
		/* made only for a job to hold: no empty track */
		if (!own && !(own = device_of(c, p)))
			return;
		move_job(c, j, own, c->newest_ts);
	}
}

/* A process started (for merge's arrows from the op that started it), or
 * a thread's ids in its pid namespace (for merge's kineto ids). */
static void on_task_ids(struct correlator *c, const struct sbt_hdr *h)
{
	struct model_task_ids t = { h->ts, h->tgid, h->tid, 0, 0, 0 };

	if (h->type == SBT_TASK_NEW) {
		if (!(((const struct sbt_task *)h)->flags & 1))
			return; /* a thread, not a process */
		t.ppid = ((const struct sbt_task *)h)->ppid;
	} else {
		t.ns_pid = ((const struct sbt_meta_nspid *)h)->ns_tgid;
		t.ns_tid = ((const struct sbt_meta_nspid *)h)->ns_tid;
	}
	TO_SINKS(c, task, &t);
}

/* One record; type is h->type, a constant where it is specialized below. */
static inline __attribute__((always_inline)) int add_record(struct correlator *c, const struct sbt_hdr *h,
							    uint16_t type)
{
	if (implausible(c, h, type)) {
		c->st.implausible++;
		return 0;
	}
	if (h->ts > c->newest_ts) {
		c->newest_ts = h->ts;
		c->jump_base = h->ts - MAX_JUMP_NS;
		c->jump_span = 2 * MAX_JUMP_NS;
	}
	/* calls, ioctls, interrupts and DMA carry no names for the metadata */
	if (type >= SBT_TASK_NEW && meta_add(&c->meta, h))
		return -ENOMEM;
	c->st.records++;
	if (type < SBT_META_CLOCK && type != SBT_IRQ) {
		if (!c->st.first_ts || h->ts < c->st.first_ts)
			c->st.first_ts = h->ts;
		if (h->ts > c->st.last_ts)
			c->st.last_ts = h->ts;
	}
	switch (type) {
	case SBT_CALL_ENTER: on_call_enter(c, (const void *)h); break;
	case SBT_CALL_EXIT: on_call_exit(c, (const void *)h); break;
	case SBT_IOCTL: on_ioctl(c, (const void *)h); break;
	case SBT_DRV: on_drv(c, (const void *)h); break;
	case SBT_IRQ: on_irq(c, (const void *)h); break;
	case SBT_WAKE: on_wake(c, (const void *)h); break;
	case SBT_IOMMU_MAP:
	case SBT_IOMMU_UNMAP:
	case SBT_DMA_MAP:
	case SBT_DMA_UNMAP: on_dma(c, h); break;
	case SBT_TASK_NEW:
		on_task_ids(c, h);
		on_task(c, (const void *)h);
		break;
	case SBT_TASK_COMM:
	case SBT_TASK_EXIT: on_task(c, (const void *)h); break;
	case SBT_META_PROC: on_proc(c, (const void *)h); break;
	case SBT_THREAD_NAME: on_thread_name(c, (const void *)h); break;
	case SBT_META_IRQ: on_irq_name(c, (const void *)h); break;
	case SBT_META_DEVICE: on_card(c, (const void *)h); break;
	case SBT_META_CLOCK: TO_SINKS(c, clock, (const void *)h); break;
	case SBT_LOST: on_lost(c, (const void *)h); break;
	case SBT_META_NSPID: on_task_ids(c, h); break;
	}
	return 0;
}

/* A runtime call's entry and exit are most records, ioctls next: each of
 * these has its own copy of add_record, where the checks that depend on
 * the type are settled when compiling (a copy for interrupts made the
 * whole larger). */
int correlator_add(struct correlator *c, const struct sbt_hdr *h)
{
	switch (h->type) {
	case SBT_CALL_ENTER: return add_record(c, h, SBT_CALL_ENTER);
	case SBT_CALL_EXIT: return add_record(c, h, SBT_CALL_EXIT);
	case SBT_IOCTL: return add_record(c, h, SBT_IOCTL);
	default: return add_record(c, h, h->type);
	}
}

static void finish_thread(uint64_t key, void *val, void *ctx)
{
	(void)key;
	flush_frames(ctx, val);
}

void correlator_finish(struct correlator *c)
{
	hm_each(&c->threads, finish_thread, c);
	for (int i = 0; i < c->ndevices; i++)
		settle_held(c, c->devices[i], true);
	for (int i = 0; i < c->ndevices; i++) {
		struct device *d = c->devices[i];

		/* never stretched to the end: a mark where the job started */
		while (d->head) {
			struct job *j = d->head;
			struct model_event e = { .kind = EV_INSTANT,
						 .ts = j->start,
						 .name = "unfinished job",
						 .cat = job_cats[j->engine],
						 .depth = MODEL_DEPTH_INSTANTS };

			d->head = j->next;
			/* an instant: on the engine's first lane, or the device's */
			e.track = d->nlanes[j->engine] ? &d->lanes[j->engine][0] : &d->track;
			arg_s(&e, "job", job_names[j->engine]);
			arg_u(&e, "correlation", j->id);
			if (j->bytes)
				arg_u(&e, "bytes", j->bytes);
			e.flows[e.nflows++] = j->id;
			emit(c, &e);
			c->st.unfinished_jobs++;
			job_end(c, j);
		}
		d->tail = NULL;
	}
}

struct correlator *correlator_new(const struct model_sink *sinks, int nsinks)
{
	struct correlator *c = calloc(1, sizeof(*c));

	if (!c || nsinks > CORRELATE_MAX_SINKS) {
		free(c);
		return NULL;
	}
	memcpy(c->sinks, sinks, (size_t)nsinks * sizeof(*sinks));
	c->nsinks = nsinks;
	c->jump_span = UINT64_MAX; /* no record yet: none is too far */
	c->ts_tid = TS_NONE;
	for (int i = 0; i < nsinks; i++)
		if (sinks[i].event) {
			c->ev[c->nev].fn = sinks[i].event;
			c->ev[c->nev++].ctx = sinks[i].ctx;
		}
	meta_init(&c->meta);
	new_track(c, &c->global, TRACK_GLOBAL, 0, "spyre-bpftrace");
	return c;
}

const struct correlate_stats *correlator_stats(const struct correlator *c)
{
	return &c->st;
}

const struct capture_meta *correlator_meta(const struct correlator *c)
{
	return &c->meta;
}

static void free_proc(uint64_t key, void *val, void *ctx)
{
	struct process *p = val;

	(void)key;
	(void)ctx;
	hm_free(&p->allocs);
	hm_free(&p->mapped_card);
	free(p);
}

/* A list of jobs linked by next. */
static void free_jobs(struct job *j)
{
	for (struct job *next; j; j = next) {
		next = j->next;
		free(j);
	}
}

void correlator_free(struct correlator *c)
{
	if (!c)
		return;
	hm_each(&c->procs, free_proc, NULL);
	hm_free(&c->procs);
	hm_free_values(&c->threads);
	for (int i = 0; i < c->ndevices; i++) /* jobs in flight: on a queue */
		free_jobs(c->devices[i]->head);
	free_jobs(c->spare_jobs);
	hm_free(&c->devices_by_irq);
	hm_free(&c->streams);
	hm_free(&c->thread_ts);
	strtab_free(&c->names);
	for (int i = 0; i < c->ndevices; i++)
		free(c->devices[i]);
	free(c->devices);
	meta_free(&c->meta);
	free(c);
}
