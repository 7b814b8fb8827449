/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Fibonacci hashing: a key times 2^64 divided by the golden ratio, whose
 * top bits spread keys that differ only at a fixed stride (string
 * literals a few bytes apart, a probe's names in its table, stream
 * objects from one allocator). For small direct-mapped caches by
 * address, where a full mixer costs more than the misses it saves.
 */
#ifndef SBT_FIBHASH_H
#define SBT_FIBHASH_H

#include <stddef.h>
#include <stdint.h>

#define FIBHASH_MUL 0x9e3779b97f4a7c15ull

/* The key's slot among 1 << bits (1 <= bits <= 63). */
static inline size_t fibhash(uint64_t key, unsigned int bits)
{
	return (size_t)((key * FIBHASH_MUL) >> (64 - bits));
}

#endif
