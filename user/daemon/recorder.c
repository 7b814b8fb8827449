// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "capture/reorder.h"
#include "daemon/recorder.h"

int recorder_init(struct flight_recorder *r, size_t mib, double seconds, uint32_t (*uid_of)(void *ctx, uint32_t tgid),
		  void *uid_ctx)
{
	memset(r, 0, sizeof(*r));
	/* at most RECORDER_MAX_SEGMENTS: making room looks at each account */
	r->seg_size = RECORDER_SEGMENT;
	while ((uint64_t)mib * (1u << 20) / r->seg_size > RECORDER_MAX_SEGMENTS)
		r->seg_size *= 2;
	r->nseg = mib ? (size_t)((uint64_t)mib * (1u << 20) / r->seg_size) : 1;
	r->seg = calloc(r->nseg, sizeof(*r->seg));
	r->acct = calloc(r->nseg + 1, sizeof(*r->acct));
	r->users = calloc(r->nseg + 1, sizeof(*r->users));
	r->keep_ns = (uint64_t)(seconds * 1e9);
	r->age_due = UINT64_MAX;
	r->uid_of = uid_of;
	r->uid_ctx = uid_ctx;
	r->last_acct = -1;
	if (!r->seg || !r->acct || !r->users) {
		recorder_free(r);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r->nseg; i++) {
		r->seg[i].account = -1;
		r->seg[i].next = i + 1 < r->nseg ? (int32_t)i + 1 : -1;
	}
	for (size_t i = 0; i <= r->nseg; i++)
		r->acct[i].oldest = r->acct[i].newest = -1;
	return 0;
}

void recorder_free(struct flight_recorder *r)
{
	for (size_t i = 0; r->seg && i < r->nseg; i++)
		free(r->seg[i].data);
	free(r->seg);
	free(r->acct);
	free(r->users);
	hm_free(&r->by_tgid);
	memset(r, 0, sizeof(*r));
}

/* Whose record it is: 0 for the kernel's (interrupts come in whatever
 * task they interrupt; descriptions are the daemon's). */
static uint32_t owner(const struct sbt_hdr *h)
{
	if (h->type >= SBT_META_CLOCK || h->type == SBT_IRQ || h->type == SBT_DRV)
		return 0;
	return h->tgid;
}

static uint32_t uid_now(const struct flight_recorder *r, uint32_t tgid)
{
	if (!tgid)
		return RECORDER_UID_KERNEL;
	return r->uid_of ? r->uid_of(r->uid_ctx, tgid) : RECORDER_UID_UNKNOWN;
}

/* ---- users and accounts -------------------------------------------------- */

static uint32_t user_of(struct flight_recorder *r, uint32_t uid)
{
	size_t i, free_one = r->nseg + 1;

	for (i = 0; i <= r->nseg; i++) {
		if (r->users[i].accounts && r->users[i].uid == uid)
			return (uint32_t)i;
		if (!r->users[i].accounts && free_one > r->nseg)
			free_one = i;
	}
	/* there is always one: no more users than accounts, nor accounts than slots */
	r->users[free_one] = (struct recorder_user){ .uid = uid };
	return (uint32_t)free_one;
}

/* A new account for tgid, the current one for it from now on; -1 when the
 * map has no room. */
static int32_t account_new(struct flight_recorder *r, uint32_t tgid, uint32_t uid)
{
	size_t i;

	for (i = 0; i <= r->nseg && r->acct[i].newest >= 0; i++)
		;
	if (i > r->nseg || hm_put(&r->by_tgid, tgid, (void *)(uintptr_t)(i + 1)))
		return -1;
	r->acct[i] = (struct recorder_account){ .tgid = tgid, .uid = uid, .oldest = -1, .newest = -1 };
	r->acct[i].user = user_of(r, uid);
	r->users[r->acct[i].user].accounts++;
	return (int32_t)i;
}

/* An account with no segment left is gone (and no longer its tgid's). */
static void account_drop(struct flight_recorder *r, int32_t a)
{
	struct recorder_account *c = &r->acct[a];

	if ((uintptr_t)hm_get(&r->by_tgid, c->tgid) == (uintptr_t)a + 1)
		hm_del(&r->by_tgid, c->tgid);
	r->users[c->user].accounts--;
	c->oldest = c->newest = -1;
	if (r->last_acct == a)
		r->last_acct = -1;
}

/* ---- segments ------------------------------------------------------------ */

