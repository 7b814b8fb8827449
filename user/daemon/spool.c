// SPDX-License-Identifier: GPL-2.0-only
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/outfile.h"
#include "base/vec.h"
#include "daemon/spool.h"

#define MANIFEST ".manifest.json"

int spool_open(const char *state_dir, char *dir, size_t len, char *err, size_t errlen)
{
	if (outfile_private_dir(state_dir, "--state-dir", err, errlen))
		return -1;
	if (snprintf(dir, len, "%s/snapshots", state_dir) >= (int)len) {
		snprintf(err, errlen, "--state-dir '%s' is too long", state_dir);
		return -1;
	}
	return outfile_private_dir(dir, "--state-dir", err, errlen);
}

void spool_name(const char *dir, const char *reason, uint64_t realtime_ns, char *path, size_t len)
{
	time_t sec = (time_t)(realtime_ns / 1000000000ull);
	char host[64] = "", stamp[32];
	struct tm tm;

	gethostname(host, sizeof(host) - 1);
	for (char *c = host; *c; c++)
		if (*c == '/')
			*c = '_';
	gmtime_r(&sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	snprintf(path, len, "%s/%s-%s-%s.%03lluZ.pftrace", dir, host[0] ? host : "host", reason, stamp,
		 (unsigned long long)(realtime_ns / 1000000 % 1000));
}

/* A snapshot: its trace's name (the manifest is name + MANIFEST). */
struct entry {
	char name[NAME_MAX + 1];
	uint64_t bytes; /* trace and manifest */
	struct timespec mtime;
};

static uint64_t file_bytes(const char *dir, const char *name, struct timespec *mtime)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (stat(path, &st))
		return 0;
	if (mtime)
		*mtime = st.st_mtim;
	return (uint64_t)st.st_size;
}

static bool is_manifest(const char *name)
{
	size_t n = strlen(name), m = strlen(MANIFEST);

	return n > m && !strcmp(name + n - m, MANIFEST);
}

/* The snapshots in dir; *n of them. NULL when none (or no memory). */
static struct entry *list(const char *dir, size_t *n, uint64_t *total)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct entry *v = NULL;
	size_t cap = 0;

	*n = 0;
	*total = 0;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		char manifest[NAME_MAX + 32];

		if (de->d_name[0] == '.')
			continue;
		if (is_manifest(de->d_name)) { /* counted with its trace; alone, on its own */
			snprintf(manifest, sizeof(manifest), "%.*s", (int)(strlen(de->d_name) - strlen(MANIFEST)),
				 de->d_name);
			if (file_bytes(dir, manifest, NULL)) {
				*total += file_bytes(dir, de->d_name, NULL);
				continue;
			}
		}
		if (vec_reserve((void **)&v, &cap, *n + 1, sizeof(*v)))
			break;
		snprintf(v[*n].name, sizeof(v[*n].name), "%s", de->d_name);
		v[*n].bytes = file_bytes(dir, de->d_name, &v[*n].mtime);
		*total += v[*n].bytes;
		(*n)++;
	}
	closedir(d);
	return v;
}

uint64_t spool_usage(const char *dir)
{
	uint64_t total;
	size_t n;

	free(list(dir, &n, &total));
	return total;
}

static int older(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void remove_snapshot(const char *dir, const char *name)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
	if (!is_manifest(name)) {
		snprintf(path, sizeof(path), "%s/%s" MANIFEST, dir, name);
		unlink(path);
	}
}

int spool_trim(const char *dir, uint64_t bound, const char *newest)
{
	const char *base = newest ? strrchr(newest, '/') : NULL;
	uint64_t total;
	size_t n;
	struct entry *v = list(dir, &n, &total);
	int removed = 0;

	base = base ? base + 1 : newest;
	if (v)
		qsort(v, n, sizeof(*v), older);
	for (size_t i = 0; i < n && total > bound; i++) {
		uint64_t bytes = v[i].bytes;
		char manifest[NAME_MAX + 32];

		if (base && !strcmp(v[i].name, base))
			continue; /* the newest goes last, only if alone over the bound */
		snprintf(manifest, sizeof(manifest), "%s" MANIFEST, v[i].name);
		bytes += is_manifest(v[i].name) ? 0 : file_bytes(dir, manifest, NULL);
		remove_snapshot(dir, v[i].name);
		total -= bytes < total ? bytes : total;
		removed++;
	}
	free(v);
	if (total > bound && base) {
		remove_snapshot(dir, base);
		return -EFBIG;
	}
	return removed;
}
