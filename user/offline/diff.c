// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace diff BEFORE.sbt AFTER.sbt`: two runs compared for a
 * review, per runtime function (calls, total, p50, p99) and per card
 * engine (jobs, busy %), each change said with whether it is beyond the
 * run-to-run noise. Noise is judged from the per-call distributions (the
 * report's latency histograms): Mann-Whitney's U test, p < 0.001, and a
 * move of the median of at least --min-change (25% by default): two runs
 * of one workload on a busy VM differ by 10-20% in the median of a
 * microsecond call and by half in its p99, and the test alone, which
 * sees a run's calls and not another run's, would call that a change.
 * --fail-if 'p99>+10%' turns a change beyond noise in that direction into
 * exit 3, for CI.
 */
#include <argp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/histogram.h"
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

struct side {
	struct output out;
	bool open;
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
			argp_error(state, "two captures: BEFORE and AFTER");
		o->in[o->nin++] = arg;
		break;
	case ARGP_KEY_END:
		if (o->nin != 2)
			argp_error(state, "two captures needed; hint: spyre-bpftrace diff before.sbt after.sbt");
		break;
	default: return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static int feed(void *ctx, const struct sbt_hdr *h)
{
	output_add(ctx, h);
	return 0;
}

/* A capture through the report, as `report` reads it. */
static int load(struct side *s, const char *path)
{
	char err[256];

	if (output_open(&s->out, NULL, FMT_NONE, true, err, sizeof(err))) {
		sbt_err("%s: %s", path, err);
		return -1;
	}
	s->open = true;
	if (capture_each(path, feed, &s->out, NULL) < 0)
		return -1;
	output_close(&s->out);
	return 0;
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

static void fill(struct fn_diff *d, double min_move)
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
	if (!d->h[0] || !d->h[1]) {
		d->z = 0;
		d->verdict = d->h[0] ? "only before" : "only after";
		return;
	}
	d->z = hist_mann_whitney_z(d->h[0], d->h[1]);
	/* the median moved with the test's sign: p99 alone is one or two calls of a run */
	if (fabs(d->z) >= Z_BEYOND && fabs(d->chg[M_P50]) >= min_move && (d->z > 0) == (d->chg[M_P50] > 0))
		d->verdict = d->z > 0 ? "slower" : "faster";
	else
		d->verdict = "within noise";
}

static bool beyond(const struct fn_diff *d)
{
	return !strcmp(d->verdict, "slower") || !strcmp(d->verdict, "faster");
}

/* The functions of both runs, by name, the most time after first. */
static int collect(const struct report *a, const struct report *b, struct fn_diff *out, int max, double min_move)
{
	const struct report *r[2] = { a, b };
	const struct histogram *h;
	const char *name;
	int n = 0;

	for (int k = 1; k >= 0; k--)
		for (int i = 0; report_function(r[k], false, i, &name, &h); i++) {
			int j = 0;

			while (j < n && strcmp(out[j].name, name))
				j++;
			if (j == n) {
				if (n == max)
					break;
				out[n++] = (struct fn_diff){ .name = name };
			}
			out[j].h[k] = h;
		}
	for (int i = 0; i < n; i++)
		fill(&out[i], min_move);
	return n;
}

/* busy % of each engine, the cards' names without a process's pid (a mock
 * card is named by its process, another one each run) */
struct eng_diff {
	char key[96];
	double busy[2], jobs[2];
};

static int engines(const struct report *r[2], double span[2], struct eng_diff *out, int max)
{
	struct report_engine e;
	int n = 0;

	for (int k = 0; k < 2; k++)
		for (int i = 0; report_engine(r[k], i, &e); i++) {
			char key[96];
			const char *pid = strstr(e.device, " (pid ");
			int j = 0;

			snprintf(key, sizeof(key), "%.*s/%s", pid ? (int)(pid - e.device) : (int)strlen(e.device),
				 e.device, e.engine);
			while (j < n && strcmp(out[j].key, key))
				j++;
			if (j == n) {
				if (n == max)
					continue;
				memset(&out[n], 0, sizeof(out[n]));
				snprintf(out[n++].key, sizeof(out[0].key), "%s", key);
			}
			out[j].busy[k] += span[k] > 0 ? 100.0 * (double)e.busy_ns / 1e9 / span[k] : 0;
			out[j].jobs[k] += (double)e.jobs;
		}
	return n;
}

static void print_text(const struct diff_opts *o, const struct fn_diff *f, int nf, const struct eng_diff *e, int ne)
{
	printf("# diff %s -> %s\n# beyond noise: Mann-Whitney's U test of the calls' times, p < 0.001, and p50 "
	       "moved by %.0f%% or more (--min-change)\n",
	       o->in[0], o->in[1], o->min_move_pct);
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

static void print_json(const struct diff_opts *o, const struct fn_diff *f, int nf, const struct eng_diff *e, int ne)
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
					  "  spyre-bpftrace diff main.sbt pr.sbt --fail-if 'p99>+10%'  # for CI",
					  NULL,
					  NULL,
					  NULL };
	static struct fn_diff f[MAX_NAMES];
	struct eng_diff e[64];
	struct diff_opts o = { .min_move_pct = MIN_MOVE_PCT };
	struct side s[2] = { 0 };
	const struct report *r[2];
	double span[2];
	int nf, ne, ret = 1;

	if (argp_parse(&argp, argc, argv, 0, NULL, &o))
		return 2;
	for (int k = 0; k < 2; k++)
		if (load(&s[k], o.in[k]))
			goto out;
	for (int k = 0; k < 2; k++) {
		const struct correlate_stats *st = correlator_stats(s[k].out.corr);

		r[k] = s[k].out.rep;
		span[k] = st->last_ts > st->first_ts ? (double)(st->last_ts - st->first_ts) / 1e9 : 0;
	}
	nf = collect(r[0], r[1], f, MAX_NAMES, o.min_move_pct);
	ne = engines(r, span, e, 64);
	if (o.json)
		print_json(&o, f, nf, e, ne);
	else
		print_text(&o, f, nf, e, ne);
	fflush(stdout);
	ret = broken_rules(&o, f, nf) ? 3 : 0;
out:
	for (int k = 0; k < 2; k++)
		if (s[k].open)
			output_free(&s[k].out);
	return ret;
}
