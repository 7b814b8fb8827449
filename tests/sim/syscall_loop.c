// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre-syscall-loop [N [ioctl]]: N getppid() calls (default 1,000,000),
 * or N ioctls that are not VFIO's (FIONREAD on /dev/null), and the ns each
 * took on average, as a process with nothing to do with Spyre would make
 * them: what a tracer's hooks cost everybody else (its ioctl hooks run on
 * every ioctl of the host).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	int ioctls = argc > 2 && !strcmp(argv[2], "ioctl"), fd = -1;
	struct timespec a, b;

	if (n <= 0 || (argc > 2 && !ioctls)) {
		fprintf(stderr, "usage: spyre-syscall-loop [N [ioctl]]\n");
		return 2;
	}
	if (ioctls && (fd = open("/dev/null", O_RDONLY)) < 0) {
		perror("/dev/null");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	if (ioctls) {
		int ready;

		for (long i = 0; i < n; i++)
			ioctl(fd, FIONREAD, &ready); /* ENOTTY: the hooks' cost, not the driver's */
	} else {
		for (long i = 0; i < n; i++)
			syscall(SYS_getppid); /* not glibc's wrapper: always the kernel */
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.1f\n", ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n);
	return 0;
}
