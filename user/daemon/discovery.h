/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's library discovery, on a thread of its own. A process's
 * runtime libraries are found and read from files that process controls
 * (its maps, its LD_LIBRARY_PATH, inside its root): however slow that is,
 * the main loop (the control socket, windows' ends, the watchdog) goes on.
 * The main loop asks; the thread searches (probes/libfind.h), each search
 * within its deadline; the main loop takes the answers, when wake_fd is
 * readable, and attaches what they found (attach_found).
 */
#ifndef SBT_DISCOVERY_H
#define SBT_DISCOVERY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "probes/libfind.h"

#define DISCOVERY_MAX_JOBS 64 /* asked and not yet taken back */
/* A search's time (reading ELF, finding return sites): past it, it stops
 * at its next file; what it has not read waits for the next ask. */
#define DISCOVERY_BUDGET_NS (2 * 1000000000ull)

struct attacher;

struct discovery_job {
	struct discovery_job *next; /* answers, in order */
	pid_t pid; /* 0: only the places all processes share */
	bool mapped_only; /* only what it has mapped */
	/* a library read while the search goes on (its answer proper, last,
	 * has what remains): taken and attached at once */
	bool partial;
	uint64_t tag; /* the asker's: which window asked */
	uint64_t deadline_ns; /* boottime */
	uint64_t done_ns; /* boottime, when the search ended (or the library was read) */
	int err; /* 0, or -EINTR when it stopped early */
	struct lib_search search;
};

struct discovery {
	struct attacher *a;
	pthread_t thread;
	bool running;
	int wake_fd; /* eventfd: answers to take */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct discovery_job *todo[DISCOVERY_MAX_JOBS];
	int ntodo, busy; /* busy: one being searched */
	struct discovery_job *done, **done_tail; /* answers to take, oldest first */
	atomic_bool cancel; /* the search under way stops at its next file */
	bool quit;
};

/* The thread started for a's searches; 0, or -1 with err. */
int discovery_start(struct discovery *q, struct attacher *a, char *err, size_t errlen);
/* A search asked for; 0, or -EBUSY when DISCOVERY_MAX_JOBS are asked and
 * not ended, or -ENOMEM. */
int discovery_ask(struct discovery *q, pid_t pid, bool mapped_only, uint64_t tag, uint64_t deadline_ns);
/* The answers ready (up to max), oldest first: a search's libraries as
 * each is read (partial), then its end. The caller owns them
 * (discovery_job_free). */
int discovery_take(struct discovery *q, struct discovery_job **out, int max);
void discovery_job_free(struct discovery_job *j);
/* What is asked and not begun is dropped; the search under way stops at
 * its next file (its answer still comes, with what it read). */
void discovery_cancel(struct discovery *q);
/* The thread ended, waiting at most wait_ns for a file it is reading:
 * true when it ended (else it is left running, and the attacher must not
 * be freed). */
bool discovery_stop(struct discovery *q, uint64_t wait_ns);

#endif
