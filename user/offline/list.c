// SPDX-License-Identifier: GPL-2.0-only
/*
 * `spyre-bpftrace list LIB...`: the runtime probes a library gets, before
 * tracing anything, as `bpftrace -l` lists probes: each function with its
 * role, its entry and return sites, or why it is refused. Needs no
 * privileges; nothing is attached.
 */
#include <argp.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "capture/names.h"
#include "commands.h"
#include "events.h"
#include "probes/probes.h"
#include "probes/retsites.h"

static const char list_doc[] = "List the runtime probes of libraries: each function the built-in table (and "
			       "--probe) picks, its role, where it is entered and where it returns, or why it is "
			       "refused.\n"
			       "\n"
			       "EXAMPLES:\n"
			       "  spyre-bpftrace list /opt/ibm/spyre/runtime/lib/libflex.so\n"
			       "  spyre-bpftrace list ./libx.so --probe ./libx.so:'ns::*'";

enum { OPT_PROBE = 1000 };

struct list_opts {
	char *libs[64];
	int nlibs;
	struct probe_spec specs[64];
	int nspecs;
	char *real[64]; /* --probe libraries named by path, resolved */
};

static error_t list_parse(int key, char *arg, struct argp_state *state)
{
	struct list_opts *o = state->input;
	char err[256];

	switch (key) {
	case OPT_PROBE:
		if (o->nspecs == 64)
			argp_error(state, "at most 64 --probe");
		if (probe_spec_parse(arg, &o->specs[o->nspecs], err, sizeof(err)))
			argp_error(state, "%s", err);
		o->nspecs++;
		return 0;
	case ARGP_KEY_ARG:
		if (o->nlibs == 64)
			argp_error(state, "at most 64 libraries");
		o->libs[o->nlibs++] = arg;
		return 0;
	case ARGP_KEY_END:
		if (!o->nlibs)
			argp_error(state, "no library; hint: spyre-bpftrace list /path/libflex.so");
		return 0;
	default: return ARGP_ERR_UNKNOWN;
	}
}

/* LIB+0xENTRY NAME role=ROLE ret=0x..,0x.. tail=0x.. indirect=0x.. | refused="why" */
static void print_site(const struct probe_site *s)
{
	printf("%s+0x%llx %s role=%s", s->lib, (unsigned long long)s->offset, s->name, sbt_role_name(s->role));
	if (s->refused) {
		printf(" refused=\"%s\"\n", s->refused);
		return;
	}
	for (int k = SBT_SITE_RET; k <= SBT_SITE_INDIRECT; k++) {
		int shown = 0;

		for (int i = 0; i < s->nrets; i++)
			if (s->rets[i].kind == k)
				printf("%s0x%llx",
				       shown++		    ? ","
				       : k == SBT_SITE_RET  ? " ret="
				       : k == SBT_SITE_TAIL ? " tail="
							    : " indirect=",
				       (unsigned long long)s->rets[i].offset);
	}
	putchar('\n');
}

int cmd_list(int argc, char **argv)
{
	static const struct argp_option options[] = { { "probe", OPT_PROBE, "LIB:PATTERN[=ROLE]", 0,
							"Also list functions of LIB matching PATTERN (repeatable)", 0 },
						      { 0 } };
	static const struct argp argp = { options, list_parse, "LIB...", list_doc, NULL, NULL, NULL };
	struct list_opts o = { 0 };
	struct probe_set ps = { 0 };
	struct probe_spec *specs;
	size_t n;
	int ret = 0, bad;

	if (argp_parse(&argp, argc, argv, 0, NULL, &o))
		return 2;
	n = (size_t)o.nspecs + sbt_n_builtin_probes;
	/* a --probe path that does not resolve is matched as given */
	specs = probe_specs_table(o.specs, o.nspecs, o.real, &bad);
	if (!specs)
		return 1;
	for (int i = 0; i < o.nlibs; i++) {
		char err[512], *real = realpath(o.libs[i], NULL);
		size_t first = ps.n;

		if (!real || probe_set_scan_lib(&ps, specs, n, real, err, sizeof(err)) < 0) {
			sbt_err("cannot read '%s': %s", o.libs[i], real ? err : "no such file");
			ret = 1;
		} else if (ps.n == first) { /* read, and nothing in it to probe: said, not silent */
			sbt_err("no function of '%s' would be probed: it is no Spyre runtime library known to "
				"spyre-bpftrace; hint: --probe '%s:PATTERN' names functions of your own",
				o.libs[i], o.libs[i]);
			ret = 1;
		}
		for (size_t k = first; k < ps.n; k++)
			print_site(&ps.sites[k]);
		free(real);
	}
	probe_set_free(&ps);
	for (int i = 0; i < o.nspecs; i++) {
		free(o.real[i]);
		probe_spec_free(&o.specs[i]);
	}
	free(specs);
	return ret;
}
