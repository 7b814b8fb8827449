// SPDX-License-Identifier: GPL-2.0-only
/*
 * Finding a process's runtime libraries and reading their functions into a
 * search's own probe set (libfind.h). Nothing here attaches.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/procfs.h"
#include "probes/elfsyms.h"
#include "probes/libfind.h"
#include "probes/libresolve.h"

/* Runtime libraries a process maps that are read, at most (it has two or three). */
#define LIBS_MAX_MAPPED 64

static bool stop_now(struct lib_search *s);

static bool stop_reading(void *ctx)
{
	return stop_now(ctx);
}

void lib_search_init(struct lib_search *s, const struct lib_wants *w, uint64_t deadline_ns, const atomic_bool *cancel)
{
	*s = (struct lib_search){ .w = *w, .deadline_ns = deadline_ns, .cancel = cancel };
	/* the attacher applies its cap when it takes what was found */
	s->found.max_uprobes = 0;
	/* a library of millions of symbols is not read past the deadline */
	s->found.stop = stop_reading;
	s->found.stop_ctx = s;
}

void lib_search_free(struct lib_search *s)
{
	probe_set_free(&s->found);
}

void lib_search_hand_over(struct lib_search *s, struct probe_set *to)
{
	*to = s->found;
	to->stop = NULL;
	to->stop_ctx = NULL;
	s->found.sites = NULL;
	s->found.libs = NULL;
	s->found.n = s->found.cap = s->found.nlibs = 0;
	s->found.uprobes = 0;
}

static bool stop_now(struct lib_search *s)
{
	if ((s->w.stop && *s->w.stop) || (s->cancel && atomic_load(s->cancel)) ||
	    (s->deadline_ns && sbt_now_boottime() >= s->deadline_ns))
		s->interrupted = true;
	return s->interrupted;
}

static bool wanted(const struct lib_wants *w, const char *path)
{
	for (size_t i = 0; i < w->nspecs; i++)
		if (probe_spec_wants_lib(&w->specs[i], path))
			return true;
	return false;
}

/* Read already, by this search or before it (a set the thread that
 * attaches changes: looked at under its lock). */
static bool known(struct lib_search *s, const char *path, const struct stat *st)
{
	bool has;

	if (probe_set_has_lib(&s->found, path, st))
		return true;
	if (!s->w.known)
		return false;
	if (s->w.known_lock)
		pthread_mutex_lock(s->w.known_lock);
	has = probe_set_has_lib(s->w.known, path, st);
	if (s->w.known_lock)
		pthread_mutex_unlock(s->w.known_lock);
	return has;
}

/* A library's functions read (from fd when it is one: kept). */
static int take(struct lib_search *s, const char *shown, int fd, const char *why)
{
	const struct lib_wants *w = &s->w;
	char err[512];
	uint64_t t0 = sbt_now_boottime();
	int ret;

	ret = fd >= 0 ? probe_set_scan_lib_fd(&s->found, w->specs, w->nspecs, shown, fd, err, sizeof(err))
		      : probe_set_scan_lib(&s->found, w->specs, w->nspecs, shown, err, sizeof(err));
	if (ret == -EINTR) {
		sbt_info(1, "  library    -> %s: reading stopped (%s); read again when next found\n", shown,
			 w->stop && *w->stop		       ? "stopping"
			 : s->cancel && atomic_load(s->cancel) ? "no longer wanted"
							       : "out of time");
		return 0;
	}
	if (ret < 0) {
		sbt_warn("cannot read symbols: %s", err);
		return 0;
	}
	sbt_info(1, "  library    -> %s (%s): %d function%s\n", shown, why, ret, ret == 1 ? "" : "s");
	sbt_info(2, "  library    -> %s: symbols and return sites in %.2f ms\n", shown,
		 (double)(sbt_now_boottime() - t0) / 1e6);
	if (s->on_library)
		s->on_library(s, s->on_library_ctx);
	return ret;
}

int lib_search_path(struct lib_search *s, const char *path, const char *why)
{
	char real[PATH_MAX];

	/* by name first: most files seen are not runtime libraries; and the
	 * file a name leads to must be named like one too (a libflex.so that
	 * is a symlink to /etc/shadow is not looked at) */
	if (!wanted(&s->w, path) || !realpath(path, real) || !wanted(&s->w, real))
		return 0;
	/* one inode, one set of probes, whatever path led to it */
	if (known(s, real, NULL))
		return 0;
	return take(s, real, -1, why);
}

/* A library open as fd (taken), found as shown: read from the fd, probed
 * through it. */
static int take_fd(struct lib_search *s, int fd, const char *shown, const char *why)
{
	struct stat st;

	if (fstat(fd, &st) || known(s, shown, &st)) {
		close(fd);
		return 0;
	}
	return take(s, shown, fd, why);
}

