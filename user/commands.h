/* SPDX-License-Identifier: GPL-2.0-only */
/* The subcommands, in the manner of perf: each returns the exit status. */
#ifndef SBT_COMMANDS_H
#define SBT_COMMANDS_H

int cmd_record(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_ctl(int argc, char **argv);

#endif
