#!/usr/bin/env bash
# Run a command in a QEMU guest where QEMU's edu PCI devices are bound to the
# real vfio-pci driver behind an emulated IOMMU: the closest thing to a
# Spyre card this machine has (../shared/reference/edu-device.md).
#
#   scripts/vm.sh [--arch A] [--edu N] [--timeout S] [--out DIR] -- CMD [ARGS...]
#
# --arch: x86_64 (default: q35 with an Intel IOMMU, Debian 12's kernel),
# ppc64le (pseries, whose IOMMU is sPAPR TCE) or s390x (s390-ccw-virtio with
# zPCI; QEMU has no edu there, so no card is bound): both on Debian 12's
# 6.12 kernels, its 6.1 ones cannot do VFIO there; everything under TCG.
# Other architectures run the cross build (make ARCH=A, in build/A).
#
# Debian's kernel (and, for another architecture, busybox) package is
# downloaded once (apt-get download, never installed) into $SBT_VM_CACHE; an
# initramfs is built with busybox, the project's binaries and their
# libraries, and the vfio modules. In the guest, CMD runs in /work (the
# project's build is at /work/build) with /out for results; /out comes back
# to DIR on the host through the serial console. Exits with CMD's status; a
# failed step says which and why, and exits 1, or 3 when a package could not
# be downloaded (absent: the tests skip) or 4 when the guest gave no result
# in --timeout seconds (hung: the tests fail, with its last console lines).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt-retry.sh
ROOT=$PWD
CACHE=${SBT_VM_CACHE:-/var/cache/spyre-bpftrace/vm}
EDU=1
TIMEOUT=120
OUT=build/vm-out
ARCH=x86_64
NOBUILD=
while [ $# -gt 0 ]; do
	case "$1" in
	--arch) ARCH=$2; shift 2 ;;
	--edu) EDU=$2; shift 2 ;;
	--no-build) NOBUILD=1; shift ;; # the guest alone (scripts/gen-vmlinux.sh)
	--timeout) TIMEOUT=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "vm: unknown option '$1'; usage: scripts/vm.sh [--arch A] [--edu N] [--timeout S] [--out DIR] -- CMD" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "vm: no command; usage: scripts/vm.sh [--arch A] [--edu N] -- CMD" >&2; exit 2; }

fail() { echo "vm: $1 failed: $2" >&2; exit "${3:-1}"; }
step() { [ -n "${SBT_VM_QUIET:-}" ] || echo "vm: $*" >&2; }

# per architecture: Debian's name, QEMU, the kernel package, the modules
# (their dependencies come from modules.dep) and the console
case "$ARCH" in
x86_64)
	deb=amd64; qemu=qemu-system-x86_64; console=ttyS0
	kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	want_mods="vfio_iommu_type1 vfio-pci" ;;
ppc64le)
	deb=ppc64el; qemu=qemu-system-ppc64; console=hvc0
	kpkg=$(apt-cache pkgnames linux-image-6.12 | grep -E '^linux-image-6\.12\.[0-9]+\+deb12-powerpc64le$' | sort -V | tail -1 || true)
	want_mods="vfio_iommu_spapr_tce vfio-pci" ;;
s390x)
	deb=s390x; qemu=qemu-system-s390x; console=ttysclp0
	kpkg=$(apt-cache pkgnames linux-image-6.12 | grep -E '^linux-image-6\.12\.[0-9]+\+deb12-s390x$' | sort -V | tail -1 || true)
	want_mods="vfio_iommu_type1 vfio-pci" ;;
*) echo "vm: no guest for --arch '$ARCH'; hint: x86_64, ppc64le or s390x" >&2; exit 2 ;;
esac
tools=("$qemu" cpio dpkg-deb apt-get xz depmod)
[ "$ARCH" = x86_64 ] && tools+=(busybox)
for tool in "${tools[@]}"; do
	command -v "$tool" >/dev/null || fail "checking tools" "$tool missing; hint: make deps"
done
# the build to copy in (make's OUT; the e2e tests pass it as SBT_BUILD)
if [ "$ARCH" = "$(uname -m)" ]; then build=${SBT_BUILD:-build}; else build=${SBT_BUILD:-build/$ARCH}; fi
[ -n "$NOBUILD" ] || [ -x "$build/spyre-bpftrace" ] || fail "checking the build" "$build/spyre-bpftrace missing; hint: make ARCH=$ARCH"

