/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What the ring-buffer thread tells the main loop while a detail window is
 * open: processes that turn up, and when a process of the window first
 * uses a card. A process the window does not trace yet shows itself by its
 * first record: a runtime call (the window's uprobes are on every process
 * that maps a runtime library, and BPF traced it from that call) or a VFIO
 * ioctl (it took a card, and its runtime is a file the daemon has not read
 * yet). Its first VFIO ioctl and each VFIO group it uses are told too, so
 * that its cards are described while the process is still there. The
 * drainer sees every record: the common case, nothing new, is one load.
 */
#ifndef SBT_NEWCOMERS_H
#define SBT_NEWCOMERS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/window.h"
#include "events.h"

#define NEWCOMERS_HASH 1024 /* a power of two */
#define NEWCOMERS_QUEUE 256
#define NEWCOMERS_KNOWN (WINDOW_MAX_PROCS * 2)
#define NEWCOMERS_GROUPS 256

enum news_kind {
	NEWS_JOINED, /* a process not in the window: how says by what */
	NEWS_CARD, /* a process in the window made its first VFIO ioctl */
	NEWS_GROUP, /* a process of the window used a VFIO group's fd */
};

struct newcomer {
	enum news_kind kind;
	pid_t pid;
	enum window_join how; /* NEWS_JOINED */
	int fd; /* NEWS_GROUP */
	uint64_t seen; /* BOOTTIME ns of the record that told it */
};

struct newcomers {
	pthread_mutex_t lock;
	int wake_fd; /* an eventfd the main loop polls; -1 */
	bool on;
	uint64_t from; /* the window's start: older records (still in the ring buffer) tell nothing */
	/* the fast path: a tgid (or tgid and fd) told already, or 0 */
	uint32_t call_hash[NEWCOMERS_HASH], ioctl_hash[NEWCOMERS_HASH], group_hash[NEWCOMERS_HASH];
	pid_t known[NEWCOMERS_KNOWN];
	bool carded[NEWCOMERS_KNOWN];
	int nknown;
	struct {
		pid_t pid;
		int fd;
	} groups[NEWCOMERS_GROUPS];
	int ngroups;
	struct newcomer queue[NEWCOMERS_QUEUE];
	int nqueue;
	uint64_t overflow; /* news not told for want of room (told at a later record if room then) */
};

/* 0, or -errno. */
int newcomers_init(struct newcomers *n);
void newcomers_free(struct newcomers *n);
/* A window opens on these processes (holding a card): any other that
 * shows itself is told. */
void newcomers_start(struct newcomers *n, const pid_t *pids, int npids, uint64_t from);
/* The window closed: nothing is told any more. */
void newcomers_stop(struct newcomers *n);
/* The ring buffer's thread: one record. */
void newcomers_note(struct newcomers *n, const struct sbt_hdr *h);
/* The main loop: up to max pieces of news told since the last call, in
 * order; the wake fd read empty (call again while it returns max).
 * Returns how many. */
int newcomers_take(struct newcomers *n, struct newcomer *out, int max);

#endif
