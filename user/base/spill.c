// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/spill.h"

#define READ_ITEMS 1024 /* read back per run at a time */

void spill_init(struct spill *s, size_t size, size_t cap, int (*cmp)(const void *, const void *))
{
	memset(s, 0, sizeof(*s));
	s->size = size;
	s->cap = cap;
	s->cmp = cmp;
}

const char *spill_tmpdir(void)
{
	const char *d = getenv("TMPDIR");

	return d && d[0] ? d : "/tmp";
}

FILE *spill_tmpfile(void)
{
	int fd = open(spill_tmpdir(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	FILE *f;

	if (fd < 0)
		return NULL;
	if (!(f = fdopen(fd, "w+"))) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return f;
}

static int fail(struct spill *s, int err)
{
	if (!s->error)
		s->error = err;
	return -err;
}

/* The full buffer, sorted, becomes a run in the temporary file. */
static int write_run(struct spill *s)
{
	struct spill_run *grown;
	size_t first = s->nruns ? s->runs[s->nruns - 1].first + s->runs[s->nruns - 1].n : 0;

	if (!s->tmp && !(s->tmp = spill_tmpfile()))
		return fail(s, errno);
	grown = realloc(s->runs, (s->nruns + 1) * sizeof(*grown));
	if (!grown)
		return fail(s, ENOMEM);
	s->runs = grown;
	qsort(s->buf, s->n, s->size, s->cmp);
	if (fseek(s->tmp, (long)(first * s->size), SEEK_SET) || fwrite(s->buf, s->size, s->n, s->tmp) != s->n)
		return fail(s, errno ? errno : EIO);
	s->runs[s->nruns++] = (struct spill_run){ first, s->n };
	s->n = 0;
	return 0;
}

int spill_add(struct spill *s, const void *item)
{
	if (s->error)
		return -s->error;
	/* grown as needed, to cap: a small trace takes little */
	if (s->n == s->held && s->held < s->cap) {
		size_t held = s->held ? s->held * 2 : 1024;
		char *grown = realloc(s->buf, (held < s->cap ? held : s->cap) * s->size);

		if (!grown)
			return fail(s, ENOMEM);
		s->buf = grown;
		s->held = held < s->cap ? held : s->cap;
	}
	if (s->n == s->cap && write_run(s))
		return -s->error;
	memcpy(s->buf + s->n * s->size, item, s->size);
	s->n++;
	return 0;
}

/* A run being merged: a window of it in memory. */
struct cursor {
	char *items;
	size_t at, have, next, left; /* in the window; next item in the file; still in the file */
};

static int refill(struct spill *s, struct cursor *c)
{
	size_t n = c->left < READ_ITEMS ? c->left : READ_ITEMS;

	if (fseek(s->tmp, (long)(c->next * s->size), SEEK_SET) || fread(c->items, s->size, n, s->tmp) != n)
		return fail(s, errno ? errno : EIO);
	c->at = 0;
	c->have = n;
	c->next += n;
	c->left -= n;
	return 0;
}

int spill_each(struct spill *s, void (*cb)(const void *item, void *ctx), void *ctx)
{
	struct cursor *cur;
	size_t k;

	if (s->error)
		return -s->error;
	if (!s->nruns) { /* it all fit: no file */
		if (s->n)
			qsort(s->buf, s->n, s->size, s->cmp);
		for (size_t i = 0; i < s->n; i++)
			cb(s->buf + i * s->size, ctx);
		s->n = 0;
		return 0;
	}
	if (s->n && write_run(s))
		return -s->error;
	k = s->nruns;
	cur = calloc(k, sizeof(*cur));
	for (size_t i = 0; cur && i < k; i++) {
		cur[i] = (struct cursor){ .items = malloc(READ_ITEMS * s->size),
					  .next = s->runs[i].first,
					  .left = s->runs[i].n };
		if (!cur[i].items || refill(s, &cur[i]))
			break;
	}
	/* the smallest head of all runs, over and over: k is small */
	while (cur && !s->error) {
		struct cursor *min = NULL;

		for (size_t i = 0; i < k; i++)
			if (cur[i].items && cur[i].at < cur[i].have &&
			    (!min || s->cmp(cur[i].items + cur[i].at * s->size, min->items + min->at * s->size) < 0))
				min = &cur[i];
		if (!min)
			break;
		cb(min->items + min->at * s->size, ctx);
		if (++min->at == min->have && min->left)
			refill(s, min);
	}
	if (!cur)
		fail(s, ENOMEM);
	for (size_t i = 0; cur && i < k; i++) {
		if (!cur[i].items)
			fail(s, ENOMEM);
		free(cur[i].items);
	}
	free(cur);
	s->nruns = 0;
	s->n = 0;
	return -s->error;
}

void spill_free(struct spill *s)
{
	if (s->tmp)
		fclose(s->tmp);
	free(s->buf);
	free(s->runs);
	memset(s, 0, sizeof(*s));
}
