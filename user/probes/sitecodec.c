// SPDX-License-Identifier: GPL-2.0-only
/*
 * Layout, in the host's byte order (parent and child are one program):
 *   head: magic, ret, err length, note length, sites
 *   err, note
 *   each site: spec, nrets (-1: refused), offset, size, name, symbol and
 *   reason lengths; then those strings and nrets return sites
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"
#include "probes/sitecodec.h"

#define MAGIC 0x52544253u /* "SBTR" */

struct head {
	uint32_t magic;
	int32_t ret;
	uint32_t err_len, note_len, nsites;
};

/* (no padding: every byte sent is set) */
struct site_head {
	uint32_t spec;
	int32_t nrets;
	uint64_t offset, size;
	uint32_t name_len, symbol_len, refused_len, pad;
};

struct wire_ret {
	uint64_t offset;
	uint8_t kind, reg, pad[6];
};

struct out {
	uint8_t *buf;
	size_t len, cap;
	bool oom;
};

static void put(struct out *o, const void *p, size_t n)
{
	if (o->oom || !n)
		return;
	if (o->len + n > o->cap) {
		size_t cap = o->cap ? o->cap : 65536;
		uint8_t *grown;

		while (cap < o->len + n)
			cap *= 2;
		if (!(grown = realloc(o->buf, cap))) {
			o->oom = true;
			return;
		}
		o->buf = grown;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

static size_t clip(const char *s, size_t max)
{
	return s ? strnlen(s, max) : 0;
}

int sitecodec_write(int fd, int ret, const char *err, const char *note, const struct probe_set *ps,
		    const struct probe_spec *specs, size_t nspecs)
{
	struct head h = { MAGIC, ret, (uint32_t)clip(err, SITECODEC_MAX_TEXT), (uint32_t)clip(note, SITECODEC_MAX_TEXT),
			  0 };
	struct out o = { 0 };
	size_t at = 0;

	h.nsites = (uint32_t)(ps->n < SITECODEC_MAX_SITES ? ps->n : SITECODEC_MAX_SITES);
	put(&o, &h, sizeof(h));
	put(&o, err, h.err_len);
	put(&o, note, h.note_len);
	for (size_t i = 0; i < h.nsites; i++) {
		const struct probe_site *s = &ps->sites[i];
		struct site_head sh = { (uint32_t)nspecs,
					s->refused ? -1 : s->nrets,
					s->offset,
					s->size,
					(uint32_t)clip(s->name, SITECODEC_MAX_STRING),
					(uint32_t)clip(s->symbol, SITECODEC_MAX_STRING),
					(uint32_t)clip(s->refused, SITECODEC_MAX_TEXT),
					0 };

		for (size_t k = 0; k < nspecs; k++)
			if (specs[k].pattern == s->pattern)
				sh.spec = (uint32_t)k;
		put(&o, &sh, sizeof(sh));
		put(&o, s->name, sh.name_len);
		put(&o, s->symbol, sh.symbol_len);
		put(&o, s->refused, sh.refused_len);
		for (int k = 0; !s->refused && k < s->nrets; k++) {
			struct wire_ret w = { s->rets[k].offset, s->rets[k].kind, s->rets[k].reg, { 0 } };

			put(&o, &w, sizeof(w));
		}
	}
	if (o.oom) {
		free(o.buf);
		return -ENOMEM;
	}
	while (at < o.len) {
		ssize_t n = write(fd, o.buf + at, o.len - at);

		if (n <= 0) {
			free(o.buf);
			return -EIO;
		}
		at += (size_t)n;
	}
	free(o.buf);
	return 0;
}

/* ---- the parent's side: nothing believed unchecked ---------------------- */

struct in {
	const uint8_t *p;
	size_t left;
};

static bool take(struct in *in, void *dst, size_t n)
{
	if (n > in->left)
		return false;
	memcpy(dst, in->p, n);
	in->p += n;
	in->left -= n;
	return true;
}

/* A string of n bytes, none of them NUL (or a control character, for
 * text shown to a user), copied out NUL-ended into a buffer of max + 1. */
static bool take_string(struct in *in, uint32_t n, uint32_t max, bool text, char *out)
{
	if (n > max || n > in->left)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (!in->p[i] || (text && (in->p[i] < 0x20 || in->p[i] == 0x7f)))
			return false;
	memcpy(out, in->p, n);
	out[n] = 0;
	in->p += n;
	in->left -= n;
	return true;
}

static int bad(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "the library reader's answer is not believed: %s", what);
	return -EPROTO;
}

int sitecodec_read(const uint8_t *buf, size_t len, size_t nspecs, uint64_t file_size, int *child_ret, char *child_err,
		   size_t child_errlen, char *note, size_t notelen, int (*fn)(void *ctx, const struct site_found *s),
		   void *ctx, char *err, size_t errlen)
{
	char text[SITECODEC_MAX_TEXT + 1], refused[SITECODEC_MAX_TEXT + 1];
	char name[SITECODEC_MAX_STRING + 1], symbol[SITECODEC_MAX_STRING + 1];
	struct ret_site rets[RETSITES_MAX];
	struct in in = { buf, len };
	struct head h;
	int ret;

	if (!take(&in, &h, sizeof(h)) || h.magic != MAGIC)
		return bad(err, errlen, "no head");
	if (h.ret > 0 || h.nsites > SITECODEC_MAX_SITES)
		return bad(err, errlen, "its counts are out of range");
	if (!take_string(&in, h.err_len, SITECODEC_MAX_TEXT, true, text))
		return bad(err, errlen, "its error");
	snprintf(child_err, child_errlen, "%s", text);
	if (!take_string(&in, h.note_len, SITECODEC_MAX_TEXT, true, text))
		return bad(err, errlen, "its note");
	snprintf(note, notelen, "%s", text);
	*child_ret = h.ret;
	for (uint32_t i = 0; i < h.nsites; i++) {
		struct site_head sh;
		struct site_found f;

		if (!take(&in, &sh, sizeof(sh)))
			return bad(err, errlen, "a function cut short");
		if (sh.spec >= nspecs || sh.offset >= file_size || sh.size > file_size - sh.offset || sh.nrets < -1 ||
		    sh.nrets > RETSITES_MAX || !sh.name_len || !sh.symbol_len)
			return bad(err, errlen, "a function's place or counts are out of range");
		if (!take_string(&in, sh.name_len, SITECODEC_MAX_STRING, false, name) ||
		    !take_string(&in, sh.symbol_len, SITECODEC_MAX_STRING, false, symbol) ||
		    !take_string(&in, sh.refused_len, SITECODEC_MAX_TEXT, true, refused))
			return bad(err, errlen, "a function's names");
		if ((sh.nrets < 0) != (sh.refused_len > 0))
			return bad(err, errlen, "a function both refused and probed");
		for (int k = 0; k < sh.nrets; k++) {
			struct wire_ret w;

			if (!take(&in, &w, sizeof(w)))
				return bad(err, errlen, "a function's return sites cut short");
			if (w.offset >= file_size || w.kind < SBT_SITE_RET || w.kind > SBT_SITE_INDIRECT ||
			    w.reg > SBT_REG_R15)
				return bad(err, errlen, "a return site out of range");
			rets[k] = (struct ret_site){ w.offset, w.kind, w.reg };
		}
		f = (struct site_found){ sh.spec, sh.offset,
					 sh.size, name,
					 symbol,  sh.nrets < 0 ? refused : NULL,
					 rets,	  sh.nrets < 0 ? 0 : sh.nrets };
		if ((ret = fn(ctx, &f)))
			return ret;
	}
	if (in.left)
		return bad(err, errlen, "bytes past its end");
	return 0;
}
