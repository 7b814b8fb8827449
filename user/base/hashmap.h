/* SPDX-License-Identifier: GPL-2.0-only */
/* A map from 64-bit keys to pointers: open addressing, linear probing,
 * deletion by backward shift (no tombstones), so long runs stay small. */
#ifndef SBT_HASHMAP_H
#define SBT_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

struct hashmap {
	struct hm_slot {
		uint64_t key;
		void *val; /* NULL = empty */
	} * slots;
	size_t cap, n;
};

static inline size_t hm_slot_of(uint64_t key, size_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (size_t)key & (cap - 1);
}

/* The value of key, or NULL. Inline: the converter looks up a few times a
 * record. */
static inline void *hm_get(const struct hashmap *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	for (size_t i = hm_slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->slots[i].val)
			return NULL;
		if (m->slots[i].key == key)
			return m->slots[i].val;
	}
}
/* 0, or -ENOMEM. val must not be NULL. Replaces an existing value. */
int hm_put(struct hashmap *m, uint64_t key, void *val);
/* Removes and returns the value, or NULL. */
void *hm_del(struct hashmap *m, uint64_t key);
/* Calls fn for every value; fn must not change the map. */
void hm_each(const struct hashmap *m, void (*fn)(uint64_t key, void *val, void *ctx), void *ctx);
void hm_free(struct hashmap *m);
/* free() every value, then the map */
void hm_free_values(struct hashmap *m);

#endif
