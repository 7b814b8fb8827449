/* SPDX-License-Identifier: GPL-2.0-only */
/* Parsers of option values, shared by every command line; 0 or -1. */
#ifndef SBT_ARGS_H
#define SBT_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SBT_MAX_SECONDS 31536000.0 /* a year; more is a typo or an overflow */

int arg_parse_pid(const char *s, pid_t *out);
int arg_parse_size(const char *s, unsigned long *out); /* 4096, 64K, 8M, 1G */
int arg_parse_seconds(const char *s, double *out);
/* "250ms", "30s", "2m", "1h" or plain seconds, > 0. */
int arg_parse_duration(const char *s, double *out);
/* A whole number in [min, max], no sign, nothing after it. */
int arg_parse_count(const char *s, unsigned long min, unsigned long max, unsigned long *out);
/* Split a --vfio-path glob at its one '*' (or none). */
int arg_split_glob(const char *glob, size_t max_part, size_t *prefix_len, size_t *suffix_len, bool *has_star);

#endif
