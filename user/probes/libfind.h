/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Finding a process's runtime libraries and reading them, apart from
 * attaching: a search reads the files it finds into a probe set of its
 * own and puts nothing on any process; the attacher (attach_found() in
 * attach/uprobes.c) then takes what it found and probes it. A search reads
 * only what it is given (struct lib_wants), and the libraries known
 * already under their lock, so it may run on another thread than the one
 * attaching (the daemon's discovery thread); record runs both on its main
 * thread.
 */
#ifndef SBT_LIBFIND_H
#define SBT_LIBFIND_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "probes/probes.h"

/* What a search looks for, and what it need not read again. */
struct lib_wants {
	const struct probe_spec *specs; /* the functions wanted, and in which libraries */
	size_t nspecs;
	char *const *named; /* files named to be probed (resolved paths; NULL entries skipped) */
	int nnamed;
	const struct probe_set *known; /* libraries read already (NULL: none) ... */
	pthread_mutex_t *known_lock; /* ... looked at under this lock (NULL: none) */
	volatile sig_atomic_t *stop; /* set: stop reading (NULL: never) */
};

struct lib_search {
	struct lib_wants w;
	struct probe_set found; /* libraries read and their functions, probed on no one yet */
	uint64_t deadline_ns; /* boottime; 0: none */
	const atomic_bool *cancel; /* another thread's "stop now"; NULL: none */
	bool interrupted; /* stopped early: the deadline, w.stop or cancel */
	/* told after each library read, found holding it: it may take found
	 * away (lib_search_hand_over), so that one slow file does not hold
	 * back what was read before it; NULL: found keeps all */
	void (*on_library)(struct lib_search *s, void *ctx);
	void *on_library_ctx;
};

void lib_search_init(struct lib_search *s, const struct lib_wants *w, uint64_t deadline_ns, const atomic_bool *cancel);
void lib_search_free(struct lib_search *s);
/* What found holds, moved into *to (an empty set), found left empty. */
void lib_search_hand_over(struct lib_search *s, struct probe_set *to);

/* One file by path (in our own root), if named like a runtime library and
 * not read yet. Returns the functions found in it, or 0. */
int lib_search_path(struct lib_search *s, const char *path, const char *why);
/* What the process has mapped: the very files (/proc/PID/map_files), else
 * the path resolved inside its root. -EINTR when stopped early. */
int lib_search_mapped(struct lib_search *s, pid_t pid);
/* Everything the process can load: its maps, its LD_LIBRARY_PATH (inside
 * its root), the ld.so cache, the install tree, --probe files; for record's
 * -c command (pid its child) the linked libraries and its Python
 * environment. pid 0: only the places all share. -EINTR when stopped early. */
int lib_search_all(struct lib_search *s, pid_t pid, char *const *command);

#endif
