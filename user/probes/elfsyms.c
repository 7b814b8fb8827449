// SPDX-License-Identifier: GPL-2.0-only
/*
 * Reading function symbols with bounded work and memory (elfsyms.h): the
 * ELF structures are read by hand, field by field in the file's byte
 * order, with pread, so nothing is read that is not needed and every
 * count and size is checked against the file and a cap before use.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probes/elfsyms.h"

/* Names come through a direct-mapped cache of file blocks: symbols' names
 * mostly lie near each other, so few blocks are read twice. */
#define NAME_BLOCK (16u << 10)
#define NAME_SLOTS 64
#define SYM_CHUNK 4096 /* symbols read at a time */

struct segment {
	uint64_t vaddr, memsz, offset;
};

struct elf_file {
	int fd;
	uint64_t size; /* of the file */
	bool is64, big;
	int machine;
	uint16_t phnum_raw, shnum_raw;
	uint64_t phoff, shoff;
	uint32_t phnum, shnum;
	struct segment *seg; /* PT_LOAD, by vaddr */
	size_t nseg;
	uint64_t code_read; /* bytes of bodies read: ELF_MAX_CODE_BYTES */
	/* the string table being read, and its blocks */
	uint64_t str_off, str_size;
	struct {
		uint64_t block; /* UINT64_MAX: empty */
		uint32_t len;
		uint8_t data[NAME_BLOCK];
	} * slots;
	char name[ELF_MAX_NAME + 1];
};

