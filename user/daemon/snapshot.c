// SPDX-License-Identifier: GPL-2.0-only
/*
 * A snapshot of the flight recorder: the records of a window through the
 * same correlator and writers as `convert`, to a trace written atomically
 * (0600, renamed into place), and beside it a small JSON manifest: the
 * window, the host, the processes, lost records, the detail windows in it
 * and their sampling weights, and the clock snapshot that ties the trace's
 * BOOTTIME to the wall clock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach/metawrite.h"
#include "base/clock.h"
#include "base/json_write.h"
#include "base/outfile.h"
#include "base/procfs.h"
#include "base/vec.h"
#include "capture/capture.h"
#include "daemon/snapshot.h"
#include "daemon/spool.h"
#include "probes/probes.h"

#define MAX_PROCS 256

static const char *const reasons[SNAP_N] = { "request", "window", "errors", "slow_ioctl", "lost" };

const char *snapshot_reason_name(enum snap_reason r)
{
	return r < SNAP_N ? reasons[r] : "unknown";
}

static bool left_out(const struct snapshot_job *j, const struct sbt_hdr *h)
{
	for (int i = 0; i < j->nleave_out; i++)
		if (h->tgid == j->leave_out[i].pid && h->ts >= j->leave_out[i].from && h->ts <= j->leave_out[i].to)
			return true;
	return false;
}

static void job_add(void *ctx, const struct sbt_hdr *h)
{
	struct snapshot_job *j = ctx;
	size_t size = sbt_record_len(h);

	if (j->nleave_out && left_out(j, h)) {
		j->left_out++;
		return;
	}
	if (vec_reserve((void **)&j->buf, &j->cap, j->len + size, 1)) {
		j->oom = true;
		return;
	}
	memcpy(j->buf + j->len, h, sizeof(*h) + h->size);
	j->len += size;
}

struct snapshot_job *snapshot_collect(const struct flight_recorder *r, struct snapshot_window *w,
				      const struct probe_set *probes, const struct snapshot_leave_out *leave_out,
				      int nleave_out)
{
	struct snapshot_job *j = calloc(1, sizeof(*j));
	struct meta_writer mw = { .sink = job_add };

	if (!j)
		return NULL;
	j->client = -1;
	j->w = *w;
	j->nleave_out = nleave_out < SNAPSHOT_LEAVE_OUT ? nleave_out : SNAPSHOT_LEAVE_OUT;
	if (j->nleave_out)
		memcpy(j->leave_out, leave_out, (size_t)j->nleave_out * sizeof(*leave_out));
	mw.sink_ctx = j;
	for (size_t i = 0; probes && i < probes->n; i++)
		if (!probes->sites[i].refused)
			metaw_probe(&mw, &probes->sites[i]);
	/* the interrupts' names, which put them on their cards */
	recorder_irq_names(r, job_add, j);
	j->records = recorder_each(r, w->from_boot, w->to_boot, job_add, j, &j->w.oldest_boot) - j->left_out;
	j->window_records = j->records;
	w->oldest_boot = j->w.oldest_boot;
	j->w.nevicted_uids = recorder_evicted_in(r, w->from_boot, w->to_boot, j->w.evicted_by_uid, 8, &j->w.evicted,
						 &j->w.evicted_sure);
	if (j->oom) {
		snapshot_job_free(j);
		return NULL;
	}
	return j;
}

void snapshot_job_free(struct snapshot_job *j)
{
	if (!j)
		return;
	free(j->buf);
	free(j->windows);
	free(j);
}

/* The processes in it, and those of them that have a description. */
struct procs {
	uint32_t pid[MAX_PROCS];
	bool described[MAX_PROCS];
	int n;
};

static void note_proc(struct procs *p, const struct sbt_hdr *h)
{
	int i;

	for (i = 0; i < p->n && p->pid[i] != h->tgid; i++)
		;
	if (i == p->n) {
		if (p->n == MAX_PROCS || !h->tgid)
			return;
		p->pid[p->n++] = h->tgid;
	}
	p->described[i] |= h->type == SBT_META_PROC;
}

/* A span of time, realtime and boottime, as an object left open (for more). */
static void span(struct json_writer *jw, uint64_t from_real, uint64_t to_real, uint64_t from_boot, uint64_t to_boot)
{
	jw_object(jw);
	jw_key_uint(jw, "from_realtime_ns", from_real);
	jw_key_uint(jw, "to_realtime_ns", to_real);
	jw_key_uint(jw, "from_boottime_ns", from_boot);
	jw_key_uint(jw, "to_boottime_ns", to_boot);
}

