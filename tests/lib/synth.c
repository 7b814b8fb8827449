// SPDX-License-Identifier: GPL-2.0-only
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "synth.h"

void synth_init(struct synth *s)
{
	struct sbt_file_header fh = { .version = SBT_FORMAT_VERSION, .header_size = sizeof(fh) };

	memset(s, 0, sizeof(*s));
	s->cap = 1 << 16;
	s->buf = calloc(1, s->cap);
	if (!s->buf)
		abort();
	memcpy(fh.magic, SBT_MAGIC, sizeof(fh.magic));
	memcpy(s->buf, &fh, sizeof(fh));
	s->len = sizeof(fh);
}

void synth_free(struct synth *s)
{
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

void synth_rec(struct synth *s, const struct sbt_hdr *h)
{
	size_t n = sbt_record_len(h);

	while (s->len + n > s->cap) {
		s->cap *= 2;
		s->buf = realloc(s->buf, s->cap);
		if (!s->buf)
			abort();
	}
	memset(s->buf + s->len, 0, n);
	memcpy(s->buf + s->len, h, sizeof(*h) + h->size);
	s->len += n;
	s->records++;
}

int synth_save(const struct synth *s, const char *path)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(s->buf, 1, s->len, f) == s->len;

	if (f && fclose(f))
		ok = 0;
	return ok ? 0 : -1;
}

#define HDR(t, rec, TS, PID, TID) \
	(struct sbt_hdr){ .type = (t), .size = sizeof(rec) - sizeof(struct sbt_hdr), \
			  .ts = (TS), .tgid = (PID), .tid = (TID) }

void synth_clock(struct synth *s, uint64_t boottime)
{
	struct sbt_meta_clock c = { .boottime = boottime, .monotonic = boottime - 1000,
				    .realtime = 1700000000000000000ull + boottime };

	c.h = HDR(SBT_META_CLOCK, c, boottime, 0, 0);
	synth_rec(s, &c.h);
}

void synth_proc(struct synth *s, uint64_t ts, uint32_t pid, const char *comm)
{
	struct {
		struct sbt_meta_proc p;
		char cmd[32];
	} r = { 0 };
	int n = snprintf(r.cmd, sizeof(r.cmd), "./%s", comm) + 1;

	r.p.pid = pid;
	r.p.cmdline_len = (uint32_t)n;
	snprintf(r.p.comm, sizeof(r.p.comm), "%s", comm);
	r.p.h = HDR(SBT_META_PROC, r.p, ts, pid, pid);
	r.p.h.size = (uint16_t)(r.p.h.size + n);
	synth_rec(s, &r.p.h);
}

void synth_probe(struct synth *s, uint32_t id, const char *name, int role, int bytes_arg)
{
	struct {
		struct sbt_meta_probe p;
		char str[256];
	} r = { 0 };
	int n = snprintf(r.str, sizeof(r.str), "%s%c%s%c/opt/ibm/spyre/runtime/lib/libflex.so", name,
			 0, name, 0) + 1;

	r.p.id = id;
	r.p.role = (uint16_t)role;
	r.p.bytes_arg = (int16_t)bytes_arg;
	r.p.offset = 0x1000 + id * 0x40;
	r.p.strings_len = (uint32_t)n;
	r.p.h = HDR(SBT_META_PROBE, r.p, 0, 0, 0);
	r.p.h.size = (uint16_t)(r.p.h.size + n);
	synth_rec(s, &r.p.h);
}

void synth_thread_name(struct synth *s, uint32_t pid, uint32_t tid, const char *comm)
{
	struct sbt_thread_name t = { 0 };

	t.h = HDR(SBT_THREAD_NAME, t, 0, pid, tid);
	snprintf(t.comm, sizeof(t.comm), "%s", comm);
	synth_rec(s, &t.h);
}

