// SPDX-License-Identifier: GPL-2.0-only
/* The built-in probe table and resolving probe specs to sites. */
#include <errno.h>
#include <stdbool.h>
#include <fnmatch.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sandbox.h"
#include "capture/names.h"
#include "events.h"
#include "probes/demangle.h"
#include "probes/elfsyms.h"
#include "probes/probes.h"
#include "probes/retsites.h"
#include "probes/sitecodec.h"

/*
 * The public flex and senlib entry points (../shared/reference). Their
 * signatures are not public: bytes_arg follows the simulator's signatures,
 * our best reading of how torch-spyre calls them. deallocate and Unmap are
 * the simulator's names for the release path and unverified on real flex.
 */
const struct probe_spec sbt_builtin_probes[] = {
	{ "libflex.so", "flex::RuntimeStream::launchH2D", SBT_ROLE_COPY_IN, 3, true },
	{ "libflex.so", "flex::RuntimeStream::launchD2H", SBT_ROLE_COPY_OUT, 3, true },
	{ "libflex.so", "flex::RuntimeStream::launchCompute", SBT_ROLE_COMPUTE, -1, true },
	{ "libflex.so", "flex::RuntimeStream::launchOperation", SBT_ROLE_LAUNCH, -1, true },
	{ "libflex.so", "flex::RuntimeStream::synchronize", SBT_ROLE_WAIT, -1, true },
	{ "libflex.so", "flex::FlexAllocator::allocate", SBT_ROLE_ALLOC, 1, true },
	{ "libflex.so", "flex::FlexAllocator::deallocate", SBT_ROLE_FREE, -1, true },
	{ "libsenlib*.so", "senlib::ControlBlockInterface::QueueControlBlocksSBF", SBT_ROLE_SUBMIT, -1, true },
	{ "libsenlib*.so", "senlib::ResponseBlockInterface::ReceiveResponsesSBF", SBT_ROLE_COMPLETE, -1, true },
	{ "libsenlib*.so", "senlib::PfIommuMapper::Map", SBT_ROLE_MAP, 2, true },
	{ "libsenlib*.so", "senlib::PfIommuMapper::Unmap", SBT_ROLE_UNMAP, 2, true },
};
const size_t sbt_n_builtin_probes = sizeof(sbt_builtin_probes) / sizeof(sbt_builtin_probes[0]);

int probe_spec_parse(const char *arg, struct probe_spec *out, char *err, size_t errlen)
{
	const char *colon = strchr(arg, ':');
	char *copy, *eq;
	int role = SBT_ROLE_USER;

	/* C++ names contain "::": split at the first ':' not followed by ':' */
	while (colon && colon[1] == ':')
		colon = strchr(colon + 2, ':');
	if (!colon || colon == arg || !colon[1]) {
		snprintf(err, errlen, "--probe '%s': expected LIB:PATTERN, e.g. libflex.so:'flex::*'", arg);
		return -1;
	}
	eq = strrchr(colon + 1, '=');
	if (eq) {
		role = sbt_role_from_name(eq + 1);
		if (role <= SBT_ROLE_NONE) {
			snprintf(err, errlen,
				 "--probe: unknown role '%s'; roles: copy-in copy-out compute launch wait alloc free "
				 "submit complete map unmap user",
				 eq + 1);
			return -1;
		}
	}
	/* one allocation holds both parts; it lives as long as the options */
	copy = strdup(arg);
	if (!copy) {
		snprintf(err, errlen, "--probe: out of memory");
		return -1;
	}
	copy[colon - arg] = '\0';
	if (eq)
		copy[eq - arg] = '\0';
	out->lib = copy;
	out->pattern = copy + (colon - arg) + 1;
	out->role = role;
	out->bytes_arg = -1;
	out->role_set = eq != NULL;
	return 0;
}

void probe_spec_free(struct probe_spec *s)
{
	free((char *)s->lib); /* the pattern lives in the same allocation */
	s->lib = s->pattern = NULL;
}

struct probe_spec *probe_specs_table(const struct probe_spec *user, int n, char **real, int *bad)
{
	struct probe_spec *t = calloc((size_t)n + sbt_n_builtin_probes, sizeof(*t));

	*bad = -1;
	if (!t)
		return NULL;
	memcpy(t, user, (size_t)n * sizeof(*t));
	memcpy(t + n, sbt_builtin_probes, sbt_n_builtin_probes * sizeof(*t));
	for (int i = 0; i < n; i++) {
		if (!strchr(t[i].lib, '/'))
			continue;
		if ((real[i] = realpath(t[i].lib, NULL)))
			t[i].lib = real[i];
		else if (*bad < 0)
			*bad = i;
	}
	return t;
}

