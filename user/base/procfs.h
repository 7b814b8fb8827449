/* SPDX-License-Identifier: GPL-2.0-only */
/* What /proc says about a traced process. */
#ifndef SBT_PROCFS_H
#define SBT_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

bool proc_exists(pid_t pid);
/* The user the process runs as: its real uid as the host sees it (not
 * its /proc directory's owner, which is root for a process that is not
 * dumpable). 0, or -1 when gone. */
int proc_uid(pid_t pid, uint32_t *uid);

/* The identity a process opens files with: its fsuid, fsgid and
 * supplementary groups (the first PROC_MAX_GROUPS). */
#define PROC_MAX_GROUPS 64
struct proc_creds {
	uint32_t fsuid, fsgid;
	uint32_t groups[PROC_MAX_GROUPS];
	int ngroups;
};

/* 0, or -1 when gone or unreadable. */
int proc_creds_of(pid_t pid, struct proc_creds *c);
/* This thread alone (raw syscalls, not glibc's process-wide setgroups)
 * takes c's identity for opening files, so that what it opens it opens as
 * the process would: root's file capabilities drop with a non-zero fsuid.
 * The identity it had goes to saved. 0, or -errno (nothing changed). */
int proc_creds_begin(const struct proc_creds *c, struct proc_creds *saved);
/* Back to the identity saved. */
void proc_creds_end(const struct proc_creds *saved);
/* The kernel's symbols by name, in one pass over /proc/kallsyms: found[i]
 * when names[i] is there, its address in addr[i] (addr may be NULL; an
 * address reads 0 where kptr_restrict hides it). Returns how many were
 * found, or -errno. */
int kallsyms_find(const char *const *names, size_t n, bool *found, uint64_t *addr);
/* When it started, in BOOTTIME ns (to the clock tick); 0: unknown. */
uint64_t proc_start_boottime(pid_t pid);
/* The distinct files mapped executable in the process, the first
 * PROC_MAX_MAPPED of them. Returns the count (paths malloc'd into *paths),
 * or -errno. */
#define PROC_MAX_MAPPED 4096
int proc_mapped_files(pid_t pid, char ***paths);
void proc_free_paths(char **paths, int n);
/* The file the process has mapped executable at `path` (as its maps
 * say), opened through /proc/PID/map_files: the very inode it mapped,
 * whatever its root or mount namespace, no path looked up anywhere.
 * Read-only, non-blocking, close-on-exec. An fd, or -errno. */
int proc_open_mapped(pid_t pid, const char *path);
/* A path as the process sees it, resolved inside its root (/proc/PID/root,
 * RESOLVE_IN_ROOT: symlinks cannot leave it, no magic links) and opened
 * with flags (O_CLOEXEC added): O_PATH opens nothing for reading, so a
 * FIFO cannot block; O_RDONLY | O_DIRECTORY a directory only. An fd, or
 * -errno. */
int proc_open_in_root(pid_t pid, const char *path, int flags);
/* comm of a thread; "" when gone */
void proc_comm(pid_t pid, pid_t tid, char *buf, size_t len);
/* The thread's process and thread ids in its innermost pid namespace
 * (NStgid, NSpid), and how many namespaces below ours that is: 0 for a
 * process in ours, -1 when gone. */
int proc_ns_ids(pid_t pid, pid_t tid, pid_t *ns_tgid, pid_t *ns_tid);
/* path as the process sees it, from here: under /proc/PID/root when the
 * process has another root (a chroot, a container), else path itself. */
void proc_root_path(pid_t pid, const char *path, char *out, size_t len);
/* NUL separated command line; returns its length, 0 when gone */
size_t proc_cmdline(pid_t pid, char *buf, size_t len);
/* Calls cb for every thread of the process. */
void proc_for_each_task(pid_t pid, void (*cb)(pid_t pid, pid_t tid, void *ctx), void *ctx);
/* Calls cb for every open fd with what it points at (readlink text), the
 * first max of them (0: all; in the kernel's order, the lowest first):
 * true when there were more. A process's fds are its own to multiply: the
 * daemon caps them (PROC_FD_SCAN_MAX). */
#define PROC_FD_SCAN_MAX 1024
bool proc_for_each_fd(pid_t pid, size_t max, void (*cb)(int fd, const char *target, void *ctx), void *ctx);
/* Calls cb for each numbered interrupt in /proc/interrupts with its name
 * (the last column). */
void proc_for_each_irq(void (*cb)(int irq, const char *name, void *ctx), void *ctx);
/* Calls cb for every process (a /proc entry that is a number), but this one. */
void proc_for_each_pid(void (*cb)(pid_t pid, void *ctx), void *ctx);
/* The VFIO group a path names: N for /dev/vfio/N, else -1. */
int vfio_group_of_path(const char *path);
/* A number from a PCI device's sysfs file (sysfs_pci/BDF/file; base 16 for
 * ids, 10 else). 0, or -1 with *v unchanged. */
int pci_sysfs_number(const char *sysfs_pci, const char *bdf, const char *file, int base, long *v);
/* PCI addresses (0000:01:00.0) of the devices bound to vfio-pci. Returns the
 * count, at most max. */
int pci_vfio_devices(char (*bdfs)[16], int max);
/* An accelerator interrupt: named vfio* (vfio-msi[0](0000:01:00.0) ...), or
 * naming one of the given PCI addresses. */
bool irq_is_accelerator(const char *name, const char (*bdfs)[16], int n);

#endif
