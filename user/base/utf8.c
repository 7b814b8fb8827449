// SPDX-License-Identifier: GPL-2.0-only
#include <string.h>

#include "base/utf8.h"

static int cont(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

size_t utf8_char_len(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return cont(s[1]) ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		/* E0: no overlongs below 0x800; ED: no surrogates */
		if (!cont(s[1]) || !cont(s[2]) || (s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f))
			return 0;
		return 3;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		/* F0: no overlongs below 0x10000; F4: nothing above U+10FFFF */
		if (!cont(s[1]) || !cont(s[2]) || !cont(s[3]) || (s[0] == 0xf0 && s[1] < 0x90) ||
		    (s[0] == 0xf4 && s[1] > 0x8f))
			return 0;
		return 4;
	}
	return 0;
}

int utf8_valid(const char *s)
{
	while (*s) {
		size_t n = utf8_char_len(s);

		if (!n)
			return 0;
		s += n;
	}
	return 1;
}

size_t utf8_sanitize(const char *s, char *out, size_t outlen)
{
	size_t o = 0;

	if (!outlen)
		return 0;
	while (*s) {
		size_t n = utf8_char_len(s);
		const char *c = n ? s : "\xef\xbf\xbd";
		size_t cn = n ? n : 3;

		if (o + cn >= outlen)
			break;
		memcpy(out + o, c, cn);
		o += cn;
		s += n ? n : 1;
	}
	out[o] = '\0';
	return o;
}
