// SPDX-License-Identifier: GPL-2.0-only
/*
 * What reading a library in a sandboxed child costs (base/sandbox.h,
 * probes/probes.c): the child alone (fork, sandbox, an empty answer,
 * exit) and a whole library read through it, each timed over many runs
 * (medians), with the process holding as much memory as a daemon does
 * (its page tables are what fork copies).
 *   reader-cost LIB [RESIDENT_MIB]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/sandbox.h"
#include "probes/probes.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int empty(int in, int out, void *ctx)
{
	(void)in;
	(void)ctx;
	return write(out, "", 1) == 1 ? 0 : 1;
}

#define RUNS 101

int main(int argc, char **argv)
{
	size_t resident = (argc > 2 ? strtoul(argv[2], NULL, 10) : 64) << 20;
	char *ballast = malloc(resident), err[512];
	double child[RUNS], lib[RUNS];
	int fd = open("/dev/null", O_RDONLY);

	if (argc < 2 || !ballast || fd < 0) {
		fprintf(stderr, "usage: reader-cost LIB [RESIDENT_MIB]\n");
		return 2;
	}
	memset(ballast, 1, resident);
	for (int i = 0; i < RUNS; i++) {
		uint8_t *out;
		size_t len;
		double t = now();

		if (sandbox_run(fd, empty, NULL, 16, NULL, NULL, &out, &len, err, sizeof(err))) {
			fprintf(stderr, "reader-cost: %s\n", err);
			return 1;
		}
		child[i] = now() - t;
		free(out);
	}
	for (int i = 0; i < RUNS; i++) {
		struct probe_set ps = { 0 };
		double t = now();
		int n = probe_set_scan_lib(&ps, sbt_builtin_probes, sbt_n_builtin_probes, argv[1], err, sizeof(err));

		lib[i] = now() - t;
		if (n < 0) {
			fprintf(stderr, "reader-cost: %s\n", err);
			return 1;
		}
		probe_set_free(&ps);
	}
	qsort(child, RUNS, sizeof(double), cmp);
	qsort(lib, RUNS, sizeof(double), cmp);
	printf("reader: %zu MiB resident; the sandboxed child alone %.2f ms, %s read through it %.2f ms "
	       "(medians of %d)\n", resident >> 20, child[RUNS / 2] * 1e3, argv[1], lib[RUNS / 2] * 1e3, RUNS);
	return 0;
}
