// SPDX-License-Identifier: GPL-2.0-only
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/cost.h"

void cost_init(struct cost_measure *c)
{
	memset(c, 0, sizeof(*c));
	c->stats_fd = -1;
	c->client = -1;
}

int cost_read(struct bpf_object *obj, struct metrics_prog *out, int max)
{
	struct bpf_program *p;
	int n = 0;

	bpf_object__for_each_program(p, obj)
	{
		struct bpf_prog_info info = { 0 };
		uint32_t len = sizeof(info);
		int fd = bpf_program__fd(p);

		if (fd < 0 || n == max || bpf_obj_get_info_by_fd(fd, &info, &len))
			continue;
		snprintf(out[n].name, sizeof(out[n].name), "%s", bpf_program__name(p));
		out[n].seconds = (double)info.run_time_ns / 1e9;
		out[n].runs = info.run_cnt;
		n++;
	}
	return n;
}

bool cost_sysctl_on(void)
{
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "r");
	int v = 0;

	if (!f)
		return false;
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	fclose(f);
	return v != 0;
}

int cost_begin(struct cost_measure *c, struct bpf_object *obj, double seconds, int client, uint64_t now)
{
	int fd;

	if (c->stats_fd >= 0)
		return -EBUSY;
	fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (fd < 0)
		return fd;
	c->stats_fd = fd;
	c->client = client;
	c->from = now;
	c->until = now + (uint64_t)(seconds * 1e9);
	c->nprogs = cost_read(obj, c->before, METRICS_PROGS);
	return 0;
}

bool cost_due(const struct cost_measure *c, uint64_t now)
{
	return c->stats_fd >= 0 && now >= c->until;
}

void cost_end(struct cost_measure *c, struct bpf_object *obj, uint64_t now, char *answer, size_t len)
{
	struct metrics_prog after[METRICS_PROGS];
	int n = cost_read(obj, after, METRICS_PROGS);
	double secs = (double)(now - c->from) / 1e9, total = 0;
	uint64_t runs = 0;
	size_t off;

	close(c->stats_fd); /* first: the host pays for it no longer */
	c->stats_fd = -1;
	off = (size_t)snprintf(answer, len,
			       "ok\nmeasured %.1f s: the kernel's BPF statistics on for it, off again\n"
			       "%-24s %12s %10s %16s\n",
			       secs, "program", "runs", "ns/run", "share of a core");
	for (int i = 0; i < n; i++) {
		const struct metrics_prog *b = NULL;
		uint64_t r;
		double s;

		for (int k = 0; k < c->nprogs && !b; k++)
			if (!strcmp(c->before[k].name, after[i].name))
				b = &c->before[k];
		r = after[i].runs - (b ? b->runs : 0);
		s = after[i].seconds - (b ? b->seconds : 0);
		runs += r;
		total += s;
		if (off < len)
			off += (size_t)snprintf(answer + off, len - off, "%-24s %12llu %10.0f %15.4f%%\n",
						after[i].name, (unsigned long long)r, r ? s * 1e9 / (double)r : 0.0,
						secs > 0 ? 100 * s / secs : 0.0);
	}
	if (off < len)
		snprintf(answer + off, len - off, "%-24s %12llu %10.0f %15.4f%%\n", "all", (unsigned long long)runs,
			 runs ? total * 1e9 / (double)runs : 0.0, secs > 0 ? 100 * total / secs : 0.0);
	snprintf(c->last, sizeof(c->last), "measured last: %.4f%% of a core, %llu runs at %.0f ns each, over %.1f s",
		 secs > 0 ? 100 * total / secs : 0.0, (unsigned long long)runs, runs ? total * 1e9 / (double)runs : 0.0,
		 secs);
	c->client = -1;
}
