// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/log.h"
#include "base/thread.h"
#include "daemon/snapshot_queue.h"

/* The daemon stops (snapq_closing, snapq_stop). */
static bool closing(const struct snapshot_queue *q)
{
	return __atomic_load_n(&q->stopping, __ATOMIC_ACQUIRE) || __atomic_load_n(&q->closing, __ATOMIC_ACQUIRE);
}

/* Out of the idle class: the daemon's priority; once the daemon stops,
 * what is queued is all that is left to do before a stop timeout, on a
 * host that may be busy on every core: the ring buffer reader's then. */
static int awake_nice(const struct snapshot_queue *q)
{
	return closing(q) && SNAPQ_STOP_NICE < q->nice ? SNAPQ_STOP_NICE : q->nice;
}

/* 0 when a job of that many bytes of records may wait too, else -EBUSY
 * or -ENOBUFS (snapq_submit); once the daemon stops, one job more and no
 * bound on bytes, for what waited for room. */
static int take(const struct snapshot_queue *q, uint64_t bytes)
{
	if (q->n >= (closing(q) ? SNAPQ_MAX + 1 : SNAPQ_MAX))
		return -EBUSY;
	if (q->n && q->held + bytes > q->max_held && !closing(q))
		return -ENOBUFS;
	return 0;
}

/* The writer's class: idle (SCHED_IDLE, nice 19) while it writes a
 * snapshot nothing waits behind, so that it takes no CPU from the jobs;
 * the daemon's own otherwise: while others wait behind it (on a host busy
 * on every core an idle writer barely runs, and a backlog holds every
 * waiting snapshot's records in memory until the queue refuses the next
 * one, a trigger's among them), and when
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

/* A stop, or snapshots waiting behind the one being written. */
static bool behind(struct snapshot_queue *q)
{
	return closing(q) || __atomic_load_n(&q->n, __ATOMIC_ACQUIRE) > 0;
}

/* Out of the idle class, from another thread (best effort, as at the
 * start): at the daemon's priority, or above it once the daemon stops. */
static void wake_writer(struct snapshot_queue *q)
{
	struct sched_param sp = { 0 };

	if (!q->tid || !__atomic_load_n(&q->can_leave, __ATOMIC_ACQUIRE))
		return;
	pthread_setschedparam(q->thread, SCHED_OTHER, &sp);
	setpriority(PRIO_PROCESS, (id_t)q->tid, awake_nice(q));
}

static void *worker(void *arg)
{
	struct snapshot_queue *q = arg;
	/* raising its own priority (what leaving the idle class takes) is
	 * what CAP_SYS_NICE allows: tried on nice, then put back */
	bool can_leave = q->nice > -20 && !setpriority(PRIO_PROCESS, (id_t)gettid(), q->nice - 1);

	__atomic_store_n(&q->can_leave, can_leave, __ATOMIC_RELEASE);
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
		memmove(q->jobs, q->jobs + 1, (size_t)(q->n - 1) * sizeof(q->jobs[0]));
		__atomic_store_n(&q->n, q->n - 1, __ATOMIC_RELEASE);
		q->held -= j->len;
		q->busy = true;
		pthread_mutex_unlock(&q->lock);
		/* idle for the writing alone; not once the daemon stops (it
		 * waits for this), nor while others wait: both looked at again
		 * after, so that a stop or a submit that came between (each
		 * takes the writer out of the idle class) is not undone */
		if (can_leave && !behind(q)) {
			writer_class(q, true);
			if (behind(q))
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

int snapq_start(struct snapshot_queue *q, uint64_t max_held, snapq_done_fn done, void *ctx)
{
	int err;

	memset(q, 0, sizeof(*q));
	q->max_held = max_held;
	errno = 0;
	q->nice = getpriority(PRIO_PROCESS, 0); /* the calling thread's: the daemon's */
	if (errno)
		q->nice = 0;
	q->done = done;
	q->ctx = ctx;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->wake, NULL);
	if ((err = thread_start_quiet(&q->thread, "sbt-snapshots", worker, q)))
		return err;
	q->started = true;
	return 0;
}

int snapq_submit(struct snapshot_queue *q, struct snapshot_job *j)
{
	int ret = 0;

	pthread_mutex_lock(&q->lock);
	if (!(ret = take(q, j->len))) {
		q->jobs[q->n] = j;
		q->held += j->len;
		__atomic_store_n(&q->n, q->n + 1, __ATOMIC_RELEASE);
		if (q->busy) /* it waits behind one being written */
			wake_writer(q);
		pthread_cond_signal(&q->wake);
	}
	pthread_mutex_unlock(&q->lock);
	return ret;
}

bool snapq_room(struct snapshot_queue *q, uint64_t bytes)
{
	bool room;

	pthread_mutex_lock(&q->lock);
	room = !take(q, bytes);
	pthread_mutex_unlock(&q->lock);
	return room;
}

int snapq_pending(struct snapshot_queue *q)
{
	int n;

	pthread_mutex_lock(&q->lock);
	n = q->n + q->busy;
	pthread_mutex_unlock(&q->lock);
	return n;
}

void snapq_closing(struct snapshot_queue *q)
{
	if (!q->started)
		return;
	pthread_mutex_lock(&q->lock);
	__atomic_store_n(&q->closing, true, __ATOMIC_RELEASE);
	if (q->n || q->busy)
		wake_writer(q);
	pthread_mutex_unlock(&q->lock);
}

void snapq_stop(struct snapshot_queue *q)
{
	if (!q->started)
		return;
	/* what is queued is written before the daemon exits: out of the idle
	 * class and above the daemon's priority now, or a host kept busy
	 * starves the writer past any stop timeout (best effort, as at the
	 * start) */
	snapq_closing(q);
	pthread_mutex_lock(&q->lock);
	__atomic_store_n(&q->stopping, true, __ATOMIC_RELEASE);
	pthread_cond_signal(&q->wake);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->wake);
	q->started = false;
}
