/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's flight recorder: the last T seconds (or M MiB, whichever is
 * less) of raw records, in fixed-size segments of one process each (its
 * "account"; cards' interrupts and descriptions are the kernel's account).
 * Segments are allocated when first used, so memory grows with what is
 * kept, up to M.
 *
 * Fairness without starving anyone: a process, or a user, alone may fill
 * the recorder. Only when it is full does a segment go to make room, and
 * it is the oldest segment of the process holding the most of the user
 * holding the most (segments, however full, then bytes): one user's many processes cannot evict another
 * user's evidence, and a busy job always keeps its last seconds. What goes
 * is counted per user and remembered by time, so a snapshot can say how
 * much of its window was let go, and whose.
 */
#ifndef SBT_RECORDER_H
#define SBT_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/hashmap.h"
#include "events.h"

/* Small enough that a process with a few records holds little, large
 * enough that a segment's bookkeeping is nothing beside its records; a
 * larger recorder has larger segments, so that making room, which looks
 * at every account, stays a few instructions a record. */
#define RECORDER_SEGMENT (64u << 10)
#define RECORDER_MAX_SEGMENTS 4096
#define RECORDER_IRQ_NAMES 64
/* The users whose evictions are counted by name; the rest as one "other". */
#define RECORDER_USERS_NAMED 16
/* Evictions remembered for the snapshots' manifests: one user's within
 * RECORDER_EVICTION_SPAN of each other are one. */
#define RECORDER_EVICTIONS 4096
#define RECORDER_EVICTION_SPAN (100ull * 1000000)

/* The kernel's account's user; a process gone before it was asked about. */
#define RECORDER_UID_KERNEL UINT32_MAX
#define RECORDER_UID_UNKNOWN (UINT32_MAX - 1)
#define RECORDER_UID_OTHER (UINT32_MAX - 2) /* past the RECORDER_USERS_NAMED first */

struct recorder_segment {
	uint8_t *data; /* seg_size bytes, NULL until used */
	size_t used;
	uint64_t first_ts, last_ts; /* of the records in it; 0 when empty */
	uint64_t records;
	int32_t account; /* whose; -1: free */
	int32_t next; /* the account's next newer segment, or the next free; -1: none */
};

struct recorder_account {
	uint32_t tgid; /* 0: the kernel's */
	uint32_t uid;
	int32_t oldest, newest; /* its chain of segments; -1: none (the account is free) */
	uint64_t bytes; /* of its records in the recorder */
	uint32_t segments; /* in its chain */
	uint32_t user; /* its index in users[] */
};

struct recorder_user {
	uint32_t uid;
	uint32_t accounts; /* live accounts of it; 0: free */
	uint32_t segments;
	uint64_t bytes;
};

/* Segments let go to make room: whose, and when their records were. */
struct recorder_eviction {
	uint64_t first_ts, last_ts, records;
	uint32_t tgid, uid; /* tgid 0: several */
};

struct recorder_evicted_uid {
	uint32_t uid; /* RECORDER_UID_*: the kernel's, unknown; "other" past the named */
	uint64_t records;
};

struct flight_recorder {
	struct recorder_segment *seg;
	size_t nseg; /* M / seg_size */
	size_t seg_size; /* RECORDER_SEGMENT, doubled until nseg <= RECORDER_MAX_SEGMENTS */
	int32_t free_seg; /* the free segments' list */
	struct recorder_account *acct; /* nseg + 1: each live one holds a segment, and one is being made */
	struct recorder_user *users; /* as many */
	struct hashmap by_tgid; /* tgid -> its current account's index + 1 */
	int32_t last_acct; /* the last record's account: runs of one process skip the lookup */
	uint32_t last_tgid;
	/* the user a process runs as (the daemon asks /proc), RECORDER_UID_UNKNOWN when gone */
	uint32_t (*uid_of)(void *ctx, uint32_t tgid);
	void *uid_ctx;
	uint64_t keep_ns; /* T */
	uint64_t age_due; /* no segment is older than T before this */
	uint64_t records; /* kept over its life */
	uint64_t aged; /* records let go for being older than T */
	uint64_t evicted; /* records let go to make room */
	uint64_t unkept; /* records not kept: larger than a segment, or no memory for them */
	/* by user, the first RECORDER_USERS_NAMED to have any, then RECORDER_UID_OTHER */
	struct recorder_evicted_uid evicted_by_uid[RECORDER_USERS_NAMED + 1];
	int nevicted_uids; /* of them in use, "other" included */
	struct recorder_eviction evictions[RECORDER_EVICTIONS]; /* a ring: the newest ones */
	uint64_t nevictions; /* ever */
	/* each interrupt's name, as the kernel last gave it: it comes once, at
	 * the interrupt's first record ever, and a snapshot long after needs
	 * it to put the interrupts on their card */
	struct sbt_meta_irq irq_names[RECORDER_IRQ_NAMES];
	int nirq_names;
};

/* 0, or -ENOMEM. mib >= 1, seconds > 0. uid_of tells the user of a
 * process (NULL: all are RECORDER_UID_UNKNOWN); asked once a segment, so a
 * pid used again by another user's process starts an account of its own. */
int recorder_init(struct flight_recorder *r, size_t mib, double seconds, uint32_t (*uid_of)(void *ctx, uint32_t tgid),
		  void *uid_ctx);
void recorder_free(struct flight_recorder *r);
/* Keeps one record (ts in h->ts), making room if it must. now: for
 * letting go of what is older than T. */
void recorder_add(struct flight_recorder *r, const struct sbt_hdr *h, uint64_t now);
/* Calls fn for each record with from <= ts <= to, in the order they were
 * added (when each began, as the reorder step hands them on); returns
 * how many. The earliest ts kept, for the answer, in *oldest. */
uint64_t recorder_each(const struct flight_recorder *r, uint64_t from, uint64_t to,
		       void (*fn)(void *ctx, const struct sbt_hdr *h), void *ctx, uint64_t *oldest);
size_t recorder_bytes(const struct flight_recorder *r); /* allocated */
size_t recorder_used(const struct flight_recorder *r); /* in records' bytes */
uint64_t recorder_kept(const struct flight_recorder *r); /* records in it now */
/* Calls fn for each interrupt's name kept (SBT_META_IRQ records). */
void recorder_irq_names(const struct flight_recorder *r, void (*fn)(void *ctx, const struct sbt_hdr *h), void *ctx);
/* What a process holds in the recorder now, in bytes (all its accounts). */
uint64_t recorder_held(const struct flight_recorder *r, uint32_t tgid);

/* A user as a label: the number, or kernel, unknown, other. */
const char *recorder_uid_name(uint32_t uid, char buf[16]);

/* Records let go to make room that were of [from, to]: each eviction
 * that overlaps it counts whole (it spans a short time: a segment of one
 * process, or one user's segments within RECORDER_EVICTION_SPAN). Up to max per user in out (by uid, most first);
 * returns how many users. *all: every such record, and *sure: false when evictions that may have overlapped are no
 * longer remembered (then "at least"). */
int recorder_evicted_in(const struct flight_recorder *r, uint64_t from, uint64_t to, struct recorder_evicted_uid *out,
			int max, uint64_t *all, bool *sure);

#endif
