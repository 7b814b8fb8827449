// SPDX-License-Identifier: GPL-2.0-only
#include <ctype.h>
#include <string.h>

#include "json_check.h"

struct js {
	const char *p, *end;
	int depth;
};

static void ws(struct js *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int value(struct js *j);

static int string(struct js *j)
{
	if (j->p >= j->end || *j->p++ != '"')
		return -1;
	while (j->p < j->end && *j->p != '"') {
		unsigned char c = (unsigned char)*j->p++;

		if (c < 0x20)
			return -1;
		if (c == '\\') {
			if (j->p >= j->end)
				return -1;
			c = (unsigned char)*j->p++;
			if (c == 'u') {
				for (int i = 0; i < 4; i++)
					if (j->p >= j->end || !isxdigit((unsigned char)*j->p++))
						return -1;
			} else if (!strchr("\"\\/bfnrt", c)) {
				return -1;
			}
		}
	}
	if (j->p >= j->end)
		return -1;
	j->p++;
	return 0;
}

static int number(struct js *j)
{
	const char *s = j->p;

	if (j->p < j->end && *j->p == '-')
		j->p++;
	if (j->p >= j->end || !isdigit((unsigned char)*j->p))
		return -1;
	if (*j->p == '0')
		j->p++;
	else
		while (j->p < j->end && isdigit((unsigned char)*j->p))
			j->p++;
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		if (j->p >= j->end || !isdigit((unsigned char)*j->p))
			return -1;
		while (j->p < j->end && isdigit((unsigned char)*j->p))
			j->p++;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (j->p >= j->end || !isdigit((unsigned char)*j->p))
			return -1;
		while (j->p < j->end && isdigit((unsigned char)*j->p))
			j->p++;
	}
	return j->p > s ? 0 : -1;
}

static int container(struct js *j, char close)
{
	if (++j->depth > 64)
		return -1;
	j->p++;
	ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		j->depth--;
		return 0;
	}
	for (;;) {
		if (close == '}') {
			if (string(j))
				return -1;
			ws(j);
			if (j->p >= j->end || *j->p++ != ':')
				return -1;
		}
		if (value(j))
			return -1;
		ws(j);
		if (j->p >= j->end)
			return -1;
		if (*j->p == ',') {
			j->p++;
			ws(j);
			continue;
		}
		if (*j->p++ != close)
			return -1;
		j->depth--;
		return 0;
	}
}

static int literal(struct js *j, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n))
		return -1;
	j->p += n;
	return 0;
}

static int value(struct js *j)
{
	ws(j);
	if (j->p >= j->end)
		return -1;
	switch (*j->p) {
	case '{': return container(j, '}');
	case '[': return container(j, ']');
	case '"': return string(j);
	case 't': return literal(j, "true");
	case 'f': return literal(j, "false");
	case 'n': return literal(j, "null");
	default: return number(j);
	}
}

int json_check(const char *text, size_t len, size_t *err_at)
{
	struct js j = { text, text + len, 0 };

	if (value(&j) == 0) {
		ws(&j);
		if (j.p == j.end)
			return 0;
	}
	*err_at = (size_t)(j.p - text);
	return -1;
}
