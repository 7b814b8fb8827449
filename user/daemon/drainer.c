// SPDX-License-Identifier: GPL-2.0-only
#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread.h"
#include "daemon/drainer.h"
#include "daemon/newcomers.h"
#include "daemon/recorder.h"

#define NS 1000000000ull
#define DRAINER_NICE (-10) /* SNAPQ_STOP_NICE too */
/* Records the drainer holds, in order, before it hands them to the
 * recorder: rather than wait for the recorder's lock (a snapshot's copy
 * in the main loop), it holds up to some 0.2 s of a detail window's
 * records, about 8 MiB; then it waits, and hands on all it holds. */
#define HELD_MAX 65536
#define HELD_FULL (-EOVERFLOW) /* on_record: stop the pass, hand on */
#define FINAL_DRAIN_NS (1 * NS) /* the ring buffer read at the stop, at most */
/* How long the thread sleeps between passes: records come with no wakeup
 * until the ring holds wakeup_bytes, and held ones are handed on once
 * settled. With nothing read last time and nothing held (an idle host),
 * longer: every wake of an idle daemon is a cost its host pays; whoever
 * needs a pass at once (a snapshot, a window, the stop) kicks. */
#define PASS_MS 200
#define PASS_WINDOW_MS 50
#define PASS_IDLE_MS 2000

/* A kernel record: held to be put in order (as it came, out of memory);
 * who it is about is news at once. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct drainer *dr = ctx;
	const struct sbt_hdr *h = data;

	if (size >= sizeof(*h) && sizeof(*h) + h->size <= size) {
		if (reorder_add(&dr->held, h)) {
			pthread_mutex_lock(dr->rec_lock);
			recorder_add(dr->rec, h, sbt_now_boottime());
			pthread_mutex_unlock(dr->rec_lock);
		}
		newcomers_note(dr->news, h);
	}
	/* taken; but a pass that outruns its producers stops here to hand
	 * on what it holds, rather than hold without bound */
	return dr->held.n >= HELD_MAX ? HELD_FULL : 0;
}

static void to_recorder(void *ctx, const struct sbt_hdr *h)
{
	struct drainer *dr = ctx;

	recorder_add(dr->rec, h, dr->released_at);
}

/* Into the recorder, in order, what began long enough ago that nothing
 * earlier can still come (all: everything held). False when the recorder
 * was busy and the records stay held for the next pass. */
static bool release_held(struct drainer *dr, bool all)
{
	uint64_t now = sbt_now_boottime();

	if (!dr->held.n)
		return true;
	/* the kernel's ring buffer never waits behind a snapshot */
	if (!all && dr->held.n < HELD_MAX) {
		if (pthread_mutex_trylock(dr->rec_lock))
			return false;
	} else {
		pthread_mutex_lock(dr->rec_lock);
	}
	dr->released_at = now; /* one clock read a pass, not one a record */
	reorder_release_settled(&dr->held, now, all, to_recorder, dr);
	/* more than HELD_MAX in the reorder window (millions a second): in
	 * bounded memory, the order of those few ms may suffer */
	if (dr->held.n >= HELD_MAX)
		reorder_release(&dr->held, UINT64_MAX, to_recorder, dr);
	pthread_mutex_unlock(dr->rec_lock);
	return true;
}

/* The drainer outweighs the job threads it shares the CPUs with (nice
 * -10: nine times a nice-0 thread's share) so that a host busy on every
 * core still has its records read before the ring buffer fills; it needs
 * CAP_SYS_NICE, and without it runs as the rest of the daemon. */
static void drainer_priority(void)
{
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), DRAINER_NICE))
		sbt_info(1, "the ring buffer's thread runs at the daemon's priority: nice %d: %s\n", DRAINER_NICE,
			 strerror(errno));
}

/* Until the kernel wakes it, a kick, or ms. */
static void wait_pass(struct drainer *dr, int ms)
{
	struct epoll_event ev[2];
	uint64_t kicks;
	int n = epoll_wait(dr->epoll_fd, ev, 2, ms);

	for (int i = 0; i < n; i++)
		if (ev[i].data.fd == dr->kick_fd && read(dr->kick_fd, &kicks, sizeof(kicks)) < 0)
			break; /* EAGAIN: another read took it */
}

