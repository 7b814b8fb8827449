// SPDX-License-Identifier: GPL-2.0-only
/*
 * Driver-level attach. For each vfio function the probes want:
 *  - fentry/fexit if the module's BTF describes the function and a trial
 *    fentry program really loads and attaches there (a kernel may have the
 *    BTF yet refuse: no trampolines, lockdown, a function ftrace skips);
 *  - else kprobe/kretprobe if the kernel has kprobes and the function is in
 *    /proc/kallsyms (static functions are, unless inlined away);
 *  - else nothing, and the syscall and tracepoint paths carry on alone.
 */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attach/driver.h"
#include "base/procfs.h"

/* The container IOMMU backends: type1 everywhere but Power, sPAPR TCE on
 * Power only (the kernel's Kconfig builds nothing else there). */
#if defined(__powerpc__)
#define TYPE1_HERE false
#define SPAPR_HERE true
#else
#define TYPE1_HERE true
#define SPAPR_HERE false
#endif

static const struct driver_func {
	const char *name, *module, *role, *what;
	bool here; /* this architecture's kernels can have it */
} funcs[] = {
	{ "vfio_fops_unl_ioctl", "vfio", "driver", "container ioctls", true },
	{ "vfio_group_fops_unl_ioctl", "vfio", "driver", "group ioctls", true },
	{ "vfio_device_fops_unl_ioctl", "vfio", "driver", "device ioctls", true },
	{ "vfio_iommu_type1_ioctl", "vfio_iommu_type1", "driver", "type1 MAP_DMA, UNMAP_DMA", TYPE1_HERE },
	{ "vfio_pin_pages_remote", "vfio_iommu_type1", "driver", "page pinning", TYPE1_HERE },
	{ "vfio_unpin_pages_remote", "vfio_iommu_type1", "driver", "page unpinning", TYPE1_HERE },
	{ "vfio_msihandler", "vfio_pci_core", "driver", "MSI handler", true },
	{ "tce_iommu_ioctl", "vfio_iommu_spapr_tce", "driver", "sPAPR TCE REGISTER_MEMORY, MAP_DMA, UNMAP_DMA, windows",
	  SPAPR_HERE },
	{ "mm_iommu_new", "vmlinux", "driver", "sPAPR memory registration (page pinning)", SPAPR_HERE },
};

#define NFUNCS (sizeof(funcs) / sizeof(funcs[0]))

int driver_mode_parse(const char *s)
{
	static const char *const names[] = { "auto", "fentry", "kprobe", "off" };

	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

/* The kernel's BTF object of a module: fd, or -errno. */
static int module_btf_fd(const char *module)
{
	__u32 id = 0;

	while (!bpf_btf_get_next_id(id, &id)) {
		char name[64] = "";
		struct bpf_btf_info info = { .name = (__u64)(unsigned long)name, .name_len = sizeof(name) };
		__u32 len = sizeof(info);
		int fd = bpf_btf_get_fd_by_id(id);

		if (fd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(fd, &info, &len) && !strcmp(name, module))
			return fd;
		close(fd);
	}
	return -ENOENT;
}

/* Load and attach an empty fentry program on BTF id (of the module whose
 * BTF object is btf_fd, or of vmlinux when -1); 0 or -errno, why filled. */
static int trial_fentry(int id, int btf_fd, char *why, size_t len)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int prog_fd, link_fd, err;

	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_FENTRY, .attach_btf_id = (__u32)id,
		    .attach_btf_obj_fd = btf_fd < 0 ? 0 : (__u32)btf_fd);
	prog_fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "sbt_probe", "GPL", insns, 2, &opts);
	err = prog_fd < 0 ? -errno : 0;
	if (!err) {
		link_fd = bpf_raw_tracepoint_open(NULL, prog_fd);
		err = link_fd < 0 ? -errno : 0;
		if (link_fd >= 0)
			close(link_fd);
		close(prog_fd);
	}
	if (err == -ENOMEM && prog_fd < 0 && access("/proc/sys/net/core/bpf_jit_enable", F_OK))
		/* a trampoline is JIT code: without a JIT there is none to make */
		snprintf(why, len,
			 "trial fentry load: no BPF JIT in this kernel (ENOMEM; fentry "
			 "needs the JIT)");
	else if (err == -524) /* the kernel's ENOTSUPP, which libc does not name */
		snprintf(why, len,
			 "trial fentry %s: not supported (ENOTSUPP: no BPF trampoline "
			 "on this kernel and architecture)",
			 prog_fd < 0 ? "load" : "attach");
	else if (err)
		snprintf(why, len, "trial fentry %s: %s", prog_fd < 0 ? "load" : "attach", strerror(-err));
	return err;
}

