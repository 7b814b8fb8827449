// SPDX-License-Identifier: GPL-2.0-only
/* Captures of either byte order read the same on any host: a synthetic
 * capture with every kind of record, written in this host's order and in
 * the other (as an s390x host writes it), reads back record for record the
 * same and converts to the same trace. And the ioctl numbers of each
 * architecture: powerpc's _IOC_NONE is 1 << 29. */
#include <byteswap.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "capture/byteorder.h"
#include "capture/capture.h"
#include "capture/names.h"
#include "daemon/counters.h"
#include "model/output.h"
#include "synth.h"

/* Every record type the loader and BPF write, with nonzero fields. */
static void build(struct synth *s)
{
	uint64_t t = 1000000;

	synth_init(s);
	synth_clock(s, t);
	synth_proc(s, t, 100, "app");
	synth_thread_name(s, 100, 101, "worker");
	synth_spyre_probes(s);
	synth_irq_info(s, 42, "vfio-msix[0](0000:3b:00.0)");
	synth_device(s, 100, "0000:3b:00.0");
	for (int i = 0; i < 3; i++)
		t = synth_job(s, t + 1000, 100, 101, 4096u << i, 0x100000u * (i + 1));
	synth_ioctl(s, t, t + 500, 100, 101, 7, SBT_FD_CONTAINER, SBT_VFIO_IOMMU_MAP_DMA, 0, 0x200000, 8192);
	synth_ioctl(s, t + 600, t + 700, 100, 101, 9, SBT_FD_DEVICE, SBT_VFIO_DEVICE_SET_IRQS, -22, 0, 0);
	synth_iommu_map(s, t + 800, 100, 101, 0x200000, 8192);
	synth_irq(s, t + 900, t + 950, 42);
	synth_drv(s, t + 1000, t + 1100, 100, 101, SBT_DRV_TYPE1_IOCTL, SBT_VFIO_IOMMU_MAP_DMA, 0x3b00, 1, 0, 0x200000,
		  8192, 0x7f0000001000);
	synth_task(s, SBT_TASK_NEW, t + 1200, 100, 102, 100, 0, "worker2");
	synth_task(s, SBT_TASK_EXIT, t + 1300, 100, 102, 0, 1, "worker2");
	synth_lost(s, t + 1400, 3, 3);
	synth_end(s, t + 1500);
}

/* The same capture as a host of the other byte order writes it. */
static uint8_t *other_order(const struct synth *s)
{
	uint8_t *b = malloc(s->len);
	struct sbt_file_header *fh = (void *)b;
	size_t off = sizeof(*fh);

	assert_non_null(b);
	memcpy(b, s->buf, s->len);
	fh->version = bswap_32(fh->version);
	fh->header_size = bswap_32(fh->header_size);
	while (off < s->len) {
		struct sbt_hdr *h = (void *)(b + off);
		size_t len = sbt_record_len(h);

		sbt_record_swap(h, sizeof(*h) + h->size, false);
		off += len;
	}
	return b;
}

static void test_records_read_the_same(void **state)
{
	struct capture_reader a, b;
	const struct sbt_hdr *ha, *hb;
	struct synth s;
	uint8_t *other;
	size_t n = 0;

	(void)state;
	build(&s);
	other = other_order(&s);
	assert_memory_not_equal(other + 16, s.buf + 16, 64); /* really swapped */
	assert_int_equal(capture_open_mem(&a, s.buf, s.len), 0);
	assert_int_equal(capture_open_mem(&b, other, s.len), 0);
	assert_false(a.foreign);
	assert_true(b.foreign);
	for (;;) {
		enum capture_status sa = capture_next(&a, &ha), sb = capture_next(&b, &hb);

		assert_int_equal(sa, sb);
		if (sa != CAPTURE_OK)
			break;
		assert_int_equal(ha->size, hb->size);
		assert_memory_equal(ha, hb, sizeof(*ha) + ha->size);
		n++;
	}
	assert_int_equal(n, s.records);
	assert_int_equal(b.unknown, 0);
	capture_close_reader(&a);
	capture_close_reader(&b);
	free(other);
	synth_free(&s);
}

