// SPDX-License-Identifier: GPL-2.0-only
/*
 * The simulator's vfio backend: QEMU's edu PCI device (1234:11e8) driven
 * through VFIO from user space, as the Spyre runtime drives a card. BAR0 is
 * mmapped for the registers (../shared/reference/edu-device.md); completions
 * arrive as MSI interrupts on an eventfd. A copy in is an edu DMA from RAM
 * to the device's buffer, a copy out one back, a compute a factorial; each
 * raises an interrupt when done.
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "edu.h"
#include "virtio.h"

#define EDU_FACT 0x08
#define EDU_STATUS 0x20
#define EDU_IRQ_STATUS 0x24
#define EDU_IRQ_ACK 0x64
#define EDU_DMA_SRC 0x80
#define EDU_DMA_DST 0x88
#define EDU_DMA_COUNT 0x90
#define EDU_DMA_CMD 0x98
#define EDU_DMA_START 0x01
#define EDU_DMA_TO_RAM 0x02
#define EDU_DMA_IRQ 0x04
#define EDU_STATUS_IRQ 0x80
#define EDU_DEV_BUF 0x40000

static void wr32(struct edu *e, unsigned int off, uint32_t v)
{
	*(volatile uint32_t *)(e->bar0 + off) = e->swap ? __builtin_bswap32(v) : v;
}

static uint32_t rd32(struct edu *e, unsigned int off)
{
	uint32_t v = *(volatile uint32_t *)(e->bar0 + off);

	return e->swap ? __builtin_bswap32(v) : v;
}

static void wr64(struct edu *e, unsigned int off, uint64_t v)
{
	*(volatile uint64_t *)(e->bar0 + off) = e->swap ? __builtin_bswap64(v) : v;
}

/* Where a type1 IOMMU maps: the first range of GET_INFO's IOVA range
 * capability (zPCI's starts at 4 GiB: a MAP_DMA below fails). */
static int iova_range(struct edu *e, int container, vfio_call call)
{
	uint64_t buf[512] = { 0 };
	struct vfio_iommu_type1_info *info = (void *)buf;
	uint32_t at;

	info->argsz = sizeof(buf);
	if (call(container, VFIO_IOMMU_GET_INFO, "VFIO_IOMMU_GET_INFO", info, NULL))
		return -errno;
	if (!(info->flags & VFIO_IOMMU_INFO_CAPS))
		return 0;
	for (at = info->cap_offset; at && at + 16 <= sizeof(buf);) {
		struct vfio_info_cap_header *h = (void *)((char *)buf + at);

		if (h->id == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE) {
			struct vfio_iommu_type1_info_cap_iova_range *r = (void *)h;

			if (r->nr_iovas && at + sizeof(*r) + sizeof(r->iova_ranges[0]) <= sizeof(buf))
				e->iova_start = r->iova_ranges[0].start;
			break;
		}
		at = h->next;
	}
	return 0;
}

/* The container's IOMMU: type1v2 where the kernel has it (x86, Z), else
 * sPAPR TCE v2 (Power) with its default 32-bit DMA window. */
static int set_iommu_of(struct edu *e, int container, vfio_call call)
{
	struct vfio_iommu_spapr_tce_info info = { .argsz = sizeof(info) };

	if (call(container, VFIO_CHECK_EXTENSION, "VFIO_CHECK_EXTENSION", (void *)(uintptr_t)VFIO_TYPE1v2_IOMMU, NULL) >
	    0) {
		if (call(container, VFIO_SET_IOMMU, "VFIO_SET_IOMMU", (void *)(uintptr_t)VFIO_TYPE1v2_IOMMU, NULL))
			return -errno;
		return iova_range(e, container, call);
	}
	if (call(container, VFIO_CHECK_EXTENSION, "VFIO_CHECK_EXTENSION", (void *)(uintptr_t)VFIO_SPAPR_TCE_v2_IOMMU,
		 NULL) <= 0)
		return -ENOTSUP;
	if (call(container, VFIO_SET_IOMMU, "VFIO_SET_IOMMU", (void *)(uintptr_t)VFIO_SPAPR_TCE_v2_IOMMU, NULL) ||
	    call(container, VFIO_IOMMU_SPAPR_TCE_GET_INFO, "VFIO_IOMMU_SPAPR_TCE_GET_INFO", &info, NULL))
		return -errno;
	e->spapr = true;
	e->window_start = info.dma32_window_start;
	e->window_size = info.dma32_window_size;
	/* a second, 64-bit window where the platform has dynamic ones, as a
	 * runtime with large models would make (edu cannot reach it: nothing
	 * is mapped there; it is removed at the end) */
	if ((info.flags & VFIO_IOMMU_SPAPR_INFO_DDW) && info.ddw.max_dynamic_windows_supported &&
	    (info.ddw.pgsizes & (1ull << 16))) {
		struct vfio_iommu_spapr_tce_create c = {
			.argsz = sizeof(c),
			.page_shift = 16,
			.window_size = 1ull << 32,
			.levels = 1,
		};

		if (!call(container, VFIO_IOMMU_SPAPR_TCE_CREATE, "VFIO_IOMMU_SPAPR_TCE_CREATE", &c, NULL)) {
			e->ddw_start = c.start_addr;
			e->ddw_size = c.window_size;
		}
	}
	return 0;
}

