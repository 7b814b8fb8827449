// SPDX-License-Identifier: GPL-2.0-only
/* The record decoder: records to text, names from the capture's metadata. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/procfs.h"
#include "capture/format.h"
#include "capture/meta.h"
#include "capture/names.h"

static char line[4096];

static const char *fmt(const struct sbt_hdr *h, const struct capture_meta *m)
{
	sbt_format_record(h, m, line, sizeof(line));
	return line;
}

#define HDR(t, rec)                                                                                                    \
	{                                                                                                              \
		.type = (t), .size = sizeof(rec) - sizeof(struct sbt_hdr), .cpu = 1, .tgid = 100, .tid = 101,          \
		.ts = 5000000123ull                                                                                    \
	}

static void add_probe(struct capture_meta *m, uint32_t id, const char *name, int role, int bytes_arg)
{
	struct {
		struct sbt_meta_probe p;
		char s[256];
	} r = { 0 };
	int n = snprintf(r.s, sizeof(r.s), "%s%cpat%c/lib/libflex.so", name, 0, 0) + 1;

	r.p.h.type = SBT_META_PROBE;
	r.p.h.size = (uint16_t)(sizeof(r.p) - sizeof(r.p.h) + (size_t)n);
	r.p.id = id;
	r.p.role = (uint16_t)role;
	r.p.bytes_arg = (int16_t)bytes_arg;
	r.p.strings_len = (uint32_t)n;
	assert_int_equal(meta_add(m, &r.p.h), 0);
}

static void calls_use_probe_names(void **state)
{
	struct capture_meta m;
	struct sbt_call_enter e = {
		.h = HDR(SBT_CALL_ENTER, e), .probe_id = 2, .depth = 1, .args = { 0x10, 0x20, 0x30, 4096, 0, 0 }
	};
	struct sbt_call_exit x = {
		.h = HDR(SBT_CALL_EXIT, x), .probe_id = 2, .depth = 1, .entry_ts = 5000000000ull, .ret = -1
	};
	struct sbt_thread_name t = { .h = HDR(SBT_THREAD_NAME, t), .comm = "worker-3" };

	(void)state;
	meta_init(&m);
	add_probe(&m, 2, "flex::RuntimeStream::launchH2D", SBT_ROLE_COPY_IN, 3);
	assert_int_equal(meta_add(&m, &t.h), 0);
	assert_non_null(
		strstr(fmt(&e.h, &m), "call_enter probe=2 name=flex::RuntimeStream::launchH2D role=copy-in depth=1"));
	assert_non_null(strstr(line, " bytes=4096"));
	assert_non_null(strstr(line, "args=0x10,0x20,0x30,0x1000,0x0,0x0"));
	assert_true(strncmp(line, "worker-3", 8) == 0);
	assert_non_null(strstr(line, "100/101"));
	assert_non_null(strstr(line, "[001] 5.000000123: "));
	assert_non_null(strstr(fmt(&x.h, &m), "ret=-1 dur_ns=123"));
	x.flags = SBT_CALL_UNPAIRED;
	assert_non_null(strstr(fmt(&x.h, &m), "unpaired=1"));
	assert_null(strstr(line, "dur_ns"));
	/* a probe id the capture never described */
	e.probe_id = 77;
	assert_non_null(strstr(fmt(&e.h, &m), "name=? role=?"));
	assert_null(strstr(line, "bytes="));
	meta_free(&m);
}