static int write_manifest(const struct snapshot_job *j, const struct sbt_meta_clock *clock, const struct procs *p,
			  char *err, size_t errlen)
{
	const struct snapshot_window *w = &j->w;
	char path[PATH_MAX + 32], host[64] = "", name[16];
	struct outfile of;
	struct json_writer jw;
	int werr;
	FILE *m;

	snprintf(path, sizeof(path), "%s.manifest.json", j->path);
	if (!(m = outfile_create(&of, path, err, errlen)))
		return -1;
	gethostname(host, sizeof(host) - 1);
	if (jw_open(&jw, m, 0, true)) {
		snprintf(err, errlen, "out of memory");
		fclose(m);
		outfile_release(&of);
		return -1;
	}
	jw_object(&jw);
	jw_key_string(&jw, "producer", "spyre-bpftrace daemon");
	jw_key_string(&jw, "version", SBT_VERSION);
	jw_key_string(&jw, "host", host);
	jw_key_string(&jw, "trace", j->path);
	jw_key_string(&jw, "reason", snapshot_reason_name(j->reason));
	jw_key(&jw, "window");
	span(&jw, w->from_realtime, w->to_realtime, w->from_boot, w->to_boot);
	jw_end(&jw);
	jw_key_uint(&jw, "recorder_oldest_boottime_ns", w->oldest_boot);
	jw_key_uint(&jw, "records", j->records);
	jw_key_uint(&jw, "lost_records", w->lost);
	jw_key_uint(&jw, "dropped_by_recorder", w->evicted);
	jw_key(&jw, "dropped_by_recorder_by_uid");
	jw_object(&jw);
	for (int i = 0; i < w->nevicted_uids; i++)
		jw_key_uint(&jw, recorder_uid_name(w->evicted_by_uid[i].uid, name), w->evicted_by_uid[i].records);
	jw_end(&jw);
	jw_key_bool(&jw, "dropped_by_recorder_complete", w->evicted_sure);
	jw_key_uint(&jw, "records_in_window", j->window_records);
	jw_key_bool(&jw, "cut_to_fit", j->cut);
	if (j->cut) {
		jw_key(&jw, "kept");
		span(&jw, j->kept_from_boot + (w->from_realtime - w->from_boot), w->to_realtime, j->kept_from_boot,
		     w->to_boot);
		jw_key_uint(&jw, "max_bytes", j->max_bytes);
		jw_end(&jw);
	}
	jw_key_string(&jw, "sampling",
		      "kernel events of every process with a card (VFIO ioctls, interrupts) throughout; runtime calls "
		      "only in the detail windows below, a sampled window's calls standing for sampling_weight times "
		      "as many");
	jw_key(&jw, "detail_windows");
	if (j->windows)
		jw_raw(&jw, j->windows, strlen(j->windows));
	else
		jw_raw(&jw, "[]", 2);
	jw_key(&jw, "left_out");
	jw_object(&jw);
	jw_key_string(&jw, "why", "called the runtime in a detail window but held no card in it");
	jw_key_uint(&jw, "records", j->left_out);
	jw_key(&jw, "processes");
	jw_array(&jw);
	for (int i = 0; i < j->nleave_out; i++)
		jw_uint(&jw, j->leave_out[i].pid);
	jw_end(&jw);
	jw_end(&jw);
	jw_key(&jw, "processes");
	jw_array(&jw);
	for (int i = 0; i < p->n; i++)
		jw_uint(&jw, p->pid[i]);
	jw_end(&jw);
	jw_key(&jw, "clock_snapshot");
	jw_object(&jw);
	jw_key_uint(&jw, "boottime_ns", clock->boottime);
	jw_key_uint(&jw, "monotonic_ns", clock->monotonic);
	jw_key_uint(&jw, "realtime_ns", clock->realtime);
	jw_key_uint(&jw, "spread_ns", clock->spread_ns);
	jw_end(&jw);
	jw_end(&jw);
	JW_PUT(&jw, "\n");
	werr = jw_flush(&jw);
	jw_free(&jw);
	if (werr) {
		snprintf(err, errlen, "writing '%s' failed: %s", path, strerror(-werr));
		fclose(m);
		outfile_release(&of);
		return -1;
	}
	if (fclose(m) || outfile_commit(&of)) {
		snprintf(err, errlen, "writing '%s' failed: %s", path, strerror(errno));
		outfile_release(&of);
		return -1;
	}
	outfile_release(&of);
	return 0;
}

