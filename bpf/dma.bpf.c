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

SEC("tp/iommu/map")
int iommu_map(struct trace_event_raw_map *ctx)
{
	struct sbt_iommu *r;

	if (!current_traced())
		return 0;
	r = sbt_reserve(sizeof(*r), SBT_IOMMU_MAP);
	if (!r)
		return 0;
	r->iova = ctx->iova;
	r->paddr = ctx->paddr;
	r->size = ctx->size;
	r->unmapped = 0;
	sbt_submit(r);
	return 0;
}

SEC("tp/iommu/unmap")
int iommu_unmap(struct trace_event_raw_unmap *ctx)
{
	struct sbt_iommu *r;

	if (!current_traced())
		return 0;
	r = sbt_reserve(sizeof(*r), SBT_IOMMU_UNMAP);
	if (!r)
		return 0;
	r->iova = ctx->iova;
	r->paddr = 0;
	r->size = ctx->size;
	r->unmapped = ctx->unmapped_size;
	sbt_submit(r);
	return 0;
}

SEC("tracepoint")
int dma_map(struct trace_event_raw_dma_map *ctx)
{
	struct sbt_dma *r;

	if (!current_traced())
		return 0;
	r = sbt_reserve(sizeof(*r), SBT_DMA_MAP);
	if (!r)
		return 0;
	r->addr = BPF_CORE_READ(ctx, dma_addr);
	r->phys = BPF_CORE_READ(ctx, phys_addr);
	r->size = BPF_CORE_READ(ctx, size);
	r->dir = BPF_CORE_READ(ctx, dir);
	r->pad = 0;
	sbt_submit(r);
	return 0;
}

SEC("tracepoint")
int dma_unmap(struct trace_event_raw_dma_unmap *ctx)
{
	struct sbt_dma *r;

	if (!current_traced())
		return 0;
	r = sbt_reserve(sizeof(*r), SBT_DMA_UNMAP);
	if (!r)
		return 0;
	r->addr = BPF_CORE_READ(ctx, addr);
	r->phys = 0;
	r->size = BPF_CORE_READ(ctx, size);
	r->dir = BPF_CORE_READ(ctx, dir);
	r->pad = 0;
	sbt_submit(r);
	return 0;
}
