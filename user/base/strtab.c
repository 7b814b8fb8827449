// SPDX-License-Identifier: GPL-2.0-only
#include <stdlib.h>
#include <string.h>

#include "base/strtab.h"

uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
	return h;
}

uint64_t strtab_id(struct strtab *t, const char *s, bool *added)
{
	uint64_t key = fnv1a(s);
	void *v;

	*added = false;
	/* a different string with the same hash moves on to key + 1 */
	while ((v = hm_get(&t->map, key))) {
		uint64_t id = (uintptr_t)v;

		if (!strcmp(t->strs[id - 1], s))
			return id;
		key++;
	}
	char **grown = realloc(t->strs, (t->n + 1) * sizeof(*grown));

	if (!grown)
		return 0;
	t->strs = grown;
	if (!(t->strs[t->n] = strdup(s)))
		return 0;
	if (hm_put(&t->map, key, (void *)(uintptr_t)(t->n + 1))) {
		free(t->strs[t->n]);
		return 0;
	}
	*added = true;
	return ++t->n;
}

const char *strtab_str(const struct strtab *t, uint64_t id)
{
	return id && id <= t->n ? t->strs[id - 1] : "";
}

void strtab_free(struct strtab *t)
{
	for (uint64_t i = 0; i < t->n; i++)
		free(t->strs[i]);
	free(t->strs);
	hm_free(&t->map);
	memset(t, 0, sizeof(*t));
}
