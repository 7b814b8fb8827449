#!/usr/bin/env bash
# Install the Debian packages spyre-bpftrace needs; do nothing when all are there.
set -euo pipefail
pkgs=(make gcc clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libiberty-dev
      libcmocka-dev libcapstone-dev pkg-config python3 bpftrace g++ binutils util-linux
      libclang-rt-14-dev protobuf-compiler qemu-system-x86 busybox-static cpio
      prometheus curl libnghttp2-dev python3-grpcio
      python3-protobuf)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: need root to install packages; hint: sudo make deps" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
