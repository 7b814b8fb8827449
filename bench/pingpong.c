// SPDX-License-Identifier: GPL-2.0-only
/*
 * pingpong [N]: two processes passing a byte back and forth over two
 * pipes N times (default 200,000); prints the ns a round trip took. Every
 * round trip is two wake-ups: what a hook on sched_waking costs a
 * wake-up-heavy program that has nothing to do with Spyre.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	int ab[2], ba[2];
	struct timespec t0, t1;
	char c = 0;
	pid_t pid;

	if (n <= 0 || pipe(ab) || pipe(ba)) {
		fprintf(stderr, "usage: pingpong [N]\n");
		return 2;
	}
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid) {
		for (long i = 0; i < n; i++)
			if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	waitpid(pid, NULL, 0);
	printf("%.1f\n", ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)n);
	return 0;
}
