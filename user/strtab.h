/* SPDX-License-Identifier: GPL-2.0-only */
/* Strings to small ids (1, 2, ...), by content: for Perfetto's interning
 * and the report's per-name statistics. */
#ifndef SBT_STRTAB_H
#define SBT_STRTAB_H

#include <stdbool.h>
#include <stdint.h>

#include "hashmap.h"

struct strtab {
	struct hashmap map; /* content hash (+ probe) -> id */
	char **strs; /* by id - 1 */
	uint64_t n;
};

/* The id of s (1 up), adding it if new (*added says so). 0 when out of memory. */
uint64_t strtab_id(struct strtab *t, const char *s, bool *added);
const char *strtab_str(const struct strtab *t, uint64_t id);
void strtab_free(struct strtab *t);

#endif
