// SPDX-License-Identifier: GPL-2.0-only
/* What the ring-buffer thread tells the main loop in a window (newcomers.h). */
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "daemon/newcomers.h"

int newcomers_init(struct newcomers *n)
{
	memset(n, 0, sizeof(*n));
	pthread_mutex_init(&n->lock, NULL);
	n->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return n->wake_fd < 0 ? -errno : 0;
}

void newcomers_free(struct newcomers *n)
{
	if (n->wake_fd >= 0)
		close(n->wake_fd);
	n->wake_fd = -1;
	pthread_mutex_destroy(&n->lock);
}

static uint32_t *slot(uint32_t *hash, uint32_t key)
{
	return &hash[(key * 2654435761u) >> 22 & (NEWCOMERS_HASH - 1)];
}

static bool told(uint32_t *hash, uint32_t key)
{
	return __atomic_load_n(slot(hash, key), __ATOMIC_RELAXED) == key;
}

static void remember(uint32_t *hash, uint32_t key)
{
	__atomic_store_n(slot(hash, key), key, __ATOMIC_RELAXED);
}

static void forget_all(struct newcomers *n)
{
	for (int i = 0; i < NEWCOMERS_HASH; i++) {
		__atomic_store_n(&n->call_hash[i], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&n->ioctl_hash[i], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&n->group_hash[i], 0, __ATOMIC_RELAXED);
	}
	n->nknown = 0;
	n->ngroups = 0;
	n->nqueue = 0;
}

void newcomers_start(struct newcomers *n, const pid_t *pids, int npids, uint64_t from)
{
	pthread_mutex_lock(&n->lock);
	forget_all(n);
	n->from = from;
	for (int i = 0; i < npids && n->nknown < NEWCOMERS_KNOWN; i++) {
		n->carded[n->nknown] = true; /* its cards described as it joins */
		n->known[n->nknown++] = pids[i];
	}
	__atomic_store_n(&n->on, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&n->lock);
}

void newcomers_stop(struct newcomers *n)
{
	pthread_mutex_lock(&n->lock);
	__atomic_store_n(&n->on, false, __ATOMIC_RELEASE);
	n->nqueue = 0;
	pthread_mutex_unlock(&n->lock);
}

static int index_of(const struct newcomers *n, pid_t pid)
{
	for (int i = 0; i < n->nknown; i++)
		if (n->known[i] == pid)
			return i;
	return -1;
}

static bool tell(struct newcomers *n, struct newcomer news)
{
	uint64_t one = 1;

	if (n->nqueue == NEWCOMERS_QUEUE) {
		n->overflow++;
		return false;
	}
	n->queue[n->nqueue++] = news;
	if (write(n->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: the main loop is awake already */
	}
	return true;
}

/* Under the lock: the process, known now (told if new); its index, or -1
 * when there is no room. */
static int know(struct newcomers *n, pid_t pid, enum window_join how, uint64_t ts)
{
	int i = index_of(n, pid);

	if (i >= 0)
		return i;
	if (n->nknown == NEWCOMERS_KNOWN ||
	    !tell(n, (struct newcomer){ .kind = NEWS_JOINED, .pid = pid, .how = how, .seen = ts }))
		return -1;
	n->carded[n->nknown] = how == JOIN_CARD;
	n->known[n->nknown] = pid;
	return n->nknown++;
}

static void note_ioctl(struct newcomers *n, const struct sbt_ioctl *r)
{
	uint32_t tgid = r->h.tgid, gkey = tgid * 31u + (uint32_t)r->fd;
	bool group = r->fd_kind == SBT_FD_GROUP;
	int i;

	if (told(n->ioctl_hash, tgid) && (!group || told(n->group_hash, gkey)))
		return;
	pthread_mutex_lock(&n->lock);
	if (!n->on || (i = know(n, (pid_t)tgid, JOIN_CARD, r->h.ts)) < 0)
		goto out;
	if (!n->carded[i] && tell(n, (struct newcomer){ .kind = NEWS_CARD, .pid = (pid_t)tgid, .seen = r->h.ts }))
		n->carded[i] = true;
	if (n->carded[i])
		remember(n->ioctl_hash, tgid);
	if (group) {
		int k;

		for (k = 0; k < n->ngroups; k++)
			if (n->groups[k].pid == (pid_t)tgid && n->groups[k].fd == r->fd)
				break;
		if (k == n->ngroups && n->ngroups < NEWCOMERS_GROUPS &&
		    tell(n,
			 (struct newcomer){ .kind = NEWS_GROUP, .pid = (pid_t)tgid, .fd = r->fd, .seen = r->h.ts })) {
			n->groups[n->ngroups].pid = (pid_t)tgid;
			n->groups[n->ngroups++].fd = r->fd;
		}
		if (k < n->ngroups)
			remember(n->group_hash, gkey);
	}
out:
	pthread_mutex_unlock(&n->lock);
}

void newcomers_note(struct newcomers *n, const struct sbt_hdr *h)
{
	if (!__atomic_load_n(&n->on, __ATOMIC_ACQUIRE) || !h->tgid || h->ts < n->from)
		return;
	if (h->type == SBT_IOCTL && sizeof(*h) + h->size >= sizeof(struct sbt_ioctl)) {
		note_ioctl(n, (const struct sbt_ioctl *)h);
	} else if ((h->type == SBT_CALL_ENTER || h->type == SBT_CALL_EXIT) && !told(n->call_hash, h->tgid)) {
		pthread_mutex_lock(&n->lock);
		if (n->on && know(n, (pid_t)h->tgid, JOIN_FIRST_CALL, h->ts) >= 0)
			remember(n->call_hash, h->tgid);
		pthread_mutex_unlock(&n->lock);
	}
}

int newcomers_take(struct newcomers *n, struct newcomer *out, int max)
{
	uint64_t v;
	int got;

	if (read(n->wake_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing told since */
	}
	pthread_mutex_lock(&n->lock);
	got = n->nqueue < max ? n->nqueue : max;
	memcpy(out, n->queue, (size_t)got * sizeof(*out));
	memmove(n->queue, n->queue + got, (size_t)(n->nqueue - got) * sizeof(*out));
	n->nqueue -= got;
	pthread_mutex_unlock(&n->lock);
	return got;
}
