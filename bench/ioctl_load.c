// SPDX-License-Identifier: GPL-2.0-only
/*
 * ioctl-load FILE RATE SECONDS [THREADS]: VFIO-numbered ioctls
 * (VFIO_GET_API_VERSION) on FILE, RATE a second in all from THREADS threads
 * (default 1) for SECONDS, paced in batches; each is one record of the
 * tracer's when FILE lies under its --vfio-path. Prints what it did as JSON:
 * {"ioctls": N, "seconds": S, "rate": N/S}. A producer for the zero-loss
 * ceiling (bench/ceiling.py): it can fall short of RATE, and says so.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define VFIO_GET_API_VERSION 0x3b64 /* _IO(';', 100) */
#define BATCH 256

static int fd, batch;
static double per_thread_rate, seconds;
static atomic_ulong total;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *run(void *arg)
{
	double start = *(double *)arg, t;
	unsigned long done = 0;

	while ((t = now()) - start < seconds) {
		double due = (double)done / per_thread_rate; /* when `done` should have been reached */

		if (due > t - start) { /* ahead: wait for the schedule, not past the end */
			double wait = due - (t - start);

			if (wait > seconds - (t - start))
				wait = seconds - (t - start);
			struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };

			nanosleep(&ts, NULL);
			continue;
		}
		for (int i = 0; i < batch; i++)
			ioctl(fd, VFIO_GET_API_VERSION, 0);
		done += (unsigned long)batch;
	}
	atomic_fetch_add(&total, done);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 4 ? atoi(argv[4]) : 1;
	pthread_t tid[64];
	double start, rate;

	if (argc < 4 || (rate = atof(argv[2])) <= 0 || (seconds = atof(argv[3])) <= 0 || threads < 1 ||
	    threads > 64) {
		fprintf(stderr, "usage: ioctl-load FILE RATE SECONDS [THREADS (1-64)]\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	per_thread_rate = rate / threads;
	/* at most 10 ms of the schedule at a time: a low rate is paced, not
	 * made in one burst and then waited out */
	batch = per_thread_rate / 100 < 1 ? 1 : per_thread_rate / 100 > BATCH ? BATCH : (int)(per_thread_rate / 100);
	start = now();
	for (int i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, run, &start)) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	seconds = now() - start;
	printf("{\"ioctls\": %lu, \"seconds\": %.3f, \"rate\": %.0f}\n", (unsigned long)total, seconds,
	       (double)total / seconds);
	return 0;
}
