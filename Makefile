# spyre-bpftrace: see README.md. `make` builds, `make test` tests, `make demo` demos.
SHELL      := /bin/bash
VERSION    := 0.1.0
CLANG      ?= clang
BPFTOOL    ?= bpftool
LLVM_STRIP ?= llvm-strip

# What to build for: this machine, or ARCH=ppc64le / ARCH=s390x, cross-built
# static into build/ARCH with Debian's cross compilers and the target's
# libraries unpacked into build/ARCH/sysroot (docs/power-and-z.md).
HOST_ARCH  := $(shell uname -m)
ARCH       ?= $(HOST_ARCH)
# the kernel's and Debian's spellings are taken too
override ARCH := $(patsubst x86,x86_64,$(patsubst amd64,x86_64,$(patsubst powerpc,ppc64le,$(patsubst ppc64el,ppc64le,$(patsubst s390,s390x,$(ARCH))))))
KARCH_x86_64   := x86
KARCH_ppc64le  := powerpc
KARCH_s390x    := s390
# s390x is big-endian: its BPF objects are too
ENDIAN_s390x   := bpfeb
KARCH      := $(KARCH_$(ARCH))
$(if $(KARCH),,$(error ARCH=$(ARCH) is not supported; hint: x86_64, ppc64le or s390x))
TRIPLET    := $(patsubst ppc64le-%,powerpc64le-%,$(ARCH)-linux-gnu)
BPF_TARGET := $(or $(ENDIAN_$(ARCH)),bpfel)
VMLINUX_H  := vmlinux/$(KARCH)/vmlinux.h

ifeq ($(ARCH),$(HOST_ARCH))
CROSS      :=
# STATIC=1: this machine's build linked static too, into build/static (the
# binary the packages and the image carry; make static)
ifeq ($(STATIC),1)
OUT        ?= build/static
else
OUT        ?= build
endif
CC         ?= gcc
else
CROSS      := $(TRIPLET)-
OUT        ?= build/$(ARCH)
CC         := $(CROSS)gcc
AR         := $(CROSS)ar
SYSROOT    := $(OUT)/sysroot
# what runs here runs on this machine: a cross build is tested in its guest
ifneq ($(filter test unit unit-asan e2e fuzz valgrind bench bench-check bench-daemon demo test-torch,$(MAKECMDGOALS)),)
$(error make $(filter test unit unit-asan e2e fuzz valgrind bench bench-check bench-daemon demo test-torch,$(MAKECMDGOALS)) runs on this machine, not with ARCH=$(ARCH); hint: make test builds and tests the $(ARCH) build in its QEMU guest)
endif
endif

WARN       := -Wall -Wextra -Werror -Wno-missing-field-initializers
CFLAGS     ?= -O2 -g
# what the build needs, whatever CFLAGS the user gives
ALL_CFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -DSBT_VERSION='"$(VERSION)"' \
              -I$(OUT) -Ibpf -Iuser
LDLIBS     := -lbpf -lelf -lz -liberty -lcapstone -lnghttp2 -lm -lpthread
# static, libelf needs zstd (compressed sections) spelt out
STATIC_LIBS := -lbpf -lelf -lz -lzstd -liberty -lcapstone -lnghttp2 -lm -lpthread
ifneq ($(CROSS),)
# static: one file to copy onto a Power or Z host
ALL_CFLAGS += -isystem $(SYSROOT)/usr/include -isystem $(SYSROOT)/usr/include/$(TRIPLET)
LDFLAGS    += -static -L$(SYSROOT)/usr/lib/$(TRIPLET)
LDLIBS     := $(STATIC_LIBS)
else ifeq ($(STATIC),1)
LDFLAGS    += -static
LDLIBS     := $(STATIC_LIBS)
endif

BPF_SRCS   := $(wildcard bpf/*.bpf.c)
BPF_OBJS   := $(patsubst bpf/%.bpf.c,$(OUT)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_HDRS   := $(wildcard bpf/*.h) $(VMLINUX_H)

# user/: base, capture, model and probes, attach (the layers), then record, daemon,
# offline (the products) and main.c on top (docs/architecture.md)
LIB_SRCS   := $(wildcard user/*/*.c)
USER_HDRS  := $(wildcard user/*.h user/*/*.h)
TOOL       := $(OUT)/spyre-bpftrace

