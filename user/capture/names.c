// SPDX-License-Identifier: GPL-2.0-only
/* Names for the numbers in records. */
#include <linux/vfio.h>
#include <stdio.h>
#include <string.h>

#include "capture/names.h"
#include "events.h"

/* events.h spells the VFIO numbers out for BPF; check them against uapi. */
_Static_assert(SBT_VFIO_IOMMU_MAP_DMA == VFIO_IOMMU_MAP_DMA, "MAP_DMA");
_Static_assert(SBT_VFIO_IOMMU_UNMAP_DMA == VFIO_IOMMU_UNMAP_DMA, "UNMAP_DMA");
_Static_assert(SBT_VFIO_DEVICE_SET_IRQS == VFIO_DEVICE_SET_IRQS, "SET_IRQS");
_Static_assert(SBT_VFIO_GROUP_GET_DEVICE_FD == VFIO_GROUP_GET_DEVICE_FD, "GET_DEVICE_FD");
_Static_assert(SBT_VFIO_SET_IOMMU == VFIO_SET_IOMMU, "SET_IOMMU");
_Static_assert(SBT_VFIO_IOMMU_GET_INFO == VFIO_IOMMU_SPAPR_TCE_GET_INFO, "TCE_GET_INFO");
_Static_assert(SBT_VFIO_SPAPR_REGISTER_MEMORY == VFIO_IOMMU_SPAPR_REGISTER_MEMORY, "REGISTER");
_Static_assert(SBT_VFIO_SPAPR_UNREGISTER_MEMORY == VFIO_IOMMU_SPAPR_UNREGISTER_MEMORY, "UNREG");
_Static_assert(SBT_VFIO_SPAPR_TCE_CREATE == VFIO_IOMMU_SPAPR_TCE_CREATE, "TCE_CREATE");
_Static_assert(SBT_VFIO_SPAPR_TCE_REMOVE == VFIO_IOMMU_SPAPR_TCE_REMOVE, "TCE_REMOVE");
_Static_assert(SBT_VFIO_SPAPR_TCE_IOMMU == VFIO_SPAPR_TCE_IOMMU, "SPAPR_TCE_IOMMU");
_Static_assert(SBT_VFIO_SPAPR_TCE_v2_IOMMU == VFIO_SPAPR_TCE_v2_IOMMU, "SPAPR_TCE_v2");

const char *sbt_type_name(uint16_t type)
{
	static const char *const names[SBT_TYPE_MAX] = {
		[SBT_CALL_ENTER] = "call_enter",
		[SBT_CALL_EXIT] = "call_exit",
		[SBT_IOCTL] = "ioctl",
		[SBT_IRQ] = "irq",
		[SBT_IOMMU_MAP] = "iommu_map",
		[SBT_IOMMU_UNMAP] = "iommu_unmap",
		[SBT_DMA_MAP] = "dma_map",
		[SBT_DMA_UNMAP] = "dma_unmap",
		[SBT_TASK_NEW] = "task_new",
		[SBT_TASK_COMM] = "task_comm",
		[SBT_TASK_EXIT] = "task_exit",
		[SBT_META_CLOCK] = "clock",
		[SBT_META_HOST] = "host",
		[SBT_META_PROC] = "process",
		[SBT_META_PROBE] = "probe",
		[SBT_META_IRQ] = "irq_info",
		[SBT_THREAD_NAME] = "thread_name",
		[SBT_LOST] = "lost",
		[SBT_META_END] = "end",
		[SBT_META_DEVICE] = "device",
		[SBT_META_NSPID] = "nspid",
		[SBT_DRV] = "driver",
		[SBT_LIB_OPEN] = "lib_open",
		[SBT_WAKE] = "wake",
	};

	return type < SBT_TYPE_MAX && names[type] ? names[type] : "unknown";
}

static const char *const role_names[SBT_ROLE_MAX] = {
	[SBT_ROLE_NONE] = "none",	  [SBT_ROLE_COPY_IN] = "copy-in", [SBT_ROLE_COPY_OUT] = "copy-out",
	[SBT_ROLE_COMPUTE] = "compute",	  [SBT_ROLE_LAUNCH] = "launch",	  [SBT_ROLE_WAIT] = "wait",
	[SBT_ROLE_ALLOC] = "alloc",	  [SBT_ROLE_FREE] = "free",	  [SBT_ROLE_SUBMIT] = "submit",
	[SBT_ROLE_COMPLETE] = "complete", [SBT_ROLE_MAP] = "map",	  [SBT_ROLE_UNMAP] = "unmap",
	[SBT_ROLE_USER] = "user",
};

const char *sbt_role_name(unsigned int role)
{
	return role < SBT_ROLE_MAX ? role_names[role] : "unknown";
}

int sbt_role_from_name(const char *name)
{
	for (int i = 0; i < SBT_ROLE_MAX; i++)
		if (!strcmp(role_names[i], name))
			return i;
	return -1;
}

const char *sbt_fd_kind_name(unsigned int kind)
{
	switch (kind) {
	case SBT_FD_CONTAINER: return "container";
	case SBT_FD_GROUP: return "group";
	case SBT_FD_DEVICE: return "device";
	case SBT_FD_PATH: return "path";
	case SBT_FD_SPAPR: return "spapr-container";
	default: return "none";
	}
}

