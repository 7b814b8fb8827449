/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The raw capture file (.sbt): what perf.data is to perf.
 *
 * A 16-byte file header (magic, version), then records in the format of
 * bpf/events.h, each padded to 8 bytes, all in the byte order of the host
 * that wrote them: the header's version reads swapped in the other order,
 * and a reader then swaps each record (byteorder.h). Metadata comes first as records
 * too (clock, host, processes, probes), so a file is read by one loop, and
 * a file cut anywhere still reads back up to its last whole record.
 */
#ifndef SBT_CAPTURE_H
#define SBT_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "events.h"

#define SBT_MAGIC "SPYRESBT"
#define SBT_FORMAT_VERSION 1

struct sbt_file_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;
};

struct capture_writer {
	FILE *f;
	uint64_t records; /* records written */
	uint64_t bytes;
	int error; /* first errno seen while writing */
};

/* 0 or -errno. Truncates the file and writes the file header. */
int capture_create(struct capture_writer *w, const char *path);
/* The same on a stream the writer takes over (closed even on error). */
int capture_create_file(struct capture_writer *w, FILE *f);
/* Write one record (hdr.size says how long). 0 or -errno. */
int capture_write(struct capture_writer *w, const struct sbt_hdr *rec);
int capture_flush(struct capture_writer *w);
/* Flush, fsync and close. 0 or -errno (the first error seen). */
int capture_close(struct capture_writer *w);

static inline size_t sbt_record_len(const struct sbt_hdr *h)
{
	return (sizeof(*h) + h->size + 7) & ~(size_t)7;
}

/* Smallest payload a record of this type may have; 0 for unknown types. */
size_t sbt_min_payload(uint16_t type);
extern const uint16_t sbt_min_payload_of[SBT_TYPE_MAX];

/* The longest record: a header, the most a 16-bit size says, padding. */
#define CAPTURE_MAX_RECORD (sizeof(struct sbt_hdr) + 0xffff + 8)

enum capture_status {
	CAPTURE_OK = 0,
	CAPTURE_END = 1, /* clean end of data */
	CAPTURE_TRUNCATED = 2, /* the data ends inside a record */
	CAPTURE_CORRUPT = 3, /* a record header makes no sense */
};

struct capture_reader {
	const uint8_t *data;
	size_t len, off;
	/* a file: read through a window of buf, base its offset in the file */
	int fd;
	uint8_t *buf;
	uint64_t base;
	bool eof;
	uint32_t version;
	bool foreign; /* written in the other byte order: records come swapped, in rec */
	uint8_t *rec;
	uint64_t records, unknown; /* read so far; of types this build does not know */
	char error[160];
};

/* Read from a file (through a window, never mapped). 0, or -1 with
 * r->error set. A record returned stays valid until the next call. */
int capture_open(struct capture_reader *r, const char *path);
/* Read from memory (the fuzzer and tests). 0, or -1 with r->error set. */
int capture_open_mem(struct capture_reader *r, const void *data, size_t len);
/* Next record, checked (capture_next's way when it is not the common case). */
enum capture_status capture_next_checked(struct capture_reader *r, const struct sbt_hdr **rec);

/* The common case's test of the record at p, in this host's byte order
 * with CAPTURE_MAX_RECORD bytes after it: its length with padding when it
 * is of a known type and long enough for it, else 0 (the checked way). */
static inline size_t capture_fast_len(const uint8_t *p)
{
	uint16_t type, size;

	__builtin_memcpy(&type, p + offsetof(struct sbt_hdr, type), sizeof(type));
	__builtin_memcpy(&size, p + offsetof(struct sbt_hdr, size), sizeof(size));
	if (type < SBT_TYPE_MAX && sbt_min_payload_of[type] && size >= sbt_min_payload_of[type])
		return (sizeof(struct sbt_hdr) + size + 7) & ~(size_t)7;
	return 0;
}

/* Next record: CAPTURE_OK with *rec set, or why there is none. Inline for
 * the common case, a record of a known type in this host's byte order with
 * room for the longest record after it (no refill, no cut possible): the
 * converter reads millions of them. */
static inline enum capture_status capture_next(struct capture_reader *r, const struct sbt_hdr **rec)
{
	const uint8_t *p = r->data + r->off;
	size_t n;

	if (r->len - r->off >= CAPTURE_MAX_RECORD && !r->foreign && (n = capture_fast_len(p))) {
		r->off += n;
		r->records++;
		*rec = (const struct sbt_hdr *)p;
		return CAPTURE_OK;
	}
	return capture_next_checked(r, rec);
}
void capture_close_reader(struct capture_reader *r);

/*
 * Every record of the capture at path, in order, to fn (whose nonzero
 * return stops the read and is returned). The one policy for a cut or
 * damaged capture, said in one wording by every command that reads one:
 * a file cut inside a record (a crash, a full disk) gives its whole
 * records and a warning; a record that makes no sense stops the read with
 * an error naming it, what came before used. 0 (read to its end, or cut),
 * 1 (unreadable or damaged: said), or fn's return. *records: how many.
 * Inline, so that a caller's fn is inlined into the loop.
 */
int capture_each_open(struct capture_reader *r, const char *path);
int capture_each_end(struct capture_reader *r, const char *path, enum capture_status st, int ret, uint64_t *records);

static inline int capture_each(const char *path, int (*fn)(void *ctx, const struct sbt_hdr *h), void *ctx,
			       uint64_t *records)
{
	struct capture_reader r;
	const struct sbt_hdr *h;
	enum capture_status st = CAPTURE_OK;
	int ret = 0;

	if (records)
		*records = 0;
	if (capture_each_open(&r, path))
		return 1;
	for (;;) {
		/* capture_next's common case with the cursor in locals: r's
		 * address has left this function, so its fields would be
		 * loaded and stored again around every call of fn */
		const uint8_t *data = r.data;
		size_t off = r.off, n;
		size_t len = r.foreign ? off : r.len; /* swapped: every record the checked way */
		uint64_t count = r.records;

		while (len - off >= CAPTURE_MAX_RECORD && (n = capture_fast_len(data + off))) {
			h = (const struct sbt_hdr *)(data + off);
			off += n;
			count++;
			if ((ret = fn(ctx, h)))
				break;
		}
		r.off = off;
		r.records = count;
		if (ret || (st = capture_next_checked(&r, &h)) != CAPTURE_OK || (ret = fn(ctx, h)))
			break;
	}
	return capture_each_end(&r, path, st, ret, records);
}

#endif
