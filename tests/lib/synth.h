/* SPDX-License-Identifier: GPL-2.0-only */
/* Synthetic captures: record streams made by a test, in the real file
 * format, for the golden tests, the fuzzer's seeds and the benchmark. */
#ifndef SBT_SYNTH_H
#define SBT_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"

struct synth {
	uint8_t *buf; /* the whole file, header first */
	size_t len, cap;
	uint64_t records;
};

void synth_init(struct synth *s);
void synth_free(struct synth *s);
void synth_rec(struct synth *s, const struct sbt_hdr *h);
int synth_save(const struct synth *s, const char *path);

void synth_clock(struct synth *s, uint64_t boottime);
void synth_proc(struct synth *s, uint64_t ts, uint32_t pid, const char *comm);
void synth_probe(struct synth *s, uint32_t id, const char *name, int role, int bytes_arg);
void synth_thread_name(struct synth *s, uint32_t pid, uint32_t tid, const char *comm);
void synth_enter(struct synth *s, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t probe,
		 uint32_t depth, uint64_t a1, uint64_t a2, uint64_t a3);
/* The same on a given object (the runtime's this: a stream) */
void synth_enter_on(struct synth *s, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t probe,
		    uint32_t depth, uint64_t self, uint64_t a1, uint64_t a2, uint64_t a3);
/* A card's interrupt (irq, its handler entered at irq_start) woke tid */
void synth_wake(struct synth *s, uint64_t ts, uint32_t pid, uint32_t tid, int irq, uint64_t irq_start,
		uint32_t hop, uint32_t waker);
void synth_exit(struct synth *s, uint64_t ts, uint32_t pid, uint32_t tid, uint32_t probe,
		uint32_t depth, uint64_t entry_ts, int64_t ret);
void synth_ioctl(struct synth *s, uint64_t start, uint64_t end, uint32_t pid, uint32_t tid,
		 int fd, uint16_t kind, uint32_t cmd, int64_t ret, uint64_t iova, uint64_t size);
void synth_iommu_map(struct synth *s, uint64_t ts, uint32_t pid, uint32_t tid, uint64_t iova,
		     uint64_t size);
void synth_irq_info(struct synth *s, uint32_t irq, const char *name);
void synth_irq(struct synth *s, uint64_t start, uint64_t end, int irq);
void synth_device(struct synth *s, uint32_t pid, const char *bdf);
/* A driver-level record (vfio function), as bpf/driver.bpf.c writes it;
 * bdf SBT_BDF_NONE for none, a0..a2 its args[] */
void synth_drv(struct synth *s, uint64_t start, uint64_t end, uint32_t pid, uint32_t tid,
	       uint32_t func, uint32_t cmd, uint32_t bdf, uint16_t level, int64_t ret,
	       uint64_t a0, uint64_t a1, uint64_t a2);
void synth_task(struct synth *s, uint16_t type, uint64_t ts, uint32_t pid, uint32_t tid,
		uint32_t ppid, uint32_t flags, const char *comm);
void synth_lost(struct synth *s, uint64_t ts, uint64_t count, uint64_t total);
void synth_end(struct synth *s, uint64_t ts);

/* The probe ids synth_spyre_probes gives the runtime's functions */
enum { P_ALLOC, P_MAP, P_H2D, P_SUBMIT, P_COMPUTE, P_OP, P_D2H, P_SYNC, P_RECV, P_FREE, P_UNMAP };

void synth_spyre_probes(struct synth *s);
/* A realistic job stream: per job, on thread tid of process pid, allocate
 * (map, MAP_DMA), H2D, compute, D2H launches (each submitting), synchronize
 * (receiving), free (unmap, UNMAP_DMA). Needs synth_spyre_probes first.
 * Returns the time after the job. */
uint64_t synth_job(struct synth *s, uint64_t t, uint32_t pid, uint32_t tid, uint64_t bytes,
		   uint64_t iova);

#endif