bool probe_spec_wants_lib(const struct probe_spec *s, const char *libpath)
{
	const char *base = strrchr(libpath, '/'), *so;
	char unversioned[256];

	if (strchr(s->lib, '/'))
		return !strcmp(s->lib, libpath);
	base = base ? base + 1 : libpath;
	if (!fnmatch(s->lib, base, 0))
		return true;
	/* "libflex.so" also names libflex.so.1 and libflex.so.1.2 */
	so = strstr(base, ".so.");
	if (!so || (size_t)(so - base) + 4 > sizeof(unversioned))
		return false;
	snprintf(unversioned, sizeof(unversioned), "%.*s.so", (int)(so - base), base);
	return !fnmatch(s->lib, unversioned, 0);
}

static void lib_identity(struct probe_lib *l, const struct stat *st)
{
	l->dev = (uint64_t)st->st_dev;
	l->ino = (uint64_t)st->st_ino;
	l->size = (uint64_t)st->st_size;
	l->mtime_ns = (uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec;
}

static bool on_overlay(int fd, const char *path)
{
	struct statfs f;

	return (fd >= 0 ? fstatfs(fd, &f) : statfs(path, &f)) == 0 && f.f_type == OVERLAYFS_SUPER_MAGIC;
}

/*
 * The same file, as the kernel's uprobes see it? Two containers of one
 * image map one real file through two overlay mounts, each with its own
 * st_dev: uprobes put on it through each would run twice a call. On
 * overlayfs st_ino is the real file's (its layers on one filesystem), so
 * two overlay files of the same inode number, size and mtime are taken
 * for one.
 */
static bool same_file(const struct probe_lib *a, const struct probe_lib *b)
{
	if (a->dev == b->dev && a->ino == b->ino)
		return true;
	return a->overlay && b->overlay && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

bool probe_set_has_lib(const struct probe_set *ps, const char *libpath, const struct stat *st)
{
	struct probe_lib want = { 0 }, have = { 0 };
	struct stat now;
	bool known = st || !stat(libpath, &now);

	if (known) {
		lib_identity(&want, st ? st : &now);
		want.overlay = on_overlay(-1, libpath);
	}
	for (size_t i = 0; i < ps->nlibs; i++) {
		if (ps->libs[i].stale)
			continue;
		/* a path names one file only in our own root */
		if (!st && ps->libs[i].fd < 0 && !strcmp(ps->libs[i].path, libpath))
			return true;
		/* the same file by another path (a bind mount, a container's root) */
		if (known && !stat(ps->libs[i].attach, &now)) {
			lib_identity(&have, &now);
			have.overlay = ps->libs[i].overlay;
			if (same_file(&have, &want))
				return true;
		}
	}
	return false;
}

bool probe_lib_unchanged(const struct probe_lib *l)
{
	struct probe_lib now = *l;
	struct stat st;

	if (stat(l->attach, &st))
		return false;
	lib_identity(&now, &st);
	return now.dev == l->dev && now.ino == l->ino && now.size == l->size && now.mtime_ns == l->mtime_ns;
}

/* A cold part the compiler split off a function ("f.cold"): where it is,
 * its bytes read only when its function is decoded. */
struct cold_part {
	char *name;
	uint64_t offset, size;
};

struct scan_ctx {
	struct probe_set *ps;
	const struct probe_spec *specs;
	size_t nspecs;
	const char *lib; /* as found: what specs match */
	const char *attach; /* which file: what sites are told apart by */
	int added, error;
	unsigned int seen; /* symbols looked at: when to ask ps->stop */
	struct cold_part *cold;
	size_t ncold, cold_cap;
	char note[256]; /* what the reader skipped (elf_walk_opts) */
};

/* A read told to stop, asked every 4096 symbols (a library may have millions). */
static bool stopped(struct scan_ctx *c)
{
	if ((++c->seen & 4095) || !c->ps->stop || !c->ps->stop(c->ps->stop_ctx))
		return false;
	c->error = -EINTR;
	return true;
}

static int collect_cold(const struct elf_func *f, void *ctx)
{
	struct scan_ctx *c = ctx;
	struct cold_part *p;

	if (stopped(c))
		return c->error;
	if (!strstr(f->name, ".cold") || !f->size)
		return 0;
	if (c->ncold == c->cold_cap) {
		size_t cap = c->cold_cap ? c->cold_cap * 2 : 16;

		if (!(p = realloc(c->cold, cap * sizeof(*p))))
			return c->error = -ENOMEM;
		c->cold = p;
		c->cold_cap = cap;
	}
	p = &c->cold[c->ncold];
	*p = (struct cold_part){ strdup(f->name), f->offset, f->size };
	if (!p->name)
		return c->error = -ENOMEM;
	c->ncold++;
	return 0;
}

static const struct cold_part *cold_part_of(const struct scan_ctx *c, const char *sym)
{
	size_t n = strlen(sym);

	for (size_t i = 0; i < c->ncold; i++)
		if (!strncmp(c->cold[i].name, sym, n) && !strcmp(c->cold[i].name + n, ".cold"))
			return &c->cold[i];
	return NULL;
}

static bool site_exists(const struct probe_set *ps, const char *attach, uint64_t off)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->sites[i].offset == off && !strcmp(ps->sites[i].attach, attach))
			return true;
	return false;
}

