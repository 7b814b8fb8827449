// SPDX-License-Identifier: GPL-2.0-only
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/hashmap.h"
#include "base/histogram.h"
#include "base/strtab.h"
#include "model/report.h"

#define MAX_FUNCS 256
#define MAX_DEVS 64
#define MAX_ERRS 64
#define MAX_DRV 64

struct track_info {
	enum model_track_kind kind;
	uint64_t parent;
	int engine;
	int dev; /* index in devs, for device tracks */
};

struct engine_stats {
	uint64_t jobs, bytes, busy_ns, busy_since;
	int64_t inflight;
};

struct report {
	struct track_info *tracks; /* by track id: ids are small and dense */
	size_t ntracks;
	struct strtab funcs;
	struct strtab_cache func_cache; /* function ids by name address (model.h) */
	struct histogram *hists[MAX_FUNCS];
	struct {
		char name[64];
		struct engine_stats eng[ENGINE_MAX];
		uint64_t irqs;
		uint64_t by_irq, by_wait; /* its jobs, by what ended them */
	} devs[MAX_DEVS];
	int ndevs;
	struct strtab errs; /* "CMD ERRNO" */
	uint64_t err_counts[MAX_ERRS];
	struct strtab drv; /* "FUNCTION CMD" of driver-level slices */
	struct histogram *drv_hists[MAX_DRV];
	uint64_t last_ts;
};

static struct track_info *info(const struct report *r, uint64_t id)
{
	return id < r->ntracks && r->tracks[id].kind != (enum model_track_kind) - 1 ? &r->tracks[id] : NULL;
}

static void on_track(void *ctx, const struct model_track *t)
{
	struct report *r = ctx;
	struct track_info *i;

	if (t->id >= r->ntracks) {
		size_t n = (t->id + 1) * 2;
		struct track_info *grown = realloc(r->tracks, n * sizeof(*grown));

		if (!grown)
			return;
		for (size_t k = r->ntracks; k < n; k++)
			grown[k] = (struct track_info){ .kind = (enum model_track_kind) - 1, .dev = -1 };
		r->tracks = grown;
		r->ntracks = n;
	}
	i = &r->tracks[t->id];
	if (i->kind == (enum model_track_kind) - 1) {
		i->dev = -1;
		if (t->kind == TRACK_DEVICE && r->ndevs < MAX_DEVS) {
			i->dev = r->ndevs++;
			snprintf(r->devs[i->dev].name, sizeof(r->devs[0].name), "%s", t->name);
		}
	}
	i->kind = t->kind;
	i->parent = t->parent;
	i->engine = t->engine;
	/* counters say their engine by name: "jobs in flight: H2D DMA" */
	if (t->kind == TRACK_COUNTER && !strncmp(t->name, "jobs in flight: ", 16)) {
		static const char *const e[ENGINE_MAX] = { "H2D DMA", "Compute", "D2H DMA" };

		for (int k = 0; k < ENGINE_MAX; k++)
			if (!strcmp(t->name + 16, e[k]))
				i->engine = k;
	}
}

static int device_index(const struct report *r, const struct track_info *i)
{
	const struct track_info *p = i && i->parent ? info(r, i->parent) : NULL;

	return p ? p->dev : -1;
}

static const struct model_arg *arg(const struct model_event *e, const char *name)
{
	for (int i = 0; i < e->nargs; i++)
		if (!strcmp(e->args[i].name, name))
			return &e->args[i];
	return NULL;
}

static void add_duration(struct histogram **h, uint64_t dur)
{
	if (*h || (*h = calloc(1, sizeof(**h))))
		hist_add(*h, dur);
}

