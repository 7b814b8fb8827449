// SPDX-License-Identifier: GPL-2.0-only
/*
 * Driver path: vfio's own functions, where the kernel allows it.
 *
 * Each function has an fentry/fexit pair (with the vfio modules' BTF) and a
 * kprobe/kretprobe pair doing the same; the loader loads one pair per
 * function, or neither (user/driver.c). Entry keeps the call open per
 * thread and function; return writes one SBT_DRV record. The card of each
 * call is read from vfio's structures (vfio.bpf.h): a device fd's
 * vfio_device, a group's iommu_group, a container's first domain's group;
 * calls inside another (page pinning inside MAP_DMA) take the card of the
 * call around them. The MSI handler takes its card from the interrupt's
 * name, read by irq.bpf.c as the handler started, and its ids from the
 * card's earlier calls.
 */
#include "common.bpf.h"
#include "device.bpf.h"
#include "daemon.bpf.h"
#include "ioctl_decode.bpf.h"
#include "vfio.bpf.h"

/* What a thread is inside of: open driver calls and the outermost card. */
struct drv_thread {
	__u32 depth;
	__u32 bdf;
	__u16 vendor, device;
	__u16 cards;
	__u16 pad;
};

struct drv_key {
	__u32 tid;
	__u32 func;
};

struct drv_frame {
	__u64 ts;
	__u64 args[3];
	__u32 cmd;
	__u32 bdf;
	__u16 vendor, device;
	__u16 level, decoded;
	__u16 cards; /* 0 unknown, 1 the card in bdf, SBT_DRV_SHARED several */
	__u16 skip; /* the card is not wanted: no record, nor for calls inside */
};

/* LRU: a thread killed inside a call never returns from it, and its entry
 * must not stay forever (nor fill the map for everyone else). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tid */
	__type(value, struct drv_thread);
} drv_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct drv_key);
	__type(value, struct drv_frame);
} drv_open SEC(".maps");

/* PCI ids by address, from the pci_devs read: the MSI handler has only the
 * address (from its vector's name) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 256);
	__type(key, __u32); /* bdf */
	__type(value, __u32); /* vendor << 16 | device */
} card_ids SEC(".maps");

/* the MSI handler running on this CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drv_frame);
} msi_open SEC(".maps");

#define container_of_core(ptr, type, member) ((type *)((void *)(ptr)-bpf_core_field_offset(type, member)))

/* ---- which card ---------------------------------------------------------- */

/* The PCI address from the device's name, the ids from its pci_dev. */
static __always_inline void card_of_dev(struct device *dev, struct drv_frame *f)
{
	const char *name = BPF_CORE_READ(dev, kobj.name);
	struct pci_dev *pdev;
	char buf[16];
	__u32 ids;

	if (!name || bpf_probe_read_kernel_str(buf, sizeof(buf), name) < 13)
		return;
	f->bdf = sbt_parse_bdf(buf);
	if (f->bdf == SBT_BDF_NONE)
		return;
	f->cards = 1;
	pdev = container_of_core(dev, struct pci_dev, dev);
	f->vendor = BPF_CORE_READ(pdev, vendor);
	f->device = BPF_CORE_READ(pdev, device);
	ids = (__u32)f->vendor << 16 | f->device;
	bpf_map_update_elem(&card_ids, &f->bdf, &ids, BPF_ANY);
}

/* The device of an IOMMU group; a card is normally alone in its group. */
static __always_inline void card_of_iommu_group(struct iommu_group *g, struct drv_frame *f)
{
	void *head = (void *)g + bpf_core_field_offset(struct iommu_group, devices);
	struct list_head *first = BPF_CORE_READ(g, devices.next);
	struct group_device *gd;

	if (!g || !first || (void *)first == head)
		return;
	if ((void *)BPF_CORE_READ(first, next) != head) {
		f->cards = SBT_DRV_SHARED;
		return;
	}
	gd = container_of_core(first, struct group_device, list);
	card_of_dev(BPF_CORE_READ(gd, dev), f);
}

