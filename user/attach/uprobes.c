// SPDX-License-Identifier: GPL-2.0-only
/*
 * The runtime's probes, per process: entry and return-site uprobes put on
 * each traced process only, and the libraries they go on, found where the
 * process has or can load them.
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/elfsyms.h"
#include "attach/libresolve.h"
#include "attach/retsites.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/procfs.h"
#include "spyre.skel.h"

/* ---- runtime probes, per process ------------------------------------------ */

static bool stop_now(struct attacher *a)
{
	if ((a->stop && *a->stop) || (a->deadline_ns && sbt_now_boottime() >= a->deadline_ns))
		a->interrupted = true;
	return a->interrupted;
}

static struct bpf_link *uprobe(struct bpf_program *prog, pid_t pid, const char *lib,
			       uint64_t off, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = false);

	return bpf_program__attach_uprobe_opts(prog, pid, lib, off, &opts);
}

/* One function on one process: its entry and every return site, or none
 * of them (a function whose returns cannot all be seen is refused). The
 * returns go first: from the moment its entry is live, each call that is
 * seen entering is seen leaving. */
static int attach_function(struct attacher *a, struct attached_proc *ap, struct probe_site *s)
{
	size_t first = ap->links.n;
	uint64_t at = s->offset;
	int err = 0;

	for (int i = 0; !err && i < s->nrets; i++) {
		const struct ret_site *r = &s->rets[i];

		at = r->offset;
		err = link_keep(&ap->links,
				uprobe(a->skel->progs.call_return, ap->pid, s->attach, r->offset,
				       SBT_COOKIE(s->id, r->kind, r->reg, s->size)));
	}
	if (!err) {
		at = s->offset;
		err = link_keep(&ap->links,
				uprobe(a->skel->progs.call_enter, ap->pid, s->attach, s->offset,
				       SBT_COOKIE(s->id, SBT_SITE_ENTRY, 0, 0)));
	}
	if (!err)
		return 0;
	link_drop_to(&ap->links, first);
	if (err == -ESRCH || err == -ENOMEM)
		return err; /* the process is gone, or we are out of memory: not the function's fault */
	if (asprintf(&s->refused, "the kernel refused a uprobe at +0x%llx: %s",
		     (unsigned long long)(at - s->offset), strerror(-err)) < 0)
		s->refused = NULL;
	a->refused++;
	sbt_info(1, "  refused    -> %s in %s: %s\n", s->name, s->lib,
		 s->refused ? s->refused : strerror(-err));
	return 0;
}

int attach_runtime(struct attacher *a, pid_t pid)
{
	struct attached_proc *ap = attach_proc_of(a, pid, true);
	size_t before;
	int err;

	if (!ap) {
		sbt_err("out of memory");
		return -ENOMEM;
	}
	before = ap->links.n;
	for (; ap->done < a->probes.n; ap->done++) {
		struct probe_site *s = &a->probes.sites[ap->done];

		if (stop_now(a))
			break;
		if (s->refused)
			continue;
		err = attach_function(a, ap, s);
		if (err == -ESRCH)
			return 0; /* exited while we attached: its exit record follows */
		if (err) {
			sbt_err("cannot attach %s to PID %d: %s", s->name, pid, strerror(-err));
			return err;
		}
	}
	return (int)(ap->links.n - before);
}

size_t attach_nuprobes(const struct attacher *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->nprocs; i++)
		n += a->procs[i].links.n;
	return n;
}

size_t attach_nfunctions(const struct attacher *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->probes.n; i++)
		n += !a->probes.sites[i].refused;
	return n;
}

/* ---- finding libraries ------------------------------------------------------ */

static bool wanted(const struct attacher *a, const char *path)
{
	for (size_t i = 0; i < a->nspecs; i++)
		if (probe_spec_wants_lib(&a->specs[i], path))
			return true;
	return false;
}

/* A library's functions read (from fd when it is one: kept) and probed on
 * every traced process: the end of finding one by path or by fd. */