int edu_remove_window(struct edu *e, int container, vfio_call call)
{
	struct vfio_iommu_spapr_tce_remove r = { .argsz = sizeof(r), .start_addr = e->ddw_start };

	if (!e->ddw_size || e->ddw_removed)
		return 0;
	e->ddw_removed = true;
	return call(container, VFIO_IOMMU_SPAPR_TCE_REMOVE, "VFIO_IOMMU_SPAPR_TCE_REMOVE", &r, NULL) ? -errno : 0;
}

static int group_of(const char *bdf)
{
	char link[4096], path[256];
	ssize_t n;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/iommu_group", bdf);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return -1;
	link[n] = '\0';
	return atoi(strrchr(link, '/') + 1);
}

static unsigned int sysfs_hex(const char *bdf, const char *file)
{
	char path[256], buf[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", bdf, file);
	f = fopen(path, "re");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	return (unsigned int)strtoul(buf, NULL, 16);
}

int edu_irq_eventfd(struct edu *e, unsigned int index, vfio_call call)
{
	struct {
		struct vfio_irq_set set;
		int32_t fd;
	} irq;

	e->msi = eventfd(0, EFD_CLOEXEC);
	if (e->msi < 0)
		return -1;
	irq.set = (struct vfio_irq_set){ .argsz = sizeof(irq),
					 .flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER,
					 .index = index,
					 .start = 0,
					 .count = 1 };
	irq.fd = e->msi;
	return call(e->device, VFIO_DEVICE_SET_IRQS, "VFIO_DEVICE_SET_IRQS", &irq, NULL) ? -1 : 0;
}

int edu_find(char (*bdfs)[16], int max)
{
	DIR *d = opendir("/sys/bus/pci/devices");
	struct dirent *ent;
	int n = 0;

	if (!d)
		return 0;
	while ((ent = readdir(d)) && n < max) {
		char path[512], link[512];
		ssize_t len;

		unsigned int vendor = sysfs_hex(ent->d_name, "vendor");
		unsigned int device = sysfs_hex(ent->d_name, "device");

		if (ent->d_name[0] == '.' || !((vendor == 0x1234 && device == 0x11e8) ||
					       (vendor == VIRTIO_RNG_VENDOR && device == VIRTIO_RNG_DEVICE)))
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", ent->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (strcmp(strrchr(link, '/') + 1, "vfio-pci"))
			continue;
		snprintf(bdfs[n++], sizeof(bdfs[0]), "%.15s", ent->d_name);
	}
	closedir(d);
	/* readdir order is not sorted: the tests want the first card first */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(bdfs[j - 1], bdfs[j]) > 0; j--) {
			char t[16];

			memcpy(t, bdfs[j], 16);
			memcpy(bdfs[j], bdfs[j - 1], 16);
			memcpy(bdfs[j - 1], t, 16);
		}
	return n;
}

/* DMA needs bus mastering, which user space turns on in config space
 * (little-endian, whatever the host); where config space is is kept. */
static int enable_dma(struct edu *e, vfio_call call)
{
	struct vfio_region_info reg = { .argsz = sizeof(reg), .index = VFIO_PCI_CONFIG_REGION_INDEX };
	uint16_t cmd;

	if (call(e->device, VFIO_DEVICE_GET_REGION_INFO, "VFIO_DEVICE_GET_REGION_INFO", &reg, NULL) ||
	    pread(e->device, &cmd, 2, (off_t)reg.offset + 4) != 2)
		return -EIO;
	e->config = reg.offset;
	cmd = htole16(le16toh(cmd) | 0x6); /* memory space, bus master */
	return pwrite(e->device, &cmd, 2, (off_t)reg.offset + 4) == 2 ? 0 : -EIO;
}

