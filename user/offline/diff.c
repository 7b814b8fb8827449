// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace diff BEFORE AFTER` (captures, or reports as JSON): two
 * runs compared for a
 * review, per runtime function (calls, total, p50, p99) and per card
 * engine (jobs, busy %), each change said with whether it is beyond the
 * run-to-run noise. Noise is judged from the per-call distributions (the
 * report's latency histograms): Mann-Whitney's U test, p < 0.001, and a
 * move of the median of at least --min-change (25% by default) apart from
 * the whole run's shift (the median of every function's move): two runs
 * of one workload on a busy VM differ by 10-20% in the median of a
 * microsecond call, by half in its p99, and by a third in every call
 * when the machine was busier in one of them; the test alone, which sees
 * a run's calls and not another run's, would call that a change.
 * --fail-if 'p99>+10%' turns a change beyond noise in that direction into
 * exit 3, for CI.
 */
#include <argp.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/histogram.h"
#include "base/json.h"
#include "base/json_write.h"
#include "base/log.h"
#include "commands.h"
#include "model/output.h"

#define Z_BEYOND 3.29 /* two-sided p < 0.001 */
#define MIN_MOVE_PCT 25.0 /* --min-change's default */
#define MAX_RULES 8
#define MAX_NAMES 512

enum metric { M_CALLS, M_TOTAL, M_P50, M_P99, M_N };
static const char *const metric_names[M_N] = { "calls", "total", "p50", "p99" };

struct rule {
	enum metric m;
	double pct; /* +10: grew by more than 10%; -10: shrank by more */
	const char *text;
};

struct diff_opts {
	const char *in[2];
	int nin;
	bool json;
	struct rule rules[MAX_RULES];
	int nrules;
	double min_move_pct;
};

#define MAX_ENGINES 64

/* One run as diff compares it, read from a capture (through the report)
 * or from a report's JSON (--format json): its functions' latency
 * histograms and its engines' jobs and busy %. */
struct run {
	int nfn, neng;
	const char *fn_name[MAX_NAMES];
	const struct histogram *fn[MAX_NAMES];
	char eng_key[MAX_ENGINES][96];
	double eng_jobs[MAX_ENGINES], eng_busy[MAX_ENGINES];
	/* what holds the names and histograms */
	struct output out;
	bool out_open;
	struct json_doc doc;
	char *text;
	struct histogram *owned;
};

/* p99>+10% or total<-5%: the metric, its direction and bound */
static int parse_rule(const char *s, struct rule *r)
{
	char name[16], op;
	double pct;
	int n = 0;

	if (sscanf(s, "%15[a-z0-9]%c%lf%%%n", name, &op, &pct, &n) != 3 || s[n] || (op != '>' && op != '<'))
		return -1;
	for (int m = 0; m < M_N; m++)
		if (!strcmp(name, metric_names[m])) {
			r->m = (enum metric)m;
			r->pct = op == '>' ? fabs(pct) : -fabs(pct);
			r->text = s;
			return 0;
		}
	return -1;
}

