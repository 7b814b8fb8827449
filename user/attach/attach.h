/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The attach module: open the BPF object, configure it from feature probes
 * (the attach plan), load it, attach the kernel programs, and put the
 * runtime probes on each traced process: entry and return-site uprobes,
 * targeted at that process only, on every runtime library it has or can
 * load. `record` uses it, and the daemon for its detail windows. Opening
 * and the plan's decisions are in open.c (on plan.c's feature probes), the
 * per-process uprobes in uprobes.c, finding the libraries they go on in
 * libfind.c.
 */
#ifndef SBT_ATTACH_H
#define SBT_ATTACH_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "attach/driver.h"
#include "attach/links.h"
#include "attach/plan.h"
#include "attach/reaper.h"
#include "attach/trace_opts.h"
#include "probes/probes.h"

struct bpf_program;

/* The runtime probes of one traced process. */
struct attached_proc {
	pid_t pid;
	size_t done; /* functions of the probe set attached here: [0, done) */
	struct link_set links;
	size_t uprobes; /* sites on it: entries and return sites (links may hold many) */
};

struct attacher {
	const struct record_opts *o;
	struct spyre_bpf *skel;
	struct plan plan;
	struct driver_plan drv;
	const char *patterns[SBT_MAX_FD_PATTERNS];
	uint32_t pattern_kinds[SBT_MAX_FD_PATTERNS];
	int npatterns;
	struct probe_spec *specs; /* --probe first, then the built-in table */
	size_t nspecs;
	char *real_libs[SBT_MAX_USER_PROBES]; /* --probe libraries named by path, resolved */
	struct probe_set probes;
	/* held while probes' libraries change, and by a search on another
	 * thread while it looks at them (libfind.h) */
	pthread_mutex_t probes_lock;
	struct link_set links; /* kernel programs */
	struct attached_proc *procs;
	size_t nprocs;
	/* told of each function found in a library, refused ones too */
	void (*on_function)(void *ctx, const struct probe_site *s);
	void *ctx;
	/* attaching stops early when this is set or the deadline passes */
	volatile sig_atomic_t *stop;
	uint64_t deadline_ns; /* boottime, 0: none */
	bool interrupted;
	size_t refused; /* functions refused */
	const char *ioctl_hook; /* "fentry", "kprobe" (vfio's handlers) or "tracepoint" */
	/* which thread a card's interrupt woke: eventfd_write's fentry program,
	 * sched_waking's, or NULL; "eventfd" or "sched_waking" */
	struct bpf_program *wake_prog;
	const char *wake_hook;
	struct bpf_link *wake_link; /* the daemon's wake-up hook, attached while a window is open */
	/* where a forgotten process's uprobes go to be destroyed (reaper.h);
	 * NULL: destroyed at once */
	struct link_reaper *reaper;
	/* a process's open files looked at when it is traced, at most (0: all;
	 * the daemon's: PROC_FD_SCAN_MAX, another user's fds are no work of its) */
	size_t fd_scan_max;
	/* the kernel makes uprobe_multi links (uprobe_multi.h): a library's
	 * sites on a process in two links, removed at once */
	bool uprobe_multi;
};

/* Open and configure (before load): the attach plan is decided here
 * (open.c). */
int attach_open(struct attacher *a, const struct record_opts *o);
/* Load the programs and fill their tables. */
int attach_load(struct attacher *a);
/* Trace this process: the BPF filter, and the accelerator fds it has open. */
int attach_trace_pid(struct attacher *a, pid_t pid);
/* Attach every loaded kernel program (not the runtime ones). */
int attach_kernel(struct attacher *a);

struct lib_search;
struct lib_wants;
/* What a search (libfind.h) is to look for on this attacher's behalf: its
 * specs and --probe files, the libraries it has read, its stop flag. */
struct lib_wants attach_lib_wants(struct attacher *a);
/* What a search found (libfind.h) taken into the probe set, less what the
 * set read meanwhile, and put on every traced process; the search's set is
 * left empty. Returns the number of new functions, or -errno. */
int attach_found(struct attacher *a, struct lib_search *s);
/* The three below search and attach at once, within stop and deadline_ns. */
/* Consider a file as a runtime library (by name; why says where it was
 * found): scan it once, and put its functions on every traced process.
 * Returns the number of new functions, or -errno. */
int attach_library(struct attacher *a, const char *path, const char *why);
/* Find the libraries a process can load (its maps, its environment's
 * library path, the ld.so cache, the install tree; for the -c command the
 * linked libraries and its Python environment) and scan them. pid 0: no
 * process, only the places all share (the ld.so cache, the install tree,
 * --probe files). */
int attach_find_libraries(struct attacher *a, pid_t pid, char *const *command);
/* Put the runtime probes of every known library on this process (again:
 * only what it does not have). Returns the uprobes attached, or -errno.
 * pid ATTACH_EVERY_PROCESS: on every process that maps the library (the
 * daemon's windows), the BPF filter deciding whose calls are recorded. */
int attach_runtime(struct attacher *a, pid_t pid);
#define ATTACH_EVERY_PROCESS ((pid_t)-1)
/* Only what the process has mapped (no environment, no search paths): what
 * the daemon learns of a card holder's runtime between windows. */
int attach_find_mapped_libraries(struct attacher *a, pid_t pid);
/* Libraries read earlier whose file has changed since (rebuilt, replaced,
 * gone): their functions are refused, so that their offsets never go on
 * another file, and the file is read again when next found. Returns how
 * many libraries changed. */
size_t attach_drop_changed_libraries(struct attacher *a);
/* The daemon's windows: an untraced process that runs a runtime probe
 * becomes traced (on), or stays untraced and is counted (off). */
void attach_catch_newcomers(struct attacher *a, bool on);
/* Nothing traced any more: the BPF filter emptied. */
void attach_untrace_all(struct attacher *a);
/* Warn of each --probe spec that picked no function (later: one may
 * still, from a library loaded later). */
void attach_warn_unmatched(const struct attacher *a, bool later);
/* A traced process is gone: release its uprobes. */
void attach_forget(struct attacher *a, pid_t pid);
/* Uprobes attached over all processes. */
size_t attach_nuprobes(const struct attacher *a);
/* Functions that are probed (not refused). */
size_t attach_nfunctions(const struct attacher *a);

/* Counters from the BPF side. */
uint64_t attach_read_lost(struct attacher *a);
uint64_t attach_read_missed(struct attacher *a); /* probe runs the kernel skipped */
uint64_t attach_read_untraced_runs(struct attacher *a);
/* ioctls of traced processes with VFIO's numbers on files not known as VFIO's */
uint64_t attach_read_vfio_cmds_unknown(struct attacher *a);
/* The ring buffer's size, and the most of it a record found in use. */
uint64_t attach_ring_size(struct attacher *a);
uint64_t attach_read_ring_peak(struct attacher *a);
bool attach_any_traced(struct attacher *a);

/* The daemon's detail windows: the wake-up hook (which card's interrupt
 * woke the wait on a stream) on while one is open, off after. 0, or
 * -errno (said). Nothing when the hook is not loaded. */
int attach_window_hooks(struct attacher *a, bool on);

void attach_close(struct attacher *a);

/* Within the attach layer: a traced process's uprobes (made when create);
 * NULL when none, or out of memory. */
struct attached_proc *attach_proc_of(struct attacher *a, pid_t pid, bool create);
/* Within the attach layer: a runtime program (attached per process,
 * uprobes.c), not a kernel one. */
bool attach_is_runtime_prog(const struct attacher *a, const struct bpf_program *p);

#endif
