// SPDX-License-Identifier: GPL-2.0-only
/*
 * A C++ stand-in for libflex whose runtime calls throw, as the real C++
 * runtime may: launchH2D throws on a zero-byte copy, and synchronize
 * catches a throw from a call it makes. Traced, the app must behave
 * exactly as untraced (no uretprobe may break the unwinding), and each
 * throw shows as a call without return.
 */
#include <cstring>
#include <stdexcept>

namespace flex {
struct RuntimeStream {
	int launchH2D(void *dev, const void *host, unsigned long bytes);
	int synchronize();
};

__attribute__((noinline)) int RuntimeStream::launchH2D(void *dev, const void *host,
						      unsigned long bytes)
{
	if (!bytes)
		throw std::invalid_argument("launchH2D: zero bytes");
	std::memcpy(dev, host, bytes);
	return 0;
}

/* calls launchH2D with nothing to copy and takes its throw itself */
__attribute__((noinline)) int RuntimeStream::synchronize()
{
	char a[8] = { 0 }, b[8] = { 0 };

	try {
		launchH2D(a, b, 0);
	} catch (const std::invalid_argument &) {
		return 1;
	}
	return 0;
}
} // namespace flex
