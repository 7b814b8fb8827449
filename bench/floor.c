// SPDX-License-Identifier: GPL-2.0-only
/*
 * bench-floor {empty|count|clock} OBJ -c CMD SITE...: run CMD with BPF
 * programs that do nothing (the floor: what the trap alone costs), only
 * count, or only read the clock (tracepoints; uprobes stay empty), on
 * exactly the sites given, attached to CMD's process only, as the tracer
 * attaches. A SITE is LIB+0xOFFSET (a uprobe, as `spyre-bpftrace list`
 * prints them) or tp:CATEGORY:NAME. Prints the hits counted and, while
 * kernel.bpf_stats_enabled is on, the kernel's ns per run of the
 * tracepoint program.
 *
 * bench-floor fentry OBJ -c CMD: empty entry and return programs on vfio's
 * three file handlers (host-wide, as the daemon's), and the kernel's ns of
 * both per call (kernel.bpf_stats_enabled on).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wordexp.h>

int main(int argc, char **argv)
{
	struct bpf_program *up, *tp;
	struct bpf_object *obj;
	wordexp_t we;
	int pfd[2], status, nlinks = 0;
	uint64_t total = 0, in_runs = 0, floor_ns = 0;
	bool fentry;
	pid_t child;
	char c;

	if (argc < 5 || strcmp(argv[3], "-c")) {
		fprintf(stderr, "usage: bench-floor {empty|count|clock} OBJ -c CMD SITE...\n"
				"       bench-floor fentry OBJ -c CMD\n");
		return 2;
	}
	fentry = !strcmp(argv[1], "fentry");
	obj = bpf_object__open_file(argv[2], NULL);
	if (!obj) {
		fprintf(stderr, "bench-floor: cannot open %s\n", argv[2]);
		return 1;
	}
	/* the handlers' programs need vfio loaded: only for their own measure */
	bpf_object__for_each_program(up, obj)
	{
		if (strstr(bpf_program__name(up), "_floor_"))
			bpf_program__set_autoload(up, fentry);
	}
	if (bpf_object__load(obj)) {
		fprintf(stderr, "bench-floor: cannot load %s\n", argv[2]);
		return 1;
	}
	up = bpf_object__find_program_by_name(obj, !strcmp(argv[1], "count") ? "count_uprobe" : "empty_uprobe");
	tp = bpf_object__find_program_by_name(obj, !strcmp(argv[1], "count")	? "count_tp"
						   : !strcmp(argv[1], "clock") ? "clock_tp"
									       : "empty_tp");
	if (wordexp(argv[4], &we, WRDE_NOCMD) || pipe(pfd))
		return 1;
	child = fork();
	if (child == 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) != 1)
			_exit(127);
		execvp(we.we_wordv[0], we.we_wordv);
		_exit(127);
	}
	close(pfd[0]);
	for (int i = 5; i < argc; i++) {
		struct bpf_link *l;
		char *plus = strrchr(argv[i], '+');

		if (!strncmp(argv[i], "tp:", 3)) {
			char cat[64], name[64];

			if (sscanf(argv[i], "tp:%63[^:]:%63s", cat, name) != 2)
				return 2;
			l = bpf_program__attach_tracepoint(tp, cat, name);
		} else if (plus) {
			*plus = '\0';
			l = bpf_program__attach_uprobe(up, false, child, argv[i], strtoull(plus + 1, NULL, 0));
		} else {
			return 2;
		}
		if (libbpf_get_error(l)) {
			fprintf(stderr, "bench-floor: cannot attach %s\n", argv[i]);
			kill(child, SIGKILL);
			return 1;
		}
		nlinks++;
	}
	if (fentry) {
		bpf_object__for_each_program(up, obj)
		{
			if (!strstr(bpf_program__name(up), "_floor_"))
				continue;
			if (libbpf_get_error(bpf_program__attach(up))) {
				fprintf(stderr, "bench-floor: cannot attach %s\n", bpf_program__name(up));
				kill(child, SIGKILL);
				return 1;
			}
			nlinks++;
		}
	}
	if (write(pfd[1], "g", 1) != 1)
		return 1;
	close(pfd[1]);
	waitpid(child, &status, 0);
	{
		int ncpu = libbpf_num_possible_cpus();
		uint64_t v[ncpu > 0 ? ncpu : 1];
		uint32_t k = 0;

		if (ncpu > 0 && !bpf_map_lookup_elem(bpf_map__fd(bpf_object__find_map_by_name(obj, "hits")), &k, v))
			for (int i = 0; i < ncpu; i++)
				total += v[i];
	}
	printf("hits %llu sites %d", (unsigned long long)total, nlinks);
	if (fentry) {
		bpf_object__for_each_program(up, obj)
		{
			struct bpf_prog_info info = {};
			uint32_t len = sizeof(info);

			if (!strstr(bpf_program__name(up), "_floor_") ||
			    bpf_obj_get_info_by_fd(bpf_program__fd(up), &info, &len))
				continue;
			floor_ns += info.run_time_ns;
			if (strstr(bpf_program__name(up), "_floor_in"))
				in_runs += info.run_cnt;
		}
		printf(" calls %llu fentry_ns_per_call %.1f", (unsigned long long)in_runs,
		       in_runs ? (double)floor_ns / (double)in_runs : 0.0);
	}
	{
		struct bpf_prog_info info = {};
		uint32_t len = sizeof(info);

		if (!bpf_obj_get_info_by_fd(bpf_program__fd(tp), &info, &len) && info.run_cnt)
			printf(" tp_ns_per_run %.1f", (double)info.run_time_ns / (double)info.run_cnt);
	}
	printf("\n");
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
