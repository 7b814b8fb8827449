/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The daemon's always-on tier: counters and latency histograms summed in
 * the kernel, per CPU, which the daemon reads and adds up on each scrape.
 * Nothing per event crosses to user space. In daemon mode every process's
 * VFIO ioctls are counted (told by their number, the file looked at then),
 * with no hook on opens; records are written for traced processes only
 * (none, in this tier).
 *
 * A process's card: the daemon lists which VFIO group holds which card
 * (daemon_group_card, from sysfs); an ioctl on /dev/vfio/N gives the process
 * the card of group N (daemon_proc_card). Interrupts find their card by the
 * PCI address vfio-pci puts in the handler's name (daemon_bdf_card).
 */
#ifndef SBT_DAEMON_BPF_H
#define SBT_DAEMON_BPF_H

#include "common.bpf.h"

const volatile bool daemon_mode __weak = false;
/* the daemon keeps a flight recorder: VFIO ioctls and the cards'
 * interrupts go to the ring buffer too (a few per job) */
const volatile bool daemon_record __weak = false;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SBT_DAEMON_OPS);
	__type(key, __u32);
	__type(value, struct sbt_daemon_hist);
} daemon_ioctls SEC(".maps") __weak;

/* vfio's own functions (driver-level probes), by enum sbt_drv_func */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SBT_DRV_FUNC_MAX);
	__type(key, __u32);
	__type(value, struct sbt_daemon_hist);
} daemon_drv SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SBT_DAEMON_CARDS);
	__type(key, __u32);
	__type(value, struct sbt_daemon_card);
} daemon_cards SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* VFIO group number */
	__type(value, __u32); /* card index */
} daemon_group_card SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32); /* tgid */
	__type(value, __u32); /* card index */
} daemon_proc_card SEC(".maps") __weak;

/* Processes that made a VFIO ioctl: tgid -> 1. A detail window records
 * these (and only these), the exit hook forgets them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u32);
} daemon_procs SEC(".maps") __weak;

/* A container's card: the group set to it last (VFIO_GROUP_SET_CONTAINER),
 * so a process with a container per card maps on the right one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct sbt_fd_key); /* the container fd */
	__type(value, __u32); /* card index */
} daemon_fd_card SEC(".maps") __weak;

/* SET_CONTAINER in flight: tid -> (container fd, card index) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} daemon_set_container SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SBT_DAEMON_CARDS);
	__type(key, __u32); /* PCI address, as sbt_parse_bdf gives it */
	__type(value, __u32); /* card index */
} daemon_bdf_card SEC(".maps") __weak;

/* VFIO's ioctl numbers, as this architecture numbers them: _IO(';', 100 + n)
 * (linux/vfio.h; iommufd's start at 0x80) */
static __always_inline bool daemon_vfio_cmd(__u32 cmd)
{
	int nr = sbt_vfio_nr(cmd);

	return (cmd & 0xffff0000) == SBT_IOC_NONE && nr >= 0 && nr < 0x80 - 100;
}

/* vfio's unlocked_ioctl handlers: [0] the container's (/dev/vfio/vfio),
 * [1] a group's (/dev/vfio/N), [2] a device's ([vfio-device], or
 * /dev/vfio/devices/vfioN). From /proc/kallsyms; 0 while vfio is not
 * loaded. A file whose f_op has one of them is VFIO's, whatever its name
 * or path: nothing else reaches these functions. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} daemon_vfio_fns SEC(".maps") __weak;

/* --vfio-path directories (the simulator's mock files): a file below one
 * counts as VFIO's by its name, as /dev/vfio's would. */
const volatile __u32 daemon_n_mock_dirs __weak = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SBT_MAX_MOCK_DIRS);
	__type(key, struct sbt_inode_key);
	__type(value, __u32);
} daemon_mock_dirs SEC(".maps") __weak;

/* The kind by the file's name: "vfio" the container, digits a group (N in
 * *group), anything else a device. */
