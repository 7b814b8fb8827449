/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Libraries a command will load, found before it runs, so that -c can
 * attach uprobes ahead of its first instruction: the dynamic loader's list
 * mode (what ldd does) for the libraries it links, plus the Spyre install
 * directories for libraries a framework dlopen()s later.
 */
#ifndef SBT_LIBRESOLVE_H
#define SBT_LIBRESOLVE_H

/* Paths into *paths (malloc'd); returns the count or -errno. */
int resolve_command_libs(char *const argv[], char ***paths);
/* Libraries under the Spyre install tree (/opt/ibm/spyre/{*}/lib). */
int resolve_install_libs(char ***paths);

#endif
