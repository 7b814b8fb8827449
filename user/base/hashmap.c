// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdlib.h>

#include "base/hashmap.h"

static int grow(struct hashmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct hm_slot *old = m->slots, *s = calloc(cap, sizeof(*s));
	size_t oldcap = m->cap;

	if (!s)
		return -ENOMEM;
	m->slots = s;
	m->cap = cap;
	m->n = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].val)
			hm_put(m, old[i].key, old[i].val);
	free(old);
	return 0;
}

int hm_put(struct hashmap *m, uint64_t key, void *val)
{
	if ((m->n + 1) * 4 > m->cap * 3 && grow(m))
		return -ENOMEM;
	for (size_t i = hm_slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->slots[i].val) {
			m->slots[i].key = key;
			m->slots[i].val = val;
			m->n++;
			return 0;
		}
		if (m->slots[i].key == key) {
			m->slots[i].val = val;
			return 0;
		}
	}
}

void *hm_del(struct hashmap *m, uint64_t key)
{
	size_t i, j, mask = m->cap - 1;
	void *val;

	if (!m->cap)
		return NULL;
	for (i = hm_slot_of(key, m->cap);; i = (i + 1) & mask) {
		if (!m->slots[i].val)
			return NULL;
		if (m->slots[i].key == key)
			break;
	}
	val = m->slots[i].val;
	m->slots[i].val = NULL;
	m->n--;
	/* shift later members of the run back so lookups never stop early */
	for (j = (i + 1) & mask; m->slots[j].val; j = (j + 1) & mask) {
		size_t home = hm_slot_of(m->slots[j].key, m->cap);

		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			m->slots[i] = m->slots[j];
			m->slots[j].val = NULL;
			i = j;
		}
	}
	return val;
}

void hm_each(const struct hashmap *m, void (*fn)(uint64_t key, void *val, void *ctx), void *ctx)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].val)
			fn(m->slots[i].key, m->slots[i].val, ctx);
}

void hm_free(struct hashmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->n = 0;
}

void hm_free_values(struct hashmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].val);
	hm_free(m);
}
