#!/usr/bin/env bash
# make demo: boot the QEMU guest (scripts/vm.sh) whose edu PCI devices are
# bound to the real vfio-pci driver, run the Spyre simulator's vfio backend
# there under spyre-bpftrace -c, and bring the Perfetto trace back as
# demo.pftrace. Needs no root on the host and no KVM (about 20 s of TCG).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${DEMO_OUT:-demo.pftrace}
echo "demo: tracing 'spyre-sim-run --backend vfio' in a QEMU guest with an edu card on vfio-pci"
# the guest's summary names the host's file, where it is copied to; the
# one "open it in" line is the demo's own, at the end
scripts/vm.sh --edu 1 --out build/demo -- \
	"build/spyre-bpftrace --device 1234:11e8 -o /out/demo.pftrace -c 'build/spyre-sim-run --backend vfio --threads 1 --jobs 4 --bytes 4096 --json /out/sim.json'" 2>&1 |
	sed -e "s|/out/demo.pftrace|$out|g" -e '/ in https:\/\/ui.perfetto.dev/d'
cp build/demo/demo.pftrace "$out"
echo
echo "demo: checking the trace on the host:"
build/spyre-bpftrace inspect "$out"
echo
echo "demo: $out written; open it in https://ui.perfetto.dev (Open trace file)."
echo "demo: the runtime's calls, the VFIO ioctls with vfio's own functions and the"
echo "demo: IOMMU mappings inside them,"
echo "demo: the card's H2D/compute/D2H jobs and the MSI interrupts that end them."
