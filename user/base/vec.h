/* SPDX-License-Identifier: GPL-2.0-only */
/* Growing arrays: room for `want` elements of `size` bytes in *v, doubling. */
#ifndef SBT_VEC_H
#define SBT_VEC_H

#include <stddef.h>
#include <stdlib.h>

/* 0, or -1 when out of memory (*v and *cap unchanged). */
static inline int vec_reserve(void **v, size_t *cap, size_t want, size_t size)
{
	size_t c = *cap ? *cap : 16;
	void *g;

	if (want <= *cap)
		return 0;
	while (c < want)
		c *= 2;
	if (!(g = realloc(*v, c * size)))
		return -1;
	*v = g;
	*cap = c;
	return 0;
}

#endif