/* The account's oldest segment back to the free list. */
static void pop_oldest(struct flight_recorder *r, int32_t a)
{
	struct recorder_account *c = &r->acct[a];
	int32_t i = c->oldest;
	struct recorder_segment *s = &r->seg[i];

	c->bytes -= s->used;
	c->segments--;
	r->users[c->user].bytes -= s->used;
	r->users[c->user].segments--;
	c->oldest = s->next;
	if (c->oldest < 0)
		c->newest = -1;
	s->used = 0;
	s->records = 0;
	s->first_ts = s->last_ts = 0;
	s->account = -1;
	s->next = r->free_seg;
	r->free_seg = i;
	if (c->newest < 0)
		account_drop(r, a);
}

static void count_eviction(struct flight_recorder *r, const struct recorder_segment *s, uint32_t tgid, uint32_t uid)
{
	struct recorder_eviction *e = r->nevictions ? &r->evictions[(r->nevictions - 1) % RECORDER_EVICTIONS] : NULL;
	int i;

	/* one user's evictions close in time are one (a flood of many small
	 * processes evicts at every record), so the ring goes back further */
	if (e && e->uid == uid && s->first_ts >= e->first_ts && s->last_ts <= e->first_ts + RECORDER_EVICTION_SPAN) {
		e->last_ts = s->last_ts > e->last_ts ? s->last_ts : e->last_ts;
		e->records += s->records;
		if (e->tgid != tgid)
			e->tgid = 0; /* several */
	} else {
		e = &r->evictions[r->nevictions++ % RECORDER_EVICTIONS];
		*e = (struct recorder_eviction){ s->first_ts, s->last_ts, s->records, tgid, uid };
	}
	r->evicted += s->records;
	for (i = 0; i < r->nevicted_uids && i < RECORDER_USERS_NAMED && r->evicted_by_uid[i].uid != uid; i++)
		;
	if (i == RECORDER_USERS_NAMED) { /* the rest as one */
		r->evicted_by_uid[i].uid = RECORDER_UID_OTHER;
		r->nevicted_uids = RECORDER_USERS_NAMED + 1;
	} else if (i == r->nevicted_uids) {
		r->evicted_by_uid[i].uid = uid;
		r->nevicted_uids++;
	}
	r->evicted_by_uid[i].records += s->records;
}

/* Who holds more of the recorder: segments first (what room is made of,
 * however full), then bytes. */
static bool holds_more(uint32_t seg_a, uint64_t bytes_a, uint32_t seg_b, uint64_t bytes_b)
{
	return seg_a != seg_b ? seg_a > seg_b : bytes_a > bytes_b;
}

/* Room for one segment: the oldest of the process holding the most, of
 * the user holding the most. */
static void evict(struct flight_recorder *r)
{
	const struct recorder_user *u = r->users;
	const struct recorder_account *c = r->acct;
	int32_t user = -1, a = -1;

	for (size_t i = 0; i <= r->nseg; i++)
		if (u[i].accounts &&
		    (user < 0 || holds_more(u[i].segments, u[i].bytes, u[user].segments, u[user].bytes)))
			user = (int32_t)i;
	for (size_t i = 0; i <= r->nseg; i++)
		if (c[i].newest >= 0 && c[i].user == (uint32_t)user &&
		    (a < 0 || holds_more(c[i].segments, c[i].bytes, c[a].segments, c[a].bytes)))
			a = (int32_t)i;
	if (a < 0)
		return; /* nothing held: cannot be, with no segment free */
	count_eviction(r, &r->seg[c[a].oldest], c[a].tgid, c[a].uid);
	pop_oldest(r, a);
}

/* The free segment, newest in account a's chain; -1 when its memory cannot be had. */
static int32_t grow(struct flight_recorder *r, int32_t a)
{
	struct recorder_account *c = &r->acct[a];
	int32_t i = r->free_seg;
	struct recorder_segment *s = &r->seg[i];

	if (!s->data && !(s->data = malloc(r->seg_size)))
		return -1;
	r->free_seg = s->next;
	s->account = a;
	s->next = -1;
	if (c->newest >= 0)
		r->seg[c->newest].next = i;
	else
		c->oldest = i;
	c->newest = i;
	c->segments++;
	r->users[c->user].segments++;
	return i;
}

/* The account a record of tgid goes to, with room for len more bytes in
 * its newest segment; -1 when there is none. A new segment asks again
 * whose the process is: a pid used again by another user's process
 * starts an account of its own. */
