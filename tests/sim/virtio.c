// SPDX-License-Identifier: GPL-2.0-only
/*
 * The stand-in card on IBM Z, where QEMU has no edu device: a modern
 * virtio-rng PCI device (1af4:1044) with iommu_platform=on, so that its DMA
 * goes through the zPCI IOMMU as a Spyre card's would. It is driven through
 * VFIO from user space like edu: its registers through the BAR region of the
 * device fd (s390 cannot mmap PCI memory), one virtqueue in DMA-mapped memory,
 * completions as MSI-X interrupts on an eventfd. A job is a request for n
 * bytes written by the device into a mapped buffer. Virtio's structures are
 * little-endian, whatever the host.
 */
#include <endian.h>
#include <errno.h>
#include <linux/vfio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "edu.h"
#include "virtio.h"

#define PCI_CAP_PTR 0x34
#define PCI_CAP_VNDR 0x09
#define VIRTIO_CAP_COMMON 1
#define VIRTIO_CAP_NOTIFY 2

/* struct virtio_pci_common_cfg */
#define DEVICE_FEATURE_SELECT 0x00
#define DEVICE_FEATURE 0x04
#define DRIVER_FEATURE_SELECT 0x08
#define DRIVER_FEATURE 0x0c
#define CONFIG_MSIX_VECTOR 0x10
#define DEVICE_STATUS 0x14
#define QUEUE_SELECT 0x16
#define QUEUE_SIZE 0x18
#define QUEUE_MSIX_VECTOR 0x1a
#define QUEUE_ENABLE 0x1c
#define QUEUE_NOTIFY_OFF 0x1e
#define QUEUE_DESC 0x20
#define QUEUE_DRIVER 0x28
#define QUEUE_DEVICE 0x30

#define STATUS_ACK 1
#define STATUS_DRIVER 2
#define STATUS_DRIVER_OK 4
#define STATUS_FEATURES_OK 8
/* feature bits 32 and 33: VERSION_1, ACCESS_PLATFORM (DMA through the IOMMU) */
#define FEATURES_HIGH 0x3u
#define NO_VECTOR 0xffff
#define DESC_F_WRITE 2

/* the ring, in the one mapped page: descriptors, then avail, then used */
#define QSIZE 8
#define AVAIL_OFF 256
#define USED_OFF 512
#define SCRATCH_OFF 2048 /* a compute job's result: no buffer of its own */

struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

static int cfg_read(struct edu *e, uint64_t at, void *v, size_t n)
{
	return pread(e->device, v, n, (off_t)at) == (ssize_t)n ? 0 : -EIO;
}

static int cfg_write(struct edu *e, uint64_t at, const void *v, size_t n)
{
	return pwrite(e->device, v, n, (off_t)at) == (ssize_t)n ? 0 : -EIO;
}

static int w8(struct edu *e, unsigned off, uint8_t v)
{
	return cfg_write(e, e->vq.common + off, &v, 1);
}

static int w16(struct edu *e, unsigned off, uint16_t v)
{
	v = htole16(v);
	return cfg_write(e, e->vq.common + off, &v, 2);
}

static int w32(struct edu *e, unsigned off, uint32_t v)
{
	v = htole32(v);
	return cfg_write(e, e->vq.common + off, &v, 4);
}

static int w64(struct edu *e, unsigned off, uint64_t v)
{
	/* two halves: not every transport takes 64-bit accesses */
	return w32(e, off, (uint32_t)v) || w32(e, off + 4, (uint32_t)(v >> 32)) ? -EIO : 0;
}

static uint32_t r32(struct edu *e, unsigned off)
{
	uint32_t v = 0;

	cfg_read(e, e->vq.common + off, &v, 4);
	return le32toh(v);
}

static uint16_t r16(struct edu *e, unsigned off)
{
	uint16_t v = 0;

	cfg_read(e, e->vq.common + off, &v, 2);
	return le16toh(v);
}

static uint8_t r8(struct edu *e, unsigned off)
{
	uint8_t v = 0;

	cfg_read(e, e->vq.common + off, &v, 1);
	return v;
}

/* Where a BAR's registers are in the device fd. */
static int bar_offset(struct edu *e, unsigned bar, uint64_t *off, vfio_call call)
{
	struct vfio_region_info reg = { .argsz = sizeof(reg), .index = bar };

	if (call(e->device, VFIO_DEVICE_GET_REGION_INFO, "VFIO_DEVICE_GET_REGION_INFO", &reg, NULL))
		return -errno;
	*off = reg.offset;
	return 0;
}

