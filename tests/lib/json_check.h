/* SPDX-License-Identifier: GPL-2.0-only */
/* A strict JSON syntax check (RFC 8259), for the tests. */
#ifndef SBT_JSON_CHECK_H
#define SBT_JSON_CHECK_H

#include <stddef.h>

/* 0 if text is one valid JSON value; else -1 with the offset of the error. */
int json_check(const char *text, size_t len, size_t *err_at);

#endif
