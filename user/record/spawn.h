/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The -c workload: forked at once, held before exec until the tracer has
 * its probes on it (the child's pid is known, so per-process probes can
 * target it), then let go. It never runs untraced: if the tracer gives up,
 * the held child exits without running the command.
 */
#ifndef SBT_SPAWN_H
#define SBT_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

struct workload {
	pid_t pid; /* 0: none */
	char **argv; /* the command split into words (wordexp) */
	int argc;
	int go_fd; /* write end: one byte lets it exec */
	int status;
	bool reaped;
	bool keep; /* --keep-command: left running when tracing ends first */
	void *we; /* the wordexp_t behind argv */
};

/* Split and fork. 0, or -errno with the reason printed. */
int workload_spawn(struct workload *w, const char *command);
/* Let it exec. */
void workload_start(struct workload *w);
/* Collect its exit status, waiting or not. */
void workload_reap(struct workload *w, bool wait);
/* Not started: it exits on its own. Started and still running: SIGTERM,
 * unless kept, and SIGKILL if it still runs 5 s later. (If the tracer
 * dies, the kernel sends the SIGTERM.) */
void workload_end(struct workload *w);

#endif
