// SPDX-License-Identifier: GPL-2.0-only
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "base/hashmap.h"
#include "base/procfs.h"

bool proc_exists(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

int proc_uid(pid_t pid, uint32_t *uid)
{
	char path[32], buf[1024];
	unsigned int u;
	const char *at;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (pid <= 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1); /* Uid: is in the first few lines */
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	if (!(at = strstr(buf, "\nUid:")) || sscanf(at + 5, "%u", &u) != 1)
		return -1;
	*uid = u;
	return 0;
}

/* The n-th number after "key:" in /proc/PID/status text; 0 or -1. */
static int status_field(const char *text, const char *key, int n, uint32_t *v)
{
	const char *at = strstr(text, key);
	unsigned int u = 0;
	int used = 0;

	if (!at)
		return -1;
	at += strlen(key);
	for (int i = 0; i <= n; i++, at += used)
		if (sscanf(at, "%u%n", &u, &used) != 1)
			return -1;
	*v = u;
	return 0;
}

int proc_creds_of(pid_t pid, struct proc_creds *c)
{
	char path[32], buf[4096];
	const char *g;
	ssize_t n;
	int fd, used;
	unsigned int u;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (pid <= 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* Uid: real effective saved fs */
	if (status_field(buf, "\nUid:", 3, &c->fsuid) || status_field(buf, "\nGid:", 3, &c->fsgid) ||
	    !(g = strstr(buf, "\nGroups:")))
		return -1;
	c->ngroups = 0;
	for (g += 8; c->ngroups < PROC_MAX_GROUPS && sscanf(g, "%u%n", &u, &used) == 1; g += used)
		c->groups[c->ngroups++] = u;
	return 0;
}

static void take_identity(const struct proc_creds *c)
{
	gid_t groups[PROC_MAX_GROUPS];

	for (int i = 0; i < c->ngroups; i++)
		groups[i] = c->groups[i];
	syscall(SYS_setgroups, (size_t)c->ngroups, groups);
	syscall(SYS_setfsgid, c->fsgid);
	syscall(SYS_setfsuid, c->fsuid);
}

int proc_creds_begin(const struct proc_creds *c, struct proc_creds *saved)
{
	gid_t groups[PROC_MAX_GROUPS];
	int n = (int)syscall(SYS_getgroups, PROC_MAX_GROUPS, groups);

	if (n < 0)
		return -errno;
	saved->ngroups = n;
	for (int i = 0; i < n; i++)
		saved->groups[i] = groups[i];
	saved->fsuid = (uint32_t)syscall(SYS_setfsuid, (uid_t)-1);
	saved->fsgid = (uint32_t)syscall(SYS_setfsgid, (gid_t)-1);
	for (int i = 0; i < c->ngroups; i++)
		groups[i] = c->groups[i];
	if (syscall(SYS_setgroups, (size_t)c->ngroups, groups))
		return -errno;
	syscall(SYS_setfsgid, c->fsgid);
	syscall(SYS_setfsuid, c->fsuid);
	/* setfs*id say nothing of failure: asked back */
	if ((uint32_t)syscall(SYS_setfsuid, (uid_t)-1) != c->fsuid ||
	    (uint32_t)syscall(SYS_setfsgid, (gid_t)-1) != c->fsgid) {
		take_identity(saved);
		return -EPERM;
	}
	return 0;
}

void proc_creds_end(const struct proc_creds *saved)
{
	take_identity(saved);
}

int kallsyms_find(const char *const *names, size_t n, bool *found, uint64_t *addr)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512], sym[256];
	unsigned long long a;
	int hits = 0;

	if (!f)
		return -errno;
	while ((size_t)hits < n && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %*s %255s", &a, sym) != 2)
			continue;
		for (size_t i = 0; i < n; i++)
			if (!found[i] && !strcmp(sym, names[i])) {
				found[i] = true;
				if (addr)
					addr[i] = a;
				hits++;
			}
	}
	fclose(f);
	return hits;
}

