/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Valid UTF-8 in every string the tool writes. Thread names come from the
 * traced program (prctl(PR_SET_NAME) takes any bytes) and are cut at 15
 * bytes, maybe inside a character; strict JSON and protobuf readers reject
 * a whole file for one bad byte. Invalid bytes become U+FFFD.
 */
#ifndef SBT_UTF8_H
#define SBT_UTF8_H

#include <stddef.h>

/* Length of the well-formed UTF-8 character at s (1 to 4; RFC 3629: no
 * overlong forms, no surrogates, at most U+10FFFF), 0 if there is none. s
 * is NUL-terminated, so a cut sequence is seen as invalid at the NUL. */
size_t utf8_char_len(const char *s);
/* Whether all of s (NUL-terminated) is valid. */
int utf8_valid(const char *s);
/* s with each invalid byte replaced by U+FFFD, into out (NUL-terminated,
 * cut at a character boundary). Returns the length written. */
size_t utf8_sanitize(const char *s, char *out, size_t outlen);

#endif