void synth_enter(struct synth *s, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t probe,
		 uint32_t depth, uint64_t a1, uint64_t a2, uint64_t a3)
{
	struct sbt_call_enter e = { .probe_id = probe, .depth = depth,
				    .args = { 0x5000, a1, a2, a3, 0, 0 } };

	e.h = HDR(SBT_CALL_ENTER, e, ts, pid, tid);
	synth_rec(s, &e.h);
}

void synth_enter_on(struct synth *s, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t probe,
		    uint32_t depth, uint64_t self, uint64_t a1, uint64_t a2, uint64_t a3)
{
	struct sbt_call_enter e = { .probe_id = probe, .depth = depth,
				    .args = { self, a1, a2, a3, 0, 0 } };

	e.h = HDR(SBT_CALL_ENTER, e, ts, pid, tid);
	synth_rec(s, &e.h);
}

void synth_wake(struct synth *s, uint64_t ts, uint32_t pid, uint32_t tid, int irq, uint64_t irq_start,
		uint32_t hop, uint32_t waker)
{
	struct sbt_wake w = { .irq_start_ts = irq_start, .irq = irq, .waker_tid = waker, .hop = hop };

	w.h = HDR(SBT_WAKE, w, ts, pid, tid);
	synth_rec(s, &w.h);
}

void synth_exit(struct synth *s, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t probe,
		uint32_t depth, uint64_t entry_ts, int64_t ret)
{
	struct sbt_call_exit x = { .probe_id = probe, .depth = depth, .entry_ts = entry_ts,
				   .ret = ret, .flags = entry_ts ? 0 : SBT_CALL_UNPAIRED };

	x.h = HDR(SBT_CALL_EXIT, x, ts, pid, tid);
	synth_rec(s, &x.h);
}

void synth_ioctl(struct synth *s, uint64_t start, uint64_t end, uint32_t pid, uint32_t tid,
		 int fd, uint16_t kind, uint32_t cmd, int64_t ret, uint64_t iova, uint64_t size)
{
	struct sbt_ioctl r = { .start_ts = start, .ret = ret, .fd = fd, .cmd = cmd,
			       .fd_kind = kind, .arg = 0x7ffc0000 };

	r.h = HDR(SBT_IOCTL, r, end, pid, tid);
	/* as bpf/ioctl.bpf.c: on a device fd these numbers mean other commands */
	if ((cmd == SBT_VFIO_IOMMU_MAP_DMA || cmd == SBT_VFIO_IOMMU_UNMAP_DMA) &&
	    kind != SBT_FD_DEVICE && kind != SBT_FD_GROUP) {
		r.decoded = cmd == SBT_VFIO_IOMMU_MAP_DMA ? SBT_DEC_DMA_MAP : SBT_DEC_DMA_UNMAP;
		r.u.dma.vaddr = cmd == SBT_VFIO_IOMMU_MAP_DMA ? 0x7f0000000000 + iova : 0;
		r.u.dma.iova = iova;
		r.u.dma.size = size;
		r.u.dma.flags = cmd == SBT_VFIO_IOMMU_MAP_DMA ? 3 : 0;
	}
	synth_rec(s, &r.h);
}

void synth_iommu_map(struct synth *s, uint64_t ts, uint32_t pid, uint32_t tid, uint64_t iova,
		     uint64_t size)
{
	struct sbt_iommu r = { .iova = iova, .paddr = 0x100000000 + iova, .size = size };

	r.h = HDR(SBT_IOMMU_MAP, r, ts, pid, tid);
	synth_rec(s, &r.h);
}

void synth_irq_info(struct synth *s, uint32_t irq, const char *name)
{
	struct sbt_meta_irq m = { .irq = irq };

	m.h = HDR(SBT_META_IRQ, m, 0, 0, 0);
	snprintf(m.name, sizeof(m.name), "%s", name);
	synth_rec(s, &m.h);
}

