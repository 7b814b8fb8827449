# The Spyre simulator: libsenlib.so, libflex.so and the spyre-sim-run workload.
SIM_CFLAGS := -O2 -g -std=gnu11 $(WARN) -D_GNU_SOURCE -fPIC -Itests/sim

# (the C++ stand-in is not cross-built: the guests have no C++ runtime)
sim: $(OUT)/sim/libsenlib.so $(OUT)/sim/libflex.so $(OUT)/spyre-sim-run \
     $(OUT)/sim/libspyre_simrun.so $(OUT)/spyre-sim-dlopen $(OUT)/spyre-syscall-loop \
     $(if $(CROSS),,$(OUT)/spyre-sim-throw $(OUT)/spyre-mock-vfio)

$(OUT)/sim/libsenlib.so: tests/sim/senlib.c tests/sim/edu.c tests/sim/virtio.c tests/sim/sim.h tests/sim/edu.h tests/sim/virtio.h | $(OUT)/sim
	$(call msg,CC,$@)
	$(Q)$(CC) $(SIM_CFLAGS) -shared -Wl,-soname,libsenlib.so tests/sim/senlib.c tests/sim/edu.c tests/sim/virtio.c -o $@ -lpthread

$(OUT)/sim/libflex.so: tests/sim/flex.c tests/sim/sim.h $(OUT)/sim/libsenlib.so
	$(call msg,CC,$@)
	$(Q)$(CC) $(SIM_CFLAGS) -shared -Wl,-soname,libflex.so $< -o $@ \
		-L$(OUT)/sim -lsenlib -Wl,-rpath,'$$ORIGIN' -lpthread

$(OUT)/spyre-sim-run: tests/sim/run.c tests/sim/sim.h $(OUT)/sim/libflex.so
	$(call msg,CC,$@)
	$(Q)$(CC) $(SIM_CFLAGS) $< -o $@ -L$(OUT)/sim -lflex -lsenlib \
		-Wl,-rpath,'$$ORIGIN/sim' -lpthread

# The workload as a library, and a launcher that dlopen()s it: the runtime
# arrives after start, from a directory of its own.
$(OUT)/sim/libspyre_simrun.so: tests/sim/run.c tests/sim/sim.h $(OUT)/sim/libflex.so
	$(call msg,CC,$@)
	$(Q)$(CC) $(SIM_CFLAGS) -DSIM_RUN_LIB -shared $< -o $@ -L$(OUT)/sim -lflex -lsenlib \
		-Wl,-rpath,'$$ORIGIN' -lpthread

$(OUT)/spyre-syscall-loop: tests/sim/syscall_loop.c
	$(call msg,CC,$@)
	$(Q)$(CC) $(SIM_CFLAGS) $< -o $@

# Mock VFIO files whose ioctls succeed (FUSE): the daemon's success path
# and a slow ioctl, on this machine.
$(OUT)/spyre-mock-vfio: tests/sim/mock_vfio.c
	$(call msg,CC,$@)
	$(Q)$(CC) $(SIM_CFLAGS) $(shell pkg-config --cflags fuse3) $< -o $@ $(shell pkg-config --libs fuse3)

$(OUT)/spyre-sim-dlopen: tests/sim/dlopen.c
	$(call msg,CC,$@)
	$(Q)$(CC) $(SIM_CFLAGS) $< -o $@ -ldl

# A C++ stand-in runtime that throws, with a setjmp/longjmp pair of its own.
$(OUT)/sim/cxx/libflex.so: tests/sim/cxx_flex.cpp tests/sim/ctxswitch.S
	$(Q)mkdir -p $(@D)
	$(call msg,CXX,$@)
	$(Q)$(CXX) -O2 -g -fPIC -shared -Wall -Wextra -Werror -Wl,-soname,libflex.so $^ -o $@

$(OUT)/spyre-sim-throw: tests/sim/throw_app.cpp $(OUT)/sim/cxx/libflex.so
	$(call msg,CXX,$@)
	$(Q)$(CXX) -O2 -g -Wall -Wextra -Werror $< -o $@ -L$(OUT)/sim/cxx -lflex \
		-Wl,-rpath,'$$ORIGIN/sim/cxx'
