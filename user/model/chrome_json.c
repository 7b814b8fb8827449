// SPDX-License-Identifier: GPL-2.0-only
/*
 * Chrome JSON writer. Host tracks are real pids and tids; a device is a
 * pseudo-process (pid CHROME_DEVICE_PID_BASE + n) whose threads are its engine
 * lanes. ts and dur are microseconds with nanosecond decimals. Flows use
 * s/t/f events bound to the enclosing slice.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fibhash.h"
#include "base/hashmap.h"
#include "base/json_write.h"
#include "base/vec.h"
#include "model/chrome_json.h"

struct placement {
	uint32_t pid, tid;
	/* `,"pid":P,"tid":T` as every event on it says it; a counter says
	 * the first pid_len bytes */
	char ids[40];
	uint8_t ids_len, pid_len;
};

/* A name's JSON (quoted, escaped), by the name's address: names stay put
 * and unchanged for the whole trace (model.h), and events of a track
 * repeat a few of them. A name longer than the room is written anew. */
#define NAME_CACHE_BITS 9
#define NAME_CACHE (1 << NAME_CACHE_BITS)
#define CAT_CACHE_BITS 4
#define NAME_ROOM 54
struct name_json {
	const char *key;
	uint8_t len; /* 0: too long, write it anew */
	bool driver; /* categories: "driver" */
	char json[NAME_ROOM];
};

#define PLACE_CACHE 256

#define MAX_CARDS 64
#define MAX_CLOCKS 2 /* the first and the latest */

struct chrome_writer {
	struct json_writer jw; /* jw.error: the first error, write or memory */
	FILE *f;
	bool first;
	struct hashmap places; /* track id -> placement */
	struct {
		uint64_t track; /* 0: empty (track ids start at 1) */
		struct placement *p;
	} place_cache[PLACE_CACHE];
	struct name_json names[NAME_CACHE], cats[1 << CAT_CACHE_BITS];
	struct hashmap flows; /* flow id -> its leg: FLOW_TO_JOB, FLOW_TO_END */
	struct {
		int rank;
		char name[64], ids[16]; /* ids: "vvvv:dddd" once a driver event said */
	} cards[MAX_CARDS]; /* for deviceProperties */
	int ncards;
	struct sbt_meta_clock clocks[MAX_CLOCKS];
	int nclocks;
	struct model_task_ids *tasks; /* for otherData: starts and namespace ids */
	size_t ntasks, tasks_cap;
	/* the last "ts" in whole seconds and its digits: a trace's times share
	 * them for a second at a time, so only the rest is written anew */
	uint64_t ts_sec;
	char ts_sec_digits[16];
	size_t ts_sec_len; /* 0: none yet */
};

/* What a category is written as: runtime calls under the name the Spyre
 * tools (and kineto) give them. */
static const char *cat_shown(const char *cat)
{
	return strcmp(cat, "runtime") ? cat : "cuda_runtime";
}

/* A name's JSON, filled into e. */
static void fill_name(struct name_json *e, const char *key, bool is_cat)
{
	const char *rest = is_cat ? cat_shown(key) : key;
	size_t n = jw_escape_into(e->json + 1, NAME_ROOM - 2, &rest);

	e->key = key;
	e->json[0] = '"';
	e->json[n + 1] = '"';
	e->len = *rest ? 0 : (uint8_t)(n + 2);
	e->driver = !strcmp(key, "driver");
}

/* A name's cache entry, filled on a miss: the table (of 1 << bits) is
 * open-addressed from the slot its address hashes to, up to NAME_PROBES
 * slots on, so the few dozen names of a trace all stay (a set of two ways
 * could hold three that meet in it, which then took turns missing, as
 * where in memory the names lie decides). Past that the first slot goes. */
#define NAME_PROBES 8
static __attribute__((noinline)) struct name_json *name_probe(struct name_json *table, unsigned bits, size_t slot,
							      const char *key, bool is_cat)
{
	size_t mask = ((size_t)1 << bits) - 1;
	struct name_json *e = &table[slot];

	for (int i = 1; i < NAME_PROBES && e->key; i++) {
		e = &table[(slot + (size_t)i) & mask];
		if (e->key == key)
			return e;
	}
	if (e->key) /* all taken: the first goes */
		e = &table[slot];
	fill_name(e, key, is_cat);
	return e;
}