static int32_t account_for(struct flight_recorder *r, uint32_t tgid, size_t len)
{
	int32_t a = r->last_acct;
	uint32_t uid;
	uintptr_t v;

	if (a >= 0 && r->last_tgid == tgid && r->seg[r->acct[a].newest].used + len <= r->seg_size)
		return a;
	v = (uintptr_t)hm_get(&r->by_tgid, tgid);
	a = v ? (int32_t)v - 1 : -1;
	if (a < 0 || r->seg[r->acct[a].newest].used + len > r->seg_size) {
		if (r->free_seg < 0) {
			/* it may take this process's own last segment, and its account */
			evict(r);
			v = (uintptr_t)hm_get(&r->by_tgid, tgid);
			a = v ? (int32_t)v - 1 : -1;
		}
		uid = uid_now(r, tgid);
		if (a < 0 || (uid != r->acct[a].uid && uid != RECORDER_UID_UNKNOWN))
			a = account_new(r, tgid, uid);
		if (a < 0 || r->free_seg < 0 || grow(r, a) < 0) {
			/* a new account that got no segment holds nothing */
			if (a >= 0 && r->acct[a].newest < 0)
				account_drop(r, a);
			r->last_acct = -1;
			return -1;
		}
	}
	r->last_acct = a;
	r->last_tgid = tgid;
	return a;
}

/* A segment whose newest record is at last_ts is old at last_ts + T:
 * the recorder looks for old segments again no later than that. */
static void age_due_at(struct flight_recorder *r, uint64_t last_ts)
{
	uint64_t due = last_ts + r->keep_ns + 1;

	if (due < r->age_due)
		r->age_due = due;
}

/* What is older than T goes, each account's oldest segments first. */
static void age(struct flight_recorder *r, uint64_t now)
{
	r->age_due = UINT64_MAX;
	for (size_t i = 0; i <= r->nseg; i++) {
		struct recorder_account *c = &r->acct[i];

		while (c->newest >= 0 && now > r->keep_ns && r->seg[c->oldest].last_ts < now - r->keep_ns) {
			r->aged += r->seg[c->oldest].records;
			pop_oldest(r, (int32_t)i);
		}
		if (c->newest >= 0)
			age_due_at(r, r->seg[c->oldest].last_ts);
	}
}

/* An interrupt's name, kept beside the segments: the latest for its number. */
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

void recorder_irq_names(const struct flight_recorder *r, void (*fn)(void *ctx, const struct sbt_hdr *h), void *ctx)
{
	for (int i = 0; i < r->nirq_names; i++)
		fn(ctx, &r->irq_names[i].h);
}

void recorder_add(struct flight_recorder *r, const struct sbt_hdr *h, uint64_t now)
{
	size_t len = sbt_record_len(h);
	struct recorder_segment *s;
	int32_t a;

	if (h->type == SBT_META_IRQ)
		keep_irq_name(r, h);
	if (len > r->seg_size) {
		r->unkept++;
		return;
	}
	/* looked for only once a segment can be old, not at every record */
	if (now >= r->age_due)
		age(r, now);
	if ((a = account_for(r, owner(h), len)) < 0) {
		r->unkept++; /* out of memory: not kept, and counted */
		return;
	}
	s = &r->seg[r->acct[a].newest];
	memcpy(s->data + s->used, h, sizeof(*h) + h->size);
	s->used += len;
	s->records++;
	r->acct[a].bytes += len;
	r->users[r->acct[a].user].bytes += len;
	r->records++;
	if (!s->first_ts || h->ts < s->first_ts)
		s->first_ts = h->ts;
	if (h->ts > s->last_ts)
		s->last_ts = h->ts;
	if (s->records == 1) /* a later ts only puts its own turn later */
		age_due_at(r, s->last_ts);
}

const char *recorder_uid_name(uint32_t uid, char buf[16])
{
	if (uid == RECORDER_UID_KERNEL)
		return "kernel";
	if (uid == RECORDER_UID_UNKNOWN)
		return "unknown";
	if (uid == RECORDER_UID_OTHER)
		return "other";
	snprintf(buf, 16, "%u", uid);
	return buf;
}

/* ---- reading ------------------------------------------------------------- */

/* One account's place while the accounts' records are merged by time. */
struct cursor {
	const struct sbt_hdr *h; /* its next record in the window */
	int32_t seg;
	size_t off;
};

