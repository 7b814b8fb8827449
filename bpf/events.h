/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The one record format of spyre-bpftrace.
 *
 * Every record, whether a BPF program wrote it into the ring buffer or the
 * loader added it to a capture file, starts with struct sbt_hdr and is
 * followed by a typed payload of hdr.size bytes. In a capture file each
 * record is padded to a multiple of 8 bytes, so a reader can step from
 * record to record without knowing every type.
 *
 * Included by the BPF programs (after vmlinux.h) and by user space.
 */
#ifndef SBT_EVENTS_H
#define SBT_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define SBT_COMM_LEN 16
#define SBT_MAX_ARGS 6
#define SBT_MAX_DEPTH 16 /* per-thread runtime call stack kept in BPF */

/* Record types. Values below 64 come from BPF; 64 and up from the loader. */
enum sbt_type {
	SBT_CALL_ENTER = 1, /* uprobe: runtime function entered */
	SBT_CALL_EXIT = 2, /* uprobe on a return site: runtime function left */
	SBT_IOCTL = 3, /* ioctl on an accelerator fd, at its exit */
	SBT_IRQ = 4, /* interrupt handler ran, at its exit */
	SBT_IOMMU_MAP = 5, /* iommu:map in a traced task */
	SBT_IOMMU_UNMAP = 6, /* iommu:unmap in a traced task */
	SBT_DMA_MAP = 7, /* dma:dma_map_* in a traced task */
	SBT_DMA_UNMAP = 8, /* dma:dma_unmap_* in a traced task */
	SBT_TASK_NEW = 9, /* a traced process made a thread or a child */
	SBT_TASK_COMM = 10, /* a traced thread changed its name (exec, prctl) */
	SBT_TASK_EXIT = 11, /* a traced thread exited */
	SBT_DRV = 12, /* a vfio driver function returned (driver-level probes) */
	SBT_LIB_OPEN = 13, /* a traced process opened a shared object (x.so, x.so.1) */
	SBT_WAKE = 14, /* a card's interrupt woke a traced thread (directly, or through one it woke) */

	SBT_META_CLOCK = 64, /* clock snapshot */
	SBT_META_HOST = 65, /* host name, kernel release, tool version */
	SBT_META_PROC = 66, /* a traced process and its command line */
	SBT_META_PROBE = 67, /* one attached runtime probe */
	SBT_META_IRQ = 68, /* an interrupt number being traced, and its name */
	SBT_THREAD_NAME = 69, /* thread name read from /proc */
	SBT_LOST = 70, /* records the ring buffer could not take */
	SBT_META_END = 71, /* capture closed cleanly: final counters */
	SBT_META_DEVICE = 72, /* a process drives the card at this PCI address */
	SBT_META_NSPID = 73, /* a traced thread's ids inside its pid namespace */
	SBT_TYPE_MAX,
};

/* What a runtime function does; the correlation builds on this. */
enum sbt_role {
	SBT_ROLE_NONE = 0,
	SBT_ROLE_COPY_IN, /* host to device copy */
	SBT_ROLE_COPY_OUT, /* device to host copy */
	SBT_ROLE_COMPUTE, /* compute job launch */
	SBT_ROLE_LAUNCH, /* generic operation launch */
	SBT_ROLE_WAIT, /* waits for the device (synchronize) */
	SBT_ROLE_ALLOC, /* device memory allocation */
	SBT_ROLE_FREE, /* device memory release */
	SBT_ROLE_SUBMIT, /* hands work to the hardware queues */
	SBT_ROLE_COMPLETE, /* collects completions from the hardware */
	SBT_ROLE_MAP, /* maps host memory for DMA */
	SBT_ROLE_UNMAP, /* unmaps host memory */
	SBT_ROLE_USER, /* added with --probe */
	SBT_ROLE_MAX,
};