static __always_inline void card_of_device_file(struct file *file, struct drv_frame *f)
{
	void *priv = BPF_CORE_READ(file, private_data);
	struct vfio_device___sbt *vdev = priv;

	/* since vfio's cdev support the fd holds a vfio_device_file */
	if (bpf_core_type_exists(struct vfio_device_file___sbt))
		vdev = BPF_CORE_READ((struct vfio_device_file___sbt *)priv, device);
	card_of_dev(BPF_CORE_READ(vdev, dev), f);
}

static __always_inline void card_of_group_file(struct file *file, struct drv_frame *f)
{
	struct vfio_group___sbt *group = BPF_CORE_READ(file, private_data);

	card_of_iommu_group(BPF_CORE_READ(group, iommu_group), f);
}

/* A type1 container's card: its one domain's one group. A container with
 * several groups maps for all their cards at once: shared, no one card. */
static __always_inline void card_of_type1(struct vfio_iommu___sbt *iommu, struct drv_frame *f)
{
	struct list_head *dl = BPF_CORE_READ(iommu, domain_list.next), *gl;
	struct vfio_domain___sbt *dom;
	struct vfio_iommu_group___sbt *grp;

	if (!iommu || !dl || (void *)dl == (void *)&iommu->domain_list)
		return;
	dom = container_of_core(dl, struct vfio_domain___sbt, next);
	gl = BPF_CORE_READ(dom, group_list.next);
	if (!gl || (void *)gl == (void *)&dom->group_list)
		return;
	if ((void *)BPF_CORE_READ(dl, next) != (void *)&iommu->domain_list ||
	    (void *)BPF_CORE_READ(gl, next) != (void *)&dom->group_list) {
		f->cards = SBT_DRV_SHARED;
		return;
	}
	grp = container_of_core(gl, struct vfio_iommu_group___sbt, next);
	card_of_iommu_group(BPF_CORE_READ(grp, iommu_group), f);
}

/* ---- entry and return ------------------------------------------------------ */

/* A call to look at: a traced process's, or in the daemon's always-on
 * tier anyone's (vfio's functions run only for VFIO's files). */
static __always_inline bool traced_task(void)
{
	return daemon_mode || sbt_is_traced(bpf_get_current_pid_tgid() >> 32);
}

/* In the daemon: counted in the kernel; a record only for its flight
 * recorder. */
static __always_inline bool drv_counted(__u32 func, const struct drv_frame *f, long ret)
{
	if (!daemon_mode)
		return true;
	daemon_drv_call(func, f->ts, ret);
	return daemon_record;
}

/* Open a call of func on this thread. A call with no card of its own
 * belongs to the card of the call around it. */
static __always_inline int drv_push(__u32 func, struct drv_frame *f)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct drv_key key = { tid, func };
	struct drv_thread *t = bpf_map_lookup_elem(&drv_threads, &tid), fresh = {};

	if (!t) {
		fresh.bdf = SBT_BDF_NONE;
		bpf_map_update_elem(&drv_threads, &tid, &fresh, BPF_NOEXIST);
		t = bpf_map_lookup_elem(&drv_threads, &tid);
		if (!t)
			return 0;
	}
	if (!f->cards && t->depth && t->cards) {
		f->bdf = t->bdf;
		f->vendor = t->vendor;
		f->device = t->device;
		f->cards = t->cards;
	}
	if (f->cards) {
		if (f->bdf != SBT_BDF_NONE)
			f->skip = !sbt_device_wanted(f->bdf, f->vendor, f->device);
		if (!t->depth || !t->cards) {
			t->bdf = f->bdf;
			t->vendor = f->vendor;
			t->device = f->device;
			t->cards = f->cards;
		}
	}
	f->level = (__u16)t->depth;
	f->ts = bpf_ktime_get_boot_ns();
	t->depth++;
	bpf_map_update_elem(&drv_open, &key, f, BPF_ANY);
	return 0;
}

static __always_inline void fill_record(struct sbt_drv *r, const struct drv_frame *f, __u32 func, long ret)
{
	r->start_ts = f->ts;
	r->ret = ret;
	r->args[0] = f->args[0];
	r->args[1] = f->args[1];
	r->args[2] = f->args[2];
	r->func = func;
	r->cmd = f->cmd;
	r->bdf = f->bdf;
	r->vendor = f->vendor;
	r->device = f->device;
	r->level = f->level;
	r->decoded = f->decoded;
	r->cards = f->cards;
	r->pad = 0;
}