# 1. the kernel (and busybox of that architecture), cached
mkdir -p "$CACHE"
[ -n "$kpkg" ] || fail "finding the kernel package" "apt-cache knows no 6.12 kernel for $deb; hint: sudo make deps (it adds the architecture and, for s390x and ppc64el, bookworm-backports)"
unpack() { # package[:arch] -> $CACHE/name, downloaded once
	local pkg=$1 dir=$CACHE/${1/:/_}
	if [ ! -d "$dir" ]; then
		step "downloading $pkg (once)"
		(cd "$CACHE" && apt_retry apt-get download -q "$pkg" >"$CACHE/download.log" 2>&1) ||
			fail "downloading $pkg" "apt-get download failed: $(tail -1 "$CACHE/download.log")" 3
		dpkg-deb -x "$(ls "$CACHE"/"${pkg%%:*}"_*_"${pkg##*:}".deb | tail -1)" "$dir.tmp" ||
			fail "unpacking $pkg" "dpkg-deb -x failed"
		mv "$dir.tmp" "$dir"
	fi
	echo "$dir"
}
kdir=$(unpack "$kpkg:$deb") && [ -d "$kdir" ] || exit 1
kernel=$(ls "$kdir"/boot/vmlinu[xz]-* | head -1)
release=${kernel##*/vmlinu?-}
mods=$kdir/lib/modules/$release
# the package leaves modules.dep to its installation: made here, once
if [ ! -s "$mods/modules.dep" ]; then
	depmod -b "$kdir" "$release" 2>/dev/null || fail "indexing modules" "depmod -b failed; hint: make deps (kmod)"
fi
if [ "$ARCH" = x86_64 ]; then
	busybox=$(command -v busybox)
else
	busybox=$(unpack "busybox-static:$deb")/bin/busybox && [ -x "$busybox" ] || exit 1
fi

# 2. the initramfs
work=$(mktemp -d)
trap '[ -n "${SBT_VM_KEEP:-}" ] && echo "vm: kept $work" >&2 || rm -rf "$work"' EXIT
init=$work/root
mkdir -p "$init"/{bin,sbin,dev,proc,sys,tmp,out,modules,work,etc}
cp "$busybox" "$init/bin/busybox"
# the modules wanted and what they need, in load order, uncompressed
dep_line() { # a module's "path: dependencies" line of modules.dep (names with _)
	awk -v m="$1" -F: '{n=$1; sub(/.*\//, "", n); sub(/\.ko(\.xz|\.zst)?$/, "", n);
		gsub(/-/, "_", n); if (n == m) {print; exit}}' "$mods/modules.dep"
}
load_order() {
	local m=$1 dep
	for dep in $(dep_line "$m" | cut -d: -f2); do
		dep=${dep##*/}; load_order "$(echo "${dep%%.ko*}" | tr - _)"
	done
	echo "$m"
}
: > "$init/modules/order"
for m in $want_mods; do
	for n in $(load_order "$(echo "$m" | tr - _)"); do
		grep -qx "$n" "$init/modules/order" && continue
		f=$(dep_line "$n" | cut -d: -f1)
		[ -n "$f" ] || fail "collecting modules" "$n not in $kpkg"
		case "$f" in
		*.xz) xz -dc "$mods/$f" > "$init/modules/$n.ko" ;;
		*) cp "$mods/$f" "$init/modules/$n.ko" ;;
		esac
		echo "$n" >> "$init/modules/order"
	done
done
[ -s "$init/modules/order" ] || fail "collecting modules" "no modules.dep in $kpkg"
# the project's binaries and every library they load: the host's, or the
# cross toolchain's C library for another architecture
mkdir -p "$init/work/build"
[ -n "$NOBUILD" ] || cp -a "$build/spyre-bpftrace" "$init/work/build/"
[ -z "$NOBUILD" ] && [ -x "$build/spyre-sim-run" ] && cp -a "$build/spyre-sim-run" "$build/sim" "$init/work/build/"
# (a syscall loop, for what hooks cost other processes; a launcher that
# dlopen()s the runtime late)
for bin in spyre-syscall-loop spyre-sim-dlopen; do
	[ -z "$NOBUILD" ] && [ -x "$build/$bin" ] && cp -a "$build/$bin" "$init/work/build/"
done
# (a pipe ping-pong, for what the wake-up hook costs: bench/wake_cost.py --guest;
# empty programs on vfio's handlers: bench/guest_daemon_cost.py)
for f in pingpong bench-floor floor.bpf.o; do
	if [ -z "$NOBUILD" ] && [ -e "$build/bench/$f" ]; then
		mkdir -p "$init/work/build/bench" && cp -a "$build/bench/$f" "$init/work/build/bench/"
	fi
