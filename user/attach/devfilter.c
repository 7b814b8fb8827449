// SPDX-License-Identifier: GPL-2.0-only
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "attach/devfilter.h"
#include "base/procfs.h"
#include "capture/names.h"

uint32_t devfilter_bdf(const char *s)
{
	unsigned int bus, dev, fn;
	uint32_t bdf;
	int n = 0;

	if (sbt_bdf_find(s, &bdf) == s && !s[12]) /* DDDD:BB:DD.F */
		return bdf;
	/* BB:DD.F, in domain 0 */
	if (sscanf(s, "%2x:%2x.%1x%n", &bus, &dev, &fn, &n) != 3 || n != 7 || s[n] || dev > 31 || fn > 7)
		return SBT_BDF_NONE;
	return bus << 8 | dev << 3 | fn;
}

int devfilter_parse(const char *spec, struct sbt_dev_filter *f)
{
	unsigned int vendor, device;
	int n = 0;

	f->bdf = devfilter_bdf(spec);
	f->vendor = f->device = 0;
	if (f->bdf != SBT_BDF_NONE)
		return 0;
	if (sscanf(spec, "%4x:%4x%n", &vendor, &device, &n) == 2 && n == 9 && !spec[n]) {
		f->vendor = (uint16_t)vendor;
		f->device = (uint16_t)device;
		return 0;
	}
	return -1;
}

bool devfilter_wants_bdf(const struct devfilter *d, uint32_t bdf)
{
	if (!d->n)
		return true;
	for (int i = 0; i < d->n; i++)
		if (d->f[i].bdf == bdf)
			return true;
	return false;
}

int devfilter_expand(struct devfilter *d, const char *sysfs_root)
{
	DIR *dir = opendir(sysfs_root);
	struct dirent *e;
	int added = 0, n = d->n;

	if (!dir)
		return 0;
	while ((e = readdir(dir)) && d->n < SBT_MAX_DEV_FILTERS) {
		uint32_t bdf = devfilter_bdf(e->d_name);
		long vendor = 0, device = 0;

		if (bdf == SBT_BDF_NONE || devfilter_wants_bdf(d, bdf))
			continue;
		pci_sysfs_number(sysfs_root, e->d_name, "vendor", 16, &vendor);
		pci_sysfs_number(sysfs_root, e->d_name, "device", 16, &device);
		for (int i = 0; i < n; i++) {
			if (d->f[i].bdf == SBT_BDF_NONE && d->f[i].vendor == vendor && d->f[i].device == device) {
				d->f[d->n].bdf = bdf;
				d->f[d->n].vendor = d->f[d->n].device = 0;
				d->n++;
				added++;
				break;
			}
		}
	}
	closedir(dir);
	return added;
}

void devfilter_describe(const struct devfilter *d, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	if (!d->n) {
		snprintf(out, len, "every device");
		return;
	}
	for (int i = 0; i < d->n && used < len; i++) {
		char one[16];

		if (d->f[i].bdf != SBT_BDF_NONE)
			sbt_bdf_str(d->f[i].bdf, one, sizeof(one));
		else
			snprintf(one, sizeof(one), "%04x:%04x", d->f[i].vendor, d->f[i].device);
		used += (size_t)snprintf(out + used, len - used, "%s%s", i ? ", " : "", one);
	}
}

int devfilter_add_arg(struct devfilter *d, bool *every, const char *arg, char *err, size_t errlen)
{
	if (!strcmp(arg, "all")) {
		*every = true;
		return 0;
	}
	if (d->n == SBT_MAX_DEV_FILTERS / 2) {
		snprintf(err, errlen, "too many --device (at most %d)", SBT_MAX_DEV_FILTERS / 2);
		return -1;
	}
	if (devfilter_parse(arg, &d->f[d->n])) {
		snprintf(err, errlen,
			 "invalid --device '%s'; hint: a PCI address (0000:01:00.0) or "
			 "vendor:device ids (1014:06a7), as lspci -nD shows them",
			 arg);
		return -1;
	}
	d->n++;
	return 0;
}

int devfilter_finish(struct devfilter *d, bool every, char *err, size_t errlen)
{
	if (every && d->n) {
		snprintf(err, errlen, "--device all and --device BDF|VID:DID do not go together");
		return -1;
	}
	if (!every && !d->n) {
		d->f[0] = (struct sbt_dev_filter){ SBT_BDF_NONE, SBT_SPYRE_VENDOR, SBT_SPYRE_DEVICE_A };
		d->f[1] = (struct sbt_dev_filter){ SBT_BDF_NONE, SBT_SPYRE_VENDOR, SBT_SPYRE_DEVICE_B };
		d->n = 2;
	}
	return 0;
}
