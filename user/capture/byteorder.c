// SPDX-License-Identifier: GPL-2.0-only
#include <byteswap.h>
#include <stdint.h>
#include <string.h>

#include "capture/byteorder.h"

/* Swaps the fields a layout names, from p on, within end: '2', '4' and
 * '8' a field of that many bytes, '-' a byte left as it is. */
static void swap_fields(uint8_t *p, const uint8_t *end, const char *layout)
{
	for (; *layout; layout++) {
		size_t w = *layout == '-' ? 1 : (size_t)(*layout - '0');

		if (p + w > end)
			return;
		if (w == 2) {
			uint16_t v;

			memcpy(&v, p, 2);
			v = bswap_16(v);
			memcpy(p, &v, 2);
		} else if (w == 4) {
			uint32_t v;

			memcpy(&v, p, 4);
			v = bswap_32(v);
			memcpy(p, &v, 4);
		} else if (w == 8) {
			uint64_t v;

			memcpy(&v, p, 8);
			v = bswap_64(v);
			memcpy(p, &v, 8);
		}
		p += w;
	}
}

void sbt_hdr_swap(struct sbt_hdr *h)
{
	swap_fields((uint8_t *)h, (uint8_t *)(h + 1),
		    "22444"
		    "8");
}

/* The payload of a record whose header is in this host's order. The
 * layouts follow bpf/events.h, field by field after the header. */
static void payload_swap(struct sbt_hdr *h, uint8_t *end, bool foreign)
{
	uint8_t *p = (uint8_t *)(h + 1);

	switch (h->type) {
	case SBT_CALL_ENTER: {
		char layout[2 + SBT_MAX_ARGS + 1] = "44";

		memset(layout + 2, '8', SBT_MAX_ARGS);
		layout[2 + SBT_MAX_ARGS] = 0;
		swap_fields(p, end, layout);
		break;
	}
	case SBT_CALL_EXIT: swap_fields(p, end, "448844"); break;
	case SBT_LIB_OPEN: swap_fields(p, end, "44"); break;
	case SBT_WAKE: swap_fields(p, end, "84444"); break;
	case SBT_IOCTL: {
		struct sbt_ioctl *r = (struct sbt_ioctl *)h;
		uint16_t decoded;

		swap_fields(p, end, "88844224");
		/* the union is told by decoded: in our order after the swap
		 * when the record came in the other one, before it else */
		decoded = foreign ? r->decoded : bswap_16(r->decoded);
		if (decoded == SBT_DEC_DMA_MAP || decoded == SBT_DEC_DMA_UNMAP || decoded == SBT_DEC_SPAPR_REGISTER ||
		    decoded == SBT_DEC_SPAPR_UNREGISTER)
			swap_fields((uint8_t *)&r->u, end, "88844");
		else if (decoded == SBT_DEC_SPAPR_INFO || decoded == SBT_DEC_SPAPR_CREATE ||
			 decoded == SBT_DEC_SPAPR_REMOVE)
			swap_fields((uint8_t *)&r->u, end, "884444");
		else if (decoded == SBT_DEC_SET_IRQS)
			swap_fields((uint8_t *)&r->u, end, "444444");
		else
			swap_fields((uint8_t *)&r->u, end, "8888");
		break;
	}
	case SBT_IRQ: swap_fields(p, end, "844"); break;
	case SBT_DRV:
		swap_fields(p, end,
			    "88888"
			    "444"
			    "22"
			    "2222");
		break;
	case SBT_IOMMU_MAP:
	case SBT_IOMMU_UNMAP: swap_fields(p, end, "8888"); break;
	case SBT_DMA_MAP:
	case SBT_DMA_UNMAP: swap_fields(p, end, "88844"); break;
	case SBT_TASK_NEW:
	case SBT_TASK_COMM:
	case SBT_TASK_EXIT: swap_fields(p, end, "44"); break;
	case SBT_META_CLOCK: swap_fields(p, end, "8888"); break;
	case SBT_META_HOST: swap_fields((uint8_t *)&((struct sbt_meta_host *)h)->clock_id, end, "44"); break;
	case SBT_META_PROC: swap_fields(p, end, "44"); break;
	case SBT_META_PROBE: swap_fields(p, end, "842244"); break;
	case SBT_META_IRQ: swap_fields(p, end, "44"); break;
	case SBT_LOST: swap_fields(p, end, "88"); break;
	case SBT_META_DEVICE: swap_fields(p, end, "422"); break;
	case SBT_META_NSPID: swap_fields(p, end, "4444"); break;
	case SBT_META_END: swap_fields(p, end, "888"); break;
	default: break; /* thread names: text; unknown types: left as they are */
	}
}

void sbt_record_swap(struct sbt_hdr *h, size_t len, bool foreign)
{
	uint8_t *end = (uint8_t *)h + len;

	if (len < sizeof(*h))
		return;
	if (foreign)
		sbt_hdr_swap(h);
	payload_swap(h, end, foreign);
	if (!foreign)
		sbt_hdr_swap(h);
}