static int take_library(struct attacher *a, const char *shown, int fd, const char *why)
{
	char err[512];
	size_t first = a->probes.n;
	uint64_t t0 = sbt_now_boottime(), t1;
	int ret;

	ret = fd >= 0 ? probe_set_scan_lib_fd(&a->probes, a->specs, a->nspecs, shown, fd, err, sizeof(err))
		      : probe_set_scan_lib(&a->probes, a->specs, a->nspecs, shown, err, sizeof(err));
	t1 = sbt_now_boottime();
	if (ret < 0) {
		sbt_warn("cannot read symbols: %s", err);
		return 0;
	}
	sbt_info(1, "  library    -> %s (%s): %d function%s\n", shown, why, ret, ret == 1 ? "" : "s");
	for (size_t k = first; k < a->probes.n; k++) {
		struct probe_site *s = &a->probes.sites[k];

		if (s->refused) {
			a->refused++;
			sbt_info(1, "  refused    -> %s in %s: %s\n", s->name, s->lib, s->refused);
		} else {
			sbt_info(1, "  uprobe     -> %s+0x%llx %s, %d return site%s\n", s->lib,
				 (unsigned long long)s->offset, s->name, s->nrets,
				 s->nrets == 1 ? "" : "s");
		}
		if (a->on_function)
			a->on_function(a->ctx, s);
	}
	for (size_t i = 0; i < a->nprocs && ret > 0; i++) {
		int err2 = attach_runtime(a, a->procs[i].pid);

		if (err2 < 0)
			return err2;
	}
	sbt_info(2, "  library    -> %s: symbols and return sites in %.2f ms, attached in %.2f ms\n",
		 shown, (double)(t1 - t0) / 1e6, (double)(sbt_now_boottime() - t1) / 1e6);
	return ret;
}

int attach_library(struct attacher *a, const char *path, const char *why)
{
	char real[PATH_MAX];

	/* by name first: most files seen are not runtime libraries; and the
	 * file a name leads to must be named like one too (a libflex.so that
	 * is a symlink to /etc/shadow is not looked at) */
	if (!wanted(a, path) || !realpath(path, real) || !wanted(a, real))
		return 0;
	/* one inode, one set of probes, whatever path led to it */
	if (probe_set_has_lib(&a->probes, real, NULL))
		return 0;
	return take_library(a, real, -1, why);
}

/* A library open as fd (taken), found as shown: read from the fd, probed
 * through it. */
static int attach_library_fd(struct attacher *a, int fd, const char *shown, const char *why)
{
	struct stat st;

	if (fstat(fd, &st) || probe_set_has_lib(&a->probes, shown, &st)) {
		close(fd);
		return 0;
	}
	return take_library(a, shown, fd, why);
}

/* A path as PID sees it: resolved inside its root without opening (a FIFO
 * or a device never is), taken only if what it resolves to is named like a
 * runtime library too and is a regular file; read from an fd. */
