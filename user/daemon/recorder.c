// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "daemon/recorder.h"

int recorder_init(struct flight_recorder *r, size_t mib, double seconds)
{
	memset(r, 0, sizeof(*r));
	r->nseg = mib ? mib * (1u << 20) / RECORDER_SEGMENT : 1;
	r->seg = calloc(r->nseg, sizeof(*r->seg));
	r->keep_ns = (uint64_t)(seconds * 1e9);
	return r->seg ? 0 : -ENOMEM;
}

void recorder_free(struct flight_recorder *r)
{
	for (size_t i = 0; i < r->nseg; i++)
		free(r->seg[i].data);
	free(r->seg);
	memset(r, 0, sizeof(*r));
}

static void clear(struct flight_recorder *r, struct recorder_segment *s)
{
	r->dropped_records += s->records;
	s->used = 0;
	s->records = 0;
	s->first_ts = s->last_ts = 0;
}

void recorder_add(struct flight_recorder *r, const struct sbt_hdr *h, uint64_t now)
{
	size_t len = sbt_record_len(h);
	struct recorder_segment *s = &r->seg[r->head];

	if (len > RECORDER_SEGMENT)
		return;
	/* older than T: whole segments, oldest first (the one after head) */
	for (size_t i = 1; i <= r->nseg; i++) {
		struct recorder_segment *old = &r->seg[(r->head + i) % r->nseg];

		if (old->records && now > r->keep_ns && old->last_ts < now - r->keep_ns)
			clear(r, old); /* the one being filled too, when all it has is old */
	}
	if (s->used + len > RECORDER_SEGMENT) { /* next segment, dropping what it held */
		r->head = (r->head + 1) % r->nseg;
		s = &r->seg[r->head];
		clear(r, s);
	}
	if (!s->data && !(s->data = malloc(RECORDER_SEGMENT))) {
		r->dropped_records++;
		return;
	}
	memcpy(s->data + s->used, h, sizeof(*h) + h->size);
	s->used += len;
	s->records++;
	r->records++;
	if (!s->first_ts || h->ts < s->first_ts)
		s->first_ts = h->ts;
	if (h->ts > s->last_ts)
		s->last_ts = h->ts;
}

uint64_t recorder_each(const struct flight_recorder *r, uint64_t from, uint64_t to,
		       void (*fn)(void *ctx, const struct sbt_hdr *h), void *ctx, uint64_t *oldest)
{
	uint64_t n = 0;

	*oldest = 0;
	for (size_t i = 1; i <= r->nseg; i++) {
		const struct recorder_segment *s = &r->seg[(r->head + i) % r->nseg];

		if (!s->records)
			continue;
		if (!*oldest || s->first_ts < *oldest)
			*oldest = s->first_ts;
		if (s->last_ts < from || s->first_ts > to)
			continue;
		for (size_t off = 0; off < s->used;) {
			const struct sbt_hdr *h = (const void *)(s->data + off);

			if (h->ts >= from && h->ts <= to) {
				fn(ctx, h);
				n++;
			}
			off += sbt_record_len(h);
		}
	}
	return n;
}

size_t recorder_bytes(const struct flight_recorder *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nseg; i++)
		n += r->seg[i].data ? RECORDER_SEGMENT : 0;
	return n;
}
