/* SPDX-License-Identifier: GPL-2.0-only */
/* IBM Z's stand-in card: a modern virtio-rng PCI device through VFIO. */
#ifndef SPYRE_SIM_VIRTIO_H
#define SPYRE_SIM_VIRTIO_H

#include <stdint.h>

#include "edu.h"

#define VIRTIO_RNG_VENDOR 0x1af4
#define VIRTIO_RNG_DEVICE 0x1044

/* Set the device up with its one queue in ring (a page DMA-mapped at
 * ring_iova) and MSI-X vector 0 on an eventfd; config is where config space
 * is in the device fd. 0 or -errno. */
int virtio_card_start(struct edu *e, uint64_t config, void *ring, uint64_t ring_iova,
		      vfio_call call);
/* Ask for n bytes at iova (0: 64 into the card's own page, for a job that
 * has no buffer); waits for the interrupt. 0 or -errno, and how
 * many bytes the device wrote. */
int virtio_card_fill(struct edu *e, uint64_t iova, uint32_t n, uint32_t *written);

#endif
