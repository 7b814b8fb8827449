// SPDX-License-Identifier: GPL-2.0-only
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/links.h"

void link_destroy(struct link_entry e)
{
	if (e.link)
		bpf_link__destroy(e.link);
	else if (e.fd >= 0)
		close(e.fd);
}

static int room(struct link_set *ls)
{
	if (ls->n == ls->cap) {
		size_t cap = ls->cap ? ls->cap * 2 : 64;
		struct link_entry *grown = realloc(ls->v, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		ls->v = grown;
		ls->cap = cap;
	}
	return 0;
}

void link_keep_entry(struct link_set *ls, struct link_entry e)
{
	if (room(ls)) {
		link_destroy(e);
		return;
	}
	ls->v[ls->n++] = e;
}

int link_keep(struct link_set *ls, struct bpf_link *link)
{
	int err = libbpf_get_error(link);

	if (err)
		return err;
	if ((err = room(ls))) {
		bpf_link__destroy(link);
		return err;
	}
	ls->v[ls->n++] = (struct link_entry){ link, -1 };
	return 0;
}

int link_keep_fd(struct link_set *ls, int fd)
{
	int err;

	if (fd < 0)
		return fd;
	if ((err = room(ls))) {
		close(fd);
		return err;
	}
	ls->v[ls->n++] = (struct link_entry){ NULL, fd };
	return 0;
}

void link_drop_to(struct link_set *ls, size_t n)
{
	while (ls->n > n)
		link_destroy(ls->v[--ls->n]);
}

void link_free(struct link_set *ls)
{
	link_drop_to(ls, 0);
	free(ls->v);
	memset(ls, 0, sizeof(*ls));
}
