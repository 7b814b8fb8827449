/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's spool: snapshots it writes on its own (triggers) or when
 * asked without a file name, in STATE_DIR/snapshots (0700), each a trace
 * and its manifest, kept under a size bound by removing the oldest.
 */
#ifndef SBT_SPOOL_H
#define SBT_SPOOL_H

#include <stddef.h>
#include <stdint.h>

/* Makes STATE_DIR and STATE_DIR/snapshots, private; the latter's path in
 * dir. 0, or -1 with err. */
int spool_open(const char *state_dir, char *dir, size_t len, char *err, size_t errlen);
/* A new snapshot's path: DIR/HOST-REASON-20261202T221500.123Z.pftrace */
void spool_name(const char *dir, const char *reason, uint64_t realtime_ns, char *path, size_t len);
/* Bytes the spool holds. */
uint64_t spool_usage(const char *dir);
/* Removes the oldest snapshots (trace and manifest together) until the
 * spool holds at most bound bytes. A newest one (newest, a trace path)
 * that alone is over the bound goes too: -EFBIG. Else how many were
 * removed. */
int spool_trim(const char *dir, uint64_t bound, const char *newest);
/* Room kept for a snapshot's manifest while its trace takes its name (its
 * size known only once written; trimmed again after, to the byte). */
#define SPOOL_MANIFEST_ROOM (16u << 10)

#endif