/* The role a function gets: the spec's, unless the spec named no role and
 * a spec that does (a built-in one) matches the same function too. */
static const struct probe_spec *role_source(const struct scan_ctx *c, const struct probe_spec *s, const char *plain)
{
	if (s->role_set)
		return s;
	for (size_t i = 0; i < c->nspecs; i++) {
		const struct probe_spec *t = &c->specs[i];

		if (t->role_set && !strchr(t->pattern, '(') && probe_spec_wants_lib(t, c->lib) &&
		    !fnmatch(t->pattern, plain, 0))
			return t;
	}
	return s;
}

/* A function probed at its n return sites, or refused (n < 0: why), or
 * refused past the set's cap of uprobes. 0, or -ENOMEM. */
static int settle(struct probe_set *ps, struct probe_site *site, const struct ret_site *rets, int n, const char *reason)
{
	char why[160];

	snprintf(why, sizeof(why), "%s", n < 0 ? reason : "");
	if (n >= 0 && ps->max_uprobes && ps->uprobes + 1 + (size_t)n > ps->max_uprobes) {
		snprintf(why, sizeof(why), "the cap of %zu uprobes per process is reached (--max-probes)",
			 ps->max_uprobes);
		n = -1;
	}
	if (n < 0)
		return (site->refused = strdup(why)) ? 0 : -ENOMEM;
	if (n && !(site->rets = malloc((size_t)n * sizeof(*rets))))
		return -ENOMEM;
	memcpy(site->rets, rets, (size_t)n * sizeof(*rets));
	site->nrets = n;
	ps->uprobes += 1 + (size_t)n;
	return 0;
}

/* Where the function returns, or why it cannot be probed. */
static int find_returns(const struct scan_ctx *c, struct probe_site *site, const struct elf_func *f)
{
	struct probe_set *ps = c->ps;
	struct ret_site rets[RETSITES_MAX];
	const struct cold_part *part = cold_part_of(c, f->name);
	struct elf_func hot = *f, cold;
	char why[160];
	int n = -1;

	/* the bodies read now, for this function only: never the whole file */
	if (!hot.code && hot.size && !(hot.code = elf_func_code(f->file, f->offset, f->size, "body", why, sizeof(why))))
		goto decided;
	if (part) {
		cold =
			(struct elf_func){ part->name, part->offset,  part->size, NULL,
					   f->machine, f->big_endian, f->file };
		if (!(cold.code = elf_func_code(f->file, part->offset, part->size, "cold part", why, sizeof(why))))
			goto decided;
	}
	n = retsites_find(&hot, part ? &cold : NULL, site->name, rets, RETSITES_MAX, why, sizeof(why));
decided:
	if (hot.code != f->code)
		free((void *)hot.code);
	if (part)
		free((void *)cold.code);
	return settle(ps, site, rets, n, why);
}

static void site_free(struct probe_site *s)
{
	free(s->lib);
	free(s->name);
	free(s->symbol);
	free(s->rets);
	free(s->refused);
}

/* Room for one more site at the set's end: it, or NULL (*err set). */
static struct probe_site *new_site(struct probe_set *ps, int *err)
{
	if (ps->n > SBT_MAX_PROBE_ID) {
		*err = -E2BIG;
		return NULL;
	}
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 16;
		void *p = realloc(ps->sites, cap * sizeof(*ps->sites));

