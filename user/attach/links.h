/* SPDX-License-Identifier: GPL-2.0-only */
/* The BPF links the attacher owns (kernel programs, a process's uprobes),
 * destroyed together: libbpf's, or a link the kernel gave as a bare fd (a
 * uprobe_multi link, which libbpf 1.1 cannot make). */
#ifndef SBT_LINKS_H
#define SBT_LINKS_H

#include <stddef.h>

struct bpf_link;

struct link_entry {
	struct bpf_link *link; /* NULL: fd */
	int fd;
};

struct link_set {
	struct link_entry *v;
	size_t n, cap;
};

/* Keep a link that attached; the error of one that did not (it is not kept). */
int link_keep(struct link_set *ls, struct bpf_link *link);
/* Keep a link fd (>= 0: closed to destroy it); the error (< 0) of one that did not attach. */
int link_keep_fd(struct link_set *ls, int fd);
/* Keep what another set held (reaper.h): destroyed here when there is no room. */
void link_keep_entry(struct link_set *ls, struct link_entry e);
void link_destroy(struct link_entry e);
/* Destroy the links kept since there were n. */
void link_drop_to(struct link_set *ls, size_t n);
void link_free(struct link_set *ls);

#endif
