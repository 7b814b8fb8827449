// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/thread.h"
#include "daemon/control_server.h"

/* A request line within a second of connecting; a refused peer's is read
 * for a moment only (answering before it came would close on a peer still
 * writing, which then sees a reset instead of why). */
#define REQUEST_MS 1000
#define REFUSED_MS 200

struct control_client {
	int fd;
	bool allowed;
	long long deadline;
	size_t got;
	char line[CONTROL_LINE];
};

/* Answered (or not) and closed; its place given up. */
static void drop(struct control_server *s, int i, const char *answer)
{
	struct control_client *c = s->pending[i];

	if (answer)
		control_reply(c->fd, answer);
	else
		close(c->fd);
	free(c);
	s->pending[i] = s->pending[--s->npending];
}

/* A whole request: to the main loop, or "busy" when it has enough. */
static void hand_over(struct control_server *s, int i)
{
	struct control_client *c = s->pending[i];
	char *nl = memchr(c->line, '\n', c->got);
	uint64_t one = 1;
	char *line;

	*nl = 0;
	pthread_mutex_lock(&s->lock);
	if (s->nready == CONTROL_READY || !(line = strdup(c->line))) {
		s->busy++;
		pthread_mutex_unlock(&s->lock);
		drop(s, i, "error: busy; hint: ask again in a moment\n");
		return;
	}
	s->ready[s->nready].fd = c->fd;
	s->ready[s->nready++].line = line;
	pthread_mutex_unlock(&s->lock);
	if (write(s->wake_fd, &one, sizeof(one)) < 0) {
		/* the count is full: the main loop is woken already */
	}
	free(c);
	s->pending[i] = s->pending[--s->npending];
}

static void accept_all(struct control_server *s)
{
	for (;;) {
		struct ucred peer;
		socklen_t plen = sizeof(peer);
		struct control_client *c;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0)
			return;
		if (s->npending == CONTROL_PENDING) { /* the oldest waiting gives way */
			int oldest = 0;

			for (int i = 1; i < s->npending; i++)
				if (s->pending[i]->deadline < s->pending[oldest]->deadline)
					oldest = i;
			s->busy++;
			drop(s, oldest, "error: busy: too many clients waiting; hint: ask again in a moment\n");
		}
		if (!(c = malloc(sizeof(*c)))) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->got = 0;
		c->allowed = !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &plen) &&
			     (peer.uid == 0 || peer.uid == geteuid());
		c->deadline = sbt_now_mono_ms() + (c->allowed ? REQUEST_MS : REFUSED_MS);
		s->pending[s->npending++] = c;
	}
}

/* What client i sent; false once it is done with (handed over or dropped). */
static bool take_input(struct control_server *s, int i)
{
	struct control_client *c = s->pending[i];
	ssize_t n = read(c->fd, c->line + c->got, sizeof(c->line) - 1 - c->got);

	if (n > 0)
		c->got += (size_t)n;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n > 0 && !memchr(c->line, '\n', c->got) && c->got + 1 < sizeof(c->line))
		return true;
	if (!c->allowed)
		drop(s, i, "error: not allowed; hint: run ctl as root\n");
	else if (memchr(c->line, '\n', c->got))
		hand_over(s, i);
	else
		drop(s, i, "error: no request line; hint: spyre-bpftrace ctl --help\n");
	return false;
}

static void *serve(void *arg)
{
	struct control_server *s = arg;
	struct pollfd p[2 + CONTROL_PENDING];

	for (;;) {
		long long now = sbt_now_mono_ms(), wait = REQUEST_MS;
		int n = s->npending;

		/* past their deadline: a refused peer is told why, a silent one too */
		for (int i = s->npending - 1; i >= 0; i--)
			if (s->pending[i]->deadline <= now)
				drop(s, i,
				     s->pending[i]->allowed
					     ? "error: no request line; hint: spyre-bpftrace ctl --help\n"
					     : "error: not allowed; hint: run ctl as root\n");
		n = s->npending;
		p[0] = (struct pollfd){ s->stop_fd, POLLIN, 0 };
		p[1] = (struct pollfd){ s->lfd, POLLIN, 0 };
		for (int i = 0; i < n; i++) {
			p[2 + i] = (struct pollfd){ s->pending[i]->fd, POLLIN, 0 };
			if (s->pending[i]->deadline - now < wait)
				wait = s->pending[i]->deadline - now;
		}
		/* with no client waiting, nothing is due: asleep until one comes or the stop */
		if (poll(p, (nfds_t)(2 + n), n ? (int)(wait > 0 ? wait : 0) : -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		/* from the last: a client done with moves the last into its place */
		for (int i = n - 1; i >= 0; i--)
			if (p[2 + i].revents)
				take_input(s, i);
		if (p[1].revents)
			accept_all(s);
	}
	while (s->npending)
		drop(s, s->npending - 1, NULL);
	return NULL;
}

int control_server_start(struct control_server *s, int lfd, char *err, size_t errlen)
{
	int ret = 0;

	memset(s, 0, sizeof(*s));
	s->lfd = lfd;
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&s->lock, NULL);
	if (s->wake_fd < 0 || s->stop_fd < 0 || (ret = thread_start_quiet(&s->thread, "sbt-control", serve, s))) {
		snprintf(err, errlen, "cannot serve the control socket: %s",
			 strerror(s->wake_fd < 0 || s->stop_fd < 0 ? errno : -ret));
		if (s->wake_fd >= 0)
			close(s->wake_fd);
		if (s->stop_fd >= 0)
			close(s->stop_fd);
		s->wake_fd = s->stop_fd = -1;
		return -1;
	}
	s->started = true;
	return 0;
}

int control_server_next(struct control_server *s, char *line, size_t len)
{
	uint64_t count;
	int fd = -1;

	if (read(s->wake_fd, &count, sizeof(count)) < 0) {
		/* nothing counted: what is ready is looked at all the same */
	}
	pthread_mutex_lock(&s->lock);
	if (s->nready) {
		fd = s->ready[0].fd;
		snprintf(line, len, "%s", s->ready[0].line);
		free(s->ready[0].line);
		memmove(s->ready, s->ready + 1, (size_t)--s->nready * sizeof(s->ready[0]));
	}
	pthread_mutex_unlock(&s->lock);
	return fd;
}

void control_server_stop(struct control_server *s)
{
	uint64_t one = 1;

	if (!s->started)
		return;
	if (write(s->stop_fd, &one, sizeof(one)) < 0) {
		/* an eventfd takes this always */
	}
	pthread_join(s->thread, NULL);
	for (int i = 0; i < s->nready; i++) {
		close(s->ready[i].fd);
		free(s->ready[i].line);
	}
	s->nready = 0;
	close(s->wake_fd);
	close(s->stop_fd);
	pthread_mutex_destroy(&s->lock);
	s->started = false;
}