void synth_irq(struct synth *s, uint64_t start, uint64_t end, int irq)
{
	struct sbt_irq r = { .start_ts = start, .irq = irq, .ret = 1 };

	r.h = HDR(SBT_IRQ, r, end, 0, 0);
	synth_rec(s, &r.h);
}

void synth_drv(struct synth *s, uint64_t start, uint64_t end, uint32_t pid, uint32_t tid,
	       uint32_t func, uint32_t cmd, uint32_t bdf, uint16_t level, int64_t ret,
	       uint64_t a0, uint64_t a1, uint64_t a2)
{
	struct sbt_drv r = { .start_ts = start, .ret = ret, .args = { a0, a1, a2 }, .func = func,
			     .cmd = cmd, .bdf = bdf, .level = level };

	r.h = HDR(SBT_DRV, r, end, pid, tid);
	if (bdf != SBT_BDF_NONE) {
		r.cards = 1;
		r.vendor = func == SBT_DRV_MSI ? 0 : 0x1014;
		r.device = func == SBT_DRV_MSI ? 0 : 0x06a7;
	}
	if (func == SBT_DRV_TYPE1_IOCTL && cmd == SBT_VFIO_IOMMU_MAP_DMA)
		r.decoded = SBT_DEC_DMA_MAP;
	if (func == SBT_DRV_TYPE1_IOCTL && cmd == SBT_VFIO_IOMMU_UNMAP_DMA)
		r.decoded = SBT_DEC_DMA_UNMAP;
	synth_rec(s, &r.h);
}

void synth_device(struct synth *s, uint32_t pid, const char *bdf)
{
	struct sbt_meta_device d = { .pid = pid, .vendor = 0x1014, .device = 0x06a7 };

	d.h = HDR(SBT_META_DEVICE, d, 0, pid, pid);
	snprintf(d.bdf, sizeof(d.bdf), "%s", bdf);
	synth_rec(s, &d.h);
}

void synth_task(struct synth *s, uint16_t type, uint64_t ts, uint32_t pid, uint32_t tid,
		uint32_t ppid, uint32_t flags, const char *comm)
{
	struct sbt_task t = { .ppid = ppid, .flags = flags };

	t.h = HDR(type, t, ts, pid, tid);
	snprintf(t.comm, sizeof(t.comm), "%s", comm);
	synth_rec(s, &t.h);
}

void synth_lost(struct synth *s, uint64_t ts, uint64_t count, uint64_t total)
{
	struct sbt_lost l = { .count = count, .total = total };

	l.h = HDR(SBT_LOST, l, ts, 0, 0);
	synth_rec(s, &l.h);
}

void synth_end(struct synth *s, uint64_t ts)
{
	struct sbt_meta_end e = { .records = s->records };

	e.h = HDR(SBT_META_END, e, ts, 0, 0);
	synth_rec(s, &e.h);
}


void synth_spyre_probes(struct synth *s)
{
	synth_probe(s, P_ALLOC, "flex::FlexAllocator::allocate", SBT_ROLE_ALLOC, 1);
	synth_probe(s, P_MAP, "senlib::PfIommuMapper::Map", SBT_ROLE_MAP, 2);
	synth_probe(s, P_H2D, "flex::RuntimeStream::launchH2D", SBT_ROLE_COPY_IN, 3);
	synth_probe(s, P_SUBMIT, "senlib::ControlBlockInterface::QueueControlBlocksSBF",
		    SBT_ROLE_SUBMIT, -1);
	synth_probe(s, P_COMPUTE, "flex::RuntimeStream::launchCompute", SBT_ROLE_COMPUTE, -1);
	synth_probe(s, P_OP, "flex::RuntimeStream::launchOperation", SBT_ROLE_LAUNCH, -1);
	synth_probe(s, P_D2H, "flex::RuntimeStream::launchD2H", SBT_ROLE_COPY_OUT, 3);
	synth_probe(s, P_SYNC, "flex::RuntimeStream::synchronize", SBT_ROLE_WAIT, -1);
	synth_probe(s, P_RECV, "senlib::ResponseBlockInterface::ReceiveResponsesSBF",
		    SBT_ROLE_COMPLETE, -1);
	synth_probe(s, P_FREE, "flex::FlexAllocator::deallocate", SBT_ROLE_FREE, -1);
	synth_probe(s, P_UNMAP, "senlib::PfIommuMapper::Unmap", SBT_ROLE_UNMAP, 2);
}