const char *sbt_vfio_cmd_name(uint32_t cmd, unsigned int fd_kind)
{
	/* VFIO_BASE + n; from 12 on, a device fd and a container fd give the
	 * same number different meanings (linux/vfio.h). */
	static const char *const common[] = {
		"VFIO_GET_API_VERSION",	    "VFIO_CHECK_EXTENSION",	"VFIO_SET_IOMMU",
		"VFIO_GROUP_GET_STATUS",    "VFIO_GROUP_SET_CONTAINER", "VFIO_GROUP_UNSET_CONTAINER",
		"VFIO_GROUP_GET_DEVICE_FD", "VFIO_DEVICE_GET_INFO",	"VFIO_DEVICE_GET_REGION_INFO",
		"VFIO_DEVICE_GET_IRQ_INFO", "VFIO_DEVICE_SET_IRQS",	"VFIO_DEVICE_RESET",
	};
	static const char *const device[] = {
		"VFIO_DEVICE_GET_PCI_HOT_RESET_INFO", "VFIO_DEVICE_PCI_HOT_RESET", "VFIO_DEVICE_QUERY_GFX_PLANE",
		"VFIO_DEVICE_GET_GFX_DMABUF",	      "VFIO_DEVICE_IOEVENTFD",	   "VFIO_DEVICE_FEATURE",
	};
	static const char *const iommu[] = {
		"VFIO_IOMMU_GET_INFO", "VFIO_IOMMU_MAP_DMA", "VFIO_IOMMU_UNMAP_DMA",
		"VFIO_IOMMU_ENABLE",   "VFIO_IOMMU_DISABLE", "VFIO_IOMMU_DIRTY_PAGES",
	};
	/* a container with the sPAPR TCE IOMMU (Power) */
	static const char *const spapr[] = {
		"VFIO_IOMMU_SPAPR_TCE_GET_INFO",
		"VFIO_IOMMU_MAP_DMA",
		"VFIO_IOMMU_UNMAP_DMA",
		"VFIO_IOMMU_ENABLE",
		"VFIO_IOMMU_DISABLE",
		"VFIO_IOMMU_SPAPR_REGISTER_MEMORY",
		"VFIO_IOMMU_SPAPR_UNREGISTER_MEMORY",
		"VFIO_IOMMU_SPAPR_TCE_CREATE",
		"VFIO_IOMMU_SPAPR_TCE_REMOVE",
		"VFIO_EEH_PE_OP",
	};
	int nr = sbt_vfio_nr(cmd); /* either architecture's numbering */
	unsigned int n;

	if (nr < 0)
		return NULL;
	n = (unsigned int)nr;
	if (n < 12)
		return common[n];
	if (fd_kind == SBT_FD_SPAPR)
		return n < 22 ? spapr[n - 12] : NULL;
	if (n < 18)
		return fd_kind == SBT_FD_DEVICE ? device[n - 12] : iommu[n - 12];
	return NULL;
}

const char *sbt_errno_name(int err)
{
	const char *n = err > 0 ? strerrorname_np(err) : NULL;

	return n ? n : "E?";
}

void sbt_bdf_str(uint32_t bdf, char *out, size_t len)
{
	snprintf(out, len, "%04x:%02x:%02x.%x", bdf >> 16, (bdf >> 8) & 0xff, (bdf >> 3) & 0x1f, bdf & 7);
}

const char *sbt_bdf_find(const char *s, uint32_t *bdf)
{
	for (; *s; s++) {
		unsigned int dom, bus, dev, fn;
		int n = 0;

		if (sscanf(s, "%4x:%2x:%2x.%1x%n", &dom, &bus, &dev, &fn, &n) == 4 && n == 12 && dev <= 31 && fn <= 7) {
			if (bdf)
				*bdf = dom << 16 | bus << 8 | dev << 3 | fn;
			return s;
		}
	}
	return NULL;
}

const char *sbt_drv_func_name(unsigned int func)
{
	static const char *const names[SBT_DRV_FUNC_MAX] = {
		[SBT_DRV_CONTAINER_IOCTL] = "vfio_fops_unl_ioctl",
		[SBT_DRV_GROUP_IOCTL] = "vfio_group_fops_unl_ioctl",
		[SBT_DRV_DEVICE_IOCTL] = "vfio_device_fops_unl_ioctl",
		[SBT_DRV_TYPE1_IOCTL] = "vfio_iommu_type1_ioctl",
		[SBT_DRV_PIN_PAGES] = "vfio_pin_pages_remote",
		[SBT_DRV_UNPIN_PAGES] = "vfio_unpin_pages_remote",
		[SBT_DRV_MSI] = "vfio_msihandler",
		[SBT_DRV_SPAPR_IOCTL] = "tce_iommu_ioctl",
		[SBT_DRV_SPAPR_PIN] = "mm_iommu_new",
	};

	return func < SBT_DRV_FUNC_MAX && names[func] ? names[func] : "vfio?";
}

const char *sbt_drv_cmd_name(const struct sbt_drv *r)
{
	static const unsigned int kinds[SBT_DRV_FUNC_MAX] = {
		[SBT_DRV_CONTAINER_IOCTL] = SBT_FD_CONTAINER, [SBT_DRV_GROUP_IOCTL] = SBT_FD_GROUP,
		[SBT_DRV_DEVICE_IOCTL] = SBT_FD_DEVICE,	      [SBT_DRV_TYPE1_IOCTL] = SBT_FD_CONTAINER,
		[SBT_DRV_SPAPR_IOCTL] = SBT_FD_SPAPR,
	};

	if (r->func >= SBT_DRV_FUNC_MAX || !kinds[r->func])
		return NULL;
	/* vfio's container handler passes any IOMMU's commands on: Power's
	 * numbering says the IOMMU was sPAPR's, the only one Power has */
	if (r->func == SBT_DRV_CONTAINER_IOCTL && (r->cmd & SBT_IOC_NONE_PPC))
		return sbt_vfio_cmd_name(r->cmd, SBT_FD_SPAPR);
	return sbt_vfio_cmd_name(r->cmd, kinds[r->func]);
}
