// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/log.h"
#include "base/thread.h"
#include "daemon/snapshot_queue.h"

/* Out of the idle class: the daemon's priority; once the daemon stops,
 * what is queued is all that is left to do before a stop timeout, on a
 * host that may be busy on every core: the ring buffer reader's then. */
static int awake_nice(const struct snapshot_queue *q)
{
	return __atomic_load_n(&q->stopping, __ATOMIC_ACQUIRE) && SNAPQ_STOP_NICE < q->nice ? SNAPQ_STOP_NICE
											 : q->nice;
}

/* The writer's class: idle (SCHED_IDLE, nice 19) while it writes, so that
 * a snapshot takes no CPU from the jobs; the daemon's own otherwise, when
 * it holds what other threads wait for (the queue's lock; in done() the
 * daemon's counters lock and its log): an idle thread preempted holding
 * one on a busy host would hold up the main loop, ctl and /metrics for as
 * long as the host stays busy. Without CAP_SYS_NICE a thread cannot leave
 * the idle class or nice 19 once in them: the writer then stays at the
 * daemon's priority. */
static void writer_class(struct snapshot_queue *q, bool idle)
{
	struct sched_param sp = { 0 };

	pthread_setschedparam(pthread_self(), idle ? SCHED_IDLE : SCHED_OTHER, &sp);
	setpriority(PRIO_PROCESS, (id_t)gettid(), idle ? 19 : awake_nice(q));
}

static void *worker(void *arg)
{
	struct snapshot_queue *q = arg;
	/* raising its own priority (what leaving the idle class takes) is
	 * what CAP_SYS_NICE allows: tried on nice, then put back */
	bool can_leave = q->nice > -20 && !setpriority(PRIO_PROCESS, (id_t)gettid(), q->nice - 1);

	if (can_leave) {
		setpriority(PRIO_PROCESS, (id_t)gettid(), q->nice);
	} else {
		sbt_info(1, "snapshots are written at the daemon's priority, not the idle class: no CAP_SYS_NICE "
			    "to leave it while the writer holds the daemon's locks\n");
	}
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
		/* idle for the writing alone; not once the daemon stops (it
		 * waits for this): looked at again after, so that a stop that
		 * came between is not undone */
		if (can_leave && !__atomic_load_n(&q->stopping, __ATOMIC_ACQUIRE)) {
			writer_class(q, true);
			if (__atomic_load_n(&q->stopping, __ATOMIC_ACQUIRE))
				writer_class(q, false);
		}
		ret = snapshot_write(j, err, sizeof(err));
		if (can_leave)
			writer_class(q, false);
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
	errno = 0;
	q->nice = getpriority(PRIO_PROCESS, 0); /* the calling thread's: the daemon's */
	if (errno)
		q->nice = 0;
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
	__atomic_store_n(&q->stopping, true, __ATOMIC_RELEASE);
	/* what is queued is written before the daemon exits: out of the idle
	 * class and above the daemon's priority now, or a host kept busy
	 * starves the writer past any stop timeout (best effort, as at the
	 * start) */
	if (q->n || q->busy) {
		pthread_setschedparam(q->thread, SCHED_OTHER, &sp);
		if (q->tid)
			setpriority(PRIO_PROCESS, (id_t)q->tid, awake_nice(q));
	}
	pthread_cond_signal(&q->wake);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->wake);
	q->started = false;
}
