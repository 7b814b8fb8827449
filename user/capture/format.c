// SPDX-License-Identifier: GPL-2.0-only
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"
#include "capture/format.h"
#include "capture/names.h"

struct out {
	char *buf;
	size_t len, pos; /* pos may pass len: the length wanted */
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->pos < o->len ? o->buf + o->pos : NULL, o->pos < o->len ? o->len - o->pos : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

/* A string as a value: quoted, with quotes and controls escaped. */
static void put_str(struct out *o, const char *key, const char *s, size_t max)
{
	put(o, " %s=\"", key);
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			put(o, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			put(o, "\\x%02x", c);
		else
			put(o, "%c", c);
	}
	put(o, "\"");
}

static void fmt_call(struct out *o, const struct sbt_hdr *h, const struct capture_meta *m)
{
	const struct meta_probe *p;

	if (h->type == SBT_CALL_ENTER) {
		const struct sbt_call_enter *e = (const void *)h;

		p = meta_probe(m, e->probe_id);
		put(o, " probe=%u name=%s role=%s depth=%u args=", e->probe_id, p ? p->name : "?",
		    p ? sbt_role_name((unsigned)p->role) : "?", e->depth);
		for (int i = 0; i < SBT_MAX_ARGS; i++)
			put(o, "%s0x%llx", i ? "," : "", (unsigned long long)e->args[i]);
		if (p && p->bytes_arg >= 0 && p->bytes_arg < SBT_MAX_ARGS)
			put(o, " bytes=%llu", (unsigned long long)e->args[p->bytes_arg]);
		return;
	}
	const struct sbt_call_exit *x = (const void *)h;

	p = meta_probe(m, x->probe_id);
	put(o, " probe=%u name=%s depth=%u ret=%lld", x->probe_id, p ? p->name : "?", x->depth, (long long)x->ret);
	if (x->flags & SBT_CALL_UNPAIRED)
		put(o, " unpaired=1");
	else
		put(o, " dur_ns=%llu", (unsigned long long)(h->ts - x->entry_ts));
}

static void fmt_ioctl(struct out *o, const struct sbt_ioctl *r)
{
	const char *cmd = sbt_vfio_cmd_name(r->cmd, r->fd_kind);

	put(o, " fd=%d kind=%s", r->fd, sbt_fd_kind_name(r->fd_kind));
	if (cmd)
		put(o, " cmd=%s", cmd);
	else
		put(o, " cmd=0x%x", r->cmd);
	put(o, " ret=%lld", (long long)r->ret);
	if (r->ret < 0 && r->ret > -4096)
		put(o, " err=%s", sbt_errno_name((int)-r->ret));
	put(o, " dur_ns=%llu arg=0x%llx", (unsigned long long)(r->h.ts - r->start_ts), (unsigned long long)r->arg);
	switch (r->decoded) {
	case SBT_DEC_DMA_MAP:
		put(o, " vaddr=0x%llx", (unsigned long long)r->u.dma.vaddr);
		/* fallthrough */
	case SBT_DEC_DMA_UNMAP:
		put(o, " iova=0x%llx size=%llu flags=0x%x", (unsigned long long)r->u.dma.iova,
		    (unsigned long long)r->u.dma.size, r->u.dma.flags);
		break;
	case SBT_DEC_SET_IRQS:
		put(o, " irq_index=%u start=%u count=%u flags=0x%x", r->u.irqs.index, r->u.irqs.start, r->u.irqs.count,
		    r->u.irqs.flags);
		break;
	case SBT_DEC_FAULT: put(o, " arg_fault=1"); break;
	case SBT_DEC_SPAPR_REGISTER:
	case SBT_DEC_SPAPR_UNREGISTER:
		put(o, " vaddr=0x%llx size=%llu", (unsigned long long)r->u.dma.vaddr,
		    (unsigned long long)r->u.dma.size);
		break;
	case SBT_DEC_SPAPR_CREATE:
		put(o, " page_shift=%u levels=%u", r->u.window.page_shift, r->u.window.levels);
		/* fallthrough */
	case SBT_DEC_SPAPR_INFO:
		put(o, " window_start=0x%llx window_size=%llu", (unsigned long long)r->u.window.start,
		    (unsigned long long)r->u.window.size);
		break;
	case SBT_DEC_SPAPR_REMOVE: put(o, " window_start=0x%llx", (unsigned long long)r->u.window.start); break;
	}
}

static void fmt_drv(struct out *o, const struct sbt_drv *r)
{
	const char *cmd = sbt_drv_cmd_name(r);

	put(o, " func=%s", sbt_drv_func_name(r->func));
	if (cmd)
		put(o, " cmd=%s", cmd);
	else if (r->func <= SBT_DRV_TYPE1_IOCTL || r->func == SBT_DRV_SPAPR_IOCTL)
		put(o, " cmd=0x%x", r->cmd);
	if (r->bdf != SBT_BDF_NONE) {
		char bdf[16];

		sbt_bdf_str(r->bdf, bdf, sizeof(bdf));
		put(o, " bdf=%s", bdf);
	}
	if (r->vendor)
		put(o, " ids=%04x:%04x", r->vendor, r->device);
	if (r->cards == SBT_DRV_SHARED)
		put(o, " cards=shared");
	put(o, " level=%u ret=%lld", r->level, (long long)r->ret);
	if (r->ret < 0 && r->ret > -4096)
		put(o, " err=%s", sbt_errno_name((int)-r->ret));
	put(o, " dur_ns=%llu", (unsigned long long)(r->h.ts - r->start_ts));
	switch (r->func) {
	case SBT_DRV_SPAPR_IOCTL:
		if (r->decoded == SBT_DEC_SPAPR_REGISTER || r->decoded == SBT_DEC_SPAPR_UNREGISTER)
			put(o, " vaddr=0x%llx size=%llu", (unsigned long long)r->args[0],
			    (unsigned long long)r->args[1]);
		/* MAP_DMA and UNMAP_DMA as type1's */
		/* fallthrough */
	case SBT_DRV_TYPE1_IOCTL:
		if (r->decoded == SBT_DEC_DMA_MAP || r->decoded == SBT_DEC_DMA_UNMAP)
			put(o, " iova=0x%llx size=%llu", (unsigned long long)r->args[0],
			    (unsigned long long)r->args[1]);
		if (r->decoded == SBT_DEC_DMA_MAP)
			put(o, " vaddr=0x%llx", (unsigned long long)r->args[2]);
		break;
	case SBT_DRV_SPAPR_PIN:
		put(o, " vaddr=0x%llx pages=%lld", (unsigned long long)r->args[0], (long long)r->args[1]);
		break;
	case SBT_DRV_PIN_PAGES:
	case SBT_DRV_UNPIN_PAGES:
		put(o, " %s=0x%llx pages=%lld", r->func == SBT_DRV_PIN_PAGES ? "vaddr" : "iova",
		    (unsigned long long)r->args[0], (long long)r->args[1]);
		break;
	case SBT_DRV_MSI: put(o, " irq=%llu", (unsigned long long)r->args[0]); break;
	}
}

static void fmt_meta(struct out *o, const struct sbt_hdr *h)
{
	size_t fixed;

	switch (h->type) {
	case SBT_META_CLOCK: {
		const struct sbt_meta_clock *c = (const void *)h;

		put(o, " boottime=%llu monotonic=%llu realtime=%llu spread_ns=%llu", (unsigned long long)c->boottime,
		    (unsigned long long)c->monotonic, (unsigned long long)c->realtime,
		    (unsigned long long)c->spread_ns);
		break;
	}
	case SBT_META_HOST: {
		const struct sbt_meta_host *x = (const void *)h;

		put_str(o, "hostname", x->hostname, sizeof(x->hostname));
		put_str(o, "release", x->release, sizeof(x->release));
		put_str(o, "version", x->version, sizeof(x->version));
		put(o, " clock_id=%u", x->clock_id);
		break;
	}
	case SBT_META_PROC: {
		const struct sbt_meta_proc *p = (const void *)h;
		char cmd[512];
		size_t n;

		fixed = sizeof(*p) - sizeof(p->h);
		n = h->size - fixed < p->cmdline_len ? h->size - fixed : p->cmdline_len;
		n = n < sizeof(cmd) - 1 ? n : sizeof(cmd) - 1;
		memcpy(cmd, p->cmdline, n);
		for (size_t i = 0; i < n; i++)
			if (!cmd[i])
				cmd[i] = ' ';
		while (n && cmd[n - 1] == ' ')
			n--;
		cmd[n] = '\0';
		put(o, " pid=%u", p->pid);
		put_str(o, "comm", p->comm, sizeof(p->comm));
		put_str(o, "cmdline", cmd, sizeof(cmd));
		break;
	}
	case SBT_META_PROBE: {
		const struct sbt_meta_probe *p = (const void *)h;
		size_t slen;

		fixed = sizeof(*p) - sizeof(p->h);
		slen = h->size - fixed < p->strings_len ? h->size - fixed : p->strings_len;
		put(o, " id=%u role=%s bytes_arg=%d offset=0x%llx name=%s", p->id, sbt_role_name(p->role), p->bytes_arg,
		    (unsigned long long)p->offset, meta_string(p->strings, slen, 0));
		put_str(o, "pattern", meta_string(p->strings, slen, 1), 256);
		put_str(o, "lib", meta_string(p->strings, slen, 2), 4096);
		break;
	}
	case SBT_META_IRQ: {
		const struct sbt_meta_irq *q = (const void *)h;

		put(o, " irq=%u", q->irq);
		put_str(o, "name", q->name, sizeof(q->name));
		break;
	}
	case SBT_THREAD_NAME: put_str(o, "comm", ((const struct sbt_thread_name *)h)->comm, SBT_COMM_LEN); break;
	case SBT_LOST: {
		const struct sbt_lost *l = (const void *)h;

		put(o, " count=%llu total=%llu", (unsigned long long)l->count, (unsigned long long)l->total);
		break;
	}
	case SBT_META_END: {
		const struct sbt_meta_end *e = (const void *)h;

		put(o, " records=%llu lost=%llu duration_ns=%llu", (unsigned long long)e->records,
		    (unsigned long long)e->lost, (unsigned long long)e->duration_ns);
		break;
	}
	case SBT_META_DEVICE: {
		const struct sbt_meta_device *d = (const void *)h;

		put(o, " pid=%u vendor=0x%04x device=0x%04x", d->pid, d->vendor, d->device);
		put_str(o, "bdf", d->bdf, sizeof(d->bdf));
		break;
	}
	case SBT_META_NSPID: {
		const struct sbt_meta_nspid *n = (const void *)h;

		put(o, " ns_pid=%u ns_tid=%u level=%u", n->ns_tgid, n->ns_tid, n->level);
		break;
	}
	default: put(o, " size=%u", h->size);
	}
}

int sbt_format_record(const struct sbt_hdr *h, const struct capture_meta *m, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };

