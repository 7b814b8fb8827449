/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The Spyre simulator: libflex.so and libsenlib.so stand in for the Spyre
 * runtime. They export the real flex and senlib entry points under their
 * real C++-mangled names (declared from C with asm labels), so the tracer's
 * built-in probe table is tested on the names it meets in the field.
 *
 * Besides, libsenlib exports a small C API (sim_*) the workload uses to
 * choose a backend and to read back what the simulator did.
 */
#ifndef SPYRE_SIM_H
#define SPYRE_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Opaque objects; the member functions take them as `this`. */
struct flex_stream;
struct flex_allocator;
struct senlib_cbi;
struct senlib_rbi;
struct senlib_mapper;

/* ---- flex (libflex.so) ---- */
void *flex_allocate(struct flex_allocator *self, unsigned long bytes, int directive)
	__asm__("_ZN4flex13FlexAllocator8allocateEmi");
void flex_deallocate(struct flex_allocator *self, void *p)
	__asm__("_ZN4flex13FlexAllocator10deallocateEPv");
int flex_launch_h2d(struct flex_stream *self, void *dev, const void *host, unsigned long bytes)
	__asm__("_ZN4flex13RuntimeStream9launchH2DEPvPKvm");
int flex_launch_d2h(struct flex_stream *self, void *host, const void *dev, unsigned long bytes)
	__asm__("_ZN4flex13RuntimeStream9launchD2HEPvPKvm");
int flex_launch_compute(struct flex_stream *self, const void *program, unsigned long n)
	__asm__("_ZN4flex13RuntimeStream13launchComputeEPKvm");
int flex_launch_operation(struct flex_stream *self, const void *op)
	__asm__("_ZN4flex13RuntimeStream15launchOperationEPKv");
int flex_synchronize(struct flex_stream *self)
	__asm__("_ZN4flex13RuntimeStream11synchronizeEv");

/* C helpers of the simulator (not part of the real API) */
struct flex_stream *flex_sim_stream_create(void);
void flex_sim_stream_destroy(struct flex_stream *s);
struct flex_allocator *flex_sim_allocator(void);

/* ---- senlib (libsenlib.so) ---- */
int senlib_queue_cbs(struct senlib_cbi *self, const void *cbs, unsigned int n)
	__asm__("_ZN6senlib21ControlBlockInterface21QueueControlBlocksSBFEPKvj");
int senlib_receive(struct senlib_rbi *self, void *resp, unsigned int n)
	__asm__("_ZN6senlib22ResponseBlockInterface19ReceiveResponsesSBFEPvj");
int senlib_map(struct senlib_mapper *self, void *vaddr, unsigned long size, unsigned long iova)
	__asm__("_ZN6senlib13PfIommuMapper3MapEPvmm");
int senlib_unmap(struct senlib_mapper *self, unsigned long iova, unsigned long size)
	__asm__("_ZN6senlib13PfIommuMapper5UnmapEmm");

/* A job handed to the device: one 128-byte control block. */
enum sim_engine { SIM_H2D = 0, SIM_COMPUTE = 1, SIM_D2H = 2 };

struct sim_cb {
	unsigned int engine;
	unsigned int stream;
	unsigned long bytes;
	unsigned long seq;
	unsigned long iova; /* of the DMA-mapped buffer (copies) */
	void *buf, *host; /* that buffer, and the caller's host memory */
	unsigned char pattern; /* the byte a copy out must bring back */
	unsigned char pad[128 - 57];
};

struct sim_config {
	const char *backend; /* "mock", or "vfio": QEMU edu devices bound to vfio-pci */
	const char *mock_dir; /* where the mock's stand-in VFIO files live */
	unsigned int delay_us; /* mock device: time to complete a job */
	bool container_per_card; /* vfio: each card in its own container */
	const char *card; /* vfio: drive only the card at this PCI address */
	bool wait_epoll; /* vfio: wait for a card's interrupt in epoll_wait(), not read() */
};

int sim_init(const struct sim_config *cfg);
void sim_shutdown(void);
/* Per-stream device context: queues, completion eventfd, its IRQ vector. */
struct senlib_cbi *sim_stream_cbi(unsigned int stream);
struct senlib_rbi *sim_stream_rbi(unsigned int stream);
struct senlib_mapper *sim_mapper(void);
/* The first IOVA the runtime's allocations may map at: above what the
 * IOMMU refuses (zPCI's range starts at 4 GiB) and the cards' own queues. */
unsigned long sim_iova_base(void);
int sim_stream_open(unsigned int stream);
/* Count a call by its demangled name (the simulator's own ground truth). */
void sim_count_call(const char *name, unsigned long bytes);
/* JSON summary of everything done: calls, bytes, every ioctl. */
void sim_write_json(FILE *out, const char *extra);
/* ioctls made so far (the log's length) */
unsigned int sim_ioctl_count(void);
/* Jobs whose result was wrong (vfio: data that did not come back). */
unsigned long sim_job_failures(void);

#endif
