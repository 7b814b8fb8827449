// SPDX-License-Identifier: GPL-2.0-only
/*
 * The attach plan (plan.h): its rows, and the feature probes the decisions
 * of open.c rest on.
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "attach/plan.h"
#include "base/log.h"

#ifndef TRACEFS_MAGIC
#define TRACEFS_MAGIC 0x74726163
#endif

void plan_add(struct plan *p, const char *role, const char *mech, const char *fmt, ...)
{
	struct plan_item *it;
	va_list ap;

	if (p->n == PLAN_MAX)
		return;
	it = &p->items[p->n++];
	snprintf(it->role, sizeof(it->role), "%s", role);
	snprintf(it->mech, sizeof(it->mech), "%s", mech);
	va_start(ap, fmt);
	vsnprintf(it->note, sizeof(it->note), fmt, ap);
	va_end(ap);
}

void plan_print(const struct plan *p, FILE *out)
{
	fprintf(out, "attach plan:\n");
	for (int i = 0; i < p->n; i++) {
		const struct plan_item *it = &p->items[i];
		bool chosen = strcmp(it->mech, "-") != 0;

		fprintf(out, "  %-10s %s %-40s %s\n", it->role, chosen ? "->" : "  ", chosen ? it->mech : "", it->note);
	}
}

static const char *tracefs_root(void)
{
	static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		char path[128];

		snprintf(path, sizeof(path), "%s/events", roots[i]);
		if (!access(path, F_OK))
			return roots[i];
	}
	return NULL;
}

int sbt_ensure_tracefs(void)
{
	struct statfs st;
	int err;

	if (tracefs_root())
		return 0;
	/* libbpf finds tracepoint ids in tracefs; some systems do not mount it */
	if (!statfs("/sys/kernel/tracing", &st) && st.f_type == TRACEFS_MAGIC)
		return 0;
	if (!mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL))
		return 0;
	err = -errno;
	sbt_err("tracefs is not mounted and cannot be: %s; hint: mount -t tracefs nodev /sys/kernel/tracing",
		strerror(-err));
	return err;
}

bool sbt_tracepoint_exists(const char *category, const char *name)
{
	const char *root = tracefs_root();
	char path[256];

	if (!root)
		return false;
	snprintf(path, sizeof(path), "%s/events/%s/%s", root, category, name);
	return !access(path, F_OK);
}

bool sbt_have_kprobes(void)
{
	return !access("/sys/bus/event_source/devices/kprobe/type", F_OK);
}

bool sbt_have_uprobes(void)
{
	return !access("/sys/bus/event_source/devices/uprobe/type", F_OK);
}

bool sbt_module_btf(const char *module)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/kernel/btf/%s", module);
	return !access(path, F_OK);
}

bool sbt_have_tp_btf(const char *tracepoint)
{
	return libbpf_find_vmlinux_btf_id(tracepoint, BPF_TRACE_RAW_TP) > 0;
}

/* The dma tracepoints this kernel has: newer kernels name them _phys */
static const char *const dma_map_tps[] = { "dma_map_phys", "dma_map_page" };
static const char *const dma_unmap_tps[] = { "dma_unmap_phys", "dma_unmap_page" };

static const char *first_tracepoint(const char *cat, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (sbt_tracepoint_exists(cat, names[i]))
			return names[i];
	return NULL;
}

const char *plan_dma_tracepoint(bool unmap)
{
	return first_tracepoint("dma", unmap ? dma_unmap_tps : dma_map_tps, 2);
}