static int write_once(struct snapshot_job *j, char *err, size_t errlen)
{
	struct output out;
	struct meta_writer mw = { 0 };
	struct sbt_meta_clock clock;
	struct procs *p = calloc(1, sizeof(*p));
	enum out_format fmt;
	int ret = -1;

	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (output_format(j->path, NULL, &fmt, err, errlen))
		goto done;
	if (output_open(&out, j->path, fmt, false, err, errlen)) {
		output_free(&out);
		goto done;
	}
	mw.out = &out;
	/* the clock first: the window in the trace's own clock, and the tie
	 * to the wall clock for the manifest and for merging hosts */
	sbt_clock_snapshot(&clock);
	clock.h.ts = clock.boottime;
	metaw_put(&mw, &clock.h, SBT_META_CLOCK, sizeof(clock));
	metaw_host(&mw);
	for (size_t off = 0; off < j->len;) {
		const struct sbt_hdr *h = (const void *)(j->buf + off);

		note_proc(p, h);
		output_add(&out, h);
		off += sbt_record_len(h);
	}
	for (int i = 0; i < p->n; i++) /* names of those still there that no window named */
		if (!p->described[i] && proc_exists((pid_t)p->pid[i]))
			metaw_proc(&mw, (pid_t)p->pid[i], NULL);
	if (output_close(&out)) {
		snprintf(err, errlen, "writing '%s' failed: %s", j->path, strerror(out.error));
		output_free(&out);
		goto done;
	}
	/* a trace over the bound alone never takes its name: it is written
	 * again, cut (snapshot_write) */
	j->over_bytes = 0;
	if (j->max_bytes && output_bytes(&out) > j->max_bytes) {
		j->over_bytes = output_bytes(&out);
		output_free(&out);
		ret = 0;
		goto done;
	}
	/* room first, then the name: older snapshots go before this one
	 * joins them (the manifest's bytes are kept room for too) */
	if (j->spooled && j->spool_dir) {
		uint64_t need = output_bytes(&out) + SPOOL_MANIFEST_ROOM;

		spool_trim(j->spool_dir, j->max_bytes > need ? j->max_bytes - need : 0, NULL);
	}
	if (output_commit(&out)) {
		snprintf(err, errlen, "writing '%s' failed: %s", j->path, strerror(out.error));
		output_free(&out);
		goto done;
	}
	output_free(&out);
	ret = write_manifest(j, &clock, p, err, errlen);
done:
	free(p);
	return ret;
}

/* Descriptions (probes, processes, cards, clocks) stay in a cut snapshot:
 * they are small and what is kept needs them to be read. */
static bool is_description(const struct sbt_hdr *h)
{
	return h->type >= SBT_META_CLOCK;
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Leaves out the oldest records of the window so that about keep of them
 * remain. -ENOMEM, or 0. */
static int cut_oldest(struct snapshot_job *j, uint64_t keep)
{
	uint64_t *ts, n = 0, cut, removed = 0;
	size_t off, to = 0;

	for (off = 0; off < j->len; off += sbt_record_len((const void *)(j->buf + off)))
		n += !is_description((const void *)(j->buf + off));
	if (keep >= n)
		return 0;
	if (!(ts = malloc((n ? n : 1) * sizeof(*ts))))
		return -ENOMEM;
	n = 0;
	for (off = 0; off < j->len; off += sbt_record_len((const void *)(j->buf + off))) {
		const struct sbt_hdr *h = (const void *)(j->buf + off);

		if (!is_description(h))
			ts[n++] = h->ts;
	}
	qsort(ts, n, sizeof(*ts), by_value);
	cut = keep ? ts[n - keep] : UINT64_MAX;
	free(ts);
	for (off = 0; off < j->len;) {
		const struct sbt_hdr *h = (const void *)(j->buf + off);
		size_t len = sbt_record_len(h);

		if (is_description(h) || h->ts >= cut) {
			memmove(j->buf + to, h, len);
			to += len;
		} else {
			removed++;
		}
		off += len;
	}
	j->len = to;
	j->records -= removed < j->records ? removed : j->records;
	j->kept_from_boot = !keep ? j->w.to_boot : cut > j->w.from_boot ? cut : j->w.from_boot;
	j->cut = true;
	return 0;
}

static uint64_t written_bytes(const struct snapshot_job *j)
{
	char manifest[PATH_MAX + 32];
	struct stat a, b;

	snprintf(manifest, sizeof(manifest), "%s.manifest.json", j->path);
	if (stat(j->path, &a) || stat(manifest, &b))
		return 0;
	return (uint64_t)a.st_size + (uint64_t)b.st_size;
}

/* A few tries are enough: a trace's size is close to proportional to its
 * records, and each try aims under the bound. */
#define CUT_TRIES 5

int snapshot_write(struct snapshot_job *j, char *err, size_t errlen)
{
	int ret = write_once(j, err, errlen);

	for (int i = 0; !ret && j->max_bytes && i < CUT_TRIES; i++) {
		uint64_t size = j->over_bytes ? j->over_bytes : written_bytes(j), keep;

		if (size <= j->max_bytes)
			break;
		/* aim at 90% of the bound; never keep as many as now */
		keep = (uint64_t)((double)j->records * 0.9 * (double)j->max_bytes / (double)size);
		if (keep >= j->records)
			keep = j->records / 2;
		if (cut_oldest(j, keep)) {
			snprintf(err, errlen, "out of memory cutting the snapshot to fit");
			return -1;
		}
		ret = write_once(j, err, errlen);
	}
	if (!ret && j->over_bytes) {
		snprintf(err, errlen,
			 "the snapshot is over %llu bytes even cut to its newest records; hint: "
			 "a larger --spool-mib",
			 (unsigned long long)j->max_bytes);
		return -1;
	}
	return ret;
}