/* A path as PID sees it: resolved inside its root without opening (a FIFO
 * or a device never is), taken only if what it resolves to is named like a
 * runtime library too and is a regular file; read from an fd. */
static int take_in_root(struct lib_search *s, pid_t pid, const char *path, const char *why)
{
	char err[512], fn[64], target[PATH_MAX];
	int pfd, fd;
	ssize_t n;

	if (!wanted(&s->w, path))
		return 0;
	if ((pfd = proc_open_in_root(pid, path, O_PATH)) < 0)
		return 0; /* not there: nothing to probe */
	snprintf(fn, sizeof(fn), "/proc/self/fd/%d", pfd);
	n = readlink(fn, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	if (n <= 0 || !wanted(&s->w, target)) {
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
	return take_fd(s, fd, path, why);
}

static void found_cb(const char *path, const char *why, void *ctx)
{
	struct lib_search *s = ctx;

	if (!stop_now(s))
		lib_search_path(s, path, why);
}

struct in_root {
	struct lib_search *s;
	pid_t pid;
};

static bool stop_in_root(void *ctx)
{
	struct in_root *r = ctx;

	return stop_now(r->s);
}

static void found_in_root_cb(const char *path, const char *why, void *ctx)
{
	struct in_root *r = ctx;

	if (!stop_now(r->s))
		take_in_root(r->s, r->pid, path, why);
}

int lib_search_mapped(struct lib_search *s, pid_t pid)
{
	char **maps = NULL; /* set when n > 0; gcc -flto cannot tell */
	int n = proc_mapped_files(pid, &maps);

	for (int i = 0, taken = 0; i < n && !stop_now(s); i++) {
		int fd;

		if (!wanted(&s->w, maps[i]))
			continue;
		/* each is found again in the maps to be opened: a few, not thousands */
		if (++taken > LIBS_MAX_MAPPED) {
			sbt_info(1, "  skipped    -> PID %d: over %d mapped runtime libraries: the rest not read\n",
				 pid, LIBS_MAX_MAPPED);
			break;
		}
		fd = proc_open_mapped(pid, maps[i]);
		if (fd >= 0)
			take_fd(s, fd, maps[i], "mapped by the process");
		else
			take_in_root(s, pid, maps[i], "mapped by the process");
	}
	if (n > 0)
		proc_free_paths(maps, n);
	return s->interrupted ? -EINTR : 0;
}

int lib_search_all(struct lib_search *s, pid_t pid, char *const *command)
{
	char env[8192];

	if (pid > 0)
		lib_search_mapped(s, pid);
	/* --probe naming a file: probed whether mapped or not */
	for (int i = 0; i < s->w.nnamed; i++)
		if (s->w.named[i])
			found_cb(s->w.named[i], "named by --probe", s);
	if (command) {
		libs_of_command(command, found_cb, s);
		libs_in_dirs(getenv("LD_LIBRARY_PATH"), 0, "LD_LIBRARY_PATH", found_cb, s);
		libs_in_python_env(command, found_cb, s);
	} else if (pid > 0 && !proc_getenv(pid, "LD_LIBRARY_PATH", env, sizeof(env))) {
		struct in_root r = { s, pid };
		struct proc_creds as, saved;
		int ret = -ESRCH, cut = 0;

		/* its directories as it sees them, inside its root, and with its
		 * identity: root never opens there what the process could not
		 * (a root-only file bind-mounted in its own mount namespace) */
		if (!proc_creds_of(pid, &as) && !(ret = proc_creds_begin(&as, &saved))) {
			cut = libs_in_dirs_of(pid, env, "the process's LD_LIBRARY_PATH", found_in_root_cb, stop_in_root,
					      &r);
			proc_creds_end(&saved);
		} else if (ret == -ESRCH || geteuid() == 0) {
			sbt_info(1, "  skipped    -> PID %d's LD_LIBRARY_PATH: %s\n", pid,
				 ret == -ESRCH ? "the process is gone" : "cannot take its identity to look");
		} else { /* not root: what it opens it opens with its own rights */
			cut = libs_in_dirs_of(pid, env, "the process's LD_LIBRARY_PATH", found_in_root_cb, stop_in_root,
					      &r);
		}
		if (cut)
			sbt_info(1,
				 "  skipped    -> PID %d's LD_LIBRARY_PATH: past %d directories or %d entries of "
				 "one: not looked at\n",
				 pid, LIBS_MAX_DIRS, LIBS_MAX_DIR_ENTRIES);
	}
	libs_in_ldcache(found_cb, s);
	libs_in_install_tree(found_cb, s);
	return s->interrupted ? -EINTR : 0;
}
