/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's detail windows: runtime uprobes, only while a window is
 * open, on every process that maps a runtime library; the processes that
 * hold a card and those that start using the runtime in the window are
 * traced, each from its first call. A window opens at a random moment of
 * every sampling period (a sample), on a trigger, or on request (ctl
 * record); its records (runtime calls, and the kernel events as always) go
 * to the flight recorder, so a snapshot of that time has the job in detail.
 * The windows of the last while are kept, for the manifests: a sampled
 * second stands for period/length seconds.
 */
#ifndef SBT_WINDOW_H
#define SBT_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WINDOW_HISTORY 64
#define WINDOW_MAX_PROCS 256 /* processes traced in one window */
#define WINDOW_PAST_PROCS 64 /* of them, described in the manifests */

struct attacher;
struct cardscan;
struct cardscan_answer;
struct discovery;
struct discovery_job;
struct meta_writer;

enum window_reason { WIN_SAMPLE, WIN_REQUEST, WIN_TRIGGER };

/* How a process came into the window: it held a card when it opened, its
 * first runtime call joined it (the probes were on its library before
 * that call), or it took a card first (its runtime was a file not read
 * yet, found then). */
enum window_join { JOIN_AT_OPEN, JOIN_FIRST_CALL, JOIN_CARD };

struct window_proc {
	pid_t pid;
	enum window_join how;
	uint64_t seen; /* BOOTTIME ns: the window's start, or its first record */
	uint64_t traced_from; /* its probes in place; 0: its library search not answered yet */
	uint64_t started; /* the process's start; 0: unknown */
	bool carded; /* its cards described */
	bool carding; /* its cards asked for (struct cardscan) */
};

/* A card holder whose cards are being read: taken when they are. */
struct window_wait {
	pid_t pid;
	enum window_join how;
	uint64_t seen;
};

struct window_past {
	uint64_t from, to; /* BOOTTIME ns */
	enum window_reason reason;
	int procs, joined;
	struct window_proc detail[WINDOW_PAST_PROCS]; /* the first procs of them */
};

struct detail_window {
	struct cardscan *scan; /* reads card holders' cards: set before a window opens */
	bool open;
	uint64_t serial; /* windows opened so far: which one a search answers */
	enum window_reason reason;
	uint64_t from, until; /* BOOTTIME ns */
	struct window_proc procs[WINDOW_MAX_PROCS];
	int nprocs, joined; /* joined: came after it opened */
	struct window_wait waiting[WINDOW_MAX_PROCS];
	int nwaiting;
	uint64_t open_deadline; /* the searches of those there at its opening share one budget */
	uint64_t libs_ready; /* the last runtime library found in it went on then */
	uint64_t turned_away; /* newcomers past WINDOW_MAX_PROCS */
	/* sampling: a window of sample_ns at a random time of each period_ns; 0: off */
	uint64_t sample_ns, period_ns, period_start, next_sample;
	unsigned int seed;
	struct window_past past[WINDOW_HISTORY]; /* a ring; npast ever closed */
	uint64_t npast;
	uint64_t opened[3]; /* by reason, over the daemon's life */
};

const char *window_reason_name(enum window_reason r);
const char *window_join_name(enum window_join j);
/* Sampling on (sample_s > 0, period_s >= sample_s) or off; the first
 * sample at a random time of the first period from now. */
void window_sampling(struct detail_window *w, double sample_s, double period_s, uint64_t now);
/* Is a sample due now? (then the next one is scheduled) */
bool window_sample_due(struct detail_window *w, uint64_t now);
/* Opens a window until `until`: the n processes that hold a card are
 * traced (their names, threads and cards to mw first; each once w->scan
 * has read its cards), the runtime probes
 * go on every process that maps a runtime library the daemon knows (of
 * these processes' libraries, the ld.so cache, the install tree, earlier
 * windows and card holders), and a process not traced joins at its first
 * runtime call. n may be 0. The libraries these processes can load are
 * asked of q, and go on as its answers come (window_searched). Returns
 * the uprobes attached now. */
int window_open(struct detail_window *w, struct attacher *a, struct discovery *q, struct meta_writer *mw,
		enum window_reason why, const pid_t *pids, int n, uint64_t now, uint64_t until);
/* A process that turned up in the open window (seen: its first record):
 * traced, described, its libraries asked of q (one that took a card:
 * once its cards are read). Returns 1 when it joined or waits to, 0 when
 * it was in already (or there is no room). */
int window_join(struct detail_window *w, struct attacher *a, struct discovery *q, struct meta_writer *mw, pid_t pid,
		enum window_join how, uint64_t seen);
/* An answer to a search this window asked for, which attach_found() took
 * (found: new functions): a library read (partial), or the search's end:
 * then its process is traced in full from when the last library it may
 * use went on. An earlier window's answer: nothing. */
void window_searched(struct detail_window *w, const struct discovery_job *j, int found);
/* An answer of w->scan: a process waiting for it is taken, one in the
 * window that took a card since has it described. An earlier window's: nothing. */
void window_scanned(struct detail_window *w, struct attacher *a, struct discovery *q, struct meta_writer *mw,
		    const struct cardscan_answer *c);
/* These processes hold a card now: those of them in the window whose
 * cards are not described yet (they joined before taking one) have them
 * read (by w->scan). */
void window_cards(struct detail_window *w, const pid_t *pids, int n);
bool window_has(const struct detail_window *w, pid_t pid);
/* The open window lasts at least until then. */
void window_extend(struct detail_window *w, uint64_t until);
/* Closes it: newcomers no longer caught, its searches not begun dropped
 * (the one under way ends early: what it read is kept for the next), the
 * threads made meanwhile named, every uprobe released, the BPF filter
 * emptied. */
void window_close(struct detail_window *w, struct attacher *a, struct discovery *q, struct meta_writer *mw,
		  uint64_t now);
/* The windows that overlap [from, to], as a JSON array (for a manifest),
 * the open one too; each with its processes, how each joined and from
 * when its calls are all there. Allocated (free it), NULL out of memory. */
char *window_json(const struct detail_window *w, uint64_t from, uint64_t to);
/* The processes to leave out of a snapshot of [from, to]: of the closed
 * windows in it, those that joined by a runtime call and held no card in
 * the window (a tool that loads the runtime, say), each over its window.
 * (The open window's are kept: one may take a card yet.) Returns how many. */
struct snapshot_leave_out;
int window_leave_out(const struct detail_window *w, uint64_t from, uint64_t to, struct snapshot_leave_out *out,
		     int max);

#endif