/* Which accelerator file an ioctl went to. */
enum sbt_fd_kind {
	SBT_FD_NONE = 0,
	SBT_FD_CONTAINER = 1, /* /dev/vfio/vfio */
	SBT_FD_GROUP = 2, /* /dev/vfio/<group> */
	SBT_FD_DEVICE = 3, /* [vfio-device] or /dev/vfio/devices/vfioN */
	SBT_FD_PATH = 4, /* matched a --vfio-path pattern */
	/* a container whose IOMMU is sPAPR TCE (IBM Power): its commands from
	 * VFIO_BASE + 12 on are sPAPR's (REGISTER_MEMORY is type1's
	 * DIRTY_PAGES number). Learned from VFIO_SET_IOMMU; Power kernels
	 * build no other container IOMMU, so one found open there is one. */
	SBT_FD_SPAPR = 5,
};

/* What a container is on this architecture when nothing else tells */
#if defined(__TARGET_ARCH_powerpc) || defined(__powerpc__)
#define SBT_FD_HOST_CONTAINER SBT_FD_SPAPR
#else
#define SBT_FD_HOST_CONTAINER SBT_FD_CONTAINER
#endif

/* VFIO_SET_IOMMU's argument for the sPAPR TCE backends */
#define SBT_VFIO_SPAPR_TCE_IOMMU 2
#define SBT_VFIO_SPAPR_TCE_v2_IOMMU 7

/* Paths of accelerator files: the loader fills these patterns (exact, or
 * PREFIX*SUFFIX), and openat() is matched against them in BPF. The first
 * SBT_VFIO_FD_PATTERNS are VFIO's own; --vfio-path adds the rest. */
#define SBT_MAX_FD_PATTERNS 8
#define SBT_VFIO_FD_PATTERNS 3
#define SBT_FD_PATTERN_LEN 64

/* A directory the daemon is told holds mock VFIO files (--vfio-path):
 * its inode as the kernel numbers it (dev in the kernel's encoding,
 * major << 20 | minor). */
#define SBT_MAX_MOCK_DIRS 4
struct sbt_inode_key {
	__u64 ino;
	__u32 dev;
	__u32 pad;
};

struct sbt_fd_pattern {
	__u32 kind; /* enum sbt_fd_kind */
	__u16 prefix_len;
	__u16 suffix_len;
	__u32 has_star;
	char prefix[SBT_FD_PATTERN_LEN];
	char suffix[SBT_FD_PATTERN_LEN];
};

/* ---- the daemon's always-on tier (bpf/daemon.bpf.h) ------------------- */

/* VFIO ioctls by their number (VFIO_BASE + n): n 0..30 each, the rest in
 * the last slot. Latency in log2 buckets of 4 linear steps each: bucket
 * 4(k-1)+j holds [2^k (1 + j/4), 2^k (1 + (j+1)/4)) ns, buckets 0..3 the
 * values 0..3; the last bucket everything from 2^40 ns (18 min) up. */
#define SBT_DAEMON_OPS 32
/* BPF's cache of the tgids in daemon_procs: slots, a power of two */
#define SBT_DAEMON_SEEN_SLOTS 4096

/* _IO()'s direction bits differ by architecture: "none" is 0 on x86,
 * arm64 and s390, but 1 << 29 on powerpc (VFIO_IOMMU_MAP_DMA is 0x3b71
 * there, 0x20003b71 on Power). BPF objects are built per target
 * (__TARGET_ARCH_powerpc), user space per host (__powerpc__). */
#define SBT_IOC_NONE_PPC (1u << 29)
#if defined(__TARGET_ARCH_powerpc) || defined(__powerpc__)
#define SBT_IOC_NONE SBT_IOC_NONE_PPC
#else
#define SBT_IOC_NONE 0u
#endif

/* VFIO's _IO(';', 100 + n) as this architecture numbers it, or as one
 * whose _IOC_NONE is none. */
#define SBT_VFIO_IO_ON(none, n) ((none) | (0x3b << 8) | (100 + (n)))

/* n of a VFIO command (VFIO_BASE + n), of either numbering: a capture is
 * read on any host. -1 for anything else. */
static inline int sbt_vfio_nr(__u32 cmd)
{
	__u32 dir_size = cmd & 0xffff0000;

	if ((dir_size && dir_size != SBT_IOC_NONE_PPC) || ((cmd >> 8) & 0xff) != 0x3b || (cmd & 0xff) < 100)
		return -1;
	return (int)(cmd & 0xff) - 100;
}

