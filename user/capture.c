// SPDX-License-Identifier: GPL-2.0-only
/* Writing and reading the raw capture file; format in capture.h. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture.h"

int capture_create(struct capture_writer *w, const char *path)
{
	struct sbt_file_header fh = { .version = SBT_FORMAT_VERSION,
				      .header_size = sizeof(fh) };

	memset(w, 0, sizeof(*w));
	memcpy(fh.magic, SBT_MAGIC, sizeof(fh.magic));
	w->f = fopen(path, "wb");
	if (!w->f)
		return -errno;
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
	if (fwrite(rec, 1, body, w->f) != body ||
	    (len > body && fwrite(zeros, 1, len - body, w->f) != len - body)) {
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

size_t sbt_min_payload(uint16_t type)
{
#define P(t) (sizeof(struct t) - sizeof(struct sbt_hdr))
	switch (type) {
	case SBT_CALL_ENTER: return P(sbt_call_enter);
	case SBT_CALL_EXIT: return P(sbt_call_exit);
	case SBT_IOCTL: return P(sbt_ioctl);
	case SBT_IRQ: return P(sbt_irq);
	case SBT_IOMMU_MAP:
	case SBT_IOMMU_UNMAP: return P(sbt_iommu);
	case SBT_DMA_MAP:
	case SBT_DMA_UNMAP: return P(sbt_dma);
	case SBT_TASK_NEW:
	case SBT_TASK_COMM:
	case SBT_TASK_EXIT: return P(sbt_task);
	case SBT_META_CLOCK: return P(sbt_meta_clock);
	case SBT_META_HOST: return P(sbt_meta_host);
	case SBT_META_PROC: return P(sbt_meta_proc);
	case SBT_META_PROBE: return P(sbt_meta_probe);
	case SBT_META_IRQ: return P(sbt_meta_irq);
	case SBT_THREAD_NAME: return P(sbt_thread_name);
	case SBT_LOST: return P(sbt_lost);
	case SBT_META_END: return P(sbt_meta_end);
	case SBT_META_DEVICE: return P(sbt_meta_device);
	case SBT_DRV: return P(sbt_drv);
	default: return 0;
	}
#undef P
}

static int reader_check_header(struct capture_reader *r)
{
	struct sbt_file_header fh;

	if (r->len < sizeof(fh)) {
		snprintf(r->error, sizeof(r->error),
			 "too short for a capture (%zu bytes)", r->len);
		return -1;
	}
	memcpy(&fh, r->data, sizeof(fh));
	if (memcmp(fh.magic, SBT_MAGIC, sizeof(fh.magic))) {
		snprintf(r->error, sizeof(r->error), "not a spyre-bpftrace capture (bad magic)");
		return -1;
	}
	if (fh.version != SBT_FORMAT_VERSION || fh.header_size < sizeof(fh) ||
	    fh.header_size > r->len || fh.header_size % 8) {
		snprintf(r->error, sizeof(r->error),
			 "capture format version %u, header %u bytes; this build reads version %u",
			 fh.version, fh.header_size, SBT_FORMAT_VERSION);
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
	return reader_check_header(r);
}

int capture_open(struct capture_reader *r, const char *path)
{
	struct stat st;
	int fd;

	memset(r, 0, sizeof(*r));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(r->error, sizeof(r->error), "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(r->error, sizeof(r->error), "not a regular file");
		close(fd);
		return -1;
	}
	if (st.st_size > 0) {
		/* read front to back: fault it all in at once, not page by page */
		r->map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
		if (r->map == MAP_FAILED) {
			r->map = NULL;
			snprintf(r->error, sizeof(r->error), "mmap: %s", strerror(errno));
			close(fd);
			return -1;
		}
		r->map_len = (size_t)st.st_size;
	}
	close(fd);
	r->data = r->map;
	r->len = r->map_len;
	return reader_check_header(r);
}

enum capture_status capture_next(struct capture_reader *r, const struct sbt_hdr **rec)
{
	const struct sbt_hdr *h;
	size_t left = r->len - r->off, need;

	if (left == 0)
		return CAPTURE_END;
	if (left < sizeof(*h))
		return CAPTURE_TRUNCATED;
	h = (const struct sbt_hdr *)(r->data + r->off);
	if (h->type == 0) {
		snprintf(r->error, sizeof(r->error), "record type 0 at offset %zu", r->off);
		return CAPTURE_CORRUPT;
	}
	need = sbt_min_payload(h->type);
	if (need && h->size < need) {
		snprintf(r->error, sizeof(r->error),
			 "record type %u at offset %zu has %u payload bytes, needs %zu",
			 h->type, r->off, h->size, need);
		return CAPTURE_CORRUPT;
	}
	if (sizeof(*h) + h->size > left)
		return CAPTURE_TRUNCATED;
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
	if (r->map)
		munmap(r->map, r->map_len);
	memset(r, 0, sizeof(*r));
}
