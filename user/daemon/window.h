/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's detail windows: runtime uprobes on the processes that hold a
 * card, only while a window is open. A window opens at a random moment of
 * every sampling period (a sample), on a trigger, or on request (ctl
 * record); its records (runtime calls, and the kernel events as always) go
 * to the flight recorder, so a snapshot of that time has the job in detail.
 * The windows of the last while are kept, for the manifests: a sampled
 * second stands for period/length seconds.
 */
#ifndef SBT_WINDOW_H
#define SBT_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "attach/trace_opts.h"

#define WINDOW_HISTORY 64

struct attacher;
struct meta_writer;

enum window_reason { WIN_SAMPLE, WIN_REQUEST, WIN_TRIGGER };

struct window_past {
	uint64_t from, to; /* BOOTTIME ns */
	enum window_reason reason;
	int procs;
};

struct detail_window {
	bool open;
	enum window_reason reason;
	uint64_t from, until; /* BOOTTIME ns */
	pid_t pids[SBT_MAX_PIDS];
	int npids;
	/* sampling: a window of sample_ns at a random time of each period_ns; 0: off */
	uint64_t sample_ns, period_ns, period_start, next_sample;
	unsigned int seed;
	struct window_past past[WINDOW_HISTORY]; /* a ring; npast ever closed */
	uint64_t npast;
	uint64_t opened[3]; /* by reason, over the daemon's life */
};

const char *window_reason_name(enum window_reason r);
/* Sampling on (sample_s > 0, period_s >= sample_s) or off; the first
 * sample at a random time of the first period from now. */
void window_sampling(struct detail_window *w, double sample_s, double period_s, uint64_t now);
/* Is a sample due now? (then the next one is scheduled) */
bool window_sample_due(struct detail_window *w, uint64_t now);
/* Opens a window until `until` on these processes (more join later with
 * window_add). The processes' names, threads and cards go to mw first.
 * Returns the uprobes attached, or -errno. */
int window_open(struct detail_window *w, struct attacher *a, struct meta_writer *mw,
		enum window_reason why, const pid_t *pids, int n, uint64_t now, uint64_t until);
/* Processes that took a card while the window is open. Returns how many joined. */
int window_add(struct detail_window *w, struct attacher *a, struct meta_writer *mw,
	       const pid_t *pids, int n);
/* The open window lasts at least until then. */
void window_extend(struct detail_window *w, uint64_t until);
/* Closes it: every uprobe released, the BPF filter emptied. */
void window_close(struct detail_window *w, struct attacher *a, uint64_t now);
/* The windows that overlap [from, to], as a JSON array (for a manifest),
 * the open one too. */
void window_json(const struct detail_window *w, uint64_t from, uint64_t to, char *out, size_t len);

#endif