static void ioctls_decode_by_fd_kind(void **state)
{
	struct capture_meta m;
	struct sbt_ioctl r = { .h = HDR(SBT_IOCTL, r),
			       .start_ts = 5000000000ull,
			       .ret = -25,
			       .fd = 7,
			       .cmd = 0x3b71,
			       .fd_kind = SBT_FD_CONTAINER,
			       .decoded = SBT_DEC_DMA_MAP };

	(void)state;
	meta_init(&m);
	r.u.dma.vaddr = 0x7f0000001000;
	r.u.dma.iova = 0x100000;
	r.u.dma.size = 65536;
	r.u.dma.flags = 3;
	fmt(&r.h, &m);
	assert_non_null(strstr(line, "fd=7 kind=container cmd=VFIO_IOMMU_MAP_DMA ret=-25 err=ENOTTY dur_ns=123"));
	assert_non_null(strstr(line, "vaddr=0x7f0000001000 iova=0x100000 size=65536 flags=0x3"));
	/* the same number on a device fd is another command */
	r.fd_kind = SBT_FD_DEVICE;
	r.decoded = SBT_DEC_NONE;
	r.ret = 0;
	fmt(&r.h, &m);
	assert_non_null(strstr(line, "cmd=VFIO_DEVICE_PCI_HOT_RESET ret=0 "));
	assert_null(strstr(line, "err="));
	assert_null(strstr(line, "iova="));
	r.cmd = 0x3b6e; /* SET_IRQS */
	r.decoded = SBT_DEC_SET_IRQS;
	r.u.irqs.index = 1;
	r.u.irqs.start = 2;
	r.u.irqs.count = 3;
	r.u.irqs.flags = 0x24;
	assert_non_null(
		strstr(fmt(&r.h, &m),
		       "cmd=VFIO_DEVICE_SET_IRQS ret=0 dur_ns=123 arg=0x0 irq_index=1 start=2 count=3 flags=0x24"));
	r.cmd = 0x5401; /* TCGETS: not VFIO */
	r.decoded = SBT_DEC_FAULT;
	assert_non_null(strstr(fmt(&r.h, &m), "cmd=0x5401"));
	assert_non_null(strstr(line, "arg_fault=1"));
	/* a container with the sPAPR TCE IOMMU (Power): 17..21 are sPAPR's */
	r.fd_kind = SBT_FD_SPAPR;
	r.cmd = 0x20003b75;
	r.decoded = SBT_DEC_SPAPR_REGISTER;
	r.u.dma.vaddr = 0x7fff00000000;
	r.u.dma.size = 1 << 20;
	assert_non_null(strstr(fmt(&r.h, &m), "kind=spapr-container cmd=VFIO_IOMMU_SPAPR_REGISTER_MEMORY"));
	assert_non_null(strstr(line, "vaddr=0x7fff00000000 size=1048576"));
	r.cmd = 0x20003b70;
	r.decoded = SBT_DEC_SPAPR_INFO;
	r.u.window.start = 0;
	r.u.window.size = 1 << 30;
	assert_non_null(strstr(fmt(&r.h, &m), "cmd=VFIO_IOMMU_SPAPR_TCE_GET_INFO"));
	assert_non_null(strstr(line, "window_start=0x0 window_size=1073741824"));
	r.cmd = 0x3b78;
	r.decoded = SBT_DEC_SPAPR_REMOVE;
	r.u.window.start = 0x800000000000000;
	assert_non_null(strstr(fmt(&r.h, &m), "cmd=VFIO_IOMMU_SPAPR_TCE_REMOVE"));
	assert_non_null(strstr(line, "window_start=0x800000000000000"));
	assert_null(strstr(line, "window_size"));
	meta_free(&m);
}

static void vfio_names(void **state)
{
	(void)state;
	assert_string_equal(sbt_vfio_cmd_name(0x3b64, 0), "VFIO_GET_API_VERSION");
	assert_string_equal(sbt_vfio_cmd_name(0x3b6a, SBT_FD_GROUP), "VFIO_GROUP_GET_DEVICE_FD");
	assert_string_equal(sbt_vfio_cmd_name(0x3b72, SBT_FD_CONTAINER), "VFIO_IOMMU_UNMAP_DMA");
	assert_string_equal(sbt_vfio_cmd_name(0x3b72, SBT_FD_PATH), "VFIO_IOMMU_UNMAP_DMA");
	assert_string_equal(sbt_vfio_cmd_name(0x3b75, SBT_FD_DEVICE), "VFIO_DEVICE_FEATURE");
	assert_null(sbt_vfio_cmd_name(0x3b76, 0));
	/* the same numbers on type1 and sPAPR containers */
	assert_string_equal(sbt_vfio_cmd_name(0x3b75, SBT_FD_CONTAINER), "VFIO_IOMMU_DIRTY_PAGES");
	assert_string_equal(sbt_vfio_cmd_name(0x3b75, SBT_FD_SPAPR), "VFIO_IOMMU_SPAPR_REGISTER_MEMORY");
	assert_string_equal(sbt_vfio_cmd_name(0x3b76, SBT_FD_SPAPR), "VFIO_IOMMU_SPAPR_UNREGISTER_MEMORY");
	assert_string_equal(sbt_vfio_cmd_name(0x3b79, SBT_FD_SPAPR), "VFIO_EEH_PE_OP");
	assert_string_equal(sbt_vfio_cmd_name(0x3b70, SBT_FD_SPAPR), "VFIO_IOMMU_SPAPR_TCE_GET_INFO");
	assert_string_equal(sbt_vfio_cmd_name(0x3b71, SBT_FD_SPAPR), "VFIO_IOMMU_MAP_DMA");
	assert_null(sbt_vfio_cmd_name(0x3b7a, SBT_FD_SPAPR));
	assert_null(sbt_vfio_cmd_name(0x3b76, SBT_FD_CONTAINER));
	assert_null(sbt_vfio_cmd_name(0x3b00, 0));
	assert_null(sbt_vfio_cmd_name(0x13b64, 0));
	assert_string_equal(sbt_errno_name(25), "ENOTTY");
	assert_string_equal(sbt_errno_name(0), "E?");
	assert_string_equal(sbt_role_name(SBT_ROLE_COMPLETE), "complete");
	assert_int_equal(sbt_role_from_name("copy-out"), SBT_ROLE_COPY_OUT);
	assert_int_equal(sbt_role_from_name("nope"), -1);
	assert_string_equal(sbt_type_name(200), "unknown");
}