int edu_open(struct edu *e, int container, bool set_iommu, const char *bdf, vfio_call call)
{
	struct vfio_group_status status = { .argsz = sizeof(status) };
	struct vfio_region_info reg = { .argsz = sizeof(reg) };
	char path[64];
	int g = group_of(bdf), ret;

	memset(e, 0, sizeof(*e));
	snprintf(e->bdf, sizeof(e->bdf), "%s", bdf);
	if (g < 0)
		return -ENODEV;
	snprintf(path, sizeof(path), "/dev/vfio/%d", g);
	e->group = open(path, O_RDWR | O_CLOEXEC);
	if (e->group < 0)
		return -errno;
	if (call(e->group, VFIO_GROUP_GET_STATUS, "VFIO_GROUP_GET_STATUS", &status, NULL) ||
	    !(status.flags & VFIO_GROUP_FLAGS_VIABLE))
		return -EBUSY;
	if (call(e->group, VFIO_GROUP_SET_CONTAINER, "VFIO_GROUP_SET_CONTAINER", &container, NULL))
		return -errno;
	if (set_iommu && (ret = set_iommu_of(e, container, call)))
		return ret;
	e->device = call(e->group, VFIO_GROUP_GET_DEVICE_FD, "VFIO_GROUP_GET_DEVICE_FD", (void *)bdf, NULL);
	if (e->device < 0)
		return -errno;
	if (sysfs_hex(bdf, "vendor") == VIRTIO_RNG_VENDOR) {
		/* Z's stand-in card: the rest once its ring is mapped */
		e->stand_in = true;
		return enable_dma(e, call);
	}
	reg.index = VFIO_PCI_BAR0_REGION_INDEX;
	if (call(e->device, VFIO_DEVICE_GET_REGION_INFO, "VFIO_DEVICE_GET_REGION_INFO", &reg, NULL))
		return -errno;
	e->bar0_size = reg.size;
	e->bar0 = mmap(NULL, reg.size, PROT_READ | PROT_WRITE, MAP_SHARED, e->device, (off_t)reg.offset);
	if (e->bar0 == MAP_FAILED) {
		e->bar0 = NULL;
		return -errno;
	}
	ret = enable_dma(e, call);
	if (ret)
		return ret;
	if (edu_irq_eventfd(e, VFIO_PCI_MSI_IRQ_INDEX, call))
		return -errno;
	/* the identification register, 0x010000ed, tells the byte order */
	if ((rd32(e, 0) & 0xff) != 0xed)
		e->swap = true;
	if ((rd32(e, 0) & 0xff) != 0xed)
		return -ENODEV;
	return 0;
}

int edu_wait_epoll(struct edu *e)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = e->msi };

	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (e->epfd < 0)
		return -errno;
	return epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->msi, &ev) ? -errno : 0;
}

/* Wait for the device's interrupt, then acknowledge what raised it. */
static int wait_irq(struct edu *e, uint32_t want)
{
	struct epoll_event ev;
	uint64_t n;
	uint32_t st;

	/* as a runtime with more to wait for does: the eventfd in an epoll */
	while (e->epfd > 0 && epoll_wait(e->epfd, &ev, 1, -1) != 1)
		if (errno != EINTR)
			return -errno;
	if (read(e->msi, &n, sizeof(n)) != sizeof(n))
		return -errno;
	st = rd32(e, EDU_IRQ_STATUS);
	wr32(e, EDU_IRQ_ACK, st);
	e->irqs++;
	return st & want ? 0 : -EPROTO;
}

static int dma(struct edu *e, uint64_t iova, uint64_t count, bool to_ram)
{
	wr64(e, EDU_DMA_SRC, to_ram ? EDU_DEV_BUF : iova);
	wr64(e, EDU_DMA_DST, to_ram ? iova : EDU_DEV_BUF);
	wr64(e, EDU_DMA_COUNT, count);
	wr64(e, EDU_DMA_CMD, EDU_DMA_START | EDU_DMA_IRQ | (to_ram ? EDU_DMA_TO_RAM : 0));
	return wait_irq(e, 0x100);
}

int edu_copy_in(struct edu *e, uint64_t iova, uint64_t count)
{
	return dma(e, iova, count, false);
}

int edu_copy_out(struct edu *e, uint64_t iova, uint64_t count)
{
	return dma(e, iova, count, true);
}

int edu_factorial(struct edu *e, uint32_t n, uint32_t *result)
{
	int ret;

	wr32(e, EDU_STATUS, EDU_STATUS_IRQ);
	wr32(e, EDU_FACT, n);
	ret = wait_irq(e, 0x01);
	*result = rd32(e, EDU_FACT);
	return ret;
}

void edu_close(struct edu *e)
{
	if (e->bar0)
		munmap(e->bar0, e->bar0_size);
	if (e->msi > 0)
		close(e->msi);
	if (e->epfd > 0)
		close(e->epfd);
	if (e->device > 0)
		close(e->device);
	if (e->group > 0)
		close(e->group);
}
