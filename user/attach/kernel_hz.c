// SPDX-License-Identifier: GPL-2.0-only
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <zlib.h>

#include "attach/kernel_hz.h"

/* CONFIG_HZ=N in a (gzip'd or plain: gzopen reads both) config file. */
static int hz_from_config(const char *path)
{
	gzFile f = gzopen(path, "re");
	char line[256];
	int hz = 0;

	if (!f)
		return 0;
	/* a config is some 10,000 lines: bounded by the file, which is the kernel's */
	while (gzgets(f, line, sizeof(line)))
		if (!strncmp(line, "CONFIG_HZ=", 10)) {
			hz = atoi(line + 10);
			break;
		}
	gzclose(f);
	return hz > 0 && hz <= 10000 ? hz : 0;
}

/* /proc/timer_list's "now at N nsecs" and its first "jiffies: J". */
static int timer_list(unsigned long long *ns, unsigned long long *jiffies)
{
	FILE *f = fopen("/proc/timer_list", "re");
	char line[256];
	int got = 0;

	if (!f)
		return -1;
	for (int i = 0; i < 100000 && got != 3 && fgets(line, sizeof(line), f); i++) {
		if (!(got & 1) && sscanf(line, "now at %llu nsecs", ns) == 1)
			got |= 1;
		else if (!(got & 2) && sscanf(line, "jiffies: %llu", jiffies) == 1)
			got |= 2;
	}
	fclose(f);
	return got == 3 ? 0 : -1;
}

static int hz_measured(void)
{
	static const int rates[] = { 100, 250, 300, 1000 };
	unsigned long long ns0, j0, ns1, j1;
	struct timespec pause = { 0, 50 * 1000 * 1000 };
	double hz;
	int best = 0;

	if (timer_list(&ns0, &j0))
		return 0;
	nanosleep(&pause, NULL);
	if (timer_list(&ns1, &j1) || ns1 <= ns0 || j1 <= j0)
		return 0;
	hz = (double)(j1 - j0) * 1e9 / (double)(ns1 - ns0);
	for (int i = 1; i < 4; i++)
		if (abs((int)(hz + 0.5) - rates[i]) < abs((int)(hz + 0.5) - rates[best]))
			best = i;
	return rates[best];
}

int kernel_hz(void)
{
	struct utsname u;
	char path[128 + sizeof(u.release)];
	int hz = 0;

	if (!uname(&u)) {
		snprintf(path, sizeof(path), "/boot/config-%s", u.release);
		hz = hz_from_config(path);
	}
	if (!hz)
		hz = hz_from_config("/proc/config.gz");
	return hz ? hz : hz_measured();
}