static void on_event(void *ctx, const struct model_event *e)
{
	struct report *r = ctx;
	struct track_info *ti = info(r, e->track->id);
	int dev = device_index(r, ti);
	bool added;

	if (e->ts + e->dur > r->last_ts)
		r->last_ts = e->ts + e->dur;
	if (e->kind == EV_COUNTER) {
		if (dev >= 0 && ti && ti->engine >= 0) {
			struct engine_stats *s = &r->devs[dev].eng[ti->engine];

			/* busy while anything is in flight on the engine */
			if (s->inflight <= 0 && e->value > 0)
				s->busy_since = e->ts;
			else if (s->inflight > 0 && e->value <= 0 && e->ts >= s->busy_since)
				s->busy_ns += e->ts - s->busy_since;
			s->inflight = e->value;
		}
		return;
	}
	if (e->kind != EV_SLICE || !e->cat)
		return;
	if (e->cat[0] == 'r' && !strcmp(e->cat, "runtime")) {
		uint64_t id = strtab_id_cached(&r->funcs, &r->func_cache, e->name);

		if (id && id <= MAX_FUNCS)
			add_duration(&r->hists[id - 1], e->dur);
	} else if (e->cat[0] == 'd' && !strcmp(e->cat, "driver")) {
		const struct model_arg *cmd = arg(e, "cmd");
		char key[96];
		uint64_t id;

		snprintf(key, sizeof(key), "%s%s%s", e->name, cmd ? " " : "", cmd ? cmd->s : "");
		id = strtab_id(&r->drv, key, &added);
		if (id && id <= MAX_DRV)
			add_duration(&r->drv_hists[id - 1], e->dur);
	} else if (dev >= 0 && ti && ti->engine >= 0 && (!strcmp(e->cat, "gpu_memcpy") || !strcmp(e->cat, "kernel"))) {
		const struct model_arg *b = arg(e, "bytes");
		struct engine_stats *s = &r->devs[dev].eng[ti->engine];

		const struct model_arg *how = arg(e, "completed_by");

		s->jobs++;
		s->bytes += b ? b->u : 0;
		if (how && how->type == ARG_STR && !strcmp(how->s, "interrupt"))
			r->devs[dev].by_irq++;
		else
			r->devs[dev].by_wait++;
	} else if (dev >= 0 && !strcmp(e->cat, "irq")) {
		r->devs[dev].irqs++;
	} else if (e->cat[0] == 'i' && !strcmp(e->cat, "ioctl")) {
		const struct model_arg *err = arg(e, "error");
		char key[96];
		uint64_t id;

		if (!err)
			return;
		snprintf(key, sizeof(key), "%s %s", e->name, err->s);
		id = strtab_id(&r->errs, key, &added);
		if (id && id <= MAX_ERRS)
			r->err_counts[id - 1]++;
	}
}

struct report *report_new(void)
{
	return calloc(1, sizeof(struct report));
}

struct model_sink report_sink(struct report *r)
{
	return (struct model_sink){ r, on_track, on_event, NULL, NULL };
}

static struct histogram *const *sorting;

static int by_total(const void *a, const void *b)
{
	const struct histogram *x = sorting[*(const int *)a];
	const struct histogram *y = sorting[*(const int *)b];
	uint64_t sx = x ? x->sum : 0, sy = y ? y->sum : 0;

	return sx < sy ? 1 : sx > sy ? -1 : 0;
}

/* One table of durations by name, the most time first, as perf report does. */
static void print_durations(FILE *out, const char *title, const struct strtab *names, struct histogram *const *hists,
			    int max)
{
	int order[MAX_FUNCS], n = (int)(names->n < (uint64_t)max ? names->n : (uint64_t)max);

	if (!n)
		return;
	fprintf(out, "\n# %-54s %7s %10s %9s %9s %9s %9s\n", title, "calls", "total ms", "mean us", "p50 us", "p99 us",
		"max us");
	for (int i = 0; i < n; i++)
		order[i] = i;
	sorting = hists;
	qsort(order, (size_t)n, sizeof(order[0]), by_total);
	for (int k = 0; k < n; k++) {
		const struct histogram *h = hists[order[k]];

		if (!h)
			continue;
		fprintf(out, "  %-54.54s %7llu %10.3f %9.1f %9.1f %9.1f %9.1f\n",
			strtab_str(names, (uint64_t)order[k] + 1), (unsigned long long)h->count, (double)h->sum / 1e6,
			(double)h->sum / 1e3 / (double)h->count, (double)hist_quantile(h, 0.5) / 1e3,
			(double)hist_quantile(h, 0.99) / 1e3, (double)h->max / 1e3);
	}
}

