// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "base/json_write.h"
#include "base/utf8.h"

const char jw_digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
				 "25262728293031323334353637383940414243444546474849"
				 "50515253545556575859606162636465666768697071727374"
				 "75767778798081828384858687888990919293949596979899";

int jw_open(struct json_writer *w, FILE *f, size_t max, bool readable)
{
	*w = (struct json_writer){ .f = f, .max = f ? JW_BUF : max, .readable = readable };
	w->cap = w->max < JW_START ? w->max : JW_START;
	w->buf = malloc(w->cap + 1); /* + 1: jw_text's NUL */
	if (!w->buf)
		return -(w->error = ENOMEM);
	return 0;
}

static void write_out(struct json_writer *w, const char *s, size_t n)
{
	if (n && !w->error && fwrite(s, 1, n, w->f) != n)
		w->error = errno ? errno : EIO;
	w->bytes += n;
}

/* Room for n more bytes: the buffer grown (to max), or, to a file, written
 * out. false when n does not fit even then. */
bool jw_room_slow(struct json_writer *w, size_t n)
{
	if (w->len + n > w->cap && w->cap < w->max) {
		size_t cap = w->cap * 2 > w->len + n ? w->cap * 2 : w->len + n;
		char *grown;

		cap = cap < w->max ? cap : w->max;
		if ((grown = realloc(w->buf, cap + 1))) {
			w->buf = grown;
			w->cap = cap;
		}
	}
	if (w->len + n > w->cap && w->f) {
		write_out(w, w->buf, w->len);
		w->len = 0;
	}
	if (w->len + n <= w->cap)
		return true;
	if (!w->f && !w->error)
		w->error = EFBIG;
	return false;
}

void jw_put_slow(struct json_writer *w, const char *s, size_t n)
{
	if (jw_room_slow(w, n)) {
		memcpy(w->buf + w->len, s, n);
		w->len += n;
	} else if (w->f) { /* larger than the buffer: straight through */
		write_out(w, s, n);
	}
}

void jw_put_u64(struct json_writer *w, uint64_t v)
{
	char d[2 * JW_NUM_ROOM], *end = d + JW_NUM_ROOM, *p = jw_digits_before(end, v);
	char *at = jw_room(w, JW_NUM_ROOM);

	if (at) { /* one fixed-size copy, whatever the length */
		memcpy(at, p, JW_NUM_ROOM);
		w->len += (size_t)(end - p);
	} else {
		jw_put_slow(w, p, (size_t)(end - p));
	}
}

void jw_put_i64(struct json_writer *w, int64_t v)
{
	if (v < 0) {
		JW_PUT(w, "-");
		jw_put_u64(w, -(uint64_t)v);
	} else {
		jw_put_u64(w, (uint64_t)v);
	}
}

/* Bytes a JSON string takes as they are: printable ASCII but '"' and '\\'. */
static const bool plain_byte[256] = {
	[0x20 ... 0x21] = true, [0x23 ... 0x5b] = true, [0x5d ... 0x7e] = true, /* not '"' (0x22), '\\' (0x5c) */
};

/* Runs of plain ASCII copied whole, other characters one by one. */
size_t jw_escape_into(char *dst, size_t room, const char **sp)
{
	const char *s = *sp;
	char *d = dst, *end = dst + room;

	while (*s) {
		unsigned char c = (unsigned char)*s;

		if (plain_byte[c]) {
			if (d == end)
				break;
			*d++ = *s++;
			continue;
		}
		if (c >= 0x80) {
			size_t n = utf8_char_len(s);

			if ((size_t)(end - d) < (n ? n : 6))
				break;
			if (n) {
				memcpy(d, s, n);
				d += n;
			} else {
				memcpy(d, "\\ufffd", 6);
				d += 6;
			}
			s += n ? n : 1;
		} else if (c == '"' || c == '\\') {
			if (end - d < 2)
				break;
			*d++ = '\\';
			*d++ = *s++;
		} else {
			if (end - d < 6)
				break;
			memcpy(d, "\\u00", 4);
			d[4] = "0123456789abcdef"[c >> 4];
			d[5] = "0123456789abcdef"[c & 15];
			d += 6;
			s++;
		}
	}
	*sp = s;
	return (size_t)(d - dst);
}

