// SPDX-License-Identifier: GPL-2.0-only
/* spyre-bpftrace: pick the subcommand, in the manner of perf. */
#include <argp.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "commands.h"

int main(int argc, char **argv)
{
	/* usage errors exit 2, as docs/usage.md says (argp's default is 64) */
	argp_err_exit_status = 2;
	static const struct {
		const char *name;
		int (*run)(int, char **);
	} cmds[] = { { "record", cmd_record }, { "convert", cmd_convert }, { "report", cmd_report },
		     { "diff", cmd_diff },     { "inspect", cmd_inspect }, { "dump", cmd_dump },
		     { "list", cmd_list },     { "merge", cmd_merge },	   { "daemon", cmd_daemon },
		     { "ctl", cmd_ctl } };

	if (argc > 1 && argv[1][0] != '-') {
		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
			if (!strcmp(argv[1], cmds[i].name))
				return cmds[i].run(argc - 1, argv + 1);
		sbt_err("unknown command '%s'; hint: record, convert, report, diff, inspect, dump, list, merge, daemon "
			"or "
			"ctl (see --help)",
			argv[1]);
		return 2;
	}
	return cmd_record(argc, argv); /* record is the default */
}
