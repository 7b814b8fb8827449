#!/usr/bin/env bash
# Runs IBM's aiu-trace-analyzer (acelyzer) on our Chrome JSON: a converted
# capture and a merged PyTorch trace, from the torch fixture. Fails on any
# warning or error it prints. It needs Python >= 3.12 and pandas, so it runs
# in the trixie chroot of scripts/torch-fixture.sh.
#
# usage: SBT_AIU_ANALYZER=DIR scripts/aiu-check.sh [FIXTURE]   (root)
#   DIR: a checkout of github.com/IBM/aiu-trace-analyzer (not vendored here)
# Its rcu_util counter is left out: it warns on any input without the
# compiler's logs, which no trace carries.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt-retry.sh
ROOT=$(pwd)
BUILD=$(realpath -m "${SBT_BUILD:-$ROOT/build}")
CHROOT=${SBT_TORCH_CHROOT:-/var/cache/spyre-bpftrace/torch-trixie}
FX=$(realpath -m "${1:-tests/torch/fixture}")
ATA=${SBT_AIU_ANALYZER:?set SBT_AIU_ANALYZER to an aiu-trace-analyzer checkout}

fail() { echo "aiu-check: $1; hint: $2" >&2; exit 1; }
[ -x "$CHROOT/usr/bin/python3" ] || fail "no chroot at $CHROOT" "scripts/torch-fixture.sh makes it"
[ -d "$ATA/src/aiu_trace_analyzer" ] || fail "$ATA is not an aiu-trace-analyzer checkout" "git clone it"
chroot "$CHROOT" python3 -c 'import pandas' 2>/dev/null ||
	apt_retry chroot "$CHROOT" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-pandas' >/dev/null
work=$CHROOT/tmp/aiu-check
rm -rf "$work"
mkdir -p "$work"
cp -r "$ATA/src" "$ATA/bin" "$work/"
"$BUILD/spyre-bpftrace" convert "$FX/capture.sbt" -o "$work/converted.json" 2>/dev/null
"$BUILD/spyre-bpftrace" merge "$FX/torch.json" "$FX/capture.sbt" -o "$work/merged.json" 2>/dev/null
mount --bind /proc "$CHROOT/proc"
trap 'umount -l "$CHROOT/proc"' EXIT
for f in converted merged; do
	chroot "$CHROOT" sh -c "cd /tmp/aiu-check && PYTHONPATH=src python3 bin/acelyzer.py \
		-C power_ts4 coll_bw prep_queue -i $f.json -o out-$f.json" >"$work/$f.log" 2>&1 ||
		fail "acelyzer failed on $f.json: $(tail -1 "$work/$f.log")" "see $work/$f.log"
	if grep -E 'WARNING|ERROR' "$work/$f.log"; then
		fail "acelyzer warned on $f.json" "see $work/$f.log"
	fi
	echo "aiu-check: $f.json read by aiu-trace-analyzer: no warning, no error"
done