static __always_inline int drv_pop(__u32 func, long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct drv_key key = { tid, func };
	struct drv_frame *f = bpf_map_lookup_elem(&drv_open, &key);
	struct drv_thread *t;
	struct sbt_drv *r;

	if (!f)
		return 0;
	t = bpf_map_lookup_elem(&drv_threads, &tid);
	if (t && t->depth > 1)
		t->depth--;
	else if (t)
		bpf_map_delete_elem(&drv_threads, &tid);
	if (!f->skip && drv_counted(func, f, ret) && (r = sbt_reserve(sizeof(*r), SBT_DRV))) {
		fill_record(r, f, func, ret);
		sbt_submit(r);
	}
	bpf_map_delete_elem(&drv_open, &key);
	return 0;
}

static __always_inline int fops_enter(__u32 func, struct file *file, unsigned int cmd)
{
	struct drv_frame f = { .bdf = SBT_BDF_NONE, .cmd = cmd };

	if (!traced_task())
		return 0;
	if (func == SBT_DRV_DEVICE_IOCTL)
		card_of_device_file(file, &f);
	else if (func == SBT_DRV_GROUP_IOCTL)
		card_of_group_file(file, &f);
	return drv_push(func, &f);
}

/* uapi struct vfio_iommu_type1_dma_map and _unmap, as far as read here */
struct dma_map_arg {
	__u32 argsz, flags;
	__u64 vaddr, iova, size;
};

struct dma_unmap_arg {
	__u32 argsz, flags;
	__u64 iova, size;
};

/* MAP_DMA's and UNMAP_DMA's arguments, the same for type1 and sPAPR TCE:
 * true when cmd is one of them. */
static __always_inline bool decode_dma(struct drv_frame *f, unsigned int cmd, unsigned long arg)
{
	if (cmd == SBT_VFIO_IOMMU_MAP_DMA) {
		struct dma_map_arg m;

		if (!bpf_probe_read_user(&m, sizeof(m), (void *)arg)) {
			f->args[0] = m.iova;
			f->args[1] = m.size;
			f->args[2] = m.vaddr;
			f->decoded = SBT_DEC_DMA_MAP;
		}
		return true;
	}
	if (cmd == SBT_VFIO_IOMMU_UNMAP_DMA) {
		struct dma_unmap_arg u;

		if (!bpf_probe_read_user(&u, sizeof(u), (void *)arg)) {
			f->args[0] = u.iova;
			f->args[1] = u.size;
			f->decoded = SBT_DEC_DMA_UNMAP;
		}
		return true;
	}
	return false;
}

static __always_inline int type1_enter(void *iommu, unsigned int cmd, unsigned long arg)
{
	struct drv_frame f = { .bdf = SBT_BDF_NONE, .cmd = cmd };

	if (!traced_task())
		return 0;
	card_of_type1(iommu, &f);
	decode_dma(&f, cmd, arg);
	return drv_push(SBT_DRV_TYPE1_IOCTL, &f);
}

/* An sPAPR TCE container's card: its one group's (Power). */
static __always_inline void card_of_spapr(struct tce_container___sbt *c, struct drv_frame *f)
{
	struct list_head *gl = BPF_CORE_READ(c, group_list.next);
	struct tce_iommu_group___sbt *grp;

	if (!c || !gl || (void *)gl == (void *)&c->group_list)
		return;
	if ((void *)BPF_CORE_READ(gl, next) != (void *)&c->group_list) {
		f->cards = SBT_DRV_SHARED;
		return;
	}
	grp = container_of_core(gl, struct tce_iommu_group___sbt, next);
	card_of_iommu_group(BPF_CORE_READ(grp, grp), f);
}

/* uapi struct vfio_iommu_spapr_register_memory */
struct spapr_register_arg {
	__u32 argsz, flags;
	__u64 vaddr, size;
};