# Quiet build lines ("  CC  user/x.c"); V=1 shows the commands.
ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-7s %s\n' "$(1)" "$(2)";
endif

# Sanitizer build of the user-space library for the unit tests.
SAN        := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

.SECONDARY:
# a recipe that fails leaves no half-written target behind
.DELETE_ON_ERROR:
PREFIX     ?= /usr/local

.PHONY: all deps cross test unit unit-asan e2e bench bench-check bench-daemon demo clean format format-check vmlinux sim install fuzz valgrind test-torch static deb rpm image bench-daemon-guest
all: $(TOOL) sim

# The Debian packages: checked by the commands that set up a fresh machine
# (test, demo, bench), before anything is built; `make` alone does not.
deps:
	@scripts/deps.sh

# ---- BPF ----------------------------------------------------------------
BPF_CFLAGS := -g -O2 -D__TARGET_ARCH_$(KARCH) -Wall -Werror -Ivmlinux/$(KARCH) -Ibpf

$(OUT)/bpf/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) | $(OUT)/bpf
	$(call msg,BPF,$<)
	$(Q)$(CLANG) $(BPF_CFLAGS) -target $(BPF_TARGET) -c $< -o $@

ifeq ($(BPF_TARGET),bpfel)
$(OUT)/spyre.bpf.o: $(BPF_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(OUT)/spyre.skel.h: $(OUT)/spyre.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name spyre_bpf > $@
else
# Big-endian: bpftool 7.1 can neither link nor make a skeleton of such an
# object. All programs are compiled as one unit instead (bpf/one_object.c),
# the skeleton is made from its little-endian twin (same source, same
# names and layout) and given the big-endian bytes to open
# (scripts/skel-object.py checks that the two objects match).
# (DWARF stripped, as bpftool's linker does: BTF is what libbpf reads)
$(OUT)/spyre.bpf.o: bpf/one_object.c $(BPF_SRCS) $(BPF_HDRS) | $(OUT)/bpf
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -target bpfeb -c $< -o $@
	$(Q)$(LLVM_STRIP) -g $@

$(OUT)/spyre.twin.bpf.o: bpf/one_object.c $(BPF_SRCS) $(BPF_HDRS) | $(OUT)/bpf
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -target bpfel -c $< -o $@
	$(Q)$(LLVM_STRIP) -g $@

$(OUT)/spyre.skel.h: $(OUT)/spyre.twin.bpf.o $(OUT)/spyre.bpf.o scripts/skel-object.py
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name spyre_bpf > $@.twin
	$(Q)python3 scripts/skel-object.py $@.twin $< $(OUT)/spyre.bpf.o > $@
	$(Q)rm -f $@.twin
endif

# ---- user space -----------------------------------------------------------
# Each object depends on the headers it includes (-MMD -MP writes them down);
# the skeleton is generated before any object is compiled.
DEPFLAGS    = -MMD -MP
$(OUT)/obj/%.o: user/%.c | $(OUT)/obj $(OUT)/spyre.skel.h $(SYSROOT)
	$(call msg,CC,$<)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(OUT)/libsbt.a: $(patsubst user/%.c,$(OUT)/obj/%.o,$(LIB_SRCS))
	$(call msg,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(TOOL): $(OUT)/obj/main.o $(OUT)/libsbt.a
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(ALL_CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(OUT)/bpf $(OUT)/obj $(OUT)/obj-san $(OUT)/sim $(OUT)/tests:
	$(Q)mkdir -p $@

ifneq ($(CROSS),)
$(SYSROOT):
	$(call msg,SYSROOT,$@)
	$(Q)scripts/sysroot.sh $(ARCH) $@
endif

include tests/sim/sim.mk
include tests/unit/unit.mk
include tests/fuzz/fuzz.mk

# ---- checks ---------------------------------------------------------------
# test, demo and bench compile on every CPU (a minute less of make test on
# two), unless make was given its own -j; tests and benchmarks run alone
PAR = $$(case " $$MAKEFLAGS " in *" -j"*) ;; *) echo -j$$(nproc 2>/dev/null || echo 1) ;; esac)

# deps first, alone: packages are installed before anything is compiled;
# the unit tests run once everything is built
test:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory format-check
	@$(MAKE) --no-print-directory $(PAR) all
	@$(MAKE) --no-print-directory $(PAR) unit-asan
	@$(MAKE) --no-print-directory $(PAR) cross
	@$(MAKE) --no-print-directory $(PAR) fuzz FUZZ_SECONDS=10
	@$(MAKE) --no-print-directory bench-check
	@$(MAKE) --no-print-directory e2e
	@echo "make test: all tiers done"

# the Power and Z builds, tested in their guests by e2e
cross:
	@$(MAKE) --no-print-directory ARCH=ppc64le all
	@$(MAKE) --no-print-directory ARCH=s390x all

# `make e2e T=name` (or T="a b"): those end-to-end tests only
e2e: all
	@SBT_BUILD=$(abspath $(OUT)) python3 tests/e2e/run.py $(T)

# the PyTorch merge on a fresh real run (Debian 13's torch in a chroot,
# made once and cached; not part of make test, which uses the committed one)
test-torch: all
	@scripts/torch-fixture.sh $(OUT)/torch-fixture
	@SBT_BUILD=$(abspath $(OUT)) SBT_TORCH_FIXTURE=$(abspath $(OUT))/torch-fixture \
		python3 tests/e2e/run.py merge_pytorch_real_fixture merge_hosts_and_our_json
	@if [ -n "$$SBT_AIU_ANALYZER" ]; then scripts/aiu-check.sh $(OUT)/torch-fixture; \
	else echo "test-torch: SBT_AIU_ANALYZER (an aiu-trace-analyzer checkout) not set: not run"; fi

# every command once under valgrind's memcheck (not part of make test: slow)
valgrind: all
	@SBT_BUILD=$(abspath $(OUT)) tests/valgrind.sh

$(OUT)/bench/gen-capture: bench/gen_capture.c tests/lib/synth.c user/capture/capture.c user/capture/byteorder.c user/base/log.c | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -D_GNU_SOURCE -Ibpf -Iuser -Itests/lib $^ -o $@

# what reading a library in its sandboxed child costs
$(OUT)/bench/reader-cost: bench/reader_cost.c $(OUT)/libsbt.a | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(ALL_CFLAGS) $< $(OUT)/libsbt.a -o $@ $(LDLIBS)

# the zero-loss ceiling's producer: VFIO-numbered ioctls at a set rate
$(OUT)/bench/ioctl-load: bench/ioctl_load.c | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -D_GNU_SOURCE $< -o $@ -lpthread

# a wake-up-heavy program: what the sched_waking hook costs everybody
$(OUT)/bench/pingpong: bench/pingpong.c | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -D_GNU_SOURCE $< -o $@

# one program's cost to a command, attached and detached in pairs
$(OUT)/bench/hook-toggle: bench/hook_toggle.c | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -D_GNU_SOURCE $< -o $@ -lbpf -lelf -lz

# the floor of a probe's cost: empty (or counting) programs on the same sites
$(OUT)/bench/floor.bpf.o: bench/floor.bpf.c $(VMLINUX_H) | $(OUT)/bench
	$(call msg,BPF,$<)
	$(Q)$(CLANG) $(BPF_CFLAGS) -target $(BPF_TARGET) -c $< -o $@

$(OUT)/bench/bench-floor: bench/floor.c | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -D_GNU_SOURCE $< -o $@ -lbpf -lelf -lz

$(OUT)/bench:
	$(Q)mkdir -p $@

# make bench: the cost to a traced process (vs bpftrace), the converter, merge, the
# zero-loss ceiling of recording, the daemon
bench:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory $(PAR) all $(OUT)/bench/gen-capture $(OUT)/bench/bench-floor \
		$(OUT)/bench/floor.bpf.o $(OUT)/bench/ioctl-load $(OUT)/bench/pingpong $(OUT)/bench/hook-toggle \
		$(OUT)/bench/reader-cost
	@$(OUT)/bench/reader-cost $(OUT)/sim/libsenlib.so 64
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/overhead.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/runtime_probes.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/convert.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/merge.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/ceiling.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/wake_cost.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/record_tax.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/daemon.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/daemon_cost.py
	@SBT_BUILD=$(abspath $(OUT)) SBT_SOAK_SECONDS=600 python3 tests/e2e/run.py daemon_soak

# make bench-daemon: the daemon's BPF per VFIO ioctl against bpftrace counting
# the same and the floor, in one run; at a steady rate; the host-wide tax
bench-daemon:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory $(PAR) all sim $(OUT)/bench/ioctl-load
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/daemon_cost.py $(BENCH_ARGS)

# make bench-daemon-guest: the same on vfio's own handlers (fentry) in the
# x86 guest, as a ratio to empty programs there
bench-daemon-guest:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory $(PAR) all sim $(OUT)/bench/bench-floor $(OUT)/bench/floor.bpf.o
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/guest_daemon_cost.py $(BENCH_ARGS)

# make bench-check: the writers' instructions per record against
# bench/budget.json (callgrind; fails over budget by more than 5%)
bench-check: all $(OUT)/bench/gen-capture
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/check.py

demo:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory $(PAR) all
	@scripts/demo.sh

vmlinux:
	scripts/gen-vmlinux.sh $(ARCH)

# ---- install, static, packages, image (docs/install.md) --------------------
# make install [DESTDIR=...] [PREFIX=...] [BIN=a static build]: what the
# packages hold. The unit runs the binary where it is installed.
BIN           ?= $(TOOL)
BINDIR        ?= $(PREFIX)/bin
MANDIR        ?= $(PREFIX)/share/man
DATADIR       ?= $(PREFIX)/share/spyre-bpftrace
UNITDIR       ?= $(PREFIX)/lib/systemd/system
COMPLETIONDIR ?= $(PREFIX)/share/bash-completion/completions
SHARED_FILES  := deploy/prometheus/scrape.yml deploy/prometheus/spyre-alerts.yml \
                 deploy/grafana/spyre-bpftrace.json deploy/kubernetes/daemonset.yaml \
                 deploy/kubernetes/networkpolicy.yaml

install: $(BIN)
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/spyre-bpftrace
	install -D -m 0644 docs/spyre-bpftrace.1 $(DESTDIR)$(MANDIR)/man1/spyre-bpftrace.1
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed 's|/usr/local/bin/spyre-bpftrace|$(BINDIR)/spyre-bpftrace|' deploy/systemd/spyre-bpftrace.service \
		> $(DESTDIR)$(UNITDIR)/spyre-bpftrace.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/spyre-bpftrace.service
	install -D -m 0644 packaging/spyre-bpftrace.bash $(DESTDIR)$(COMPLETIONDIR)/spyre-bpftrace
	for f in $(SHARED_FILES); do install -D -m 0644 $$f $(DESTDIR)$(DATADIR)/$${f#deploy/}; done

# the static binaries of the three architectures: x86-64 here (build/static),
# Power and Z cross-built (static already)
STATIC_BINS := build/static/spyre-bpftrace build/ppc64le/spyre-bpftrace build/s390x/spyre-bpftrace
static:
	@$(MAKE) --no-print-directory $(PAR) STATIC=1 build/static/spyre-bpftrace
	@$(MAKE) --no-print-directory $(PAR) ARCH=ppc64le build/ppc64le/spyre-bpftrace
	@$(MAKE) --no-print-directory $(PAR) ARCH=s390x build/s390x/spyre-bpftrace

# .deb and .rpm of each architecture into build/pkg; the OCI images and
# their manifest list into podman's store and build/image
deb: static
	@scripts/package-deb.sh $(VERSION) build/pkg $(STATIC_BINS)

rpm: static
	@scripts/package-rpm.sh $(VERSION) build/pkg $(STATIC_BINS)

image: static
	@scripts/image.sh $(VERSION) build/image $(STATIC_BINS)

-include $(wildcard $(addsuffix /*.d,$(OUT)/obj $(OUT)/obj-san $(OUT)/obj-fuzz) \
		    $(addsuffix /*/*.d,$(OUT)/obj $(OUT)/obj-san $(OUT)/obj-fuzz))

# the C the project writes, in the style of .clang-format
FORMATTED = bpf/*.c bpf/*.h user/*.c user/*.h user/*/*.c user/*/*.h tests/sim/*.c tests/unit/*.c

format:
	clang-format -i $(FORMATTED)

# make format-check (a tier of make test): a file not as `make format`
# would leave it fails, with the lines that differ
format-check:
	@command -v clang-format >/dev/null || { echo "format-check: clang-format is not installed; hint: make deps"; exit 1; }
	@if out=$$(clang-format --dry-run --Werror $(FORMATTED) 2>&1); then \
		echo "format-check: every file as make format leaves it"; \
	else echo "$$out" | head -40; echo "format-check: files differ from .clang-format's style; hint: make format"; exit 1; fi

clean:
	rm -rf $(OUT)
