// SPDX-License-Identifier: GPL-2.0-only
/*
 * Every program of spyre-bpftrace as one translation unit: how the
 * big-endian (s390x) object is built, since bpftool 7.1 cannot link
 * big-endian objects. Little-endian builds compile each file alone and
 * link them; the shared maps and settings are __weak in the headers, whose
 * guards keep them single here.
 */
#include "dma.bpf.c"
#include "driver.bpf.c"
#include "ioctl.bpf.c"
#include "irq.bpf.c"
#include "runtime.bpf.c"
#include "task.bpf.c"
