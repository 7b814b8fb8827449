// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre-mock-vfio MOUNTPOINT: mock VFIO files whose ioctls succeed, as a
 * card's do (a regular file's mock ioctls all fail: it has none). A FUSE
 * file system of two files: `vfio`, whose every ioctl returns 0 at once,
 * and `slow`, whose ioctls return 0 after 1.5 s. Below the daemon's
 * --vfio-path they count as VFIO files, by their names. Runs in the
 * foreground until unmounted (fusermount3 -u MOUNTPOINT) or signalled.
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fuse.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static bool is_file(const char *path)
{
	return !strcmp(path, "/vfio") || !strcmp(path, "/slow");
}

static int mock_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (!is_file(path))
		return -ENOENT;
	st->st_mode = S_IFREG | 0666;
	st->st_nlink = 1;
	return 0;
}

static int mock_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
			enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "vfio", NULL, 0, 0);
	fill(buf, "slow", NULL, 0, 0);
	return 0;
}

static int mock_open(const char *path, struct fuse_file_info *fi)
{
	(void)fi;
	return is_file(path) ? 0 : -ENOENT;
}

static int mock_ioctl(const char *path, unsigned int cmd, void *arg, struct fuse_file_info *fi, unsigned int flags,
		      void *data)
{
	(void)cmd;
	(void)arg;
	(void)fi;
	(void)flags;
	(void)data;
	if (!strcmp(path, "/slow")) {
		struct timespec t = { 1, 500 * 1000 * 1000 };

		nanosleep(&t, NULL);
	}
	return 0;
}

static const struct fuse_operations ops = {
	.getattr = mock_getattr,
	.readdir = mock_readdir,
	.open = mock_open,
	.ioctl = mock_ioctl,
};

int main(int argc, char **argv)
{
	char *args[] = { argv[0], "-f", "-o", "default_permissions,allow_other", argc == 2 ? argv[1] : NULL, NULL };

	if (argc != 2) {
		fprintf(stderr, "usage: spyre-mock-vfio MOUNTPOINT\n");
		return 2;
	}
	return fuse_main(5, args, &ops, NULL);
}