void report_print(FILE *out, const struct report *r, const struct correlate_stats *st)
{
	double span = st->last_ts > st->first_ts ? (double)(st->last_ts - st->first_ts) / 1e9 : 0;
	static const char *const engines[ENGINE_MAX] = { "H2D DMA", "Compute", "D2H DMA" };

	fprintf(out,
		"\n# %llu records over %.3f s: %llu runtime calls, %llu ioctls, %llu device jobs, "
		"%llu interrupts, %llu lost\n",
		(unsigned long long)st->records, span, (unsigned long long)st->calls, (unsigned long long)st->ioctls,
		(unsigned long long)st->jobs, (unsigned long long)st->irqs, (unsigned long long)st->lost);
	if (st->driver_calls)
		fprintf(out, "# %llu vfio driver calls seen at driver level\n", (unsigned long long)st->driver_calls);
	print_durations(out, "runtime function", &r->funcs, r->hists, MAX_FUNCS);
	print_durations(out, "vfio function (driver level)", &r->drv, r->drv_hists, MAX_DRV);
	for (int d = 0; d < r->ndevs; d++) {
		bool any = r->devs[d].irqs;

		for (int e = 0; e < ENGINE_MAX; e++)
			any |= r->devs[d].eng[e].jobs > 0;
		if (!any)
			continue;
		fprintf(out, "\n# %-54s %7s %10s %14s %9s\n", r->devs[d].name, "jobs", "busy %", "bytes", "GB/s");
		for (int e = 0; e < ENGINE_MAX; e++) {
			const struct engine_stats *s = &r->devs[d].eng[e];
			uint64_t busy = s->busy_ns;

			if (!s->jobs)
				continue;
			if (s->inflight > 0 && r->last_ts > s->busy_since)
				busy += r->last_ts - s->busy_since; /* still busy at the end */
			fprintf(out, "  %-54s %7llu %10.1f %14llu %9.3f\n", engines[e], (unsigned long long)s->jobs,
				span > 0 ? 100.0 * (double)busy / 1e9 / span : 0.0, (unsigned long long)s->bytes,
				busy ? (double)s->bytes / (double)busy : 0.0);
		}
		if (r->devs[d].irqs)
			fprintf(out, "  %-54s %7llu\n", "interrupts", (unsigned long long)r->devs[d].irqs);
		/* a card: were its jobs seen ending by its interrupts? */
		if (!strncmp(r->devs[d].name, "PCI ", 4) && r->devs[d].by_irq + r->devs[d].by_wait)
			fprintf(out, "  %-54s %7llu\n  %-54s %7llu\n", "jobs ended by its interrupt",
				(unsigned long long)r->devs[d].by_irq, "jobs ended by a wait (no interrupt seen)",
				(unsigned long long)r->devs[d].by_wait);
	}
	if (r->errs.n)
		fprintf(out, "\n# %-54s %7s\n", "ioctl errors", "count");
	for (uint64_t i = 0; i < r->errs.n && i < MAX_ERRS; i++)
		fprintf(out, "  %-54s %7llu\n", strtab_str(&r->errs, i + 1), (unsigned long long)r->err_counts[i]);
	if (st->implausible)
		fprintf(out,
			"\n# WARNING: %llu records dropped: they could not be true (ending before "
			"they begin, or an hour away from the rest); a damaged capture?\n",
			(unsigned long long)st->implausible);
	if (st->unfinished_calls || st->unfinished_jobs || st->unpaired_returns || st->unmatched_completions)
		fprintf(out,
			"\n# unmatched: %llu calls and %llu jobs unfinished at the end, %llu returns "
			"without entry, %llu interrupts with no job in flight\n",
			(unsigned long long)st->unfinished_calls, (unsigned long long)st->unfinished_jobs,
			(unsigned long long)st->unpaired_returns, (unsigned long long)st->unmatched_completions);
	if (st->streams_on_cards)
		fprintf(out,
			"\n# cards: streams put on a card: %llu (by the interrupt that woke their wait: "
			"%llu; by a launch's buffer, DMA-mapped in one card's container: %llu; by "
			"elimination, the process's only card that raised interrupts meanwhile: %llu); "
			"interrupts held until their job's card was known: %llu; jobs on no card: %llu\n",
			(unsigned long long)st->streams_on_cards,
			(unsigned long long)(st->streams_on_cards - st->streams_by_mapping -
					     st->streams_by_elimination),
			(unsigned long long)st->streams_by_mapping, (unsigned long long)st->streams_by_elimination,
			(unsigned long long)st->irqs_held, (unsigned long long)st->jobs_without_card);
	if (st->lost)
		fprintf(out,
			"\n# WARNING: %llu records lost; hint: if the ring buffer filled, "
			"--buffer-size 64M\n",
			(unsigned long long)st->lost);
}

