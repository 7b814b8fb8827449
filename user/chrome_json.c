// SPDX-License-Identifier: GPL-2.0-only
/*
 * Chrome JSON writer. Host tracks are real pids and tids; a device is a
 * pseudo-process (pid DEVICE_PID_BASE + n) whose threads are its engine
 * lanes. ts and dur are microseconds with nanosecond decimals. Flows use
 * s/t/f events bound to the enclosing slice.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chrome_json.h"
#include "hashmap.h"

#define DEVICE_PID_BASE 1000000000u
#define TRACER_PID (DEVICE_PID_BASE - 1)

struct placement {
	uint32_t pid, tid;
};

struct json_writer {
	FILE *f;
	bool first;
	struct hashmap places; /* track id -> placement */
	struct hashmap flows; /* flow ids already started */
	uint64_t bytes;
	int error;
};

__attribute__((format(printf, 2, 3))) static void out(struct json_writer *w, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vfprintf(w->f, fmt, ap);
	va_end(ap);
	if (n < 0 && !w->error)
		w->error = errno ? errno : EIO;
	else if (n > 0)
		w->bytes += (uint64_t)n;
}

static void str(struct json_writer *w, const char *s)
{
	out(w, "\"");
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			out(w, "\\%c", c);
		else if (c < 0x20)
			out(w, "\\u%04x", c);
		else
			out(w, "%c", c);
	}
	out(w, "\"");
}

static void begin_event(struct json_writer *w)
{
	out(w, w->first ? "\n" : ",\n");
	w->first = false;
}

struct json_writer *json_open(const char *path, char *err, size_t errlen)
{
	struct json_writer *w = calloc(1, sizeof(*w));

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->f = fopen(path, "w");
	if (!w->f) {
		snprintf(err, errlen, "%s", strerror(errno));
		free(w);
		return NULL;
	}
	setvbuf(w->f, NULL, _IOFBF, 1 << 20);
	w->first = true;
	out(w, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"spyre-bpftrace\"},"
	       "\"traceEvents\":[");
	return w;
}

static struct placement *place_of(struct json_writer *w, uint64_t track)
{
	return hm_get(&w->places, track);
}

static void meta_event(struct json_writer *w, const char *what, uint32_t pid, uint32_t tid,
		       const char *key, const char *sval, long ival)
{
	begin_event(w);
	out(w, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"args\":{\"%s\":", what, pid,
	    tid, key);
	if (sval)
		str(w, sval);
	else
		out(w, "%ld", ival);
	out(w, "}}");
}

static void on_track(void *ctx, const struct model_track *t)
{
	struct json_writer *w = ctx;
	struct placement *p = place_of(w, t->id), *parent;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hm_put(&w->places, t->id, p)) {
			free(p);
			w->error = ENOMEM;
			return;
		}
	}
	parent = t->parent ? place_of(w, t->parent) : NULL;
	switch (t->kind) {
	case TRACK_PROCESS:
		*p = (struct placement){ t->pid, t->pid };
		meta_event(w, "process_name", t->pid, 0, "name", t->name, 0);
		break;
	case TRACK_THREAD:
		*p = (struct placement){ t->pid, t->tid };
		meta_event(w, "thread_name", t->pid, t->tid, "name", t->name, 0);
		break;
	case TRACK_DEVICE:
		*p = (struct placement){ DEVICE_PID_BASE + (uint32_t)t->rank, 0 };
		meta_event(w, "process_name", p->pid, 0, "name", t->name, 0);
		meta_event(w, "process_sort_index", p->pid, 0, "sort_index", NULL, 1000 + t->rank);
		break;
	case TRACK_LANE:
		*p = (struct placement){ parent ? parent->pid : TRACER_PID, (uint32_t)t->id };
		meta_event(w, "thread_name", p->pid, p->tid, "name", t->name, 0);
		meta_event(w, "thread_sort_index", p->pid, p->tid, "sort_index", NULL, t->rank);
		break;
	case TRACK_COUNTER: /* counters belong to their parent's process */
		*p = (struct placement){ parent ? parent->pid : TRACER_PID, 0 };
		break;
	case TRACK_GLOBAL:
		*p = (struct placement){ TRACER_PID, 0 };
		meta_event(w, "process_name", TRACER_PID, 0, "name", t->name, 0);
		break;
	}
}

