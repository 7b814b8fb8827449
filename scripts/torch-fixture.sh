#!/usr/bin/env bash
# Remakes the PyTorch merge fixture (tests/torch/fixture/) in one real run:
# tests/torch/model.py profiles a small model with torch.profiler (kineto,
# Debian 13's python3-torch 2.6, in a debootstrap chroot) and starts the
# Spyre simulator from inside an op, all traced by spyre-bpftrace -c. The
# chroot runs in a pid namespace of its own, so the profiler's pids are not
# the tracer's: the capture's nspid records have to map them.
#
# usage: scripts/torch-fixture.sh [OUTDIR]   (root; default tests/torch/fixture)
# The chroot is made once (about 1.6 GB, a few minutes) and cached in
# $SBT_TORCH_CHROOT (default /var/cache/spyre-bpftrace/torch-trixie).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt-retry.sh
ROOT=$(pwd)
BUILD=$(realpath -m "${SBT_BUILD:-$ROOT/build}")
CHROOT=${SBT_TORCH_CHROOT:-/var/cache/spyre-bpftrace/torch-trixie}
MIRROR=${SBT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
OUT=$(realpath -m "${1:-tests/torch/fixture}")
WORK=$BUILD/torch-run

fail() { echo "torch-fixture: $1; hint: $2" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot, tracing)" "run it with sudo"
[ -x "$BUILD/spyre-bpftrace" ] && [ -x "$BUILD/spyre-sim-run" ] || fail "no build in $BUILD" "make first"

# 1. the chroot: Debian 13 with torch, from Debian's archive
if [ ! -x "$CHROOT/usr/bin/python3" ]; then
	command -v debootstrap >/dev/null || apt_retry apt-get install -y -q debootstrap >/dev/null
	echo "torch-fixture: making the trixie chroot in $CHROOT (once; about 1.6 GB)"
	rm -rf "$CHROOT.tmp"
	mkdir -p "$(dirname "$CHROOT")"
	debootstrap --variant=minbase --include=python3-torch,python3-numpy,python3-pandas trixie "$CHROOT.tmp" "$MIRROR" \
		>"$(dirname "$CHROOT")/debootstrap.log" 2>&1 ||
		fail "debootstrap failed" "see $(dirname "$CHROOT")/debootstrap.log"
	mv "$CHROOT.tmp" "$CHROOT"
fi

# 2. the same paths inside as outside: /proc, /dev, /sys, the repo, the build
mounted=()
cleanup() {
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() {
	mkdir -p "$CHROOT$1"
	mount --bind "$1" "$CHROOT$1"
	mounted+=("$CHROOT$1")
}
bind /proc
bind /dev
bind /sys
bind "$ROOT"
case "$BUILD/" in "$ROOT"/*) ;; *) bind "$BUILD" ;; esac

# 3. the run: profiler and tracer at once
rm -rf "$WORK"
mkdir -p "$WORK/mock"
echo "torch-fixture: recording (torch.profiler inside, spyre-bpftrace outside)"
"$BUILD/spyre-bpftrace" -q -o "$WORK/capture.sbt" --vfio-path "$WORK/mock/*" -c \
	"unshare --pid --fork chroot $CHROOT python3 $ROOT/tests/torch/model.py $WORK/torch.json $WORK/info.json $BUILD/spyre-sim-run $WORK/mock $WORK/sim.json $BUILD/sim/libspyre_simrun.so $WORK/inproc.json"

# 4. the fixture
mkdir -p "$OUT"
cp "$WORK/torch.json" "$WORK/capture.sbt" "$WORK/sim.json" "$WORK/inproc.json" "$WORK/info.json" "$OUT/"
chmod 0644 "$OUT"/*
echo "torch-fixture: $OUT: $(du -sh "$OUT" | cut -f1) (torch $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["torch"])' "$OUT/info.json"), kernel $(uname -r))"
