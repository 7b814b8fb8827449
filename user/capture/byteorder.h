/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Records between the two byte orders. A capture is written in the order
 * of the host that recorded it (s390x is big-endian, the others here
 * little-endian); its file header says which (the version field reads
 * swapped in the other order), and the reader turns each record into this
 * host's order, field by field, as it goes. So a capture from an IBM Z
 * host converts on an x86 laptop.
 */
#ifndef SBT_BYTEORDER_H
#define SBT_BYTEORDER_H

#include <stdbool.h>
#include <stddef.h>

#include "events.h"

/* The header's fields (type, size, ids, ts) swapped. */
void sbt_hdr_swap(struct sbt_hdr *h);
/* The whole record swapped, len bytes of it (header and payload; what lies
 * past len is left alone). foreign: its header is in the other order now
 * (read from such a capture), else in this host's (to be written the
 * other way). */
void sbt_record_swap(struct sbt_hdr *h, size_t len, bool foreign);

#endif
