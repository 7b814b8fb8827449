#!/usr/bin/env bash
# Run a command in a QEMU guest where QEMU's edu PCI devices are bound to the
# real vfio-pci driver behind an emulated IOMMU: the closest thing to a
# Spyre card this machine has (../shared/reference/edu-device.md).
#
#   scripts/vm.sh [--edu N] [--timeout S] [--out DIR] -- CMD [ARGS...]
#
# Debian's kernel package is downloaded once (apt-get download, never
# installed) into $SBT_VM_CACHE; an initramfs is built with busybox, the
# project's binaries and their libraries, and the vfio modules. In the guest,
# CMD runs in /work (the project's build/ is at /work/build) with /out for
# results; /out comes back to DIR on the host through the serial console.
# Exits with CMD's status; a failed step says which and why.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${SBT_VM_CACHE:-/var/cache/spyre-bpftrace/vm}
EDU=1
TIMEOUT=120
OUT=build/vm-out
while [ $# -gt 0 ]; do
	case "$1" in
	--edu) EDU=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "vm: unknown option '$1'; usage: scripts/vm.sh [--edu N] [--timeout S] [--out DIR] -- CMD" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "vm: no command; usage: scripts/vm.sh [--edu N] -- CMD" >&2; exit 2; }

fail() { echo "vm: $1 failed: $2" >&2; exit 1; }
step() { [ -n "${SBT_VM_QUIET:-}" ] || echo "vm: $*" >&2; }

for tool in qemu-system-x86_64 busybox cpio dpkg-deb apt-get; do
	command -v "$tool" >/dev/null || fail "checking tools" "$tool missing; hint: make deps"
done
# the build to copy in (make's OUT; the e2e tests pass it as SBT_BUILD)
build=${SBT_BUILD:-build}
[ -x "$build/spyre-bpftrace" ] || fail "checking the build" "$build/spyre-bpftrace missing; hint: make"

# 1. the kernel: Debian's current linux-image-*-amd64, cached
mkdir -p "$CACHE"
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$pkg" ] || fail "finding the kernel package" "apt-cache knows no linux-image-amd64; hint: apt-get update"
kdir=$CACHE/$pkg
if [ ! -d "$kdir" ]; then
	step "downloading $pkg (once)"
	(cd "$CACHE" && apt-get download -q "$pkg" >/dev/null 2>&1) ||
		fail "downloading $pkg" "apt-get download failed"
	dpkg-deb -x "$CACHE"/"$pkg"_*.deb "$kdir.tmp" || fail "unpacking $pkg" "dpkg-deb -x failed"
	mv "$kdir.tmp" "$kdir"
