#!/usr/bin/env bash
# make deb: a .deb per static binary (x86-64, ppc64le, s390x) into OUTDIR,
# holding what `make install PREFIX=/usr` installs; the unit is not enabled
# (the host's admin decides). Checked by lintian where it is installed.
# Usage: scripts/package-deb.sh VERSION OUTDIR BINARY...
set -euo pipefail
version=$1 outdir=$2
shift 2
mkdir -p "$outdir"
for bin in "$@"; do
	case $bin in
	*/ppc64le/*) arch=ppc64el strip=powerpc64le-linux-gnu-strip ;;
	*/s390x/*) arch=s390x strip=s390x-linux-gnu-strip ;;
	*) arch=amd64 strip=strip ;;
	esac
	stage=$(mktemp -d)
	chmod 0755 "$stage"
	trap 'rm -rf "$stage"' EXIT
	# Debian 12 keeps units in /lib/systemd/system
	make --no-print-directory -s install BIN="$bin" DESTDIR="$stage" PREFIX=/usr UNITDIR=/lib/systemd/system >/dev/null
	# the debug info stays in the build tree
	"$strip" --strip-unneeded "$stage/usr/bin/spyre-bpftrace"
	gzip -9n "$stage/usr/share/man/man1/spyre-bpftrace.1"
	doc=$stage/usr/share/doc/spyre-bpftrace
	install -D -m 0644 packaging/deb/copyright "$doc/copyright"
	printf 'spyre-bpftrace (%s) unstable; urgency=medium\n\n  * Release %s: see the project'"'"'s README.md.\n\n -- spyre-bpftrace maintainers <spyre-bpftrace@users.noreply.github.com>  %s\n' \
		"$version" "$version" "$(date -R -u -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" |
		gzip -9n >"$doc/changelog.gz"
	install -D -m 0644 packaging/deb/lintian-overrides "$stage/usr/share/lintian/overrides/spyre-bpftrace"
	mkdir -p "$stage/DEBIAN"
	size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
	sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" packaging/deb/control >"$stage/DEBIAN/control"
	(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
	deb=$outdir/spyre-bpftrace_${version}_${arch}.deb
	dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
	rm -rf "$stage"
	trap - EXIT
	echo "deb: $deb"
	if command -v lintian >/dev/null; then
		# errors fail the build; warnings are said
		lintian --fail-on error --tag-display-limit 0 "$deb" | sed 's/^/  lintian: /'
	fi
done
