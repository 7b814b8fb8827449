// SPDX-License-Identifier: GPL-2.0-only
/* Reading function symbols with libelf. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probes/elfsyms.h"

/* Address to file offset through the loadable segment holding it. */
static int vaddr_to_offset(Elf *elf, uint64_t vaddr, uint64_t *off)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_memsz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -1;
}

/* ppc64 ELFv2: how far past a function's global entry its local entry is
 * (st_other's top three bits; 0 and 1 mean none). */
static uint64_t ppc64_local_entry(unsigned char st_other)
{
	unsigned int v = (st_other >> 5) & 7;

	return v >= 2 && v <= 6 ? ((1u << v) >> 2) << 2 : 0;
}

static int walk_symtab(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, int machine, bool big_endian,
		       elf_sym_cb cb, void *ctx)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0, filesize = 0;
	const uint8_t *raw = (const uint8_t *)elf_rawfile(elf, &filesize);

	for (size_t i = 0; data && i < n; i++) {
		GElf_Sym sym;
		const char *name;
		uint64_t off;
		int type;

		if (!gelf_getsym(data, (int)i, &sym))
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || !*name || vaddr_to_offset(elf, sym.st_value, &off))
			continue;
		struct elf_func f = { name, off, sym.st_size, NULL, machine, big_endian };

		if (machine == EM_PPC64) {
			uint64_t local = ppc64_local_entry(sym.st_other);

			if (local >= f.size && f.size)
				continue;
			f.offset += local;
			f.size -= f.size ? local : 0;
			off = f.offset;
		}
		if (raw && off < filesize && sym.st_size <= filesize - off)
			f.code = raw + off;
		if (cb(&f, ctx))
			return 1;
	}
	return 0;
}

#define MAX_LIB_BYTES (1ull << 30) /* a runtime library is tens of MB */

/*
 * A library's path comes from a process we trace (its maps, its
 * LD_LIBRARY_PATH), which may be hostile, and we may be root: the file is
 * opened only if it is a regular file of sane size reached through no
 * symlink, never blocking (a FIFO), never a device. Looked at before it
 * is opened, and what was opened checked again.
 */
static int open_library(const char *path, char *err, size_t errlen)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW,
				.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	char real[PATH_MAX];
	struct stat st;
	int fd;

	if (!realpath(path, real) || stat(real, &st)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_LIB_BYTES)
		goto refuse;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, real, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS) /* before 5.6: the last component at least */
		fd = open(real, (int)how.flags);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= MAX_LIB_BYTES)
		return fd;
	close(fd);
refuse:
	snprintf(err, errlen, "%s: not a regular file of at most 1 GiB; not read", path);
	return -EPERM;
}

static bool sane_library(int fd, struct stat *st)
{
	return !fstat(fd, st) && S_ISREG(st->st_mode) && (uint64_t)st->st_size <= MAX_LIB_BYTES;
}

bool elf_interp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	bool found = false;
	struct stat st;
	size_t n = 0;
	Elf *elf;

	if (fd < 0)
		return false;
	/* any size: only its headers are read, not the whole file */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || elf_version(EV_CURRENT) == EV_NONE ||
	    !(elf = elf_begin(fd, ELF_C_READ, NULL))) {
		close(fd);
		return false;
	}
	if (elf_kind(elf) == ELF_K_ELF && !elf_getphdrnum(elf, &n)) {
		for (size_t i = 0; i < n && !found; i++) {
			GElf_Phdr ph;
			ssize_t got;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_INTERP || !ph.p_filesz)
				continue;
			got = pread(fd, buf, ph.p_filesz < len ? ph.p_filesz : len - 1, (off_t)ph.p_offset);
			if (got > 0) {
				buf[got] = '\0';
				found = buf[0] == '/';
			}
		}
	}
	elf_end(elf);
	close(fd);
	return found;
}

int elf_open_library_at(int path_fd, const char *name, char *err, size_t errlen)
{
	struct stat before, after;
	char fn[64];
	int fd;

	if (!sane_library(path_fd, &before)) {
		snprintf(err, errlen, "%s: not a regular file of at most 1 GiB; not read", name);
		return -EPERM;
	}
	/* reopened through our own fd: the file it names, looked up nowhere */
	snprintf(fn, sizeof(fn), "/proc/self/fd/%d", path_fd);
	fd = open(fn, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", name, strerror(errno));
		return -errno;
	}
	if (sane_library(fd, &after) && after.st_dev == before.st_dev && after.st_ino == before.st_ino)
		return fd;
	close(fd);
	snprintf(err, errlen, "%s: changed as it was opened; not read", name);
	return -EPERM;
}

int elf_for_each_function_fd(int fd, const char *name, elf_sym_cb cb, void *ctx, char *err,
			     size_t errlen)
{
	Elf_Scn *scn = NULL;
	struct stat st;
	int ret = 0;
	Elf *elf;

	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(err, errlen, "libelf: %s", elf_errmsg(-1));
		return -EINVAL;
	}
	if (!sane_library(fd, &st)) {
		snprintf(err, errlen, "%s: not a regular file of at most 1 GiB; not read", name);
		return -EPERM;
	}
	/* read, not mapped: a file cut while we look is a short read, not a
	 * SIGBUS */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	/* the whole file in memory at once, every section read from there */
	if (elf && elf_cntl(elf, ELF_C_FDREAD)) {
		snprintf(err, errlen, "%s: cannot read it: %s", name, elf_errmsg(-1));
		ret = -EIO;
		goto out;
	}
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		snprintf(err, errlen, "%s: not an ELF file", name);
		ret = -ENOEXEC;
		goto out;
	}
	GElf_Ehdr eh;

	if (!gelf_getehdr(elf, &eh)) {
		snprintf(err, errlen, "%s: no ELF header", name);
		ret = -ENOEXEC;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		if (walk_symtab(elf, scn, &sh, eh.e_machine, eh.e_ident[EI_DATA] == ELFDATA2MSB, cb,
				ctx))
			break;
	}
out:
	if (elf)
		elf_end(elf);
	return ret;
}

int elf_for_each_function(const char *path, elf_sym_cb cb, void *ctx, char *err,
			  size_t errlen)
{
	int fd = open_library(path, err, errlen), ret;

	if (fd < 0)
		return fd;
	ret = elf_for_each_function_fd(fd, path, cb, ctx, err, errlen);
	close(fd);
	return ret;
}
