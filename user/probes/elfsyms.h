/* SPDX-License-Identifier: GPL-2.0-only */
/* Function symbols of an ELF file (.symtab and .dynsym) with file offsets. */
#ifndef SBT_ELFSYMS_H
#define SBT_ELFSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A defined function symbol. */
struct elf_func {
	const char *name; /* as in the file (mangled) */
	/* file offset of its first byte: where a uprobe goes. On ppc64's ELFv2
	 * the local entry, past the TOC set-up: calls from the same library
	 * enter there, calls through the PLT run into it. */
	uint64_t offset;
	uint64_t size; /* st_size, 0 when the symbol does not say */
	const uint8_t *code; /* its bytes, or NULL when not all in the file */
	int machine; /* the file's e_machine (EM_X86_64, EM_PPC64, EM_S390) */
	bool big_endian; /* the file's byte order */
};

/* Return non-zero to stop the walk. */
typedef int (*elf_sym_cb)(const struct elf_func *f, void *ctx);

/* Calls cb for every defined function symbol, converting its address to
 * the file offset a uprobe needs. A symbol present in both tables is
 * reported twice. Only a regular file of at most 1 GiB is read (-EPERM
 * else), through no symlink once its path is resolved, and read, not
 * mapped. 0, or -errno with err filled. */
int elf_for_each_function(const char *path, elf_sym_cb cb, void *ctx, char *err,
			  size_t errlen);
/* The same on a file already open (the caller's: left open), checked the
 * same way; name says which in err. */
int elf_for_each_function_fd(int fd, const char *name, elf_sym_cb cb, void *ctx, char *err,
			     size_t errlen);
/* A library found as an O_PATH fd (proc_resolve_in_root): opened for
 * reading through it if it is a regular file of at most 1 GiB, and
 * checked again once open. The read fd, or -errno with err filled. */
int elf_open_library_at(int path_fd, const char *name, char *err, size_t errlen);
/* The ELF interpreter (PT_INTERP) of the regular file at path, read
 * without running anything: true with it in buf; false for a static
 * program or what is not ELF. */
bool elf_interp(const char *path, char *buf, size_t len);

#endif