static __always_inline __u32 daemon_kind_by_name(struct file *file, __u32 *group)
{
	const unsigned char *name = BPF_CORE_READ(file, f_path.dentry, d_name.name);
	char n[16] = {};
	__u32 g = 0;

	if (!name || bpf_probe_read_kernel_str(n, sizeof(n), name) < 2)
		return SBT_FD_PATH;
	if (n[0] == 'v' && n[1] == 'f' && n[2] == 'i' && n[3] == 'o' && n[4] == 0)
		return SBT_FD_HOST_CONTAINER;
	for (int i = 0; i < 8; i++) {
		if (n[i] == 0)
			break;
		if (n[i] < '0' || n[i] > '9')
			return SBT_FD_PATH;
		g = g * 10 + (__u32)(n[i] - '0');
	}
	*group = g;
	return SBT_FD_GROUP;
}

/* Is the file below a --vfio-path directory? Its parents, up to 8. */
static __always_inline bool daemon_in_mock_dir(struct file *file)
{
	struct dentry *d = BPF_CORE_READ(file, f_path.dentry), *up;
	struct sbt_inode_key key = {};

	for (int i = 0; i < 8 && d; i++) {
		up = BPF_CORE_READ(d, d_parent);
		if (!up || up == d)
			return false;
		d = up;
		key.ino = BPF_CORE_READ(d, d_inode, i_ino);
		key.dev = BPF_CORE_READ(d, d_sb, s_dev);
		if (bpf_map_lookup_elem(&daemon_mock_dirs, &key))
			return true;
	}
	return false;
}

/* The kind of a file by the handler its ioctls go to (daemon_vfio_fns):
 * vfio's own say so, whatever the file's name or path. */
static __always_inline __u32 daemon_kind_by_fop(struct file *file, const struct file_operations *fop, __u32 *group)
{
	__u64 fn = (__u64)BPF_CORE_READ(fop, unlocked_ioctl);

	for (__u32 i = 0; fn && i < 3; i++) {
		__u32 k = i; /* a copy for the lookup, as in classify_path */
		__u64 *want = bpf_map_lookup_elem(&daemon_vfio_fns, &k);

		if (!want || *want != fn)
			continue;
		if (i == 0)
			return SBT_FD_HOST_CONTAINER;
		if (i == 2)
			return SBT_FD_DEVICE;
		daemon_kind_by_name(file, group); /* /dev/vfio/N: N */
		return SBT_FD_GROUP;
	}
	return SBT_FD_NONE;
}

/* What a file below a --vfio-path directory was found to be, by its
 * struct file: the walk up its parents is done once, not at each ioctl.
 * Valid while the file has the inode and handlers it had then (a struct
 * file freed and reused for another file has others). */
struct daemon_file_kind {
	__u64 inode, fop;
	__u32 kind, group;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* struct file * */
	__type(value, struct daemon_file_kind);
} daemon_file_kinds SEC(".maps") __weak;

/*
 * Which VFIO file an fd is: by the kernel's own word, the handler its
 * ioctls go to (daemon_vfio_fns); or, for a file below a --vfio-path
 * directory, by its name. Anything else is no VFIO file, whatever ioctl
 * numbers it is sent (SBT_FD_NONE). The fd is read at each ioctl (its
 * number is reused, and the daemon does not watch close). The fd table is
 * read through the task's BTF pointer (plain loads, no helper call); only
 * the fd's slot and the file's fields need bpf_probe_read.
 */
