// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "daemon/recorder.h"

int recorder_init(struct flight_recorder *r, size_t mib, double seconds, unsigned int share_pct)
{
	memset(r, 0, sizeof(*r));
	r->nseg = mib ? mib * (1u << 20) / RECORDER_SEGMENT : 1;
	r->seg = calloc(r->nseg, sizeof(*r->seg));
	r->keep_ns = (uint64_t)(seconds * 1e9);
	if (share_pct && share_pct < 100)
		r->share_bytes = (uint64_t)r->nseg * RECORDER_SEGMENT * share_pct / 100;
	return r->seg ? 0 : -ENOMEM;
}

/* A segment whose newest record is at last_ts is old at last_ts + T:
 * the recorder looks for old segments again no later than that. */
static void age_due_at(struct flight_recorder *r, uint64_t last_ts)
{
	uint64_t due = last_ts + r->keep_ns + 1;

	if (due < r->age_due)
		r->age_due = due;
}

/* Whose record it is, for the shares: 0 for nobody's. */
static uint32_t owner(const struct sbt_hdr *h)
{
	if (h->type >= SBT_META_CLOCK || h->type == SBT_IRQ || h->type == SBT_DRV)
		return 0;
	return h->tgid;
}

uint64_t recorder_held(const struct flight_recorder *r, uint32_t tgid)
{
	return (uint64_t)(uintptr_t)hm_get(&r->held, tgid);
}

/* A process's bytes go up (+) or down (-); 0, or -ENOMEM. */
static int hold(struct flight_recorder *r, uint32_t tgid, int64_t delta)
{
	uint64_t now = recorder_held(r, tgid) + (uint64_t)delta;

	if (!now) {
		hm_del(&r->held, tgid);
		return 0;
	}
	return hm_put(&r->held, tgid, (void *)(uintptr_t)now);
}

void recorder_free(struct flight_recorder *r)
{
	for (size_t i = 0; i < r->nseg; i++)
		free(r->seg[i].data);
	free(r->seg);
	hm_free(&r->held);
	memset(r, 0, sizeof(*r));
}

static void clear(struct flight_recorder *r, struct recorder_segment *s)
{
	for (size_t off = 0; r->share_bytes && off < s->used;) {
		const struct sbt_hdr *h = (const void *)(s->data + off);
		size_t len = sbt_record_len(h);

		if (owner(h))
			hold(r, owner(h), -(int64_t)len);
		off += len;
	}
	r->dropped_records += s->records;
	s->used = 0;
	s->records = 0;
	s->first_ts = s->last_ts = 0;
}

/* An interrupt's name, kept beside the ring: the latest for its number. */
static void keep_irq_name(struct flight_recorder *r, const struct sbt_hdr *h)
{
	const struct sbt_meta_irq *m = (const void *)h;
	int i;

	if (sizeof(*h) + h->size < sizeof(*m))
		return;
	for (i = 0; i < r->nirq_names && r->irq_names[i].irq != m->irq; i++)
		;
	if (i == RECORDER_IRQ_NAMES)
		return;
	r->irq_names[i] = *m;
	if (i == r->nirq_names)
		r->nirq_names++;
}

void recorder_irq_names(const struct flight_recorder *r, void (*fn)(void *ctx, const struct sbt_hdr *h),
			void *ctx)
{
	for (int i = 0; i < r->nirq_names; i++)
		fn(ctx, &r->irq_names[i].h);
}

void recorder_add(struct flight_recorder *r, const struct sbt_hdr *h, uint64_t now)
{
	size_t len = sbt_record_len(h);
	struct recorder_segment *s = &r->seg[r->head];

	if (h->type == SBT_META_IRQ)
		keep_irq_name(r, h);

	if (len > RECORDER_SEGMENT)
		return;
	/* older than T: whole segments, oldest first (the one after head);
	 * looked for only once one can be (not at every record) */
	if (now >= r->age_due) {
		r->age_due = UINT64_MAX;
		for (size_t i = 1; i <= r->nseg; i++) {
			struct recorder_segment *old = &r->seg[(r->head + i) % r->nseg];

			if (old->records && now > r->keep_ns && old->last_ts < now - r->keep_ns)
				clear(r, old); /* the one being filled too, when all it has is old */
			else if (old->records)
				age_due_at(r, old->last_ts);
		}
	}
	if (s->used + len > RECORDER_SEGMENT) { /* next segment, dropping what it held */
		r->head = (r->head + 1) % r->nseg;
		s = &r->seg[r->head];
		clear(r, s);
	}
	/* (after what aged out went: that may be its own) */
	if (r->share_bytes && owner(h) && recorder_held(r, owner(h)) + len > r->share_bytes) {
		r->over_share++;
		r->over_share_pid = owner(h);
		return;
	}
	if (!s->data && !(s->data = malloc(RECORDER_SEGMENT))) {
		r->dropped_records++;
		return;
	}
	if (r->share_bytes && owner(h) && hold(r, owner(h), (int64_t)len)) {
		r->dropped_records++; /* no room to count it: not kept, so nobody's share is wrong */
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
	if (s->records == 1) /* a later ts only puts its own turn later */
		age_due_at(r, s->last_ts);
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

size_t recorder_used(const struct flight_recorder *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nseg; i++)
		n += r->seg[i].used;
	return n;
}

size_t recorder_bytes(const struct flight_recorder *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nseg; i++)
		n += r->seg[i].data ? RECORDER_SEGMENT : 0;
	return n;
}
