// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/thread.h"
#include "daemon/snapshot_queue.h"

static void *worker(void *arg)
{
	struct snapshot_queue *q = arg;
	struct sched_param sp = { 0 };

	/* best effort: without them it only runs at the daemon's priority */
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
	pthread_mutex_lock(&q->lock);
	q->tid = gettid();
	for (;;) {
		struct snapshot_job *j;
		char err[512] = "";
		int ret;

		while (!q->n && !q->stopping)
			pthread_cond_wait(&q->wake, &q->lock);
		if (!q->n)
			break;
		j = q->jobs[0];
		memmove(q->jobs, q->jobs + 1, (size_t)--q->n * sizeof(q->jobs[0]));
		q->busy = true;
		pthread_mutex_unlock(&q->lock);
		ret = snapshot_write(j, err, sizeof(err));
		q->done(q->ctx, j, ret, err);
		snapshot_job_free(j);
		pthread_mutex_lock(&q->lock);
		q->busy = false;
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int snapq_start(struct snapshot_queue *q, snapq_done_fn done, void *ctx)
{
	int err;

	memset(q, 0, sizeof(*q));
	q->done = done;
	q->ctx = ctx;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->wake, NULL);
	if ((err = thread_start_quiet(&q->thread, worker, q)))
		return err;
	q->started = true;
	return 0;
}

int snapq_submit(struct snapshot_queue *q, struct snapshot_job *j)
{
	int ret = 0;

	pthread_mutex_lock(&q->lock);
	if (q->n == SNAPQ_MAX) {
		ret = -EBUSY;
	} else {
		q->jobs[q->n++] = j;
		pthread_cond_signal(&q->wake);
	}
	pthread_mutex_unlock(&q->lock);
	return ret;
}

int snapq_pending(struct snapshot_queue *q)
{
	int n;

	pthread_mutex_lock(&q->lock);
	n = q->n + q->busy;
	pthread_mutex_unlock(&q->lock);
	return n;
}

void snapq_stop(struct snapshot_queue *q)
{
	struct sched_param sp = { 0 };

	if (!q->started)
		return;
	pthread_mutex_lock(&q->lock);
	q->stopping = true;
	/* what is queued is written before the daemon exits: at the daemon's
	 * own priority now, or a host kept busy starves an idle-class writer
	 * past any stop timeout (best effort, as at the start) */
	if (q->n || q->busy) {
		pthread_setschedparam(q->thread, SCHED_OTHER, &sp);
		if (q->tid)
			setpriority(PRIO_PROCESS, (id_t)q->tid, getpriority(PRIO_PROCESS, 0));
	}
	pthread_cond_signal(&q->wake);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->wake);
	q->started = false;
}
