// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/vec.h"
#include "offline/tracestore.h"

void store_init(struct trace_store *s)
{
	memset(s, 0, sizeof(*s));
}

void store_free(struct trace_store *s)
{
	free(s->tracks);
	free(s->ev);
	free(s->args);
	free(s->flows);
	free(s->links);
	strtab_free(&s->strs);
	memset(s, 0, sizeof(*s));
}

/* Room for more elements after n in *vec; false (and the store's error
 * set) when out of memory. */
static bool room(struct trace_store *s, void **vec, size_t *cap, size_t n, size_t more, size_t sz)
{
	if (!vec_reserve(vec, cap, n + more, sz))
		return true;
	s->error = ENOMEM;
	return false;
}

const char *store_str(struct trace_store *s, const char *text)
{
	bool added;
	uint64_t id;

	if (!text)
		return NULL;
	id = strtab_id(&s->strs, text, &added);
	if (!id) {
		s->error = ENOMEM;
		return "";
	}
	return strtab_str(&s->strs, id);
}

uint32_t store_track(struct trace_store *s, const struct model_track *t)
{
	struct model_track *n;

	if (!room(s, (void **)&s->tracks, &s->tracks_cap, s->ntracks, 1, sizeof(*t)))
		return 0;
	n = &s->tracks[s->ntracks];
	*n = *t;
	n->id = s->ntracks + 1;
	n->name = store_str(s, t->name ? t->name : "");
	n->announced = false;
	return (uint32_t)s->ntracks++;
}

void store_event(struct trace_store *s, uint32_t track, const struct model_event *e, uint8_t from)
{
	struct store_event *se;
	int nf = e->nflows + e->nterm;

	if (!room(s, (void **)&s->ev, &s->ev_cap, s->nev, 1, sizeof(*se)) ||
	    !room(s, (void **)&s->args, &s->args_cap, s->nargs, (size_t)e->nargs, sizeof(*s->args)) ||
	    !room(s, (void **)&s->flows, &s->flows_cap, s->nflows, (size_t)nf, sizeof(*s->flows)))
		return;
	se = &s->ev[s->nev++];
	memset(se, 0, sizeof(*se));
	se->ts = e->ts;
	se->dur = e->dur;
	se->name = store_str(s, e->name);
	se->cat = store_str(s, e->cat);
	se->value = e->value;
	se->ext_id = STORE_NO_EXT_ID;
	se->track = track;
	se->kind = (uint8_t)e->kind;
	se->depth = e->depth;
	se->from = from;
	se->args = (uint32_t)s->nargs;
	se->nargs = (uint8_t)e->nargs;
	for (int i = 0; i < e->nargs; i++) {
		struct model_arg a = e->args[i];

		a.name = store_str(s, a.name);
		if (a.type == ARG_STR)
			a.s = store_str(s, a.s);
		s->args[s->nargs++] = a;
	}
	se->flows = (uint32_t)s->nflows;
	se->nflows = (uint8_t)e->nflows;
	se->nterm = (uint8_t)e->nterm;
	for (int i = 0; i < e->nflows; i++)
		s->flows[s->nflows++] = e->flows[i];
	for (int i = 0; i < e->nterm; i++)
		s->flows[s->nflows++] = e->term_flows[i];
}

void store_link(struct trace_store *s, uint32_t from, uint32_t to, uint64_t id)
{
	if (!room(s, (void **)&s->links, &s->links_cap, s->nlinks, 1, sizeof(*s->links)))
		return;
	s->links[s->nlinks++] = (struct store_link){ from, to, id };
}

/* Flow ids of the links, grouped by event: ids[at[i] .. at[i + 1]) are event i's. */
struct by_event {
	uint32_t *at;
	uint64_t *ids;
};

static int group_links(const struct trace_store *s, bool by_from, struct by_event *g)
{
	g->at = calloc(s->nev + 1, sizeof(*g->at));
	g->ids = malloc((s->nlinks ? s->nlinks : 1) * sizeof(*g->ids));
	if (!g->at || !g->ids)
		return -ENOMEM;
	for (size_t i = 0; i < s->nlinks; i++)
		g->at[(by_from ? s->links[i].from : s->links[i].to) + 1]++;
	for (size_t i = 0; i < s->nev; i++)
		g->at[i + 1] += g->at[i];
	uint32_t *fill = calloc(s->nev + 1, sizeof(*fill));

	if (!fill)
		return -ENOMEM;
	for (size_t i = 0; i < s->nlinks; i++) {
		uint32_t e = by_from ? s->links[i].from : s->links[i].to;

		g->ids[g->at[e] + fill[e]++] = s->links[i].id;
	}
	free(fill);
	return 0;
}

void store_replay(struct trace_store *s, const struct model_sink *sinks, int nsinks)
{
	struct by_event out = { 0 }, in = { 0 };

	if (group_links(s, true, &out) || group_links(s, false, &in))
		s->error = ENOMEM;
	for (int k = 0; k < nsinks; k++)
		for (int c = 0; c < s->nclocks && sinks[k].clock; c++)
			sinks[k].clock(sinks[k].ctx, &s->clocks[c]);
	for (size_t i = 0; i < s->ntracks; i++)
		for (int k = 0; k < nsinks; k++)
			sinks[k].track(sinks[k].ctx, &s->tracks[i]);
	for (size_t i = 0; i < s->nev; i++) {
		const struct store_event *se = &s->ev[i];
		struct model_event e;

		memset(&e, 0, sizeof(e));
		e.kind = (enum model_event_kind)se->kind;
		e.track = &s->tracks[se->track];
		e.ts = se->ts;
		e.dur = se->dur;
		e.name = se->name;
		e.cat = se->cat;
		e.value = se->value;
		e.depth = se->depth;
		e.nargs = se->nargs;
		if (se->nargs) /* the pools are NULL until a first entry */
			memcpy(e.args, s->args + se->args, (size_t)se->nargs * sizeof(e.args[0]));
		if (se->ext_id != STORE_NO_EXT_ID && e.nargs < MODEL_MAX_ARGS)
			e.args[e.nargs++] = (struct model_arg){ .name = "External id", .type = ARG_INT,
								.i = se->ext_id };
		e.nflows = se->nflows;
		e.nterm = se->nterm;
		if (se->nflows)
			memcpy(e.flows, s->flows + se->flows, (size_t)se->nflows * sizeof(e.flows[0]));
		if (se->nterm)
			memcpy(e.term_flows, s->flows + se->flows + se->nflows,
			       (size_t)se->nterm * sizeof(e.term_flows[0]));
		if (out.at && in.at) {
			e.xflows = out.ids + out.at[i];
			e.nxflows = (int)(out.at[i + 1] - out.at[i]);
			e.xterm = in.ids + in.at[i];
			e.nxterm = (int)(in.at[i + 1] - in.at[i]);
		} else {
			e.nxflows = e.nxterm = 0;
		}
		for (int k = 0; k < nsinks; k++)
			sinks[k].event(sinks[k].ctx, &e);
	}
	free(out.at);
	free(out.ids);
	free(in.at);
	free(in.ids);
}
