/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What a capture says about itself, gathered while reading it: probe
 * names, thread and process names, the clock snapshot and the host. Fed
 * every record in order; the dump and the summary look names up here.
 */
#ifndef SBT_META_H
#define SBT_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.h"

#define META_MAX_PROBES 65536

struct meta_probe {
	char *name, *lib;
	int role, bytes_arg;
};

struct meta_thread {
	uint32_t tid; /* 0 = empty slot */
	char comm[SBT_COMM_LEN];
};

struct capture_meta {
	struct meta_probe *probes;
	size_t nprobes;
	struct meta_thread *threads; /* open addressing on tid */
	size_t thread_cap, nthreads;
	struct sbt_meta_clock clock;
	struct sbt_meta_host host;
	bool has_clock, has_host;
};

void meta_init(struct capture_meta *m);
/* 0, or -ENOMEM; ill-formed metadata records are ignored */
int meta_add(struct capture_meta *m, const struct sbt_hdr *h);
const char *meta_thread_name(const struct capture_meta *m, uint32_t tid);
/* inline: looked up for every call record */
static inline const struct meta_probe *meta_probe(const struct capture_meta *m, uint32_t id)
{
	return id < m->nprobes && m->probes[id].name ? &m->probes[id] : NULL;
}
void meta_free(struct capture_meta *m);

/* Strings of a variable-length record, bounded by its payload. Returns the
 * i-th NUL-ended string, or "" when absent or unterminated. */
const char *meta_string(const char *base, size_t len, int i);

#endif
