// SPDX-License-Identifier: GPL-2.0-only
/* Writes the fuzzer's seed captures into the directory given. */
#include <stdio.h>

#include "synth.h"

int main(int argc, char **argv)
{
	char path[4096];
	struct synth s;
	uint64_t t = 1000000000;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	synth_init(&s);
	synth_clock(&s, t);
	synth_proc(&s, t, 100, "seed");
	synth_spyre_probes(&s);
	synth_device(&s, 100, "0000:3a:00.0");
	synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
	t = synth_job(&s, t + 1000, 100, 100, 4096, 0x100000);
	synth_task(&s, SBT_TASK_NEW, t, 100, 101, 100, 0, "worker");
	synth_enter(&s, t + 10, 100, 101, 2, 0, 0, 0, 8192);
	synth_exit(&s, t + 20, 100, 101, 2, 0, t + 10, 0);
	synth_drv(&s, t + 22, t + 28, 100, 101, SBT_DRV_TYPE1_IOCTL, SBT_VFIO_IOMMU_MAP_DMA, 0x3a00,
		  1, 0, 0x200000, 4096, 0x7f0000200000);
	synth_drv(&s, t + 32, t + 38, 0, 0, SBT_DRV_MSI, 0, 0x3a00, 1, 1, 40, 0, 0);
	synth_irq(&s, t + 30, t + 40, 40);
	synth_lost(&s, t + 50, 3, 3);
	synth_exit(&s, t + 60, 100, 101, 7, 0, 0, 0);
	synth_task(&s, SBT_TASK_EXIT, t + 70, 100, 101, 0, 0, "worker");
	synth_end(&s, t + 80);
	snprintf(path, sizeof(path), "%s/seed-job.sbt", argv[1]);
	if (synth_save(&s, path))
		return 1;
	synth_free(&s);
	return 0;
}
