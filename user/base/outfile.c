// SPDX-License-Identifier: GPL-2.0-only
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/outfile.h"

FILE *outfile_create(struct outfile *of, const char *path, char *err, size_t errlen)
{
	char *d = strdup(path), *b = strdup(path);
	struct stat st;
	FILE *f = NULL;
	int fd;

	memset(of, 0, sizeof(*of));
	if (!d || !b)
		goto oom;
	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s", strerror(EISDIR));
		goto out;
	}
	/* written beside it and renamed over it: a device (/dev/null), a FIFO
	 * or a socket would be replaced by a regular file */
	if (!stat(path, &st) && !S_ISREG(st.st_mode)) {
		snprintf(err, errlen,
			 "not a regular file (a trace is written beside its path and renamed "
			 "over it)");
		goto out;
	}
	if (asprintf(&of->tmp, "%s/.%s.XXXXXX", dirname(d), basename(b)) < 0) {
		of->tmp = NULL;
		goto oom;
	}
	/* O_EXCL, 0600: a name nobody else has, readable by us alone */
	fd = mkostemp(of->tmp, O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		free(of->tmp);
		of->tmp = NULL;
		goto out;
	}
	f = fdopen(fd, "wb");
	of->path = strdup(path);
	if (!f || !of->path) {
		if (f)
			fclose(f);
		else
			close(fd);
		f = NULL;
		outfile_release(of);
		goto oom;
	}
	goto out;
oom:
	snprintf(err, errlen, "out of memory");
out:
	free(d);
	free(b);
	return f;
}

int outfile_commit(struct outfile *of)
{
	if (!of->tmp)
		return 0;
	if (rename(of->tmp, of->path))
		return -errno;
	free(of->tmp);
	of->tmp = NULL;
	return 0;
}

uint64_t outfile_size(const struct outfile *of)
{
	struct stat st;

	if (stat(of->tmp ? of->tmp : of->path, &st))
		return 0;
	return (uint64_t)st.st_size;
}

void outfile_release(struct outfile *of)
{
	if (of->tmp)
		unlink(of->tmp);
	free(of->tmp);
	free(of->path);
	memset(of, 0, sizeof(*of));
}

static bool dir_is_empty(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool empty = true;

	if (!d)
		return false;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	return empty;
}

int outfile_private_dir(const char *dir, const char *flag, char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s", dir);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		mkdir(path, 0755);
		*p = '/';
	}
	if (mkdir(dir, 0700) && errno != EEXIST) {
		snprintf(err, errlen, "cannot make '%s': %s; hint: choose another %s", dir, strerror(errno), flag);
		return -1;
	}
	if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		snprintf(err, errlen, "'%s' is not a directory of ours; hint: remove it or choose another %s", dir,
			 flag);
		return -1;
	}
	if (!(st.st_mode & 077))
		return 0;
	if (chmod(dir, 0700)) {
		snprintf(err, errlen, "cannot make '%s' private: %s; hint: make it 0700, or choose another %s", dir,
			 strerror(errno), flag);
		return -1;
	}
	/* others could have put something there until now: only an empty one
	 * is taken (looked at once nobody else can add to it) */
	if ((st.st_mode & 022) && !dir_is_empty(dir)) {
		snprintf(err, errlen,
			 "'%s' is ours but others could write into it, and it is not empty; "
			 "hint: remove it, or choose another %s",
			 dir, flag);
		return -1;
	}
	sbt_note("%s '%s' was %04o; made it 0700", flag, dir, (unsigned)(st.st_mode & 07777));
	return 0;
}
