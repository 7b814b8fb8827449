// SPDX-License-Identifier: GPL-2.0-only
/*
 * A snapshot of the flight recorder: the records of a window through the
 * same correlator and writers as `convert`, to a trace written atomically
 * (0600, renamed into place), and beside it a small JSON manifest: the
 * window, the host, the processes, lost records, what was sampled, and the
 * clock snapshot that ties the trace's BOOTTIME to the wall clock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "metawrite.h"
#include "outfile.h"
#include "procfs.h"
#include "snapshot.h"

#define MAX_PROCS 256

struct feed {
	struct output *out;
	uint32_t pids[MAX_PROCS];
	int npids;
};

static void feed_one(void *ctx, const struct sbt_hdr *h)
{
	struct feed *f = ctx;
	int i;

	for (i = 0; i < f->npids && f->pids[i] != h->tgid; i++)
		;
	if (i == f->npids && f->npids < MAX_PROCS && h->tgid)
		f->pids[f->npids++] = h->tgid;
	output_add(f->out, h);
}

static int write_manifest(const char *trace, const struct snapshot_window *w,
			  const struct sbt_meta_clock *clock, const struct feed *f, uint64_t records,
			  char *err, size_t errlen)
{
	char path[4200], host[64] = "";
	struct outfile of;
	FILE *m;

	snprintf(path, sizeof(path), "%s.manifest.json", trace);
	if (!(m = outfile_create(&of, path, err, errlen)))
		return -1;
	gethostname(host, sizeof(host) - 1);
	fprintf(m, "{\n  \"producer\": \"spyre-bpftrace daemon\",\n  \"version\": \"%s\",\n", SBT_VERSION);
	fprintf(m, "  \"host\": \"%s\",\n  \"trace\": \"%s\",\n", host, trace);
	fprintf(m, "  \"window\": {\"from_realtime_ns\": %llu, \"to_realtime_ns\": %llu, "
		   "\"from_boottime_ns\": %llu, \"to_boottime_ns\": %llu},\n",
		(unsigned long long)w->from_realtime, (unsigned long long)w->to_realtime,
		(unsigned long long)w->from_boot, (unsigned long long)w->to_boot);
	fprintf(m, "  \"recorder_oldest_boottime_ns\": %llu,\n", (unsigned long long)w->oldest_boot);
	fprintf(m, "  \"records\": %llu,\n  \"lost_records\": %llu,\n  \"dropped_by_recorder\": %llu,\n",
		(unsigned long long)records, (unsigned long long)w->lost,
		(unsigned long long)w->dropped);
	fprintf(m, "  \"sampling\": \"kernel events of every process with a card (VFIO ioctls, "
		   "DMA mappings, interrupts); runtime calls only in ctl record windows\",\n");
	fprintf(m, "  \"processes\": [");
	for (int i = 0; i < f->npids; i++)
		fprintf(m, "%s%u", i ? ", " : "", f->pids[i]);
	fprintf(m, "],\n  \"clock_snapshot\": {\"boottime_ns\": %llu, \"monotonic_ns\": %llu, "
		   "\"realtime_ns\": %llu, \"spread_ns\": %llu}\n}\n",
		(unsigned long long)clock->boottime, (unsigned long long)clock->monotonic,
		(unsigned long long)clock->realtime, (unsigned long long)clock->spread_ns);
	if (fclose(m) || outfile_commit(&of)) {
		snprintf(err, errlen, "writing '%s' failed: %s", path, strerror(errno));
		outfile_release(&of);
		return -1;
	}
	outfile_release(&of);
	return 0;
}

int snapshot_write(const struct flight_recorder *r, struct snapshot_window *w, const char *path,
		   char *err, size_t errlen, uint64_t *records)
{
	struct output out;
	struct meta_writer mw = { 0 };
	struct feed f = { &out, { 0 }, 0 };
	struct sbt_meta_clock clock;
	enum out_format fmt;
	int ret = -1;

	if (output_format(path, NULL, &fmt, err, errlen))
		return -1;
	if (output_open(&out, path, fmt, false, err, errlen)) {
		output_free(&out);
		return -1;
	}
	mw.out = &out;
	/* the clock first: the window in the trace's own clock, and the tie
	 * to the wall clock for the manifest and for merging hosts */
	sbt_clock_snapshot(&clock);
	clock.h.ts = clock.boottime;
	metaw_put(&mw, &clock.h, SBT_META_CLOCK, sizeof(clock));
	metaw_host(&mw);
	*records = recorder_each(r, w->from_boot, w->to_boot, feed_one, &f, &w->oldest_boot);
	for (int i = 0; i < f.npids; i++)
		if (proc_exists((pid_t)f.pids[i])) /* names of those still there */
			metaw_proc(&mw, (pid_t)f.pids[i], NULL);
	if (output_close(&out) || output_commit(&out)) {
		snprintf(err, errlen, "writing '%s' failed: %s", path, strerror(out.error));
		goto done;
	}
	ret = write_manifest(path, w, &clock, &f, *records, err, errlen);
done:
	output_free(&out);
	return ret;
}
