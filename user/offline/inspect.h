/* SPDX-License-Identifier: GPL-2.0-only */
/* Checking a Perfetto trace; the command is in inspect.c. */
#ifndef SBT_INSPECT_H
#define SBT_INSPECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "offline/inspect_result.h"

/* 0 when the trace is valid, -1 on any violation. */
int inspect_buffer(const uint8_t *data, size_t len, struct inspect_result *res);
/* The same on a file read in a window: memory bounded whatever its length. */
int inspect_fd(int fd, struct inspect_result *res);

#endif
