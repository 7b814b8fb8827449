// SPDX-License-Identifier: GPL-2.0-only
/* Which files are VFIO's (vfio_files.h). */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "attach/vfio_files.h"
#include "base/procfs.h"
#include "events.h"
#include "spyre.skel.h"

/* in the order of the BPF map daemon_vfio_fns */
static const char *const handlers[3] = { "vfio_fops_unl_ioctl", "vfio_group_fops_unl_ioctl",
					 "vfio_device_fops_unl_ioctl" };

int vfio_dir_arg(const char *arg, char *dir, size_t len, char *err, size_t errlen)
{
	size_t n = strlen(arg);
	struct stat st;

	if (n >= 2 && !strcmp(arg + n - 2, "/*"))
		n -= 2;
	if (arg[0] != '/' || n == 0 || n >= len) {
		snprintf(err, errlen, "--vfio-path '%s': give an absolute directory; hint: --vfio-path /tmp/mock", arg);
		return -1;
	}
	memcpy(dir, arg, n);
	dir[n] = 0;
	if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen,
			 "--vfio-path '%s': not a directory; hint: the daemon takes the directory "
			 "of the mock files, which must exist",
			 dir);
		return -1;
	}
	return 0;
}

int vfio_files_dirs(struct spyre_bpf *s, const char *const *dirs, int n, char *err, size_t errlen)
{
	int fd = bpf_map__fd(s->maps.daemon_mock_dirs);

	for (int i = 0; i < n; i++) {
		struct sbt_inode_key key = { 0 };
		uint32_t one = 1;
		struct stat st;

		if (stat(dirs[i], &st)) {
			snprintf(err, errlen, "--vfio-path '%s': %s", dirs[i], strerror(errno));
			return -errno;
		}
		key.ino = (uint64_t)st.st_ino;
		/* the kernel's dev_t: major in the top 12 bits, minor in the low 20 */
		key.dev = (uint32_t)(major(st.st_dev) << 20 | minor(st.st_dev));
		if (bpf_map_update_elem(fd, &key, &one, BPF_ANY)) {
			snprintf(err, errlen, "--vfio-path '%s': %s", dirs[i], strerror(errno));
			return -errno;
		}
	}
	return 0;
}

bool vfio_files_handlers(struct spyre_bpf *s)
{
	uint64_t addr[3] = { 0 };
	bool found[3] = { false };

	/* all three, at real addresses (kptr_restrict shows 0s) */
	if (kallsyms_find(handlers, 3, found, addr) < 3 || !addr[0] || !addr[1] || !addr[2])
		return false;
	for (uint32_t i = 0; i < 3; i++)
		if (bpf_map_update_elem(bpf_map__fd(s->maps.daemon_vfio_fns), &i, &addr[i], BPF_ANY))
			return false;
	return true;
}

bool vfio_module_present(void)
{
	struct stat st;

	return !stat("/sys/module/vfio", &st);
}
