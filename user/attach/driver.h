/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Driver-level probes: which vfio functions get fentry/fexit, which get
 * kprobe/kretprobe, which get nothing, and why (the attach plan). Decided
 * per function by trying, never by kernel version.
 */
#ifndef SBT_DRIVER_H
#define SBT_DRIVER_H

#include "attach/plan.h"
#include "events.h" /* before the skeleton: its rodata uses these types */
#include "spyre.skel.h"

enum driver_mode {
	DRIVER_AUTO = 0, /* fentry where it attaches, else kprobe, else none */
	DRIVER_FENTRY, /* fentry or nothing */
	DRIVER_KPROBE, /* kprobe or nothing */
	DRIVER_OFF, /* syscall and tracepoint paths only */
};

#define DRIVER_MAX_PROGS 32

struct driver_plan {
	struct bpf_program *progs[DRIVER_MAX_PROGS]; /* to attach after load */
	int nprogs;
	int nfentry, nkprobe, nnone; /* functions by mechanism */
};

/* Choose per function, set autoload on the skeleton's programs (before
 * load) and add one plan line per function. */
void driver_plan(struct spyre_bpf *s, enum driver_mode mode, struct driver_plan *dp, struct plan *plan);

/* "auto", "fentry", "kprobe", "off" -> mode; -1 if none of them */
int driver_mode_parse(const char *s);

/* One more kernel function hooked the same way (fentry where a trial
 * attaches, else kprobe; programs named FUNC_fentry, _fexit, _kprobe,
 * _kretprobe, whose autoload the caller set false; one for fentry only,
 * DRIVER_FENTRY, may have _fentry alone): the mechanism, or NULL with why
 * filled. */
const char *driver_hook_kernel(struct spyre_bpf *s, enum driver_mode mode, const char *func, struct driver_plan *dp,
			       char *why, size_t len);

/* One of the driver-level programs (fentry, fexit, kprobe, kretprobe)? */
bool driver_is_prog(const struct bpf_program *p);

#endif
