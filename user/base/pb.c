// SPDX-License-Identifier: GPL-2.0-only
#include <stdlib.h>
#include <string.h>

#include "base/pb.h"
#include "base/utf8.h"

int pb_reserve_slow(struct pb *b, size_t n)
{
	size_t cap = b->cap ? b->cap * 2 : 256;

	while (cap < b->len + n)
		cap *= 2;
	uint8_t *p = realloc(b->buf, cap);

	if (!p) {
		b->error = 1;
		return -1;
	}
	b->buf = p;
	b->cap = cap;
	return 0;
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static void key(struct pb *b, uint32_t field, int type)
{
	pb_varint(b, (uint64_t)field << 3 | (uint64_t)type);
}

void pb_int(struct pb *b, uint32_t field, int64_t v)
{
	pb_uint(b, field, (uint64_t)v);
}

void pb_fixed64(struct pb *b, uint32_t field, uint64_t v)
{
	key(b, field, PB_FIXED64);
	if (pb_reserve(b, 8))
		return;
	for (int i = 0; i < 8; i++)
		b->buf[b->len++] = (uint8_t)(v >> (8 * i));
}

void pb_bytes(struct pb *b, uint32_t field, const void *data, size_t len)
{
	key(b, field, PB_LEN);
	pb_varint(b, len);
	if (pb_reserve(b, len))
		return;
	memcpy(b->buf + b->len, data, len);
	b->len += len;
}

/* protobuf strings must be UTF-8: an invalid byte becomes U+FFFD */
void pb_str(struct pb *b, uint32_t field, const char *s)
{
	char fixed[1024];

	if (!utf8_valid(s)) {
		pb_bytes(b, field, fixed, utf8_sanitize(s, fixed, sizeof(fixed)));
		return;
	}
	pb_bytes(b, field, s, strlen(s));
}

void pb_end_long(struct pb *b, size_t mark, size_t body)
{
	size_t n = varint_len(body);

	if (pb_reserve(b, n - 1))
		return;
	memmove(b->buf + mark + n - 1, b->buf + mark, body);
	b->len += n - 1;
	for (size_t i = 0; i < n; i++, body >>= 7)
		b->buf[mark - 1 + i] = (uint8_t)((body & 0x7f) | (i + 1 < n ? 0x80 : 0));
}

void pb_free(struct pb *b)
{
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

int pb_peek_varint(const uint8_t *p, size_t n, uint64_t *v, size_t *used)
{
	*v = 0;
	for (size_t i = 0; i < 10; i++) {
		if (i == n)
			return 0;
		*v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*used = i + 1;
			return 1;
		}
	}
	return -1;
}

static int get_varint(struct pb_reader *r, uint64_t *v)
{
	size_t used;

	if (pb_peek_varint(r->p, (size_t)(r->end - r->p), v, &used) != 1)
		return -1;
	r->p += used;
	return 0;
}

int pb_next(struct pb_reader *r, struct pb_field *f)
{
	uint64_t k, n;

	if (r->p >= r->end)
		return 0;
	/* a field without a length has no data, one with a length no value:
	 * callers never see a stale one */
	*f = (struct pb_field){ 0 };
	if (get_varint(r, &k) || (k >> 3) == 0 || (k >> 3) > 0x1fffffff)
		goto bad;
	f->num = (uint32_t)(k >> 3);
	f->type = (int)(k & 7);
	switch (f->type) {
	case PB_VARINT:
		if (get_varint(r, &f->v))
			goto bad;
		return 1;
	case PB_FIXED64:
		if (r->end - r->p < 8)
			goto bad;
		for (int i = 0; i < 8; i++)
			f->v |= (uint64_t)r->p[i] << (8 * i);
		r->p += 8;
		return 1;
	case PB_LEN:
		if (get_varint(r, &n) || n > (uint64_t)(r->end - r->p))
			goto bad;
		f->d = r->p;
		f->len = (size_t)n;
		r->p += n;
		return 1;
	case 5: /* fixed32 */
		if (r->end - r->p < 4)
			goto bad;
		f->v = (uint64_t)r->p[0] | (uint64_t)r->p[1] << 8 | (uint64_t)r->p[2] << 16 | (uint64_t)r->p[3] << 24;
		r->p += 4;
		return 1;
	}
bad:
	r->error = 1;
	return -1;
}
