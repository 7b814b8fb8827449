/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The kernel's tick rate (CONFIG_HZ), which user space is not told
 * (sysconf's CLK_TCK is USER_HZ, 100 whatever the tick): the daemon's BPF
 * times most VFIO ioctls by the tick (jiffies), the cheapest clock a
 * tracing program may read, and needs the nanoseconds of one.
 */
#ifndef SBT_KERNEL_HZ_H
#define SBT_KERNEL_HZ_H

/* CONFIG_HZ from the kernel's config (/boot/config-RELEASE, else
 * /proc/config.gz), else measured from /proc/timer_list (its jiffies
 * against its clock, twice 50 ms apart, to the nearest of 100, 250, 300,
 * 1000); 0 when neither can say. */
int kernel_hz(void);

#endif
