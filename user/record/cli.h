/* SPDX-License-Identifier: GPL-2.0-only */
/* Command line of `spyre-bpftrace record` (the default subcommand). */
#ifndef SBT_CLI_H
#define SBT_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "attach/trace_opts.h"
#include "base/args.h"

/* Parse the record arguments (argv[0] is the program or subcommand name).
 * argp_flags 0 exits on --help and errors as a CLI does; tests pass
 * ARGP_NO_EXIT | ARGP_NO_ERRS. Returns 0, or an errno with err filled. */
int cli_parse_record(int argc, char **argv, struct record_opts *o, unsigned int argp_flags, char *err, size_t errlen);

void cli_free_record(struct record_opts *o);

#endif
