#!/usr/bin/env bash
# Regenerate vmlinux/<arch>/vmlinux.h, the kernel types the BPF programs are
# built against (CO-RE makes them load on other kernels), with the release
# it came from in vmlinux/<arch>/RELEASE:
#
#   scripts/gen-vmlinux.sh [x86_64|ppc64le|s390x]     (default: this machine's)
#
# x86_64: this machine's kernel BTF. ppc64le: Debian 12's 6.12 kernel
# package ships an ELF vmlinux with its .BTF section. s390x: its package has
# only a compressed image, so a guest boots it (scripts/vm.sh) and
# /sys/kernel/btf/vmlinux is copied out.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt-retry.sh
arch=${1:-$(uname -m)}
case "$arch" in
x86_64 | x86) dir=vmlinux/x86 ;;
ppc64le | powerpc) dir=vmlinux/powerpc ;;
s390x | s390) dir=vmlinux/s390 ;;
*) echo "gen-vmlinux: no vmlinux.h for '$arch'; hint: x86_64, ppc64le or s390x" >&2; exit 2 ;;
esac
fail() { echo "gen-vmlinux: $1" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case "$dir" in
vmlinux/x86)
	btf=/sys/kernel/btf/vmlinux
	[ "$(uname -m)" = x86_64 ] || fail "x86 types come from an x86-64 machine's kernel"
	[ -r "$btf" ] || fail "$btf missing; hint: needs a kernel with CONFIG_DEBUG_INFO_BTF"
	release=$(uname -r) ;;
vmlinux/powerpc)
	pkg=$(apt-cache pkgnames linux-image-6.12 | grep -E '^linux-image-6\.12\.[0-9]+\+deb12-powerpc64le$' | sort -V | tail -1 || true)
	[ -n "$pkg" ] || fail "no 6.12 ppc64el kernel package; hint: sudo make deps"
	(cd "$tmp" && apt_retry apt-get download -q "$pkg:ppc64el" >/dev/null 2>&1) || fail "apt-get download $pkg failed"
	dpkg-deb -x "$tmp"/*.deb "$tmp/k"
	btf=$(ls "$tmp"/k/boot/vmlinux-*)
	release=${btf##*/vmlinux-} ;;
vmlinux/s390)
	scripts/vm.sh --arch s390x --edu 0 --no-build --out "$tmp/out" -- \
		'cp /sys/kernel/btf/vmlinux /out/btf; uname -r > /out/release' >/dev/null ||
		fail "the s390x guest did not give its BTF"
	btf=$tmp/out/btf
	release=$(cat "$tmp/out/release") ;;
esac
bpftool btf dump file "$btf" format c > "$dir/vmlinux.h.tmp"
mv "$dir/vmlinux.h.tmp" "$dir/vmlinux.h"
echo "$release" > "$dir/RELEASE"
echo "$dir/vmlinux.h from $release"