uint64_t proc_start_boottime(pid_t pid)
{
	char fn[64], buf[1024], *p;
	unsigned long long start = 0;
	long hz = sysconf(_SC_CLK_TCK);
	ssize_t n;
	int fd, field;

	snprintf(fn, sizeof(fn), "/proc/%d/stat", pid);
	if ((fd = open(fn, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || hz <= 0)
		return 0;
	buf[n] = 0;
	/* the name, in parentheses, may hold anything: count from its end */
	if (!(p = strrchr(buf, ')')))
		return 0;
	/* field 3 follows ") "; starttime is field 22 */
	for (field = 2, p++; *p && field < 22; p++)
		field += *p == ' ';
	if (field != 22 || sscanf(p, "%llu", &start) != 1)
		return 0;
	return (uint64_t)start * (1000000000ull / (uint64_t)hz);
}

/* Each executable file mapping of the process, in its maps' order: its
 * address range and path. cb returns non-zero to stop (returned). -errno
 * when the maps cannot be read. */
static int each_exec_mapping(pid_t pid, int (*cb)(const char *range, const char *path, void *ctx), void *ctx)
{
	char fn[64], line[4608], range[80];
	int ret = 0;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/maps", pid);
	f = fopen(fn, "re");
	if (!f)
		return -errno;
	while (!ret && fgets(line, sizeof(line), f)) {
		char perms[8], *path, *nl;

		/* addr perms offset dev inode path */
		if (sscanf(line, "%79s %7s", range, perms) != 2 || perms[2] != 'x' || !(path = strchr(line, '/')))
			continue;
		if ((nl = strchr(path, '\n')))
			*nl = '\0';
		ret = cb(range, path, ctx);
	}
	fclose(f);
	return ret;
}

struct mapped_files {
	char **out;
	int n;
	struct hashmap seen; /* a path's hash -> its index + 1 */
};

static uint64_t path_hash(const char *s)
{
	uint64_t h = 14695981039346656037ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* A path once, however many mappings it has (a hash, not a scan of those
 * before: a process may map thousands). */
static int add_mapped(const char *range, const char *path, void *ctx)
{
	struct mapped_files *m = ctx;
	uint64_t h = path_hash(path);
	uintptr_t at = (uintptr_t)hm_get(&m->seen, h);
	char **grown;

	(void)range;
	if (at && !strcmp(m->out[at - 1], path))
		return 0;
	if (m->n == PROC_MAX_MAPPED)
		return 1; /* enough: the rest is not looked at */
	grown = realloc(m->out, (m->n + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	m->out = grown;
	if (!(m->out[m->n] = strdup(path)))
		return -ENOMEM;
	m->n++;
	/* (two paths of one hash: the second is looked at again each time) */
	if (!at && hm_put(&m->seen, h, (void *)(uintptr_t)m->n))
		return -ENOMEM;
	return 0;
}

int proc_mapped_files(pid_t pid, char ***paths)
{
	struct mapped_files m = { 0 };
	int ret = each_exec_mapping(pid, add_mapped, &m);

	hm_free(&m.seen);
	if (ret < 0) {
		proc_free_paths(m.out, m.n);
		return ret;
	}
	*paths = m.out;
	return m.n;
}

struct open_mapped {
	pid_t pid;
	const char *path;
	int fd;
};

static int open_if_it(const char *range, const char *path, void *ctx)
{
	struct open_mapped *o = ctx;
	char fn[128];

	if (strcmp(path, o->path))
		return 0;
	snprintf(fn, sizeof(fn), "/proc/%d/map_files/%s", o->pid, range);
	/* a magic link the kernel made to the mapped file: followed */
	o->fd = open(fn, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (o->fd < 0)
		o->fd = -errno;
	return 1;
}

int proc_open_mapped(pid_t pid, const char *path)
{
	struct open_mapped o = { pid, path, -ENOENT };
	int ret = each_exec_mapping(pid, open_if_it, &o);

	return ret < 0 ? ret : o.fd;
}

int proc_open_in_root(pid_t pid, const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	char fn[64];
	int root, fd;

	snprintf(fn, sizeof(fn), "/proc/%d/root", pid);
	if ((root = open(fn, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	if (fd < 0)
		fd = -errno;
	close(root);
	return fd;
}

void proc_free_paths(char **paths, int n)
{
	for (int i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

void proc_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char fn[64];
	FILE *f;

	buf[0] = '\0';
	snprintf(fn, sizeof(fn), "/proc/%d/task/%d/comm", pid, tid);
	f = fopen(fn, "re");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

/* The last number of a "Key:\t1\t2\t3" line of status, and how many came before it. */
static int last_of(const char *line, pid_t *last)
{
	int n = -1;
	char *end;

	for (const char *p = strchr(line, ':') + 1;; p = end) {
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		*last = (pid_t)v;
		n++;
	}
	return n;
}

int proc_ns_ids(pid_t pid, pid_t tid, pid_t *ns_tgid, pid_t *ns_tid)
{
	char fn[64], line[256];
	int level = -1;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/task/%d/status", pid, tid);
	f = fopen(fn, "re");
	if (!f)
		return -1;
	*ns_tgid = pid;
	*ns_tid = tid;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "NStgid:", 7))
			last_of(line, ns_tgid);
		else if (!strncmp(line, "NSpid:", 6))
			level = last_of(line, ns_tid);
	}
	fclose(f);
	return level < 0 ? 0 : level; /* no NSpid line: a kernel without namespaces */
}

void proc_root_path(pid_t pid, const char *path, char *out, size_t len)
{
	char fn[64], root[8];
	ssize_t n;

	snprintf(fn, sizeof(fn), "/proc/%d/root", pid);
	n = readlink(fn, root, sizeof(root));
	if (n == 1 && root[0] == '/')
		snprintf(out, len, "%s", path);
	else /* another root, or gone (then the open below fails cleanly) */
		snprintf(out, len, "/proc/%d/root%s", pid, path);
}

size_t proc_cmdline(pid_t pid, char *buf, size_t len)
{
	char fn[64];
	size_t n;
	FILE *f;

	snprintf(fn, sizeof(fn), "/proc/%d/cmdline", pid);
	f = fopen(fn, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, len, f);
	fclose(f);
	return n;
}

/* Numbered entries of dir, at most max of them (0: all); true when there
 * were more. */
static bool for_each_entry(const char *dir, size_t max, void (*cb)(long n, void *ctx), void *ctx)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t seen = 0;

	if (!d)
		return false;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (max && seen++ == max) {
			closedir(d);
			return true;
		}
		cb(strtol(e->d_name, NULL, 10), ctx);
	}
	closedir(d);
	return false;
}

struct task_ctx {
	pid_t pid;
	void (*cb)(pid_t, pid_t, void *);
	void *ctx;
};

static void task_entry(long tid, void *ctx)
{
	struct task_ctx *t = ctx;

	t->cb(t->pid, (pid_t)tid, t->ctx);
}

void proc_for_each_task(pid_t pid, void (*cb)(pid_t pid, pid_t tid, void *ctx), void *ctx)
{
	struct task_ctx t = { pid, cb, ctx };
	char dir[64];

	snprintf(dir, sizeof(dir), "/proc/%d/task", pid);
	for_each_entry(dir, 0, task_entry, &t);
}

struct fd_ctx {
	pid_t pid;
	void (*cb)(int, const char *, void *);
	void *ctx;
};

static void fd_entry(long fd, void *ctx)
{
	struct fd_ctx *c = ctx;
	char fn[64], target[4096];
	ssize_t n;

	snprintf(fn, sizeof(fn), "/proc/%d/fd/%ld", c->pid, fd);
	n = readlink(fn, target, sizeof(target) - 1);
	if (n <= 0)
		return;
	target[n] = '\0';
	c->cb((int)fd, target, c->ctx);
}

bool proc_for_each_fd(pid_t pid, size_t max, void (*cb)(int fd, const char *target, void *ctx), void *ctx)
{
	struct fd_ctx c = { pid, cb, ctx };
	char dir[64];

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	return for_each_entry(dir, max, fd_entry, &c);
}

void proc_for_each_irq(void (*cb)(int irq, const char *name, void *ctx), void *ctx)
{
	FILE *f = fopen("/proc/interrupts", "re");
	char line[2048];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *end, *name;
		long irq = strtol(line, &end, 10);

		if (end == line || *end != ':')
			continue;
		line[strcspn(line, "\n")] = '\0';
		name = strrchr(line, ' ');
		cb((int)irq, name ? name + 1 : line, ctx);
	}
	fclose(f);
}

void proc_for_each_pid(void (*cb)(pid_t pid, void *ctx), void *ctx)
{
	DIR *d = opendir("/proc");
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (!*end && pid > 0 && pid <= INT_MAX && pid != getpid())
			cb((pid_t)pid, ctx);
	}
	closedir(d);
}

int vfio_group_of_path(const char *path)
{
	char *end;
	long group;

	if (strncmp(path, "/dev/vfio/", 10) || !isdigit((unsigned char)path[10]))
		return -1;
	group = strtol(path + 10, &end, 10);
	return *end || group > INT_MAX ? -1 : (int)group;
}

int pci_sysfs_number(const char *sysfs_pci, const char *bdf, const char *file, int base, long *v)
{
	char path[PATH_MAX], text[32], *end;
	long got;
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s/%s", sysfs_pci, bdf, file);
	if (!(f = fopen(path, "re")))
		return -1;
	ok = fgets(text, sizeof(text), f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	got = strtol(text, &end, base);
	if (end == text)
		return -1;
	*v = got;
	return 0;
}

int pci_vfio_devices(char (*bdfs)[16], int max)
{
	DIR *d = opendir("/sys/bus/pci/drivers/vfio-pci");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		unsigned int dom, bus, dev, fn;
		char tail;

		/* entries like 0000:01:00.0, besides bind, new_id, ... */
		if (sscanf(e->d_name, "%4x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &tail) == 4)
			snprintf(bdfs[n++], sizeof(bdfs[0]), "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	}
	closedir(d);
	return n;
}

bool irq_is_accelerator(const char *name, const char (*bdfs)[16], int n)
{
	if (!strncmp(name, "vfio", 4))
		return true;
	for (int i = 0; i < n; i++)
		if (strstr(name, bdfs[i]))
			return true;
	return false;
}
