/* SPDX-License-Identifier: GPL-2.0-only */
/* Checks made before anything is loaded, each with a one-line message and a
 * hint. Inputs are passed in so the tests can drive every failure. */
#ifndef SBT_PREFLIGHT_H
#define SBT_PREFLIGHT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Effective capability bits of this process (capget). */
uint64_t sbt_effective_caps(void);
int sbt_check_privileges(uid_t euid, uint64_t caps, char *err, size_t errlen);
int sbt_check_btf(const char *vmlinux_btf_path, char *err, size_t errlen);
/* -p PID: it must be a user process; a thread id becomes its process's id
 * (with a note saying so). proc_root is "/proc" but for tests. 0, or -1
 * with err filled. */
int sbt_resolve_pid(const char *proc_root, pid_t *pid, char *note, size_t notelen, char *err, size_t errlen);

#endif
