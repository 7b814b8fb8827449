// SPDX-License-Identifier: GPL-2.0-only
/* The built-in probe table and resolving probe specs to sites. */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "elfsyms.h"
#include "events.h"
#include "names.h"
#include "probes.h"

/*
 * The public flex and senlib entry points (../shared/reference). Their
 * signatures are not public: bytes_arg follows the simulator's signatures,
 * our best reading of how torch-spyre calls them. deallocate and Unmap are
 * the simulator's names for the release path and unverified on real flex.
 */
const struct probe_spec sbt_builtin_probes[] = {
	{ "libflex.so", "flex::RuntimeStream::launchH2D", SBT_ROLE_COPY_IN, 3 },
	{ "libflex.so", "flex::RuntimeStream::launchD2H", SBT_ROLE_COPY_OUT, 3 },
	{ "libflex.so", "flex::RuntimeStream::launchCompute", SBT_ROLE_COMPUTE, -1 },
	{ "libflex.so", "flex::RuntimeStream::launchOperation", SBT_ROLE_LAUNCH, -1 },
	{ "libflex.so", "flex::RuntimeStream::synchronize", SBT_ROLE_WAIT, -1 },
	{ "libflex.so", "flex::FlexAllocator::allocate", SBT_ROLE_ALLOC, 1 },
	{ "libflex.so", "flex::FlexAllocator::deallocate", SBT_ROLE_FREE, -1 },
	{ "libsenlib*.so", "senlib::ControlBlockInterface::QueueControlBlocksSBF",
	  SBT_ROLE_SUBMIT, -1 },
	{ "libsenlib*.so", "senlib::ResponseBlockInterface::ReceiveResponsesSBF",
	  SBT_ROLE_COMPLETE, -1 },
	{ "libsenlib*.so", "senlib::PfIommuMapper::Map", SBT_ROLE_MAP, 2 },
	{ "libsenlib*.so", "senlib::PfIommuMapper::Unmap", SBT_ROLE_UNMAP, 2 },
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
		snprintf(err, errlen,
			 "--probe '%s': expected LIB:PATTERN, e.g. libflex.so:'flex::*'", arg);
		return -1;
	}
	eq = strrchr(colon + 1, '=');
	if (eq) {
		role = sbt_role_from_name(eq + 1);
		if (role <= SBT_ROLE_NONE) {
			snprintf(err, errlen,
				 "--probe: unknown role '%s'; roles: copy-in copy-out compute launch wait alloc free submit complete map unmap user",
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
	return 0;
}

void probe_spec_free(struct probe_spec *s)
{
	free((char *)s->lib); /* the pattern lives in the same allocation */
	s->lib = s->pattern = NULL;
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

bool probe_set_has_lib(const struct probe_set *ps, const char *libpath)
{
	for (size_t i = 0; i < ps->nlibs; i++)
		if (!strcmp(ps->libs[i], libpath))
			return true;
	return false;
}

struct scan_ctx {
	struct probe_set *ps;
	const struct probe_spec *specs;
	size_t nspecs;
	const char *lib;
	int added, error;
};

static bool site_exists(const struct probe_set *ps, const char *lib, uint64_t off)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->sites[i].offset == off && !strcmp(ps->sites[i].lib, lib))
			return true;
	return false;
}

static int add_site(struct scan_ctx *c, const struct probe_spec *s, const char *sym,
		    const char *name, uint64_t off)
{
	struct probe_set *ps = c->ps;
	struct probe_site *site;

	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 16;
		void *p = realloc(ps->sites, cap * sizeof(*ps->sites));

		if (!p)
			return -ENOMEM;
		ps->sites = p;
		ps->cap = cap;
	}
	site = &ps->sites[ps->n];
	*site = (struct probe_site){ .id = (uint32_t)ps->n, .role = s->role,
				     .bytes_arg = s->bytes_arg, .pattern = s->pattern,
				     .offset = off };
	site->lib = strdup(c->lib);
	site->name = strdup(name);
	site->symbol = strdup(sym);
	if (!site->lib || !site->name || !site->symbol) {
		free(site->lib);
		free(site->name);
		free(site->symbol);
		return -ENOMEM;
	}
	ps->n++;
	c->added++;
	return 0;
}

static int scan_sym(const char *mangled, uint64_t off, void *ctx)
{
	struct scan_ctx *c = ctx;
	char *plain = NULL, *full = NULL;

	if (site_exists(c->ps, c->lib, off))
		return 0;
	for (size_t i = 0; i < c->nspecs && !c->error; i++) {
		const struct probe_spec *s = &c->specs[i];
		bool params = strchr(s->pattern, '(') != NULL;
		char **name = params ? &full : &plain;

		if (!probe_spec_wants_lib(s, c->lib))
			continue;
		if (!*name && !(*name = sbt_demangle(mangled, params))) {
			c->error = -ENOMEM;
			break;
		}
		if (fnmatch(s->pattern, *name, 0))
			continue;
		if (!plain && !(plain = sbt_demangle(mangled, false))) {
			c->error = -ENOMEM;
			break;
		}
		c->error = add_site(c, s, mangled, plain, off);
		break; /* first matching spec wins */
	}
	free(plain);
	free(full);
	return c->error;
}

int probe_set_scan_lib(struct probe_set *ps, const struct probe_spec *specs,
		       size_t nspecs, const char *libpath, char *err, size_t errlen)
{
	struct scan_ctx c = { ps, specs, nspecs, libpath, 0, 0 };
	char **libs;
	int ret;

	libs = realloc(ps->libs, (ps->nlibs + 1) * sizeof(*libs));
	if (!libs)
		return -ENOMEM;
	ps->libs = libs;
	if (!(ps->libs[ps->nlibs] = strdup(libpath)))
		return -ENOMEM;
	ps->nlibs++;
	ret = elf_for_each_function(libpath, scan_sym, &c, err, errlen);
	if (ret)
		return ret;
	if (c.error) {
		snprintf(err, errlen, "%s: %s", libpath, strerror(-c.error));
		return c.error;
	}
	return c.added;
}

void probe_set_free(struct probe_set *ps)
{
	for (size_t i = 0; i < ps->n; i++) {
		free(ps->sites[i].lib);
		free(ps->sites[i].name);
		free(ps->sites[i].symbol);
	}
	for (size_t i = 0; i < ps->nlibs; i++)
		free(ps->libs[i]);
	free(ps->sites);
	free(ps->libs);
	memset(ps, 0, sizeof(*ps));
}
