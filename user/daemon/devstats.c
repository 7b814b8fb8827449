// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/hashmap.h"
#include "base/vec.h"
#include "capture/capture.h"
#include "daemon/devstats.h"
#include "model/correlate.h"

const double devstats_le[DEVSTATS_LE] = { 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10 };
const char *const devstats_engine_names[DEVSTATS_ENGINES] = { "h2d", "compute", "d2h" };

struct job_span {
	int card, engine;
	uint64_t start, end;
};

struct collect {
	struct devstats *s;
	struct hashmap devices; /* device track id -> card index + 1 */
	struct job_span *spans;
	size_t n, cap;
	int error;
};

/* The card index of a label, added when new; -1 when there is no room. */
static int card_of(struct devstats *s, const char *label)
{
	for (int i = 0; i < s->ncards; i++)
		if (!strcmp(s->cards[i].card, label))
			return i;
	if (s->ncards == DEVSTATS_CARDS)
		return -1;
	memset(&s->cards[s->ncards], 0, sizeof(s->cards[0]));
	snprintf(s->cards[s->ncards].card, sizeof(s->cards[0].card), "%s", label);
	return s->ncards++;
}

static void on_track(void *ctx, const struct model_track *t)
{
	struct collect *c = ctx;
	const char *label;
	int k;

	if (t->kind != TRACK_DEVICE || hm_get(&c->devices, t->id))
		return;
	/* a card's device track is "PCI <address>"; a process's own, whose
	 * card is not known, "Spyre device (pid N)" */
	label = t->name && !strncmp(t->name, "PCI ", 4) ? t->name + 4 : DEVSTATS_UNATTRIBUTED;
	k = card_of(c->s, label);
	if (k >= 0 && hm_put(&c->devices, t->id, (void *)(uintptr_t)(k + 1)))
		c->error = -ENOMEM;
}

static void on_event(void *ctx, const struct model_event *e)
{
	struct collect *c = ctx;
	uintptr_t k;

	/* a job: a slice on one of a device's engine lanes */
	if (e->kind != EV_SLICE || !e->track || e->track->kind != TRACK_LANE || e->track->engine < 0 ||
	    e->track->engine >= DEVSTATS_ENGINES || !(k = (uintptr_t)hm_get(&c->devices, e->track->parent)))
		return;
	if (vec_reserve((void **)&c->spans, &c->cap, c->n + 1, sizeof(*c->spans))) {
		c->error = -ENOMEM;
		return;
	}
	c->spans[c->n++] = (struct job_span){ (int)k - 1, e->track->engine, e->ts, e->ts + e->dur };
}

static int by_card_engine_start(const void *a, const void *b)
{
	const struct job_span *x = a, *y = b;

	if (x->card != y->card)
		return x->card < y->card ? -1 : 1;
	if (x->engine != y->engine)
		return x->engine < y->engine ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* Each job into its histogram; busy time the union of the engine's jobs. */
static void count(struct devstats *s, struct job_span *v, size_t n)
{
	qsort(v, n, sizeof(*v), by_card_engine_start);
	for (size_t i = 0; i < n;) {
		struct devstats_engine *g = &s->cards[v[i].card].eng[v[i].engine];
		uint64_t from = v[i].start, to = v[i].end;
		size_t j = i;

		for (; j < n && v[j].card == v[i].card && v[j].engine == v[i].engine; j++) {
			double d = (double)(v[j].end - v[j].start) / 1e9;
			int b = 0;

			while (b < DEVSTATS_LE && d > devstats_le[b])
				b++;
			g->bucket[b]++;
			g->jobs++;
			g->sum_s += d;
			if (v[j].start > to) { /* a gap: the run so far was busy */
				g->busy_s += (double)(to - from) / 1e9;
				from = v[j].start;
			}
			if (v[j].end > to)
				to = v[j].end;
		}
		g->busy_s += (double)(to - from) / 1e9;
		i = j;
	}
}

int devstats_add_window(struct devstats *s, const uint8_t *recs, size_t len, double window_s)
{
	struct devstats before = *s;
	struct collect c = { .s = s };
	struct model_sink sink = { .ctx = &c, .track = on_track, .event = on_event };
	struct correlator *corr = correlator_new(&sink, 1);

	if (!corr)
		return -ENOMEM;
	for (size_t off = 0; off + sizeof(struct sbt_hdr) <= len;) {
		const struct sbt_hdr *h = (const void *)(recs + off);

		if (correlator_add(corr, h))
			c.error = -ENOMEM;
		off += sbt_record_len(h);
	}
	correlator_finish(corr);
	correlator_free(corr);
	if (!c.error)
		count(s, c.spans, c.n);
	free(c.spans);
	hm_free(&c.devices);
	if (c.error) {
		*s = before;
		return c.error;
	}
	s->window_s += window_s;
	s->windows++;
	return 0;
}
