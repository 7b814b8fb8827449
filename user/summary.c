// SPDX-License-Identifier: GPL-2.0-only
#include <string.h>

#include "names.h"
#include "summary.h"

static void add_ioctl(struct summary *s, const struct sbt_ioctl *r)
{
	int i;

	for (i = 0; i < s->nioctls; i++)
		if (s->ioctls[i].cmd == r->cmd && s->ioctls[i].fd_kind == r->fd_kind)
			break;
	if (i == s->nioctls) {
		if (i == SUMMARY_MAX_IOCTLS)
			return;
		s->nioctls++;
		s->ioctls[i].cmd = r->cmd;
		s->ioctls[i].fd_kind = r->fd_kind;
	}
	s->ioctls[i].calls++;
	s->ioctls[i].total_ns += r->h.ts - r->start_ts;
	if (r->ret < 0) {
		s->ioctls[i].errors++;
		s->ioctls[i].last_errno = (int)-r->ret;
	}
}

static void add_irq(struct summary *s, int irq)
{
	int i;

	for (i = 0; i < s->nirqs && s->irqs[i].irq != irq; i++)
		;
	if (i == s->nirqs) {
		if (i == SUMMARY_MAX_IRQS)
			return;
		s->nirqs++;
		s->irqs[i].irq = irq;
	}
	s->irqs[i].count++;
}

void summary_add(struct summary *s, const struct sbt_hdr *h)
{
	if (h->type < SBT_TYPE_MAX)
		s->by_type[h->type]++;
	if (h->type < SBT_META_CLOCK) {
		if (!s->first_ts || h->ts < s->first_ts)
			s->first_ts = h->ts;
		if (h->ts > s->last_ts)
			s->last_ts = h->ts;
	}
	switch (h->type) {
	case SBT_CALL_ENTER: {
		uint32_t id = ((const struct sbt_call_enter *)h)->probe_id;

		if (id < SUMMARY_MAX_PROBES)
			s->probes[id].calls++;
		break;
	}
	case SBT_CALL_EXIT: {
		const struct sbt_call_exit *x = (const void *)h;

		if (x->probe_id >= SUMMARY_MAX_PROBES)
			break;
		s->probes[x->probe_id].returns++;
		if (x->flags & SBT_CALL_UNPAIRED)
			s->probes[x->probe_id].unpaired++;
		else
			s->probes[x->probe_id].total_ns += h->ts - x->entry_ts;
		break;
	}
	case SBT_IOCTL:
		add_ioctl(s, (const void *)h);
		break;
	case SBT_IRQ:
		add_irq(s, ((const struct sbt_irq *)h)->irq);
		break;
	case SBT_IOMMU_MAP:
		s->iommu_mapped_bytes += ((const struct sbt_iommu *)h)->size;
		break;
	case SBT_LOST:
		s->lost += ((const struct sbt_lost *)h)->count;
		break;
	}
}

void summary_print(FILE *out, const struct summary *s, const struct capture_meta *m)
{
	uint64_t kernel = 0;
	bool any = false;

	for (int t = 1; t < SBT_META_CLOCK; t++)
		kernel += s->by_type[t];
	fprintf(out, "\n%llu events over %.3f s, %llu lost\n", (unsigned long long)kernel,
		s->last_ts > s->first_ts ? (double)(s->last_ts - s->first_ts) / 1e9 : 0.0,
		(unsigned long long)s->lost);
	for (size_t i = 0; i < m->nprobes && i < SUMMARY_MAX_PROBES; i++) {
		const struct meta_probe *p = meta_probe(m, (uint32_t)i);

		if (!p)
			continue;
		if (!any)
			fprintf(out, "\n  %-58s %-9s %8s %12s\n", "runtime call", "role", "calls",
				"avg us");
		any = true;
		fprintf(out, "  %-58.58s %-9s %8llu %12.1f%s\n", p->name, sbt_role_name((unsigned)p->role),
			(unsigned long long)s->probes[i].calls,
			s->probes[i].returns > s->probes[i].unpaired
				? (double)s->probes[i].total_ns / 1e3 /
					  (double)(s->probes[i].returns - s->probes[i].unpaired)
				: 0.0,
			s->probes[i].unpaired ? " (unpaired returns)" : "");
	}
	if (s->nioctls)
		fprintf(out, "\n  %-58s %-9s %8s %12s\n", "ioctl", "fd", "calls", "errors");
	for (int i = 0; i < s->nioctls; i++) {
		const char *name = sbt_vfio_cmd_name(s->ioctls[i].cmd, s->ioctls[i].fd_kind);
		char buf[32];

		if (!name) {
			snprintf(buf, sizeof(buf), "0x%x", s->ioctls[i].cmd);
			name = buf;
		}
		fprintf(out, "  %-58s %-9s %8llu %12llu", name, sbt_fd_kind_name(s->ioctls[i].fd_kind),
			(unsigned long long)s->ioctls[i].calls,
			(unsigned long long)s->ioctls[i].errors);
		if (s->ioctls[i].errors)
			fprintf(out, " (%s)", sbt_errno_name(s->ioctls[i].last_errno));
		fputc('\n', out);
	}
	for (int i = 0; i < s->nirqs; i++)
		fprintf(out, "%s  irq %-54d %-9s %8llu\n", i ? "" : "\n", s->irqs[i].irq, "",
			(unsigned long long)s->irqs[i].count);
	if (s->by_type[SBT_IOMMU_MAP] || s->by_type[SBT_IOMMU_UNMAP])
		fprintf(out, "\n  iommu: %llu maps (%llu bytes), %llu unmaps\n",
			(unsigned long long)s->by_type[SBT_IOMMU_MAP],
			(unsigned long long)s->iommu_mapped_bytes,
			(unsigned long long)s->by_type[SBT_IOMMU_UNMAP]);
	if (s->by_type[SBT_DMA_MAP] || s->by_type[SBT_DMA_UNMAP])
		fprintf(out, "  dma: %llu maps, %llu unmaps\n",
			(unsigned long long)s->by_type[SBT_DMA_MAP],
			(unsigned long long)s->by_type[SBT_DMA_UNMAP]);
	if (s->lost)
		fprintf(out, "\n  WARNING: %llu records lost (ring buffer full); hint: --buffer-size 64M\n",
			(unsigned long long)s->lost);
}
