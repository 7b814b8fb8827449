#!/usr/bin/env bash
# make rpm: an .rpm per static binary (x86_64, ppc64le, s390x) into OUTDIR,
# from packaging/rpm/spyre-bpftrace.spec, holding what `make install
# PREFIX=/usr` installs (units in /usr/lib/systemd/system, as RHEL has
# them). rpmlint runs where it is installed; its errors fail the build.
# Usage: scripts/package-rpm.sh VERSION OUTDIR BINARY...
set -euo pipefail
version=$1 outdir=$2
shift 2
command -v rpmbuild >/dev/null || { echo "rpm: rpmbuild is not installed; hint: make deps" >&2; exit 1; }
mkdir -p "$outdir"
top=$(mktemp -d)
trap 'rm -rf "$top"' EXIT
for bin in "$@"; do
	case $bin in
	*/ppc64le/*) arch=ppc64le strip=powerpc64le-linux-gnu-strip ;;
	*/s390x/*) arch=s390x strip=s390x-linux-gnu-strip ;;
	*) arch=x86_64 strip=strip ;;
	esac
	rm -rf "$top"/*
	mkdir -p "$top"/{root,SOURCES,SPECS,BUILD,RPMS,SRPMS}
	chmod 0755 "$top/root"
	make --no-print-directory -s install BIN="$bin" DESTDIR="$top/root" PREFIX=/usr UNITDIR=/usr/lib/systemd/system >/dev/null
	"$strip" --strip-unneeded "$top/root/usr/bin/spyre-bpftrace"
	gzip -9n "$top/root/usr/share/man/man1/spyre-bpftrace.1"
	tar --owner=0 --group=0 -cf "$top/SOURCES/spyre-bpftrace-$version-root.tar" -C "$top/root" .
	cp LICENSE "$top/BUILD/"
	rpmbuild -bb --quiet --target "$arch" --define "_topdir $top" --define "sbt_version $version" \
		--define "_builddir $top/BUILD" packaging/rpm/spyre-bpftrace.spec
	rpm=$(find "$top/RPMS" -name '*.rpm' | head -1)
	cp "$rpm" "$outdir/"
	echo "rpm: $outdir/$(basename "$rpm")"
	if command -v rpmlint >/dev/null; then
		# exit 64: errors (66: only its score of warnings, said)
		lint=$(rpmlint -r packaging/rpm/rpmlintrc "$outdir/$(basename "$rpm")" 2>&1) && rc=0 || rc=$?
		grep -E ': (E|W): |packages and' <<<"$lint" | sed 's/^/  rpmlint: /'
		[ "$rc" -ne 64 ] || exit 1
	fi
done
