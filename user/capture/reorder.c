// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture/reorder.h"

/* When it began: an interrupt (and vfio's MSI handler) at its entry. */
static uint64_t began(const struct sbt_hdr *h)
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

int reorder_add(struct reorder *q, const struct sbt_hdr *h)
{
	size_t len = sizeof(*h) + h->size, i;
	struct reorder_item it = { began(h), q->seq++, malloc(len) };

	if (!it.rec)
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
				free(it.rec);
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

void reorder_release(struct reorder *q, uint64_t before,
		     void (*emit)(void *ctx, const struct sbt_hdr *h), void *ctx)
{
	while (q->n && q->items[q->head].key < before) {
		struct sbt_hdr *rec = q->items[q->head].rec;

		q->head++;
		q->n--;
		emit(ctx, rec);
		free(rec);
	}
	if (!q->n)
		q->head = 0;
}

void reorder_free(struct reorder *q)
{
	for (size_t i = q->head; i < q->head + q->n; i++)
		free(q->items[i].rec);
	free(q->items);
	memset(q, 0, sizeof(*q));
}
