/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's ring buffer, drained by a thread of its own into the flight
 * recorder: a window's attach or a snapshot's copy in the main loop never
 * holds it up (in a window, runtime calls come by the hundred thousand a
 * second). Kernel records are held REORDER_WINDOW_NS and handed to the
 * recorder in the order things happened, as record does; who a record is
 * about is news for the window at once (newcomers.h).
 */
#ifndef SBT_DRAINER_H
#define SBT_DRAINER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "capture/reorder.h"

struct flight_recorder;
struct newcomers;
struct ring_buffer;

struct drainer {
	struct ring_buffer *rb; /* NULL: none made (no flight recorder) */
	pthread_t thread;
	bool running; /* its thread started and not yet told to stop */
	uint64_t drained; /* passes over rb finished (drainer_catch_up) */
	struct flight_recorder *rec;
	pthread_mutex_t *rec_lock; /* rec, between this thread and the main loop */
	struct newcomers *news;
	const bool *window_open; /* polled faster while it is */
	struct reorder held;
	uint64_t released_at; /* when the pass began to hand records on */
	int kick_fd; /* an eventfd: a pass now (drainer_kick) */
	int epoll_fd; /* the ring buffer's and kick_fd, waited on together */
};

/* The ring buffer of map_fd read into rec; 0, or -ENOMEM. */
int drainer_init(struct drainer *dr, int map_fd, struct flight_recorder *rec, pthread_mutex_t *rec_lock,
		 struct newcomers *news, const bool *window_open);
/* Its thread started; 0, or -errno. */
int drainer_start(struct drainer *dr);
/* A pass now, not at the end of the thread's sleep (a window opens). */
void drainer_kick(struct drainer *dr);
/* Waits (a little) for a whole pass that started after now and past the
 * reorder window: what the kernel wrote before now is in the recorder. */
void drainer_catch_up(struct drainer *dr);
/* The thread ended, once it has read what came before (a second at most). */
void drainer_stop(struct drainer *dr);
void drainer_free(struct drainer *dr);

#endif