/* The slot of a VFIO command: VFIO_BASE + n, n < 12 as is; from 12 on a
 * device fd's command means something else than a container's (the same
 * number): a container's n, a device's n + 6, an sPAPR container's 17..21
 * n + 7; the last slot the rest. */
static inline __u32 sbt_daemon_op(__u32 cmd, __u32 fd_kind)
{
	int nr = sbt_vfio_nr(cmd);
	__u32 n;

	if (nr < 0)
		return SBT_DAEMON_OPS - 1;
	n = (__u32)nr;
	if (n < 12)
		return n;
	if (n < 18 && !(fd_kind == SBT_FD_SPAPR && n == 17))
		return fd_kind == SBT_FD_DEVICE ? n + 6 : n;
	if (fd_kind == SBT_FD_SPAPR && n < 22)
		return n + 7; /* 24..28 */
	return SBT_DAEMON_OPS - 1;
}
#define SBT_DAEMON_BUCKETS 160
/* cards by a small index the daemon gives them; 0: not known */
#define SBT_DAEMON_CARDS 64

/* count, errors and slow are exact: every call. The timing (bucket,
 * sum_ns) is of the calls timed, 1 in daemon_sample_every (some commands
 * always), each added with its weight (N for 1 in N): timed is their
 * weights' sum, which bucket[] adds up to. */
struct sbt_daemon_hist {
	__u64 count, errors, sum_ns;
	__u64 bucket[SBT_DAEMON_BUCKETS];
	__u64 timed;
	__u64 slow; /* calls at least daemon_slow_ns long (to a clock tick) */
	__u64 missed; /* vfio's functions: runs their probe did not see (vfio_msihandler's) */
};
/* untimed failed VFIO ioctls recorded, per process and second, at most */
#define SBT_DAEMON_FAILS_PER_SEC 256
/* the slots of that count (a power of two): processes whose tgids meet
 * in a slot take turns at it */
#define SBT_DAEMON_FAIL_SLOTS 1024

struct sbt_daemon_card {
	__u64 maps, map_bytes, map_errors;
	__u64 unmaps, unmap_bytes;
	__u64 irqs, irq_ns;
};

/* An open file of a traced process. */
struct sbt_fd_key {
	__u32 tgid;
	__s32 fd;
};

/* VFIO ioctl numbers (linux/vfio.h: _IO(';', 100 + n)); BPF has no uapi. */
#define SBT_VFIO_IO(n) SBT_VFIO_IO_ON(SBT_IOC_NONE, n)
#define SBT_VFIO_SET_IOMMU SBT_VFIO_IO(2)
#define SBT_VFIO_GROUP_SET_CONTAINER SBT_VFIO_IO(4)
#define SBT_VFIO_GROUP_GET_DEVICE_FD SBT_VFIO_IO(6)
#define SBT_VFIO_DEVICE_SET_IRQS SBT_VFIO_IO(10)
#define SBT_VFIO_IOMMU_MAP_DMA SBT_VFIO_IO(13)
#define SBT_VFIO_IOMMU_UNMAP_DMA SBT_VFIO_IO(14)
#define SBT_VFIO_IOMMU_GET_INFO SBT_VFIO_IO(12) /* sPAPR: SPAPR_TCE_GET_INFO */
#define SBT_VFIO_SPAPR_REGISTER_MEMORY SBT_VFIO_IO(17)
#define SBT_VFIO_SPAPR_UNREGISTER_MEMORY SBT_VFIO_IO(18)
#define SBT_VFIO_SPAPR_TCE_CREATE SBT_VFIO_IO(19)
#define SBT_VFIO_SPAPR_TCE_REMOVE SBT_VFIO_IO(20)

