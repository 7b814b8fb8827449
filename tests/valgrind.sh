#!/usr/bin/env bash
# make valgrind: every command of the tool once under valgrind's memcheck
# (the unit tests run under ASan and UBSan; this checks the real binary,
# BPF and all): a recording of the simulator, then convert to both formats,
# report, dump, inspect and list on what it wrote, and merge on the
# PyTorch fixture (with that recording as a second host). Fails on any error or
# leak that valgrind reports.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SBT_BUILD:-build}
tool=$build/spyre-bpftrace
[ "$(id -u)" -eq 0 ] || { echo "valgrind: record needs root; hint: sudo make valgrind" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind: not installed; hint: apt-get install valgrind" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
vg=(valgrind -q --error-exitcode=99 --suppressions=tests/valgrind.supp --leak-check=full --errors-for-leak-kinds=definite,indirect
    --show-leak-kinds=definite,indirect)
runs=0
run() {
	runs=$((runs + 1))
	if ! "${vg[@]}" "$@" >"$tmp/out" 2>"$tmp/err"; then
		echo "valgrind: FAILED: $*" >&2
		cat "$tmp/err" >&2
		exit 1
	fi
}
run "$tool" -q -o "$tmp/c.sbt" --vfio-path "$tmp/m/*" \
	-c "$build/spyre-sim-run --threads 2 --jobs 3 --mock-dir $tmp/m --json $tmp/s.json"
run "$tool" convert "$tmp/c.sbt" -o "$tmp/c.pftrace"
run "$tool" convert "$tmp/c.sbt" -o "$tmp/c.json"
run "$tool" report "$tmp/c.sbt"
run "$tool" dump "$tmp/c.sbt"
run "$tool" inspect "$tmp/c.pftrace"
run "$tool" list "$build/sim/libflex.so" "$build/sim/libsenlib.so"
fx=tests/torch/fixture
run "$tool" merge "$fx/torch.json" "$fx/capture.sbt" -o "$tmp/m.pftrace"
run "$tool" merge "$fx/torch.json" "$tmp/c.json" "$fx/capture.sbt" -o "$tmp/m.json"
echo "valgrind: $runs passed, 0 failed"
