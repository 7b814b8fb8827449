#!/usr/bin/env bash
# make image: an OCI image per static binary (amd64, ppc64le, s390x), built
# offline FROM scratch (packaging/Containerfile) into podman's store as
# localhost/spyre-bpftrace:VERSION-ARCH, and a manifest list joining them,
# with its images, as one OCI archive in OUTDIR (to copy to a registry:
# docs/install.md). The list is not kept in podman's store: Debian 12's
# podman (4.3) keeps it there with a digest of its own for each image,
# which its other commands then fail to find.
# Usage: scripts/image.sh VERSION OUTDIR BINARY...
set -euo pipefail
version=$1 outdir=$2
shift 2
command -v podman >/dev/null || { echo "image: podman is not installed; hint: make deps" >&2; exit 1; }
name=localhost/spyre-bpftrace
mkdir -p "$outdir"
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# the last build's list and images, untagged by this one
podman manifest rm "$name:$version" >/dev/null 2>&1 || true
podman image prune -f --filter label=org.opencontainers.image.title=spyre-bpftrace >/dev/null
podman manifest create "$name:$version" >/dev/null
for bin in "$@"; do
	case $bin in
	*/ppc64le/*) arch=ppc64le strip=powerpc64le-linux-gnu-strip ;;
	*/s390x/*) arch=s390x strip=s390x-linux-gnu-strip ;;
	*) arch=amd64 strip=strip ;;
	esac
	rm -rf "$ctx/rootfs"
	root=$ctx/rootfs
	install -D -m 0755 "$bin" "$root/usr/bin/spyre-bpftrace"
	"$strip" --strip-unneeded "$root/usr/bin/spyre-bpftrace"
	# names for the uids it shows (the library reader runs as nobody),
	# CA certificates for what it sends over TLS, a /tmp
	install -d -m 0755 "$root/etc" "$root/etc/ssl/certs" "$root/var/lib/spyre-bpftrace" "$root/run/spyre-bpftrace"
	install -d -m 1777 "$root/tmp"
	printf 'root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
		install -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
	fi
	cp packaging/Containerfile "$ctx/Containerfile"
	podman build -q --layers=false --arch "$arch" --os linux --build-arg VERSION="$version" \
		-t "$name:$version-$arch" -f "$ctx/Containerfile" "$ctx" >/dev/null
	podman manifest add "$name:$version" "containers-storage:$name:$version-$arch" >/dev/null
	echo "image: $name:$version-$arch ($(podman image inspect --format '{{.Os}}/{{.Architecture}}, {{.Size}} bytes' "$name:$version-$arch"))"
done
archive=$outdir/spyre-bpftrace-$version.oci.tar
rm -f "$archive"
podman manifest push -q --all "$name:$version" "oci-archive:$archive:$version"
podman manifest rm "$name:$version" >/dev/null
echo "image: the manifest list $name:$version and its images in $archive"