/* The cursor's next record in [from, to] (h NULL when none is left). */
static void cursor_next(const struct flight_recorder *r, struct cursor *c, uint64_t from, uint64_t to)
{
	for (c->h = NULL; c->seg >= 0;) {
		const struct recorder_segment *s = &r->seg[c->seg];

		if (c->off >= s->used || s->last_ts < from) {
			c->seg = s->next;
			c->off = 0;
			continue;
		}
		if (s->first_ts > to) {
			c->seg = -1;
			return;
		}
		c->h = (const void *)(s->data + c->off);
		c->off += sbt_record_len(c->h);
		if (c->h->ts >= from && c->h->ts <= to)
			return;
		c->h = NULL;
	}
}

/* In the order the records came in: the reorder step's, which puts an
 * interrupt at its handler's entry (not its ts, the exit), before the wait
 * it ended. */
static bool earlier(const struct cursor *a, const struct cursor *b)
{
	return reorder_began(a->h) < reorder_began(b->h);
}

static void sift_down(struct cursor *heap, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct cursor t;

		if (l < n && earlier(&heap[l], &heap[m]))
			m = l;
		if (l + 1 < n && earlier(&heap[l + 1], &heap[m]))
			m = l + 1;
		if (m == i)
			return;
		t = heap[i];
		heap[i] = heap[m];
		heap[m] = t;
		i = m;
	}
}

uint64_t recorder_each(const struct flight_recorder *r, uint64_t from, uint64_t to,
		       void (*fn)(void *ctx, const struct sbt_hdr *h), void *ctx, uint64_t *oldest)
{
	struct cursor *heap = calloc(r->nseg + 1, sizeof(*heap));
	size_t n = 0;
	uint64_t count = 0;

	*oldest = 0;
	for (size_t i = 0; i < r->nseg; i++)
		if (r->seg[i].records && (!*oldest || r->seg[i].first_ts < *oldest))
			*oldest = r->seg[i].first_ts;
	for (size_t i = 0; i <= r->nseg; i++) {
		struct cursor c = { NULL, r->acct[i].oldest, 0 };

		if (r->acct[i].newest < 0)
			continue;
		cursor_next(r, &c, from, to);
		if (!c.h)
			continue;
		if (!heap) { /* no memory to merge: each account in turn, all the same */
			for (; c.h; cursor_next(r, &c, from, to), count++)
				fn(ctx, c.h);
			continue;
		}
		heap[n++] = c;
	}
	for (size_t i = n; i-- > 0;)
		sift_down(heap, n, i);
	while (n) {
		fn(ctx, heap[0].h);
		count++;
		cursor_next(r, &heap[0], from, to);
		if (!heap[0].h)
			heap[0] = heap[--n];
		sift_down(heap, n, 0);
	}
	free(heap);
	return count;
}

size_t recorder_used(const struct flight_recorder *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nseg; i++)
		n += r->seg[i].used;
	return n;
}

uint64_t recorder_kept(const struct flight_recorder *r)
{
	uint64_t n = 0;

	for (size_t i = 0; i < r->nseg; i++)
		n += r->seg[i].records;
	return n;
}

size_t recorder_bytes(const struct flight_recorder *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nseg; i++)
		n += r->seg[i].data ? r->seg_size : 0;
	return n;
}

uint64_t recorder_held(const struct flight_recorder *r, uint32_t tgid)
{
	uint64_t n = 0;

	for (size_t i = 0; i <= r->nseg; i++)
		if (r->acct[i].newest >= 0 && r->acct[i].tgid == tgid)
			n += r->acct[i].bytes;
	return n;
}

int recorder_evicted_in(const struct flight_recorder *r, uint64_t from, uint64_t to, struct recorder_evicted_uid *out,
			int max, uint64_t *all, bool *sure)
{
	uint64_t kept = r->nevictions < RECORDER_EVICTIONS ? r->nevictions : RECORDER_EVICTIONS;
	int n = 0;

	*all = 0;
	/* the oldest remembered began after from: earlier ones may have overlapped */
	*sure = r->nevictions <= RECORDER_EVICTIONS ||
		r->evictions[r->nevictions % RECORDER_EVICTIONS].first_ts <= from;
	for (uint64_t k = 0; k < kept; k++) {
		const struct recorder_eviction *e = &r->evictions[k];
		int i;

		if (e->last_ts < from || e->first_ts > to)
			continue;
		*all += e->records;
		for (i = 0; i < n && out[i].uid != e->uid; i++)
			;
		if (i == n && n < max)
			out[n++] = (struct recorder_evicted_uid){ e->uid, 0 };
		if (i < n)
			out[i].records += e->records;
	}
	for (int i = 1; i < n; i++) /* most first: a few, by insertion */
		for (int j = i; j > 0 && out[j].records > out[j - 1].records; j--) {
			struct recorder_evicted_uid t = out[j];

			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return n;
}
