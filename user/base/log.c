// SPDX-License-Identifier: GPL-2.0-only
#include <bpf/libbpf.h>
#include <stdio.h>

#include "base/log.h"

int sbt_verbosity;
static int quiet;

void sbt_log_quiet(int q)
{
	quiet = q;
}

/* One line, whole, whichever thread writes (the daemon's have several). */
static void line(const char *fmt, va_list ap)
{
	flockfile(stderr);
	fputs("spyre-bpftrace: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	funlockfile(stderr);
}

void sbt_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	line(fmt, ap);
	va_end(ap);
}

/* Warnings and status lines look alike on the terminal; the two names say
 * which a call site means. */
#define UNLESS_QUIET(fmt)                                                                                              \
	do {                                                                                                           \
		va_list ap;                                                                                            \
		if (quiet)                                                                                             \
			return;                                                                                        \
		va_start(ap, fmt);                                                                                     \
		line(fmt, ap);                                                                                         \
		va_end(ap);                                                                                            \
	} while (0)

void sbt_warn(const char *fmt, ...)
{
	UNLESS_QUIET(fmt);
}

void sbt_note(const char *fmt, ...)
{
	UNLESS_QUIET(fmt);
}

void sbt_info(int level, const char *fmt, ...)
{
	va_list ap;

	if (sbt_verbosity < level)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

int sbt_libbpf_print(int level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG && sbt_verbosity < 2)
		return 0;
	if (sbt_verbosity < 1)
		return 0;
	return vfprintf(stderr, fmt, args);
}