static inline __attribute__((always_inline)) struct name_json *name_entry(struct name_json *table, unsigned bits,
									  const char *key, bool is_cat)
{
	size_t slot = fibhash((uintptr_t)key, bits);

	if (__builtin_expect(table[slot].key == key, 1))
		return &table[slot];
	return name_probe(table, bits, slot, key, is_cat);
}

struct chrome_writer *chrome_writer_open(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		snprintf(err, errlen, "%s", strerror(errno));
		return NULL;
	}
	return chrome_writer_open_file(f, err, errlen);
}

struct chrome_writer *chrome_writer_open_file(FILE *f, char *err, size_t errlen)
{
	struct chrome_writer *w = calloc(1, sizeof(*w));

	if (!w || jw_open(&w->jw, f, 0, false)) {
		snprintf(err, errlen, "out of memory");
		free(w);
		fclose(f);
		return NULL;
	}
	w->f = f;
	w->first = true;
	/* the cards and the clocks are known at the end: they follow the events */
	JW_PUT(&w->jw, "{\"schemaVersion\":1,\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
	return w;
}

static struct placement *place_of(struct chrome_writer *w, uint64_t track)
{
	size_t slot = (size_t)track % PLACE_CACHE;
	struct placement *p;

	if (w->place_cache[slot].track == track)
		return w->place_cache[slot].p;
	p = hm_get(&w->places, track);
	if (p) {
		w->place_cache[slot].track = track;
		w->place_cache[slot].p = p;
	}
	return p;
}

/* ,"pid":P,"tid":T, rendered once per track. */
static void place_render(struct placement *p)
{
	int n = snprintf(p->ids, sizeof(p->ids), ",\"pid\":%u", p->pid);

	p->pid_len = (uint8_t)n;
	n += snprintf(p->ids + n, sizeof(p->ids) - (size_t)n, ",\"tid\":%u", p->tid);
	p->ids_len = (uint8_t)n;
}

static void begin_event(struct chrome_writer *w)
{
	w->first ? JW_PUT(&w->jw, "\n") : JW_PUT(&w->jw, ",\n");
	w->first = false;
}

static void meta_event(struct chrome_writer *w, const char *what, uint32_t pid, uint32_t tid, const char *key,
		       const char *sval, long ival)
{
	struct json_writer *jw = &w->jw;

	if (sval && !sval[0])
		return; /* Perfetto's importer refuses an empty name: better none */
	begin_event(w);
	jw_object(jw);
	jw_key_string(jw, "ph", "M");
	jw_key_string(jw, "name", what);
	jw_key_uint(jw, "pid", pid);
	jw_key_uint(jw, "tid", tid);
	jw_key_uint(jw, "ts", 0); /* aiu-trace-analyzer wants ts on every event */
	jw_key(jw, "args");
	jw_object(jw);
	jw_key(jw, key);
	if (sval)
		jw_string(jw, sval);
	else
		jw_int(jw, ival);
	jw_end(jw);
	jw_end(jw);
}

static void on_track(void *ctx, const struct model_track *t)
{
	struct chrome_writer *w = ctx;
	struct placement *p = place_of(w, t->id), *parent;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hm_put(&w->places, t->id, p)) {
			free(p);
			w->jw.error = ENOMEM;
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
	case TRACK_GROUP: /* a pseudo-process like a card's, not one */
	case TRACK_DEVICE:
		*p = (struct placement){ CHROME_DEVICE_PID_BASE + (uint32_t)t->rank, 0 };
		if (t->kind == TRACK_DEVICE && w->ncards < MAX_CARDS) {
			w->cards[w->ncards].rank = t->rank;
			snprintf(w->cards[w->ncards++].name, sizeof(w->cards[0].name), "%s", t->name);
		}
		meta_event(w, "process_name", p->pid, 0, "name", t->name, 0);
		meta_event(w, "process_sort_index", p->pid, 0, "sort_index", NULL, 1000 + t->rank);
		break;
	case TRACK_LANE:
		*p = (struct placement){ parent ? parent->pid : CHROME_TRACER_PID, (uint32_t)t->id };
		meta_event(w, "thread_name", p->pid, p->tid, "name", t->name, 0);
		meta_event(w, "thread_sort_index", p->pid, p->tid, "sort_index", NULL, t->rank);
		break;
	case TRACK_COUNTER: /* counters belong to their parent's process */
		*p = (struct placement){ parent ? parent->pid : CHROME_TRACER_PID, 0 };
		break;
	case TRACK_GLOBAL:
		*p = (struct placement){ CHROME_TRACER_PID, 0 };
		meta_event(w, "process_name", CHROME_TRACER_PID, 0, "name", t->name, 0);
		break;
	}
	place_render(p);
}

