/* SPDX-License-Identifier: GPL-2.0-only */
/* Command line of `spyre-bpftrace record` (the default subcommand). */
#ifndef SBT_CLI_H
#define SBT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "devfilter.h"
#include "events.h"
#include "probes.h"

#define SBT_MAX_PIDS 64
#define SBT_MAX_USER_PROBES 64
#define SBT_MAX_VFIO_PATHS (SBT_MAX_FD_PATTERNS - SBT_VFIO_FD_PATTERNS)
#define SBT_MAX_IRQS 64
#define SBT_DEFAULT_BUFFER (8u << 20)
#define SBT_DEFAULT_MAX_PROBES 4096
#define SBT_MAX_SECONDS 31536000.0 /* -d: a year; more is a typo or an overflow */

struct record_opts {
	pid_t pids[SBT_MAX_PIDS];
	int npids;
	char *command; /* -c */
	double duration; /* seconds; 0 = until done or Ctrl-C */
	const char *output; /* NULL: spyre-bpftrace-<pid|command>.pftrace */
	const char *format; /* --format, else by the output's extension */
	struct probe_spec probes[SBT_MAX_USER_PROBES];
	int nprobes;
	const char *vfio_paths[SBT_MAX_VFIO_PATHS];
	int nvfio_paths;
	int irqs[SBT_MAX_IRQS];
	int nirqs;
	unsigned long buffer_size;
	unsigned long max_probes; /* uprobes per traced process */
	bool keep_command; /* the -c command outlives the tracing */
	struct devfilter devices; /* --device; Spyre's ids if none given */
	int driver_mode; /* enum driver_mode (driver.h) */
	int verbose;
	bool quiet; /* no live status, no summary */
	bool fleet; /* the daemon: every process's VFIO files, counted in the kernel */
	bool fleet_record; /* ... and their records kept in its flight recorder */
};

/* Parse the record arguments (argv[0] is the program or subcommand name).
 * argp_flags 0 exits on --help and errors as a CLI does; tests pass
 * ARGP_NO_EXIT | ARGP_NO_ERRS. Returns 0, or an errno with err filled. */
int cli_parse_record(int argc, char **argv, struct record_opts *o, unsigned int argp_flags,
		     char *err, size_t errlen);

void cli_free_record(struct record_opts *o);

/* Value parsers shared with the tests; 0 or -1. */
int cli_parse_pid(const char *s, pid_t *out);
int cli_parse_size(const char *s, unsigned long *out); /* 4096, 64K, 8M, 1G */
int cli_parse_seconds(const char *s, double *out);
/* "250ms", "30s", "2m", "1h" or plain seconds, > 0: 0, or -1. */
int cli_parse_duration(const char *s, double *out);
/* Split a --vfio-path glob at its one '*' (or none). 0 or -1. */
int cli_split_glob(const char *glob, size_t max_part, size_t *prefix_len, size_t *suffix_len,
		   bool *has_star);

#endif
