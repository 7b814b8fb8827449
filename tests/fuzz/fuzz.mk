# Fuzzing the capture reader and all it feeds, with libFuzzer (clang).
FUZZ_SRCS   := capture meta format names correlate hashmap strtab pb perfetto report histogram
FUZZ_FLAGS  := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
               -std=gnu11 -D_GNU_SOURCE -DSBT_VERSION='"$(VERSION)"' -I$(OUT) -Ibpf -Iuser -Itests/lib
FUZZ_SECONDS ?= 60

$(OUT)/fuzz/fuzz_capture: tests/fuzz/fuzz_capture.c $(patsubst %,user/%.c,$(FUZZ_SRCS)) \
		$(USER_HDRS) bpf/events.h | $(OUT)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(FUZZ_FLAGS) $< $(patsubst %,user/%.c,$(FUZZ_SRCS)) -o $@

$(OUT)/fuzz/seeds: tests/fuzz/seeds.c tests/lib/synth.c user/capture.c | $(OUT)/fuzz
	$(call msg,CC,$@)
	$(Q)$(CC) -O1 -g -std=gnu11 $(WARN) -D_GNU_SOURCE -Ibpf -Iuser -Itests/lib $^ -o $@

$(OUT)/fuzz:
	$(Q)mkdir -p $@

# make fuzz: FUZZ_SECONDS (60) of fuzzing from the seeds; crashes land in build/fuzz/
fuzz: $(OUT)/fuzz/fuzz_capture $(OUT)/fuzz/seeds
	$(Q)mkdir -p $(OUT)/fuzz/corpus
	$(Q)$(OUT)/fuzz/seeds $(OUT)/fuzz/corpus
	$(Q)cd $(OUT)/fuzz && ./fuzz_capture -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-print_final_stats=1 corpus 2>&1 | grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|==|SUMMARY|Done)" ; \
		test $${PIPESTATUS[0]} -eq 0 && echo "fuzz: no crash in $(FUZZ_SECONDS) s"