/* one call with a submit nested in it */
static uint64_t launch(struct synth *s, uint64_t t, uint32_t pid, uint32_t tid, uint32_t probe,
		       uint64_t bytes)
{
	uint64_t t0 = t;

	synth_enter(s, t, pid, tid, probe, 0, 0x10000, 0x20000, bytes);
	synth_enter(s, t += 500, pid, tid, P_SUBMIT, 1, 0x30000, 1, 0);
	synth_exit(s, t += 1500, pid, tid, P_SUBMIT, 1, t0 + 500, 1);
	synth_exit(s, t += 300, pid, tid, probe, 0, t0, 0);
	return t + 200;
}

uint64_t synth_job(struct synth *s, uint64_t t, uint32_t pid, uint32_t tid, uint64_t bytes,
		   uint64_t iova)
{
	uint64_t a = t, m, c;
	uint64_t ptr = 0x7f1000000000 + iova;

	synth_enter(s, a, pid, tid, P_ALLOC, 0, bytes, 0, 0);
	synth_enter(s, m = a + 800, pid, tid, P_MAP, 1, ptr, bytes, iova);
	synth_iommu_map(s, m + 1500, pid, tid, iova, bytes);
	synth_ioctl(s, m + 1000, m + 2600, pid, tid, 4, SBT_FD_CONTAINER, SBT_VFIO_IOMMU_MAP_DMA, 0,
		    iova, bytes);
	synth_exit(s, m + 3000, pid, tid, P_MAP, 1, m, 0);
	synth_exit(s, t = m + 3400, pid, tid, P_ALLOC, 0, a, (int64_t)ptr);
	t = launch(s, t + 100, pid, tid, P_H2D, bytes);
	/* launchCompute calls launchOperation, which submits */
	c = t;
	synth_enter(s, c, pid, tid, P_COMPUTE, 0, 0x40000, 1, 0);
	synth_enter(s, c + 400, pid, tid, P_OP, 1, 0x40000, 0, 0);
	synth_enter(s, c + 800, pid, tid, P_SUBMIT, 2, 0x30000, 1, 0);
	synth_exit(s, c + 2000, pid, tid, P_SUBMIT, 2, c + 800, 1);
	synth_exit(s, c + 2300, pid, tid, P_OP, 1, c + 400, 0);
	synth_exit(s, c + 2600, pid, tid, P_COMPUTE, 0, c, 0);
	t = launch(s, c + 2800, pid, tid, P_D2H, bytes);
	synth_enter(s, c = t, pid, tid, P_SYNC, 0, 0, 0, 0);
	synth_enter(s, c + 300, pid, tid, P_RECV, 1, 0x50000, 3, 0);
	synth_exit(s, c + 40000, pid, tid, P_RECV, 1, c + 300, 3);
	synth_exit(s, t = c + 40400, pid, tid, P_SYNC, 0, c, 0);
	synth_enter(s, a = t + 200, pid, tid, P_FREE, 0, ptr, 0, 0);
	synth_enter(s, m = a + 600, pid, tid, P_UNMAP, 1, iova, bytes, 0);
	synth_ioctl(s, m + 400, m + 1800, pid, tid, 4, SBT_FD_CONTAINER, SBT_VFIO_IOMMU_UNMAP_DMA, 0,
		    iova, bytes);
	synth_exit(s, m + 2200, pid, tid, P_UNMAP, 1, m, 0);
	synth_exit(s, t = m + 2500, pid, tid, P_FREE, 0, a, 0);
	return t + 1000;
}
