# spyre-bpftrace: see README.md. `make` builds, `make test` tests, `make demo` demos.
SHELL      := /bin/bash
VERSION    := 0.1.0
OUT        := build
CC         ?= gcc
CLANG      ?= clang
BPFTOOL    ?= bpftool
ARCH       := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/' -e 's/ppc64le/powerpc/' -e 's/s390x/s390/')

WARN       := -Wall -Wextra -Werror -Wno-missing-field-initializers
CFLAGS     ?= -O2 -g
# what the build needs, whatever CFLAGS the user gives
ALL_CFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -DSBT_VERSION='"$(VERSION)"' \
              -I$(OUT) -Ibpf -Iuser
LDLIBS     := -lbpf -lelf -lz -liberty -lcapstone -lnghttp2 -lm -lpthread

BPF_SRCS   := $(wildcard bpf/*.bpf.c)
BPF_OBJS   := $(patsubst bpf/%.bpf.c,$(OUT)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_HDRS   := $(wildcard bpf/*.h) vmlinux/vmlinux.h

LIB_SRCS   := $(filter-out user/main.c,$(wildcard user/*.c))
USER_HDRS  := $(wildcard user/*.h)
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

.PHONY: all deps test unit unit-asan e2e bench demo clean format vmlinux sim install fuzz valgrind test-torch
all: $(TOOL) sim

# The Debian packages: checked by the commands that set up a fresh machine
# (test, demo, bench), before anything is built; `make` alone does not.
deps:
	@scripts/deps.sh

# ---- BPF ----------------------------------------------------------------
$(OUT)/bpf/%.bpf.o: bpf/%.bpf.c $(BPF_HDRS) | $(OUT)/bpf
	$(call msg,BPF,$<)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
		-Ivmlinux -Ibpf -c $< -o $@

$(OUT)/spyre.bpf.o: $(BPF_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(OUT)/spyre.skel.h: $(OUT)/spyre.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name spyre_bpf > $@

# ---- user space -----------------------------------------------------------
# Each object depends on the headers it includes (-MMD -MP writes them down);
# the skeleton is generated before any object is compiled.
DEPFLAGS    = -MMD -MP
$(OUT)/obj/%.o: user/%.c | $(OUT)/obj $(OUT)/spyre.skel.h
	$(call msg,CC,$<)
	$(Q)$(CC) $(CFLAGS) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(OUT)/libsbt.a: $(patsubst user/%.c,$(OUT)/obj/%.o,$(LIB_SRCS))
	$(call msg,AR,$@)
	$(Q)$(AR) rcs $@ $^

$(TOOL): $(OUT)/obj/main.o $(OUT)/libsbt.a
	$(call msg,LD,$@)
	$(Q)$(CC) $(CFLAGS) $(ALL_CFLAGS) $^ -o $@ $(LDLIBS)

$(OUT)/bpf $(OUT)/obj $(OUT)/obj-san $(OUT)/sim $(OUT)/tests:
	$(Q)mkdir -p $@

include tests/sim/sim.mk
include tests/unit/unit.mk
include tests/fuzz/fuzz.mk

# ---- checks ---------------------------------------------------------------
# deps first, alone: packages are installed before anything is compiled
test:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory all unit-asan
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=10
	@$(MAKE) --no-print-directory e2e
	@echo "make test: all tiers done"

e2e: all
	@SBT_BUILD=$(abspath $(OUT)) python3 tests/e2e/run.py

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

$(OUT)/bench/gen-capture: bench/gen_capture.c tests/lib/synth.c user/capture.c user/byteorder.c | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -D_GNU_SOURCE -Ibpf -Iuser -Itests/lib $^ -o $@

# the floor of a probe's cost: empty (or counting) programs on the same sites
$(OUT)/bench/floor.bpf.o: bench/floor.bpf.c vmlinux/vmlinux.h | $(OUT)/bench
	$(call msg,BPF,$<)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror -Ivmlinux -c $< -o $@

$(OUT)/bench/bench-floor: bench/floor.c | $(OUT)/bench
	$(call msg,CC,$@)
	$(Q)$(CC) -O2 -g -std=gnu11 $(WARN) -D_GNU_SOURCE $< -o $@ -lbpf -lelf -lz

$(OUT)/bench:
	$(Q)mkdir -p $@

# make bench: the cost to a traced process (vs bpftrace), the converter, the daemon
bench:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory all $(OUT)/bench/gen-capture $(OUT)/bench/bench-floor \
		$(OUT)/bench/floor.bpf.o
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/overhead.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/runtime_probes.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/convert.py
	@SBT_BUILD=$(abspath $(OUT)) python3 bench/daemon.py
	@SBT_BUILD=$(abspath $(OUT)) SBT_SOAK_SECONDS=600 python3 tests/e2e/run.py daemon_soak

demo:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh

vmlinux:
	scripts/gen-vmlinux.sh

install: $(TOOL)
	install -D -m 0755 $(TOOL) $(DESTDIR)$(PREFIX)/bin/spyre-bpftrace
	install -D -m 0644 docs/spyre-bpftrace.1 $(DESTDIR)$(PREFIX)/share/man/man1/spyre-bpftrace.1

-include $(wildcard $(OUT)/obj/*.d $(OUT)/obj-san/*.d $(OUT)/obj-fuzz/*.d)

format:
	clang-format -i bpf/*.c bpf/*.h user/*.c user/*.h tests/sim/*.c tests/unit/*.c

clean:
	rm -rf $(OUT)
