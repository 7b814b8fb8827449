// SPDX-License-Identifier: GPL-2.0-only
#include <inttypes.h>

#include "model_text.h"

static const char *const kinds[] = { "process", "thread", "device", "lane", "counter", "global", "group" };

static void on_track(void *ctx, const struct model_track *t)
{
	fprintf(ctx, "track %" PRIu64 " %s parent=%" PRIu64 " name=\"%s\"", t->id, kinds[t->kind],
		t->parent, t->name);
	if (t->kind == TRACK_PROCESS || t->kind == TRACK_THREAD)
		fprintf(ctx, " pid=%u tid=%u", t->pid, t->tid);
	if (t->kind == TRACK_COUNTER)
		fprintf(ctx, " unit=%d", t->unit);
	fprintf(ctx, " rank=%d\n", t->rank);
}

static void on_event(void *ctx, const struct model_event *e)
{
	FILE *f = ctx;

	if (e->kind == EV_COUNTER) {
		fprintf(f, "  counter %" PRIu64 " t=%" PRIu64 " %s=%" PRId64 "\n", e->track->id, e->ts,
			e->name, e->value);
		return;
	}
	fprintf(f, "  %s %" PRIu64 " t=%" PRIu64, e->kind == EV_SLICE ? "slice" : "instant",
		e->track->id, e->ts);
	if (e->kind == EV_SLICE)
		fprintf(f, "+%" PRIu64, e->dur);
	fprintf(f, " \"%s\" [%s]", e->name, e->cat ? e->cat : "");
	for (int i = 0; i < e->nargs; i++) {
		const struct model_arg *a = &e->args[i];

		switch (a->type) {
		case ARG_UINT: fprintf(f, " %s=%" PRIu64, a->name, a->u); break;
		case ARG_INT: fprintf(f, " %s=%" PRId64, a->name, a->i); break;
		case ARG_HEX: fprintf(f, " %s=0x%" PRIx64, a->name, a->u); break;
		case ARG_STR: fprintf(f, " %s=%s", a->name, a->s); break;
		}
	}
	for (int i = 0; i < e->nflows; i++)
		fprintf(f, " flow>%" PRIu64, e->flows[i]);
	for (int i = 0; i < e->nterm; i++)
		fprintf(f, " flow|%" PRIu64, e->term_flows[i]);
	fputc('\n', f);
}

static void on_clock(void *ctx, const struct sbt_meta_clock *c)
{
	fprintf(ctx, "clock boottime=%" PRIu64 "\n", (uint64_t)c->boottime);
}

static void on_lost(void *ctx, uint64_t ts, uint64_t count)
{
	fprintf(ctx, "lost t=%" PRIu64 " count=%" PRIu64 "\n", ts, count);
}

struct model_sink model_text_sink(FILE *out)
{
	return (struct model_sink){ out, on_track, on_event, on_clock, on_lost };
}
