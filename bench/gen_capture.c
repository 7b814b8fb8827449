// SPDX-License-Identifier: GPL-2.0-only
/*
 * gen-capture OUT.sbt RECORDS: a synthetic capture for the converter
 * benchmark, with the mix a Spyre job makes: per job allocate/map/MAP_DMA,
 * H2D, compute, D2H launches with their submits, synchronize, free/unmap;
 * on 8 threads of 2 processes, one of them on a card whose interrupts
 * complete its jobs.
 */
#include <stdio.h>
#include <stdlib.h>

#include "synth.h"

int main(int argc, char **argv)
{
	unsigned long long want;
	struct synth s;
	uint64_t t[8], n = 0;
	FILE *f;

	if (argc != 3 || !(want = strtoull(argv[2], NULL, 10))) {
		fprintf(stderr, "usage: %s OUT.sbt RECORDS\n", argv[0]);
		return 2;
	}
	f = fopen(argv[1], "wb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	synth_init(&s);
	synth_clock(&s, 1000000000);
	synth_proc(&s, 1000000000, 100, "infer");
	synth_proc(&s, 1000000000, 200, "train");
	synth_spyre_probes(&s);
	synth_device(&s, 200, "0000:3a:00.0");
	synth_irq_info(&s, 40, "vfio-msi[0](0000:3a:00.0)");
	for (int i = 0; i < 8; i++) {
		t[i] = 1000001000 + (uint64_t)i * 777;
		synth_thread_name(&s, i < 4 ? 100 : 200, (i < 4 ? 100 : 200) + (uint32_t)i, "worker");
	}
	while (s.records < want) {
		int i = (int)(n % 8);
		uint32_t pid = i < 4 ? 100 : 200;

		t[i] = synth_job(&s, t[i], pid, pid + (uint32_t)i, 4096 << (n % 5),
				 0x100000 + (n % 1024) * 0x10000);
		if (pid == 200) /* the card's completion interrupts */
			for (int k = 0; k < 3; k++)
				synth_irq(&s, t[i] - 40000 + (uint64_t)k * 100, t[i] - 39950 + (uint64_t)k * 100, 40);
		n++;
		if (s.len > (32u << 20)) { /* stream to the file in chunks */
			if (fwrite(s.buf, 1, s.len, f) != s.len)
				return 1;
			s.len = 0;
		}
	}
	synth_end(&s, t[0]);
	if (fwrite(s.buf, 1, s.len, f) != s.len || fclose(f))
		return 1;
	printf("%llu records, %llu jobs\n", (unsigned long long)s.records, (unsigned long long)n);
	synth_free(&s);
	return 0;
}
