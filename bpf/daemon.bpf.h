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
/* 1 in this many VFIO ioctls (a power of two) is timed on the precise
 * clock, put in its command's histogram with this weight and recorded;
 * the others are counted only. DMA map and unmap and IRQ setup are always
 * timed, and every ioctl while a detail window is open. 1: all. */
const volatile __u32 daemon_sample_every __weak = 1;
/* An ioctl at least this long is slow (the trigger's): every ioctl is
 * measured for it, untimed ones on the coarse clock (to a tick). 0: off. */
const volatile __u64 daemon_slow_ns __weak = 0;

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

/* Bumped when daemon_procs gains or loses a process here, and when
 * daemon_proc_card or daemon_fd_card gains or changes an entry: the daemon
 * walks a map (a read of each of its buckets, cold memory every time) only
 * after it moved, not at each look. */
volatile __u64 daemon_procs_gen __weak = 0;
volatile __u64 daemon_cards_gen __weak = 0;

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
	__u64 file; /* the struct file it is (daemon_cpus') */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* struct file * */
	__type(value, struct daemon_file_kind);
} daemon_file_kinds SEC(".maps") __weak;

/* Each CPU's own, in one line: the VFIO file it looked at last and what
 * it was (a process making ioctls on one file, a job on its card, has it
 * found with no map lookup and one read fewer: valid for the same struct
 * file with the same inode and handlers, as a struct file freed and
 * reused for another file has another inode); whose ioctl that was, known
 * to be in daemon_procs while daemon_procs_gen is still seen_gen (no
 * lookup there either); and the count that picks 1 in
 * daemon_sample_every. */
struct daemon_cpu {
	struct daemon_file_kind last;
	__u64 seen_gen;
	__u32 tgid;
	__u32 tick;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct daemon_cpu);
} daemon_cpus SEC(".maps") __weak;

/* A file's handlers and inode into k, in one read where they lie within
 * 64 bytes of each other (they do: 6.1 to 6.18), else two. 0, or -1 when
 * the file cannot be read. */
static __always_inline int daemon_file_fields(struct file *file, struct daemon_file_kind *k)
{
	__u32 op = bpf_core_field_offset(struct file, f_op), in = bpf_core_field_offset(struct file, f_inode);
	__u32 lo = op < in ? op : in;
	__u64 w[8];

	if (op - lo < 64 && in - lo < 64) {
		if (bpf_probe_read_kernel(w, sizeof(w), (char *)file + lo))
			return -1;
		k->fop = w[((op - lo) / 8) & 7];
		k->inode = w[((in - lo) / 8) & 7];
		return 0;
	}
	k->fop = (__u64)BPF_CORE_READ(file, f_op);
	k->inode = (__u64)BPF_CORE_READ(file, f_inode);
	return 0;
}

/*
 * Which VFIO file an fd is: by the kernel's own word, the handler its
 * ioctls go to (daemon_vfio_fns); or, for a file below a --vfio-path
 * directory, by its name. Anything else is no VFIO file, whatever ioctl
 * numbers it is sent (SBT_FD_NONE). The fd is read at each ioctl (its
 * number is reused, and the daemon does not watch close). The fd table is
 * read through the task's BTF pointer (plain loads, no helper call); only
 * the fd's slot and the file's fields need bpf_probe_read. The answer for
 * the file is kept per CPU (daemon_cpus, *cpu): the same file next time
 * costs its two fields' reads.
 */
