// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre-sim-dlopen LIB [ARGS...]: starts with no runtime mapped, then
 * dlopen()s LIB (the workload as a library, linking libflex from its own
 * directory, as a Python extension module links the runtime) and runs it
 * at once: what `import torch_spyre` does.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int (*run)(int, char **);
	void *lib;

	if (argc < 2) {
		fprintf(stderr, "usage: spyre-sim-dlopen LIB [ARGS...]\n");
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "spyre-sim-dlopen: %s\n", dlerror());
		return 2;
	}
	*(void **)&run = dlsym(lib, "spyre_sim_run_main");
	if (!run) {
		fprintf(stderr, "spyre-sim-dlopen: %s\n", dlerror());
		return 2;
	}
	return run(argc - 1, argv + 1);
}
