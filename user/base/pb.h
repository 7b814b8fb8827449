/* SPDX-License-Identifier: GPL-2.0-only */
/* Protocol buffer wire encoding into a growable buffer, enough for
 * Perfetto's TracePacket. Nested messages: pb_begin() / pb_end(). */
#ifndef SBT_PB_H
#define SBT_PB_H

#include <stddef.h>
#include <stdint.h>

struct pb {
	uint8_t *buf;
	size_t len, cap;
	int error; /* out of memory */
};

enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2 };

int pb_reserve_slow(struct pb *b, size_t n);

static inline int pb_reserve(struct pb *b, size_t n)
{
	return b->len + n <= b->cap ? 0 : pb_reserve_slow(b, n);
}

/* The encoder's hot path: inline, one capacity check per call. */
static inline void pb_varint(struct pb *b, uint64_t v)
{
	uint8_t *p;

	if (pb_reserve(b, 10))
		return;
	p = b->buf + b->len;
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	b->len = (size_t)(p - b->buf);
}

static inline void pb_uint(struct pb *b, uint32_t field, uint64_t v)
{
	pb_varint(b, (uint64_t)field << 3 | PB_VARINT);
	pb_varint(b, v);
}

void pb_int(struct pb *b, uint32_t field, int64_t v); /* int64: two's complement */
void pb_end_long(struct pb *b, size_t mark, size_t body);
void pb_fixed64(struct pb *b, uint32_t field, uint64_t v);
void pb_bytes(struct pb *b, uint32_t field, const void *data, size_t len);
void pb_str(struct pb *b, uint32_t field, const char *s);
/* Open a length-delimited field; returns a mark for pb_end(). One byte is
 * kept for the length; pb_end() makes room when the body is 128 or more. */
static inline size_t pb_begin(struct pb *b, uint32_t field)
{
	pb_varint(b, (uint64_t)field << 3 | PB_LEN);
	if (pb_reserve(b, 1))
		return b->len;
	b->buf[b->len++] = 0;
	return b->len;
}

static inline void pb_end(struct pb *b, size_t mark)
{
	size_t body = b->len - mark;

	if (b->error || mark > b->len)
		return;
	if (body < 0x80)
		b->buf[mark - 1] = (uint8_t)body;
	else
		pb_end_long(b, mark, body);
}
void pb_free(struct pb *b);

/* Raw writers for a hot path that reserved its bytes beforehand. */
static inline uint8_t *pb_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline uint8_t *pb_put_uint(uint8_t *p, uint32_t field, uint64_t v)
{
	return pb_put_varint(pb_put_varint(p, (uint64_t)field << 3 | PB_VARINT), v);
}

static inline uint8_t *pb_put_fixed64(uint8_t *p, uint32_t field, uint64_t v)
{
	p = pb_put_varint(p, (uint64_t)field << 3 | PB_FIXED64);
	/* little-endian on the wire: one store where the host is too */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	__builtin_memcpy(p, &v, 8);
	return p + 8;
}

static inline uint8_t *pb_put_bytes(uint8_t *p, uint32_t field, const void *data, size_t len)
{
	p = pb_put_varint(pb_put_varint(p, (uint64_t)field << 3 | PB_LEN), len);
	__builtin_memcpy(p, data, len);
	return p + len;
}

/* Decoding, for inspect and the tests. */
struct pb_reader {
	const uint8_t *p, *end;
	int error;
};

/* A reader over n bytes at p (p may be NULL when n is 0: a field with no
 * data, or an empty file). */
static inline struct pb_reader pb_reader_of(const uint8_t *p, size_t n)
{
	struct pb_reader r = { p, p ? p + n : p, 0 };

	return r;
}
/* A varint in the n bytes at p: 1 with its value and length (*used); 0
 * when it runs past n (the rest is still to come); -1 when it is longer
 * than a varint can be. */
int pb_peek_varint(const uint8_t *p, size_t n, uint64_t *v, size_t *used);
/* One field as read: its number and wire type, and its value (a varint or
 * a fixed) or its bytes (length-delimited); the other is zero. */
struct pb_field {
	uint32_t num;
	int type;
	uint64_t v;
	const uint8_t *d;
	size_t len;
};
/* The next field into *f: 1; 0 at the end; -1 on malformed input
 * (r->error set). */
int pb_next(struct pb_reader *r, struct pb_field *f);
/* Every field of r, in f, to its end or the first malformed one (then
 * r.error is set). */
#define PB_EACH(r, f) while (pb_next(&(r), &(f)) > 0)
/* Is f the field num, of wire type type? */
static inline int pb_is(const struct pb_field *f, uint32_t num, int type)
{
	return f->num == num && f->type == type;
}
/* A reader over a length-delimited field's bytes (empty for any other). */
static inline struct pb_reader pb_sub(const struct pb_field *f)
{
	return pb_reader_of(f->d, f->len);
}

#endif
