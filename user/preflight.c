// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preflight.h"
#include "procfs.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

uint64_t sbt_effective_caps(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return 0;
	return (uint64_t)d[1].effective << 32 | d[0].effective;
}

int sbt_check_privileges(uid_t euid, uint64_t caps, char *err, size_t errlen)
{
	/* uprobes, tracepoints and bpf_probe_read want all three */
	const uint64_t need = 1ull << CAP_BPF | 1ull << CAP_PERFMON | 1ull << CAP_SYS_ADMIN;

	if (euid == 0 || (caps & need) == need)
		return 0;
	snprintf(err, errlen,
		 "not permitted to load BPF programs (need root, or CAP_BPF, CAP_PERFMON and "
		 "CAP_SYS_ADMIN); hint: run with sudo");
	return -1;
}

int sbt_check_btf(const char *path, char *err, size_t errlen)
{
	if (!access(path, R_OK))
		return 0;
	snprintf(err, errlen,
		 "kernel BTF not available (%s: %s); hint: needs a kernel built with "
		 "CONFIG_DEBUG_INFO_BTF=y (Debian's and most distributions' are)",
		 path, strerror(errno));
	return -1;
}

int sbt_check_pid(pid_t pid, char *err, size_t errlen)
{
	if (proc_exists(pid))
		return 0;
	snprintf(err, errlen, "no such process: %d; hint: check the PID with ps or pgrep", pid);
	return -1;
}
