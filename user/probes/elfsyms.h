/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Function symbols of an ELF file (.symtab and .dynsym) with file offsets,
 * read with bounded work and memory: the file may be a hostile process's
 * (a sparse 1 GiB file, a million symbols, 65,534 program headers). The
 * header is checked first; then only the program and section headers, the
 * symbol tables (a chunk at a time) and their names (through a small block
 * cache) are read, never the whole file; a function's bytes only when
 * asked for (elf_func_code). Each read is capped (the ELF_MAX_* below,
 * docs/security.md): a table over its cap is skipped and said in the
 * note, a file over a header cap is refused.
 */
#ifndef SBT_ELFSYMS_H
#define SBT_ELFSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELF_MAX_FILE_BYTES (1ull << 30) /* a runtime library is tens of MB */
#define ELF_MAX_PHDRS 1024 /* real libraries have about ten */
#define ELF_MAX_SECTIONS 4096 /* real libraries have about forty */
#define ELF_MAX_SYMBOLS (4u << 20) /* in one table: libtorch_cpu has under a million */
#define ELF_MAX_NAME 4096 /* bytes of one symbol's name; a longer one is skipped */
#define ELF_MAX_FUNC_BYTES (1u << 20) /* one function's body read for decoding */
#define ELF_MAX_CODE_BYTES (64ull << 20) /* all bodies read of one file */

struct elf_file; /* an open file being walked (elfsyms.c) */

/* A defined function symbol. */
struct elf_func {
	const char *name; /* as in the file (mangled); valid during the callback */
	/* file offset of its first byte: where a uprobe goes. On ppc64's ELFv2
	 * the local entry, past the TOC set-up: calls from the same library
	 * enter there, calls through the PLT run into it. */
	uint64_t offset;
	uint64_t size; /* st_size, 0 when the symbol does not say */
	const uint8_t *code; /* its bytes when the caller has them; NULL from the walk */
	int machine; /* the file's e_machine (EM_X86_64, EM_PPC64, EM_S390) */
	bool big_endian; /* the file's byte order */
	struct elf_file *file; /* during the walk: where elf_func_code reads */
};

/* Return non-zero to stop the walk. */
typedef int (*elf_sym_cb)(const struct elf_func *f, void *ctx);

/* What a walk may be told: asked every 4096 symbols (true: stop, -EINTR). */
struct elf_walk_opts {
	bool (*stop)(void *ctx);
	void *stop_ctx;
	char *note; /* where a table skipped over its cap is said ("" when none) */
	size_t notelen;
};

/* Calls cb for every defined function symbol, converting its address to
 * the file offset a uprobe needs. A symbol present in both tables is
 * reported twice. Only a regular file of at most ELF_MAX_FILE_BYTES is
 * read (-EPERM else), through no symlink once its path is resolved.
 * opts may be NULL. 0, -EINTR when told to stop, or -errno with err filled. */
int elf_for_each_function(const char *path, elf_sym_cb cb, void *ctx, const struct elf_walk_opts *opts, char *err,
			  size_t errlen);
/* The same on a file already open (the caller's: left open), checked the
 * same way; name says which in err. */
int elf_for_each_function_fd(int fd, const char *name, elf_sym_cb cb, void *ctx, const struct elf_walk_opts *opts,
			     char *err, size_t errlen);
/* size bytes at offset of the file being walked (what: a function's
 * "body", or its "cold part"): malloc'd, or NULL with the reason in why (over
 * ELF_MAX_FUNC_BYTES, past the file's end, the file's ELF_MAX_CODE_BYTES
 * spent, a short read). Only during the walk. */
uint8_t *elf_func_code(struct elf_file *file, uint64_t offset, uint64_t size, const char *what, char *why,
		       size_t whylen);
/* A library by path, opened the way elf_for_each_function opens it: the
 * read fd, or -errno with err filled. */
int elf_open_library(const char *path, char *err, size_t errlen);
/* A library found as an O_PATH fd (proc_resolve_in_root): opened for
 * reading through it if it is a regular file of at most 1 GiB, and
 * checked again once open. The read fd, or -errno with err filled. */
int elf_open_library_at(int path_fd, const char *name, char *err, size_t errlen);
/* The ELF interpreter (PT_INTERP) of the regular file at path, read
 * without running anything: true with it in buf; false for a static
 * program or what is not ELF. */
bool elf_interp(const char *path, char *buf, size_t len);

#endif
