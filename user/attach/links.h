/* SPDX-License-Identifier: GPL-2.0-only */
/* The BPF links the attacher owns (kernel programs, a process's uprobes),
 * destroyed together. */
#ifndef SBT_LINKS_H
#define SBT_LINKS_H

#include <stddef.h>

struct bpf_link;

struct link_set {
	struct bpf_link **v;
	size_t n, cap;
};

/* Keep a link that attached; the error of one that did not (it is not kept). */
int link_keep(struct link_set *ls, struct bpf_link *link);
/* Destroy the links kept since there were n. */
void link_drop_to(struct link_set *ls, size_t n);
void link_free(struct link_set *ls);

#endif
