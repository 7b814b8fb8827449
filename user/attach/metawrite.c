// SPDX-License-Identifier: GPL-2.0-only
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "attach/metawrite.h"
#include "base/clock.h"
#include "base/procfs.h"

void metaw_put(struct meta_writer *m, struct sbt_hdr *h, uint16_t type, size_t total)
{
	h->type = type;
	h->size = (uint16_t)(total - sizeof(*h));
	if (!h->ts)
		h->ts = sbt_now_boottime();
	if (m->sink)
		m->sink(m->sink_ctx, h);
	else
		output_add(m->out, h);
}

void metaw_host(struct meta_writer *m)
{
	struct sbt_meta_host h = { 0 };
	struct utsname u;

	gethostname(h.hostname, sizeof(h.hostname) - 1);
	if (!uname(&u))
		snprintf(h.release, sizeof(h.release), "%.*s", (int)sizeof(h.release) - 1, u.release);
	snprintf(h.version, sizeof(h.version), "%s", SBT_VERSION);
	h.clock_id = CLOCK_BOOTTIME;
	metaw_put(m, &h.h, SBT_META_HOST, sizeof(h));
}

void metaw_clock(struct meta_writer *m)
{
	struct sbt_meta_clock c;

	sbt_clock_snapshot(&c);
	metaw_put(m, &c.h, SBT_META_CLOCK, sizeof(c));
}

void metaw_proc(struct meta_writer *m, pid_t pid, char *const *argv)
{
	struct {
		struct sbt_meta_proc p;
		char cmd[4096];
	} rec = { 0 };

	rec.p.pid = (uint32_t)pid;
	rec.p.h.tgid = rec.p.h.tid = (uint32_t)pid;
	if (argv) {
		const char *base = strrchr(argv[0], '/');
		size_t n = 0;

		for (int i = 0; argv[i] && n < sizeof(rec.cmd); i++)
			n += (size_t)snprintf(rec.cmd + n, sizeof(rec.cmd) - n, "%s", argv[i]) + 1;
		rec.p.cmdline_len = (uint32_t)(n < sizeof(rec.cmd) ? n : sizeof(rec.cmd));
		snprintf(rec.p.comm, sizeof(rec.p.comm), "%.15s", base ? base + 1 : argv[0]);
	} else {
		rec.p.cmdline_len = (uint32_t)proc_cmdline(pid, rec.cmd, sizeof(rec.cmd));
		proc_comm(pid, pid, rec.p.comm, sizeof(rec.p.comm));
	}
	metaw_put(m, &rec.p.h, SBT_META_PROC, sizeof(rec.p) + rec.p.cmdline_len);
}

void metaw_probe(struct meta_writer *m, const struct probe_site *s)
{
	struct {
		struct sbt_meta_probe p;
		char strings[8192];
	} rec = { 0 };
	int n;

	rec.p.id = s->id;
	rec.p.role = (uint16_t)s->role;
	rec.p.bytes_arg = (int16_t)s->bytes_arg;
	rec.p.offset = s->offset;
	n = snprintf(rec.strings, sizeof(rec.strings), "%s%c%s%c%s", s->name, 0, s->pattern, 0, s->lib);
	if (n < 0 || (size_t)n >= sizeof(rec.strings))
		n = sizeof(rec.strings) - 1;
	rec.p.strings_len = (uint32_t)n + 1;
	metaw_put(m, &rec.p.h, SBT_META_PROBE, sizeof(rec.p) + rec.p.strings_len);
}

static void thread_name_cb(pid_t pid, pid_t tid, void *ctx)
{
	struct sbt_thread_name t = { 0 };

	t.h.tgid = (uint32_t)pid;
	t.h.tid = (uint32_t)tid;
	proc_comm(pid, tid, t.comm, sizeof(t.comm));
	if (t.comm[0])
		metaw_put(ctx, &t.h, SBT_THREAD_NAME, sizeof(t));
	metaw_nspid(ctx, pid, tid);
}

void metaw_nspid(struct meta_writer *m, pid_t pid, pid_t tid)
{
	struct sbt_meta_nspid n = { 0 };
	pid_t ns_tgid, ns_tid;
	int level = proc_ns_ids(pid, tid, &ns_tgid, &ns_tid);

	if (level <= 0)
		return;
	n.h.tgid = (uint32_t)pid;
	n.h.tid = (uint32_t)tid;
	n.ns_tgid = (uint32_t)ns_tgid;
	n.ns_tid = (uint32_t)ns_tid;
	n.level = (uint32_t)level;
	metaw_put(m, &n.h, SBT_META_NSPID, sizeof(n));
}

void metaw_thread_names(struct meta_writer *m, const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		proc_for_each_task(pids[i], thread_name_cb, m);
}

bool metaw_irq(struct meta_writer *m, int irq, const char *name)
{
	struct sbt_meta_irq r = { 0 };

	if (irq >= 0 && irq < METAW_MAX_IRQ) {
		if (m->irq_named[irq])
			return false;
		m->irq_named[irq] = true;
	}
	r.irq = (uint32_t)irq;
	snprintf(r.name, sizeof(r.name), "%s", name);
	metaw_put(m, &r.h, SBT_META_IRQ, sizeof(r));
	return true;
}

void metaw_group_fd(struct meta_writer *m, pid_t pid, int fd)
{
	char path[64], link[256];
	ssize_t n;
	int group;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return;
	link[n] = '\0';
	if ((group = vfio_group_of_path(link)) >= 0)
		metaw_group(m, pid, group);
}

void metaw_group(struct meta_writer *m, pid_t pid, int group)
{
	char dir[128];
	struct sbt_meta_device d = { 0 };
	struct dirent *e;
	DIR *dh;
	int devices = 0;

	for (int i = 0; i < m->ngroups; i++)
		if (m->groups[i].pid == pid && m->groups[i].group == group)
			return;
	if (m->ngroups == METAW_MAX_GROUPS)
		return;
	m->groups[m->ngroups].pid = pid;
	m->groups[m->ngroups++].group = group;
	snprintf(dir, sizeof(dir), "/sys/kernel/iommu_groups/%d/devices", group);
	dh = opendir(dir);
	if (!dh)
		return;
	while ((e = readdir(dh)))
		if (e->d_name[0] != '.' && devices++ == 0)
			snprintf(d.bdf, sizeof(d.bdf), "%.15s", e->d_name);
	closedir(dh);
	if (devices != 1)
		return;
	d.pid = (uint32_t)pid;
	d.h.tgid = d.h.tid = (uint32_t)pid;
	metaw_put(m, &d.h, SBT_META_DEVICE, sizeof(d));
}

struct group_ctx {
	struct meta_writer *m;
	pid_t pid;
};

static void group_cb(int fd, const char *target, void *ctx)
{
	struct group_ctx *c = ctx;

	if (vfio_group_of_path(target) >= 0)
		metaw_group_fd(c->m, c->pid, fd);
}

void metaw_groups_of(struct meta_writer *m, pid_t pid)
{
	struct group_ctx c = { m, pid };

	proc_for_each_fd(pid, m->fd_scan_max, group_cb, &c);
}