static int attach_library_in_root(struct attacher *a, pid_t pid, const char *path, const char *why)
{
	char err[512], fn[64], target[PATH_MAX];
	int pfd, fd;
	ssize_t n;

	if (!wanted(a, path))
		return 0;
	if ((pfd = proc_open_in_root(pid, path, O_PATH)) < 0)
		return 0; /* not there: nothing to probe */
	snprintf(fn, sizeof(fn), "/proc/self/fd/%d", pfd);
	n = readlink(fn, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	if (n <= 0 || !wanted(a, target)) {
		sbt_info(1, "  skipped    -> %s in PID %d's root: it is %s, not a runtime library\n", path, pid,
			 n > 0 ? target : "unknown");
		close(pfd);
		return 0;
	}
	fd = elf_open_library_at(pfd, path, err, sizeof(err));
	close(pfd);
	if (fd < 0) {
		sbt_warn("PID %d: %s", pid, err);
		return 0;
	}
	return attach_library_fd(a, fd, path, why);
}

static void found_cb(const char *path, const char *why, void *ctx)
{
	struct attacher *a = ctx;

	if (!stop_now(a))
		attach_library(a, path, why);
}

struct in_root {
	struct attacher *a;
	pid_t pid;
};

static void found_in_root_cb(const char *path, const char *why, void *ctx)
{
	struct in_root *r = ctx;

	if (!stop_now(r->a))
		attach_library_in_root(r->a, r->pid, path, why);
}

/* What the process has mapped: the very files, through /proc/PID/map_files
 * (whatever its root), else the path resolved inside its root. */
int attach_find_mapped_libraries(struct attacher *a, pid_t pid)
{
	char **maps;
	int n = proc_mapped_files(pid, &maps);

	for (int i = 0; i < n && !stop_now(a); i++) {
		int fd;

		if (!wanted(a, maps[i]))
			continue;
		fd = proc_open_mapped(pid, maps[i]);
		if (fd >= 0)
			attach_library_fd(a, fd, maps[i], "mapped by the process");
		else
			attach_library_in_root(a, pid, maps[i], "mapped by the process");
	}
	if (n > 0)
		proc_free_paths(maps, n);
	return a->interrupted ? -EINTR : 0;
}

int attach_find_libraries(struct attacher *a, pid_t pid, char *const *command)
{
	char env[8192];

	if (pid > 0)
		attach_find_mapped_libraries(a, pid);
	/* --probe naming a file: probed whether mapped or not */
	for (int i = 0; i < a->o->nprobes; i++)
		if (a->real_libs[i])
			found_cb(a->real_libs[i], "named by --probe", a);
	if (command) {
		libs_of_command(command, found_cb, a);
		libs_in_dirs(getenv("LD_LIBRARY_PATH"), 0, "LD_LIBRARY_PATH", found_cb, a);
		libs_in_python_env(command, found_cb, a);
	} else if (pid > 0 && !proc_getenv(pid, "LD_LIBRARY_PATH", env, sizeof(env))) {
		struct in_root r = { a, pid };

		/* its directories as it sees them: inside its root */
		libs_in_dirs_of(pid, env, "the process's LD_LIBRARY_PATH", found_in_root_cb, &r);
	}
	libs_in_ldcache(found_cb, a);
	libs_in_install_tree(found_cb, a);
	return a->interrupted ? -EINTR : 0;
}

size_t attach_drop_changed_libraries(struct attacher *a)
{
	size_t changed = 0;

	for (size_t i = 0; i < a->probes.nlibs; i++) {
		const char *lib = a->probes.libs[i].path, *file = a->probes.libs[i].attach;

		if (a->probes.libs[i].stale || probe_lib_unchanged(&a->probes.libs[i]))
			continue;
		a->probes.libs[i].stale = true;
		changed++;
		sbt_warn("%s changed since its symbols were read: its probes are dropped, "
			 "and it is read again when next found", lib);
		for (size_t k = 0; k < a->probes.n; k++) {
			struct probe_site *s = &a->probes.sites[k];

			if (!s->refused && !strcmp(s->attach, file)) {
				s->refused = strdup("the file changed after it was read");
				a->refused++;
			}
		}
	}
	return changed;
}

void attach_warn_unmatched(const struct attacher *a, bool later)
{
	for (int i = 0; i < a->o->nprobes; i++) {
		const struct probe_spec *sp = &a->specs[i];
		bool hit = false;

		for (size_t k = 0; k < a->probes.n && !hit; k++)
			hit = a->probes.sites[k].pattern == sp->pattern;
		if (!hit)
			sbt_warn("--probe '%.200s:%.200s' matched no function%s; hint: spyre-bpftrace "
				 "list LIB --probe ... shows what a pattern picks", a->o->probes[i].lib,
				 sp->pattern, later ? " yet (a library loaded later still counts)" : "");
	}
}
