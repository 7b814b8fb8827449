// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre-syscall-loop [N]: N getppid() calls (default 1,000,000), and the
 * ns each took on average, as a process with nothing to do with Spyre
 * would make them: what a tracer's hooks cost everybody else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	struct timespec a, b;

	if (n <= 0) {
		fprintf(stderr, "usage: spyre-syscall-loop [N]\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid); /* not glibc's wrapper: always the kernel */
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.1f\n", ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n);
	return 0;
}
