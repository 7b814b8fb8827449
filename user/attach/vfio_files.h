/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Which files are VFIO's, for the daemon's BPF: a file is, when its ioctls
 * go to one of vfio's own handlers (their addresses from /proc/kallsyms,
 * once vfio is loaded), or when it lies below a directory --vfio-path
 * names (the simulator's mock files; matched by the directory's inode).
 * VFIO's ioctl numbers on any other file count for nothing.
 */
#ifndef SBT_VFIO_FILES_H
#define SBT_VFIO_FILES_H

#include <stdbool.h>
#include <stddef.h>

struct spyre_bpf;

/* The daemon's --vfio-path: DIR, or the glob of its files record takes
 * (DIR, a slash and a star), to the directory, which must exist. 0, or -1
 * with err filled. */
int vfio_dir_arg(const char *arg, char *dir, size_t len, char *err, size_t errlen);
/* After load: the directories into the BPF map. 0, or -errno with err filled. */
int vfio_files_dirs(struct spyre_bpf *s, const char *const *dirs, int n, char *err, size_t errlen);
/* vfio's handlers, looked up now and put in the BPF map: true when vfio
 * is loaded (all three found). Reads /proc/kallsyms (tens of ms): call it
 * at the start, on SIGHUP, and when /sys/module/vfio appears. */
bool vfio_files_handlers(struct spyre_bpf *s);
/* Is vfio loaded (or built in with a sysfs entry)? A stat. */
bool vfio_module_present(void);

#endif
