// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture/reorder.h"

uint64_t reorder_began(const struct sbt_hdr *h)
{
	if (h->type == SBT_IRQ && h->size + sizeof(*h) >= sizeof(struct sbt_irq))
		return ((const struct sbt_irq *)h)->start_ts;
	/* a wake-up an interrupt caused: just before that interrupt, so that
	 * whose it was is known when the interrupt is read */
	if (h->type == SBT_WAKE && h->size + sizeof(*h) >= sizeof(struct sbt_wake) &&
	    ((const struct sbt_wake *)h)->irq_start_ts)
		return ((const struct sbt_wake *)h)->irq_start_ts - 1;
	if (h->type == SBT_DRV && h->size + sizeof(*h) >= sizeof(struct sbt_drv) &&
	    ((const struct sbt_drv *)h)->func == SBT_DRV_MSI)
		return ((const struct sbt_drv *)h)->start_ts;
	return h->ts;
}

static int before_item(const struct reorder_item *a, uint64_t key, uint64_t seq)
{
	return a->key < key || (a->key == key && a->seq < seq);
}

#define REORDER_SPARES 4 /* chunks kept for reuse; more are freed */
#define CHUNK_START ((sizeof(struct reorder_chunk) + 7) & ~(size_t)7)

static struct reorder_chunk *chunk_of(const struct sbt_hdr *rec)
{
	return (struct reorder_chunk *)((uintptr_t)rec & ~(uintptr_t)(REORDER_CHUNK - 1));
}

/* A chunk with none of its records held any more: the spare list, or back. */
static void chunk_done(struct reorder *q, struct reorder_chunk *c)
{
	if (c == q->cur) { /* nothing in it: fill it again from the start */
		c->used = CHUNK_START;
	} else if (q->nspare < REORDER_SPARES) {
		c->next = q->spare;
		q->spare = c;
		q->nspare++;
	} else {
		free(c);
	}
}

/* Room for len bytes, 8-aligned: in the current chunk, a spare one, or a
 * new one; NULL when out of memory. */
static struct sbt_hdr *room_for(struct reorder *q, size_t len, int *own)
{
	size_t need = (len + 7) & ~(size_t)7;
	struct reorder_chunk *c = q->cur;
	void *at;

	*own = need > REORDER_CHUNK - CHUNK_START;
	if (*own)
		return malloc(len);
	if (!c || c->used + need > REORDER_CHUNK) {
		if (c && !c->live) {
			c->used = CHUNK_START;
		} else {
			if (q->spare) {
				c = q->spare;
				q->spare = c->next;
				q->nspare--;
			} else if (!(c = aligned_alloc(REORDER_CHUNK, REORDER_CHUNK))) {
				return NULL;
			}
			c->used = CHUNK_START;
			c->live = 0;
			q->cur = c;
		}
	}
	at = (char *)c + c->used;
	c->used += need;
	c->live++;
	return at;
}

/* A record is handed on: its room goes back. */
static void release_rec(struct reorder *q, const struct reorder_item *it)
{
	struct reorder_chunk *c;

	if (it->own) {
		free(it->rec);
		return;
	}
	c = chunk_of(it->rec);
	if (!--c->live)
		chunk_done(q, c);
}

int reorder_add(struct reorder *q, const struct sbt_hdr *h)
{
	size_t len = sizeof(*h) + h->size, i;
	struct reorder_item it = { reorder_began(h), q->seq++, NULL, 0 };

	if (!(it.rec = room_for(q, len, &it.own)))
		return -ENOMEM;
	memcpy(it.rec, h, len);
	if (q->head + q->n == q->cap) {
		if (q->head) { /* room at the front: move down */
			memmove(q->items, q->items + q->head, q->n * sizeof(*q->items));
			q->head = 0;
		} else {
			size_t cap = q->cap ? q->cap * 2 : 1024;
			struct reorder_item *grown = realloc(q->items, cap * sizeof(*grown));

			if (!grown) {
				release_rec(q, &it);
				return -ENOMEM;
			}
			q->items = grown;
			q->cap = cap;
		}
	}
	/* nearly always the newest: insertion from the back is short */
	for (i = q->head + q->n; i > q->head && !before_item(&q->items[i - 1], it.key, it.seq); i--)
		q->items[i] = q->items[i - 1];
	q->items[i] = it;
	q->n++;
	return 0;
}

void reorder_release(struct reorder *q, uint64_t before, void (*emit)(void *ctx, const struct sbt_hdr *h), void *ctx)
{
	while (q->n && q->items[q->head].key < before) {
		struct reorder_item it = q->items[q->head];

		q->head++;
		q->n--;
		emit(ctx, it.rec);
		release_rec(q, &it);
	}
	if (!q->n)
		q->head = 0;
}

void reorder_free(struct reorder *q)
{
	/* every other chunk goes to the spares, or back, with its last record */
	for (size_t i = q->head; i < q->head + q->n; i++)
		release_rec(q, &q->items[i]);
	free(q->cur);
	while (q->spare) {
		struct reorder_chunk *c = q->spare;

		q->spare = c->next;
		free(c);
	}
	free(q->items);
	memset(q, 0, sizeof(*q));
}

void reorder_release_settled(struct reorder *q, uint64_t now, int all, void (*emit)(void *ctx, const struct sbt_hdr *h),
			     void *ctx)
{
	uint64_t before = all ? UINT64_MAX : now > REORDER_WINDOW_NS ? now - REORDER_WINDOW_NS : 0;

	reorder_release(q, before, emit, ctx);
}
