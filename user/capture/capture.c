// SPDX-License-Identifier: GPL-2.0-only
/* Writing and reading the raw capture file; format in capture.h. */
#include <byteswap.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "capture/byteorder.h"
#include "capture/capture.h"

int capture_create(struct capture_writer *w, const char *path)
{
	FILE *f = fopen(path, "wb");

	if (!f) {
		memset(w, 0, sizeof(*w));
		return -errno;
	}
	return capture_create_file(w, f);
}

int capture_create_file(struct capture_writer *w, FILE *f)
{
	struct sbt_file_header fh = { .version = SBT_FORMAT_VERSION, .header_size = sizeof(fh) };

	memset(w, 0, sizeof(*w));
	memcpy(fh.magic, SBT_MAGIC, sizeof(fh.magic));
	w->f = f;
	/* Large buffer: records arrive in bursts and are small. */
	setvbuf(w->f, NULL, _IOFBF, 1 << 20);
	if (fwrite(&fh, sizeof(fh), 1, w->f) != 1) {
		int err = -errno;

		fclose(w->f);
		w->f = NULL;
		return err ? err : -EIO;
	}
	w->bytes = sizeof(fh);
	return 0;
}

int capture_write(struct capture_writer *w, const struct sbt_hdr *rec)
{
	static const uint8_t zeros[8];
	size_t body = sizeof(*rec) + rec->size, len = sbt_record_len(rec);

	if (!w->f)
		return -EBADF;
	if (fwrite(rec, 1, body, w->f) != body || (len > body && fwrite(zeros, 1, len - body, w->f) != len - body)) {
		if (!w->error)
			w->error = errno ? errno : EIO;
		return -w->error;
	}
	w->records++;
	w->bytes += len;
	return 0;
}

int capture_flush(struct capture_writer *w)
{
	if (w->f && fflush(w->f) && !w->error)
		w->error = errno;
	return -w->error;
}

int capture_close(struct capture_writer *w)
{
	if (!w->f)
		return -w->error;
	capture_flush(w);
	if (fsync(fileno(w->f)) && errno != EINVAL && !w->error)
		w->error = errno;
	if (fclose(w->f) && !w->error)
		w->error = errno;
	w->f = NULL;
	return -w->error;
}

#define P(t) (sizeof(struct t) - sizeof(struct sbt_hdr))
const uint16_t sbt_min_payload_of[SBT_TYPE_MAX] = {
	[SBT_CALL_ENTER] = P(sbt_call_enter),
	[SBT_CALL_EXIT] = P(sbt_call_exit),
	[SBT_IOCTL] = P(sbt_ioctl),
	[SBT_IRQ] = P(sbt_irq),
	[SBT_IOMMU_MAP] = P(sbt_iommu),
	[SBT_IOMMU_UNMAP] = P(sbt_iommu),
	[SBT_DMA_MAP] = P(sbt_dma),
	[SBT_DMA_UNMAP] = P(sbt_dma),
	[SBT_TASK_NEW] = P(sbt_task),
	[SBT_TASK_COMM] = P(sbt_task),
	[SBT_TASK_EXIT] = P(sbt_task),
	[SBT_META_CLOCK] = P(sbt_meta_clock),
	[SBT_META_HOST] = P(sbt_meta_host),
	[SBT_META_PROC] = P(sbt_meta_proc),
	[SBT_META_PROBE] = P(sbt_meta_probe),
	[SBT_META_IRQ] = P(sbt_meta_irq),
	[SBT_THREAD_NAME] = P(sbt_thread_name),
	[SBT_LOST] = P(sbt_lost),
	[SBT_META_END] = P(sbt_meta_end),
	[SBT_META_DEVICE] = P(sbt_meta_device),
	[SBT_META_NSPID] = P(sbt_meta_nspid),
	[SBT_DRV] = P(sbt_drv),
	[SBT_LIB_OPEN] = P(sbt_lib_open) - SBT_LIB_PATH_LEN,
	[SBT_WAKE] = P(sbt_wake),
};
#undef P

size_t sbt_min_payload(uint16_t type)
{
	return type < SBT_TYPE_MAX ? sbt_min_payload_of[type] : 0;
}

/* Files are read through a window, not mapped: a file cut short while it
 * is read (a capture still being written, a full disk) then ends the read
 * as a cut-short capture instead of killing the reader with SIGBUS. */
#define WINDOW (4u << 20)
#define MAX_RECORD CAPTURE_MAX_RECORD

static int reader_check_header(struct capture_reader *r)
{
	struct sbt_file_header fh;

	if (r->len < sizeof(fh)) {
		snprintf(r->error, sizeof(r->error), "too short for a capture (%zu bytes)", r->len);
		return -1;
	}
	memcpy(&fh, r->data, sizeof(fh));
	if (memcmp(fh.magic, SBT_MAGIC, sizeof(fh.magic))) {
		/* what it is instead, where that is plain: what record wrote for a viewer */
		if (r->data[0] == 0x0a) /* a TracePacket, Perfetto's first field */
			snprintf(r->error, sizeof(r->error),
				 "a Perfetto trace, not a capture; hint: report, convert and dump read the raw "
				 "capture: record with -o run.sbt (inspect checks a .pftrace)");
		else if (r->data[0] == '{' || r->data[0] == '[')
			snprintf(r->error, sizeof(r->error),
				 "a JSON trace, not a capture; hint: report, convert and dump read the raw "
				 "capture: record with -o run.sbt");
		else
			snprintf(r->error, sizeof(r->error), "not a spyre-bpftrace capture (bad magic)");
		return -1;
	}
	if (fh.version == bswap_32(SBT_FORMAT_VERSION)) { /* the other byte order */
		fh.version = bswap_32(fh.version);
		fh.header_size = bswap_32(fh.header_size);
		r->foreign = true;
		if (!(r->rec = malloc(MAX_RECORD))) {
			snprintf(r->error, sizeof(r->error), "out of memory");
			return -1;
		}
	}
	if (fh.version != SBT_FORMAT_VERSION || fh.header_size < sizeof(fh) || fh.header_size > r->len ||
	    fh.header_size % 8) {
		snprintf(r->error, sizeof(r->error),
			 "capture format version %u, header %u bytes; this build reads version %u", fh.version,
			 fh.header_size, SBT_FORMAT_VERSION);
		return -1;
	}
	r->version = fh.version;
	r->off = fh.header_size;
	return 0;
}

