/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Snapshot jobs written one after another by a thread of the lowest
 * priority (SCHED_IDLE, nice 19), so converting the last minutes to
 * Perfetto never competes with the traced job, nor holds up the daemon's
 * scrapes, control socket or ring buffer; at the daemon's priority while
 * others wait behind the one being written, so that a backlog drains.
 */
#ifndef SBT_SNAPSHOT_QUEUE_H
#define SBT_SNAPSHOT_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/snapshot.h"

#define SNAPQ_MAX 4
/* The writer's nice once the daemon stops and snapshots still wait: the
 * ring buffer reader's (daemon.c), so that jobs busy on every core do not
 * hold the stop past the service manager's timeout. Best effort: without
 * CAP_SYS_NICE it stays at the daemon's. */
#define SNAPQ_STOP_NICE (-10)

/* Told of each job once written (ret 0) or not (ret -1, err says why), in
 * the queue's thread; the job is freed after. */
typedef void (*snapq_done_fn)(void *ctx, struct snapshot_job *j, int ret, const char *err);

struct snapshot_queue {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct snapshot_job *jobs[SNAPQ_MAX + 1]; /* the last: at the stop alone */
	int n;
	/* the records of those waiting (not the one being written), and at
	 * most how many: what bounds the writer's backlog in memory */
	uint64_t held, max_held;
	bool busy, stopping, started;
	bool closing; /* the daemon stops: the stop's priority, one job more */
	bool can_leave; /* the writer may leave the idle class (CAP_SYS_NICE) */
	pid_t tid; /* the writer's, for its priority at the stop */
	int nice; /* the daemon's, which the writer takes while it holds anything shared */
	snapq_done_fn done;
	void *ctx;
};

/* 0, or -errno. max_held: bytes of records the jobs waiting may hold
 * together (one alone may hold more). */
int snapq_start(struct snapshot_queue *q, uint64_t max_held, snapq_done_fn done, void *ctx);
/* Takes the job: 0; -EBUSY when SNAPQ_MAX wait already, -ENOBUFS when
 * those waiting hold max_held with it (the job is the caller's still). A
 * job behind the one being written takes the writer out of the idle
 * class. */
int snapq_submit(struct snapshot_queue *q, struct snapshot_job *j);
/* Whether a job of that many bytes of records would be taken now. */
bool snapq_room(struct snapshot_queue *q, uint64_t bytes);
/* Jobs queued or being written. */
int snapq_pending(struct snapshot_queue *q);
/* The daemon stops: the writer at the stop's priority at once, and room
 * for one job over SNAPQ_MAX (one that waited for room). */
void snapq_closing(struct snapshot_queue *q);
/* Writes what is queued, then ends the thread. */
void snapq_stop(struct snapshot_queue *q);

#endif
