#!/usr/bin/env bash
# make demo: trace the Spyre simulator with spyre-bpftrace and write a capture.
# Until the QEMU guest lands, this runs on the host with the simulator's
# mock backend: runtime uprobes and VFIO ioctls are real, the device is not.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DEMO_OUT:-demo.sbt}
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
echo "demo: the first runtime calls and ioctls of the capture:"
# head closes the pipe early; that is not a failure
{ build/spyre-bpftrace dump "$out" || true; } | grep -E ' (call_enter|ioctl) ' | head -8 || true
echo
echo "demo: all of it: build/spyre-bpftrace dump $out"