	if (len)
		buf[0] = '\0';
	char comm[4 * SBT_COMM_LEN];

	/* the traced program names its threads: any bytes, shown as valid text */
	utf8_sanitize(meta_thread_name(m, h->tid), comm, sizeof(comm));
	put(&o, "%-16s %7u/%-7u [%03u] %llu.%09llu: %s", comm, h->tgid, h->tid, h->cpu,
	    (unsigned long long)(h->ts / 1000000000ULL), (unsigned long long)(h->ts % 1000000000ULL),
	    sbt_type_name(h->type));
	switch (h->type) {
	case SBT_CALL_ENTER:
	case SBT_CALL_EXIT: fmt_call(&o, h, m); break;
	case SBT_IOCTL: fmt_ioctl(&o, (const void *)h); break;
	case SBT_DRV: fmt_drv(&o, (const void *)h); break;
	case SBT_IRQ: {
		const struct sbt_irq *q = (const void *)h;

		put(&o, " irq=%d ret=%d dur_ns=%llu", q->irq, q->ret, (unsigned long long)(h->ts - q->start_ts));
		break;
	}
	case SBT_IOMMU_MAP:
	case SBT_IOMMU_UNMAP: {
		const struct sbt_iommu *q = (const void *)h;

		put(&o, " iova=0x%llx size=%llu", (unsigned long long)q->iova, (unsigned long long)q->size);
		if (h->type == SBT_IOMMU_MAP)
			put(&o, " paddr=0x%llx", (unsigned long long)q->paddr);
		else
			put(&o, " unmapped=%llu", (unsigned long long)q->unmapped);
		break;
	}
	case SBT_DMA_MAP:
	case SBT_DMA_UNMAP: {
		const struct sbt_dma *q = (const void *)h;

		put(&o, " addr=0x%llx phys=0x%llx size=%llu dir=%u", (unsigned long long)q->addr,
		    (unsigned long long)q->phys, (unsigned long long)q->size, q->dir);
		break;
	}
	case SBT_WAKE: {
		const struct sbt_wake *w = (const void *)h;

		put(&o, " irq=%d irq_start=%llu.%09llu hop=%u waker=%u", w->irq,
		    (unsigned long long)(w->irq_start_ts / 1000000000ull),
		    (unsigned long long)(w->irq_start_ts % 1000000000ull), w->hop, w->waker_tid);
		break;
	}
	case SBT_LIB_OPEN: {
		const struct sbt_lib_open *l = (const void *)h;
		size_t room = h->size - (sizeof(*l) - sizeof(*h) - sizeof(l->path));

		put(&o, " fd=%d", l->fd);
		put_str(&o, "path", l->path, room < sizeof(l->path) ? room : sizeof(l->path));
		break;
	}
	case SBT_TASK_NEW:
	case SBT_TASK_COMM:
	case SBT_TASK_EXIT: {
		const struct sbt_task *t = (const void *)h;

		if (h->type == SBT_TASK_NEW)
			put(&o, " ppid=%u new_process=%u", t->ppid, t->flags & 1);
		if (h->type == SBT_TASK_EXIT)
			put(&o, " last_thread=%u", t->flags & 1);
		put_str(&o, "comm", t->comm, SBT_COMM_LEN);
		break;
	}
	default: fmt_meta(&o, h);
	}
	return (int)o.pos;
}
