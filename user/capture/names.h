/* SPDX-License-Identifier: GPL-2.0-only */
/* Names for the numbers in records: types, roles, fd kinds, VFIO commands. */
#ifndef SBT_NAMES_H
#define SBT_NAMES_H

#include <stdint.h>

const char *sbt_type_name(uint16_t type);
const char *sbt_role_name(unsigned int role);
/* SBT_ROLE_* from a name such as "copy-in"; -1 when unknown */
int sbt_role_from_name(const char *name);
const char *sbt_fd_kind_name(unsigned int kind);
/* "VFIO_IOMMU_MAP_DMA", or NULL for a command that is not VFIO's. The fd
 * kind matters: VFIO numbers mean different things on device fds. */
const char *sbt_vfio_cmd_name(uint32_t cmd, unsigned int fd_kind);
#include <stddef.h>

/* A PCI address as events.h numbers it (SBT_BDF_NONE aside) to 0000:3a:00.0 */
void sbt_bdf_str(uint32_t bdf, char *out, size_t len);
/* The first PCI address (DDDD:BB:DD.F) in s, such as an interrupt's name:
 * where it starts (12 characters), its number in *bdf; NULL if none. */
const char *sbt_bdf_find(const char *s, uint32_t *bdf);
/* The vfio function an SBT_DRV record is about */
const char *sbt_drv_func_name(unsigned int func);
struct sbt_drv;
/* The VFIO command of a driver-level ioctl record, or NULL */
const char *sbt_drv_cmd_name(const struct sbt_drv *r);
/* "ENOTTY" for 25; "E?" when unknown */
const char *sbt_errno_name(int err);

#endif
