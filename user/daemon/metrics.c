// SPDX-License-Identifier: GPL-2.0-only
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/names.h"
#include "daemon/metrics.h"

/* Prometheus buckets: 2^k ns for k in [FIRST_LE, LAST_LE], each the lower
 * bound of one of the kernel's buckets (4(k-1)), so they add up exactly
 * (a value of exactly 2^k ns counts in the next one). */
#define FIRST_LE 10 /* 1.024 µs */
#define LAST_LE 35 /* 34.4 s */

struct page {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void put(struct page *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = p->cap - p->len;

		va_start(ap, fmt);
		n = vsnprintf(p->buf ? p->buf + p->len : NULL, p->buf ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			p->oom = true;
			return;
		}
		if (p->buf && (size_t)n < room) {
			p->len += (size_t)n;
			return;
		}
		size_t cap = p->cap ? p->cap * 2 : 16384;

		while (cap < p->len + (size_t)n + 1)
			cap *= 2;
		char *g = realloc(p->buf, cap);

		if (!g) {
			p->oom = true;
			return;
		}
		p->buf = g;
		p->cap = cap;
	}
}

static void head(struct page *p, const char *name, const char *type, const char *help)
{
	put(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Counts (counter), failures (metric_errors_total) and a latency
 * histogram (metric_duration_seconds) per name (a command, a function):
 * name(i) NULL or a zero count leaves slot i out. */
static void histograms(struct page *p, const char *counter, const char *metric, const char *label, const char *what,
		       const char *timing, const struct sbt_daemon_hist *h, uint32_t n, const char *(*name)(uint32_t))
{
	char title[128];

	head(p, counter, "counter", what);
	for (uint32_t i = 0; i < n; i++)
		if (h[i].count && name(i))
			put(p, "%s{%s=\"%s\"} %llu\n", counter, label, name(i), (unsigned long long)h[i].count);
	snprintf(title, sizeof(title), "%s_errors_total", metric);
	head(p, title, "counter", "Of those, the ones that failed.");
	for (uint32_t i = 0; i < n; i++)
		if (h[i].count && name(i))
			put(p, "%s_errors_total{%s=\"%s\"} %llu\n", metric, label, name(i),
			    (unsigned long long)h[i].errors);
	snprintf(title, sizeof(title), "%s_duration_seconds", metric);
	head(p, title, "histogram", timing);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t below = 0;
		int b = 0;

		if (!h[i].count || !name(i))
			continue;
		for (int k = FIRST_LE; k <= LAST_LE; k++) {
			for (; b < 4 * (k - 1) && b < SBT_DAEMON_BUCKETS; b++)
				below += h[i].bucket[b];
			put(p, "%s_duration_seconds_bucket{%s=\"%s\",le=\"%.9g\"} %llu\n", metric, label, name(i),
			    (double)(1ull << k) / 1e9, (unsigned long long)below);
		}
		/* the buckets add up to timed: +Inf is no less than any of them */
		put(p, "%s_duration_seconds_bucket{%s=\"%s\",le=\"+Inf\"} %llu\n", metric, label, name(i),
		    (unsigned long long)h[i].timed);
		put(p, "%s_duration_seconds_sum{%s=\"%s\"} %.9f\n", metric, label, name(i), (double)h[i].sum_ns / 1e9);
		put(p, "%s_duration_seconds_count{%s=\"%s\"} %llu\n", metric, label, name(i),
		    (unsigned long long)h[i].timed);
	}
}

static const char *drv_name(uint32_t func)
{
	return func ? sbt_drv_func_name(func) : NULL;
}

static void ioctls(struct page *p, const struct daemon_counts *c)
{
	histograms(p, "spyre_vfio_ioctls_total", "spyre_vfio_ioctl", "cmd",
		   "VFIO ioctls on Spyre cards' files (container, group, device), by command.",
		   "Their time, entry to return, of those timed (1 in spyre_bpftrace_ioctl_sample_every, some always), "
		   "each standing for as many as it was 1 in: _count is the weighted count, the exact one the counter "
		   "above.",
		   c->ops, SBT_DAEMON_OPS, daemon_op_name);
	/* none when the kernel allows no driver-level probe: no family at all */
	for (uint32_t i = 1; i < SBT_DRV_FUNC_MAX; i++)
		if (c->drv[i].count || c->drv[i].missed) {
			histograms(p, "spyre_vfio_driver_calls_total", "spyre_vfio_driver_call", "function",
				   "Calls of vfio's own functions (fentry or kprobes), by function.",
				   "Their time, entry to return, of each.", c->drv, SBT_DRV_FUNC_MAX, drv_name);
			head(p, "spyre_vfio_driver_call_missed_total", "counter",
			     "Runs of vfio's MSI handler its probe did not see (a kprobe does not fire inside "
			     "another's handler): with the calls counted, every run of it.");
			if (c->drv[SBT_DRV_MSI].count || c->drv[SBT_DRV_MSI].missed)
				put(p, "spyre_vfio_driver_call_missed_total{function=\"%s\"} %llu\n",
				    drv_name(SBT_DRV_MSI), (unsigned long long)c->drv[SBT_DRV_MSI].missed);
			break;
		}
}

/* The per-card metrics: a field of struct sbt_daemon_card, or the pinned gauge. */
enum card_value { MAPPED, UNMAPPED, PINNED, MAPS, MAP_ERRORS, IRQS, IRQ_SECONDS };

static const struct {
	const char *name, *type, *help;
	enum card_value v;
} card_metrics[] = {
	{ "spyre_iommu_mapped_bytes_total", "counter",
	  "Bytes mapped for the card's DMA (VFIO_IOMMU_MAP_DMA that succeeded).", MAPPED },
	{ "spyre_iommu_unmapped_bytes_total", "counter", "Bytes unmapped (VFIO_IOMMU_UNMAP_DMA that succeeded).",
	  UNMAPPED },
	{ "spyre_iommu_mappings_total", "counter", "DMA mappings made.", MAPS },
	{ "spyre_iommu_map_errors_total", "counter", "DMA mappings refused.", MAP_ERRORS },
	{ "spyre_device_pinned_bytes", "gauge",
	  "Bytes mapped for DMA now (mapped minus unmapped since the daemon started).", PINNED },
	{ "spyre_device_interrupts_total", "counter", "The card's interrupts (vfio-pci's MSI/MSI-X handlers).", IRQS },
	{ "spyre_device_interrupt_seconds_total", "counter", "Time in the card's interrupt handlers.", IRQ_SECONDS },
};

static double card_value(const struct sbt_daemon_card *k, enum card_value v)
{
	switch (v) {
	case MAPPED: return (double)k->map_bytes;
	case UNMAPPED: return (double)k->unmap_bytes;
	case PINNED: return (double)k->map_bytes - (double)k->unmap_bytes;
	case MAPS: return (double)k->maps;
	case MAP_ERRORS: return (double)k->map_errors;
	case IRQS: return (double)k->irqs;
	case IRQ_SECONDS: return (double)k->irq_ns / 1e9;
	}
	return 0;
}

static void cards(struct page *p, const struct daemon_counters *f, const struct daemon_counts *c)
{
	head(p, "spyre_device_info", "gauge",
	     "The Spyre cards this host watches (device \"unknown\": work no card was known for).");
	for (int i = 0; i < f->ncards; i++)
		put(p, "spyre_device_info{device=\"%s\",vendor_device=\"%s\",numa=\"%d\"} 1\n", f->cards[i].bdf,
		    i ? f->cards[i].vendor_device : "", f->cards[i].numa);
	for (size_t m = 0; m < sizeof(card_metrics) / sizeof(card_metrics[0]); m++) {
		head(p, card_metrics[m].name, card_metrics[m].type, card_metrics[m].help);
		for (int i = 0; i < f->ncards; i++)
			put(p, "%s{device=\"%s\"} %.17g\n", card_metrics[m].name, f->cards[i].bdf,
			    card_value(&c->cards[i], card_metrics[m].v));
	}
}

/* This process's own CPU time and memory, as the client libraries name them. */
static void self_process(struct page *p)
{
	unsigned long utime = 0, stime = 0;
	long pages = 0, ticks = sysconf(_SC_CLK_TCK);
	char line[1024];
	FILE *f;

	if ((f = fopen("/proc/self/stat", "re"))) {
		if (fgets(line, sizeof(line), f)) {
			const char *rp = strrchr(line, ')');

			if (rp)
				sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime);
		}
		fclose(f);
	}
	if ((f = fopen("/proc/self/statm", "re"))) {
		if (fscanf(f, "%*d %ld", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	head(p, "process_cpu_seconds_total", "counter", "CPU time of the daemon (user and system).");
	put(p, "process_cpu_seconds_total %.2f\n", (double)(utime + stime) / (double)(ticks > 0 ? ticks : 100));
	head(p, "process_resident_memory_bytes", "gauge", "Resident memory of the daemon.");
	put(p, "process_resident_memory_bytes %ld\n", pages * sysconf(_SC_PAGESIZE));
}

/* Which container holds a card: one series each, for joins on device. */
static void allocations(struct page *p, const struct allocations *a)
{
	if (!a || !a->v)
		return;
	head(p, "spyre_device_allocation_info", "gauge",
	     "Cards allocated to containers by the kubelet (its pod-resources API); join on device.");
	for (size_t i = 0; i < a->n; i++)
		put(p,
		    "spyre_device_allocation_info{device=\"%s\",resource=\"%s\",namespace=\"%s\",pod=\"%s\","
		    "container=\"%s\"} 1\n",
		    a->v[i].device, a->v[i].resource, a->v[i].namespace, a->v[i].pod, a->v[i].container);
}

static void self_metrics(struct page *p, const struct metrics_self *s)
{
	uint64_t evicted = 0;
	char name[16];

	head(p, "spyre_bpftrace_lost_records_total", "counter", "Records the ring buffer could not take.");
	put(p, "spyre_bpftrace_lost_records_total %llu\n", (unsigned long long)s->lost_records);
	head(p, "spyre_bpftrace_ring_buffer_bytes", "gauge", "Size of the kernel's ring buffer (--buffer-size).");
	put(p, "spyre_bpftrace_ring_buffer_bytes %llu\n", (unsigned long long)s->ring_bytes);
	head(p, "spyre_bpftrace_ring_buffer_peak_bytes", "gauge",
	     "The most of the ring buffer in use that a record found since the start: near its size, records are "
	     "lost.");
	put(p, "spyre_bpftrace_ring_buffer_peak_bytes %llu\n", (unsigned long long)s->ring_peak_bytes);
	head(p, "spyre_bpftrace_ioctl_sample_every", "gauge",
	     "1 in this many VFIO ioctls is timed (the duration histograms) and recorded (--sample-ioctls); "
	     "counts, errors, DMA bytes and slow ioctls are of every one.");
	put(p, "spyre_bpftrace_ioctl_sample_every %u\n", s->sample_ioctls ? s->sample_ioctls : 1);
	head(p, "spyre_bpftrace_bpf_stats_enabled", "gauge",
	     "1 while the kernel counts BPF programs' runs and run time (ctl cost, or kernel.bpf_stats_enabled); "
	     "0: the two counters below stand still.");
	put(p, "spyre_bpftrace_bpf_stats_enabled %d\n", s->bpf_stats ? 1 : 0);
	head(p, "spyre_bpftrace_bpf_run_seconds_total", "counter",
	     "Time the kernel spent in the daemon's BPF programs while it counted, by program.");
	for (int i = 0; i < s->nprogs; i++)
		put(p, "spyre_bpftrace_bpf_run_seconds_total{program=\"%s\"} %.9f\n", s->progs[i].name,
		    s->progs[i].seconds);
	head(p, "spyre_bpftrace_bpf_runs_total", "counter",
	     "Runs of the daemon's BPF programs while the kernel counted, by program.");
	for (int i = 0; i < s->nprogs; i++)
		put(p, "spyre_bpftrace_bpf_runs_total{program=\"%s\"} %llu\n", s->progs[i].name,
		    (unsigned long long)s->progs[i].runs);
	head(p, "spyre_bpftrace_snapshots_total", "counter",
	     "Snapshots of the flight recorder written, by why (asked, a window asked, a trigger).");
	for (int r = 0; r < SNAP_N; r++)
		put(p, "spyre_bpftrace_snapshots_total{reason=\"%s\"} %llu\n", snapshot_reason_name(r),
		    (unsigned long long)s->snapshots[r]);
	head(p, "spyre_bpftrace_snapshot_failures_total", "counter", "Snapshots that could not be written.");
	put(p, "spyre_bpftrace_snapshot_failures_total %llu\n", (unsigned long long)s->snapshot_failures);
	head(p, "spyre_bpftrace_snapshots_cut_total", "counter",
	     "Snapshots over --spool-mib alone, written with only their newest records.");
	put(p, "spyre_bpftrace_snapshots_cut_total %llu\n", (unsigned long long)s->snapshots_cut);
	head(p, "spyre_bpftrace_detail_windows_total", "counter",
	     "Detail windows (runtime uprobes on the processes with a card) opened, by why.");
	for (int r = WIN_SAMPLE; r <= WIN_TRIGGER; r++)
		put(p, "spyre_bpftrace_detail_windows_total{reason=\"%s\"} %llu\n", window_reason_name(r),
		    (unsigned long long)s->windows[r]);
	head(p, "spyre_bpftrace_detail_windows_deferred_total", "counter",
	     "Detail windows not opened (a sample skipped, a request told to retry, a trigger's snapshot "
	     "taken without one) while the last window's uprobes were still being removed.");
	put(p, "spyre_bpftrace_detail_windows_deferred_total %llu\n", (unsigned long long)s->windows_deferred);
	head(p, "spyre_bpftrace_uprobes_being_removed", "gauge",
	     "A closed window's uprobes the kernel has not removed yet (it waits for grace periods).");
	put(p, "spyre_bpftrace_uprobes_being_removed %llu\n", (unsigned long long)s->uprobes_removing);
	head(p, "spyre_bpftrace_detail_window_open", "gauge", "1 while a detail window is open.");
	put(p, "spyre_bpftrace_detail_window_open %d\n", s->window_open);
	head(p, "spyre_bpftrace_hook_info", "gauge",
	     "How the daemon sees what it counts: hook, and the "
	     "mechanism (ioctl: fentry or kprobe on vfio's handlers, no other syscall pays; tracepoint: the "
	     "syscall tracepoints, every syscall of the host on the kernel's traced path. wake, in detail "
	     "windows: eventfd, read at the interrupt, no other wake-up pays; sched_waking: every wake-up).");
	put(p, "spyre_bpftrace_hook_info{hook=\"ioctl\",mechanism=\"%s\"} 1\n",
	    s->ioctl_hook ? s->ioctl_hook : "tracepoint");
	if (s->wake_hook)
		put(p, "spyre_bpftrace_hook_info{hook=\"wake\",mechanism=\"%s\"} 1\n", s->wake_hook);
	head(p, "spyre_bpftrace_recorder_bytes", "gauge", "Memory the flight recorder holds.");
	put(p, "spyre_bpftrace_recorder_bytes %llu\n", (unsigned long long)s->recorder_bytes);
	for (int i = 0; i < s->recorder_evicted_uids; i++)
		evicted += s->recorder_evicted[i].records;
	head(p, "spyre_bpftrace_recorder_dropped_records_total", "counter",
	     "Records the flight recorder let go: aged, older than --recorder-seconds; evicted, the oldest "
	     "of the user holding the most, to make room when full; unkept, too large or no memory.");
	put(p, "spyre_bpftrace_recorder_dropped_records_total{reason=\"aged\"} %llu\n",
	    (unsigned long long)s->recorder_aged);
	put(p, "spyre_bpftrace_recorder_dropped_records_total{reason=\"evicted\"} %llu\n", (unsigned long long)evicted);
	put(p, "spyre_bpftrace_recorder_dropped_records_total{reason=\"unkept\"} %llu\n",
	    (unsigned long long)s->recorder_unkept);
	head(p, "spyre_bpftrace_recorder_evicted_records_total", "counter",
	     "Records evicted from the full flight recorder, by the user whose they were (uid; kernel: "
	     "interrupts and descriptions; the first 16 users by number, the rest as other).");
	for (int i = 0; i < s->recorder_evicted_uids; i++)
		put(p, "spyre_bpftrace_recorder_evicted_records_total{uid=\"%s\"} %llu\n",
		    recorder_uid_name(s->recorder_evicted[i].uid, name),
		    (unsigned long long)s->recorder_evicted[i].records);
	head(p, "spyre_bpftrace_spool_bytes", "gauge", "Bytes of snapshots in the state directory's spool.");
	put(p, "spyre_bpftrace_spool_bytes %llu\n", (unsigned long long)s->spool_bytes);
	head(p, "spyre_bpftrace_scrapes_total", "counter", "Pages of metrics served.");
	put(p, "spyre_bpftrace_scrapes_total %llu\n", (unsigned long long)s->scrapes);
	head(p, "spyre_bpftrace_build_info", "gauge", "The daemon's version.");
	put(p, "spyre_bpftrace_build_info{version=\"%s\"} 1\n", SBT_VERSION);
	head(p, "process_start_time_seconds", "gauge", "When the daemon started, in seconds since the epoch.");
	put(p, "process_start_time_seconds %.3f\n", s->start_time);
	self_process(p);
}

/* The cards' jobs in detail windows: sampled, with the windows' seconds
 * to divide by. */
static void device_metrics(struct page *p, const struct devstats *s)
{
	head(p, "spyre_bpftrace_detail_window_seconds_total", "counter",
	     "Seconds detail windows were open: the time the spyre_device_* metrics sample.");
	put(p, "spyre_bpftrace_detail_window_seconds_total %.6f\n", s ? s->window_s : 0.0);
	/* the families are declared before any window has had a job */
	head(p, "spyre_device_job_duration_seconds", "histogram",
	     "Device jobs that ran while a detail window was open (sampled: see "
	     "spyre_bpftrace_detail_window_seconds_total), launch to completion, per card and engine.");
	for (int i = 0; s && i < s->ncards; i++)
		for (int e = 0; e < DEVSTATS_ENGINES; e++) {
			const struct devstats_engine *g = &s->cards[i].eng[e];
			const char *card = s->cards[i].card, *eng = devstats_engine_names[e];
			uint64_t below = 0;

			if (!g->jobs)
				continue;
			for (int b = 0; b < DEVSTATS_LE; b++) {
				below += g->bucket[b];
				put(p,
				    "spyre_device_job_duration_seconds_bucket{card=\"%s\",engine=\"%s\",le=\"%g\"} "
				    "%llu\n",
				    card, eng, devstats_le[b], (unsigned long long)below);
			}
			put(p, "spyre_device_job_duration_seconds_bucket{card=\"%s\",engine=\"%s\",le=\"+Inf\"} %llu\n",
			    card, eng, (unsigned long long)g->jobs);
			put(p, "spyre_device_job_duration_seconds_sum{card=\"%s\",engine=\"%s\"} %.9f\n", card, eng,
			    g->sum_s);
			put(p, "spyre_device_job_duration_seconds_count{card=\"%s\",engine=\"%s\"} %llu\n", card, eng,
			    (unsigned long long)g->jobs);
		}
	head(p, "spyre_device_busy_seconds_total", "counter",
	     "Time an engine of a card had a job in flight while a detail window was open (sampled).");
	for (int i = 0; s && i < s->ncards; i++)
		for (int e = 0; e < DEVSTATS_ENGINES; e++)
			if (s->cards[i].eng[e].jobs)
				put(p, "spyre_device_busy_seconds_total{card=\"%s\",engine=\"%s\"} %.9f\n",
				    s->cards[i].card, devstats_engine_names[e], s->cards[i].eng[e].busy_s);
}

char *metrics_render(const struct daemon_counters *f, const struct daemon_counts *c, const struct metrics_self *self,
		     size_t *len)
{
	struct page p = { 0 };

	ioctls(&p, c);
	cards(&p, f, c);
	allocations(&p, self->alloc);
	device_metrics(&p, self->devstats);
	self_metrics(&p, self);
	if (p.oom) {
		free(p.buf);
		return NULL;
	}
	*len = p.len;
	return p.buf;
}
