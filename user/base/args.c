// SPDX-License-Identifier: GPL-2.0-only
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/args.h"

int arg_parse_pid(const char *s, pid_t *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > INT_MAX)
		return -1;
	*out = (pid_t)v;
	return 0;
}

int arg_parse_size(const char *s, unsigned long *out)
{
	char *end;
	unsigned long v;
	int shift = 0;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (*end == 'i' && shift)
		end++;
	if ((*end == 'b' || *end == 'B') && shift)
		end++;
	if (*end || !v || v > (ULONG_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

int arg_parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > SBT_MAX_SECONDS)
		return -1;
	*out = v;
	return 0;
}

int arg_parse_duration(const char *s, double *out)
{
	static const struct {
		const char *unit;
		double sec;
	} units[] = { { "", 1 }, { "s", 1 }, { "ms", 1e-3 }, { "m", 60 }, { "h", 3600 } };
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v <= 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].unit) && v * units[i].sec <= SBT_MAX_SECONDS) {
			*out = v * units[i].sec;
			return 0;
		}
	return -1;
}

int arg_parse_count(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || !isdigit((unsigned char)s[0]) || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int arg_split_glob(const char *glob, size_t max_part, size_t *prefix_len, size_t *suffix_len, bool *has_star)
{
	const char *star = strchr(glob, '*');
	size_t len = strlen(glob);

	if (!len || strpbrk(glob, "?[") || (star && strchr(star + 1, '*')))
		return -1;
	*has_star = star != NULL;
	*prefix_len = star ? (size_t)(star - glob) : len;
	*suffix_len = star ? len - *prefix_len - 1 : 0;
	return *prefix_len > max_part || *suffix_len > max_part ? -1 : 0;
}
