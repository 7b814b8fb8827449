/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --device: which cards the driver-level and interrupt probes keep, by PCI
 * address (0000:01:00.0, or 01:00.0) or by vendor:device (1014:06a7).
 * BPF matches both (bpf/device.bpf.h); where an event carries only an
 * address (an interrupt's name), the loader lists the addresses of the cards
 * present that match each vendor:device.
 */
#ifndef SBT_DEVFILTER_H
#define SBT_DEVFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.h"

/* Spyre's vendor:device ids: the default when no --device is given */
#define SBT_SPYRE_VENDOR 0x1014
#define SBT_SPYRE_DEVICE_A 0x06a7
#define SBT_SPYRE_DEVICE_B 0x06a8

struct devfilter {
	struct sbt_dev_filter f[SBT_MAX_DEV_FILTERS];
	int n; /* 0: every device */
};

/* One --device argument: "all" sets *every, anything else is a filter
 * added to d. 0, or -1 with a one-line message (and hint) in err. */
int devfilter_add_arg(struct devfilter *d, bool *every, const char *arg, char *err, size_t errlen);
/* After the options: "all" beside filters is refused (-1, err filled);
 * neither given means Spyre's two vendor:device ids. */
int devfilter_finish(struct devfilter *d, bool every, char *err, size_t errlen);
/* One --device argument into f; 0, or -1 if it is neither form. */
int devfilter_parse(const char *spec, struct sbt_dev_filter *f);
/* "DDDD:BB:DD.F" (or "BB:DD.F") to one number, or SBT_BDF_NONE; back with
 * sbt_bdf_str (names.h) */
uint32_t devfilter_bdf(const char *s);
/* Add the address of every present PCI device (under sysfs_root, normally
 * /sys/bus/pci/devices) matching a vendor:device filter; returns how many. */
int devfilter_expand(struct devfilter *d, const char *sysfs_root);
/* Whether the card at this address is wanted, by address alone. */
bool devfilter_wants_bdf(const struct devfilter *d, uint32_t bdf);
/* "1014:06a7, 0000:01:00.0" or "every device" */
void devfilter_describe(const struct devfilter *d, char *out, size_t len);

#endif