static __always_inline int spapr_enter(void *container, unsigned int cmd, unsigned long arg)
{
	struct drv_frame f = { .bdf = SBT_BDF_NONE, .cmd = cmd };

	if (!traced_task())
		return 0;
	card_of_spapr(container, &f);
	if (!decode_dma(&f, cmd, arg) &&
	    (cmd == SBT_VFIO_SPAPR_REGISTER_MEMORY || cmd == SBT_VFIO_SPAPR_UNREGISTER_MEMORY)) {
		struct spapr_register_arg r;

		if (!bpf_probe_read_user(&r, sizeof(r), (void *)arg)) {
			f.args[0] = r.vaddr;
			f.args[1] = r.size;
			f.decoded = cmd == SBT_VFIO_SPAPR_REGISTER_MEMORY ? SBT_DEC_SPAPR_REGISTER
									  : SBT_DEC_SPAPR_UNREGISTER;
		}
	}
	return drv_push(SBT_DRV_SPAPR_IOCTL, &f);
}

static __always_inline int pages_enter(__u32 func, __u64 addr, long npage)
{
	struct drv_frame f = { .bdf = SBT_BDF_NONE };

	if (!traced_task())
		return 0;
	f.args[0] = addr;
	f.args[1] = (__u64)npage;
	return drv_push(func, &f);
}

/* The MSI handler: irq.bpf.c saw this interrupt start on this CPU and
 * read its card from the vector's name; only wanted cards got that far. */
static __always_inline int msi_enter(int irq)
{
	__u32 zero = 0;
	struct irq_start *s = bpf_map_lookup_elem(&irq_starts, &zero);
	struct drv_frame *f = bpf_map_lookup_elem(&msi_open, &zero);
	__u32 *ids;

	if (!s || !f || !s->active || s->irq != irq || s->bdf == SBT_BDF_NONE)
		return 0;
	__builtin_memset(f, 0, sizeof(*f));
	f->ts = bpf_ktime_get_boot_ns();
	f->args[0] = (__u32)irq;
	f->bdf = s->bdf;
	ids = bpf_map_lookup_elem(&card_ids, &f->bdf);
	if (ids) { /* known once a vfio call of this card was seen */
		f->vendor = *ids >> 16;
		f->device = *ids & 0xffff;
	}
	f->cards = 1;
	f->skip = 0;
	f->level = 1; /* inside the interrupt's handler slice */
	return 0;
}

static __always_inline int msi_exit(int ret)
{
	__u32 zero = 0;
	struct drv_frame *f = bpf_map_lookup_elem(&msi_open, &zero);
	struct irq_start *s = bpf_map_lookup_elem(&irq_starts, &zero);
	struct sbt_drv *r;

	if (!f || !f->ts)
		return 0;
	if (s)
		s->msi |= IRQ_MSI_SEEN;
	r = drv_counted(SBT_DRV_MSI, f, ret) ? sbt_reserve(sizeof(*r), SBT_DRV) : NULL;
	if (r) {
		fill_record(r, f, SBT_DRV_MSI, ret);
		sbt_submit(r);
	}
	f->ts = 0;
	return 0;
}

/* ---- the programs: one fentry/fexit and one kprobe/kretprobe pair each ---- */

/* VFIO ioctls are counted and recorded here, in vfio's own file handlers,
 * instead of at the syscall tracepoints (set by the loader when all three
 * are hooked and no --vfio-path is given): only VFIO's calls reach these
 * functions, so no other syscall of the host pays. Which handler it is
 * says which file: no path to match, no fd to track. The daemon: every
 * process's VFIO commands; record: every ioctl of its traced processes. */
const volatile bool ioctl_by_driver __weak = false;

static __always_inline void fops_ioctl(__u32 func, struct file *file, unsigned int cmd, unsigned long arg)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 kind = SBT_FD_DEVICE, group = 0;
	struct pt_regs *regs;
	__s32 fd;

	if (!ioctl_by_driver || (daemon_mode ? !daemon_vfio_cmd(cmd) : !sbt_is_traced(id >> 32)))
		return;
	/* the fd, as the process passed it: the syscall's first argument */
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	fd = (__s32)PT_REGS_PARM1_CORE_SYSCALL(regs);
	if (func == SBT_DRV_CONTAINER_IOCTL) {
		kind = SBT_FD_HOST_CONTAINER;
	} else if (func == SBT_DRV_GROUP_IOCTL) {
		kind = SBT_FD_GROUP;
		daemon_kind_by_name(file, &group); /* /dev/vfio/N: N */
	}
	if (daemon_mode)
		daemon_ioctl_begin(id, fd, cmd, arg, kind, group, NULL);
	else
		ioctl_begin(id, fd, cmd, arg, kind, 1);
}

