// SPDX-License-Identifier: GPL-2.0-only
/*
 * spyre-sim-throw N: calls the C++ stand-in runtime N times; every third
 * launchH2D throws and is caught here, every synchronize catches a throw
 * inside the runtime; then one setjmp/longjmp round trip. Prints what it
 * did; exit 0. Traced or not, the output must be the same.
 */
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace flex {
struct RuntimeStream {
	int launchH2D(void *dev, const void *host, unsigned long bytes);
	int synchronize();
};
} // namespace flex

extern "C" int flex_sim_setjmp(void *buf);
extern "C" void flex_sim_longjmp(void *buf, int val) __attribute__((noreturn));

int main(int argc, char **argv)
{
	flex::RuntimeStream s;
	char dev[64], host[64] = "payload";
	long n = argc > 1 ? std::atol(argv[1]) : 9, thrown = 0, ok = 0, caught_inside = 0;
	void *buf[8];
	volatile int jumps = 0;

	for (long i = 0; i < n; i++) {
		try {
			s.launchH2D(dev, host, i % 3 == 0 ? 0 : sizeof(host));
			ok++;
		} catch (const std::invalid_argument &) {
			thrown++;
		}
		caught_inside += s.synchronize();
	}
	if (flex_sim_setjmp(buf) == 0) {
		jumps = jumps + 1;
		flex_sim_longjmp(buf, 1);
	}
	std::printf("launches=%ld ok=%ld thrown=%ld caught_inside=%ld jumps=%d\n", n, ok, thrown,
		    caught_inside, (int)jumps);
	return 0;
}
