// SPDX-License-Identifier: GPL-2.0-only
/* The daemon's library discovery thread (discovery.h). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "attach/attach.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "daemon/discovery.h"

/* An answer to take; the main loop woken (a full counter wakes it too). */
static void answer(struct discovery *q, struct discovery_job *j)
{
	uint64_t one = 1;

	j->next = NULL;
	*q->done_tail = j;
	q->done_tail = &j->next;
	if (write(q->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, poll says readable already */
	}
}

/* A library just read goes to the main loop at once, as a partial answer
 * (if there is no memory for one, it stays with the search's end). */
static void library_read(struct lib_search *s, void *ctx)
{
	struct discovery *q = ctx;
	struct discovery_job *j = (void *)((char *)s - offsetof(struct discovery_job, search));
	struct discovery_job *part = malloc(sizeof(*part));

	if (!part)
		return;
	*part = (struct discovery_job){ .pid = j->pid,
					.mapped_only = j->mapped_only,
					.partial = true,
					.tag = j->tag,
					.deadline_ns = j->deadline_ns,
					.done_ns = sbt_now_boottime() };
	part->search.w = s->w;
	lib_search_hand_over(s, &part->search.found);
	pthread_mutex_lock(&q->lock);
	answer(q, part);
	pthread_mutex_unlock(&q->lock);
}

static void *searcher(void *arg)
{
	struct discovery *q = arg;

	pthread_mutex_lock(&q->lock);
	while (!q->quit) {
		struct discovery_job *j;
		struct lib_wants wants;

		if (!q->ntodo) {
			pthread_cond_wait(&q->cond, &q->lock);
			continue;
		}
		j = q->todo[0];
		memmove(q->todo, q->todo + 1, (size_t)--q->ntodo * sizeof(q->todo[0]));
		q->busy = 1;
		atomic_store(&q->cancel, false);
		pthread_mutex_unlock(&q->lock);

		wants = attach_lib_wants(q->a);
		lib_search_init(&j->search, &wants, j->deadline_ns, &q->cancel);
		j->search.on_library = library_read;
		j->search.on_library_ctx = q;
		j->err = j->mapped_only ? lib_search_mapped(&j->search, j->pid)
					: lib_search_all(&j->search, j->pid, NULL);
		j->done_ns = sbt_now_boottime();

		pthread_mutex_lock(&q->lock);
		q->busy = 0;
		answer(q, j);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int discovery_start(struct discovery *q, struct attacher *a, char *err, size_t errlen)
{
	int e;

	memset(q, 0, sizeof(*q));
	q->a = a;
	q->done_tail = &q->done;
	q->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->wake_fd < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		return -1;
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	if ((e = -thread_start_quiet(&q->thread, "sbt-libsearch", searcher, q))) {
		snprintf(err, errlen, "cannot start its thread: %s", strerror(e));
		close(q->wake_fd);
		q->wake_fd = -1;
		return -1;
	}
	q->running = true;
	return 0;
}

int discovery_ask(struct discovery *q, pid_t pid, bool mapped_only, uint64_t tag, uint64_t deadline_ns)
{
	struct discovery_job *j;
	int ret = 0;

	if (!q->running)
		return -ESRCH;
	if (!(j = calloc(1, sizeof(*j))))
		return -ENOMEM;
	*j = (struct discovery_job){ .pid = pid, .mapped_only = mapped_only, .tag = tag, .deadline_ns = deadline_ns };
	pthread_mutex_lock(&q->lock);
	if (q->ntodo + q->busy >= DISCOVERY_MAX_JOBS) {
		ret = -EBUSY;
	} else {
		q->todo[q->ntodo++] = j;
		pthread_cond_signal(&q->cond);
	}
	pthread_mutex_unlock(&q->lock);
	if (ret)
		free(j);
	return ret;
}

int discovery_take(struct discovery *q, struct discovery_job **out, int max)
{
	uint64_t count;
	bool more;
	int n;

	if (read(q->wake_fd, &count, sizeof(count)) < 0) {
		/* nothing to read: the answers are counted under the lock anyway */
	}
	pthread_mutex_lock(&q->lock);
	for (n = 0; n < max && q->done; n++) {
		out[n] = q->done;
		q->done = q->done->next;
	}
	more = q->done != NULL;
	if (!more)
		q->done_tail = &q->done;
	pthread_mutex_unlock(&q->lock);
	if (more) { /* more than max: come back for the rest */
		uint64_t one = 1;

		if (write(q->wake_fd, &one, sizeof(one)) < 0) {
			/* EAGAIN: readable already */
		}
	}
	return n;
}

void discovery_job_free(struct discovery_job *j)
{
	if (!j)
		return;
	lib_search_free(&j->search);
	free(j);
}

void discovery_cancel(struct discovery *q)
{
	struct discovery_job *dropped[DISCOVERY_MAX_JOBS];
	int n;

	if (!q->running)
		return;
	pthread_mutex_lock(&q->lock);
	n = q->ntodo;
	memcpy(dropped, q->todo, (size_t)n * sizeof(dropped[0]));
	q->ntodo = 0;
	if (q->busy)
		atomic_store(&q->cancel, true);
	pthread_mutex_unlock(&q->lock);
	for (int i = 0; i < n; i++)
		discovery_job_free(dropped[i]);
}

bool discovery_stop(struct discovery *q, uint64_t wait_ns)
{
	struct discovery_job *left[DISCOVERY_MAX_JOBS];
	struct timespec until;
	uint64_t at;
	int n;

	if (!q->running)
		return true;
	discovery_cancel(q);
	pthread_mutex_lock(&q->lock);
	q->quit = true;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	clock_gettime(CLOCK_REALTIME, &until);
	at = (uint64_t)until.tv_sec * 1000000000ull + (uint64_t)until.tv_nsec + wait_ns;
	until.tv_sec = (time_t)(at / 1000000000ull);
	until.tv_nsec = (long)(at % 1000000000ull);
	if (pthread_timedjoin_np(q->thread, NULL, &until)) {
		sbt_warn("library discovery: still reading a file after %.1f s; not waited for", (double)wait_ns / 1e9);
		return false;
	}
	q->running = false;
	while ((n = discovery_take(q, left, DISCOVERY_MAX_JOBS)) > 0)
		for (int i = 0; i < n; i++)
			discovery_job_free(left[i]);
	close(q->wake_fd);
	q->wake_fd = -1;
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	return true;
}