/* ---- the view the structured forms read ------------------------------------------- */

static void sorted(const struct report *r, bool driver, int *order, int *n)
{
	const struct strtab *names = driver ? &r->drv : &r->funcs;
	int max = driver ? MAX_DRV : MAX_FUNCS;

	*n = (int)(names->n < (uint64_t)max ? names->n : (uint64_t)max);
	for (int i = 0; i < *n; i++)
		order[i] = i;
	sorting = driver ? r->drv_hists : r->hists;
	qsort(order, (size_t)*n, sizeof(order[0]), by_total);
}

bool report_function(const struct report *r, bool driver, int i, const char **name, const struct histogram **h)
{
	int order[MAX_FUNCS], n;

	sorted(r, driver, order, &n);
	for (int k = 0, seen = 0; k < n; k++) {
		const struct histogram *x = (driver ? r->drv_hists : r->hists)[order[k]];

		if (!x || seen++ != i)
			continue;
		*name = strtab_str(driver ? &r->drv : &r->funcs, (uint64_t)order[k] + 1);
		*h = x;
		return true;
	}
	return false;
}

bool report_engine(const struct report *r, int i, struct report_engine *e)
{
	static const char *const engines[ENGINE_MAX] = { "H2D DMA", "Compute", "D2H DMA" };

	for (int d = 0, seen = 0; d < r->ndevs; d++)
		for (int k = 0; k < ENGINE_MAX; k++) {
			const struct engine_stats *s = &r->devs[d].eng[k];

			if (!s->jobs || seen++ != i)
				continue;
			*e = (struct report_engine){ r->devs[d].name, engines[k], s->jobs, s->bytes, s->busy_ns };
			if (s->inflight > 0 && r->last_ts > s->busy_since)
				e->busy_ns += r->last_ts - s->busy_since; /* still busy at the end */
			return true;
		}
	return false;
}

bool report_device(const struct report *r, int i, struct report_device *d)
{
	for (int k = 0, seen = 0; k < r->ndevs; k++) {
		bool any = r->devs[k].irqs;

		for (int e = 0; e < ENGINE_MAX; e++)
			any |= r->devs[k].eng[e].jobs > 0;
		if (!any || seen++ != i)
			continue;
		*d = (struct report_device){ r->devs[k].name, r->devs[k].irqs, r->devs[k].by_irq, r->devs[k].by_wait };
		return true;
	}
	return false;
}

bool report_ioctl_error(const struct report *r, int i, const char **cmd_errno, uint64_t *count)
{
	if (i < 0 || (uint64_t)i >= r->errs.n || i >= MAX_ERRS)
		return false;
	*cmd_errno = strtab_str(&r->errs, (uint64_t)i + 1);
	*count = r->err_counts[i];
	return true;
}

void report_free(struct report *r)
{
	if (!r)
		return;
	for (int i = 0; i < MAX_FUNCS; i++)
		free(r->hists[i]);
	for (int i = 0; i < MAX_DRV; i++)
		free(r->drv_hists[i]);
	strtab_free(&r->drv);
	free(r->tracks);
	strtab_free(&r->funcs);
	strtab_free(&r->errs);
	free(r);
}
