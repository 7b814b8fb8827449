/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The library reader's answer: a library is read in a sandboxed child
 * (base/sandbox.h), which sends back the functions it found in this
 * bounded format; the parent checks every count, size, offset and string
 * before it believes any (a child that read a crafted file may lie).
 */
#ifndef SBT_SITECODEC_H
#define SBT_SITECODEC_H

#include <stddef.h>
#include <stdint.h>

#include "probes/probes.h"
#include "probes/retsites.h"

#define SITECODEC_MAX_SITES 65536 /* functions of one library */
#define SITECODEC_MAX_STRING 4096 /* a name or a symbol */
#define SITECODEC_MAX_TEXT 1024 /* an error, a note, a reason */
#define SITECODEC_MAX_BYTES (32u << 20) /* the whole answer */

/* One function as the parent is given it, checked. */
struct site_found {
	uint32_t spec; /* the matching spec's index */
	uint64_t offset, size;
	const char *name, *symbol; /* demangled without parameters; as in the file */
	const char *refused; /* NULL: probed at rets */
	const struct ret_site *rets;
	int nrets;
};

/* The child's side: ret and err of its read, the note of what the reader
 * skipped, and each site of ps (whose patterns are specs'), written to fd.
 * 0, or -errno. */
int sitecodec_write(int fd, int ret, const char *err, const char *note, const struct probe_set *ps,
		    const struct probe_spec *specs, size_t nspecs);
/* The parent's side: the answer in buf checked against nspecs and the
 * file's size; the child's ret, err and note copied out, fn called for
 * each site (a non-zero return stops and is returned). 0, or -EPROTO with
 * err saying what was wrong. */
int sitecodec_read(const uint8_t *buf, size_t len, size_t nspecs, uint64_t file_size, int *child_ret, char *child_err,
		   size_t child_errlen, char *note, size_t notelen, int (*fn)(void *ctx, const struct site_found *s),
		   void *ctx, char *err, size_t errlen);

#endif