static error_t diff_parse(int key, char *arg, struct argp_state *state)
{
	struct diff_opts *o = state->input;

	switch (key) {
	case 'f':
		if (!strcmp(arg, "json"))
			o->json = true;
		else if (strcmp(arg, "text"))
			argp_error(state, "unknown --format '%s'; hint: text or json", arg);
		break;
	case 'F':
		if (o->nrules == MAX_RULES)
			argp_error(state, "at most %d --fail-if", MAX_RULES);
		if (parse_rule(arg, &o->rules[o->nrules++]))
			argp_error(state,
				   "invalid --fail-if '%s'; hint: p99>+10%% (calls, total, p50 or p99; > grows, < "
				   "shrinks)",
				   arg);
		break;
	case 'm': {
		char *end;

		o->min_move_pct = strtod(arg, &end);
		if (end == arg || (*end && strcmp(end, "%")) || o->min_move_pct < 0 || o->min_move_pct > 1000)
			argp_error(state, "invalid --min-change '%s'; hint: a percentage, e.g. 25", arg);
		break;
	}
	case ARGP_KEY_ARG:
		if (o->nin == 2)
			argp_error(state, "two runs: BEFORE and AFTER");
		o->in[o->nin++] = arg;
		break;
	case ARGP_KEY_END:
		if (o->nin != 2)
			argp_error(state, "two runs needed; hint: spyre-bpftrace diff before.sbt after.sbt");
		break;
	default: return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* An engine's jobs and busy % into run, keyed by the card's name without
 * a process's pid (a mock card is named by its process, another one each
 * run) and the engine. */
static void add_engine(struct run *r, const char *device, const char *engine, double jobs, double busy)
{
	const char *pid = strstr(device, " (pid ");
	char key[96];
	int j = 0;

	snprintf(key, sizeof(key), "%.*s/%s", pid ? (int)(pid - device) : (int)strlen(device), device, engine);
	while (j < r->neng && strcmp(r->eng_key[j], key))
		j++;
	if (j == r->neng) {
		if (r->neng == MAX_ENGINES)
			return;
		snprintf(r->eng_key[r->neng++], sizeof(r->eng_key[0]), "%s", key);
	}
	r->eng_jobs[j] += jobs;
	r->eng_busy[j] += busy;
}

/* A capture through the report, as `report` reads it. */
static int from_capture(struct run *r, const char *path)
{
	const struct correlate_stats *st;
	const struct histogram *h;
	struct report_engine e;
	const char *name;
	char err[256];
	double span;

	if (output_open(&r->out, NULL, FMT_NONE, true, err, sizeof(err))) {
		sbt_err("%s: %s", path, err);
		return -1;
	}
	r->out_open = true;
	if (capture_each(path, output_feed, &r->out, NULL) < 0)
		return -1;
	output_close(&r->out);
	st = correlator_stats(r->out.corr);
	span = st->last_ts > st->first_ts ? (double)(st->last_ts - st->first_ts) / 1e9 : 0;
	for (int i = 0; r->nfn < MAX_NAMES && report_function(r->out.rep, false, i, &name, &h); i++) {
		r->fn_name[r->nfn] = name;
		r->fn[r->nfn++] = h;
	}
	for (int i = 0; report_engine(r->out.rep, i, &e); i++)
		add_engine(r, e.device, e.engine, (double)e.jobs,
			   span > 0 ? 100.0 * (double)e.busy_ns / 1e9 / span : 0);
	return 0;
}

static uint64_t member_u64(const struct json_value *o, const char *key)
{
	int64_t v = 0;

	return json_int(json_get(o, key), &v) && v > 0 ? (uint64_t)v : 0;
}

/* A report's JSON (report --format json): its histograms read back. */
static int from_json(struct run *r, const char *path)
{
	const struct json_value *schema, *fns, *engs;
	size_t len = 0;
	FILE *f = fopen(path, "r");

	if (f) {
		r->text = NULL;
		if (getdelim(&r->text, &len, '\0', f) < 0) {
			free(r->text);
			r->text = NULL;
		}
		fclose(f);
	}
	if (!r->text || json_parse(&r->doc, r->text, strlen(r->text))) {
		sbt_err("cannot read '%s': %s", path, r->text ? r->doc.error : strerror(errno));
		return -1;
	}
	schema = json_get(&r->doc.root, "schema");
	fns = json_get(&r->doc.root, "functions");
	engs = json_get(&r->doc.root, "engines");
	if (!schema || schema->type != JSON_STRING || strcmp(schema->s, "spyre-bpftrace.report/1") || !fns ||
	    fns->type != JSON_ARRAY) {
		sbt_err("'%s' is no spyre-bpftrace report; hint: spyre-bpftrace report RUN.sbt --format json > "
			"run.json, or give the capture",
			path);
		return -1;
	}
	if (!(r->owned = calloc(fns->n ? fns->n : 1, sizeof(*r->owned))))
		return -1;
	for (uint32_t i = 0; i < fns->n && r->nfn < MAX_NAMES; i++) {
		const struct json_value *fn = &fns->items[i], *name = json_get(fn, "name"),
					*hist = json_get(fn, "histogram");
		struct histogram *h = &r->owned[r->nfn];

		if (!name || name->type != JSON_STRING || !hist || hist->type != JSON_ARRAY)
			continue;
		for (uint32_t b = 0; b < hist->n; b++) {
			const struct json_value *pair = &hist->items[b];
			int64_t low, n;

			if (pair->type == JSON_ARRAY && pair->n == 2 && json_int(&pair->items[0], &low) &&
			    json_int(&pair->items[1], &n) && low >= 0 && n > 0 && n <= UINT32_MAX)
				hist_add_bucket(h, (uint64_t)low, (uint32_t)n);
		}
		h->sum = member_u64(fn, "total_ns");
		h->min = member_u64(fn, "min_ns");
		h->max = member_u64(fn, "max_ns");
		r->fn_name[r->nfn] = name->s;
		r->fn[r->nfn++] = h;
	}
	for (uint32_t i = 0; engs && engs->type == JSON_ARRAY && i < engs->n; i++) {
		const struct json_value *e = &engs->items[i], *dev = json_get(e, "device"),
					*eng = json_get(e, "engine");
		int64_t busy = 0;

		if (dev && dev->type == JSON_STRING && eng && eng->type == JSON_STRING)
			add_engine(r, dev->s, eng->s, (double)member_u64(e, "jobs"),
				   json_decimal(json_get(e, "busy_pct"), 3, &busy) ? (double)busy / 1e3 : 0);
	}
	return 0;
}

/* A capture, or a report's JSON (its first byte a brace). */
static int load(struct run *r, const char *path)
{
	FILE *f = fopen(path, "r");
	int c = f ? fgetc(f) : EOF;

	if (f)
		fclose(f);
	return c == '{' ? from_json(r, path) : from_capture(r, path);
}

static void run_free(struct run *r)
{
	if (r->out_open)
		output_free(&r->out);
	if (r->text)
		json_free(&r->doc);
	free(r->text);
	free(r->owned);
}

static double change_pct(double before, double after)
{
	return before > 0 ? 100.0 * (after - before) / before : after > 0 ? INFINITY : 0.0;
}

struct fn_diff {
	const char *name;
	const struct histogram *h[2];
	double v[2][M_N], chg[M_N], z;
	const char *verdict;
};

static void measure(struct fn_diff *d)
{
	for (int k = 0; k < 2; k++) {
		const struct histogram *h = d->h[k];

		d->v[k][M_CALLS] = h ? (double)h->count : 0;
		d->v[k][M_TOTAL] = h ? (double)h->sum : 0;
		d->v[k][M_P50] = h ? (double)hist_quantile(h, 0.5) : 0;
		d->v[k][M_P99] = h ? (double)hist_quantile(h, 0.99) : 0;
	}
	for (int m = 0; m < M_N; m++)
		d->chg[m] = change_pct(d->v[0][m], d->v[1][m]);
}

/* shift: how far the median of every function moved (the run's own
 * shift: a machine busier in one run slows every call alike) */
static void judge(struct fn_diff *d, double min_move, double shift)
{
	double own = d->chg[M_P50] - shift;

	if (!d->h[0] || !d->h[1]) {
		d->z = 0;
		d->verdict = d->h[0] ? "only before" : "only after";
		return;
	}
	d->z = hist_mann_whitney_z(d->h[0], d->h[1]);
	/* the median moved with the test's sign, and apart from the run's
	 * shift: p99 alone is one or two calls of a run */
	if (fabs(d->z) >= Z_BEYOND && fabs(own) >= min_move && (d->z > 0) == (own > 0))
		d->verdict = d->z > 0 ? "slower" : "faster";
	else
		d->verdict = "within noise";
}

static bool beyond(const struct fn_diff *d)
{
	return !strcmp(d->verdict, "slower") || !strcmp(d->verdict, "faster");
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of the functions' p50 changes, for those in both runs (0
 * with fewer than three: too few to tell a run's shift from a change). */
static double run_shift(const struct fn_diff *f, int n)
{
	double v[MAX_NAMES];
	int k = 0;

	for (int i = 0; i < n; i++)
		if (f[i].h[0] && f[i].h[1] && isfinite(f[i].chg[M_P50]))
			v[k++] = f[i].chg[M_P50];
	if (k < 3)
		return 0;
	qsort(v, (size_t)k, sizeof(v[0]), by_value);
	return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

/* The functions of both runs, by name, the most time after first; *shift
 * the run's own. */
static int collect(const struct run *r[2], struct fn_diff *out, int max, double min_move, double *shift)
{
	int n = 0;

	for (int k = 1; k >= 0; k--)
		for (int i = 0; i < r[k]->nfn; i++) {
			int j = 0;

			while (j < n && strcmp(out[j].name, r[k]->fn_name[i]))
				j++;
			if (j == n) {
				if (n == max)
					break;
				out[n++] = (struct fn_diff){ .name = r[k]->fn_name[i] };
			}
			out[j].h[k] = r[k]->fn[i];
		}
	for (int i = 0; i < n; i++)
		measure(&out[i]);
	*shift = run_shift(out, n);
	for (int i = 0; i < n; i++)
		judge(&out[i], min_move, *shift);
	return n;
}

/* Each engine of either run, with both runs' jobs and busy %. */
struct eng_diff {
	char key[96];
	double busy[2], jobs[2];
};

static int engines(const struct run *r[2], struct eng_diff *out, int max)
{
	int n = 0;

	for (int k = 0; k < 2; k++)
		for (int i = 0; i < r[k]->neng; i++) {
			int j = 0;

			while (j < n && strcmp(out[j].key, r[k]->eng_key[i]))
				j++;
			if (j == n) {
				if (n == max)
					continue;
				memset(&out[n], 0, sizeof(out[n]));
				snprintf(out[n++].key, sizeof(out[0].key), "%s", r[k]->eng_key[i]);
			}
			out[j].busy[k] = r[k]->eng_busy[i];
			out[j].jobs[k] = r[k]->eng_jobs[i];
		}
	return n;
}

static void print_text(const struct diff_opts *o, const struct fn_diff *f, int nf, const struct eng_diff *e, int ne,
		       double shift)
{
	printf("# diff %s -> %s\n# beyond noise: Mann-Whitney's U test of the calls' times, p < 0.001, and p50 "
	       "moved by %.0f%% or more (--min-change) apart from the whole run's shift\n"
	       "# the whole run: the functions' p50 moved by %+.1f%% (their median; a machine busier in one "
	       "run slows every call alike)\n",
	       o->in[0], o->in[1], o->min_move_pct, shift);
	printf("\n# %-44s %15s %21s %21s %8s  %s\n", "runtime function", "calls", "p50 us", "p99 us", "z", "verdict");
	for (int i = 0; i < nf; i++)
		printf("  %-44.44s %7.0f %7.0f %6.1f %6.1f %+6.1f%% %6.1f %6.1f %+6.1f%% %8.1f  %s\n", f[i].name,
		       f[i].v[0][M_CALLS], f[i].v[1][M_CALLS], f[i].v[0][M_P50] / 1e3, f[i].v[1][M_P50] / 1e3,
		       f[i].chg[M_P50], f[i].v[0][M_P99] / 1e3, f[i].v[1][M_P99] / 1e3, f[i].chg[M_P99], f[i].z,
		       f[i].verdict);
	if (ne)
		printf("\n# %-44s %15s %21s\n", "card/engine", "jobs", "busy %");
	for (int i = 0; i < ne; i++)
		printf("  %-44.44s %7.0f %7.0f %6.2f %6.2f %+6.1f%%\n", e[i].key, e[i].jobs[0], e[i].jobs[1],
		       e[i].busy[0], e[i].busy[1], change_pct(e[i].busy[0], e[i].busy[1]));
}

static void print_json(const struct diff_opts *o, const struct fn_diff *f, int nf, const struct eng_diff *e, int ne,
		       double shift)
{
	struct json_writer w;

	if (jw_open(&w, stdout, 0, true))
		return;
	jw_object(&w);
	jw_key_string(&w, "schema", "spyre-bpftrace.diff/1");
	jw_key_string(&w, "before", o->in[0]);
	jw_key_string(&w, "after", o->in[1]);
	jw_key(&w, "noise");
	jw_object(&w);
	jw_key_string(&w, "test", "Mann-Whitney U, two-sided");
	jw_key(&w, "z_beyond");
	jw_double(&w, Z_BEYOND);
	jw_key(&w, "min_p50_change_pct");
	jw_double(&w, o->min_move_pct);
	jw_key(&w, "run_p50_shift_pct");
	jw_double(&w, shift);
	jw_end(&w);
	jw_key(&w, "functions");
	jw_array(&w);
	for (int i = 0; i < nf; i++) {
		jw_object(&w);
		jw_key_string(&w, "name", f[i].name);
		for (int m = 0; m < M_N; m++) {
			char k[32];

			jw_key(&w, metric_names[m]);
			jw_object(&w);
			snprintf(k, sizeof(k), "%s", m == M_CALLS ? "before" : "before_ns");
			jw_key(&w, k);
			jw_uint(&w, (uint64_t)f[i].v[0][m]);
			jw_key(&w, m == M_CALLS ? "after" : "after_ns");
			jw_uint(&w, (uint64_t)f[i].v[1][m]);
			jw_key(&w, "change_pct");
			jw_double(&w, f[i].chg[m]);
			jw_end(&w);
		}
		jw_key(&w, "z");
		jw_double(&w, f[i].z);
		jw_key_string(&w, "verdict", f[i].verdict);
		jw_end(&w);
	}
	jw_end(&w);
	jw_key(&w, "engines");
	jw_array(&w);
	for (int i = 0; i < ne; i++) {
		jw_object(&w);
		jw_key_string(&w, "engine", e[i].key);
		jw_key_uint(&w, "jobs_before", (uint64_t)e[i].jobs[0]);
		jw_key_uint(&w, "jobs_after", (uint64_t)e[i].jobs[1]);
		jw_key(&w, "busy_pct_before");
		jw_double(&w, e[i].busy[0]);
		jw_key(&w, "busy_pct_after");
		jw_double(&w, e[i].busy[1]);
		jw_end(&w);
	}
	jw_end(&w);
	jw_end(&w);
	jw_put(&w, "\n", 1);
	jw_flush(&w);
	jw_free(&w);
}

/* The --fail-if rules a change beyond noise breaks, each said. */
static int broken_rules(const struct diff_opts *o, const struct fn_diff *f, int nf)
{
	int broken = 0;

	for (int r = 0; r < o->nrules; r++)
		for (int i = 0; i < nf; i++) {
			double c = f[i].chg[o->rules[r].m];

			bool up = o->rules[r].pct > 0;

			/* a time that grew counts only for a function found slower (and the reverse) */
			if (!beyond(&f[i]) || (up ? c <= o->rules[r].pct : c >= o->rules[r].pct) ||
			    (o->rules[r].m != M_CALLS && strcmp(f[i].verdict, up ? "slower" : "faster")))
				continue;
			sbt_err("--fail-if '%s': %s %s %+.1f%% (%s)", o->rules[r].text, f[i].name,
				metric_names[o->rules[r].m], c, f[i].verdict);
			broken++;
		}
	return broken;
}

int cmd_diff(int argc, char **argv)
{
	static const struct argp_option options[] = {
		{ "format", 'f', "FMT", 0, "text (the default) or json", 0 },
		{ "min-change", 'm', "PCT", 0,
		  "A change beyond noise moves the median by at least PCT% (default 25) besides passing the test", 0 },
		{ "fail-if", 'F', "RULE", 0,
		  "Exit 3 when a change beyond noise breaks RULE: METRIC>+N% (grew by more than N%) or METRIC<-N%; "
		  "METRIC is calls, total, p50 or p99 (repeatable)",
		  0 },
		{ 0 }
	};
	static const struct argp argp = { options,
					  diff_parse,
					  "BEFORE.sbt AFTER.sbt",
					  "Compare two runs' captures: per runtime function the calls, total, p50 and "
					  "p99 with their change and whether it is beyond the run-to-run noise (from "
					  "the calls' distributions), per card engine the jobs and busy %.\n\n"
					  "EXAMPLES:\n"
					  "  spyre-bpftrace diff before.sbt after.sbt\n"
					  "  spyre-bpftrace diff before.sbt after.sbt --format json > diff.json\n"
					  "  spyre-bpftrace diff main.report.json pr.sbt  # a kept report, a new run\n"
					  "  spyre-bpftrace diff main.sbt pr.sbt --fail-if 'p99>+10%'  # for CI",
					  NULL,
					  NULL,
					  NULL };
	static struct fn_diff f[MAX_NAMES];
	static struct run runs[2];
	struct eng_diff e[MAX_ENGINES];
	struct diff_opts o = { .min_move_pct = MIN_MOVE_PCT };
	const struct run *r[2] = { &runs[0], &runs[1] };
	double shift;
	int nf, ne, ret = 1;

	if (argp_parse(&argp, argc, argv, 0, NULL, &o))
		return 2;
	for (int k = 0; k < 2; k++)
		if (load(&runs[k], o.in[k]))
			goto out;
	nf = collect(r, f, MAX_NAMES, o.min_move_pct, &shift);
	ne = engines(r, e, MAX_ENGINES);
	if (o.json)
		print_json(&o, f, nf, e, ne, shift);
	else
		print_text(&o, f, nf, e, ne, shift);
	fflush(stdout);
	ret = broken_rules(&o, f, nf) ? 3 : 0;
out:
	for (int k = 0; k < 2; k++)
		run_free(&runs[k]);
	return ret;
}
