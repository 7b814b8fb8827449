// SPDX-License-Identifier: GPL-2.0-only
/*
 * The file is read through once at open, each event parsed alone (and
 * handed on), its top-level members kept only where they say something
 * (baseTimeNanoseconds, otherData); chrome_each reads the events again
 * from where the array starts. Nothing holds more than one event.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_stream.h"
#include "offline/chrome_read.h"

/* Epoch microseconds after 2001: an old kineto's absolute REALTIME ts */
#define EPOCH_US_2001 978307200000000ll
#define SNIFF_EVENTS 64 /* how many events tell a torch without kineto */

static void read_id(const struct json_value *v, struct chrome_id *id)
{
	memset(id, 0, sizeof(*id));
	if (v && v->type == JSON_NUMBER && json_int(v, &id->num))
		id->is_num = true;
	else if (v && v->type == JSON_STRING)
		id->str = v->s;
	else
		id->str = "";
}

static const char *str_of(const struct json_value *o, const char *key)
{
	const struct json_value *v = json_get(o, key);

	return v && v->type == JSON_STRING ? v->s : "";
}

/* An event's fields from its object. false when it is not an object. */
static bool decode(const struct json_value *o, struct chrome_event *e)
{
	const struct json_value *v;

	memset(e, 0, sizeof(*e));
	if (o->type != JSON_OBJECT)
		return false;
	e->ph = str_of(o, "ph")[0];
	e->name = str_of(o, "name");
	e->cat = str_of(o, "cat");
	read_id(json_get(o, "pid"), &e->pid);
	read_id(json_get(o, "tid"), &e->tid);
	e->has_ts = json_decimal(json_get(o, "ts"), 3, &e->ts_ns);
	if (!json_decimal(json_get(o, "dur"), 3, &e->dur_ns) || e->dur_ns < 0)
		e->dur_ns = 0;
	v = json_get(o, "args");
	e->args = v && v->type == JSON_OBJECT ? v : NULL;
	v = json_get(o, "id");
	if (v && v->type == JSON_NUMBER)
		e->has_id = json_int(v, &e->id);
	else if (v && v->type == JSON_STRING) { /* "0x1f" or "31" */
		char *end;

		e->id = (int64_t)strtoull(v->s, &end, 0);
		e->has_id = end != v->s && !*end;
	}
	e->bp_enclosing = !strcmp(str_of(o, "bp"), "e");
	e->scope = str_of(o, "s")[0];
	return true;
}

/* Our own trace: otherData.clock_snapshots, first and last. */
static int read_our_clocks(struct chrome_trace *t, const struct json_value *other)
{
	const struct json_value *cs = json_get(other, "clock_snapshots");

	if (!cs || cs->type != JSON_ARRAY || !cs->n)
		return -1;
	uint32_t which[CHROME_MAX_CLOCKS] = { 0, cs->n - 1 };

	for (int j = 0; j < (cs->n > 1 ? 2 : 1); j++) {
		const struct json_value *c = &cs->items[which[j]];
		struct sbt_meta_clock *k = &t->clocks[t->nclocks];
		int64_t b, m, r, sp = 0;

		if (!json_int(json_get(c, "boottime_ns"), &b) || !json_int(json_get(c, "realtime_ns"), &r))
			return -1;
		if (!json_int(json_get(c, "monotonic_ns"), &m))
			m = 0;
		json_int(json_get(c, "spread_ns"), &sp);
		memset(k, 0, sizeof(*k));
		k->h.type = SBT_META_CLOCK;
		k->h.ts = (uint64_t)b;
		k->boottime = (uint64_t)b;
		k->monotonic = (uint64_t)m;
		k->realtime = (uint64_t)r;
		k->spread_ns = (uint64_t)sp;
		t->nclocks++;
	}
	return 0;
}

/* What the first read learns beyond the top-level members. */
struct first_read {
	struct chrome_trace *t;
	chrome_event_fn fn;
	void *ctx;
	bool bare; /* the file is the events array itself */
	bool has_first_ts, cpu_functions, has_base;
	int64_t first_ts;
};

static void learn(struct first_read *r, const struct chrome_event *e)
{
	if (!r->has_first_ts && e->has_ts && e->ph == 'X') {
		r->has_first_ts = true;
		r->first_ts = e->ts_ns;
	}
	if (r->t->nevents <= SNIFF_EVENTS && !e->pid.is_num && !strcmp(e->pid.str, "CPU functions"))
		r->cpu_functions = true;
	if (r->fn)
		r->fn(r->ctx, e);
}