/* Decoded ioctl argument, according to sbt_ioctl.decoded. */
enum sbt_ioctl_decoded {
	SBT_DEC_NONE = 0,
	SBT_DEC_DMA_MAP = 1,
	SBT_DEC_DMA_UNMAP = 2,
	SBT_DEC_SET_IRQS = 3,
	SBT_DEC_FAULT = 4, /* argument could not be read from user memory */
	/* sPAPR TCE (Power): u.dma's vaddr and size */
	SBT_DEC_SPAPR_REGISTER = 5,
	SBT_DEC_SPAPR_UNREGISTER = 6,
	/* u.window: GET_INFO's 32-bit DMA window, CREATE's new window (its
	 * start read back after the call), REMOVE's start */
	SBT_DEC_SPAPR_INFO = 7,
	SBT_DEC_SPAPR_CREATE = 8,
	SBT_DEC_SPAPR_REMOVE = 9,
};

/* The vfio driver functions the driver-level probes watch. */
enum sbt_drv_func {
	SBT_DRV_CONTAINER_IOCTL = 1, /* vfio_fops_unl_ioctl: /dev/vfio/vfio */
	SBT_DRV_GROUP_IOCTL = 2, /* vfio_group_fops_unl_ioctl */
	SBT_DRV_DEVICE_IOCTL = 3, /* vfio_device_fops_unl_ioctl */
	SBT_DRV_TYPE1_IOCTL = 4, /* vfio_iommu_type1_ioctl: MAP_DMA, UNMAP_DMA, ... */
	SBT_DRV_PIN_PAGES = 5, /* vfio_pin_pages_remote: pins a mapping's pages */
	SBT_DRV_UNPIN_PAGES = 6, /* vfio_unpin_pages_remote */
	SBT_DRV_MSI = 7, /* vfio_msihandler: the card's MSI, in interrupt context */
	SBT_DRV_SPAPR_IOCTL = 8, /* tce_iommu_ioctl: sPAPR TCE's container ioctls */
	SBT_DRV_SPAPR_PIN = 9, /* mm_iommu_new: REGISTER_MEMORY pins its pages */
	SBT_DRV_FUNC_MAX,
};

/* A PCI address as one number: domain << 16 | bus << 8 | device << 3 | fn */
#define SBT_BDF_NONE 0xffffffffu
#define SBT_MAX_DEV_FILTERS 16

/* --device: a card by PCI address (vendor 0) or by vendor:device (bdf
 * SBT_BDF_NONE). No filters: every device. */
struct sbt_dev_filter {
	__u32 bdf;
	__u16 vendor, device;
};

struct sbt_hdr {
	__u16 type;
	__u16 size; /* payload bytes after this header */
	__u32 cpu;
	__u32 tgid;
	__u32 tid;
	__u64 ts; /* CLOCK_BOOTTIME ns */
};

struct sbt_call_enter {
	struct sbt_hdr h;
	__u32 probe_id;
	__u32 depth; /* calls of this thread open below this one */
	__u64 args[SBT_MAX_ARGS];
};

#define SBT_CALL_UNPAIRED 1 /* no matching entry on the thread's stack */
#define SBT_CALL_TAIL 2 /* left by a jump to another function: ret unknown */

/*
 * Runtime probes. Entries are uprobes on a function's first instruction;
 * returns are uprobes on its return sites, never uretprobes (a uretprobe
 * rewrites the return address on the stack, which breaks C++ unwinding and
 * longjmp in the traced program). The loader finds the sites by decoding
 * the function body: return instructions, jumps out of the body (tail
 * calls), and indirect jumps whose target only BPF can see.
 */
enum sbt_site_kind {
	SBT_SITE_ENTRY = 0,
	SBT_SITE_RET = 1, /* a return instruction */
	SBT_SITE_TAIL = 2, /* a jump that always leaves the body */
	SBT_SITE_INDIRECT = 3, /* jump through a register: leaves if the target is outside */
};

/* A runtime uprobe's BPF cookie: probe id (24 bits), site kind (4), for an
 * indirect jump the register holding the target (4, SBT_REG_*) and the size
 * of the function's body (32). */
