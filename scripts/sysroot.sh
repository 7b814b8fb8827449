#!/usr/bin/env bash
# Unpack the target's static libraries and headers for a cross build:
#
#   scripts/sysroot.sh ARCH DIR        (ARCH: ppc64le or s390x)
#
# Debian's -dev packages of that architecture are downloaded (apt-get
# download, never installed) into $SBT_SYSROOT_CACHE and unpacked into DIR.
# The architecture must have been added (dpkg --add-architecture; make deps
# does it).
set -euo pipefail
. "$(dirname "$0")/apt-retry.sh"
arch=${1:?usage: scripts/sysroot.sh ARCH DIR}
dir=${2:?usage: scripts/sysroot.sh ARCH DIR}
case "$arch" in
ppc64le) deb=ppc64el ;;
s390x) deb=s390x ;;
*) echo "sysroot: no cross build for '$arch'; hint: ppc64le or s390x" >&2; exit 2 ;;
esac
fail() { echo "sysroot: $1; hint: $2" >&2; exit 1; }
# read whole, then matched: with pipefail, grep -q leaving early can kill
# dpkg with SIGPIPE and fail the pipe though the architecture is there
foreign=$(dpkg --print-foreign-architectures)
grep -qx "$deb" <<<"$foreign" ||
	fail "$deb is not a dpkg architecture here" "sudo make deps ARCH=$arch"
cache=${SBT_SYSROOT_CACHE:-/var/cache/spyre-bpftrace/sysroot}/$deb
mkdir -p "$cache"
pkgs=(libbpf-dev libelf-dev zlib1g-dev libzstd-dev libiberty-dev libcapstone-dev libnghttp2-dev)
want=()
for p in "${pkgs[@]}"; do
	compgen -G "$cache/${p}_*_$deb.deb" >/dev/null || want+=("$p:$deb")
done
if [ ${#want[@]} -gt 0 ]; then
	echo "sysroot: downloading ${want[*]}" >&2
	(cd "$cache" && apt_retry apt-get download -q "${want[@]}" >/dev/null 2>&1) ||
		fail "apt-get download ${want[*]} failed" "apt-get update"
fi
rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
for p in "${pkgs[@]}"; do
	dpkg-deb -x "$(ls "$cache"/"${p}"_*_"$deb".deb | tail -1)" "$dir.tmp"
done
rm -rf "$dir" && mv "$dir.tmp" "$dir"
