// SPDX-License-Identifier: GPL-2.0-only
/*
 * Recursive descent over RFC 8259 JSON, with a nesting limit so hostile
 * input cannot exhaust the stack. Strings are decoded into an arena of
 * large blocks; arrays and objects are gathered in a growing scratch
 * vector and copied to the arena once their size is known.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/vec.h"

#define MAX_DEPTH 256
#define BLOCK (1u << 20)

struct block {
	struct block *next;
	size_t used, cap;
	char data[];
};

struct parser {
	const char *p, *start, *end;
	struct json_doc *doc;
	bool oom;
};

static void *arena_alloc(struct json_doc *d, size_t n)
{
	struct block *b = d->arena;

	n = (n + 7) & ~(size_t)7;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > BLOCK ? n : BLOCK;

		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->next = d->arena;
		b->used = 0;
		b->cap = cap;
		d->arena = b;
	}
	b->used += n;
	return b->data + b->used - n;
}

static int fail(struct parser *ps, const char *what)
{
	int line = 1, col = 1;

	if (ps->doc->error[0])
		return -1;
	for (const char *q = ps->start; q < ps->p && q < ps->end; q++, col++)
		if (*q == '\n')
			line++, col = 0;
	snprintf(ps->doc->error, sizeof(ps->doc->error), "%s at line %d, column %d", ps->oom ? "out of memory" : what,
		 line, col);
	return -1;
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* At the opening quote. The decoded text is never longer than the source. */
static int parse_string(struct parser *ps, const char **out, uint32_t *outlen)
{
	const char *q = ++ps->p;
	char *o, *dst;

	while (q < ps->end && *q != '"')
		q += *q == '\\' ? 2 : 1;
	if (q >= ps->end)
		return fail(ps, "unterminated string");
	dst = o = arena_alloc(ps->doc, (size_t)(q - ps->p) + 1);
	if (!o) {
		ps->oom = true;
		return fail(ps, "");
	}
	while (*ps->p != '"') {
		unsigned char c = (unsigned char)*ps->p;

		if (c < 0x20)
			return fail(ps, "control character in a string");
		if (c != '\\') {
			*o++ = (char)c;
			ps->p++;
			continue;
		}
		c = (unsigned char)ps->p[1];
		ps->p += 2;
		switch (c) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned cp, lo;

			if (ps->end - ps->p < 4 || hex4(ps->p, &cp))
				return fail(ps, "bad \\u escape");
			ps->p += 4;
			if (cp >= 0xd800 && cp < 0xdc00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
			    ps->p[1] == 'u' && !hex4(ps->p + 2, &lo) && lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				ps->p += 6;
			} else if (cp >= 0xd800 && cp < 0xe000) {
				cp = 0xfffd; /* a lone surrogate */
			}
			/* 6 source bytes for at most 4 decoded: the room is there */
			o += put_utf8(o, cp);
			break;
		}
		default: return fail(ps, "bad escape in a string");
		}
	}
	ps->p++;
	*o = 0;
	*out = dst;
	*outlen = (uint32_t)(o - dst);
	return 0;
}

static int parse_number(struct parser *ps)
{
	const char *q = ps->p;

	if (q < ps->end && *q == '-')
		q++;
	if (q >= ps->end || *q < '0' || *q > '9')
		return fail(ps, "bad number");
	if (*q == '0')
		q++;
	else
		while (q < ps->end && *q >= '0' && *q <= '9')
			q++;
	if (q < ps->end && *q == '.') {
		if (++q >= ps->end || *q < '0' || *q > '9')
			return fail(ps, "bad number");
		while (q < ps->end && *q >= '0' && *q <= '9')
			q++;
	}
	if (q < ps->end && (*q == 'e' || *q == 'E')) {
		q++;
		if (q < ps->end && (*q == '+' || *q == '-'))
			q++;
		if (q >= ps->end || *q < '0' || *q > '9')
			return fail(ps, "bad number");
		while (q < ps->end && *q >= '0' && *q <= '9')
			q++;
	}
	ps->p = q;
	return 0;
}

static int parse_value(struct parser *ps, struct json_value *v, int depth);

static int parse_container(struct parser *ps, struct json_value *v, int depth)
{
	bool object = *ps->p == '{';
	char close = object ? '}' : ']';
	size_t sz = object ? sizeof(struct json_member) : sizeof(struct json_value);
	void *vec = NULL, *copy;
	size_t n = 0, cap = 0;

	if (depth >= MAX_DEPTH)
		return fail(ps, "nested too deeply");
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		goto done;
	}
	for (;;) {
		struct json_member *m;
		struct json_value *item;

		if (vec_reserve(&vec, &cap, n + 1, sz)) {
			ps->oom = true;
			goto bad;
		}
		skip_ws(ps);
		if (object) {
			uint32_t klen;

			m = (struct json_member *)vec + n;
			if (ps->p >= ps->end || *ps->p != '"') {
				fail(ps, "expected a member name");
				goto bad;
			}
			if (parse_string(ps, &m->key, &klen))
				goto bad;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				fail(ps, "expected ':'");
				goto bad;
			}
			ps->p++;
			item = &m->v;
		} else {
			item = (struct json_value *)vec + n;
		}
		if (parse_value(ps, item, depth + 1))
			goto bad;
		n++;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			break;
		}
		fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
		goto bad;
	}