static void ts_us(struct json_writer *w, const char *key, uint64_t ns)
{
	out(w, ",\"%s\":%" PRIu64 ".%03u", key, ns / 1000, (unsigned)(ns % 1000));
}

static void args(struct json_writer *w, const struct model_event *e)
{
	out(w, ",\"args\":{");
	for (int i = 0; i < e->nargs; i++) {
		const struct model_arg *a = &e->args[i];

		out(w, "%s", i ? "," : "");
		str(w, a->name);
		switch (a->type) {
		case ARG_UINT: out(w, ":%" PRIu64, a->u); break;
		case ARG_INT: out(w, ":%" PRId64, a->i); break;
		case ARG_HEX: out(w, ":\"0x%" PRIx64 "\"", a->u); break;
		case ARG_STR: out(w, ":"); str(w, a->s); break;
		}
	}
	out(w, "}");
}

static void flow(struct json_writer *w, const char *ph, uint64_t id, const struct placement *p,
		 uint64_t ts)
{
	begin_event(w);
	out(w, "{\"ph\":\"%s\",\"name\":\"job\",\"cat\":\"flow\",\"id\":%" PRIu64 ",\"pid\":%u,\"tid\":%u",
	    ph, id, p->pid, p->tid);
	ts_us(w, "ts", ts);
	out(w, "%s}", ph[0] == 's' ? "" : ",\"bp\":\"e\"");
}

static void on_event(void *ctx, const struct model_event *e)
{
	struct json_writer *w = ctx;
	struct placement *p = place_of(w, e->track->id);

	if (!p)
		return;
	begin_event(w);
	if (e->kind == EV_COUNTER) {
		out(w, "{\"ph\":\"C\",\"name\":");
		str(w, e->name);
		out(w, ",\"pid\":%u", p->pid);
		ts_us(w, "ts", e->ts);
		out(w, ",\"args\":{\"value\":%" PRId64 "}}", e->value);
		return;
	}
	out(w, "{\"ph\":\"%s\",\"name\":", e->kind == EV_SLICE ? "X" : "i");
	str(w, e->name);
	out(w, ",\"cat\":");
	str(w, e->cat ? e->cat : "");
	out(w, ",\"pid\":%u,\"tid\":%u", p->pid, p->tid);
	ts_us(w, "ts", e->ts);
	if (e->kind == EV_SLICE)
		ts_us(w, "dur", e->dur);
	else
		out(w, ",\"s\":\"t\"");
	args(w, e);
	out(w, "}");
	/* flow events at the slice's start bind to it */
	for (int i = 0; i < e->nflows; i++) {
		bool started = hm_get(&w->flows, e->flows[i]) != NULL;

		if (!started && hm_put(&w->flows, e->flows[i], (void *)1))
			w->error = ENOMEM;
		flow(w, started ? "t" : "s", e->flows[i], p, e->ts);
	}
	for (int i = 0; i < e->nterm; i++) {
		if (hm_del(&w->flows, e->term_flows[i]))
			flow(w, "f", e->term_flows[i], p, e->ts);
	}
}

struct model_sink json_sink(struct json_writer *w)
{
	return (struct model_sink){ w, on_track, on_event, NULL, NULL };
}

int json_flush(struct json_writer *w)
{
	if (!w->error && fflush(w->f))
		w->error = errno;
	return -w->error;
}

uint64_t json_bytes(const struct json_writer *w)
{
	return w->bytes;
}

int json_close(struct json_writer *w)
{
	int err;

	if (!w)
		return 0;
	out(w, "\n]}\n");
	json_flush(w);
	if (fclose(w->f) && !w->error)
		w->error = errno;
	err = -w->error;
	hm_free_values(&w->places);
	hm_free(&w->flows);
	free(w);
	return err;
}