#define STR_CHUNK 256

/* Escaped straight into the buffer a chunk at a time. */
void jw_put_str(struct json_writer *w, const char *s)
{
	JW_PUT(w, "\"");
	while (s && *s) {
		const char *from = s;
		char *at = jw_room(w, STR_CHUNK);

		if (at) {
			w->len += jw_escape_into(at, STR_CHUNK, &s);
		} else { /* no room: through a chunk of our own */
			char chunk[STR_CHUNK];
			size_t n = jw_escape_into(chunk, sizeof(chunk), &s);

			jw_put_slow(w, chunk, n);
		}
		if (s == from) /* cannot happen: a chunk takes any one character */
			break;
	}
	JW_PUT(w, "\"");
}

/* Before a member or an element: the comma, and in readable text the
 * outermost object's members on lines of their own. */
static void separate(struct json_writer *w)
{
	uint32_t bit;
	bool had;

	if (!w->depth)
		return;
	bit = 1u << (w->depth - 1);
	had = w->has_member & bit;
	w->has_member |= bit;
	if (w->readable && w->depth == 1 && (w->is_object & 1))
		had ? JW_PUT(w, ",\n  ") : JW_PUT(w, "\n  ");
	else if (had)
		w->readable ? JW_PUT(w, ", ") : JW_PUT(w, ",");
}

static void before_value(struct json_writer *w)
{
	if (w->after_key)
		w->after_key = false;
	else
		separate(w);
}

static void open_level(struct json_writer *w, bool object)
{
	uint32_t bit;

	before_value(w);
	if (w->depth == JW_DEPTH) {
		w->error = w->error ? w->error : EINVAL;
		return;
	}
	bit = 1u << w->depth++;
	w->is_object = object ? w->is_object | bit : w->is_object & ~bit;
	w->has_member &= ~bit;
	object ? JW_PUT(w, "{") : JW_PUT(w, "[");
}

void jw_object(struct json_writer *w)
{
	open_level(w, true);
}

void jw_array(struct json_writer *w)
{
	open_level(w, false);
}

void jw_end(struct json_writer *w)
{
	uint32_t bit;

	if (!w->depth) {
		w->error = w->error ? w->error : EINVAL;
		return;
	}
	bit = 1u << --w->depth;
	if (w->readable && !w->depth && (w->is_object & bit) && (w->has_member & bit))
		JW_PUT(w, "\n");
	(w->is_object & bit) ? JW_PUT(w, "}") : JW_PUT(w, "]");
}

void jw_key(struct json_writer *w, const char *key)
{
	separate(w);
	jw_put_str(w, key);
	w->readable ? JW_PUT(w, ": ") : JW_PUT(w, ":");
	w->after_key = true;
}

void jw_string(struct json_writer *w, const char *s)
{
	before_value(w);
	jw_put_str(w, s);
}

void jw_uint(struct json_writer *w, uint64_t v)
{
	before_value(w);
	jw_put_u64(w, v);
}

void jw_int(struct json_writer *w, int64_t v)
{
	before_value(w);
	jw_put_i64(w, v);
}

void jw_bool(struct json_writer *w, bool b)
{
	before_value(w);
	b ? JW_PUT(w, "true") : JW_PUT(w, "false");
}

void jw_double(struct json_writer *w, double v)
{
	char text[32];
	int n = isfinite(v) ? snprintf(text, sizeof(text), "%g", v) : snprintf(text, sizeof(text), "null");

	before_value(w);
	jw_put(w, text, (size_t)n);
}

void jw_raw(struct json_writer *w, const char *text, size_t n)
{
	before_value(w);
	jw_put(w, text, n);
}

int jw_flush(struct json_writer *w)
{
	if (w->f) {
		write_out(w, w->buf, w->len);
		w->len = 0;
		if (!w->error && fflush(w->f))
			w->error = errno;
	}
	return -w->error;
}

const char *jw_text(struct json_writer *w)
{
	if (w->f || w->error || !w->buf)
		return NULL;
	w->buf[w->len] = '\0'; /* the byte kept past cap */
	return w->buf;
}

void jw_free(struct json_writer *w)
{
	free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
}