/* Through the correlator to Chrome JSON: the same bytes. */
static void convert(const void *data, size_t len, const char *path)
{
	struct capture_reader r;
	const struct sbt_hdr *h;
	struct output out;
	char err[256];

	assert_int_equal(capture_open_mem(&r, data, len), 0);
	assert_int_equal(output_open(&out, path, FMT_JSON, false, err, sizeof(err)), 0);
	while (capture_next(&r, &h) == CAPTURE_OK)
		output_add(&out, h);
	assert_int_equal(output_close(&out), 0);
	assert_int_equal(output_commit(&out), 0);
	output_free(&out);
	capture_close_reader(&r);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	buf = malloc(*len + 1);
	assert_int_equal(fread(buf, 1, *len, f), *len);
	fclose(f);
	return buf;
}

static void test_same_trace_from_either_order(void **state)
{
	char dir[] = "/tmp/sbt-bo-XXXXXX", pa[64], pb[64];
	struct synth s;
	uint8_t *other;
	size_t la, lb;
	char *ta, *tb;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(pa, sizeof(pa), "%s/a.json", dir);
	snprintf(pb, sizeof(pb), "%s/b.json", dir);
	build(&s);
	other = other_order(&s);
	convert(s.buf, s.len, pa);
	convert(other, s.len, pb);
	ta = slurp(pa, &la);
	tb = slurp(pb, &lb);
	assert_true(la > 1000);
	assert_int_equal(la, lb);
	assert_memory_equal(ta, tb, la);
	assert_non_null(strstr(ta, "VFIO_IOMMU_MAP_DMA"));
	free(ta);
	free(tb);
	unlink(pa);
	unlink(pb);
	rmdir(dir);
	free(other);
	synth_free(&s);
}

/* Swapped twice, every record is what it was. */
static void test_swap_is_its_own_inverse(void **state)
{
	struct synth s;
	uint8_t *twice;

	(void)state;
	build(&s);
	twice = other_order(&s);
	for (size_t off = 16; off < s.len;) {
		struct sbt_hdr *h = (void *)(twice + off);

		sbt_record_swap(h, sizeof(*h) + bswap_16(h->size), true);
		off += sbt_record_len(h);
	}
	((struct sbt_file_header *)twice)->version = bswap_32(((struct sbt_file_header *)twice)->version);
	((struct sbt_file_header *)twice)->header_size = bswap_32(((struct sbt_file_header *)twice)->header_size);
	assert_memory_equal(twice, s.buf, s.len);
	free(twice);
	synth_free(&s);
}

/* Stores v in the other byte order at field f of the record at base: an
 * encoder of its own, field by field, so the reader's layouts are checked
 * against the structs, not against themselves. */
#define FOREIGN(base, type, f, v)                                                                                      \
	do {                                                                                                           \
		uint64_t v64 = (uint64_t)(v);                                                                          \
		size_t w = sizeof(((type *)0)->f);                                                                     \
		for (size_t i = 0; i < w; i++) /* the most significant byte first */                                   \
			(base)[offsetof(type, f) + i] =                                                                \
				(uint8_t)(v64 >> (8 * (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? w - 1 - i : i)));   \
	} while (0)

#define HDR_FOREIGN(b, T, kind, when)                                                                                  \
	do {                                                                                                           \
		FOREIGN(b, struct sbt_hdr, type, kind);                                                                \
		FOREIGN(b, struct sbt_hdr, size, sizeof(T) - sizeof(struct sbt_hdr));                                  \
		FOREIGN(b, struct sbt_hdr, cpu, 3);                                                                    \
		FOREIGN(b, struct sbt_hdr, tgid, 100);                                                                 \
		FOREIGN(b, struct sbt_hdr, tid, 101);                                                                  \
		FOREIGN(b, struct sbt_hdr, ts, when);                                                                  \
	} while (0)

/* Records with every field set, in the other order, as another host wrote
 * them; read back, each field is what it was. */