static void metadata_records(void **state)
{
	struct capture_meta m;
	struct {
		struct sbt_meta_proc p;
		char cmd[16];
	} proc = { .p = { .h = { .type = SBT_META_PROC,
				 .size = sizeof(proc.p) - sizeof(proc.p.h) + 12,
				 .tgid = 9,
				 .tid = 9 },
			  .pid = 9,
			  .cmdline_len = 12,
			  .comm = "app" },
		   .cmd = "./app\0--x\"y" };
	struct sbt_meta_host host = {
		.h = HDR(SBT_META_HOST, host), .hostname = "h1", .release = "6.1", .version = "0.1", .clock_id = 7
	};
	struct sbt_lost l = { .h = HDR(SBT_LOST, l), .count = 3, .total = 9 };
	struct sbt_task t = { .h = HDR(SBT_TASK_NEW, t), .ppid = 100, .flags = 1, .comm = "kid" };

	(void)state;
	meta_init(&m);
	assert_int_equal(meta_add(&m, &proc.p.h), 0);
	assert_non_null(strstr(fmt(&proc.p.h, &m), "process pid=9 comm=\"app\" cmdline=\"./app --x\\\"y\""));
	assert_string_equal(meta_thread_name(&m, 9), "app");
	assert_non_null(strstr(fmt(&host.h, &m), "hostname=\"h1\" release=\"6.1\" version=\"0.1\" clock_id=7"));
	assert_non_null(strstr(fmt(&l.h, &m), "lost count=3 total=9"));
	assert_int_equal(meta_add(&m, &t.h), 0);
	assert_non_null(strstr(fmt(&t.h, &m), "task_new ppid=100 new_process=1 comm=\"kid\""));
	/* a cmdline_len larger than the record is bounded by the record */
	proc.p.cmdline_len = 4000;
	fmt(&proc.p.h, &m);
	assert_non_null(strstr(line, "cmdline=\"./app --x\\\"y\""));
	/* many threads: the table grows and keeps every name */
	for (uint32_t tid = 1000; tid < 3000; tid++) {
		struct sbt_thread_name n = { .h = { .type = SBT_THREAD_NAME, .size = 16, .tid = tid } };

		snprintf(n.comm, sizeof(n.comm), "t%u", tid);
		assert_int_equal(meta_add(&m, &n.h), 0);
	}
	assert_string_equal(meta_thread_name(&m, 2999), "t2999");
	assert_string_equal(meta_thread_name(&m, 1000), "t1000");
	assert_string_equal(meta_thread_name(&m, 9), "app");
	assert_string_equal(meta_thread_name(&m, 4242), "?");
	meta_free(&m);
}

static void output_is_bounded(void **state)
{
	struct capture_meta m;
	struct sbt_irq q = { .h = HDR(SBT_IRQ, q), .start_ts = 5000000000ull, .irq = 33, .ret = 1 };
	char small[20];
	int want;

	(void)state;
	meta_init(&m);
	want = sbt_format_record(&q.h, &m, small, sizeof(small));
	assert_true(want > (int)sizeof(small));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_non_null(strstr(fmt(&q.h, &m), "irq irq=33 ret=1 dur_ns=123"));
	meta_free(&m);
}

static void accelerator_interrupts(void **state)
{
	const char bdfs[2][16] = { "0000:01:00.0", "0000:3a:00.1" };

	(void)state;
	assert_true(irq_is_accelerator("vfio-msi[0](0000:02:00.0)", bdfs, 0));
	assert_true(irq_is_accelerator("vfio-intx(0000:00:03.0)", bdfs, 2));
	assert_true(irq_is_accelerator("aiu0(0000:3a:00.1)", bdfs, 2));
	assert_false(irq_is_accelerator("virtio1-req.0", bdfs, 2));
	assert_false(irq_is_accelerator("aiu0(0000:3a:00.1)", bdfs, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(calls_use_probe_names),
		cmocka_unit_test(ioctls_decode_by_fd_kind),
		cmocka_unit_test(vfio_names),
		cmocka_unit_test(metadata_records),
		cmocka_unit_test(output_is_bounded),
		cmocka_unit_test(accelerator_interrupts),
	};

	return cmocka_run_group_tests_name("format", tests, NULL, NULL);
}
