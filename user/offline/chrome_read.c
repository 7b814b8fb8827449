// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offline/chrome_read.h"

#define MAX_FILE (8ull << 30)
/* Epoch microseconds after 2001: an old kineto's absolute REALTIME ts */
#define EPOCH_US_2001 978307200000000ll

static char *read_all(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rbe");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f) {
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (n == cap) {
			char *g;

			cap = cap ? cap * 2 : 1 << 20;
			if (cap > MAX_FILE || !(g = realloc(buf, cap))) {
				snprintf(err, errlen, "'%s' is too big to read (%zu MiB so far)", path, n >> 20);
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = g;
		}
		size_t got = fread(buf + n, 1, cap - n, f);

		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "reading '%s' failed: %s", path, strerror(errno));
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	*len = n;
	return buf;
}

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

bool chrome_event(const struct chrome_trace *t, uint32_t i, struct chrome_event *e)
{
	const struct json_value *o = &t->events->items[i], *v;

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

uint32_t chrome_count(const struct chrome_trace *t)
{
	return t->events ? t->events->n : 0;
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

/* The first event with a ts, for telling an old kineto's absolute times. */
static bool first_ts(const struct chrome_trace *t, int64_t *ns)
{
	struct chrome_event e;

	for (uint32_t i = 0; i < chrome_count(t); i++)
		if (chrome_event(t, i, &e) && e.has_ts && e.ph == 'X') {
			*ns = e.ts_ns;
			return true;
		}
	return false;
}

static bool torch_without_kineto(const struct chrome_trace *t)
{
	struct chrome_event e;

	for (uint32_t i = 0; i < chrome_count(t) && i < 64; i++)
		if (chrome_event(t, i, &e) && !e.pid.is_num && !strcmp(e.pid.str, "CPU functions"))
			return true;
	return false;
}

int chrome_open(struct chrome_trace *t, const char *path, char *err, size_t errlen)
{
	size_t len;
	char *text = read_all(path, &len, err, errlen);

	memset(t, 0, sizeof(*t));
	return text ? chrome_parse(t, text, len, path, err, errlen) : -1;
}

static int classify(struct chrome_trace *t, const char *path, char *err, size_t errlen);

int chrome_parse(struct chrome_trace *t, char *text, size_t len, const char *path, char *err,
		 size_t errlen)
{
	memset(t, 0, sizeof(*t));
	t->text = text;
	t->len = len;
	if (!classify(t, path, err, errlen))
		return 0;
	chrome_close(t);
	return -1;
}

static int classify(struct chrome_trace *t, const char *path, char *err, size_t errlen)
{
	const struct json_value *root, *other, *base;
	int64_t ts;

	if (json_parse(&t->doc, t->text, t->len)) {
		snprintf(err, errlen, "'%s' is not JSON: %s; hint: was it cut short? export it again", path,
			 t->doc.error);
		return -1;
	}
	root = &t->doc.root;
	if (root->type == JSON_ARRAY) {
		t->events = root;
		if (torch_without_kineto(t)) {
			snprintf(err, errlen,
				 "'%s' is from a PyTorch profiler without kineto (pid \"CPU functions\", "
				 "times from the profiler's start): its clock cannot be aligned; hint: "
				 "profile with a torch built with kineto (torch.profiler.kineto_available(), "
				 "e.g. Debian 13's python3-torch)",
				 path);
			return -1;
		}
	} else {
		t->events = json_get(root, "traceEvents");
	}
	if (!t->events || t->events->type != JSON_ARRAY) {
		snprintf(err, errlen, "'%s' is not a Chrome JSON trace (no traceEvents array)", path);
		return -1;
	}
	other = json_get(root, "otherData");
	if (!strcmp(str_of(other, "producer"), "spyre-bpftrace")) {
		t->kind = CHROME_OURS;
		if (read_our_clocks(t, other)) {
			snprintf(err, errlen, "'%s' has no clock snapshots in otherData; hint: convert the "
				 "capture again with this version, or merge the .sbt itself", path);
			return -1;
		}
		return 0;
	}
	t->kind = CHROME_KINETO;
	base = json_get(root, "baseTimeNanoseconds");
	if (base && json_int(base, &t->base_ns))
		return 0;
	if (first_ts(t, &ts) && ts / 1000 > EPOCH_US_2001) {
		t->base_ns = 0; /* an older kineto: ts is REALTIME itself */
		return 0;
	}
	snprintf(err, errlen,
		 "'%s' has no baseTimeNanoseconds and its times are not wall-clock times: it cannot be "
		 "aligned with a capture; hint: export it with torch.profiler's "
		 "export_chrome_trace() from torch 2.x (kineto)",
		 path);
	return -1;
}

void chrome_close(struct chrome_trace *t)
{
	json_free(&t->doc);
	free(t->text);
	memset(t, 0, sizeof(*t));
}
