#!/usr/bin/env bash
# make valgrind: every command of the tool once under valgrind's memcheck
# (the unit tests run under ASan and UBSan; this checks the real binary,
# BPF and all): a recording of the simulator, then convert to both formats,
# report, dump, inspect and list on what it wrote, merge on the
# PyTorch fixture (with that recording as a second host), and the daemon
# (sampling, a trigger, ctl record, snapshot, status, a scrape) with ctl.
# Fails on any error or leak that valgrind reports.
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
# the daemon, its threads and all, until SIGTERM; ctl against it
runs=$((runs + 1))
"${vg[@]}" "$tool" daemon --listen 127.0.0.1:19499 --runtime-dir "$tmp/run" --state-dir "$tmp/state" \
	--sample-every 4s --window-seconds 1 --trigger-errors 1 --kubelet-socket "$tmp/none.sock" --vfio-path "$tmp" \
	>"$tmp/dout" 2>"$tmp/derr" &
daemon=$!
for _ in $(seq 600); do [ -S "$tmp/run/control" ] && break; sleep 0.1; done
[ -S "$tmp/run/control" ] || { echo "valgrind: FAILED: the daemon did not start" >&2; cat "$tmp/derr" >&2; exit 1; }
"$build/spyre-sim-run" --mock-dir "$tmp/m" --jobs 100000 --delay-us 2000 --json "$tmp/long.json" >/dev/null &
sim=$!
sleep 6
run "$tool" ctl --runtime-dir "$tmp/run" record --seconds 1 -o "$tmp/w.sbt"
run "$tool" ctl --runtime-dir "$tmp/run" snapshot --last 10s -o "$tmp/snap.pftrace"
run "$tool" ctl --runtime-dir "$tmp/run" status
curl -s -o /dev/null http://127.0.0.1:19499/metrics
kill "$sim"
kill -TERM "$daemon"
if ! wait "$daemon"; then
	echo "valgrind: FAILED: daemon" >&2
	cat "$tmp/derr" >&2
	exit 1
fi
for said in "window (sample)" "trigger errors" "snapshot (window)" "snapshot (request)" "stopping on Terminated"; do
	grep -qF "$said" "$tmp/derr" || { echo "valgrind: the daemon never said '$said'" >&2; cat "$tmp/derr" >&2; exit 1; }
done
echo "valgrind: $runs passed, 0 failed"
