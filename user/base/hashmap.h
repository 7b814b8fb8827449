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
	} *slots;
	size_t cap, n;
};

void *hm_get(const struct hashmap *m, uint64_t key);
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
