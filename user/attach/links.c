// SPDX-License-Identifier: GPL-2.0-only
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "attach/links.h"

int link_keep(struct link_set *ls, struct bpf_link *link)
{
	int err = libbpf_get_error(link);

	if (err)
		return err;
	if (ls->n == ls->cap) {
		size_t cap = ls->cap ? ls->cap * 2 : 64;
		struct bpf_link **grown = realloc(ls->v, cap * sizeof(*grown));

		if (!grown) {
			bpf_link__destroy(link);
			return -ENOMEM;
		}
		ls->v = grown;
		ls->cap = cap;
	}
	ls->v[ls->n++] = link;
	return 0;
}

void link_drop_to(struct link_set *ls, size_t n)
{
	while (ls->n > n)
		bpf_link__destroy(ls->v[--ls->n]);
}

void link_free(struct link_set *ls)
{
	link_drop_to(ls, 0);
	free(ls->v);
	memset(ls, 0, sizeof(*ls));
}
