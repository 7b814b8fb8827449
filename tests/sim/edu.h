/* SPDX-License-Identifier: GPL-2.0-only */
/* QEMU's edu PCI device through VFIO: the simulator's vfio backend. */
#ifndef SPYRE_SIM_EDU_H
#define SPYRE_SIM_EDU_H

#include <stdbool.h>
#include <stdint.h>

/* The simulator's ioctl wrapper, which logs every call for the JSON summary. */
typedef int (*vfio_call)(int fd, unsigned long cmd, const char *name, void *arg,
			 const void *log_args);

struct edu {
	char bdf[16];
	int group, device, msi;
	int epfd; /* > 0: interrupts are waited for in epoll_wait() on it (edu_wait_epoll) */
	uint8_t *bar0;
	uint64_t bar0_size;
	unsigned long irqs;
	/* registers read back byte-swapped: QEMU gives edu its target's
	 * native order, big-endian on ppc64 even for a little-endian guest */
	bool swap;
	/* the container's IOMMU is sPAPR TCE (Power): memory is registered
	 * before it is mapped, into the DMA window GET_INFO gives */
	bool spapr;
	uint64_t window_start, window_size;
	uint64_t ddw_start, ddw_size; /* a dynamic DMA window it made, if any */
	bool ddw_removed;
	/* type1: where the IOMMU can map (VFIO_IOMMU_GET_INFO's IOVA range;
	 * zPCI's starts at 4 GiB) */
	uint64_t iova_start;
	/* IBM Z's stand-in card, a virtio-rng device (virtio.c): its config
	 * space in the device fd, registers, and the one queue */
	bool stand_in;
	uint64_t config;
	struct {
		uint64_t common, notify;
		uint32_t notify_mult;
		uint8_t *ring;
		uint64_t ring_iova;
		uint16_t avail_idx, used_idx;
	} vq;
};

/* The device's own DMA buffer is 4096 bytes, but QEMU's edu model takes a
 * transfer's end as inside the buffer and aborts the whole VM on a DMA that
 * fills it exactly ("DMA range ... out of bounds"): one byte less it is. */
#define EDU_BUF_SIZE 4095
#define EDU_DMA_LIMIT (1ul << 28) /* edu reaches 28-bit bus addresses */

/* PCI addresses of edu devices (and virtio-rng stand-ins, on Z) bound to
 * vfio-pci; returns how many. */
int edu_find(char (*bdfs)[16], int max);
/* Attach the device's group to the container (the first one also sets the
 * IOMMU: type1v2, or sPAPR TCE v2 where that is what the kernel has), get
 * its fd, enable bus mastering; an edu: map BAR0, enable MSI. A stand-in
 * card is started by virtio_card_start once its ring is mapped. */
int edu_open(struct edu *e, int container, bool set_iommu, const char *bdf, vfio_call call);
/* Vector 0 of an interrupt index (MSI, MSI-X) on a new eventfd, e->msi.
 * 0, or -1 with errno set. */
int edu_irq_eventfd(struct edu *e, unsigned int index, vfio_call call);
/* From now on, wait for interrupts in epoll_wait() on an epoll holding the
 * MSI eventfd (then read it), as a runtime with other fds to watch does. */
int edu_wait_epoll(struct edu *e);
int edu_copy_in(struct edu *e, uint64_t iova, uint64_t count);
int edu_copy_out(struct edu *e, uint64_t iova, uint64_t count);
int edu_factorial(struct edu *e, uint32_t n, uint32_t *result);
/* Remove the dynamic DMA window set_iommu made (sPAPR), if any. */
int edu_remove_window(struct edu *e, int container, vfio_call call);
void edu_close(struct edu *e);

#endif