static __always_inline __u32 daemon_fd_kind(int fd, __u32 *group)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = task->files->fdt;
	struct file **fds = fdt->fd, *file = NULL;
	unsigned int max = fdt->max_fds;
	const struct file_operations *fop;
	struct daemon_file_kind *seen, now = {};
	__u64 key;

	*group = 0;
	if (fd < 0 || (unsigned int)fd >= max || bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return SBT_FD_NONE;
	fop = BPF_CORE_READ(file, f_op);
	now.kind = daemon_kind_by_fop(file, fop, group);
	if (now.kind != SBT_FD_NONE || !daemon_n_mock_dirs)
		return now.kind;
	key = (__u64)file;
	now.inode = (__u64)BPF_CORE_READ(file, f_inode);
	now.fop = (__u64)fop;
	seen = bpf_map_lookup_elem(&daemon_file_kinds, &key);
	if (seen && seen->inode == now.inode && seen->fop == now.fop) {
		*group = seen->group;
		return seen->kind;
	}
	now.kind = daemon_in_mock_dir(file) ? daemon_kind_by_name(file, group) : SBT_FD_NONE;
	now.group = *group;
	bpf_map_update_elem(&daemon_file_kinds, &key, &now, BPF_ANY);
	return now.kind;
}

/* floor(log2(v)) for v > 0, without loops */
static __always_inline __u32 daemon_log2(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) {
		v >>= 32;
		r += 32;
	}
	if (v >> 16) {
		v >>= 16;
		r += 16;
	}
	if (v >> 8) {
		v >>= 8;
		r += 8;
	}
	if (v >> 4) {
		v >>= 4;
		r += 4;
	}
	if (v >> 2) {
		v >>= 2;
		r += 2;
	}
	if (v >> 1)
		r += 1;
	return r;
}

static __always_inline __u32 daemon_bucket(__u64 ns)
{
	__u32 k, b;

	if (ns < 4)
		return (__u32)ns;
	k = daemon_log2(ns);
	b = 4 * (k - 1) + (__u32)((ns >> (k - 2)) & 3);
	return b < SBT_DAEMON_BUCKETS ? b : SBT_DAEMON_BUCKETS - 1;
}

/* The card an ioctl on this fd is for: its container's, else the process's. */
static __always_inline __u32 daemon_card_of(__u32 tgid, __s32 fd)
{
	struct sbt_fd_key key = { tgid, fd };
	__u32 *c = bpf_map_lookup_elem(&daemon_fd_card, &key);

	if (!c)
		c = bpf_map_lookup_elem(&daemon_proc_card, &tgid);
	return c && *c < SBT_DAEMON_CARDS ? *c : 0;
}

/* A group is being set to a container: remember which, for its return. */
static __always_inline void daemon_set_container_enter(__u32 tid, __u32 group, __u64 arg)
{
	__u32 *card = bpf_map_lookup_elem(&daemon_group_card, &group);
	__s32 container = -1;
	__u64 v;

	if (!card || bpf_probe_read_user(&container, sizeof(container), (void *)arg) || container < 0)
		return;
	v = (__u64)*card << 32 | (__u32)container;
	bpf_map_update_elem(&daemon_set_container, &tid, &v, BPF_ANY);
}

static __always_inline void daemon_set_container_exit(__u32 tgid, __u32 tid, long ret)
{
	__u64 *v = bpf_map_lookup_elem(&daemon_set_container, &tid);
	struct sbt_fd_key key;
	__u32 card;

	if (!v)
		return;
	key.tgid = tgid;
	key.fd = (__s32)(__u32)*v;
	card = (__u32)(*v >> 32);
	if (ret >= 0)
		bpf_map_update_elem(&daemon_fd_card, &key, &card, BPF_ANY);
	bpf_map_delete_elem(&daemon_set_container, &tid);
}

/* tgids known to be in daemon_procs, one per slot (tgid modulo the
 * size): an ioctl of a process already there costs an array load, not a
 * hash lookup. A slot is cleared whenever its tgid leaves daemon_procs
 * (here at exit, by the daemon's sweep). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SBT_DAEMON_SEEN_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} daemon_seen_slots SEC(".maps") __weak;

/* A process is gone: its card slot is free for the next with its pid. */
static __always_inline void daemon_forget(__u32 tgid)
{
	__u32 k = tgid & (SBT_DAEMON_SEEN_SLOTS - 1), *seen = bpf_map_lookup_elem(&daemon_seen_slots, &k);

	bpf_map_delete_elem(&daemon_proc_card, &tgid);
	bpf_map_delete_elem(&daemon_procs, &tgid);
	if (seen && *seen == tgid)
		*seen = 0;
}