#define SBT_COOKIE(id, kind, reg, size) ((__u64)(id) | (__u64)(kind) << 24 | (__u64)(reg) << 28 | (__u64)(size) << 32)
#define SBT_COOKIE_ID(c) ((__u32)((c)&0xffffff))
#define SBT_COOKIE_KIND(c) ((__u32)((c) >> 24) & 0xf)
#define SBT_COOKIE_REG(c) ((__u32)((c) >> 28) & 0xf)
#define SBT_COOKIE_SIZE(c) ((__u32)((c) >> 32))
#define SBT_MAX_PROBE_ID 0xffffff

/* x86-64 general registers, as an indirect jump site names them */
enum sbt_x86_reg {
	SBT_REG_AX,
	SBT_REG_BX,
	SBT_REG_CX,
	SBT_REG_DX,
	SBT_REG_SI,
	SBT_REG_DI,
	SBT_REG_BP,
	SBT_REG_SP,
	SBT_REG_R8,
	SBT_REG_R9,
	SBT_REG_R10,
	SBT_REG_R11,
	SBT_REG_R12,
	SBT_REG_R13,
	SBT_REG_R14,
	SBT_REG_R15,
};

/* Shared objects a traced process opens are sent to the loader at once
 * (SBT_LIB_OPEN), with paths up to this long. */
#define SBT_LIB_PATH_LEN 256

struct sbt_call_exit {
	struct sbt_hdr h;
	__u32 probe_id;
	__u32 depth;
	__u64 entry_ts; /* 0 when unpaired */
	__s64 ret;
	__u32 flags;
	__u32 pad;
};

struct sbt_lib_open {
	struct sbt_hdr h; /* ts: when openat() returned */
	__s32 fd;
	__u32 path_len; /* with the NUL */
	char path[SBT_LIB_PATH_LEN];
};

struct sbt_ioctl {
	struct sbt_hdr h; /* ts: when the call returned */
	__u64 start_ts;
	__s64 ret; /* negative errno on failure */
	__u64 arg;
	__s32 fd;
	__u32 cmd;
	__u16 fd_kind;
	__u16 decoded;
	__u32 pad;
	union {
		struct {
			__u64 vaddr;
			__u64 iova;
			__u64 size;
			__u32 flags;
			__u32 argsz;
		} dma; /* MAP_DMA, UNMAP_DMA (vaddr 0) */
		struct {
			__u32 argsz;
			__u32 flags;
			__u32 index;
			__u32 start;
			__u32 count;
			__u32 pad;
		} irqs; /* DEVICE_SET_IRQS */
		struct {
			__u64 start;
			__u64 size;
			__u32 page_shift; /* CREATE */
			__u32 levels; /* CREATE */
			__u32 flags;
			__u32 argsz;
		} window; /* sPAPR GET_INFO, TCE_CREATE, TCE_REMOVE */
	} u;
};

struct sbt_irq {
	struct sbt_hdr h; /* ts: handler exit; tgid/tid: the interrupted task */
	__u64 start_ts;
	__s32 irq;
	__s32 ret; /* irqreturn_t: 0 none, 1 handled, 2 wake thread */
};

/* A card's interrupt woke a thread of a traced process: in its handler
 * (hop 0: vfio signals the eventfd the thread waits on), or a thread that
 * interrupt woke then woke this one (hop 1: a completion thread handing
 * the news to the thread waiting on its stream). tgid/tid: the woken
 * thread; ts: the wake-up. */
struct sbt_wake {
	struct sbt_hdr h;
	__u64 irq_start_ts; /* the interrupt's handler entry */
	__s32 irq;
	__u32 waker_tid; /* hop 1: the thread that passed it on; hop 0: 0 */
	__u32 hop;
	__u32 pad;
};