static bool fits(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

static int read_at(const struct elf_file *e, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	if (!fits(off, len, e->size))
		return -1;
	while (got < len) {
		ssize_t n = pread(e->fd, (char *)buf + got, len - got, (off_t)(off + got));

		if (n <= 0) /* a file cut while read: a short read, never a fault */
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* Fields in the file's byte order. */
static uint64_t get(const struct elf_file *e, const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)p[e->big ? bytes - 1 - i : i] << (8 * i);
	return v;
}

static int refuse(char *err, size_t errlen, const char *name, const char *why, int ret)
{
	snprintf(err, errlen, "%s: %s", name, why);
	return ret;
}

/* The ELF header, checked before anything else is read. */
static int read_header(struct elf_file *e, const char *name, char *err, size_t errlen)
{
	uint8_t h[64];

	if (e->size < 52 || read_at(e, h, e->size < 64 ? 52 : 64, 0) || memcmp(h, ELFMAG, SELFMAG))
		return refuse(err, errlen, name, "not an ELF file", -ENOEXEC);
	if ((h[EI_CLASS] != ELFCLASS64 && h[EI_CLASS] != ELFCLASS32) ||
	    (h[EI_DATA] != ELFDATA2LSB && h[EI_DATA] != ELFDATA2MSB))
		return refuse(err, errlen, name, "not an ELF file (unknown class or byte order)", -ENOEXEC);
	e->is64 = h[EI_CLASS] == ELFCLASS64;
	e->big = h[EI_DATA] == ELFDATA2MSB;
	if (e->is64 && e->size < 64)
		return refuse(err, errlen, name, "not an ELF file (cut short)", -ENOEXEC);
	e->machine = (int)get(e, h + 18, 2);
	e->phoff = e->is64 ? get(e, h + 32, 8) : get(e, h + 28, 4);
	e->shoff = e->is64 ? get(e, h + 40, 8) : get(e, h + 32, 4);
	e->phnum_raw = (uint16_t)get(e, h + (e->is64 ? 56 : 44), 2);
	e->shnum_raw = (uint16_t)get(e, h + (e->is64 ? 60 : 48), 2);
	if (get(e, h + (e->is64 ? 54 : 42), 2) != (e->is64 ? 56u : 32u) && e->phnum_raw)
		return refuse(err, errlen, name, "not an ELF file (odd program header size)", -ENOEXEC);
	if (get(e, h + (e->is64 ? 58 : 46), 2) != (e->is64 ? 64u : 40u) && (e->shnum_raw || e->shoff))
		return refuse(err, errlen, name, "not an ELF file (odd section header size)", -ENOEXEC);
	return 0;
}

struct shdr {
	uint32_t type, link;
	uint64_t offset, size, entsize;
};

static int read_shdr(const struct elf_file *e, uint32_t i, struct shdr *s)
{
	uint8_t b[64];
	size_t len = e->is64 ? 64 : 40;

	if (read_at(e, b, len, e->shoff + (uint64_t)i * len))
		return -1;
	s->type = (uint32_t)get(e, b + 4, 4);
	s->offset = e->is64 ? get(e, b + 24, 8) : get(e, b + 16, 4);
	s->size = e->is64 ? get(e, b + 32, 8) : get(e, b + 20, 4);
	s->link = (uint32_t)get(e, b + (e->is64 ? 40 : 24), 4);
	s->entsize = e->is64 ? get(e, b + 56, 8) : get(e, b + 36, 4);
	return 0;
}

/* How many sections and program headers, the extended counts included
 * (in section 0 when the header's fields overflow). */
static int counts(struct elf_file *e, const char *name, char *err, size_t errlen)
{
	e->phnum = e->phnum_raw;
	e->shnum = e->shoff ? e->shnum_raw : 0;
	if (e->shoff && (!e->shnum_raw || e->phnum_raw == PN_XNUM)) {
		uint8_t b[64];
		size_t len = e->is64 ? 64 : 40;

		if (read_at(e, b, len, e->shoff))
			return refuse(err, errlen, name, "not an ELF file (section headers past its end)", -ENOEXEC);
		if (!e->shnum_raw)
			e->shnum = (uint32_t)(e->is64 ? get(e, b + 32, 8) : get(e, b + 20, 4));
		if (e->phnum_raw == PN_XNUM)
			e->phnum = (uint32_t)get(e, b + (e->is64 ? 44 : 28), 4);
	}
	if (e->phnum > ELF_MAX_PHDRS || e->shnum > ELF_MAX_SECTIONS) {
		snprintf(err, errlen, "%s: %u program headers and %u sections, over the caps of %d and %d; not read",
			 name, e->phnum, e->shnum, ELF_MAX_PHDRS, ELF_MAX_SECTIONS);
		return -E2BIG;
	}
	if (!fits(e->phoff, (uint64_t)e->phnum * (e->is64 ? 56 : 32), e->size) ||
	    !fits(e->shoff, (uint64_t)e->shnum * (e->is64 ? 64 : 40), e->size))
		return refuse(err, errlen, name, "not an ELF file (headers past its end)", -ENOEXEC);
	return 0;
}

static int by_vaddr(const void *a, const void *b)
{
	const struct segment *x = a, *y = b;

	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* The loadable segments, sorted: an address's offset by binary search. */
static int read_segments(struct elf_file *e)
{
	size_t len = e->is64 ? 56 : 32;
	uint8_t b[56];

	e->seg = calloc(e->phnum ? e->phnum : 1, sizeof(*e->seg));
	if (!e->seg)
		return -ENOMEM;
	for (uint32_t i = 0; i < e->phnum; i++) {
		struct segment *s = &e->seg[e->nseg];

		if (read_at(e, b, len, e->phoff + (uint64_t)i * len))
			return -EIO;
		if (get(e, b, 4) != PT_LOAD)
			continue;
		s->offset = e->is64 ? get(e, b + 8, 8) : get(e, b + 4, 4);
		s->vaddr = e->is64 ? get(e, b + 16, 8) : get(e, b + 8, 4);
		s->memsz = e->is64 ? get(e, b + 40, 8) : get(e, b + 20, 4);
		e->nseg++;
	}
	qsort(e->seg, e->nseg, sizeof(*e->seg), by_vaddr);
	return 0;
}

static int vaddr_to_offset(const struct elf_file *e, uint64_t vaddr, uint64_t *off)
{
	size_t lo = 0, hi = e->nseg;

	while (lo < hi) { /* the first segment beginning above vaddr */
		size_t mid = lo + (hi - lo) / 2;

		if (e->seg[mid].vaddr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || vaddr - e->seg[lo - 1].vaddr >= e->seg[lo - 1].memsz)
		return -1;
	*off = vaddr - e->seg[lo - 1].vaddr + e->seg[lo - 1].offset;
	return 0;
}

/* A symbol's name: NULL when past the table, unterminated within
 * ELF_MAX_NAME, or unreadable. */
static const char *name_at(struct elf_file *e, uint64_t at)
{
	size_t n = 0;

	if (at >= e->str_size)
		return NULL;
	while (n <= ELF_MAX_NAME && at + n < e->str_size) {
		uint64_t pos = e->str_off + at + n, block = pos / NAME_BLOCK;
		__typeof__(&e->slots[0]) s = &e->slots[block % NAME_SLOTS];
		uint32_t from = (uint32_t)(pos % NAME_BLOCK);

		if (s->block != block) {
			uint64_t start = block * NAME_BLOCK;
			uint64_t len = e->size - start < NAME_BLOCK ? e->size - start : NAME_BLOCK;

			s->block = UINT64_MAX;
			if (read_at(e, s->data, (size_t)len, start))
				return NULL;
			s->block = block;
			s->len = (uint32_t)len;
		}
		for (; from < s->len && n <= ELF_MAX_NAME && at + n < e->str_size; from++) {
			e->name[n] = (char)s->data[from];
			if (!e->name[n])
				return e->name;
			n++;
		}
	}
	return NULL;
}

/* ppc64 ELFv2: how far past a function's global entry its local entry is
 * (st_other's top three bits; 0 and 1 mean none). */
static uint64_t ppc64_local_entry(unsigned char st_other)
{
	unsigned int v = (st_other >> 5) & 7;

	return v >= 2 && v <= 6 ? ((1u << v) >> 2) << 2 : 0;
}

static void note(const struct elf_walk_opts *o, const char *fmt, unsigned long long a, unsigned long long b)
{
	size_t at;

	if (!o || !o->note || !o->notelen)
		return;
	at = strlen(o->note);
	snprintf(o->note + at, o->notelen - at, fmt, at ? "; " : "", a, b);
}

/* One symbol: the callback's, when it is a defined function. */
static int one_symbol(struct elf_file *e, const uint8_t *p, elf_sym_cb cb, void *ctx)
{
	uint32_t st_name = (uint32_t)get(e, p, 4);
	uint8_t info = p[e->is64 ? 4 : 12], other = p[e->is64 ? 5 : 13];
	uint16_t shndx = (uint16_t)get(e, p + (e->is64 ? 6 : 14), 2);
	uint64_t value = e->is64 ? get(e, p + 8, 8) : get(e, p + 4, 4);
	uint64_t size = e->is64 ? get(e, p + 16, 8) : get(e, p + 8, 4), off;
	int type = ELF64_ST_TYPE(info);
	struct elf_func f;
	const char *name;

	if ((type != STT_FUNC && type != STT_GNU_IFUNC) || shndx == SHN_UNDEF || !value)
		return 0;
	if (vaddr_to_offset(e, value, &off) || !(name = name_at(e, st_name)) || !*name)
		return 0;
	f = (struct elf_func){ name, off, size, NULL, e->machine, e->big, e };
	if (e->machine == EM_PPC64) {
		uint64_t local = ppc64_local_entry(other);

		if (local >= f.size && f.size)
			return 0;
		f.offset += local;
		f.size -= f.size ? local : 0;
	}
	return cb(&f, ctx);
}

/* One symbol table, a chunk at a time. 1: the callback stopped the walk;
 * -EINTR: told to stop. */
static int walk_symtab(struct elf_file *e, const struct shdr *sh, elf_sym_cb cb, void *ctx,
		       const struct elf_walk_opts *o)
{
	size_t esz = e->is64 ? 24 : 16;
	uint64_t n = sh->size / esz;
	struct shdr str;
	uint8_t *chunk;
	int ret = 0;

	if (sh->entsize != esz || !fits(sh->offset, sh->size, e->size) || sh->link >= e->shnum ||
	    read_shdr(e, sh->link, &str) || str.type != SHT_STRTAB || !fits(str.offset, str.size, e->size))
		return 0; /* not a table that can be read: nothing in it */
	if (n > ELF_MAX_SYMBOLS) {
		note(o, "%sa symbol table of %llu symbols skipped (over the cap of %llu)", n, ELF_MAX_SYMBOLS);
		return 0;
	}
	e->str_off = str.offset;
	e->str_size = str.size;
	for (int i = 0; i < NAME_SLOTS; i++)
		e->slots[i].block = UINT64_MAX;
	if (!(chunk = malloc(SYM_CHUNK * esz)))
		return -ENOMEM;
	for (uint64_t i = 0; i < n && !ret; i += SYM_CHUNK) {
		uint64_t k = n - i < SYM_CHUNK ? n - i : SYM_CHUNK;

		if (o && o->stop && o->stop(o->stop_ctx)) {
			ret = -EINTR;
			break;
		}
		if (read_at(e, chunk, (size_t)(k * esz), sh->offset + i * esz))
			break; /* cut while read: what was read stands */
		for (uint64_t j = 0; j < k && !ret; j++)
			ret = one_symbol(e, chunk + j * esz, cb, ctx) ? 1 : 0;
	}
	free(chunk);
	return ret;
}

static bool sane_library(int fd, struct stat *st)
{
	return !fstat(fd, st) && S_ISREG(st->st_mode) && (uint64_t)st->st_size <= ELF_MAX_FILE_BYTES;
}

uint8_t *elf_func_code(struct elf_file *e, uint64_t offset, uint64_t size, const char *what, char *why, size_t whylen)
{
	uint8_t *code;

	if (!size) {
		snprintf(why, whylen, "its %s is empty", what);
		return NULL;
	}
	if (!e || !fits(offset, size, e->size)) {
		snprintf(why, whylen, "its %s is not all in the file", what);
		return NULL;
	}
	if (size > ELF_MAX_FUNC_BYTES) {
		snprintf(why, whylen, "its %s of %llu bytes is over the cap of %u", what, (unsigned long long)size,
			 ELF_MAX_FUNC_BYTES);
		return NULL;
	}
	if (e->code_read + size > ELF_MAX_CODE_BYTES) {
		snprintf(why, whylen, "the library's cap of %llu MiB of function bodies read is spent",
			 ELF_MAX_CODE_BYTES >> 20);
		return NULL;
	}
	e->code_read += size;
	if (!(code = malloc(size)) || read_at(e, code, (size_t)size, offset)) {
		snprintf(why, whylen, "its %s could not be read%s", what, code ? "" : ": out of memory");
		free(code);
		return NULL;
	}
	return code;
}

int elf_for_each_function_fd(int fd, const char *name, elf_sym_cb cb, void *ctx, const struct elf_walk_opts *opts,
			     char *err, size_t errlen)
{
	struct elf_file *e;
	struct stat st;
	int ret;

	if (opts && opts->note && opts->notelen)
		opts->note[0] = '\0';
	if (!sane_library(fd, &st)) {
		snprintf(err, errlen, "%s: not a regular file of at most 1 GiB; not read", name);
		return -EPERM;
	}
	if (!(e = calloc(1, sizeof(*e))) || !(e->slots = malloc(NAME_SLOTS * sizeof(*e->slots)))) {
		free(e);
		snprintf(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	e->fd = fd;
	e->size = (uint64_t)st.st_size;
	if (!(ret = read_header(e, name, err, errlen)) && !(ret = counts(e, name, err, errlen)) &&
	    (ret = read_segments(e)))
		snprintf(err, errlen, "%s: %s", name, strerror(-ret));
	for (uint32_t i = 1; !ret && i < e->shnum; i++) {
		struct shdr sh;

		if (read_shdr(e, i, &sh) || (sh.type != SHT_SYMTAB && sh.type != SHT_DYNSYM))
			continue;
		ret = walk_symtab(e, &sh, cb, ctx, opts);
		if (ret == 1) { /* the callback's stop */
			ret = 0;
			break;
		}
		if (ret < 0)
			snprintf(err, errlen, "%s: %s", name, ret == -EINTR ? "told to stop" : strerror(-ret));
	}
	free(e->seg);
	free(e->slots);
	free(e);
	return ret;
}

/*
 * A library's path comes from a process we trace (its maps, its
 * LD_LIBRARY_PATH), which may be hostile, and we may be root: the file is
 * opened only if it is a regular file of sane size reached through no
 * symlink, never blocking (a FIFO), never a device. Looked at before it
 * is opened, and what was opened checked again.
 */
int elf_open_library(const char *path, char *err, size_t errlen)
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
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > ELF_MAX_FILE_BYTES)
		goto refuse;
	fd = (int)syscall(SYS_openat2, AT_FDCWD, real, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS) /* before 5.6: the last component at least */
		fd = open(real, (int)how.flags);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if (sane_library(fd, &st))
		return fd;
	close(fd);
refuse:
	snprintf(err, errlen, "%s: not a regular file of at most 1 GiB; not read", path);
	return -EPERM;
}

int elf_for_each_function(const char *path, elf_sym_cb cb, void *ctx, const struct elf_walk_opts *opts, char *err,
			  size_t errlen)
{
	int fd = elf_open_library(path, err, errlen), ret;

	if (fd < 0)
		return fd;
	ret = elf_for_each_function_fd(fd, path, cb, ctx, opts, err, errlen);
	close(fd);
	return ret;
}

bool elf_interp(const char *path, char *buf, size_t len)
{
	struct elf_file e = { .fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) };
	char err[64];
	bool found = false;
	struct stat st;

	if (e.fd < 0)
		return false;
	/* any size: only its headers are read */
	if (!fstat(e.fd, &st) && S_ISREG(st.st_mode) && (e.size = (uint64_t)st.st_size) &&
	    !read_header(&e, path, err, sizeof(err)) && !counts(&e, path, err, sizeof(err))) {
		size_t plen = e.is64 ? 56 : 32;
		uint8_t b[56];

		for (uint32_t i = 0; i < e.phnum && !found; i++) {
			uint64_t off, filesz;

			if (read_at(&e, b, plen, e.phoff + (uint64_t)i * plen) || get(&e, b, 4) != PT_INTERP)
				continue;
			off = e.is64 ? get(&e, b + 8, 8) : get(&e, b + 4, 4);
			filesz = e.is64 ? get(&e, b + 32, 8) : get(&e, b + 16, 4);
			if (!filesz || filesz >= len || read_at(&e, buf, (size_t)filesz, off))
				continue;
			buf[filesz] = '\0';
			buf[strnlen(buf, filesz)] = '\0';
			found = buf[0] == '/';
		}
	}
	close(e.fd);
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
