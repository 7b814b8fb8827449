// SPDX-License-Identifier: GPL-2.0-only
// A C++ library for the symbol tests: overloads, a static member, a
// template instance, a nested namespace and a C function.
namespace demo {
struct Widget {
	Widget();
	int run(int);
	int run(double);
	static long count();
};
Widget::Widget() {}
int Widget::run(int x) { return x + 1; }
int Widget::run(double d) { return (int)d + 2; }
long Widget::count() { return 3; }
template <typename T> T twice(T v) { return v * 2; }
template int twice<int>(int);
namespace inner {
void deep() {}
}
} // namespace demo
extern "C" int plain_c(void) { return 4; }
