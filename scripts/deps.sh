#!/usr/bin/env bash
# Install the Debian packages spyre-bpftrace needs; do nothing when all are there.
#
# Besides the host's packages: the cross compilers, QEMU and dpkg's ppc64el
# and s390x architectures for the Power and Z builds and guests (their
# libraries and kernels are only downloaded, never installed), and
# bookworm-backports for s390x and ppc64el alone (Debian 12's 6.12 s390x
# kernel is only there; the ppc64el one is also in bookworm-security, whose
# index a mirror mid-sync can fail to give; backports are never installed
# from unless asked for by name).
set -euo pipefail
. "$(dirname "$0")/apt-retry.sh"
pkgs=(make gcc clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libiberty-dev
      libcmocka-dev libcapstone-dev pkg-config python3 bpftrace g++ binutils util-linux
      libclang-rt-14-dev protobuf-compiler qemu-system-x86 busybox-static cpio
      prometheus curl libnghttp2-dev python3-grpcio python3-protobuf kmod xz-utils
      gcc-powerpc64le-linux-gnu libc6-dev-ppc64el-cross qemu-system-ppc
      gcc-s390x-linux-gnu libc6-dev-s390x-cross qemu-system-misc time valgrind
      clang-format libfuse3-dev fuse3 libzstd-dev podman runc lintian rpm rpmlint qemu-user-static python3-jsonschema)
foreign=(ppc64el s390x)
backports=/etc/apt/sources.list.d/spyre-bpftrace-backports.sources
backports_src='# spyre-bpftrace (scripts/deps.sh): Debian 12'"'"'s 6.12 kernels for the s390x
# and ppc64el test guests; downloaded, never installed.
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Architectures: s390x ppc64el
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'
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
have_src=$(cat "$backports" 2>/dev/null || true)
[ ${#missing[@]} -eq 0 ] && [ ${#arches[@]} -eq 0 ] && [ "$have_src" = "$backports_src" ] && exit 0
if [ ${#missing[@]} -gt 0 ] || [ ${#arches[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}${arches:+ (and dpkg architectures ${arches[*]})}"
else
	echo "deps: adding bookworm-backports for the guests' kernels to apt's sources"
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: need root to install packages; hint: sudo make deps" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
for a in "${arches[@]}"; do
	dpkg --add-architecture "$a"
done
[ "$have_src" = "$backports_src" ] || printf '%s\n' "$backports_src" >"$backports"
# an update that still fails goes on with the indexes that came (apt
# ignores a bad one): a package really missing fails the install
apt_retry apt-get update -qq ||
	echo "deps: warning: apt-get update failed 3 times; going on with the indexes it got" >&2
[ ${#missing[@]} -eq 0 ] ||
	apt_retry apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