/* The virtio capabilities in config space: common config and notify. */
static int find_caps(struct edu *e, uint64_t config, vfio_call call)
{
	uint8_t at = 0, cap[20];
	bool common = false, notify = false;

	if (cfg_read(e, config + PCI_CAP_PTR, &at, 1))
		return -EIO;
	for (int hops = 0; at && hops < 48; hops++) {
		uint64_t bar = 0;

		if (cfg_read(e, config + at, cap, sizeof(cap)))
			return -EIO;
		if (cap[0] == PCI_CAP_VNDR && (cap[3] == VIRTIO_CAP_COMMON || cap[3] == VIRTIO_CAP_NOTIFY)) {
			uint32_t offset, mult;

			memcpy(&offset, cap + 8, 4);
			if (bar_offset(e, cap[4], &bar, call))
				return -errno;
			if (cap[3] == VIRTIO_CAP_COMMON) {
				e->vq.common = bar + le32toh(offset);
				common = true;
			} else {
				memcpy(&mult, cap + 16, 4);
				e->vq.notify = bar + le32toh(offset);
				e->vq.notify_mult = le32toh(mult);
				notify = true;
			}
		}
		at = cap[1];
	}
	return common && notify ? 0 : -ENODEV;
}

int virtio_card_start(struct edu *e, uint64_t config, void *ring, uint64_t ring_iova, vfio_call call)
{
	uint16_t size, off;
	int ret = find_caps(e, config, call);

	if (ret)
		return ret;
	e->vq.ring = ring;
	e->vq.ring_iova = ring_iova;
	memset(ring, 0, 4096);
	/* reset, then acknowledge, then agree on features */
	if (w8(e, DEVICE_STATUS, 0))
		return -EIO;
	for (int i = 0; i < 1000 && r8(e, DEVICE_STATUS); i++)
		usleep(1000);
	w8(e, DEVICE_STATUS, STATUS_ACK);
	w8(e, DEVICE_STATUS, STATUS_ACK | STATUS_DRIVER);
	w32(e, DEVICE_FEATURE_SELECT, 1);
	if ((r32(e, DEVICE_FEATURE) & FEATURES_HIGH) != FEATURES_HIGH)
		return -ENOTSUP; /* not modern, or its DMA bypasses the IOMMU */
	w32(e, DRIVER_FEATURE_SELECT, 1);
	w32(e, DRIVER_FEATURE, FEATURES_HIGH);
	w32(e, DRIVER_FEATURE_SELECT, 0);
	w32(e, DRIVER_FEATURE, 0);
	w8(e, DEVICE_STATUS, STATUS_ACK | STATUS_DRIVER | STATUS_FEATURES_OK);
	if (!(r8(e, DEVICE_STATUS) & STATUS_FEATURES_OK))
		return -ENOTSUP;
	/* MSI-X vector 0 on an eventfd, for the queue */
	if (edu_irq_eventfd(e, VFIO_PCI_MSIX_IRQ_INDEX, call))
		return -errno;
	w16(e, CONFIG_MSIX_VECTOR, NO_VECTOR);
	w16(e, QUEUE_SELECT, 0);
	size = r16(e, QUEUE_SIZE);
	if (size < QSIZE)
		return -ENOSPC;
	w16(e, QUEUE_SIZE, QSIZE);
	w16(e, QUEUE_MSIX_VECTOR, 0);
	if (r16(e, QUEUE_MSIX_VECTOR) != 0)
		return -EIO; /* the device took no vector */
	w64(e, QUEUE_DESC, ring_iova);
	w64(e, QUEUE_DRIVER, ring_iova + AVAIL_OFF);
	w64(e, QUEUE_DEVICE, ring_iova + USED_OFF);
	off = r16(e, QUEUE_NOTIFY_OFF);
	e->vq.notify += (uint64_t)off * e->vq.notify_mult;
	w16(e, QUEUE_ENABLE, 1);
	w8(e, DEVICE_STATUS, STATUS_ACK | STATUS_DRIVER | STATUS_FEATURES_OK | STATUS_DRIVER_OK);
	return 0;
}

int virtio_card_fill(struct edu *e, uint64_t iova, uint32_t n, uint32_t *written)
{
	struct desc *d = (struct desc *)e->vq.ring;
	volatile uint16_t *avail = (volatile uint16_t *)(e->vq.ring + AVAIL_OFF);
	volatile uint16_t *used_idx = (volatile uint16_t *)(e->vq.ring + USED_OFF + 2);
	volatile uint32_t *used_ring = (volatile uint32_t *)(e->vq.ring + USED_OFF + 4);
	uint16_t slot = e->vq.avail_idx % QSIZE, zero = 0;
	uint64_t fired;

	if (!iova) {
		iova = e->vq.ring_iova + SCRATCH_OFF;
		n = 64;
	}
	d[slot] = (struct desc){ htole64(iova), htole32(n), htole16(DESC_F_WRITE), 0 };
	avail[2 + slot] = htole16(slot); /* avail: flags, idx, ring[] */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	e->vq.avail_idx++;
	avail[1] = htole16(e->vq.avail_idx);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (cfg_write(e, e->vq.notify, &zero, 2)) /* queue 0 */
		return -EIO;
	/* the device raises its interrupt after it wrote the used ring:
	 * one wait per request, more if the eventfd woke early */
	do {
		if (read(e->msi, &fired, sizeof(fired)) != sizeof(fired))
			return -errno;
		e->irqs += fired;
	} while (le16toh(*used_idx) == e->vq.used_idx);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* used ring element: id (4 bytes), len (4 bytes) */
	*written = le32toh(used_ring[(e->vq.used_idx % QSIZE) * 2 + 1]);
	e->vq.used_idx++;
	return *written ? 0 : -EIO;
}