static __always_inline __u32 daemon_fd_kind(int fd, __u32 *group, struct daemon_cpu **cpu)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = task->files->fdt;
	struct file **fds = fdt->fd, *file = NULL;
	unsigned int max = fdt->max_fds;
	const struct file_operations *fop;
	struct daemon_file_kind *seen, *last = NULL, now = {};
	__u32 zero = 0;
	__u64 key;

	*group = 0;
	*cpu = bpf_map_lookup_elem(&daemon_cpus, &zero);
	if (*cpu)
		last = &(*cpu)->last;
	if (fd < 0 || (unsigned int)fd >= max || bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return SBT_FD_NONE;
	if (daemon_file_fields(file, &now))
		return SBT_FD_NONE;
	fop = (const struct file_operations *)now.fop;
	key = (__u64)file;
	if (last && last->file == key && last->inode == now.inode && last->fop == now.fop) {
		*group = last->group;
		return last->kind;
	}
	now.file = key;
	now.kind = daemon_kind_by_fop(file, fop, group);
	if (now.kind == SBT_FD_NONE && daemon_n_mock_dirs) {
		seen = bpf_map_lookup_elem(&daemon_file_kinds, &key);
		if (seen && seen->inode == now.inode && seen->fop == now.fop) {
			*group = seen->group;
			now.kind = seen->kind;
		} else {
			now.kind = daemon_in_mock_dir(file) ? daemon_kind_by_name(file, group) : SBT_FD_NONE;
			now.group = *group; /* what the map keeps */
			bpf_map_update_elem(&daemon_file_kinds, &key, &now, BPF_ANY);
		}
	}
	now.group = *group;
	/* only a VFIO file: "not VFIO's" may change for the same file, once
	 * vfio's handlers are learnt (vfio loaded after the daemon) */
	if (last && now.kind != SBT_FD_NONE)
		*last = now;
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
	if (ret >= 0 && !bpf_map_update_elem(&daemon_fd_card, &key, &card, BPF_ANY))
		__sync_fetch_and_add(&daemon_cards_gen, 1);
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
	if (!bpf_map_delete_elem(&daemon_procs, &tgid))
		__sync_fetch_and_add(&daemon_procs_gen, 1);
	if (seen && *seen == tgid)
		*seen = 0;
}

static __always_inline void daemon_seen(__u32 tgid, struct daemon_cpu *cpu)
{
	__u32 one = 1, k = tgid & (SBT_DAEMON_SEEN_SLOTS - 1), *seen;

	if (cpu && cpu->tgid == tgid && cpu->seen_gen == daemon_procs_gen)
		return; /* this CPU saw it there, and nothing left the map since */
	seen = bpf_map_lookup_elem(&daemon_seen_slots, &k);
	if (!seen || *seen != tgid) {
		if (!bpf_map_lookup_elem(&daemon_procs, &tgid) &&
		    !bpf_map_update_elem(&daemon_procs, &tgid, &one, BPF_NOEXIST))
			__sync_fetch_and_add(&daemon_procs_gen, 1);
		if (seen)
			*seen = tgid;
	}
	if (cpu) {
		cpu->tgid = tgid;
		cpu->seen_gen = daemon_procs_gen;
	}
}

/* One call into a histogram (NULL: none): counted; its time dur added
 * with its weight (0: not timed). */
static __always_inline void daemon_hist_add(struct sbt_daemon_hist *h, long ret, bool slow, __u64 dur, __u32 weight)
{
	__u32 b;

	if (!h)
		return;
	h->count++;
	if (ret < 0)
		h->errors++;
	if (slow)
		h->slow++;
	if (!weight)
		return;
	b = daemon_bucket(dur);
	/* checked again here, on the register used: the compiler drops the
	 * repeated check, and older verifiers then refuse the access */
	asm volatile("" : "+r"(b));
	h->timed += weight;
	h->sum_ns += dur * weight;
	if (b < SBT_DAEMON_BUCKETS)
		h->bucket[b] += weight;
}

/* A call of one of vfio's functions returned (driver-level probes): each
 * timed. */
static __always_inline void daemon_drv_call(__u32 func, __u64 start, long ret)
{
	__u64 now = bpf_ktime_get_boot_ns();

	daemon_hist_add(bpf_map_lookup_elem(&daemon_drv, &func), ret, false, now > start ? now - start : 0, 1);
}

/* A call of one of vfio's functions that ran unseen by its probe. */
static __always_inline void daemon_drv_missed(__u32 func)
{
	struct sbt_daemon_hist *h = bpf_map_lookup_elem(&daemon_drv, &func);

	if (h)
		h->missed++;
}

