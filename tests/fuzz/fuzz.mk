# Fuzzing with libFuzzer (clang): the capture reader and all it feeds
# (correlation, report, Perfetto and Chrome JSON writers), inspect, the
# command line and probe-spec parsers, the return-site decoder, the
# bounded ELF reader (a library as a hostile process may craft it), the
# JSON reader `merge` takes PyTorch traces with, the kubelet's answer the
# daemon reads, the head of a request to the daemon's /metrics server, and
# merge whole (a kineto trace and a capture through store, layout, links
# and both writers).
# `make fuzz FUZZ_SECONDS=N` runs each target N seconds (make test: 10).
FUZZ_TARGETS := capture inspect cli retsites elf json kubelet http merge
FUZZ_CFLAGS := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all \
               -std=gnu11 -D_GNU_SOURCE -DSBT_VERSION='"$(VERSION)"' -I$(OUT) -Ibpf -Iuser -Itests/lib
FUZZ_SECONDS ?= 60
FUZZ_OBJS   := $(patsubst user/%.c,$(OUT)/obj-fuzz/%.o,$(LIB_SRCS)) $(OUT)/obj-fuzz/lib-json_check.o
.SECONDARY: $(OUT)/obj-fuzz/lib-json_check.o $(FUZZ_OBJS)

# the library, instrumented for coverage once, linked into every target
$(OUT)/obj-fuzz/%.o: user/%.c | $(OUT)/obj-fuzz $(OUT)/spyre.skel.h
	$(call msg,CC-FUZZ,$<)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(DEPFLAGS) -c $< -o $@

$(OUT)/obj-fuzz/lib-%.o: tests/lib/%.c | $(OUT)/obj-fuzz
	$(call msg,CC-FUZZ,$<)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(DEPFLAGS) -c $< -o $@

$(OUT)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS) | $(OUT)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_OBJS) -o $@ $(LDLIBS)

$(OUT)/fuzz/seeds: tests/fuzz/seeds.c tests/lib/synth.c user/capture/capture.c user/capture/byteorder.c user/base/log.c | $(OUT)/fuzz
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -std=gnu11 $(WARN) -D_GNU_SOURCE -Ibpf -Iuser -Itests/lib $^ -o $@

$(OUT)/fuzz $(OUT)/obj-fuzz:
	$(Q)mkdir -p $@

# Seeds: synthetic captures; their Perfetto conversions for inspect; a few
# command lines; a few function bodies (push rbp ... ret, a tail jump).
fuzz-seeds: $(OUT)/fuzz/seeds $(TOOL) $(OUT)/sim/libflex.so
	$(Q)mkdir -p $(addprefix $(OUT)/fuzz/corpus-,$(FUZZ_TARGETS))
	$(Q)$(OUT)/fuzz/seeds $(OUT)/fuzz/corpus-capture
	$(Q)for f in $(OUT)/fuzz/corpus-capture/*; do \
		$(TOOL) convert $$f -o $(OUT)/fuzz/corpus-inspect/$$(basename $$f).pftrace >/dev/null 2>&1 || true; done
	$(Q)printf -- '-p\0001234\0-d\0005\0--probe\0libflex.so:flex::*=wait' > $(OUT)/fuzz/corpus-cli/p
	$(Q)printf -- '-c\000./app --x\0--device\0000:3a:00.0\0--vfio-path\0/tmp/m/*' > $(OUT)/fuzz/corpus-cli/c
	$(Q)printf '\x06\x55\x48\x89\xe5\x5d\xc3\x90\xe9\x00\x10\x00\x00\xc3' > $(OUT)/fuzz/corpus-retsites/a
	$(Q)cp tests/torch/fixture/torch.json $(OUT)/fuzz/corpus-json/kineto
	$(Q)printf '{"traceEvents":[{"ph":"X","ts":1.5e3,"dur":"2","pid":"a","tid":1,"args":{"k":[1,{"x":null}]}}],"baseTimeNanoseconds":7}' > $(OUT)/fuzz/corpus-json/small
	$(Q)printf '[{"ph":"s","id":"0x10","ts":-0.0001,"pid":1,"tid":"\\u00e9\\ud83d\\ude00","bp":"e"}]' > $(OUT)/fuzz/corpus-json/list
	$(Q)printf '\x0a\x2d\x0a\x01\x70\x12\x01\x6e\x1a\x25\x0a\x01\x63\x12\x1d\x0a\x09\x69\x62\x6d\x2e\x63\x6f\x6d\x2f\x73\x12\x07\x33\x62\x3a\x30\x30\x2e\x30\x12\x01\x78\x1a\x04\x0a\x02\x08\x01\x1a\x01\x02' > $(OUT)/fuzz/corpus-kubelet/pod
	$(Q)python3 -c 'import sys, struct; j = open(sys.argv[1], "rb").read(); \
		sys.stdout.buffer.write(struct.pack("<I", len(j)) + j + open(sys.argv[2], "rb").read())' \
		tests/torch/fixture/torch.json tests/torch/fixture/capture.sbt > $(OUT)/fuzz/corpus-merge/fixture
	$(Q)printf 'GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n' > $(OUT)/fuzz/corpus-http/get
	$(Q)printf 'HEAD /healthz HTTP/1.0\n\n' > $(OUT)/fuzz/corpus-http/head
	$(Q)cp $(OUT)/sim/libflex.so $(OUT)/fuzz/corpus-elf/flex
	$(Q)python3 -c 'import sys; sys.path.insert(0, "tests/e2e"); import decoy_elf; decoy_elf.write(sys.argv[1], 20)' \
		$(OUT)/fuzz/corpus-elf/decoy
	$(Q)printf '\x03\x85\xff\x0f\x84\xf8\x0f\x00\x00\xc3\xff\xe0\xff\x24\xc5\x00\x10\x00\x00' > $(OUT)/fuzz/corpus-retsites/b

# make fuzz: each target FUZZ_SECONDS from its corpus; crashes land in build/fuzz/
fuzz: $(addprefix $(OUT)/fuzz/fuzz_,$(FUZZ_TARGETS)) fuzz-seeds
	$(Q)set -e; for t in $(FUZZ_TARGETS); do \
		cd $(abspath $(OUT))/fuzz; \
		len=65536; [ $$t = merge ] && len=262144; \
		ASAN_OPTIONS=detect_leaks=1 ./fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=$$len \
			-print_final_stats=1 corpus-$$t > fuzz_$$t.log 2>&1 || \
			{ tail -40 fuzz_$$t.log; echo "fuzz: $$t crashed; the input is in $(OUT)/fuzz"; exit 1; }; \
		runs=$$(sed -n 's/^stat::number_of_executed_units: *//p' fuzz_$$t.log); \
		cov=$$(grep -o 'cov: [0-9]*' fuzz_$$t.log | tail -1); \
		echo "fuzz: $$t: no crash, $$runs inputs in $(FUZZ_SECONDS) s ($$((runs / $(FUZZ_SECONDS)))/s), $$cov edges"; \
	done

.PHONY: fuzz-seeds