done:
	if (n > UINT32_MAX) {
		fail(ps, "too many elements");
		goto bad;
	}
	copy = n ? arena_alloc(ps->doc, n * sz) : NULL;
	if (n && !copy) {
		ps->oom = true;
		fail(ps, "");
		goto bad;
	}
	if (n)
		memcpy(copy, vec, n * sz);
	free(vec);
	v->type = object ? JSON_OBJECT : JSON_ARRAY;
	v->n = (uint32_t)n;
	if (object)
		v->members = copy;
	else
		v->items = copy;
	return 0;
bad:
	free(vec);
	return fail(ps, "out of memory");
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n))
		return false;
	ps->p += n;
	return true;
}

static int parse_value(struct parser *ps, struct json_value *v, int depth)
{
	int ret = 0;

	skip_ws(ps);
	memset(v, 0, sizeof(*v));
	v->raw = ps->p;
	if (ps->p >= ps->end)
		return fail(ps, "unexpected end");
	switch (*ps->p) {
	case '{':
	case '[': ret = parse_container(ps, v, depth); break;
	case '"':
		v->type = JSON_STRING;
		ret = parse_string(ps, &v->s, &v->n);
		break;
	case 't':
	case 'f':
		v->type = JSON_BOOL;
		v->b = *ps->p == 't';
		if (!literal(ps, v->b ? "true" : "false"))
			return fail(ps, "bad literal");
		break;
	case 'n':
		v->type = JSON_NULL;
		if (!literal(ps, "null"))
			return fail(ps, "bad literal");
		break;
	default:
		v->type = JSON_NUMBER;
		ret = parse_number(ps);
		break;
	}
	v->rawlen = (size_t)(ps->p - v->raw);
	return ret;
}

int json_parse(struct json_doc *doc, const char *text, size_t len)
{
	memset(doc, 0, sizeof(*doc));
	return json_parse_again(doc, text, len);
}

int json_parse_again(struct json_doc *doc, const char *text, size_t len)
{
	struct parser ps = { text, text, text + len, doc, false };
	struct block *keep = doc->arena;

	/* one block kept, emptied: a stream of small documents allocates
	 * once, not once per document */
	if (keep) {
		for (struct block *b = keep->next, *next; b; b = next) {
			next = b->next;
			free(b);
		}
		keep->next = NULL;
		keep->used = 0;
	}
	memset(doc, 0, sizeof(*doc));
	doc->arena = keep;
	if (parse_value(&ps, &doc->root, 0))
		return -1;
	skip_ws(&ps);
	if (ps.p != ps.end)
		return fail(&ps, "text after the JSON value");
	return 0;
}

void json_free(struct json_doc *doc)
{
	for (struct block *b = doc->arena, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	doc->arena = NULL;
}

const struct json_value *json_get(const struct json_value *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	for (uint32_t i = 0; i < obj->n; i++)
		if (!strcmp(obj->members[i].key, key))
			return &obj->members[i].v;
	return NULL;
}

bool json_decimal(const struct json_value *v, int scale, int64_t *out)
{
	const char *p, *end;
	bool neg = false;
	uint64_t ip = 0, frac = 0;
	int fdigits = 0, exp = 0;
	bool round_up = false;

	if (!v || v->type != JSON_NUMBER || scale < 0 || scale > 9)
		return false;
	p = v->raw;
	end = v->raw + v->rawlen;
	if (p < end && *p == '-')
		neg = true, p++;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (ip > (UINT64_MAX - 9) / 10)
			return false;
		ip = ip * 10 + (uint64_t)(*p - '0');
	}
	if (p < end && *p == '.') {
		for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
			if (fdigits < 18)
				frac = frac * 10 + (uint64_t)(*p - '0'), fdigits++;
		}
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		bool eneg = false;

		p++;
		if (p < end && (*p == '+' || *p == '-'))
			eneg = *p++ == '-';
		for (; p < end && *p >= '0' && *p <= '9'; p++)
			if ((exp = exp * 10 + (*p - '0')) > 40)
				return false;
		if (eneg)
			exp = -exp;
	}
	/* value = (ip . frac digits) * 10^(exp + scale): shift the point */
	exp += scale;
	while (exp > 0) {
		uint64_t d = 0;

		if (fdigits) {
			uint64_t pw = 1;

			for (int i = 1; i < fdigits; i++)
				pw *= 10;
			d = frac / pw;
			frac %= pw;
			fdigits--;
		}
		if (ip > (UINT64_MAX - d) / 10)
			return false;
		ip = ip * 10 + d;
		exp--;
	}
	if (exp < 0) {
		/* moving the point left: digits of ip become the fraction */
		while (exp < 0) {
			round_up = ip % 10 >= 5;
			ip /= 10;
			exp++;
		}
		frac = 0;
		fdigits = 0;
	}
	if (fdigits) {
		uint64_t pw = 1;

		for (int i = 1; i < fdigits; i++)
			pw *= 10;
		round_up = frac / pw >= 5;
	}
	if (round_up)
		ip++;
	if (ip > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? -(int64_t)ip : (int64_t)ip;
	return true;
}

bool json_int(const struct json_value *v, int64_t *out)
{
	const char *p;

	if (!v || v->type != JSON_NUMBER)
		return false;
	for (p = v->raw; p < v->raw + v->rawlen; p++)
		if (*p == '.' || *p == 'e' || *p == 'E')
			return false;
	return json_decimal(v, 0, out);
}
