/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Work on untrusted input in a child process where a crash costs nothing
 * (the OpenSSH privilege-separation pattern): the child is forked, keeps
 * only the descriptors it is given, gives up its privileges (no
 * capabilities, user nobody where it was root, no_new_privs), may grow by
 * at most SANDBOX_MEMORY bytes and spend SANDBOX_CPU_SECONDS of CPU, and
 * runs under a seccomp allow-list (reading and writing open descriptors,
 * memory, exiting: nothing else). It writes its answer to a pipe; the
 * parent reads at most max bytes of it, asks stop() as it waits, and kills
 * the child when told to or past the answer's bound. The child must not
 * take locks other threads of the parent may hold (no logging). Under
 * valgrind (make valgrind) the child goes without its seccomp filter and
 * file limit, which valgrind cannot run under.
 */
#ifndef SBT_SANDBOX_H
#define SBT_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SANDBOX_MEMORY (128u << 20)
#define SANDBOX_CPU_SECONDS 30
#define SANDBOX_UID 65534 /* nobody */

/* The child's work: read from in_fd (given), write the answer to out_fd.
 * Its return is the child's exit status (0: an answer was written). */
typedef int (*sandbox_work_fn)(int in_fd, int out_fd, void *ctx);

/* Runs work in a sandboxed child with in_fd (the caller's, left open).
 * 0 with the answer (malloc'd) in *out and its length in *len; -EINTR
 * when stop said so; -errno otherwise, with the reason in err (the child
 * died of a signal, exited non-zero, answered over max bytes, could not
 * be made). */
int sandbox_run(int in_fd, sandbox_work_fn work, void *ctx, size_t max, bool (*stop)(void *ctx), void *stop_ctx,
		uint8_t **out, size_t *len, char *err, size_t errlen);

#endif