		if (!p) {
			*err = -ENOMEM;
			return NULL;
		}
		ps->sites = p;
		ps->cap = cap;
	}
	return &ps->sites[ps->n];
}

static int add_site(struct scan_ctx *c, const struct probe_spec *s, const struct elf_func *f, const char *name)
{
	const struct probe_spec *r = role_source(c, s, name);
	struct probe_set *ps = c->ps;
	struct probe_site *site;
	int err;

	if (!(site = new_site(ps, &err)))
		return err;
	*site = (struct probe_site){ .id = (uint32_t)ps->n,
				     .role = r->role,
				     .bytes_arg = r->bytes_arg,
				     .pattern = s->pattern,
				     .offset = f->offset,
				     .size = f->size };
	site->lib = strdup(c->lib);
	site->attach = c->attach;
	site->name = strdup(name);
	site->symbol = strdup(f->name);
	err = !site->lib || !site->name || !site->symbol ? -ENOMEM : find_returns(c, site, f);
	if (err) {
		site_free(site);
		return err;
	}
	ps->n++;
	c->added++;
	return 0;
}

static int scan_sym(const struct elf_func *f, void *ctx)
{
	struct scan_ctx *c = ctx;
	char *plain = NULL, *full = NULL;

	if (stopped(c))
		return c->error;
	/* a cold part is no function of its own: it is decoded with its function */
	if (site_exists(c->ps, c->attach, f->offset) || strstr(f->name, ".cold"))
		return 0;
	for (size_t i = 0; i < c->nspecs && !c->error; i++) {
		const struct probe_spec *s = &c->specs[i];
		bool params = strchr(s->pattern, '(') != NULL;
		char **name = params ? &full : &plain;

		if (!probe_spec_wants_lib(s, c->lib))
			continue;
		if (!*name && !(*name = sbt_demangle(f->name, params))) {
			c->error = -ENOMEM;
			break;
		}
		if (fnmatch(s->pattern, *name, 0))
			continue;
		if (!plain && !(plain = sbt_demangle(f->name, false))) {
			c->error = -ENOMEM;
			break;
		}
		c->error = add_site(c, s, f, plain);
		break; /* first matching spec wins */
	}
	free(plain);
	free(full);
	return c->error;
}

/* The library's entry in the set; fd (kept) -1 for a path. NULL when out
 * of memory (fd closed). */
static struct probe_lib *add_lib(struct probe_set *ps, const char *libpath, int fd)
{
	struct probe_lib *libs, *l;
	struct stat st;

