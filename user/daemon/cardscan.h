/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Which VFIO groups a process holds, read from its open files on a thread
 * of their own. A card holder's files are its own to multiply (up to
 * PROC_FD_SCAN_MAX of them are looked at, a readlink each): many holders
 * with many files delay their own joining a window, never the main loop.
 * The main loop asks; the thread reads; the main loop takes the answers
 * when wake_fd is readable.
 */
#ifndef SBT_CARDSCAN_H
#define SBT_CARDSCAN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CARDSCAN_MAX_ASKED 512 /* asked and not yet taken back: two windows' processes */
#define CARDSCAN_MAX_GROUPS 8 /* a process's groups reported (MAX_CARDS in the model) */

struct cardscan_answer {
	pid_t pid;
	uint64_t tag; /* the asker's: which window asked */
	int ngroups;
	int groups[CARDSCAN_MAX_GROUPS];
	bool capped; /* it had more files than were looked at */
};

struct cardscan {
	pthread_t thread;
	bool running, quit;
	size_t fd_max;
	int wake_fd; /* eventfd: answers to take */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* asked (ntodo from first), then answered (ndone): each a ring slot */
	struct cardscan_answer todo[CARDSCAN_MAX_ASKED], done[CARDSCAN_MAX_ASKED];
	int first, ntodo, busy, ndone; /* busy: one being read */
};

/* The thread started; 0, or -errno. fd_max: the files looked at a process. */
int cardscan_start(struct cardscan *s, size_t fd_max);
/* PID's groups asked for; 0, or -EBUSY when CARDSCAN_MAX_ASKED are out. */
int cardscan_ask(struct cardscan *s, pid_t pid, uint64_t tag);
/* Up to max answers, oldest first; how many. */
int cardscan_take(struct cardscan *s, struct cardscan_answer *out, int max);
/* What is asked and not read is dropped, the thread ended. */
void cardscan_stop(struct cardscan *s);

#endif