static __always_inline int fops_exit(__u32 func, long ret)
{
	/* the handler's own slice ends inside the ioctl's: it first */
	drv_pop(func, ret);
	if (ioctl_by_driver)
		ioctl_finish(bpf_get_current_pid_tgid(), ret);
	return 0;
}

#define FOPS_IOCTL(fn, id)                                                                                             \
	SEC("fentry/" #fn)                                                                                             \
	int BPF_PROG(fn##_fentry, struct file *file, unsigned int cmd, unsigned long arg)                              \
	{                                                                                                              \
		fops_ioctl(id, file, cmd, arg);                                                                        \
		return fops_enter(id, file, cmd);                                                                      \
	}                                                                                                              \
	SEC("fexit/" #fn)                                                                                              \
	int BPF_PROG(fn##_fexit, struct file *file, unsigned int cmd, unsigned long arg, long ret)                     \
	{                                                                                                              \
		return fops_exit(id, ret);                                                                             \
	}                                                                                                              \
	SEC("kprobe/" #fn)                                                                                             \
	int BPF_KPROBE(fn##_kprobe, struct file *file, unsigned int cmd, unsigned long arg)                            \
	{                                                                                                              \
		fops_ioctl(id, file, cmd, arg);                                                                        \
		return fops_enter(id, file, cmd);                                                                      \
	}                                                                                                              \
	SEC("kretprobe/" #fn)                                                                                          \
	int BPF_KRETPROBE(fn##_kretprobe, long ret)                                                                    \
	{                                                                                                              \
		return fops_exit(id, ret);                                                                             \
	}

FOPS_IOCTL(vfio_fops_unl_ioctl, SBT_DRV_CONTAINER_IOCTL)
FOPS_IOCTL(vfio_group_fops_unl_ioctl, SBT_DRV_GROUP_IOCTL)
FOPS_IOCTL(vfio_device_fops_unl_ioctl, SBT_DRV_DEVICE_IOCTL)

/* A container IOMMU backend's ioctl handler: (iommu data, cmd, arg) */
#define IOMMU_IOCTL(fn, enter, id)                                                                                     \
	SEC("fentry/" #fn)                                                                                             \
	int BPF_PROG(fn##_fentry, void *iommu, unsigned int cmd, unsigned long arg)                                    \
	{                                                                                                              \
		return enter(iommu, cmd, arg);                                                                         \
	}                                                                                                              \
	SEC("fexit/" #fn)                                                                                              \
	int BPF_PROG(fn##_fexit, void *iommu, unsigned int cmd, unsigned long arg, long ret)                           \
	{                                                                                                              \
		return drv_pop(id, ret);                                                                               \
	}                                                                                                              \
	SEC("kprobe/" #fn)                                                                                             \
	int BPF_KPROBE(fn##_kprobe, void *iommu, unsigned int cmd, unsigned long arg)                                  \
	{                                                                                                              \
		return enter(iommu, cmd, arg);                                                                         \
	}                                                                                                              \
	SEC("kretprobe/" #fn)                                                                                          \
	int BPF_KRETPROBE(fn##_kretprobe, long ret)                                                                    \
	{                                                                                                              \
		return drv_pop(id, ret);                                                                               \
	}

IOMMU_IOCTL(vfio_iommu_type1_ioctl, type1_enter, SBT_DRV_TYPE1_IOCTL)
/* sPAPR TCE's container ioctls (Power) */
IOMMU_IOCTL(tce_iommu_ioctl, spapr_enter, SBT_DRV_SPAPR_IOCTL)

/* vfio_pin_pages_remote(dma, vaddr, npage, pfn_base, limit, batch): pages pinned */
SEC("fentry/vfio_pin_pages_remote")
int BPF_PROG(vfio_pin_pages_remote_fentry, void *dma, unsigned long vaddr, long npage)
{
	return pages_enter(SBT_DRV_PIN_PAGES, vaddr, npage);
}

SEC("fexit/vfio_pin_pages_remote")
int BPF_PROG(vfio_pin_pages_remote_fexit, void *dma, unsigned long vaddr, long npage, void *pfn_base,
	     unsigned long limit, void *batch, long ret)
{
	return drv_pop(SBT_DRV_PIN_PAGES, ret);
}

SEC("kprobe/vfio_pin_pages_remote")
int BPF_KPROBE(vfio_pin_pages_remote_kprobe, void *dma, unsigned long vaddr, long npage)
{
	return pages_enter(SBT_DRV_PIN_PAGES, vaddr, npage);
}

SEC("kretprobe/vfio_pin_pages_remote")
int BPF_KRETPROBE(vfio_pin_pages_remote_kretprobe, long ret)
{
	return drv_pop(SBT_DRV_PIN_PAGES, ret);
}

/* vfio_unpin_pages_remote(dma, iova, pfn, npage, do_accounting): pages unpinned */
SEC("fentry/vfio_unpin_pages_remote")
int BPF_PROG(vfio_unpin_pages_remote_fentry, void *dma, __u64 iova, unsigned long pfn, long npage)
{
	return pages_enter(SBT_DRV_UNPIN_PAGES, iova, npage);
}

SEC("fexit/vfio_unpin_pages_remote")
int BPF_PROG(vfio_unpin_pages_remote_fexit, void *dma, __u64 iova, unsigned long pfn, long npage, bool do_accounting,
	     long ret)
{
	return drv_pop(SBT_DRV_UNPIN_PAGES, ret);
}

SEC("kprobe/vfio_unpin_pages_remote")
int BPF_KPROBE(vfio_unpin_pages_remote_kprobe, void *dma, __u64 iova, unsigned long pfn, long npage)
{
	return pages_enter(SBT_DRV_UNPIN_PAGES, iova, npage);
}

SEC("kretprobe/vfio_unpin_pages_remote")
int BPF_KRETPROBE(vfio_unpin_pages_remote_kretprobe, long ret)
{
	return drv_pop(SBT_DRV_UNPIN_PAGES, ret);
}

/* mm_iommu_new(mm, ua, entries, pmem): REGISTER_MEMORY pins the pages */
SEC("fentry/mm_iommu_new")
int BPF_PROG(mm_iommu_new_fentry, void *mm, unsigned long ua, unsigned long entries)
{
	return pages_enter(SBT_DRV_SPAPR_PIN, ua, (long)entries);
}

SEC("fexit/mm_iommu_new")
int BPF_PROG(mm_iommu_new_fexit, void *mm, unsigned long ua, unsigned long entries, void *pmem, long ret)
{
	return drv_pop(SBT_DRV_SPAPR_PIN, ret);
}

SEC("kprobe/mm_iommu_new")
int BPF_KPROBE(mm_iommu_new_kprobe, void *mm, unsigned long ua, unsigned long entries)
{
	return pages_enter(SBT_DRV_SPAPR_PIN, ua, (long)entries);
}

SEC("kretprobe/mm_iommu_new")
int BPF_KRETPROBE(mm_iommu_new_kretprobe, long ret)
{
	return drv_pop(SBT_DRV_SPAPR_PIN, ret);
}

/* vfio_msihandler(irq, trigger) */
SEC("fentry/vfio_msihandler")
int BPF_PROG(vfio_msihandler_fentry, int irq, void *arg)
{
	return msi_enter(irq);
}

SEC("fexit/vfio_msihandler")
int BPF_PROG(vfio_msihandler_fexit, int irq, void *arg, int ret)
{
	return msi_exit(ret);
}

SEC("kprobe/vfio_msihandler")
int BPF_KPROBE(vfio_msihandler_kprobe, int irq)
{
	return msi_enter(irq);
}

SEC("kretprobe/vfio_msihandler")
int BPF_KRETPROBE(vfio_msihandler_kretprobe, int ret)
{
	return msi_exit(ret);
}
