/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's control socket: a Unix socket in its runtime directory
 * (mode 0600, and the peer's uid checked: root or the daemon's own), one
 * request line per connection, the answer written back and the connection
 * closed. `spyre-bpftrace ctl` is its client.
 *
 *   status                     -> "ok" and status lines
 *   record SECONDS ABSPATH|-   -> "ok PATH" once the window is written
 *   snapshot FROM TO ABSPATH|- -> "ok PATH" (REALTIME ns; the flight recorder's window)
 *   cost SECONDS               -> "ok" and a table once measured (its BPF's runs and run time)
 *
 * "-" for the path: a file in the daemon's spool, named in the answer. The
 * path is the rest of the line, spaces and all; no control characters.
 */
#ifndef SBT_CONTROL_H
#define SBT_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONTROL_DEFAULT_DIR "/run/spyre-bpftrace"
#define CONTROL_SOCKET "control"
#define CONTROL_LOCK "lock"
#define CONTROL_LINE 4096
#define CONTROL_MAX_WINDOW_SECONDS 3600 /* record */
#define CONTROL_MAX_SNAPSHOT_SECONDS 86400 /* snapshot: far more than a recorder holds */
#define CONTROL_MAX_COST_SECONDS 60 /* cost: every BPF program of the host pays meanwhile */

enum control_verb { CONTROL_STATUS, CONTROL_RECORD, CONTROL_SNAPSHOT, CONTROL_COST };

struct control_request {
	enum control_verb verb;
	double seconds; /* record, cost */
	uint64_t from, to; /* snapshot: REALTIME ns */
	char path[CONTROL_LINE]; /* absolute; "" for the spool */
};

/* Makes dir (0700), takes its lock (dir/lock, *lock_fd: one daemon a
 * directory; -1 with err naming the holder's pid when another has it) and
 * listens on dir/control (0600). The fd, or -1 with err. Clients are
 * served by control_server.h. */
int control_listen(const char *dir, int *lock_fd, char *err, size_t errlen);
/* Does the peer on cfd see path's directory as the daemon does (the same
 * directory, by device and inode, through /proc/PEER/root)? true when it
 * cannot tell. */
bool control_peer_sees_same_dir(int cfd, const char *path);
/* One request line (no newline) into r: 0, or -1 with the answer to give
 * (one "error: ...; hint: ..." line, newline ended) in err. */
int control_parse_request(const char *line, struct control_request *r, char *err, size_t errlen);
/* Writes the answer and closes the client. */
void control_reply(int cfd, const char *text);
/* Closes the socket, removes it (only with the lock: never another
 * daemon's) and lets the lock go. */
void control_close(int lfd, int lock_fd, const char *dir);

int cmd_ctl(int argc, char **argv);

#endif
