#!/usr/bin/env bash
# Regenerate vmlinux/vmlinux.h from this machine's kernel BTF. CO-RE makes
# the programs built against it load on other kernels; the release it came
# from is kept beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
btf=/sys/kernel/btf/vmlinux
[ -r "$btf" ] || { echo "gen-vmlinux: $btf missing; hint: needs a kernel with CONFIG_DEBUG_INFO_BTF" >&2; exit 1; }
bpftool btf dump file "$btf" format c > vmlinux/vmlinux.h.tmp
mv vmlinux/vmlinux.h.tmp vmlinux/vmlinux.h
uname -r > vmlinux/RELEASE
echo "vmlinux.h from $(cat vmlinux/RELEASE)"