/* ns as microseconds with three decimals, written backwards to end at
 * end; returns where the text starts. */
static inline char *us_before(char *end, uint64_t ns)
{
	unsigned frac = (unsigned)(ns % 1000);

	end[-4] = '.';
	end[-3] = (char)('0' + frac / 100);
	memcpy(end - 2, jw_digit_pairs + 2 * (frac % 100), 2);
	return jw_digits_before(end - 4, ns / 1000);
}

/*
 * An event is built through the writer's cursor in room taken once
 * (EVENT_ROOM). Fixed parts, cached names and numbers have a bound; what
 * has none (a name too long for the cache, a string argument) goes through
 * jw_put_str with the cursor handed back (at_sync), and room is taken anew
 * after it.
 */
#define EVENT_ROOM 1536 /* 2 names, ids, 2 times, 10 args: about 1,100 */
_Static_assert(EVENT_ROOM <= JW_START, "the first buffer holds an event");

/* Room for EVENT_ROOM bytes: a file's writer holds that much from the
 * start, written out if need be, so this always succeeds. */
static inline char *at_room(struct chrome_writer *w)
{
	return jw_room(&w->jw, EVENT_ROOM);
}

static inline void at_sync(struct chrome_writer *w, char *at)
{
	jw_sync(&w->jw, at);
}

#define AT_PUT JW_AT_PUT

/* begin_event() through the cursor */
static inline char *at_begin_event(struct chrome_writer *w, char *at)
{
	at = w->first ? AT_PUT(at, "\n") : AT_PUT(at, ",\n");
	w->first = false;
	return at;
}

/* ,"key":MICROSECONDS.NNN, key a literal */
#define AT_TS(at, key, ns) at_ts(at, ",\"" key "\":", sizeof(",\"" key "\":") - 1, ns)

static inline char *at_ts(char *at, const char *key, size_t keylen, uint64_t ns)
{
	char d[2 * JW_NUM_ROOM], *end = d + JW_NUM_ROOM, *p = us_before(end, ns);

	at = jw_at_put(at, key, keylen);
	memcpy(at, p, JW_NUM_ROOM);
	return at + (end - p);
}

/* An event's ,"ts":MICROSECONDS.NNN: the whole seconds' digits from the
 * writer's last, the rest (six digits, the point, three) from pairs. The
 * same text as AT_TS. */
static inline __attribute__((always_inline)) char *at_event_ts(struct chrome_writer *w, char *at, uint64_t ns)
{
	uint64_t sec = ns / 1000000000;
	uint32_t sub = (uint32_t)(ns % 1000000000), us = sub / 1000, frac = sub % 1000;

	if (!sec)
		return AT_TS(at, "ts", ns);
	if (sec != w->ts_sec || !w->ts_sec_len) {
		char *e = w->ts_sec_digits + sizeof(w->ts_sec_digits), *b = jw_digits_before(e, sec);

		w->ts_sec_len = (size_t)(e - b);
		memmove(w->ts_sec_digits, b, w->ts_sec_len);
		w->ts_sec = sec;
	}
	at = AT_PUT(at, ",\"ts\":");
	memcpy(at, w->ts_sec_digits, sizeof(w->ts_sec_digits));
	at += w->ts_sec_len;
	memcpy(at, jw_digit_pairs + 2 * (us / 10000), 2);
	memcpy(at + 2, jw_digit_pairs + 2 * (us / 100 % 100), 2);
	memcpy(at + 4, jw_digit_pairs + 2 * (us % 100), 2);
	at[6] = '.';
	at[7] = (char)('0' + frac / 100);
	memcpy(at + 8, jw_digit_pairs + 2 * (frac % 100), 2);
	return at + 10;
}

