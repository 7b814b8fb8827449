/* SPDX-License-Identifier: GPL-2.0-only */
/* What /proc says about a traced process. */
#ifndef SBT_PROCFS_H
#define SBT_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

bool proc_exists(pid_t pid);
/* The distinct files mapped executable in the process. Returns the count
 * (paths malloc'd into *paths), or -errno. */
int proc_mapped_files(pid_t pid, char ***paths);
void proc_free_paths(char **paths, int n);
/* comm of a thread; "" when gone */
void proc_comm(pid_t pid, pid_t tid, char *buf, size_t len);
/* NUL separated command line; returns its length, 0 when gone */
size_t proc_cmdline(pid_t pid, char *buf, size_t len);
/* Calls cb for every thread of the process. */
void proc_for_each_task(pid_t pid, void (*cb)(pid_t pid, pid_t tid, void *ctx), void *ctx);
/* Calls cb for every open fd with what it points at (readlink text). */
void proc_for_each_fd(pid_t pid, void (*cb)(int fd, const char *target, void *ctx),
		      void *ctx);
/* Calls cb for each /proc/interrupts line whose name contains one of the
 * needles (or starts with "vfio" when vfio is set). */
void proc_for_each_irq(const char *const *needles, size_t n, bool vfio,
		       void (*cb)(int irq, const char *name, void *ctx), void *ctx);

#endif
