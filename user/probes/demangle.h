/* SPDX-License-Identifier: GPL-2.0-only */
/* C++ demangling through libiberty, the demangler binutils and gdb use. */
#ifndef SBT_DEMANGLE_H
#define SBT_DEMANGLE_H

#include <stdbool.h>

/* Demangled name, with or without its parameter list; a copy of the input
 * for names that are not mangled. Free with free(); NULL when out of memory. */
char *sbt_demangle(const char *mangled, bool with_params);

#endif