static int try_fentry_vmlinux(const char *func, struct btf **vmlinux, char *why, size_t len)
{
	int id;

	if (!*vmlinux && !(*vmlinux = btf__load_vmlinux_btf())) {
		snprintf(why, len, "no vmlinux BTF");
		return -ENOENT;
	}
	id = btf__find_by_name_kind(*vmlinux, func, BTF_KIND_FUNC);
	if (id <= 0) {
		snprintf(why, len, "not in vmlinux BTF");
		return -ENOENT;
	}
	return trial_fentry(id, -1, why, len);
}

/* fentry on module:func, tried for real; 0 or -errno, with why filled. */
static int try_fentry(const char *module, const char *func, struct btf **vmlinux, char *why, size_t len)
{
	char path[128];
	struct btf *btf;
	int id, btf_fd, err;

	if (!strcmp(module, "vmlinux")) /* the kernel's own function */
		return try_fentry_vmlinux(func, vmlinux, why, len);
	snprintf(path, sizeof(path), "/sys/kernel/btf/%s", module);
	if (!sbt_module_btf(module)) {
		snprintf(why, len, "no %s module BTF (%s)", module, path);
		return -ENOENT;
	}
	if (!*vmlinux && !(*vmlinux = btf__load_vmlinux_btf())) {
		snprintf(why, len, "no vmlinux BTF");
		return -ENOENT;
	}
	btf = btf__parse_split(path, *vmlinux);
	if (!btf) {
		snprintf(why, len, "cannot read %s: %s", path, strerror(errno));
		return -errno;
	}
	id = btf__find_by_name_kind(btf, func, BTF_KIND_FUNC);
	btf__free(btf);
	if (id <= 0) {
		snprintf(why, len, "not in %s's BTF", module);
		return -ENOENT;
	}
	btf_fd = module_btf_fd(module);
	if (btf_fd < 0) {
		snprintf(why, len, "%s's BTF not loaded in the kernel", module);
		return btf_fd;
	}
	err = trial_fentry(id, btf_fd, why, len);
	close(btf_fd);
	return err;
}

/* Which of funcs are in /proc/kallsyms, in one pass. */
static void scan_kallsyms(bool present[])
{
	const char *names[NFUNCS];

	for (size_t i = 0; i < NFUNCS; i++)
		names[i] = funcs[i].name;
	kallsyms_find(names, NFUNCS, present, NULL);
}

static struct bpf_program *prog(struct spyre_bpf *s, const char *func, const char *kind)
{
	char name[128];

	snprintf(name, sizeof(name), "%s_%s", func, kind);
	return bpf_object__find_program_by_name(s->obj, name);
}

static void use(struct driver_plan *dp, struct bpf_program *entry, struct bpf_program *ret)
{
	bpf_program__set_autoload(entry, true);
	if (ret)
		bpf_program__set_autoload(ret, true);
	if (dp->nprogs + 2 <= DRIVER_MAX_PROGS) {
		dp->progs[dp->nprogs++] = entry;
		if (ret)
			dp->progs[dp->nprogs++] = ret;
	}
}

