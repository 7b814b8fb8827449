// SPDX-License-Identifier: GPL-2.0-only
/*
 * libFuzzer target: any bytes as a library, through the bounded ELF reader
 * (a hostile process's file) and, for each function it finds, the reading
 * of its body and the return-site decoder. A function's place must lie in
 * the file, its name within the cap, its body the bytes at that place.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "probes/elfsyms.h"
#include "probes/retsites.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
	const uint8_t *data;
	size_t size;
};

static int each(const struct elf_func *f, void *ctx)
{
	const struct input *in = ctx;
	struct ret_site sites[RETSITES_MAX];
	struct elf_func g = *f;
	char why[160];
	uint8_t *code;

	if (!f->name || !*f->name || strlen(f->name) > ELF_MAX_NAME)
		abort();
	if (!(code = elf_func_code(f->file, f->offset, f->size, "body", why, sizeof(why))))
		return 0;
	if (f->offset > in->size || f->size > in->size - f->offset || memcmp(code, in->data + f->offset, f->size))
		abort();
	g.code = code;
	retsites_find(&g, NULL, f->name, sites, RETSITES_MAX, why, sizeof(why));
	free(code);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	char err[256], note[256];
	struct elf_walk_opts o = { NULL, NULL, note, sizeof(note) };
	int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	setenv("SBT_S390_RETURN_PROBES", "1", 0); /* decode s390x too */
	elf_for_each_function_fd(fd, "fuzz", each, &in, &o, err, sizeof(err));
	close(fd);
	return 0;
}