static void not_json(struct chrome_trace *t, struct json_stream *s, const char *what, char *err, size_t errlen)
{
	if (s->error == EFBIG)
		snprintf(err, errlen,
			 "'%s' has a value of over %u MiB at byte %llu: not a trace this "
			 "reads",
			 t->path, JSTREAM_MAX_VALUE >> 20, (unsigned long long)jstream_offset(s));
	else if (s->error)
		snprintf(err, errlen, "reading '%s' failed: %s", t->path, strerror(s->error));
	else
		snprintf(err, errlen,
			 "'%s' is not JSON: %s at byte %llu; hint: was it cut short? export "
			 "it again",
			 t->path, what, (unsigned long long)jstream_offset(s));
}

/* The elements of the array whose '[' was just read past, each parsed;
 * objects decoded to fn. 0, or -1 with err. */
static int each_element(struct chrome_trace *t, struct json_stream *s, struct json_doc *doc,
			void (*fn)(void *, const struct chrome_event *), void *ctx, char *err, size_t errlen)
{
	const char *text;
	size_t len;
	int c = jstream_peek(s);

	if (c == ']') {
		jstream_skip(s);
		return 0;
	}
	for (;;) {
		struct chrome_event e;
		uint64_t at = jstream_offset(s);

		if (jstream_value(s, &text, &len)) {
			not_json(t, s, "the events array ends early", err, errlen);
			return -1;
		}
		if (json_parse_again(doc, text, len)) {
			snprintf(err, errlen,
				 "'%s' is not JSON: in the event at byte %llu: %s; hint: was it "
				 "cut short? export it again",
				 t->path, (unsigned long long)at, doc->error);
			return -1;
		}
		if (decode(&doc->root, &e))
			fn(ctx, &e);
		c = jstream_peek(s);
		jstream_skip(s);
		if (c == ']')
			return 0;
		if (c != ',') {
			not_json(t, s, "no ',' or ']' after an event", err, errlen);
			return -1;
		}
	}
}

static void first_read_event(void *ctx, const struct chrome_event *e)
{
	struct first_read *r = ctx;

	r->t->nevents++;
	learn(r, e);
}

/* A top-level member's key, decoded. */
static bool read_key(struct json_stream *s, struct json_doc *doc, char *key, size_t keylen)
{
	const char *text;
	size_t len;

	if (jstream_peek(s) != '"' || jstream_value(s, &text, &len) || json_parse_again(doc, text, len) ||
	    doc->root.type != JSON_STRING)
		return false;
	snprintf(key, keylen, "%s", doc->root.s);
	return true;
}

/* The whole file once: its structure, each event, the members kept. */
static int first_read(struct chrome_trace *t, struct first_read *r, char *err, size_t errlen)
{
	struct json_stream s;
	struct json_doc doc = { 0 };
	char key[64];
	int c, ret = -1;
	bool have_events = false;

	jstream_init(&s, t->f);
	c = jstream_peek(&s);
	if (c == '[') { /* a bare array of events */
		jstream_skip(&s);
		t->events_at = jstream_offset(&s);
		have_events = r->bare = true;
		if (each_element(t, &s, &doc, first_read_event, r, err, errlen))
			goto out;
	} else if (c == '{') {
		jstream_skip(&s);
		if (jstream_peek(&s) == '}')
			jstream_skip(&s);
		else
			for (;;) {
				const char *text;
				size_t len;

				if (!read_key(&s, &doc, key, sizeof(key)) || jstream_peek(&s) != ':') {
					not_json(t, &s, "no member name", err, errlen);
					goto out;
				}
				jstream_skip(&s);
				if (!strcmp(key, "traceEvents") && !have_events && jstream_peek(&s) == '[') {
					jstream_skip(&s);
					t->events_at = jstream_offset(&s);
					have_events = true;
					if (each_element(t, &s, &doc, first_read_event, r, err, errlen))
						goto out;
				} else {
					uint64_t at = jstream_offset(&s);

					if (jstream_value(&s, &text, &len)) {
						not_json(t, &s, "a member's value ends early", err, errlen);
						goto out;
					}
					if (json_parse_again(&doc, text, len)) {
						snprintf(err, errlen,
							 "'%s' is not JSON: in the value at byte %llu: "
							 "%s; hint: was it cut short? export it again",
							 t->path, (unsigned long long)at, doc.error);
						goto out;
					}
					if (!strcmp(key, "baseTimeNanoseconds") && !r->has_base)
						r->has_base = json_int(&doc.root, &t->base_ns);
					if (!strcmp(key, "otherData") && !t->other_text) {
						/* kept: its text outlives the stream's buffer */
						t->other_text = malloc(len);
						if (t->other_text)
							memcpy(t->other_text, text, len);
						if (!t->other_text || json_parse(&t->other, t->other_text, len)) {
							snprintf(err, errlen, "out of memory reading '%s'", t->path);
							goto out;
						}
					}
				}
				c = jstream_peek(&s);
				jstream_skip(&s);
				if (c == '}')
					break;
				if (c != ',') {
					not_json(t, &s, "no ',' or '}' after a member", err, errlen);
					goto out;
				}
			}
	} else {
		not_json(t, &s, c < 0 ? "nothing in it" : "not an object or array", err, errlen);
		goto out;
	}
	if (jstream_peek(&s) >= 0) {
		not_json(t, &s, "text after the JSON value", err, errlen);
		goto out;
	}
	if (s.error) {
		not_json(t, &s, "", err, errlen);
		goto out;
	}
	if (!have_events) {
		snprintf(err, errlen, "'%s' is not a Chrome JSON trace (no traceEvents array)", t->path);
		goto out;
	}
	ret = 0;
out:
	json_free(&doc);
	jstream_free(&s);
	return ret;
}

