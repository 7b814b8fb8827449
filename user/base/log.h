/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * One way to talk to the user: every message starts "spyre-bpftrace: ",
 * errors are one line with a hint, and -v/-vv unlock the detail.
 */
#ifndef SBT_LOG_H
#define SBT_LOG_H

#include <stdarg.h>

extern int sbt_verbosity; /* -v count; 0 by default */

/* An error: one line on stderr, always. */
__attribute__((format(printf, 1, 2))) void sbt_err(const char *fmt, ...);
/* A warning: something the user should know went wrong or was left out;
 * one line on stderr unless quiet. */
__attribute__((format(printf, 1, 2))) void sbt_warn(const char *fmt, ...);
/* A status line: what was done, where it went; one line on stderr unless
 * quiet. */
__attribute__((format(printf, 1, 2))) void sbt_note(const char *fmt, ...);
/* Detail for -v (level 1) or -vv (level 2): printed as given, no prefix. */
__attribute__((format(printf, 2, 3))) void sbt_info(int level, const char *fmt, ...);
void sbt_log_quiet(int quiet);

/* libbpf's messages, shown from -v (warnings) and -vv (debug). */
int sbt_libbpf_print(int level, const char *fmt, va_list args);

#endif