/* A name (or, is_cat, a category) from the cache: its JSON with one
 * fixed-size copy. *driver: the category is "driver". */
static inline __attribute__((always_inline)) char *at_name(struct chrome_writer *w, char *at, const char *s,
							   bool is_cat, bool *driver)
{
	struct name_json *e;

	if (!s)
		return AT_PUT(at, "\"\"");
	e = is_cat ? name_entry(w->cats, CAT_CACHE_BITS, s, true) : name_entry(w->names, NAME_CACHE_BITS, s, false);
	if (driver)
		*driver = e->driver;
	if (__builtin_expect(e->len, 1)) {
		memcpy(at, e->json, NAME_ROOM);
		return at + e->len;
	}
	at_sync(w, at); /* too long for the cache: written anew */
	jw_put_str(&w->jw, is_cat ? cat_shown(s) : s);
	return at_room(w);
}

static char *at_args(struct chrome_writer *w, char *at, const struct model_event *e)
{
	at = AT_PUT(at, ",\"args\":{");
	for (int i = 0; i < e->nargs; i++) {
		const struct model_arg *a = &e->args[i];

		if (i)
			*at++ = ',';
		at = at_name(w, at, a->name, false, NULL);
		*at++ = ':';
		switch (a->type) {
		case ARG_UINT: at = jw_at_u64(at, a->u); break;
		case ARG_INT: at = jw_at_i64(at, a->i); break;
		case ARG_HEX: at = jw_at_hex(at, a->u); break;
		case ARG_STR:
			if (a->fixed) { /* from the cache, as a name */
				at = at_name(w, at, a->s, false, NULL);
				break;
			}
			at_sync(w, at); /* no bound */
			jw_put_str(&w->jw, a->s);
			at = at_room(w);
			break;
		}
	}
	*at++ = '}';
	return at;
}

/*
 * A job's flow runs launch -> job -> the wait or interrupt that ended it.
 * Chrome JSON readers such as aiu-trace-analyzer take only s and f, so it
 * is two flows: launch -> job as kineto writes its "ac2g" (id: the job's
 * correlation), and job -> end (id: FLOW_END_IDS + correlation).
 */
enum { FLOW_TO_JOB = 1, FLOW_TO_END = 2 };
#define FLOW_END_IDS (1ull << 40)

/* An arrow's end from its id on: the id, the track, the time, how it
 * binds (the buffer has room for it: at_room). */
static inline __attribute__((always_inline)) char *flow_tail(struct chrome_writer *w, char *at, bool start, uint64_t id,
							     const struct placement *p, uint64_t ts)
{
	at = jw_at_u64(at, id);
	memcpy(at, p->ids, sizeof(p->ids));
	at += p->ids_len;
	at = at_event_ts(w, at, ts);
	return start ? AT_PUT(at, "}") : AT_PUT(at, ",\"bp\":\"e\"}");
}

/* One end of an arrow: s binds to the slice starting here, f (bp e) to the
 * slice that holds ts. */
static void flow_event(struct chrome_writer *w, bool start, const char *what, const char *cat, uint64_t id,
		       const struct placement *p, uint64_t ts)
{
	char *at = at_begin_event(w, at_room(w));

	at = start ? AT_PUT(at, "{\"ph\":\"s\",\"name\":") : AT_PUT(at, "{\"ph\":\"f\",\"name\":");
	at = at_name(w, at, what, false, NULL);
	at = AT_PUT(at, ",\"cat\":");
	at = at_name(w, at, cat, false, NULL);
	at = AT_PUT(at, ",\"id\":");
	at_sync(w, flow_tail(w, at, start, id, p, ts));
}