static __always_inline void daemon_seen(__u32 tgid)
{
	__u32 one = 1, k = tgid & (SBT_DAEMON_SEEN_SLOTS - 1), *seen = bpf_map_lookup_elem(&daemon_seen_slots, &k);

	if (seen && *seen == tgid)
		return;
	if (!bpf_map_lookup_elem(&daemon_procs, &tgid))
		bpf_map_update_elem(&daemon_procs, &tgid, &one, BPF_ANY);
	if (seen)
		*seen = tgid;
}

/* One call of dur ns into a histogram (NULL: none). */
static __always_inline void daemon_hist_add(struct sbt_daemon_hist *h, __u64 dur, long ret)
{
	__u32 b;

	if (!h)
		return;
	b = daemon_bucket(dur);
	/* checked again here, on the register used: the compiler drops the
	 * repeated check, and older verifiers then refuse the access */
	asm volatile("" : "+r"(b));
	h->count++;
	h->sum_ns += dur;
	if (ret < 0)
		h->errors++;
	if (b < SBT_DAEMON_BUCKETS)
		h->bucket[b]++;
}

/* A call of one of vfio's functions returned (driver-level probes). */
static __always_inline void daemon_drv_call(__u32 func, __u64 start, long ret)
{
	__u64 now = bpf_ktime_get_boot_ns();

	daemon_hist_add(bpf_map_lookup_elem(&daemon_drv, &func), now > start ? now - start : 0, ret);
}

/* An ioctl on a VFIO file returned. */
static __always_inline void daemon_ioctl(__u32 tgid, __u32 tid, const struct sbt_ioctl *p, long ret, __u64 now)
{
	__u32 op = sbt_daemon_op(p->cmd, p->fd_kind);
	__u64 dur = now > p->start_ts ? now - p->start_ts : 0;
	struct sbt_daemon_card *c;
	__u32 card;

	daemon_hist_add(bpf_map_lookup_elem(&daemon_ioctls, &op), dur, ret);
	if (p->cmd == SBT_VFIO_GROUP_SET_CONTAINER)
		daemon_set_container_exit(tgid, tid, ret);
	if (p->decoded != SBT_DEC_DMA_MAP && p->decoded != SBT_DEC_DMA_UNMAP)
		return;
	card = daemon_card_of(tgid, p->fd);
	c = bpf_map_lookup_elem(&daemon_cards, &card);
	if (!c)
		return;
	if (p->decoded == SBT_DEC_DMA_MAP) {
		if (ret < 0) {
			c->map_errors++;
			return;
		}
		c->maps++;
		c->map_bytes += p->u.dma.size;
	} else if (ret >= 0) {
		c->unmaps++;
		c->unmap_bytes += p->u.dma.size;
	}
}

/* An ioctl on /dev/vfio/N: the process drives N's card. */
static __always_inline void daemon_group_opened(__u32 tgid, __u32 group)
{
	__u32 *card = bpf_map_lookup_elem(&daemon_group_card, &group);

	if (card)
		bpf_map_update_elem(&daemon_proc_card, &tgid, card, BPF_ANY);
}

static __always_inline void daemon_irq(__u32 bdf, __u64 dur)
{
	__u32 *idx = bpf_map_lookup_elem(&daemon_bdf_card, &bdf), card = idx ? *idx : 0;
	struct sbt_daemon_card *c;

	if (card >= SBT_DAEMON_CARDS)
		card = 0;
	c = bpf_map_lookup_elem(&daemon_cards, &card);
	if (c) {
		c->irqs++;
		c->irq_ns += dur;
	}
}

#endif /* SBT_DAEMON_BPF_H */