	libs = realloc(ps->libs, (ps->nlibs + 1) * sizeof(*libs));
	if (!libs) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	ps->libs = libs;
	l = &ps->libs[ps->nlibs];
	*l = (struct probe_lib){ .path = strdup(libpath), .fd = fd };
	if (fd >= 0 ? asprintf(&l->attach, "/proc/self/fd/%d", fd) < 0 : !(l->attach = strdup(libpath)))
		l->attach = NULL;
	if (!l->path || !l->attach) {
		free(l->path);
		free(l->attach);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	/* which file, before it is read: a change while reading shows next time */
	if (fd >= 0 ? !fstat(fd, &st) : !stat(libpath, &st))
		lib_identity(l, &st);
	l->overlay = on_overlay(fd, libpath);
	ps->nlibs++;
	return l;
}

/* The library read here, in this process: what the sandboxed reader does. */
static int scan_here(struct probe_set *ps, const struct probe_spec *specs, size_t nspecs, const struct probe_lib *l,
		     char *note, size_t notelen, char *err, size_t errlen)
{
	struct scan_ctx c = { ps, specs, nspecs, l->path, l->attach, 0, 0 };
	struct elf_walk_opts o = { ps->stop, ps->stop_ctx, c.note, sizeof(c.note) };
	int ret;

	/* cold parts first (by offset, not copied): a function is decoded
	 * with its cold part, which may come after it in the table */
	ret = l->fd >= 0 ? elf_for_each_function_fd(l->fd, l->path, collect_cold, &c, &o, err, errlen)
			 : elf_for_each_function(l->path, collect_cold, &c, &o, err, errlen);
	if (!ret && !c.error)
		ret = l->fd >= 0 ? elf_for_each_function_fd(l->fd, l->path, scan_sym, &c, &o, err, errlen)
				 : elf_for_each_function(l->path, scan_sym, &c, &o, err, errlen);
	for (size_t i = 0; i < c.ncold; i++)
		free(c.cold[i].name);
	free(c.cold);
	snprintf(note, notelen, "%s", c.note);
	if (ret)
		return ret;
	if (c.error) {
		snprintf(err, errlen, "%s: %s", l->path, strerror(-c.error));
		return c.error;
	}
	return c.added;
}

/* ---- the library read in a sandboxed child --------------------------------- */

struct reader_job {
	const struct probe_spec *specs;
	size_t nspecs;
	const char *path;
};

/* In the child (base/sandbox.h): the library on in, the answer to out. */
static int read_in_child(int in, int out, void *ctx)
{
	const struct reader_job *j = ctx;
	struct probe_set local = { 0 };
	struct probe_lib l = { .path = (char *)j->path, .attach = (char *)j->path, .fd = in };
	char err[SITECODEC_MAX_TEXT] = "", note[256] = "";
	int ret = scan_here(&local, j->specs, j->nspecs, &l, note, sizeof(note), err, sizeof(err));

	ret = sitecodec_write(out, ret < 0 ? ret : 0, ret < 0 ? err : "", note, &local, j->specs, j->nspecs);
	probe_set_free(&local); /* (its exit would; a leak checker asks) */
	return ret ? 1 : 0;
}

/* One function the child found, checked by sitecodec, into the set as
 * scan_here would have put it (the set's cap applied here). */
static int add_found(void *ctx, const struct site_found *f)
{
	struct scan_ctx *c = ctx;
	const struct probe_spec *s = &c->specs[f->spec], *r;
	struct probe_site *site;
	int err;

	if (site_exists(c->ps, c->attach, f->offset))
		return 0;
	r = role_source(c, s, f->name);
	if (!(site = new_site(c->ps, &err)))
		return err;
	*site = (struct probe_site){ .id = (uint32_t)c->ps->n,
				     .role = r->role,
				     .bytes_arg = r->bytes_arg,
				     .pattern = s->pattern,
				     .offset = f->offset,
				     .size = f->size };
	site->lib = strdup(c->lib);
	site->attach = c->attach;
	site->name = strdup(f->name);
	site->symbol = strdup(f->symbol);
	err = !site->lib || !site->name || !site->symbol
		      ? -ENOMEM
		      : settle(c->ps, site, f->rets, f->refused ? -1 : f->nrets, f->refused);
	if (err) {
		site_free(site);
		return err;
	}
	c->ps->n++;
	c->added++;
	return 0;
}

/* A library is read and decoded in a sandboxed child: a crafted file that
 * crashes the reader, exhausts it or makes it lie costs that library, said
 * in err, never the tracer. */
static int scan(struct probe_set *ps, const struct probe_spec *specs, size_t nspecs, const struct probe_lib *l,
		char *err, size_t errlen)
{
	struct scan_ctx c = { ps, specs, nspecs, l->path, l->attach, 0, 0 };
	struct reader_job j = { specs, nspecs, l->path };
	char why[512] = "", child_err[SITECODEC_MAX_TEXT + 1] = "", note[SITECODEC_MAX_TEXT + 1] = "";
	int fd = l->fd >= 0 ? l->fd : elf_open_library(l->path, err, errlen), ret, child_ret = 0;
	uint8_t *answer;
	struct stat st;
	size_t len;

	if (fd < 0)
		return fd;
	ret = fstat(fd, &st) ? -errno
			     : sandbox_run(fd, read_in_child, &j, SITECODEC_MAX_BYTES, ps->stop, ps->stop_ctx, &answer,
					   &len, why, sizeof(why));
	if (l->fd < 0)
		close(fd);
	if (!ret) {
		ret = sitecodec_read(answer, len, nspecs, (uint64_t)st.st_size, &child_ret, child_err,
				     sizeof(child_err), note, sizeof(note), add_found, &c, why, sizeof(why));
		free(answer);
	}
	if (note[0])
		sbt_warn("%s: %s", l->path, note);
	if (ret) { /* why is the sandbox's or the checks'; else fstat's or add_found's errno */
		snprintf(err, errlen, "%s: %s", l->path, why[0] ? why : strerror(-ret));
		return ret;
	}
	if (child_ret < 0) {
		snprintf(err, errlen, "%s", child_err);
		return child_ret;
	}
	return c.added;
}

static void lib_free(struct probe_lib *l);

/* A read that was stopped leaves nothing: not its library (to be read
 * again when next found), not the functions it had found. */
static int scan_or_forget(struct probe_set *ps, const struct probe_spec *specs, size_t nspecs, struct probe_lib *l,
			  char *err, size_t errlen)
{
	size_t n = ps->n, uprobes = ps->uprobes;
	int ret = scan(ps, specs, nspecs, l, err, errlen);

	if (ret != -EINTR)
		return ret;
	while (ps->n > n)
		site_free(&ps->sites[--ps->n]);
	ps->uprobes = uprobes;
	lib_free(&ps->libs[--ps->nlibs]);
	return ret;
}

int probe_set_scan_lib(struct probe_set *ps, const struct probe_spec *specs, size_t nspecs, const char *libpath,
		       char *err, size_t errlen)
{
	struct probe_lib *l = add_lib(ps, libpath, -1);

	return l ? scan_or_forget(ps, specs, nspecs, l, err, errlen) : -ENOMEM;
}

int probe_set_scan_lib_fd(struct probe_set *ps, const struct probe_spec *specs, size_t nspecs, const char *libpath,
			  int fd, char *err, size_t errlen)
{
	struct probe_lib *l = add_lib(ps, libpath, fd);

	return l ? scan_or_forget(ps, specs, nspecs, l, err, errlen) : -ENOMEM;
}

static void lib_free(struct probe_lib *l)
{
	free(l->path);
	free(l->attach);
	if (l->fd >= 0)
		close(l->fd);
}

/* dst has read this file already (a search that ran beside another). */
static bool has_same_file(const struct probe_set *dst, const struct probe_lib *l)
{
	for (size_t i = 0; i < dst->nlibs; i++) {
		const struct probe_lib *d = &dst->libs[i];

		if (d->stale)
			continue;
		if (l->ino ? same_file(d, l) : d->fd < 0 && l->fd < 0 && !strcmp(d->path, l->path))
			return true;
	}
	return false;
}

int probe_set_adopt(struct probe_set *dst, struct probe_set *src)
{
	size_t moved = 0;
	bool *keep;

	if (!src->nlibs)
		return 0;
	/* room for all of it first: nothing moves unless everything can */
	if (dst->n + src->n > dst->cap) {
		size_t cap = dst->n + src->n;
		void *p = realloc(dst->sites, cap * sizeof(*dst->sites));

		if (!p)
			return -ENOMEM;
		dst->sites = p;
		dst->cap = cap;
	}
	{
		void *p = realloc(dst->libs, (dst->nlibs + src->nlibs) * sizeof(*dst->libs));

		if (!p)
			return -ENOMEM;
		dst->libs = p;
	}
	if (!(keep = calloc(src->nlibs, sizeof(*keep))))
		return -ENOMEM;
	for (size_t i = 0; i < src->nlibs; i++)
		keep[i] = !has_same_file(dst, &src->libs[i]);
	for (size_t k = 0; k < src->n; k++) {
		struct probe_site *s = &src->sites[k];
		bool kept = false;

		for (size_t i = 0; i < src->nlibs; i++)
			if (s->attach == src->libs[i].attach) {
				kept = keep[i];
				break;
			}
		if (!kept || dst->n > SBT_MAX_PROBE_ID) {
			site_free(s);
			continue;
		}
		if (!s->refused && dst->max_uprobes && dst->uprobes + 1 + (size_t)s->nrets > dst->max_uprobes) {
			free(s->rets);
			s->rets = NULL;
			s->nrets = 0;
			if (asprintf(&s->refused, "the cap of %zu uprobes per process is reached (--max-probes)",
				     dst->max_uprobes) < 0) {
				s->refused = NULL;
				site_free(s); /* never probed without its returns */
				continue;
			}
		}
		if (!s->refused)
			dst->uprobes += 1 + (size_t)s->nrets;
		s->id = (uint32_t)dst->n;
		dst->sites[dst->n++] = *s;
		moved++;
	}
	for (size_t i = 0; i < src->nlibs; i++) {
		if (keep[i])
			dst->libs[dst->nlibs++] = src->libs[i];
		else
			lib_free(&src->libs[i]);
	}
	free(keep);
	free(src->sites);
	free(src->libs);
	src->sites = NULL;
	src->libs = NULL;
	src->n = src->cap = src->nlibs = 0;
	src->uprobes = 0;
	return (int)moved;
}

void probe_set_free(struct probe_set *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		site_free(&ps->sites[i]);
	for (size_t i = 0; i < ps->nlibs; i++)
		lib_free(&ps->libs[i]);
	free(ps->sites);
	free(ps->libs);
	memset(ps, 0, sizeof(*ps));
}
