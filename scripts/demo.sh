#!/usr/bin/env bash
# make demo: trace the Spyre simulator with spyre-bpftrace into a Perfetto trace.
# Until the QEMU guest lands (issue #4), this runs on the host with the
# simulator's mock backend: runtime uprobes and VFIO ioctls are real, the
# device is simulated in the process.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DEMO_OUT:-demo.pftrace}
if [ "$(id -u)" -ne 0 ]; then
	echo "demo: needs root to load BPF programs; hint: sudo make demo" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "demo: tracing 'spyre-sim-run --threads 2 --jobs 8' (mock device) into $out"
build/spyre-bpftrace -o "$out" --vfio-path "$tmp/mock/*" \
	-c "build/spyre-sim-run --threads 2 --jobs 8 --bytes 262144 --mock-dir $tmp/mock --json $tmp/sim.json"
echo
echo "demo: checking the trace:"
build/spyre-bpftrace inspect "$out"
echo
echo "demo: open $out in https://ui.perfetto.dev (Open trace file)"
