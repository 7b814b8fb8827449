// SPDX-License-Identifier: GPL-2.0-only
#include <libiberty/demangle.h>
#include <stdlib.h>
#include <string.h>

#include "probes/demangle.h"

char *sbt_demangle(const char *mangled, bool with_params)
{
	char *d = NULL;

	if (!strncmp(mangled, "_Z", 2))
		d = cplus_demangle(mangled, with_params ? DMGL_PARAMS | DMGL_ANSI : DMGL_NO_OPTS);
	return d ? d : strdup(mangled);
}