/* flow_event() of a job's flow, whose names are known: its head is one
 * literal (a job makes four of these), all of it through one cursor. */
static void flow(struct chrome_writer *w, bool start, uint64_t id, int leg, const struct placement *p, uint64_t ts)
{
#define FLOW_HEAD(ph, name, cat) "{\"ph\":\"" ph "\",\"name\":\"" name "\",\"cat\":\"" cat "\",\"id\":"
	char *at = at_room(w);

	at = at_begin_event(w, at);
	if (leg == FLOW_TO_JOB) {
		if (start)
			at = AT_PUT(at, FLOW_HEAD("s", "ac2g", "ac2g"));
		else
			at = AT_PUT(at, FLOW_HEAD("f", "ac2g", "ac2g"));
	} else {
		id += FLOW_END_IDS;
		if (start)
			at = AT_PUT(at, FLOW_HEAD("s", "job end", "flow"));
		else
			at = AT_PUT(at, FLOW_HEAD("f", "job end", "flow"));
	}
#undef FLOW_HEAD
	at_sync(w, flow_tail(w, at, start, id, p, ts));
}

/* An arrow of another kind than a job's (model.h): named by its kind; the
 * id keeps the kind (at bit 44), so ids of two kinds never meet, and stays
 * under 2^53 for readers that hold numbers as doubles. */
static void plain_flow(struct chrome_writer *w, bool start, uint64_t id, const struct placement *p, uint64_t ts)
{
	static const char *const cats[] = { [FLOW_OP_CALL] = "op_call",
					    [FLOW_SPAWN] = "spawn",
					    [FLOW_AC2G] = "ac2g",
					    [FLOW_FWDBWD] = "fwdbwd",
					    [FLOW_OTHER] = "flow" };
	int kind = MODEL_FLOW_KIND(id);
	const char *cat = kind > 0 && kind < (int)(sizeof(cats) / sizeof(cats[0])) ? cats[kind] : "flow";

	flow_event(w, start, cat, cat, (uint64_t)kind << 44 | (id & ((1ull << 44) - 1)), p, ts);
}

/* A driver event names its card's vendor:device: remembered for deviceProperties. */
static void note_card_ids(struct chrome_writer *w, const struct model_event *e)
{
	const char *dev = NULL;
	uint64_t vendor = 0, device = 0;

	for (int i = 0; i < e->nargs; i++) {
		if (!strcmp(e->args[i].name, "device") && e->args[i].type == ARG_STR)
			dev = e->args[i].s;
		else if (!strcmp(e->args[i].name, "vendor"))
			vendor = e->args[i].u;
		else if (!strcmp(e->args[i].name, "device_id"))
			device = e->args[i].u;
	}
	if (!dev || !vendor)
		return;
	for (int i = 0; i < w->ncards; i++)
		if (!strncmp(w->cards[i].name, "PCI ", 4) && !strcmp(w->cards[i].name + 4, dev))
			snprintf(w->cards[i].ids, sizeof(w->cards[i].ids), "%04x:%04x", (unsigned)vendor & 0xffff,
				 (unsigned)device & 0xffff);
}

