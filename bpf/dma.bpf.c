// SPDX-License-Identifier: GPL-2.0-only
/*
 * DMA path: IOMMU mappings (iommu:map, iommu:unmap) and the dma:* mapping
 * tracepoints, recorded when a traced task caused them (VFIO's MAP_DMA
 * maps in the caller's context). The dma programs have no fixed target:
 * the loader attaches them to whichever of dma_map_phys / dma_map_page
 * (and the unmap twins) this kernel has.
 */
#include "common.bpf.h"

static __always_inline bool current_traced(void)
{
	return sbt_is_traced(bpf_get_current_pid_tgid() >> 32);
}

SEC("raw_tp/map")
int BPF_PROG(iommu_map, unsigned long iova, phys_addr_t paddr, size_t size)
{
	struct sbt_iommu *r;

	if (!current_traced())
		return 0;
	r = sbt_reserve(sizeof(*r), SBT_IOMMU_MAP);
	if (!r)
		return 0;
	r->iova = iova;
	r->paddr = paddr;
	r->size = size;
	r->unmapped = 0;
	sbt_submit(r);
	return 0;
}

SEC("raw_tp/unmap")
int BPF_PROG(iommu_unmap, unsigned long iova, size_t size, size_t unmapped_size)
{
	struct sbt_iommu *r;

	if (!current_traced())
		return 0;
	r = sbt_reserve(sizeof(*r), SBT_IOMMU_UNMAP);
	if (!r)
		return 0;
	r->iova = iova;
	r->paddr = 0;
	r->size = size;
	r->unmapped = unmapped_size;
	sbt_submit(r);
	return 0;
}

/* dma_map_phys and dma_map_page take the same arguments */
SEC("raw_tp")
int BPF_PROG(dma_map, struct device *dev, phys_addr_t phys_addr, dma_addr_t dma_addr, size_t size,
	     enum dma_data_direction dir)
{
	struct sbt_dma *r;

	if (!current_traced())
		return 0;
	r = sbt_reserve(sizeof(*r), SBT_DMA_MAP);
	if (!r)
		return 0;
	r->addr = dma_addr;
	r->phys = phys_addr;
	r->size = size;
	r->dir = dir;
	r->pad = 0;
	sbt_submit(r);
	return 0;
}

SEC("raw_tp")
int BPF_PROG(dma_unmap, struct device *dev, dma_addr_t addr, size_t size, enum dma_data_direction dir)
{
	struct sbt_dma *r;

	if (!current_traced())
		return 0;
	r = sbt_reserve(sizeof(*r), SBT_DMA_UNMAP);
	if (!r)
		return 0;
	r->addr = addr;
	r->phys = 0;
	r->size = size;
	r->dir = dir;
	r->pad = 0;
	sbt_submit(r);
	return 0;
}
