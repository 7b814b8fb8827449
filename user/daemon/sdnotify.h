/* SPDX-License-Identifier: GPL-2.0-only */
/* systemd's readiness and watchdog protocol, spoken directly: one datagram
 * to $NOTIFY_SOCKET. Written here rather than linked from libsystemd, which
 * has no static library, so the tool links statically on every architecture. */
#ifndef SBT_SDNOTIFY_H
#define SBT_SDNOTIFY_H

#include <stdint.h>

/* Sends "READY=1", "WATCHDOG=1", ... (printf-style). 1 sent, 0 not under a
 * notifying service manager, -errno on failure. */
int sd_notify_send(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The watchdog interval systemd asked for, in microseconds; 0 when none
 * (unset, bad, or meant for another process). */
uint64_t sd_notify_watchdog_usec(void);

#endif
