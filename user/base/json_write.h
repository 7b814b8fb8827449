/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The JSON writer every JSON file the tool writes goes through (Chrome JSON
 * traces, snapshot manifests, detail windows). Text is built in a buffer
 * of its own and written a megabyte at a time: printf's format parsing
 * cost 20 times the rest of a trace's conversion. Strings are escaped
 * (invalid UTF-8 becomes U+FFFD), numbers written from a table of digit
 * pairs.
 *
 * Two ways to write into the one buffer:
 *  - calls that place their own commas and colons (jw_object, jw_key,
 *    jw_uint, jw_end, ...), for documents written once;
 *  - a cursor into room taken beforehand (jw_room, jw_at_*, jw_sync), for a
 *    hot path that writes its own punctuation: put() would reload the
 *    buffer's length after every piece (the bytes it copies may alias it),
 *    a cursor in a register need not.
 */
#ifndef SBT_JSON_WRITE_H
#define SBT_JSON_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define JW_BUF (1u << 20) /* the most held before a write */
#define JW_START (16u << 10) /* the first buffer: a small file needs no megabyte */
#define JW_DEPTH 32 /* the deepest nesting of the structured calls */

/* The most a number takes through the cursor: 20 digits, or a time in
 * microseconds with three decimals (17 + 4). */
#define JW_NUM_ROOM 24

struct json_writer {
	FILE *f; /* NULL: held in memory, at most max bytes (jw_text) */
	char *buf; /* what is not written yet */
	size_t len, cap, max;
	uint64_t bytes; /* written to f */
	int error; /* the first errno; EFBIG: past max in memory */
	bool readable; /* ", " and ": ", and the outermost object's members a line each */
	int depth;
	uint32_t is_object, has_member; /* bit d: the open level d */
	bool after_key;
};

/* A writer to f (which stays the caller's), or, f NULL, to memory of at
 * most max bytes. 0, or -ENOMEM. */
int jw_open(struct json_writer *w, FILE *f, size_t max, bool readable);
/* What is buffered to f, then f flushed. 0 or -errno (the first error). */
int jw_flush(struct json_writer *w);
/* Bytes written so far, buffered ones included. */
static inline uint64_t jw_bytes(const struct json_writer *w)
{
	return w->bytes + w->len;
}
/* In memory: the text, NUL ended, or NULL after an error. */
const char *jw_text(struct json_writer *w);
/* Frees the buffer (not f). */
void jw_free(struct json_writer *w);

/* Raw text. */
bool jw_room_slow(struct json_writer *w, size_t n);
void jw_put_slow(struct json_writer *w, const char *s, size_t n);

/* Inline, so that a literal's copy is a few moves, not a call. */
static inline __attribute__((always_inline)) void jw_put(struct json_writer *w, const char *s, size_t n)
{
	if (__builtin_expect(w->len + n <= w->cap, 1)) {
		memcpy(w->buf + w->len, s, n);
		w->len += n;
		return;
	}
	jw_put_slow(w, s, n);
}
#define JW_PUT(w, lit) jw_put(w, "" lit, sizeof(lit) - 1) /* literals only */

/* s quoted and escaped (NULL: ""). */
void jw_put_str(struct json_writer *w, const char *s);
void jw_put_u64(struct json_writer *w, uint64_t v);
void jw_put_i64(struct json_writer *w, int64_t v);

/* The cursor. Room for n bytes from the returned cursor, which jw_sync
 * hands back; NULL only in memory past max (w->error says). */
static inline char *jw_room(struct json_writer *w, size_t n)
{
	if (__builtin_expect(w->len + n <= w->cap, 1) || jw_room_slow(w, n))
		return w->buf + w->len;
	return NULL;
}
static inline void jw_sync(struct json_writer *w, char *at)
{
	w->len = (size_t)(at - w->buf);
}
static inline char *jw_at_put(char *at, const char *s, size_t n)
{
	memcpy(at, s, n);
	return at + n;
}
#define JW_AT_PUT(at, lit) jw_at_put(at, "" lit, sizeof(lit) - 1) /* literals only */

extern const char jw_digit_pairs[201];

/* v's decimal digits, written backwards to end at end; returns where they
 * start. Two digits a step from a table, in 32-bit arithmetic (which
 * divides cheaper) once eight digits at a time have made v small. */
static inline char *jw_digits_before(char *end, uint64_t v)
{
	uint32_t u;

	while (v > UINT32_MAX) {
		uint32_t lo = (uint32_t)(v % 100000000);

		v /= 100000000;
		for (int i = 0; i < 4; i++, lo /= 100) {
			end -= 2;
			memcpy(end, jw_digit_pairs + 2 * (lo % 100), 2);
		}
	}
	for (u = (uint32_t)v; u >= 100; u /= 100) {
		end -= 2;
		memcpy(end, jw_digit_pairs + 2 * (u % 100), 2);
	}
	if (u >= 10) {
		end -= 2;
		memcpy(end, jw_digit_pairs + 2 * u, 2);
	} else {
		*--end = (char)('0' + u);
	}
	return end;
}

/* A number at the cursor: its digits in a scratch, moved with one
 * fixed-size copy (the room counts JW_NUM_ROOM for it). */
static inline char *jw_at_u64(char *at, uint64_t v)
{
	char d[2 * JW_NUM_ROOM], *end = d + JW_NUM_ROOM, *p = jw_digits_before(end, v);

	memcpy(at, p, JW_NUM_ROOM);
	return at + (end - p);
}

static inline char *jw_at_i64(char *at, int64_t v)
{
	if (v < 0) {
		*at++ = '-';
		return jw_at_u64(at, -(uint64_t)v);
	}
	return jw_at_u64(at, (uint64_t)v);
}

/* "0x..." in lower-case hex, quoted (JSON numbers are decimal) */
static inline char *jw_at_hex(char *at, uint64_t v)
{
	char d[48], *end = d + 20, *p = end; /* 20 bytes read from p, wherever it starts */

	*--p = '"';
	do
		*--p = "0123456789abcdef"[v & 15];
	while ((v >>= 4));
	*--p = 'x';
	*--p = '0';
	*--p = '"';
	memcpy(at, p, 20); /* 16 digits and the quotes and 0x at most */
	return at + (end - p);
}

/* As much of the JSON string body of *sp as fits in room bytes at dst,
 * whole characters only; returns the bytes written, *sp moved past what
 * was taken. */
size_t jw_escape_into(char *dst, size_t room, const char **sp);

/* The structured calls: commas and colons placed, nesting kept (up to
 * JW_DEPTH; deeper is an error, EINVAL). */
void jw_object(struct json_writer *w);
void jw_array(struct json_writer *w);
void jw_end(struct json_writer *w); /* the innermost open object or array */
void jw_key(struct json_writer *w, const char *key);
void jw_string(struct json_writer *w, const char *s);
void jw_uint(struct json_writer *w, uint64_t v);
void jw_int(struct json_writer *w, int64_t v);
void jw_bool(struct json_writer *w, bool b);
void jw_double(struct json_writer *w, double v); /* %g's six digits; not finite: null */
/* A value's text as it is (JSON made elsewhere, e.g. by a memory writer). */
void jw_raw(struct json_writer *w, const char *text, size_t n);

/* key: value in one call. */
static inline void jw_key_uint(struct json_writer *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	jw_uint(w, v);
}
static inline void jw_key_string(struct json_writer *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_string(w, s);
}
static inline void jw_key_bool(struct json_writer *w, const char *key, bool b)
{
	jw_key(w, key);
	jw_bool(w, b);
}

#endif
