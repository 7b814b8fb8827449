/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * uprobe_multi links (Linux 6.6): every site of one library on one process
 * in one link, made with BPF_LINK_CREATE directly (libbpf 1.1, Debian 12's,
 * has no call for it). Removing a link of perf-event uprobes waits for the
 * kernel's grace periods once a site, one after another (0.1 s each here:
 * 26 uprobes, 3.3 s at record's end); a uprobe_multi link waits once. The
 * kernel is asked, not its version: uprobe_multi_supported() tries one.
 */
#ifndef SBT_UPROBE_MULTI_H
#define SBT_UPROBE_MULTI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* enum bpf_attach_type's BPF_TRACE_UPROBE_MULTI (Linux 6.6's uapi), which
 * the programs are loaded with */
#define SBT_ATTACH_UPROBE_MULTI 48

/* A link of prog_fd on cnt offsets of path, with a cookie each, for pid's
 * process only (0: every process that maps path). The link's fd, or
 * -errno. */
int uprobe_multi_link(int prog_fd, const char *path, pid_t pid, const uint64_t *offsets, const uint64_t *cookies,
		      uint32_t cnt);
/* Does this kernel make such links? An empty program loaded for them and
 * one link tried, on this program's own file at an offset no code is at,
 * for this process alone; asked before the real programs are loaded, so
 * that they are loaded for uprobe_multi only where it is. */
bool uprobe_multi_supported(void);

#endif
