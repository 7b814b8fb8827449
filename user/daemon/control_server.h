/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The control socket served off the daemon's main loop: a thread accepts
 * clients, checks each peer's uid and reads each request line with a
 * deadline of its own, all at once (poll), and hands whole requests to the
 * main loop through a queue it is woken for. A silent or slow client
 * delays nobody else; at most CONTROL_PENDING wait to be read (the oldest
 * is told "busy" and closed to make room for a new one) and
 * CONTROL_READY to be served.
 */
#ifndef SBT_CONTROL_SERVER_H
#define SBT_CONTROL_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "daemon/control.h"

#define CONTROL_PENDING 64
#define CONTROL_READY 16

struct control_client;

struct control_server {
	int lfd; /* the listening socket (control_listen) */
	int wake_fd; /* eventfd: readable when requests are ready */
	int stop_fd; /* eventfd: the thread's stop */
	pthread_t thread;
	bool started;
	struct control_client *pending[CONTROL_PENDING]; /* the thread's alone */
	int npending;
	pthread_mutex_t lock; /* ready */
	struct {
		int fd;
		char *line;
	} ready[CONTROL_READY];
	int nready;
	unsigned long long busy; /* clients told "busy" */
};

/* Serves lfd on a thread of its own. 0, or -1 with err. */
int control_server_start(struct control_server *s, int lfd, char *err, size_t errlen);
/* The next whole request: its line copied into line (NUL ended, no
 * newline) and the client's fd returned, for control_reply; -1 when none
 * is ready. Reads wake_fd's count too. */
int control_server_next(struct control_server *s, char *line, size_t len);
/* Ends the thread; clients waiting are closed. The listening fd is the
 * caller's. */
void control_server_stop(struct control_server *s);

#endif
