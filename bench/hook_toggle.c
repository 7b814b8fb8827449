// SPDX-License-Identifier: GPL-2.0-only
/*
 * hook-toggle OBJ PROG PAIRS -- CMD...: what one BPF program costs CMD,
 * measured in pairs: loads PROG alone from OBJ (the tracer's own object,
 * every other program left out), then PAIRS times runs CMD once with PROG
 * attached and once without, the order alternating (ABBA) so that a
 * machine getting faster or slower during the run weighs on both sides
 * alike. CMD prints one number (its time per unit of work); each line of
 * output is "on OFF_VALUE ON_VALUE". Attaching takes a millisecond, so
 * pairs are close in time: far less noise than starting a tracer for
 * each run. Ends with PROG's run count and, when kernel.bpf_stats_enabled
 * is on, its ns per run.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run(char **cmd, double *value)
{
	char line[256], buf[4096] = "";
	size_t len = 0;
	FILE *p;

	/* argv joined for popen: the bench passes plain words only */
	for (int i = 0; cmd[i]; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? " " : "", cmd[i]);
	if (len >= sizeof(buf) || !(p = popen(buf, "r")))
		return -1;
	if (!fgets(line, sizeof(line), p) || sscanf(line, "%lf", value) != 1) {
		pclose(p);
		return -1;
	}
	return pclose(p) ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct bpf_program *prog, *want = NULL;
	struct bpf_prog_info info = {};
	uint32_t info_len = sizeof(info);
	struct bpf_object *obj;
	struct bpf_link *link;
	long pairs;

	if (argc < 6 || strcmp(argv[4], "--") || (pairs = atol(argv[3])) <= 0) {
		fprintf(stderr, "usage: hook-toggle OBJ PROG PAIRS -- CMD...\n");
		return 2;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "hook-toggle: cannot open %s\n", argv[1]);
		return 1;
	}
	bpf_object__for_each_program(prog, obj) {
		bool it = !strcmp(bpf_program__name(prog), argv[2]);

		bpf_program__set_autoload(prog, it);
		if (it)
			want = prog;
	}
	if (!want) {
		fprintf(stderr, "hook-toggle: %s has no program %s\n", argv[1], argv[2]);
		return 1;
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "hook-toggle: cannot load %s from %s\n", argv[2], argv[1]);
		return 1;
	}
	for (long i = 0; i < pairs; i++) {
		double v[2];

		/* ABBA: even pairs off first, odd pairs on first */
		for (int k = 0; k < 2; k++) {
			int on = (int)((i & 1) ^ k);

			link = on ? bpf_program__attach(want) : NULL;
			if (on && !link) {
				fprintf(stderr, "hook-toggle: cannot attach %s\n", argv[2]);
				return 1;
			}
			if (run(argv + 5, &v[on])) {
				fprintf(stderr, "hook-toggle: %s printed no number\n", argv[5]);
				bpf_link__destroy(link);
				return 1;
			}
			bpf_link__destroy(link);
		}
		printf("on %.1f %.1f\n", v[0], v[1]);
		fflush(stdout);
	}
	if (!bpf_obj_get_info_by_fd(bpf_program__fd(want), &info, &info_len))
		printf("runs %llu run_time_ns %llu\n", (unsigned long long)info.run_cnt,
		       (unsigned long long)info.run_time_ns);
	bpf_object__close(obj);
	return 0;
}