static int classify(struct chrome_trace *t, const struct first_read *r, char *err, size_t errlen)
{
	const struct json_value *other = chrome_other(t);

	if (r->bare && r->cpu_functions) {
		snprintf(err, errlen,
			 "'%s' is from a PyTorch profiler without kineto (pid \"CPU functions\", "
			 "times from the profiler's start): its clock cannot be aligned; hint: "
			 "profile with a torch built with kineto (torch.profiler.kineto_available(), "
			 "e.g. Debian 13's python3-torch)",
			 t->path);
		return -1;
	}
	if (!strcmp(str_of(other, "producer"), "spyre-bpftrace")) {
		t->kind = CHROME_OURS;
		if (read_our_clocks(t, other)) {
			snprintf(err, errlen,
				 "'%s' has no clock snapshots in otherData; hint: convert the "
				 "capture again with this version, or merge the .sbt itself",
				 t->path);
			return -1;
		}
		return 0;
	}
	t->kind = CHROME_KINETO;
	if (r->has_base)
		return 0;
	if (r->has_first_ts && r->first_ts / 1000 > EPOCH_US_2001) {
		t->base_ns = 0; /* an older kineto: ts is REALTIME itself */
		return 0;
	}
	snprintf(err, errlen,
		 "'%s' has no baseTimeNanoseconds and its times are not wall-clock times: it cannot be "
		 "aligned with a capture; hint: export it with torch.profiler's "
		 "export_chrome_trace() from torch 2.x (kineto)",
		 t->path);
	return -1;
}

/* The first read of t->f, as chrome_open says. */
static int open_stream(struct chrome_trace *t, chrome_event_fn fn, void *ctx, char *err, size_t errlen)
{
	struct first_read r = { .t = t, .fn = fn, .ctx = ctx };

	if (!first_read(t, &r, err, errlen) && !classify(t, &r, err, errlen))
		return 0;
	chrome_close(t);
	return -1;
}

int chrome_open(struct chrome_trace *t, const char *path, chrome_event_fn fn, void *ctx, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	t->path = path;
	if (!(t->f = fopen(path, "rbe"))) {
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return -1;
	}
	return open_stream(t, fn, ctx, err, errlen);
}

int chrome_parse(struct chrome_trace *t, char *text, size_t len, const char *path, chrome_event_fn fn, void *ctx,
		 char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	t->path = path;
	/* fmemopen of 0 bytes fails: an empty text is an empty file */
	t->mem = text;
	if (!(t->f = len ? fmemopen(text, len, "r") : fopen("/dev/null", "re"))) {
		snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
		free(text);
		t->mem = NULL;
		return -1;
	}
	return open_stream(t, fn, ctx, err, errlen);
}

int chrome_each(struct chrome_trace *t, chrome_event_fn fn, void *ctx, char *err, size_t errlen)
{
	struct json_stream s;
	struct json_doc doc = { 0 };
	int ret = -1;

	if (fseeko(t->f, (off_t)t->events_at, SEEK_SET)) {
		snprintf(err, errlen, "reading '%s' again failed: %s", t->path, strerror(errno));
		return -1;
	}
	jstream_init(&s, t->f);
	ret = each_element(t, &s, &doc, fn, ctx, err, errlen);
	if (ret && !s.error)
		snprintf(err + strlen(err), errlen - strlen(err), " (did it change since it was read?)");
	json_free(&doc);
	jstream_free(&s);
	return ret;
}

const struct json_value *chrome_other(const struct chrome_trace *t)
{
	return t->other_text ? &t->other.root : NULL;
}

void chrome_close(struct chrome_trace *t)
{
	if (t->f)
		fclose(t->f);
	json_free(&t->other);
	free(t->other_text);
	free(t->mem);
	memset(t, 0, sizeof(*t));
}