static void test_fields_of_a_foreign_capture(void **state)
{
	uint8_t *buf = aligned_alloc(8, 4096);
	struct sbt_file_header fh = { 0 };
	size_t off = sizeof(fh);
	struct capture_reader r;
	const struct sbt_hdr *h;
	const struct sbt_ioctl *io;
	const struct sbt_drv *drv;
	const struct sbt_call_exit *ex;
	uint8_t *b;

	(void)state;
	memset(buf, 0, 4096);
	memcpy(fh.magic, SBT_MAGIC, sizeof(fh.magic));
	memcpy(buf, &fh, sizeof(fh));
	FOREIGN(buf, struct sbt_file_header, version, SBT_FORMAT_VERSION);
	FOREIGN(buf, struct sbt_file_header, header_size, sizeof(fh));
	b = buf + off; /* MAP_DMA */
	HDR_FOREIGN(b, struct sbt_ioctl, SBT_IOCTL, 0x1122334455667788ull);
	FOREIGN(b, struct sbt_ioctl, start_ts, 0x1122334455660000ull);
	FOREIGN(b, struct sbt_ioctl, ret, -22);
	FOREIGN(b, struct sbt_ioctl, arg, 0x7ffd12345678ull);
	FOREIGN(b, struct sbt_ioctl, fd, 7);
	FOREIGN(b, struct sbt_ioctl, cmd, 0x20003b71);
	FOREIGN(b, struct sbt_ioctl, fd_kind, SBT_FD_CONTAINER);
	FOREIGN(b, struct sbt_ioctl, decoded, SBT_DEC_DMA_MAP);
	FOREIGN(b, struct sbt_ioctl, u.dma.vaddr, 0x7f0000001000ull);
	FOREIGN(b, struct sbt_ioctl, u.dma.iova, 0x100000000ull);
	FOREIGN(b, struct sbt_ioctl, u.dma.size, 0x200000);
	FOREIGN(b, struct sbt_ioctl, u.dma.flags, 3);
	FOREIGN(b, struct sbt_ioctl, u.dma.argsz, 32);
	off += sbt_record_len(&(struct sbt_hdr){ .size = sizeof(struct sbt_ioctl) - sizeof(struct sbt_hdr) });
	b = buf + off; /* SET_IRQS */
	HDR_FOREIGN(b, struct sbt_ioctl, SBT_IOCTL, 2);
	FOREIGN(b, struct sbt_ioctl, decoded, SBT_DEC_SET_IRQS);
	FOREIGN(b, struct sbt_ioctl, u.irqs.argsz, 24);
	FOREIGN(b, struct sbt_ioctl, u.irqs.flags, 0x24);
	FOREIGN(b, struct sbt_ioctl, u.irqs.index, 2);
	FOREIGN(b, struct sbt_ioctl, u.irqs.start, 1);
	FOREIGN(b, struct sbt_ioctl, u.irqs.count, 4);
	off += sbt_record_len(&(struct sbt_hdr){ .size = sizeof(struct sbt_ioctl) - sizeof(struct sbt_hdr) });
	b = buf + off; /* sPAPR TCE_CREATE (Power) */
	HDR_FOREIGN(b, struct sbt_ioctl, SBT_IOCTL, 5);
	FOREIGN(b, struct sbt_ioctl, cmd, 0x20003b77);
	FOREIGN(b, struct sbt_ioctl, fd_kind, SBT_FD_SPAPR);
	FOREIGN(b, struct sbt_ioctl, decoded, SBT_DEC_SPAPR_CREATE);
	FOREIGN(b, struct sbt_ioctl, u.window.start, 0x800000000000000ull);
	FOREIGN(b, struct sbt_ioctl, u.window.size, 1ull << 40);
	FOREIGN(b, struct sbt_ioctl, u.window.page_shift, 16);
	FOREIGN(b, struct sbt_ioctl, u.window.levels, 2);
	FOREIGN(b, struct sbt_ioctl, u.window.flags, 0);
	FOREIGN(b, struct sbt_ioctl, u.window.argsz, 40);
	off += sbt_record_len(&(struct sbt_hdr){ .size = sizeof(struct sbt_ioctl) - sizeof(struct sbt_hdr) });
	b = buf + off;
	HDR_FOREIGN(b, struct sbt_drv, SBT_DRV, 3);
	FOREIGN(b, struct sbt_drv, start_ts, 2);
	FOREIGN(b, struct sbt_drv, ret, -1);
	FOREIGN(b, struct sbt_drv, args[2], 0xabcdef);
	FOREIGN(b, struct sbt_drv, func, SBT_DRV_TYPE1_IOCTL);
	FOREIGN(b, struct sbt_drv, cmd, 0x3b71);
	FOREIGN(b, struct sbt_drv, bdf, 0x3b00);
	FOREIGN(b, struct sbt_drv, vendor, 0x1014);
	FOREIGN(b, struct sbt_drv, device, 0x06a7);
	FOREIGN(b, struct sbt_drv, level, 1);
	FOREIGN(b, struct sbt_drv, decoded, SBT_DEC_DMA_MAP);
	FOREIGN(b, struct sbt_drv, cards, 1);
	off += sbt_record_len(&(struct sbt_hdr){ .size = sizeof(struct sbt_drv) - sizeof(struct sbt_hdr) });
	b = buf + off;
	HDR_FOREIGN(b, struct sbt_call_exit, SBT_CALL_EXIT, 4);
	FOREIGN(b, struct sbt_call_exit, probe_id, 9);
	FOREIGN(b, struct sbt_call_exit, depth, 2);
	FOREIGN(b, struct sbt_call_exit, entry_ts, 3);
	FOREIGN(b, struct sbt_call_exit, ret, -5);
	FOREIGN(b, struct sbt_call_exit, flags, SBT_CALL_TAIL);
	off += sbt_record_len(&(struct sbt_hdr){ .size = sizeof(struct sbt_call_exit) - sizeof(struct sbt_hdr) });

	assert_int_equal(capture_open_mem(&r, buf, off), 0);
	assert_true(r.foreign);
	assert_int_equal(capture_next(&r, &h), CAPTURE_OK);
	io = (const void *)h;
	assert_int_equal(h->type, SBT_IOCTL);
	assert_int_equal(h->cpu, 3);
	assert_int_equal(h->tgid, 100);
	assert_int_equal(h->tid, 101);
	assert_int_equal(h->ts, 0x1122334455667788ull);
	assert_int_equal(io->start_ts, 0x1122334455660000ull);
	assert_int_equal(io->ret, -22);
	assert_int_equal(io->arg, 0x7ffd12345678ull);
	assert_int_equal(io->fd, 7);
	assert_int_equal(io->cmd, 0x20003b71);
	assert_int_equal(io->fd_kind, SBT_FD_CONTAINER);
	assert_int_equal(io->u.dma.vaddr, 0x7f0000001000ull);
	assert_int_equal(io->u.dma.iova, 0x100000000ull);
	assert_int_equal(io->u.dma.size, 0x200000);
	assert_int_equal(io->u.dma.flags, 3);
	assert_int_equal(io->u.dma.argsz, 32);
	assert_int_equal(capture_next(&r, &h), CAPTURE_OK);
	io = (const void *)h;
	assert_int_equal(io->decoded, SBT_DEC_SET_IRQS);
	assert_int_equal(io->u.irqs.argsz, 24);
	assert_int_equal(io->u.irqs.flags, 0x24);
	assert_int_equal(io->u.irqs.index, 2);
	assert_int_equal(io->u.irqs.start, 1);
	assert_int_equal(io->u.irqs.count, 4);
	assert_int_equal(capture_next(&r, &h), CAPTURE_OK);
	io = (const void *)h;
	assert_int_equal(io->cmd, 0x20003b77);
	assert_int_equal(io->fd_kind, SBT_FD_SPAPR);
	assert_int_equal(io->decoded, SBT_DEC_SPAPR_CREATE);
	assert_int_equal(io->u.window.start, 0x800000000000000ull);
	assert_int_equal(io->u.window.size, 1ull << 40);
	assert_int_equal(io->u.window.page_shift, 16);
	assert_int_equal(io->u.window.levels, 2);
	assert_int_equal(io->u.window.argsz, 40);
	assert_string_equal(sbt_vfio_cmd_name(io->cmd, io->fd_kind), "VFIO_IOMMU_SPAPR_TCE_CREATE");
	assert_int_equal(capture_next(&r, &h), CAPTURE_OK);
	drv = (const void *)h;
	assert_int_equal(drv->ret, -1);
	assert_int_equal(drv->args[2], 0xabcdef);
	assert_int_equal(drv->func, SBT_DRV_TYPE1_IOCTL);
	assert_int_equal(drv->cmd, 0x3b71);
	assert_int_equal(drv->bdf, 0x3b00);
	assert_int_equal(drv->vendor, 0x1014);
	assert_int_equal(drv->device, 0x06a7);
	assert_int_equal(drv->level, 1);
	assert_int_equal(drv->decoded, SBT_DEC_DMA_MAP);
	assert_int_equal(drv->cards, 1);
	assert_int_equal(capture_next(&r, &h), CAPTURE_OK);
	ex = (const void *)h;
	assert_int_equal(ex->probe_id, 9);
	assert_int_equal(ex->depth, 2);
	assert_int_equal(ex->entry_ts, 3);
	assert_int_equal(ex->ret, -5);
	assert_int_equal(ex->flags, SBT_CALL_TAIL);
	assert_int_equal(capture_next(&r, &h), CAPTURE_END);
	capture_close_reader(&r);
	free(buf);
}

