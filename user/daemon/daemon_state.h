/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's state, shared by the files of its main loop: setup, loop and
 * stop (daemon.c), the snapshots it asks for (daemon_snapshots.c), the
 * detail windows and triggers it tends (daemon_windows.c) and the control
 * requests it serves (daemon_requests.c). Each of the threads it starts
 * (drainer.h, discovery.h, cardscan.h, control_server.h, http.h,
 * snapshot_queue.h) has a header of its own.
 */
#ifndef SBT_DAEMON_STATE_H
#define SBT_DAEMON_STATE_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "attach/attach.h"
#include "attach/metawrite.h"
#include "attach/reaper.h"
#include "daemon/cardscan.h"
#include "daemon/control.h"
#include "daemon/control_server.h"
#include "daemon/cost.h"
#include "daemon/counters.h"
#include "daemon/devstats.h"
#include "daemon/discovery.h"
#include "daemon/drainer.h"
#include "daemon/kubelet.h"
#include "daemon/metrics.h"
#include "daemon/newcomers.h"
#include "daemon/options.h"
#include "daemon/recorder.h"
#include "daemon/snapshot.h"
#include "daemon/snapshot_queue.h"
#include "daemon/triggers.h"
#include "daemon/window.h"

#define SWEEP_SECONDS 10
#define TRIGGER_CHECK_SECONDS 5
#define KUBELET_SECONDS 30 /* pods come and go slowly; one small call each time */
#define NS 1000000000ull
#define NO_RECORDER "error: this daemon runs with --no-recorder; hint: restart it without\n"

struct daemon {
	struct daemon_opts *o;
	struct attacher at;
	struct link_reaper reaper; /* a closed window's uprobes go here */
	bool reaper_said; /* a window waits for it: said once */
	struct daemon_counters counters;
	struct daemon_counts *counts; /* for the triggers */
	struct http_server *http;
	pthread_mutex_t lock; /* the counters' cards and maps, between scrapes and reloads */
	struct cost_measure cost; /* ctl cost's, while one runs (under lock) */
	int control_fd; /* the control socket; -1 */
	int control_lock; /* its directory's lock, held while the daemon runs; -1 */
	struct control_server ctl; /* its clients, read on a thread of their own */
	struct drainer dr; /* the ring buffer into rec; dr.rb NULL: no flight recorder */
	pthread_mutex_t rec_lock; /* rec, between the drainer and the main loop */
	struct flight_recorder rec;
	struct meta_writer mw; /* what the windows say of their processes, into the recorder */
	struct detail_window win;
	struct newcomers news; /* from the drainer: who turned up in the window */
	struct discovery disc; /* library searches, off the main loop */
	struct cardscan scan; /* card holders' open files, off the main loop */
	pid_t learned[SBT_MAX_PIDS]; /* card holders whose mapped libraries were read */
	unsigned int nlearned; /* a ring: ever added */
	struct { /* a ctl record waits for the window's end */
		int client; /* -1: none */
		uint64_t from;
		char path[CONTROL_LINE]; /* "": into the spool */
		const char *note; /* for the answer, or NULL */
		/* its window waits for the last one's uprobes to go (seconds) */
		bool unopened;
		double seconds;
	} waiter;
	struct { /* a trigger's snapshot, written at the window's end */
		bool pending;
		bool waiting; /* the window ended; it waits for room in the queue */
		enum trigger kind;
		uint64_t from;
	} fired;
	struct triggers trig;
	struct snapshot_queue q;
	char spool[PATH_MAX];
	struct allocations alloc; /* the kubelet's, under lock */
	char kubelet_said[256]; /* its last error, said once */
	struct metrics_self self;
	struct devstats devstats; /* the detail windows' jobs; written by the main loop, under lock */
	bool vfio_found, vfio_looked; /* vfio's handlers known to BPF; looked once */
	/* records each user had evicted from the recorder, as last logged */
	struct recorder_evicted_uid evicted_said[RECORDER_USERS_NAMED + 1];
	struct control_request request; /* the one being served: its path is long */
};

/* SIGTERM or SIGINT came (its number); 0 until then */
extern volatile sig_atomic_t daemon_stop_sig;

/* daemon_snapshots.c: snapshots of the flight recorder, asked for and answered */
uint64_t daemon_realtime_offset(void);
int submit_snapshot(struct daemon *d, uint64_t from, uint64_t to, const char *path, enum snap_reason why, int client,
		    const char *note, bool can_wait);
void snapshot_done(void *ctx, struct snapshot_job *j, int ret, const char *err);
void snapshot_dropped(struct daemon *d, enum snap_reason why, const char *because);
void write_fired(struct daemon *d, uint64_t now);

/* daemon_windows.c: the detail windows and the triggers, a few times a second */
int card_holders(struct daemon *d, pid_t *pids);
bool open_window(struct daemon *d, enum window_reason why, double seconds);
void close_window(struct daemon *d);
void hear_news(struct daemon *d);
void take_cards(struct daemon *d);
void take_discoveries(struct daemon *d);
void tend_window(struct daemon *d, uint64_t now);
void check_triggers(struct daemon *d, uint64_t now);

/* daemon_requests.c: what ctl asks over the control socket */
void serve_control(struct daemon *d);
/* ctl cost's measure ends: its answer given, the statistics off again */
void end_cost(struct daemon *d, uint64_t now);

#endif
