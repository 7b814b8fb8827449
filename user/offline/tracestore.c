// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/spill.h"
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
	if (s->args)
		fclose(s->args);
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

uint32_t store_str_id(struct trace_store *s, const char *text)
{
	bool added;
	uint64_t id;

	if (!text)
		return 0;
	id = strtab_id(&s->strs, text, &added);
	if (!id || id > UINT32_MAX) {
		s->error = ENOMEM;
		return 0;
	}
	return (uint32_t)id;
}

const char *store_str(struct trace_store *s, const char *text)
{
	uint32_t id;

	if (!text)
		return NULL;
	id = store_str_id(s, text);
	return id ? strtab_str(&s->strs, id) : "";
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

/* An arg on the file: its name (interned: the address stays), its type,
 * and its value, a string's bytes after their length. */
struct arg_head {
	const char *name;
	uint32_t type, len;
	uint64_t u;
};

#define NULL_STR UINT32_MAX

static void write_args(struct trace_store *s, const struct model_event *e)
{
	if (!e->nargs)
		return;
	if (!s->args && !(s->args = spill_tmpfile())) {
		s->error = errno;
		return;
	}
	for (int i = 0; i < e->nargs; i++) {
		const struct model_arg *a = &e->args[i];
		struct arg_head h = { store_str(s, a->name), a->type, 0, a->u };

		if (a->type == ARG_STR)
			h.len = a->s ? (uint32_t)strlen(a->s) : NULL_STR;
		if (fwrite(&h, sizeof(h), 1, s->args) != 1 ||
		    (a->type == ARG_STR && a->s && h.len && fwrite(a->s, h.len, 1, s->args) != 1)) {
			s->error = errno ? errno : EIO;
			return;
		}
	}
}

void store_event(struct trace_store *s, uint32_t track, const struct model_event *e, uint8_t from)
{
	struct store_event *se;
	int nf = e->nflows + e->nterm;

	if (!room(s, (void **)&s->ev, &s->ev_cap, s->nev, 1, sizeof(*se)) ||
	    !room(s, (void **)&s->flows, &s->flows_cap, s->nflows, (size_t)nf, sizeof(*s->flows)))
		return;
	se = &s->ev[s->nev++];
	memset(se, 0, sizeof(*se));
	se->ts = e->ts;
	se->dur = e->dur;
	se->name = store_str_id(s, e->name);
	se->cat = store_str_id(s, e->cat);
	se->value = e->value;
	se->ext_id = se->own_ext = STORE_NO_EXT_ID;
	se->track = track;
	se->kind = (uint8_t)e->kind;
	se->depth = e->depth;
	se->from = from;
	se->nargs = (uint8_t)e->nargs;
	for (int i = 0; i < e->nargs; i++)
		if (e->args[i].type == ARG_INT && !strcmp(e->args[i].name, "External id")) {
			se->own_ext = e->args[i].i;
			break;
		}
	write_args(s, e);
	se->flows = (uint32_t)s->nflows;
	se->nflows = (uint8_t)e->nflows;
	se->nterm = (uint8_t)e->nterm;
	for (int i = 0; i < e->nflows; i++)
		s->flows[s->nflows++] = e->flows[i];
	for (int i = 0; i < e->nterm; i++)
		s->flows[s->nflows++] = e->term_flows[i];
}

/* An event's args back from the file, strings into *buf (grown as
 * needed). false when the file cannot give them. */
static bool read_args(struct trace_store *s, struct model_event *e, int nargs, char **buf, size_t *cap)
{
	struct arg_head h;
	size_t at[MODEL_MAX_ARGS], used = 0;

	if (!s->args)
		return false;
	/* a string's bytes follow its head: heads and strings interleave */
	for (int i = 0; i < nargs; i++) {
		if (fread(&h, sizeof(h), 1, s->args) != 1)
			return false;
		e->args[i] = (struct model_arg){ .name = h.name, .type = (enum model_arg_type)h.type, .u = h.u };
		at[i] = SIZE_MAX;
		if (h.type != ARG_STR || h.len == NULL_STR)
			continue;
		if (used + h.len + 1 > *cap) {
			size_t c = used + h.len + 1 > 2 * *cap ? used + h.len + 1 : 2 * *cap;
			char *g = realloc(*buf, c);

			if (!g)
				return false;
			*buf = g;
			*cap = c;
		}
		if (h.len && fread(*buf + used, h.len, 1, s->args) != 1)
			return false;
		(*buf)[used + h.len] = 0;
		at[i] = used;
		used += h.len + 1;
	}
	/* pointers once the buffer has stopped moving */
	for (int i = 0; i < nargs; i++)
		if (e->args[i].type == ARG_STR)
			e->args[i].s = at[i] == SIZE_MAX ? NULL : *buf + at[i];
	return true;
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
	char *strs = NULL;
	size_t strs_cap = 0;

	if (group_links(s, true, &out) || group_links(s, false, &in))
		s->error = ENOMEM;
	if (s->args && (fflush(s->args) || fseek(s->args, 0, SEEK_SET)))
		s->error = errno;
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
		e.name = store_text(s, se->name);
		e.cat = store_text(s, se->cat);
		e.value = se->value;
		e.depth = se->depth;
		e.nargs = se->nargs;
		if (se->nargs && !read_args(s, &e, se->nargs, &strs, &strs_cap)) {
			s->error = s->error ? s->error : EIO;
			e.nargs = 0;
		}
		if (se->ext_id != STORE_NO_EXT_ID && e.nargs < MODEL_MAX_ARGS)
			e.args[e.nargs++] =
				(struct model_arg){ .name = "External id", .type = ARG_INT, .i = se->ext_id };
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
	free(strs);
	free(out.at);
	free(out.ids);
	free(in.at);
	free(in.ids);
}