static void on_event(void *ctx, const struct model_event *e)
{
	struct chrome_writer *w = ctx;
	struct placement *p = place_of(w, e->track->id);
	bool driver = false;
	char *at;

	if (!p)
		return;
	at = at_room(w);
	at = at_begin_event(w, at);
	if (e->kind == EV_COUNTER) {
		at = AT_PUT(at, "{\"ph\":\"C\",\"name\":");
		at = at_name(w, at, e->name, false, NULL);
		memcpy(at, p->ids, sizeof(p->ids)); /* the pid of it */
		at += p->pid_len;
		at = at_event_ts(w, at, e->ts);
		at = AT_PUT(at, ",\"args\":{\"value\":");
		at = jw_at_i64(at, e->value);
		at = AT_PUT(at, "}}");
		at_sync(w, at);
		return;
	}
	if (e->kind == EV_SLICE)
		at = AT_PUT(at, "{\"ph\":\"X\",\"name\":");
	else
		at = AT_PUT(at, "{\"ph\":\"i\",\"name\":");
	at = at_name(w, at, e->name, false, NULL);
	at = AT_PUT(at, ",\"cat\":");
	at = at_name(w, at, e->cat, true, &driver);
	memcpy(at, p->ids, sizeof(p->ids));
	at += p->ids_len;
	at = at_event_ts(w, at, e->ts);
	if (e->kind == EV_SLICE)
		at = AT_TS(at, "dur", e->dur);
	else
		at = AT_PUT(at, ",\"s\":\"t\"");
	at = at_args(w, at, e);
	*at++ = '}';
	at_sync(w, at);
	if (driver)
		note_card_ids(w, e);
	/* flow events at the slice's start bind to it */
	for (int i = 0; i < e->nxflows; i++)
		plain_flow(w, true, e->xflows[i], p, e->ts);
	for (int i = 0; i < e->nxterm; i++)
		plain_flow(w, false, e->xterm[i], p, e->ts);
	for (int i = 0; i < e->nflows; i++) {
		uintptr_t leg;

		if (MODEL_FLOW_KIND(e->flows[i]) != FLOW_JOB) {
			plain_flow(w, true, e->flows[i], p, e->ts);
			continue;
		}
		leg = (uintptr_t)hm_get(&w->flows, e->flows[i]);

		if (!leg) { /* the launch */
			flow(w, true, e->flows[i], FLOW_TO_JOB, p, e->ts);
			leg = FLOW_TO_JOB;
		} else if (leg == FLOW_TO_JOB) { /* the job: ends one leg, starts the next */
			flow(w, false, e->flows[i], FLOW_TO_JOB, p, e->ts);
			flow(w, true, e->flows[i], FLOW_TO_END, p, e->ts);
			leg = FLOW_TO_END;
		}
		if (hm_put(&w->flows, e->flows[i], (void *)leg))
			w->jw.error = ENOMEM;
	}
	for (int i = 0; i < e->nterm; i++) {
		uintptr_t leg;

		if (MODEL_FLOW_KIND(e->term_flows[i]) != FLOW_JOB) {
			plain_flow(w, false, e->term_flows[i], p, e->ts);
			continue;
		}
		leg = (uintptr_t)hm_del(&w->flows, e->term_flows[i]);

		if (leg)
			flow(w, false, e->term_flows[i], (int)leg, p, e->ts);
	}
}

static void on_task(void *ctx, const struct model_task_ids *t)
{
	struct chrome_writer *w = ctx;

	if (vec_reserve((void **)&w->tasks, &w->tasks_cap, w->ntasks + 1, sizeof(*t))) {
		w->jw.error = ENOMEM;
		return;
	}
	w->tasks[w->ntasks++] = *t;
}

static void on_clock(void *ctx, const struct sbt_meta_clock *c)
{
	struct chrome_writer *w = ctx;

	w->clocks[w->nclocks < MAX_CLOCKS ? w->nclocks++ : MAX_CLOCKS - 1] = *c;
}

/* otherData's process starts (pid, ppid, ts_ns) or, with ns, the ids of
 * threads in a pid namespace (pid, tid, ns_pid, ns_tid). */
static void task_list(struct chrome_writer *w, bool ns)
{
	static const char *const start_keys[] = { "pid", "ppid", "ts_ns" };
	static const char *const ns_keys[] = { "pid", "tid", "ns_pid", "ns_tid" };
	const char *const *keys = ns ? ns_keys : start_keys;
	int nkeys = ns ? 4 : 3;

	jw_array(&w->jw);
	for (size_t i = 0; i < w->ntasks; i++) {
		const struct model_task_ids *t = &w->tasks[i];
		uint64_t v[4] = { t->pid, ns ? t->tid : t->ppid, ns ? t->ns_pid : t->ts, t->ns_tid };

		if (ns ? !t->ns_pid : !t->ppid)
			continue;
		jw_object(&w->jw);
		for (int k = 0; k < nkeys; k++)
			jw_key_uint(&w->jw, keys[k], v[k]);
		jw_end(&w->jw);
	}
	jw_end(&w->jw);
}

