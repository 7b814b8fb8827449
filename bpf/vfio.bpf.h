/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The few fields of vfio's private structures the driver-level probes read.
 *
 * vfio is a module, so its types are in the module's BTF, not in the
 * vmlinux.h the programs are built against. These local definitions carry
 * only what is read; preserve_access_index makes every access a CO-RE
 * relocation that libbpf resolves against the running kernel's vfio BTF
 * (the ___sbt suffix keeps them apart from any same-named type in
 * vmlinux.h and is ignored when matching).
 */
#ifndef SBT_VFIO_BPF_H
#define SBT_VFIO_BPF_H

#include "vmlinux.h"

/* vfio_main.c: a bound device */
struct vfio_device___sbt {
	struct device *dev;
} __attribute__((preserve_access_index));

/* newer kernels: a device fd's private_data (older: the vfio_device) */
struct vfio_device_file___sbt {
	struct vfio_device___sbt *device;
} __attribute__((preserve_access_index));

/* group.c: a /dev/vfio/<group> fd's private_data */
struct vfio_group___sbt {
	struct iommu_group *iommu_group;
} __attribute__((preserve_access_index));

/* vfio_iommu_type1.c: a container's IOMMU, its domains and their groups */
struct vfio_iommu___sbt {
	struct list_head domain_list;
} __attribute__((preserve_access_index));

struct vfio_domain___sbt {
	struct list_head next;
	struct list_head group_list;
} __attribute__((preserve_access_index));

struct vfio_iommu_group___sbt {
	struct iommu_group *iommu_group;
	struct list_head next;
} __attribute__((preserve_access_index));

/* vfio_iommu_spapr_tce.c (Power): a container and its groups */
struct tce_container___sbt {
	struct list_head group_list;
} __attribute__((preserve_access_index));

struct tce_iommu_group___sbt {
	struct list_head next;
	struct iommu_group *grp;
} __attribute__((preserve_access_index));

#endif /* SBT_VFIO_BPF_H */
