/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The attach plan: for each probe role, the mechanism chosen and why the
 * others were not. Decided by probing features (tracefs entries, module
 * BTF, kernel BTF types), never by kernel version. `-v` prints it.
 */
#ifndef SBT_PLAN_H
#define SBT_PLAN_H

#include <stdbool.h>
#include <stdio.h>

#define PLAN_MAX 48

struct plan {
	struct plan_item {
		char role[16];
		char mech[64]; /* chosen mechanism, or "-" when a candidate was passed over */
		char note[384];
	} items[PLAN_MAX];
	int n;
};

__attribute__((format(printf, 4, 5))) void plan_add(struct plan *p, const char *role, const char *mech, const char *fmt,
						    ...);
void plan_print(const struct plan *p, FILE *out);

/* The dma tracepoint this kernel has for mapping (or unmapping); NULL: none. */
const char *plan_dma_tracepoint(bool unmap);

/* Feature probes */
int sbt_ensure_tracefs(void); /* 0, or -errno (said) if it cannot be mounted */
bool sbt_tracepoint_exists(const char *category, const char *name);
bool sbt_have_kprobes(void);
bool sbt_have_uprobes(void);
bool sbt_module_btf(const char *module);
bool sbt_have_tp_btf(const char *tracepoint);

#endif