/* A card as kineto's deviceProperties entry (NULL: one with no name). */
static void card(struct chrome_writer *w, int i)
{
	const char *n = i < 0 ? "" : w->cards[i].name;

	jw_object(&w->jw);
	jw_key_uint(&w->jw, "id", i < 0 ? 0 : (uint64_t)(w->cards[i].rank - 1));
	jw_key_string(&w->jw, "name", n);
	jw_key_string(&w->jw, "pciAddress", strncmp(n, "PCI ", 4) ? "" : n + 4);
	jw_key_string(&w->jw, "vendorDevice", i < 0 ? "" : w->cards[i].ids);
	jw_end(&w->jw);
}

/* After the events: the cards and the clock snapshots, so the file alone
 * can be aligned with another trace (ts is CLOCK_BOOTTIME in µs).
 * aiu-trace-analyzer reads a file as PyTorch's only with deviceProperties,
 * and takes a file per card (rank): it stops on a list of any other length
 * than one, empty included. So deviceProperties holds the first card (or,
 * with none seen, an entry with no name), and otherData.devices all. The
 * events' array and the outermost object were opened by hand (events are
 * written through the cursor): the rest is nested in them by the
 * structured calls. */
static void trailer(struct chrome_writer *w)
{
	struct json_writer *jw = &w->jw;

	JW_PUT(jw, "\n],\"deviceProperties\":");
	jw_array(jw);
	card(w, w->ncards ? 0 : -1);
	jw_end(jw);
	JW_PUT(jw, ",\"otherData\":");
	jw_object(jw);
	jw_key_string(jw, "producer", "spyre-bpftrace");
	jw_key_string(jw, "clock", "BOOTTIME");
	jw_key(jw, "devices");
	jw_array(jw);
	for (int i = 0; i < w->ncards; i++)
		card(w, i);
	jw_end(jw);
	jw_key(jw, "clock_snapshots");
	jw_array(jw);
	for (int i = 0; i < w->nclocks; i++) {
		jw_object(jw);
		jw_key_uint(jw, "boottime_ns", w->clocks[i].boottime);
		jw_key_uint(jw, "monotonic_ns", w->clocks[i].monotonic);
		jw_key_uint(jw, "realtime_ns", w->clocks[i].realtime);
		jw_key_uint(jw, "spread_ns", w->clocks[i].spread_ns);
		jw_end(jw);
	}
	jw_end(jw);
	/* so `merge` can join a profiler's trace to this file alone */
	jw_key(jw, "process_starts");
	task_list(w, false);
	jw_key(jw, "pid_namespaces");
	task_list(w, true);
	jw_end(jw);
	JW_PUT(jw, "}\n");
}

int chrome_writer_flush(struct chrome_writer *w)
{
	return jw_flush(&w->jw);
}

uint64_t chrome_writer_bytes(const struct chrome_writer *w)
{
	return jw_bytes(&w->jw);
}

int chrome_writer_close(struct chrome_writer *w)
{
	int err;

	if (!w)
		return 0;
	trailer(w);
	jw_flush(&w->jw);
	if (fclose(w->f) && !w->jw.error)
		w->jw.error = errno;
	err = -w->jw.error;
	hm_free_values(&w->places);
	hm_free(&w->flows);
	free(w->tasks);
	jw_free(&w->jw);
	free(w);
	return err;
}

static int sink_flush(void *w)
{
	return chrome_writer_flush(w);
}

static uint64_t sink_bytes(const void *w)
{
	return chrome_writer_bytes(w);
}

static int sink_close(void *w)
{
	return chrome_writer_close(w);
}

struct model_sink chrome_writer_sink(struct chrome_writer *w)
{
	return (struct model_sink){
		w, on_track, on_event, on_clock, NULL, on_task, sink_flush, sink_bytes, sink_close
	};
}
