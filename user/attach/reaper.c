// SPDX-License-Identifier: GPL-2.0-only
#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>

#include "attach/reaper.h"
#include "base/thread.h"

static void *reap(void *arg)
{
	struct link_reaper *r = arg;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct link_entry l;

		while (!r->todo.n && !r->stopping)
			pthread_cond_wait(&r->wake, &r->lock);
		if (!r->todo.n)
			break;
		l = r->todo.v[--r->todo.n];
		r->busy = 1;
		pthread_mutex_unlock(&r->lock);
		link_destroy(l); /* the long wait, off the lock */
		pthread_mutex_lock(&r->lock);
		r->busy = 0;
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int reaper_start(struct link_reaper *r)
{
	int err;

	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	err = thread_start_quiet(&r->thread, "sbt-unprobe", reap, r);
	if (err) {
		pthread_mutex_destroy(&r->lock);
		pthread_cond_destroy(&r->wake);
		return err;
	}
	r->started = true;
	return 0;
}

void reaper_take(struct link_reaper *r, struct link_set *ls)
{
	pthread_mutex_lock(&r->lock);
	while (ls->n) /* with no memory for the list, link_keep destroys it here */
		link_keep_entry(&r->todo, ls->v[--ls->n]);
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
}

size_t reaper_pending(struct link_reaper *r)
{
	size_t n;

	if (!r->started)
		return 0;
	pthread_mutex_lock(&r->lock);
	n = r->todo.n + r->busy;
	pthread_mutex_unlock(&r->lock);
	return n;
}

void reaper_stop(struct link_reaper *r)
{
	if (!r->started)
		return;
	pthread_mutex_lock(&r->lock);
	r->stopping = true; /* it empties the list first */
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	link_free(&r->todo);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->wake);
	r->started = false;
}
