/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Which PCI device an event belongs to, and whether it is wanted (--device).
 *
 * A device is named by its PCI address, parsed from the kernel's own
 * "DDDD:BB:DD.F" device name, and by its vendor:device ids where the event
 * reaches the struct pci_dev. Shared by the interrupt and driver paths.
 */
#ifndef SBT_DEVICE_BPF_H
#define SBT_DEVICE_BPF_H

#include "common.bpf.h"

/* --device filters, set by the loader; none: every device */
const volatile __u32 n_dev_filters __weak = 0;
const volatile struct sbt_dev_filter dev_filters[SBT_MAX_DEV_FILTERS] __weak = {};

static __always_inline bool sbt_device_wanted(__u32 bdf, __u16 vendor, __u16 device)
{
	if (!n_dev_filters)
		return true;
	for (__u32 i = 0; i < SBT_MAX_DEV_FILTERS; i++) {
		if (i >= n_dev_filters)
			break;
		if (dev_filters[i].bdf != SBT_BDF_NONE
			    ? dev_filters[i].bdf == bdf
			    : dev_filters[i].vendor == vendor && dev_filters[i].device == device)
			return true;
	}
	return false;
}

static __always_inline int sbt_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* n hex digits at s, or -1 */
static __always_inline int sbt_hex_n(const char *s, int n)
{
	int v = 0;

#pragma unroll
	for (int i = 0; i < 4; i++) {
		int x;

		if (i >= n)
			break;
		x = sbt_hex(s[i]);
		if (x < 0)
			return -1;
		v = v << 4 | x;
	}
	return v;
}

/* "DDDD:BB:DD.F" at s (12 readable bytes) to one number, or SBT_BDF_NONE */
static __always_inline __u32 sbt_parse_bdf(const char *s)
{
	int domain = sbt_hex_n(s, 4), bus = sbt_hex_n(s + 5, 2);
	int dev = sbt_hex_n(s + 8, 2), fn = sbt_hex_n(s + 11, 1);

	if (s[4] != ':' || s[7] != ':' || s[10] != '.' || domain < 0 || bus < 0 || dev < 0 || dev > 31 || fn < 0 ||
	    fn > 7)
		return SBT_BDF_NONE;
	return (__u32)domain << 16 | (__u32)bus << 8 | (__u32)dev << 3 | (__u32)fn;
}

/* The interrupt handler running on this CPU (hard handlers do not nest),
 * and its card, from the name vfio-pci gives its vectors: vfio-msi[N](BDF). */
struct irq_start {
	__u64 ts;
	__s32 irq;
	__u32 active;
	__u32 bdf;
	__u32 msi; /* IRQ_MSI: a vector of vfio's MSI handler; IRQ_MSI_SEEN: its probe counted the run */
};

enum { IRQ_MSI = 1, IRQ_MSI_SEEN = 2 };

/* vfio's MSI handler is probed (fentry or kprobe; the loader's plan): a
 * run of it the probe did not count (a kprobe does not fire inside
 * another's handler) is counted as missed at the interrupt's end. */
const volatile bool drv_msi_probed __weak = false;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct irq_start);
} irq_starts SEC(".maps") __weak;

#endif /* SBT_DEVICE_BPF_H */