int capture_open_mem(struct capture_reader *r, const void *data, size_t len)
{
	memset(r, 0, sizeof(*r));
	if ((uintptr_t)data % 8) {
		snprintf(r->error, sizeof(r->error), "capture data not 8-byte aligned");
		return -1;
	}
	r->data = data;
	r->len = len;
	if (reader_check_header(r)) {
		free(r->rec);
		r->rec = NULL;
		return -1;
	}
	return 0;
}

/* Move what is left to the front and read more. */
static void refill(struct capture_reader *r)
{
	size_t left = r->len - r->off;
	ssize_t n;

	memmove(r->buf, r->buf + r->off, left);
	r->base += r->off;
	r->off = 0;
	r->len = left;
	while (r->len < WINDOW && !r->eof) {
		n = read(r->fd, r->buf + r->len, WINDOW - r->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r->eof = true; /* a read error ends the data as a cut would */
			break;
		}
		r->len += (size_t)n;
	}
	r->data = r->buf;
}

int capture_open(struct capture_reader *r, const char *path)
{
	const char *why = NULL;
	struct stat st;

	memset(r, 0, sizeof(*r));
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0 || fstat(r->fd, &st))
		why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (!(r->buf = malloc(WINDOW))) /* malloc's alignment: records are 8-aligned */
		why = "out of memory";
	if (why) {
		snprintf(r->error, sizeof(r->error), "%s", why);
		if (r->fd >= 0)
			close(r->fd);
		r->fd = -1;
		return -1;
	}
	refill(r);
	if (reader_check_header(r)) { /* not a capture: nothing left open */
		char why_not[sizeof(r->error)];

		memcpy(why_not, r->error, sizeof(why_not));
		capture_close_reader(r);
		memcpy(r->error, why_not, sizeof(why_not));
		return -1;
	}
	return 0;
}

enum capture_status capture_next_checked(struct capture_reader *r, const struct sbt_hdr **rec)
{
	const struct sbt_hdr *h;
	struct sbt_hdr ours; /* the header in this host's order */
	size_t left, need;

	if (r->buf && !r->eof && r->len - r->off < MAX_RECORD)
		refill(r);
	left = r->len - r->off;

	if (left == 0)
		return CAPTURE_END;
	if (left < sizeof(*h))
		return CAPTURE_TRUNCATED;
	h = (const struct sbt_hdr *)(r->data + r->off);
	memcpy(&ours, h, sizeof(ours));
	if (r->foreign)
		sbt_hdr_swap(&ours);
	if (ours.type == 0) {
		snprintf(r->error, sizeof(r->error), "record type 0 at offset %zu", (size_t)(r->base + r->off));
		return CAPTURE_CORRUPT;
	}
	need = sbt_min_payload(ours.type);
	if (need && ours.size < need) {
		snprintf(r->error, sizeof(r->error), "record type %u at offset %zu has %u payload bytes, needs %zu",
			 ours.type, (size_t)(r->base + r->off), ours.size, need);
		return CAPTURE_CORRUPT;
	}
	if (sizeof(*h) + ours.size > left)
		return CAPTURE_TRUNCATED;
	if (r->foreign) { /* a copy in this host's order */
		memcpy(r->rec, h, sizeof(*h) + ours.size);
		sbt_record_swap((struct sbt_hdr *)r->rec, sizeof(*h) + ours.size, true);
		h = (const struct sbt_hdr *)r->rec;
	}
	/* the padding of the very last record may be cut off: still whole */
	r->off += sbt_record_len(h) < left ? sbt_record_len(h) : left;
	r->records++;
	if (!need)
		r->unknown++;
	*rec = h;
	return CAPTURE_OK;
}

void capture_close_reader(struct capture_reader *r)
{
	free(r->rec);
	if (r->buf) {
		close(r->fd);
		free(r->buf);
	}
	memset(r, 0, sizeof(*r));
}

int capture_each_open(struct capture_reader *r, const char *path)
{
	if (capture_open(r, path)) {
		sbt_err("cannot read '%s': %s", path, r->error);
		return -1;
	}
	return 0;
}

int capture_each_end(struct capture_reader *r, const char *path, enum capture_status st, int ret, uint64_t *records)
{
	if (!ret && st == CAPTURE_TRUNCATED)
		sbt_warn("%s ends inside a record (cut short?); used the %llu whole records", path,
			 (unsigned long long)r->records);
	if (!ret && st == CAPTURE_CORRUPT) {
		sbt_err("%s: %s; used the %llu records before it", path, r->error, (unsigned long long)r->records);
		ret = 1;
	}
	if (records)
		*records = r->records;
	capture_close_reader(r);
	return ret;
}