static void *drain(void *arg)
{
	struct drainer *dr = arg;
	uint64_t until;
	bool handed, idle = false;
	int n, got;

	drainer_priority();
	while (__atomic_load_n(&dr->running, __ATOMIC_ACQUIRE)) {
		wait_pass(dr, __atomic_load_n(dr->window_open, __ATOMIC_RELAXED) ? PASS_WINDOW_MS
			      : idle						 ? PASS_IDLE_MS
										 : PASS_MS);
		/* a stop is looked at between passes too: jobs that write as
		 * fast as this reads would keep it here for as long as they run */
		got = 0;
		do {
			n = ring_buffer__consume(dr->rb);
			got += n > 0 || n == HELD_FULL;
			handed = release_held(dr, false);
		} while (n == HELD_FULL && __atomic_load_n(&dr->running, __ATOMIC_ACQUIRE));
		/* a pass counts (drainer_catch_up) once what it read is in the recorder */
		if (handed)
			__atomic_add_fetch(&dr->drained, 1, __ATOMIC_RELEASE);
		idle = !got && !dr->held.n;
	}
	/* what came before the stop, for FINAL_DRAIN_NS at most: the same */
	until = sbt_now_boottime() + FINAL_DRAIN_NS;
	do {
		n = ring_buffer__consume(dr->rb);
		release_held(dr, true);
	} while (n == HELD_FULL && sbt_now_boottime() < until);
	return NULL;
}

int drainer_init(struct drainer *dr, int map_fd, struct flight_recorder *rec, pthread_mutex_t *rec_lock,
		 struct newcomers *news, const bool *window_open)
{
	memset(dr, 0, sizeof(*dr));
	dr->rec = rec;
	dr->rec_lock = rec_lock;
	dr->news = news;
	dr->window_open = window_open;
	dr->kick_fd = dr->epoll_fd = -1;
	dr->rb = ring_buffer__new(map_fd, on_record, dr, NULL);
	if (!dr->rb)
		return -ENOMEM;
	/* the ring buffer's own epoll set and the kick, waited on together */
	dr->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	dr->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (dr->kick_fd < 0 || dr->epoll_fd < 0 ||
	    epoll_ctl(dr->epoll_fd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(dr->rb),
		      &(struct epoll_event){ .events = EPOLLIN, .data.fd = ring_buffer__epoll_fd(dr->rb) }) ||
	    epoll_ctl(dr->epoll_fd, EPOLL_CTL_ADD, dr->kick_fd,
		      &(struct epoll_event){ .events = EPOLLIN, .data.fd = dr->kick_fd })) {
		int err = -errno;

		drainer_free(dr);
		return err;
	}
	return 0;
}

int drainer_start(struct drainer *dr)
{
	int err;

	dr->running = true;
	if ((err = thread_start_quiet(&dr->thread, "sbt-drain", drain, dr)))
		dr->running = false;
	return err;
}

void drainer_kick(struct drainer *dr)
{
	uint64_t one = 1;

	if (dr->rb && dr->kick_fd >= 0 && write(dr->kick_fd, &one, sizeof(one)) < 0)
		return; /* the count is full: it is kicked already */
}

void drainer_catch_up(struct drainer *dr)
{
	uint64_t seen;

	/* a pass that starts past the reorder window hands on all of now */
	usleep(REORDER_WINDOW_NS / 1000);
	seen = __atomic_load_n(&dr->drained, __ATOMIC_ACQUIRE);
	/* each pass at once: an idle thread's sleep is long */
	for (int i = 0; i < 100 && __atomic_load_n(&dr->drained, __ATOMIC_ACQUIRE) < seen + 2; i++) {
		drainer_kick(dr);
		usleep(5000);
	}
}

void drainer_stop(struct drainer *dr)
{
	if (!dr->running)
		return;
	__atomic_store_n(&dr->running, false, __ATOMIC_RELEASE);
	drainer_kick(dr);
	pthread_join(dr->thread, NULL);
}

void drainer_free(struct drainer *dr)
{
	if (!dr->rb) /* never made (its fds are not set either) */
		return;
	reorder_free(&dr->held);
	ring_buffer__free(dr->rb);
	dr->rb = NULL;
	if (dr->kick_fd >= 0)
		close(dr->kick_fd);
	if (dr->epoll_fd >= 0)
		close(dr->epoll_fd);
	dr->kick_fd = dr->epoll_fd = -1;
}
