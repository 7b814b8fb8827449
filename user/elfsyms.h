/* SPDX-License-Identifier: GPL-2.0-only */
/* Function symbols of an ELF file (.symtab and .dynsym) with file offsets. */
#ifndef SBT_ELFSYMS_H
#define SBT_ELFSYMS_H

#include <stddef.h>
#include <stdint.h>

/* Return non-zero to stop the walk. */
typedef int (*elf_sym_cb)(const char *mangled, uint64_t file_offset, void *ctx);

/* Calls cb for every defined function symbol, converting its address to
 * the file offset a uprobe needs. A symbol present in both tables is
 * reported twice. 0, or -errno with err filled. */
int elf_for_each_function(const char *path, elf_sym_cb cb, void *ctx, char *err,
			  size_t errlen);

#endif