/* ns a tick (1e9 / CONFIG_HZ, attach/kernel_hz.c); 0: not known. */
const volatile __u64 daemon_ns_per_jiffy __weak = 0;

/* The tick clock: jiffies, a load and no clock read (tracing programs may
 * not read the coarse clock), in ns since boot to a tick; the precise
 * clock where the tick's length is not known. */
static __always_inline __u64 daemon_coarse_ns(void)
{
	return daemon_ns_per_jiffy ? bpf_jiffies64() * daemon_ns_per_jiffy : bpf_ktime_get_ns();
}

/* The weight an ioctl's time is added with: 1 for one always timed (DMA
 * map and unmap, IRQ setup; any while a detail window is open, whose
 * processes' ioctls are all recorded and whose newcomers are learnt from
 * them), daemon_sample_every for the 1 in that many sampled, 0 for the
 * rest, which are counted only. */
static __always_inline __u32 daemon_weight(__u32 cmd)
{
	struct daemon_cpu *cpu;
	__u32 zero = 0;

	if (daemon_sample_every <= 1 || catch_newcomers || cmd == SBT_VFIO_IOMMU_MAP_DMA ||
	    cmd == SBT_VFIO_IOMMU_UNMAP_DMA || cmd == SBT_VFIO_DEVICE_SET_IRQS)
		return 1;
	cpu = bpf_map_lookup_elem(&daemon_cpus, &zero);
	if (!cpu)
		return 1;
	return (++cpu->tick & (daemon_sample_every - 1)) ? 0 : daemon_sample_every;
}

/* Untimed failures recorded of a process this second, by tgid's slot. */
struct daemon_fail_count {
	__u32 tgid, n;
	__u64 sec;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SBT_DAEMON_FAIL_SLOTS);
	__type(key, __u32);
	__type(value, struct daemon_fail_count);
} daemon_fail_counts SEC(".maps") __weak;

/* May this untimed failure be recorded: fewer than
 * SBT_DAEMON_FAILS_PER_SEC of its process this second? (Racy between
 * CPUs, which may let a few more through.) */
static __always_inline bool daemon_fail_recorded(__u32 tgid, __u64 coarse_now)
{
	__u32 k = tgid & (SBT_DAEMON_FAIL_SLOTS - 1);
	struct daemon_fail_count *f = bpf_map_lookup_elem(&daemon_fail_counts, &k);
	__u64 sec = coarse_now / 1000000000;

	if (!f)
		return false;
	if (f->tgid != tgid || f->sec != sec) {
		f->tgid = tgid;
		f->sec = sec;
		f->n = 0;
	}
	return f->n++ < SBT_DAEMON_FAILS_PER_SEC;
}

/* An ioctl on a VFIO file returned: dur its time (precise when weight is
 * not 0, else to a tick), slow when at least daemon_slow_ns. */
static __always_inline void daemon_ioctl(__u32 tgid, __u32 tid, const struct sbt_ioctl *p, long ret, bool slow,
					 __u64 dur, __u32 weight)
{
	__u32 op = sbt_daemon_op(p->cmd, p->fd_kind);
	struct sbt_daemon_card *c;
	__u32 card;

	daemon_hist_add(bpf_map_lookup_elem(&daemon_ioctls, &op), ret, slow, dur, weight);
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

/* An ioctl on /dev/vfio/N: the process drives N's card (written when
 * that is news, not at each of its group's ioctls). */
static __always_inline void daemon_group_opened(__u32 tgid, __u32 group)
{
	__u32 *card = bpf_map_lookup_elem(&daemon_group_card, &group), *was;

	if (!card)
		return;
	was = bpf_map_lookup_elem(&daemon_proc_card, &tgid);
	if ((!was || *was != *card) && !bpf_map_update_elem(&daemon_proc_card, &tgid, card, BPF_ANY))
		__sync_fetch_and_add(&daemon_cards_gen, 1);
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