done
if [ "$ARCH" = x86_64 ]; then
	for bin in "$init"/work/build/spyre-bpftrace "$init"/work/build/spyre-sim-run "$init"/work/build/spyre-sim-dlopen \
		"$init"/work/build/sim/*.so "$init"/work/build/bench/bench-floor; do
		[ -e "$bin" ] || continue
		ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
			[ -e "$init$lib" ] || { mkdir -p "$init$(dirname "$lib")"; cp -L "$lib" "$init$lib"; }
		done
	done
else
	triplet=$(ls -d /usr/*-linux-gnu | grep -m1 "/usr/${ARCH/ppc64le/powerpc64le}-linux-gnu") ||
		fail "collecting libraries" "no cross C library for $ARCH; hint: make deps"
	mkdir -p "$init/lib/${triplet##*/}"
	cp -L "$triplet"/lib/lib{c,m,pthread,dl,gcc_s}.so.* "$init/lib/${triplet##*/}/" 2>/dev/null || true
	if [ -z "$NOBUILD" ] && [ -x "$build/spyre-sim-run" ]; then
		interp=$(readelf -l "$build/spyre-sim-run" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
		mkdir -p "$init$(dirname "$interp")"
		cp -L "$triplet/lib/$(basename "$interp")" "$init$interp"
	fi
fi
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
for m in $(cat /modules/order); do
	insmod /modules/$m.ko || { say "STEP loading $m.ko FAILED"; poweroff -f; }
done
export LD_LIBRARY_PATH=$(ls -d /lib/*-linux-gnu 2>/dev/null | head -1)
n=0
for d in /sys/bus/pci/devices/*; do
	# edu, or on Z the virtio-rng stand-in card
	case "$(cat $d/vendor):$(cat $d/device)" in
	0x1234:0x11e8 | 0x1af4:0x1044) ;;
	*) continue ;;
	esac
	echo vfio-pci > $d/driver_override
	[ -e $d/driver ] && echo ${d##*/} > $d/driver/unbind
	echo ${d##*/} > /sys/bus/pci/drivers_probe
	[ -e $d/iommu_group ] || { say "STEP binding ${d##*/} FAILED: no IOMMU group"; poweroff -f; }
	g=$(basename $(readlink $d/iommu_group))
	[ -e /dev/vfio/$g ] || { say "STEP binding ${d##*/} FAILED: no /dev/vfio/$g"; poweroff -f; }
	say "card ${d##*/} bound to vfio-pci, group $g"
	n=$((n + 1))
done
say "devices $n"
cd /work
say "running the command"
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
case "$ARCH" in
x86_64)
	machine=(-machine q35,kernel-irqchip=split -cpu max -smp 2
		 -device intel-iommu,intremap=on,caching-mode=on)
	extra="intel_iommu=on" ;;
ppc64le) # the cap-* settings: what TCG cannot emulate of the Spectre mitigations
	machine=(-machine pseries,x-vof=on,cap-cfpc=broken,cap-sbbc=broken,cap-ibs=broken,cap-ccf-assist=off
		 -smp 1 -vga none -nic none)
	extra="" ;;
s390x)
	machine=(-machine s390-ccw-virtio -cpu max -smp 1 -nic none)
	extra="" ;;
esac
for i in $(seq "$EDU"); do
	if [ "$ARCH" = s390x ]; then
		# no edu on Z: a modern virtio-rng whose DMA goes through the zPCI IOMMU
		devices+=(-device "zpci,uid=$i,fid=$i,target=card$i"
			  -device "virtio-rng-pci,id=card$i,disable-legacy=on,iommu_platform=on")
	else
		devices+=(-device edu)
	fi
done
step "booting $release ($ARCH) with $EDU card(s) (timeout ${TIMEOUT}s)"
set +e
timeout --foreground -k 5 "$TIMEOUT" "$qemu" "${machine[@]}" -accel tcg -m 1024 "${devices[@]}" \
	-kernel "$kernel" -initrd "$work/initrd" \
	-append "console=$console $extra ${SBT_VM_APPEND:-} panic=-1 quiet loglevel=3" \
	-nographic -no-reboot -monitor none -serial stdio > "$work/console" 2>&1
rc=$?
set -e
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
	echo "vm: the guest's last console lines:" >&2
	tail -30 "$work/console" | tr -d '\r' | sed 's/^/vm: | /' >&2
	fail "running the guest" "no result in ${TIMEOUT}s (killed)" 4
fi
if grep -q "SBT-VM: STEP" "$work/console"; then
	fail "guest set-up" "$(grep -a -o 'SBT-VM: STEP.*' "$work/console" | head -1 | cut -c14-)"
fi
grep -a -q "SBT-VM: END-OUT" "$work/console" ||
	{ tail -30 "$work/console" >&2; fail "running the guest" "it stopped before returning results (qemu exit $rc)"; }
grep -a "SBT-VM: card\|SBT-VM: devices" "$work/console" | sed 's/^.*SBT-VM: /vm: guest: /' >&2

# 4. results back on the host
rm -rf "$OUT" && mkdir -p "$OUT"
sed -n '/SBT-VM: BEGIN-OUT/,/SBT-VM: END-OUT/p' "$work/console" | sed '1d;$d' | tr -d '\r' |
	base64 -d | gzip -d | tar -C "$OUT" -xf - || fail "bringing results back" "the console transfer was damaged"
cat "$OUT/stdout"
cat "$OUT/stderr" >&2
exit "$(cat "$OUT/status")"
