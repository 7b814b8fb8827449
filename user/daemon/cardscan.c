// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/procfs.h"
#include "base/thread.h"
#include "daemon/cardscan.h"

static void group_cb(int fd, const char *target, void *ctx)
{
	struct cardscan_answer *a = ctx;
	int group = vfio_group_of_path(target);

	(void)fd;
	if (group < 0 || a->ngroups == CARDSCAN_MAX_GROUPS)
		return;
	for (int i = 0; i < a->ngroups; i++)
		if (a->groups[i] == group)
			return;
	a->groups[a->ngroups++] = group;
}

static void *scan(void *arg)
{
	struct cardscan *s = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		struct cardscan_answer a;

		while (!s->ntodo && !s->quit)
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->quit)
			break;
		a = s->todo[s->first];
		s->first = (s->first + 1) % CARDSCAN_MAX_ASKED;
		s->ntodo--;
		s->busy = 1;
		pthread_mutex_unlock(&s->lock);
		a.capped = proc_for_each_fd(a.pid, s->fd_max, group_cb, &a); /* the long part, off the lock */
		pthread_mutex_lock(&s->lock);
		s->busy = 0;
		s->done[s->ndone++] = a; /* room: asked ones were counted against it */
		if (write(s->wake_fd, &one, sizeof(one)) < 0) {
			/* the counter is full: the main loop is woken already */
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int cardscan_start(struct cardscan *s, size_t fd_max)
{
	int err;

	memset(s, 0, sizeof(*s));
	s->fd_max = fd_max;
	s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->wake_fd < 0)
		return -errno;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	if ((err = thread_start_quiet(&s->thread, "sbt-cardscan", scan, s))) {
		close(s->wake_fd);
		s->wake_fd = -1;
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cond);
		return err;
	}
	s->running = true;
	return 0;
}

int cardscan_ask(struct cardscan *s, pid_t pid, uint64_t tag)
{
	int err = 0;

	if (!s->running)
		return -ESRCH;
	pthread_mutex_lock(&s->lock);
	/* the one being read counts too: its answer needs a slot */
	if (s->ntodo + s->busy + s->ndone >= CARDSCAN_MAX_ASKED) {
		err = -EBUSY;
	} else {
		s->todo[(s->first + s->ntodo++) % CARDSCAN_MAX_ASKED] =
			(struct cardscan_answer){ .pid = pid, .tag = tag };
		pthread_cond_signal(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

int cardscan_take(struct cardscan *s, struct cardscan_answer *out, int max)
{
	uint64_t count;
	int n;

	if (!s->running)
		return 0;
	if (read(s->wake_fd, &count, sizeof(count)) < 0) {
		/* nothing signalled: there may still be answers (a full counter) */
	}
	pthread_mutex_lock(&s->lock);
	n = s->ndone < max ? s->ndone : max;
	memcpy(out, s->done, (size_t)n * sizeof(*out));
	memmove(s->done, s->done + n, (size_t)(s->ndone - n) * sizeof(*out));
	s->ndone -= n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void cardscan_stop(struct cardscan *s)
{
	if (!s->running)
		return;
	pthread_mutex_lock(&s->lock);
	s->quit = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	close(s->wake_fd);
	s->wake_fd = -1;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	s->running = false;
}
