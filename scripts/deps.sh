#!/usr/bin/env bash
# Install the Debian packages spyre-bpftrace needs; do nothing when all are there.
#
# Besides the host's packages: the cross compilers, QEMU and dpkg's ppc64el
# and s390x architectures for the Power and Z builds and guests (their
# libraries and kernels are only downloaded, never installed), and
# bookworm-backports for s390x alone (Debian 12's 6.12 s390x kernel is only
# there; backports are never installed from unless asked for by name).
set -euo pipefail
. "$(dirname "$0")/apt-retry.sh"
pkgs=(make gcc clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libiberty-dev
      libcmocka-dev libcapstone-dev pkg-config python3 bpftrace g++ binutils util-linux
      libclang-rt-14-dev protobuf-compiler qemu-system-x86 busybox-static cpio
      prometheus curl libnghttp2-dev python3-grpcio python3-protobuf kmod xz-utils
      gcc-powerpc64le-linux-gnu libc6-dev-ppc64el-cross qemu-system-ppc
      gcc-s390x-linux-gnu libc6-dev-s390x-cross qemu-system-misc)
foreign=(ppc64el s390x)
backports=/etc/apt/sources.list.d/spyre-bpftrace-backports.sources
missing=()
# each command's output read whole, then matched: with pipefail, grep -q
# leaving early can kill the writer with SIGPIPE and fail the pipe
for p in "${pkgs[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$status" = "install ok installed" ] || missing+=("$p")
done
arches=()
have=$(dpkg --print-foreign-architectures)
for a in "${foreign[@]}"; do
	grep -qx "$a" <<<"$have" || arches+=("$a")
done
[ ${#missing[@]} -eq 0 ] && [ ${#arches[@]} -eq 0 ] && [ -f "$backports" ] && exit 0
echo "deps: installing ${missing[*]}${arches:+ (and dpkg architectures ${arches[*]})}"
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: need root to install packages; hint: sudo make deps" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
for a in "${arches[@]}"; do
	dpkg --add-architecture "$a"
done
if [ ! -f "$backports" ]; then
	cat > "$backports" <<'SRC'
# spyre-bpftrace (scripts/deps.sh): Debian 12's 6.12 kernel for the s390x test
# guest is only in bookworm-backports; it is downloaded, never installed.
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Architectures: s390x
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
# an update that still fails goes on with the indexes that came (apt
# ignores a bad one): a package really missing fails the install
apt_retry apt-get update -qq ||
	echo "deps: warning: apt-get update failed 3 times; going on with the indexes it got" >&2
[ ${#missing[@]} -eq 0 ] ||
	apt_retry apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
