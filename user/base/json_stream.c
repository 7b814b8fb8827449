// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_stream.h"

#define CHUNK (1u << 20)

void jstream_init(struct json_stream *s, FILE *f)
{
	memset(s, 0, sizeof(*s));
	s->f = f;
	s->off = f ? (uint64_t)ftello(f) : 0;
}

void jstream_free(struct json_stream *s)
{
	free(s->buf);
	s->buf = NULL;
	s->cap = s->pos = s->end = 0;
}

/* More bytes after end, keeping buf[keep, end) (moved to the front: the
 * caller's indexes go down by keep). false at the end of the file. */
static bool more(struct json_stream *s, size_t keep)
{
	size_t got;

	if (s->error)
		return false;
	if (keep) {
		memmove(s->buf, s->buf + keep, s->end - keep);
		s->end -= keep;
		s->pos -= keep;
		s->off += keep;
	}
	if (s->cap - s->end < CHUNK / 2) {
		size_t cap = s->cap ? s->cap * 2 : CHUNK;
		char *g;

		if (s->end > JSTREAM_MAX_VALUE) {
			s->error = EFBIG;
			return false;
		}
		if (!(g = realloc(s->buf, cap))) {
			s->error = ENOMEM;
			return false;
		}
		s->buf = g;
		s->cap = cap;
	}
	got = s->f ? fread(s->buf + s->end, 1, s->cap - s->end, s->f) : 0;
	if (!got && s->f && ferror(s->f))
		s->error = errno ? errno : EIO;
	s->end += got;
	return got > 0;
}

int jstream_peek(struct json_stream *s)
{
	for (;;) {
		while (s->pos < s->end) {
			char c = s->buf[s->pos];

			if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
				return (unsigned char)c;
			s->pos++;
		}
		if (!more(s, s->pos))
			return -1;
	}
}

int jstream_value(struct json_stream *s, const char **text, size_t *len)
{
	size_t i, depth = 0;
	bool in_str = false, esc = false;
	int c = jstream_peek(s);
	char first;

	if (c < 0)
		return -1;
	first = (char)c;
	for (i = s->pos;; i++) {
		if (i == s->end) {
			size_t start = s->pos;
			bool got = more(s, start);

			i -= start;
			if (!got) {
				/* a number or literal may end the file */
				if (!s->error && first != '"' && first != '[' && first != '{')
					break;
				return -1;
			}
		}
		c = s->buf[i];
		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"') {
				in_str = false;
				if (!depth) {
					i++;
					break;
				}
			}
			continue;
		}
		if (i == s->pos) { /* the first byte */
			if (c == '"')
				in_str = true;
			else if (c == '[' || c == '{')
				depth = 1;
			continue;
		}
		if (!depth) { /* a number or literal: to the next delimiter */
			if (c == ',' || c == ']' || c == '}' || c == ':' || c == ' ' || c == '\t' || c == '\n' ||
			    c == '\r')
				break;
			continue;
		}
		if (c == '"')
			in_str = true;
		else if (c == '[' || c == '{')
			depth++;
		else if ((c == ']' || c == '}') && !--depth) {
			i++;
			break;
		}
	}
	*text = s->buf + s->pos;
	*len = i - s->pos;
	s->pos = i;
	return 0;
}