struct sbt_drv {
	struct sbt_hdr h; /* ts: the function returned; MSI: tgid/tid interrupted */
	__u64 start_ts;
	__s64 ret;
	/* TYPE1 and SPAPR_IOCTL MAP_DMA: iova, size, vaddr; UNMAP_DMA: iova,
	 * size; SPAPR_IOCTL (UN)REGISTER_MEMORY: vaddr, size; SPAPR_PIN: vaddr,
	 * pages;
	 * PIN_PAGES: vaddr, pages asked; UNPIN_PAGES: iova, pages; MSI: irq */
	__u64 args[3];
	__u32 func; /* enum sbt_drv_func */
	__u32 cmd; /* the ioctls' cmd */
	__u32 bdf; /* the card, SBT_BDF_NONE if not known here */
	__u16 vendor, device; /* its PCI ids, 0 if not known */
	__u16 level; /* driver functions of this thread open around this one */
	__u16 decoded; /* TYPE1, SPAPR_IOCTL: SBT_DEC_* if args were read */
	__u16 cards; /* 1: bdf is the one card; SBT_DRV_SHARED: several (bdf none) */
	__u16 pad;
};

/* A container (or group) holding several cards: its mappings are theirs. */
#define SBT_DRV_SHARED 2

struct sbt_iommu {
	struct sbt_hdr h;
	__u64 iova;
	__u64 paddr; /* map only */
	__u64 size;
	__u64 unmapped; /* unmap only */
};

struct sbt_dma {
	struct sbt_hdr h;
	__u64 addr;
	__u64 phys;
	__u64 size;
	__u32 dir;
	__u32 pad;
};

struct sbt_task {
	struct sbt_hdr h; /* tgid/tid: the new, renamed or exiting thread */
	__u32 ppid; /* TASK_NEW: the parent process */
	__u32 flags; /* TASK_NEW: 1 = new process; TASK_EXIT: 1 = last thread */
	char comm[SBT_COMM_LEN];
};

/* ---- records only the loader writes ---------------------------------- */

struct sbt_meta_clock {
	struct sbt_hdr h;
	__u64 boottime;
	__u64 monotonic;
	__u64 realtime;
	__u64 spread_ns; /* how far apart the three reads were */
};

struct sbt_meta_host {
	struct sbt_hdr h;
	char hostname[64];
	char release[64];
	char version[32];
	__u32 clock_id; /* the clock of every ts: 7 = CLOCK_BOOTTIME */
	__u32 pad;
};

/* variable length: cmdline follows, NUL separated */
struct sbt_meta_proc {
	struct sbt_hdr h;
	__u32 pid;
	__u32 cmdline_len;
	char comm[SBT_COMM_LEN];
	char cmdline[];
};

/* variable length: name, pattern and library path follow, each NUL ended */
struct sbt_meta_probe {
	struct sbt_hdr h;
	__u64 offset; /* file offset of the probed instruction */
	__u32 id;
	__u16 role;
	__s16 bytes_arg; /* argument holding a byte count, -1 if none */
	__u32 strings_len;
	__u32 pad;
	char strings[];
};

struct sbt_meta_irq {
	struct sbt_hdr h;
	__u32 irq;
	__u32 pad;
	char name[64];
};

struct sbt_thread_name {
	struct sbt_hdr h;
	char comm[SBT_COMM_LEN];
};

struct sbt_lost {
	struct sbt_hdr h;
	__u64 count; /* lost since the previous SBT_LOST record */
	__u64 total;
};

/* Written when the card behind a process's VFIO fds is known (driver-level
 * probes): its jobs and the card's interrupts then meet on one device. */
struct sbt_meta_device {
	struct sbt_hdr h;
	__u32 pid;
	__u16 vendor, device; /* PCI ids, 0 if unknown */
	char bdf[16]; /* 0000:01:00.0 */
};

/* Written for threads of a process that lives in a pid namespace below
 * the tracer's (a container): the ids it calls itself by, which are what
 * an in-process profiler (kineto) writes down. BPF writes it for each new
 * thread, the loader for the threads there when it attached. */
struct sbt_meta_nspid {
	struct sbt_hdr h; /* tgid/tid: as the tracer sees them */
	__u32 ns_tgid, ns_tid; /* in the innermost namespace */
	__u32 level; /* namespaces below the tracer's */
	__u32 pad;
};

struct sbt_meta_end {
	struct sbt_hdr h;
	__u64 records; /* BPF records written to the capture */
	__u64 lost;
	__u64 duration_ns;
};

#endif /* SBT_EVENTS_H */
