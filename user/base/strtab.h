/* SPDX-License-Identifier: GPL-2.0-only */
/* Strings to small ids (1, 2, ...), by content: for Perfetto's interning
 * and the report's per-name statistics. */
#ifndef SBT_STRTAB_H
#define SBT_STRTAB_H

#include <stdbool.h>
#include <stdint.h>

#include "base/hashmap.h"

struct strtab {
	struct hashmap map; /* content hash (+ probe) -> id */
	char **strs; /* by id - 1 */
	uint64_t n;
};

/* FNV-1a, 64 bits: the hash of a string's content. */
uint64_t fnv1a(const char *s);

/* The id of s (1 up), adding it if new (*added says so). 0 when out of memory. */
uint64_t strtab_id(struct strtab *t, const char *s, bool *added);
const char *strtab_str(const struct strtab *t, uint64_t id);

/* Ids by address, in front of a table, for strings that stay unchanged
 * while the table lives (the model's names, model.h): an address seen
 * before has the id it had, with no hashing of the string. */
#define STRTAB_CACHE 512

struct strtab_cache {
	const char *ptr[STRTAB_CACHE];
	uint64_t id[STRTAB_CACHE];
};

static inline uint64_t strtab_id_cached(struct strtab *t, struct strtab_cache *c, const char *s)
{
	size_t slot = ((uintptr_t)s >> 3) % STRTAB_CACHE;
	bool added;
	uint64_t id;

	if (c->ptr[slot] == s)
		return c->id[slot];
	id = strtab_id(t, s, &added);
	if (id) { /* 0 is out of memory: ask again next time */
		c->ptr[slot] = s;
		c->id[slot] = id;
	}
	return id;
}
void strtab_free(struct strtab *t);

#endif
