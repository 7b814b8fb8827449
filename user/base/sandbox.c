// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/sandbox.h"

#if defined(__x86_64__)
#define SANDBOX_ARCH AUDIT_ARCH_X86_64
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SANDBOX_ARCH AUDIT_ARCH_PPC64LE
#elif defined(__s390x__)
#define SANDBOX_ARCH AUDIT_ARCH_S390X
#else
#error "sandbox: no seccomp architecture for this target"
#endif

/* What the child may do: read its input, write its answer, manage its
 * memory, and end. */
static const int allowed[] = {
	__NR_read,	 __NR_pread64,	    __NR_write,		 __NR_close,	     __NR_lseek,    __NR_fstat,
#ifdef __NR_newfstatat
	__NR_newfstatat,
#endif
#ifdef __NR_statx
	__NR_statx,
#endif
	__NR_mmap,	 __NR_munmap,	    __NR_mremap,	 __NR_brk,	     __NR_mprotect, __NR_madvise,
	__NR_futex,	 __NR_rt_sigreturn, __NR_rt_sigprocmask, __NR_clock_gettime, __NR_getpid,   __NR_gettid,
	__NR_tgkill,	 __NR_exit,	    __NR_exit_group,	 __NR_sigaltstack, /* the sanitizers of the unit tests
										    */
	__NR_sysinfo, /* glibc's qsort asks how much memory the host has */
};

#define NALLOWED (sizeof(allowed) / sizeof(allowed[0]))

static int seccomp_allow_list(void)
{
	struct sock_filter f[4 + 2 * NALLOWED + 1];
	struct sock_fprog prog = { .filter = f };
	size_t n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SANDBOX_ARCH, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	for (size_t i = 0; i < NALLOWED; i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)allowed[i], 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	prog.len = (unsigned short)n;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* The child's address space now, in bytes: its limit is this and SANDBOX_MEMORY more. */
static uint64_t vm_size(void)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void close_others(int from)
{
#ifdef __NR_close_range
	if (!syscall(__NR_close_range, from, ~0u, 0))
		return;
#endif
	for (int fd = from; fd < 65536; fd++)
		close(fd);
}

/* Under valgrind (make valgrind), whose own system calls a seccomp filter
 * would kill and which keeps file descriptors of its own: the child keeps
 * the other bounds, not those two. Only whoever starts the tool sets its
 * environment. */
static bool under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p && strstr(p, "/vgpreload_");
}

/* The child's exit when root could not turn into nobody: a container or
 * unit that took CAP_SETUID and CAP_SETGID away. */
#define SANDBOX_NO_SETUID 124

/* In the child: in_fd as 3, out_fd as 4, nothing else but stderr (for a
 * sanitizer's report), then no way back to any privilege. */
static void enter(int in_fd, int out_fd, pid_t parent)
{
	bool vg = under_valgrind();

	struct rlimit as = { 0 }, cpu = { SANDBOX_CPU_SECONDS, SANDBOX_CPU_SECONDS }, files = { 5, 5 };
	int in = fcntl(in_fd, F_DUPFD_CLOEXEC, 10), out = fcntl(out_fd, F_DUPFD_CLOEXEC, 10);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent || in < 0 || out < 0 || null < 0 || dup2(in, 3) != 3 || dup2(out, 4) != 4 ||
	    dup2(null, 0) != 0 || dup2(null, 1) != 1)
		_exit(125);
	close_others(5);
	as.rlim_cur = as.rlim_max = vm_size() + SANDBOX_MEMORY;
	if (setrlimit(RLIMIT_AS, &as) || setrlimit(RLIMIT_CPU, &cpu) || (!vg && setrlimit(RLIMIT_NOFILE, &files)))
		_exit(125);
	if (geteuid() == 0 && (setgroups(0, NULL) || setresgid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) ||
			       setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)))
		_exit(SANDBOX_NO_SETUID);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || (!vg && seccomp_allow_list()))
		_exit(125);
}

static const char *signal_meaning(int sig)
{
	switch (sig) {
	case SIGSYS: return " (a system call outside its allow-list)";
	case SIGXCPU: return " (its CPU time ran out)";
	case SIGSEGV: return " (a bad memory access, or its memory ran out)";
	case SIGKILL: return " (killed)";
	default: return "";
	}
}

int sandbox_run(int in_fd, sandbox_work_fn work, void *ctx, size_t max, bool (*stop)(void *ctx), void *stop_ctx,
		uint8_t **out, size_t *len, char *err, size_t errlen)
{
	int p[2], status = 0, ret = 0;
	size_t got = 0, cap = 0;
	uint8_t *buf = NULL;
	pid_t parent = getpid(), child;
	/* with no stop to ask, a bound all the same: twice its CPU time */
	long long deadline = sbt_now_mono_ms() + 2000ll * SANDBOX_CPU_SECONDS;

	*out = NULL;
	*len = 0;
	if (pipe2(p, O_CLOEXEC)) {
		snprintf(err, errlen, "cannot make the library reader's pipe: %s", strerror(errno));
		return -errno;
	}
	child = fork();
	if (child < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot start the library reader: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return ret;
	}
	if (!child) {
		enter(in_fd, p[1], parent);
		_exit(work(3, 4, ctx));
	}
	close(p[1]);
	for (;;) {
		struct pollfd pf = { p[0], POLLIN, 0 };
		ssize_t n;

		bool stopped = stop && stop(stop_ctx);

		if (stopped || sbt_now_mono_ms() > deadline) {
			ret = stopped ? -EINTR : -ETIMEDOUT;
			snprintf(err, errlen, "the library reader was %s", stopped ? "stopped" : "out of time");
			break;
		}
		if (poll(&pf, 1, 50) <= 0)
			continue;
		if (got == cap) {
			size_t more = cap ? cap * 2 : 65536;
			uint8_t *grown;

			if (cap >= max + 1 || !(grown = realloc(buf, more > max + 1 ? max + 1 : more))) {
				ret = cap >= max + 1 ? -E2BIG : -ENOMEM;
				snprintf(err, errlen,
					 cap >= max + 1 ? "the library reader's answer is over %zu bytes"
							: "out of memory for the library reader's answer",
					 max);
				break;
			}
			buf = grown;
			cap = more > max + 1 ? max + 1 : more;
		}
		n = read(p[0], buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(p[0]);
	if (ret)
		kill(child, SIGKILL);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (!ret && WIFSIGNALED(status)) {
		ret = -ECHILD;
		snprintf(err, errlen, "the library reader died of signal %d%s", WTERMSIG(status),
			 signal_meaning(WTERMSIG(status)));
	} else if (!ret && WEXITSTATUS(status) == SANDBOX_NO_SETUID) {
		ret = -EPERM;
		snprintf(err, errlen,
			 "the library reader could not become nobody (no CAP_SETUID and CAP_SETGID); hint: the "
			 "unit and the DaemonSet give them");
	} else if (!ret && WEXITSTATUS(status) == 125) {
		ret = -ECHILD;
		snprintf(err, errlen, "the library reader could not be sandboxed");
	} else if (!ret && WEXITSTATUS(status)) {
		ret = -ECHILD;
		snprintf(err, errlen, "the library reader failed (exit %d)", WEXITSTATUS(status));
	}
	if (ret) {
		free(buf);
		return ret;
	}
	*out = buf;
	*len = got;
	return 0;
}
