# Unit tests (CMocka), built with the user-space library under ASan and UBSan.
UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(OUT)/tests/%,$(UNIT_SRCS))
SAN_OBJS   := $(patsubst user/%.c,$(OUT)/obj-san/%.o,$(LIB_SRCS))
UNIT_CFLAGS = -O1 -g -std=gnu11 $(WARN) -D_GNU_SOURCE -DSBT_VERSION='"$(VERSION)"' \
              -I$(OUT) -Ibpf -Iuser -Itests/lib $(SAN)
# helpers shared by tests, the fuzzer and the benchmark
TESTLIB_SRCS := $(wildcard tests/lib/*.c)
TESTLIB_HDRS := $(wildcard tests/lib/*.h)
SAN_TESTLIB  := $(patsubst tests/lib/%.c,$(OUT)/obj-san/lib-%.o,$(TESTLIB_SRCS))
# kept (not intermediate): make would delete them after a link, and then
# not rebuild them when a header they include changes
.SECONDARY: $(SAN_TESTLIB) $(SAN_OBJS)

$(OUT)/obj-san/lib-%.o: tests/lib/%.c | $(OUT)/obj-san
	$(call msg,CC-SAN,$<)
	$(Q)$(CC) $(UNIT_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(OUT)/obj-san/%.o: user/%.c | $(OUT)/obj-san $(OUT)/spyre.skel.h
	$(call msg,CC-SAN,$<)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNIT_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(OUT)/tests/libcxxdemo.so: tests/unit/cxxdemo.cpp | $(OUT)/tests
	$(call msg,CXX,$@)
	$(Q)$(CXX) -O1 -g -fPIC -shared $< -o $@

$(OUT)/tests/test_%: tests/unit/test_%.c $(SAN_OBJS) $(SAN_TESTLIB) | $(OUT)/tests
	$(call msg,CC-SAN,$@)
	$(Q)$(CC) $(UNIT_CFLAGS) $< $(SAN_OBJS) $(SAN_TESTLIB) -o $@ $(LDLIBS) -lcmocka -ldl

# `make unit`: every unit test under the sanitizers; fails on the first
# error. `make unit T=reorder` (or T=test_reorder, or several): those only.
UNIT_RUN := $(if $(T),$(foreach t,$(T),$(OUT)/tests/test_$(patsubst test_%,%,$(t))),$(UNIT_BINS))
unit unit-asan: $(UNIT_RUN) $(OUT)/tests/libcxxdemo.so sim
	@set -e; for t in $(UNIT_RUN); do \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		SBT_BUILD=$(abspath $(OUT)) SBT_SRC=$(CURDIR) $$t; done
