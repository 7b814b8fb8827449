/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Links destroyed on a thread of their own. Removing a uprobe waits for
 * the kernel's grace periods, three a link and one after another (they
 * are taken under one kernel lock): 0.1 s a link on a quiet host, up to
 * 5 s on one busy on every core, where a window's 26 uprobes once took
 * 131 s to go. The daemon's main loop hands them over and goes on.
 */
#ifndef SBT_REAPER_H
#define SBT_REAPER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "attach/links.h"

struct link_reaper {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct link_set todo;
	size_t busy; /* taken off todo, being destroyed */
	bool started, stopping;
};

/* 0, or -errno (then links are destroyed where they are given up). */
int reaper_start(struct link_reaper *r);
/* Every link of ls, to be destroyed (ls is left empty, its memory kept). */
void reaper_take(struct link_reaper *r, struct link_set *ls);
/* Links handed over and not yet gone. */
size_t reaper_pending(struct link_reaper *r);
/* Waits until every link handed over is gone, and ends the thread. */
void reaper_stop(struct link_reaper *r);

#endif