static void test_ioctl_numbers_per_arch(void **state)
{
	(void)state;
	/* x86-64, arm64, s390x: _IOC_NONE 0; powerpc: 1 << 29 */
	assert_int_equal(SBT_VFIO_IO_ON(0, 13), 0x3b71);
	assert_int_equal(SBT_VFIO_IO_ON(SBT_IOC_NONE_PPC, 13), 0x20003b71);
	assert_int_equal(SBT_VFIO_IO_ON(SBT_IOC_NONE_PPC, 14), 0x20003b72);
	assert_int_equal(SBT_VFIO_IO_ON(SBT_IOC_NONE_PPC, 10), 0x20003b6e);
	/* this build's own, as linux/vfio.h has it (names.c checks at build) */
#if defined(__powerpc__)
	assert_int_equal(SBT_VFIO_IOMMU_MAP_DMA, 0x20003b71);
#else
	assert_int_equal(SBT_VFIO_IOMMU_MAP_DMA, 0x3b71);
#endif
	/* a capture of either architecture names its commands on any host */
	assert_string_equal(sbt_vfio_cmd_name(0x3b71, SBT_FD_CONTAINER), "VFIO_IOMMU_MAP_DMA");
	assert_string_equal(sbt_vfio_cmd_name(0x20003b71, SBT_FD_CONTAINER), "VFIO_IOMMU_MAP_DMA");
	assert_string_equal(sbt_vfio_cmd_name(0x20003b6e, SBT_FD_DEVICE), "VFIO_DEVICE_SET_IRQS");
	assert_int_equal(sbt_daemon_op(0x20003b71, SBT_FD_CONTAINER), sbt_daemon_op(0x3b71, SBT_FD_CONTAINER));
	/* not VFIO's: another type, a size, another direction */
	assert_null(sbt_vfio_cmd_name(0x3c71, SBT_FD_CONTAINER));
	assert_null(sbt_vfio_cmd_name(0x40083b71, SBT_FD_CONTAINER));
	assert_null(sbt_vfio_cmd_name(0x80003b71, SBT_FD_CONTAINER));
	assert_int_equal(sbt_daemon_op(0x40083b71, SBT_FD_CONTAINER), SBT_DAEMON_OPS - 1);
	/* the daemon's slots: an sPAPR container's 17..21 apart from a device's
	 * 12..17 and type1's 17, and named back the same */
	assert_int_equal(sbt_daemon_op(0x20003b71, SBT_FD_SPAPR), 13);
	assert_int_equal(sbt_daemon_op(0x20003b75, SBT_FD_SPAPR), 24);
	assert_int_equal(sbt_daemon_op(0x20003b79, SBT_FD_SPAPR), 28);
	assert_int_equal(sbt_daemon_op(0x3b75, SBT_FD_CONTAINER), 17);
	assert_int_equal(sbt_daemon_op(0x3b75, SBT_FD_DEVICE), 23);
	assert_string_equal(daemon_op_name(24), "VFIO_IOMMU_SPAPR_REGISTER_MEMORY");
	assert_string_equal(daemon_op_name(28), "VFIO_EEH_PE_OP");
	assert_string_equal(daemon_op_name(23), "VFIO_DEVICE_FEATURE");
	assert_string_equal(daemon_op_name(29), "other");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_records_read_the_same),	cmocka_unit_test(test_same_trace_from_either_order),
		cmocka_unit_test(test_swap_is_its_own_inverse), cmocka_unit_test(test_fields_of_a_foreign_capture),
		cmocka_unit_test(test_ioctl_numbers_per_arch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
