// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre-sim-run: a Spyre workload on the simulator. Per job and thread:
 * allocate, copy in (H2D), compute, copy out (D2H), synchronize, free.
 * Prints a JSON summary of exactly what it did, which the tests hold the
 * tracer's capture against.
 */
#include <argp.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

static struct {
	const char *backend, *mock_dir, *json;
	unsigned long jobs, bytes, seed, delay_us;
	unsigned int threads;
	int wait_stdin, wait_ready, container_per_card, no_card, wait_epoll;
	const char *card;
} opt = { .backend = "mock", .jobs = 4, .bytes = 65536, .seed = 1, .delay_us = 200, .threads = 1 };

static const struct argp_option options[] = {
	{ "backend", 'B', "NAME", 0, "mock (default: no device) or vfio (QEMU edu devices bound to vfio-pci)", 0 },
	{ "jobs", 'n', "N", 0, "Jobs per thread (default 4)", 0 },
	{ "bytes", 'b', "B", 0, "Bytes per copy, varied by --seed (default 65536)", 0 },
	{ "seed", 's', "S", 0, "Seed for the copy sizes (default 1)", 0 },
	{ "threads", 't', "T", 0, "Threads, one stream each (default 1)", 0 },
	{ "delay-us", 'D', "US", 0, "Mock device time per job (default 200)", 0 },
	{ "mock-dir", 'M', "DIR", 0, "Directory of the mock VFIO files", 0 },
	{ "json", 'j', "FILE", 0, "Write the JSON summary here (default stdout)", 0 },
	{ "wait-stdin", 'w', NULL, 0, "Wait for a byte on stdin before starting", 0 },
	{ "wait-ready", 'R', NULL, 0,
	  "Open the device (VFIO set up, MSI on), then wait for a byte on stdin: "
	  "a job already running when the tracer attaches",
	  0 },
	{ "card", 'K', "BDF", 0, "vfio: drive only the card at this PCI address", 0 },
	{ "no-card", 'N', NULL, 0,
	  "Call the runtime --jobs times (a deallocate of nothing, --delay-us apart) and never "
	  "open a card: a tool that loads the runtime",
	  0 },
	{ "wait-epoll", 'E', NULL, 0, "vfio: wait for a card's interrupts in epoll_wait(), not read()", 0 },
	{ "container-per-card", 'C', NULL, 0, "vfio: each card in its own VFIO container (default: one for all)", 0 },
	{ 0 }
};

static unsigned long num(const char *arg, struct argp_state *state)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 0);
	if (errno || *end || !*arg)
		argp_error(state, "not a number: '%s'", arg);
	return v;
}

static error_t parse(int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case 'B': opt.backend = arg; break;
	case 'n': opt.jobs = num(arg, state); break;
	case 'b': opt.bytes = num(arg, state); break;
	case 's': opt.seed = num(arg, state); break;
	case 't': opt.threads = (unsigned int)num(arg, state); break;
	case 'D': opt.delay_us = num(arg, state); break;
	case 'M': opt.mock_dir = arg; break;
	case 'j': opt.json = arg; break;
	case 'w': opt.wait_stdin = 1; break;
	case 'R': opt.wait_ready = 1; break;
	case 'C': opt.container_per_card = 1; break;
	case 'E': opt.wait_epoll = 1; break;
	case 'K': opt.card = arg; break;
	case 'N': opt.no_card = 1; break;
	default: return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static int run_jobs(unsigned int thread)
{
	struct flex_stream *s = flex_sim_stream_create();
	unsigned int rnd = (unsigned int)(opt.seed * 7919 + thread);

	if (!s)
		return -1;
	for (unsigned long j = 0; j < opt.jobs; j++) {
		/* a page-multiple size between a quarter of --bytes and --bytes */
		unsigned long pages = (opt.bytes + 4095) / 4096;
		unsigned long bytes = 4096 * (pages / 4 + 1 + rand_r(&rnd) % (pages - pages / 4));
		void *host = malloc(bytes);
		void *dev = flex_allocate(flex_sim_allocator(), bytes, 0);

		if (!dev || !host)
			return -1;
		memset(host, (int)j, bytes);
		if (flex_launch_h2d(s, dev, host, bytes) || flex_launch_compute(s, dev, 1) ||
		    flex_launch_d2h(s, host, dev, bytes) || flex_synchronize(s))
			return -1;
		flex_deallocate(flex_sim_allocator(), dev);
		free(host);
	}
	flex_sim_stream_destroy(s);
	return 0;
}

static void *thread_main(void *arg)
{
	return (void *)(long)run_jobs((unsigned int)(long)arg);
}

#ifdef SIM_RUN_LIB
/* the workload as a library, for spyre-sim-dlopen */
__attribute__((visibility("default"))) int spyre_sim_run_main(int argc, char **argv)
#else
int main(int argc, char **argv)
#endif
{
	static const struct argp argp = { options, parse, NULL,
					  "Run a Spyre workload on the simulator and print what it did as JSON." };
	pthread_t th[256];
	struct timespec t0, t1;
	char mock_dir[256], extra[512];
	unsigned int before_ready = 0; /* --wait-ready: ioctls made while setting up */
	int failed = 0;
	FILE *out = stdout;

	argp_parse(&argp, argc, argv, 0, NULL, NULL);
	if (!opt.threads || opt.threads > 256) {
		fprintf(stderr, "spyre-sim-run: --threads must be 1 to 256\n");
		return 2;
	}
	if (!opt.mock_dir) {
		snprintf(mock_dir, sizeof(mock_dir), "%s/spyre-sim-mock", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		opt.mock_dir = mock_dir;
	}
	if (opt.wait_stdin) {
		char c;

		if (read(0, &c, 1) < 0)
			return 2;
	}
	if (opt.no_card) {
		for (unsigned long j = 0; j < opt.jobs; j++) {
			flex_deallocate(flex_sim_allocator(), NULL);
			usleep((useconds_t)opt.delay_us);
		}
		return 0;
	}
	struct sim_config cfg = {
		opt.backend, opt.mock_dir,	 (unsigned int)opt.delay_us, opt.container_per_card != 0,
		opt.card,    opt.wait_epoll != 0
	};

	if (sim_init(&cfg))
		return 1;
	if (opt.wait_ready) {
		char c;

		if (read(0, &c, 1) < 0)
			return 2;
		before_ready = sim_ioctl_count();
	}
	clock_gettime(CLOCK_MONOTONIC, &t0); /* the jobs alone, for the benchmark */
	for (unsigned int t = 1; t < opt.threads; t++)
		pthread_create(&th[t], NULL, thread_main, (void *)(long)t);
	failed |= run_jobs(0) != 0;
	for (unsigned int t = 1; t < opt.threads; t++) {
		void *r;

		pthread_join(th[t], &r);
		failed |= r != NULL;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	sim_shutdown();
	failed |= sim_job_failures() != 0; /* a wrong byte is a failure */
	snprintf(extra, sizeof(extra),
		 "  \"threads\": %u,\n  \"jobs_per_thread\": %lu,\n  \"failed\": %s,\n"
		 "  \"elapsed_ns\": %lld,\n  \"ioctls_before_ready\": %u,\n",
		 opt.threads, opt.jobs, failed ? "true" : "false",
		 (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec), before_ready);
	if (opt.json && !(out = fopen(opt.json, "w"))) {
		fprintf(stderr, "spyre-sim-run: cannot write %s: %s\n", opt.json, strerror(errno));
		return 1;
	}
	sim_write_json(out, extra);
	if (out != stdout)
		fclose(out);
	return failed;
}