void driver_plan(struct spyre_bpf *s, enum driver_mode mode, struct driver_plan *dp, struct plan *plan)
{
	struct btf *vmlinux = NULL; /* read when a module's BTF needs it as its base */
	bool kprobes = sbt_have_kprobes();
	bool present[NFUNCS] = { false };

	memset(dp, 0, sizeof(*dp));
	if (kprobes && mode != DRIVER_OFF && mode != DRIVER_FENTRY)
		scan_kallsyms(present);
	for (size_t i = 0; i < NFUNCS; i++) {
		const struct driver_func *fn = &funcs[i];
		struct bpf_program *p[4] = { prog(s, fn->name, "fentry"), prog(s, fn->name, "fexit"),
					     prog(s, fn->name, "kprobe"), prog(s, fn->name, "kretprobe") };
		char why[160] = "";

		for (int k = 0; k < 4; k++)
			if (p[k])
				bpf_program__set_autoload(p[k], false);
		if (!fn->here) /* the other architectures' IOMMU backend: no line */
			continue;
		if (!p[0] || !p[1] || !p[2] || !p[3]) {
			plan_add(plan, fn->role, "-", "%s: programs missing from this build", fn->name);
			dp->nnone++;
			continue;
		}
		if (mode == DRIVER_OFF) {
			plan_add(plan, fn->role, "-", "%s: --driver-probes off", fn->name);
			dp->nnone++;
			continue;
		}
		if (mode != DRIVER_KPROBE) {
			if (!try_fentry(fn->module, fn->name, &vmlinux, why, sizeof(why))) {
				use(dp, p[0], p[1]);
				s->rodata->drv_msi_probed |= !strcmp(fn->name, "vfio_msihandler");
				dp->nfentry++;
				plan_add(plan, fn->role, "fentry/fexit", "%s (%s, %s BTF)", fn->name, fn->what,
					 fn->module);
				continue;
			}
			plan_add(plan, fn->role, "-", "fentry %s: %s", fn->name, why);
		}
		if (mode == DRIVER_FENTRY) {
			dp->nnone++;
			continue;
		}
		if (!kprobes)
			plan_add(plan, fn->role, "-", "kprobe %s: kprobes not available on this kernel", fn->name);
		else if (!present[i])
			plan_add(plan, fn->role, "-", "kprobe %s: not in /proc/kallsyms (%s not loaded?)", fn->name,
				 fn->module);
		else {
			use(dp, p[2], p[3]);
			s->rodata->drv_msi_probed |= !strcmp(fn->name, "vfio_msihandler");
			dp->nkprobe++;
			plan_add(plan, fn->role, "kprobe/kretprobe", "%s (%s)", fn->name, fn->what);
			continue;
		}
		dp->nnone++;
	}
	btf__free(vmlinux);
}

const char *driver_hook_kernel(struct spyre_bpf *s, enum driver_mode mode, const char *func, struct driver_plan *dp,
			       char *why, size_t len)
{
	struct bpf_program *p[4] = { prog(s, func, "fentry"), prog(s, func, "fexit"), prog(s, func, "kprobe"),
				     prog(s, func, "kretprobe") };
	struct btf *vmlinux = NULL;
	const char *names[1] = { func };
	bool present = false;
	int err;

	why[0] = 0;
	if (!p[0] || (mode != DRIVER_FENTRY && (!p[2] || !p[3]))) {
		snprintf(why, len, "%s: programs missing from this build", func);
		return NULL;
	}
	if (mode == DRIVER_OFF) {
		snprintf(why, len, "--driver-probes off");
		return NULL;
	}
	if (mode != DRIVER_KPROBE) {
		err = try_fentry_vmlinux(func, &vmlinux, why, len);
		btf__free(vmlinux);
		if (!err) {
			use(dp, p[0], p[1]);
			return p[1] ? "fentry/fexit" : "fentry";
		}
		if (mode == DRIVER_FENTRY)
			return NULL;
	}
	if (!sbt_have_kprobes()) {
		snprintf(why + strlen(why), len - strlen(why), "%skprobes not available", why[0] ? "; " : "");
		return NULL;
	}
	kallsyms_find(names, 1, &present, NULL);
	if (!present) {
		snprintf(why + strlen(why), len - strlen(why), "%snot in /proc/kallsyms", why[0] ? "; " : "");
		return NULL;
	}
	use(dp, p[2], p[3]);
	return "kprobe/kretprobe";
}

bool driver_is_prog(const struct bpf_program *p)
{
	static const char *const kinds[] = { "fentry/", "fexit/", "kprobe/", "kretprobe/" };
	const char *sec = bpf_program__section_name(p);

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strncmp(sec, kinds[i], strlen(kinds[i])))
			return true;
	return false;
}
