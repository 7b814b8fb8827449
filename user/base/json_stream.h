/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A JSON document read in pieces from a file: the punctuation of its
 * outer levels byte by byte, and a value at a time as text, which
 * json_parse then reads. Memory is the longest value taken, not the file.
 */
#ifndef SBT_JSON_STREAM_H
#define SBT_JSON_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSTREAM_MAX_VALUE (256u << 20) /* the longest value taken */

struct json_stream {
	FILE *f;
	char *buf;
	size_t cap, pos, end; /* unread: buf[pos, end) */
	uint64_t off; /* the file offset of buf[0] */
	int error; /* errno of a failed read or allocation; EFBIG: a value too long */
};

/* From f's current position. */
void jstream_init(struct json_stream *s, FILE *f);
void jstream_free(struct json_stream *s);
/* The next byte that is not blank, left unread; -1 at the end (or on an
 * error: s->error says). */
int jstream_peek(struct json_stream *s);
/* Past the byte jstream_peek gave. */
static inline void jstream_skip(struct json_stream *s)
{
	s->pos++;
}
/* The file offset of the next unread byte. */
static inline uint64_t jstream_offset(const struct json_stream *s)
{
	return s->off + s->pos;
}
/* The next value's text, read past: a string, number or literal to its
 * end, an array or object to its closing bracket (strings inside seen
 * as strings; nothing else checked: json_parse does that). Valid until
 * the next call. 0, or -1: the file ends inside it, or s->error. */
int jstream_value(struct json_stream *s, const char **text, size_t *len);

#endif
