// SPDX-License-Identifier: GPL-2.0-only
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include "attach/uprobe_multi.h"

#define SBT_BPF_LINK_CREATE 28

/* union bpf_attr's link_create with its uprobe_multi member (6.6), laid
 * out as the kernel reads it */
struct link_create_uprobe_multi {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, multi_flags, pid, pad;
};

int uprobe_multi_link(int prog_fd, const char *path, pid_t pid, const uint64_t *offsets, const uint64_t *cookies,
		      uint32_t cnt)
{
	struct link_create_uprobe_multi attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = (uint32_t)prog_fd;
	attr.attach_type = SBT_ATTACH_UPROBE_MULTI;
	attr.path = (uint64_t)(uintptr_t)path;
	attr.offsets = (uint64_t)(uintptr_t)offsets;
	attr.cookies = (uint64_t)(uintptr_t)cookies;
	attr.cnt = cnt;
	attr.pid = pid > 0 ? (uint32_t)pid : 0;
	fd = (int)syscall(__NR_bpf, SBT_BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

bool uprobe_multi_supported(void)
{
	const struct bpf_insn ret0[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = (enum bpf_attach_type)SBT_ATTACH_UPROBE_MULTI);
	/* offset 0 is the ELF header, mapped without exec: no breakpoint goes in */
	uint64_t off = 0, cookie = 0;
	int prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "sbt_probe_umulti", "GPL", ret0, 2, &opts), link;

	if (prog < 0)
		return false;
	link = uprobe_multi_link(prog, "/proc/self/exe", getpid(), &off, &cookie, 1);
	close(prog);
	if (link < 0)
		return false;
	close(link);
	return true;
}
