// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdbool.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attach/preflight.h"
#include "base/procfs.h"

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

/* Tgid and whether it is a kernel thread, from /proc/PID/status; -1 gone. */
static int pid_status(const char *root, pid_t pid, pid_t *tgid, bool *kthread)
{
	char path[128], line[256];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "%s/%d/status", root, pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	*kthread = false;
	while (fgets(line, sizeof(line), f)) {
		int v;

		if (sscanf(line, "Tgid: %d", &v) == 1) {
			*tgid = v;
			found = 1;
		} else if (sscanf(line, "Kthread: %d", &v) == 1) {
			*kthread = v == 1;
		}
	}
	fclose(f);
	return found ? 0 : -1;
}

int sbt_resolve_pid(const char *proc_root, pid_t *pid, char *note, size_t notelen, char *err, size_t errlen)
{
	char exe[128], link[16];
	pid_t tgid = 0;
	bool kthread;

	note[0] = '\0';
	if (*pid <= 0 || pid_status(proc_root, *pid, &tgid, &kthread)) {
		snprintf(err, errlen, "no such process: %d; hint: check the PID with ps or pgrep", *pid);
		return -1;
	}
	/* kernels before 6.0 have no Kthread line: a kernel thread has no exe */
	snprintf(exe, sizeof(exe), "%s/%d/exe", proc_root, *pid);
	if (kthread || (readlink(exe, link, sizeof(link)) < 0 && errno == ENOENT)) {
		snprintf(err, errlen,
			 "PID %d is a kernel thread: it runs no runtime library; hint: "
			 "give the PID of the job's process (pgrep -f)",
			 *pid);
		return -1;
	}
	if (tgid != *pid) {
		snprintf(note, notelen, "PID %d is a thread of process %d: tracing the process", *pid, tgid);
		*pid = tgid;
	}
	return 0;
}
