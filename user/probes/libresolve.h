/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Where a traced process can get its runtime libraries from, found before
 * it loads them, so the probes are on those files (uprobes go on the file,
 * and take effect when it is mapped later):
 *  - what the dynamic loader links for a command (its list mode, as ldd);
 *  - the library search path of the process's environment (LD_LIBRARY_PATH)
 *    and the ld.so cache;
 *  - the Spyre install tree (/opt/ibm/spyre/{*}/lib);
 *  - for a Python command, its environment's package directories, where
 *    torch-spyre keeps the libraries it dlopen()s on import.
 * Each finder passes every file it sees to the callback with the reason;
 * the callback decides by name whether it is a runtime library.
 */
#ifndef SBT_LIBRESOLVE_H
#define SBT_LIBRESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef void (*lib_found_cb)(const char *path, const char *why, void *ctx);

/* Where execvp would find cmd (a path, or on PATH): true with path set. */
bool sbt_which(const char *cmd, char *path, size_t len);

/* The libraries the dynamic loader links for argv: its own loader (or its
 * script interpreter's) lists them, nothing of the program runs. */
void libs_of_command(char *const argv[], lib_found_cb cb, void *ctx);
/* Files in each directory of a ':' list, and depth levels below. */
void libs_in_dirs(const char *list, int depth, const char *why, lib_found_cb cb, void *ctx);
/* The same for a process's own list (its LD_LIBRARY_PATH), each directory
 * looked up inside its root (proc_open_in_root): the paths passed are as
 * the process sees them, to be resolved inside its root too. Relative
 * entries (the process's working directory) are skipped. The list and its
 * directories are the process's to make large: at most LIBS_MAX_DIRS
 * directories, each read once however often named, LIBS_MAX_DIR_ENTRIES
 * entries of each, and stop asked every 1024 entries. Returns how many
 * were cut by a cap (0: all read). */
#define LIBS_MAX_DIRS 64
#define LIBS_MAX_DIR_ENTRIES 65536
int libs_in_dirs_of(pid_t pid, const char *list, const char *why, lib_found_cb cb, bool (*stop)(void *ctx), void *ctx);
/* The ld.so cache (ldconfig -p). */
void libs_in_ldcache(lib_found_cb cb, void *ctx);
/* The Spyre install tree. */
void libs_in_install_tree(lib_found_cb cb, void *ctx);
/* A Python command (python*, or a script whose #! names python): the
 * package directories of its interpreter (site-packages, sys.path). */
void libs_in_python_env(char *const argv[], lib_found_cb cb, void *ctx);
/* NAME=value from a process's environment (/proc/PID/environ) into buf;
 * 0, or -1 when not set or not readable. */
int proc_getenv(int pid, const char *name, char *buf, unsigned long len);

#endif
