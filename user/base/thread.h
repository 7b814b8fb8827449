/* SPDX-License-Identifier: GPL-2.0-only */
/* The daemon's helper threads take no signal: SIGTERM and SIGHUP go to
 * its main loop, whose poll they end. */
#ifndef SBT_THREAD_H
#define SBT_THREAD_H

#include <pthread.h>
#include <signal.h>

/* 0, or -errno. name (at most 15 bytes) is what top -H, ps -L and gdb
 * show for it. */
static inline int thread_start_quiet(pthread_t *t, const char *name, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err)
		pthread_setname_np(*t, name);
	return -err;
}

#endif