fi
kernel=$(ls "$kdir"/boot/vmlinuz-* | head -1)
release=${kernel##*/vmlinuz-}
mods=$kdir/lib/modules/$release/kernel

# 2. the initramfs
work=$(mktemp -d)
trap '[ -n "${SBT_VM_KEEP:-}" ] && echo "vm: kept $work" >&2 || rm -rf "$work"' EXIT
init=$work/root
mkdir -p "$init"/{bin,sbin,dev,proc,sys,tmp,out,modules,work,etc}
cp "$(command -v busybox)" "$init/bin/busybox"
for m in virt/lib/irqbypass drivers/vfio/vfio drivers/vfio/vfio_iommu_type1 \
	 drivers/vfio/vfio_virqfd drivers/vfio/pci/vfio-pci-core drivers/vfio/pci/vfio-pci; do
	[ -f "$mods/$m.ko" ] || fail "collecting modules" "$m.ko not in $pkg"
	cp "$mods/$m.ko" "$init/modules/"
done
# the project's binaries and every library they load
mkdir -p "$init/work/build"
cp -a "$build/spyre-bpftrace" "$init/work/build/"
[ -x "$build/spyre-sim-run" ] && cp -a "$build/spyre-sim-run" "$build/sim" "$init/work/build/"
for bin in "$init"/work/build/spyre-bpftrace "$init"/work/build/spyre-sim-run "$init"/work/build/sim/*.so; do
	[ -e "$bin" ] || continue
	ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
		[ -e "$init$lib" ] || { mkdir -p "$init$(dirname "$lib")"; cp -L "$lib" "$init$lib"; }
	done
done
printf '%s\n' "$*" > "$init/cmd"
cat > "$init/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
mount -t debugfs nodev /sys/kernel/debug 2>/dev/null
say() { echo "SBT-VM: $*"; }
for m in irqbypass vfio vfio_iommu_type1 vfio_virqfd vfio-pci-core vfio-pci; do
	insmod /modules/$m.ko || { say "STEP loading $m.ko FAILED"; poweroff -f; }
done
n=0
for d in /sys/bus/pci/devices/*; do
	[ "$(cat $d/vendor):$(cat $d/device)" = "0x1234:0x11e8" ] || continue
	echo vfio-pci > $d/driver_override
	echo ${d##*/} > /sys/bus/pci/drivers_probe
	[ -e $d/iommu_group ] || { say "STEP binding ${d##*/} FAILED: no IOMMU group"; poweroff -f; }
	g=$(basename $(readlink $d/iommu_group))
	[ -e /dev/vfio/$g ] || { say "STEP binding ${d##*/} FAILED: no /dev/vfio/$g"; poweroff -f; }
	say "edu ${d##*/} bound to vfio-pci, group $g"
	n=$((n + 1))
done
say "devices $n"
cd /work
sh /cmd > /out/stdout 2> /out/stderr
echo $? > /out/status
say "BEGIN-OUT"
tar -C /out -cf - . | gzip | base64
say "END-OUT"
poweroff -f
EOF
chmod +x "$init/init"
(cd "$init" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$work/initrd" ||
	fail "building the initramfs" "cpio failed"

# 3. boot
devices=()
for _ in $(seq "$EDU"); do devices+=(-device edu); done
step "booting $release with $EDU edu device(s) (timeout ${TIMEOUT}s)"
set +e
timeout --foreground -k 5 "$TIMEOUT" qemu-system-x86_64 \
	-machine q35,kernel-irqchip=split -accel tcg -cpu max -m 1024 -smp 2 \
	-device intel-iommu,intremap=on,caching-mode=on "${devices[@]}" \
	-kernel "$kernel" -initrd "$work/initrd" \
	-append "console=ttyS0 intel_iommu=on panic=-1 quiet loglevel=3" \
	-nographic -no-reboot -monitor none -serial stdio > "$work/console" 2>&1
rc=$?
set -e
[ $rc -ne 124 ] && [ $rc -ne 137 ] || { tail -20 "$work/console" >&2; fail "running the guest" "no result in ${TIMEOUT}s (killed)"; }
if grep -q "SBT-VM: STEP" "$work/console"; then
	fail "guest set-up" "$(grep -a -o 'SBT-VM: STEP.*' "$work/console" | head -1 | cut -c14-)"
fi
grep -a -q "SBT-VM: END-OUT" "$work/console" ||
	{ tail -30 "$work/console" >&2; fail "running the guest" "it stopped before returning results (qemu exit $rc)"; }
grep -a "SBT-VM: edu\|SBT-VM: devices" "$work/console" | sed 's/^.*SBT-VM: /vm: guest: /' >&2

# 4. results back on the host
rm -rf "$OUT" && mkdir -p "$OUT"
sed -n '/SBT-VM: BEGIN-OUT/,/SBT-VM: END-OUT/p' "$work/console" | sed '1d;$d' | tr -d '\r' |
	base64 -d | gzip -d | tar -C "$OUT" -xf - || fail "bringing results back" "the console transfer was damaged"
cat "$OUT/stdout"
cat "$OUT/stderr" >&2
exit "$(cat "$OUT/status")"
