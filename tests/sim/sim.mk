# The Spyre simulator: libsenlib.so, libflex.so and the spyre-sim-run workload.
SIM_CFLAGS := -O2 -g -std=gnu11 $(WARN) -D_GNU_SOURCE -fPIC -Itests/sim

sim: $(OUT)/sim/libsenlib.so $(OUT)/sim/libflex.so $(OUT)/spyre-sim-run

$(OUT)/sim/libsenlib.so: tests/sim/senlib.c tests/sim/edu.c tests/sim/sim.h tests/sim/edu.h | $(OUT)/sim
	$(call msg,CC,$@)
	$(Q)$(CC) $(SIM_CFLAGS) -shared -Wl,-soname,libsenlib.so tests/sim/senlib.c tests/sim/edu.c -o $@ -lpthread

$(OUT)/sim/libflex.so: tests/sim/flex.c tests/sim/sim.h $(OUT)/sim/libsenlib.so
	$(call msg,CC,$@)
	$(Q)$(CC) $(SIM_CFLAGS) -shared -Wl,-soname,libflex.so $< -o $@ \
		-L$(OUT)/sim -lsenlib -Wl,-rpath,'$$ORIGIN' -lpthread

$(OUT)/spyre-sim-run: tests/sim/run.c tests/sim/sim.h $(OUT)/sim/libflex.so
	$(call msg,CC,$@)
	$(Q)$(CC) $(SIM_CFLAGS) $< -o $@ -L$(OUT)/sim -lflex -lsenlib \
		-Wl,-rpath,'$$ORIGIN/sim' -lpthread
