// SPDX-License-Identifier: GPL-2.0-only
/* Symbol reading, demangling and probe matching, on the simulator's
 * libraries and on a C++ library built for the test. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "events.h"
#include "probes/demangle.h"
#include "probes/elfsyms.h"
#include "probes/probes.h"

static const char *build_dir(void)
{
	const char *d = getenv("SBT_BUILD");

	return d ? d : "build";
}

static void path_of(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", build_dir(), rel);
}

static int scan(struct probe_set *ps, const struct probe_spec *specs, size_t n, const char *rel)
{
	char path[512], err[512];
	int ret;

	path_of(path, sizeof(path), rel);
	ret = probe_set_scan_lib(ps, specs, n, path, err, sizeof(err));
	if (ret < 0)
		fail_msg("scan %s: %s", path, err);
	return ret;
}

static const struct probe_site *site_named(const struct probe_set *ps, const char *name)
{
	for (size_t i = 0; i < ps->n; i++)
		if (!strcmp(ps->sites[i].name, name))
			return &ps->sites[i];
	return NULL;
}

/* The file offset is right if the bytes there are the function's code as
 * loaded: compare with the bytes at dlsym's address. */
static void assert_offset_is_code(const char *rel, const struct probe_site *s)
{
	char path[512];
	unsigned char file_bytes[16];
	void *h, *fn;
	FILE *f;

	path_of(path, sizeof(path), rel);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);
	fn = dlsym(h, s->symbol);
	assert_non_null(fn);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, (long)s->offset, SEEK_SET), 0);
	assert_int_equal(fread(file_bytes, 1, sizeof(file_bytes), f), sizeof(file_bytes));
	fclose(f);
	assert_memory_equal(file_bytes, fn, sizeof(file_bytes));
	dlclose(h);
}

static void builtin_table_resolves_simulator(void **state)
{
	static const struct {
		const char *name, *lib;
		int role;
	} want[] = {
		{ "flex::RuntimeStream::launchH2D", "sim/libflex.so", SBT_ROLE_COPY_IN },
		{ "flex::RuntimeStream::launchD2H", "sim/libflex.so", SBT_ROLE_COPY_OUT },
		{ "flex::RuntimeStream::launchCompute", "sim/libflex.so", SBT_ROLE_COMPUTE },
		{ "flex::RuntimeStream::launchOperation", "sim/libflex.so", SBT_ROLE_LAUNCH },
		{ "flex::RuntimeStream::synchronize", "sim/libflex.so", SBT_ROLE_WAIT },
		{ "flex::FlexAllocator::allocate", "sim/libflex.so", SBT_ROLE_ALLOC },
		{ "flex::FlexAllocator::deallocate", "sim/libflex.so", SBT_ROLE_FREE },
		{ "senlib::ControlBlockInterface::QueueControlBlocksSBF", "sim/libsenlib.so", SBT_ROLE_SUBMIT },
		{ "senlib::ResponseBlockInterface::ReceiveResponsesSBF", "sim/libsenlib.so", SBT_ROLE_COMPLETE },
		{ "senlib::PfIommuMapper::Map", "sim/libsenlib.so", SBT_ROLE_MAP },
		{ "senlib::PfIommuMapper::Unmap", "sim/libsenlib.so", SBT_ROLE_UNMAP },
	};
	struct probe_set ps = { 0 };

	(void)state;
	assert_int_equal(scan(&ps, sbt_builtin_probes, sbt_n_builtin_probes, "sim/libflex.so"), 7);
	assert_int_equal(scan(&ps, sbt_builtin_probes, sbt_n_builtin_probes, "sim/libsenlib.so"), 4);
	/* scanning again adds nothing */
	assert_int_equal(scan(&ps, sbt_builtin_probes, sbt_n_builtin_probes, "sim/libflex.so"), 0);
	assert_int_equal(ps.n, 11);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct probe_site *s = site_named(&ps, want[i].name);

		assert_non_null(s);
		assert_int_equal(s->role, want[i].role);
		assert_true(strncmp(s->symbol, "_ZN", 3) == 0);
		assert_offset_is_code(want[i].lib, s);
	}
	assert_int_equal(site_named(&ps, "flex::RuntimeStream::launchH2D")->bytes_arg, 3);
	probe_set_free(&ps);
}

static void cxx_patterns(void **state)
{
	struct probe_spec specs[] = {
		{ "libcxxdemo.so", "demo::Widget::run(int)", SBT_ROLE_COPY_IN, -1 },
		{ "libcxxdemo.so", "demo::Widget::run", SBT_ROLE_USER, -1 },
		{ "libcxxdemo.so", "demo::twice<*>", SBT_ROLE_COMPUTE, -1 },
		{ "libcxxdemo.so", "demo::inner::*", SBT_ROLE_WAIT, -1 },
		{ "libcxxdemo.so", "plain_c", SBT_ROLE_ALLOC, -1 },
		{ "libother.so", "demo::Widget::count", SBT_ROLE_FREE, -1 },
	};
	struct probe_set ps = { 0 };
	int runs = 0, by_sig = 0;

	(void)state;
	assert_int_equal(scan(&ps, specs, 6, "tests/libcxxdemo.so"), 5);
	for (size_t i = 0; i < ps.n; i++) {
		if (!strcmp(ps.sites[i].name, "demo::Widget::run")) {
			runs++;
			/* the first spec (with a signature) took only run(int) */
			by_sig += ps.sites[i].role == SBT_ROLE_COPY_IN;
		}
	}
	assert_int_equal(runs, 2);
	assert_int_equal(by_sig, 1);
	assert_non_null(site_named(&ps, "demo::twice<int>"));
	assert_int_equal(site_named(&ps, "demo::inner::deep")->role, SBT_ROLE_WAIT);
	assert_int_equal(site_named(&ps, "plain_c")->role, SBT_ROLE_ALLOC);
	/* the spec for another library matched nothing here */
	assert_null(site_named(&ps, "demo::Widget::count"));
	assert_offset_is_code("tests/libcxxdemo.so", site_named(&ps, "plain_c"));
	probe_set_free(&ps);
}

static void demangle_forms(void **state)
{
	char *a = sbt_demangle("_ZN4flex13RuntimeStream9launchH2DEPvPKvm", false);
	char *b = sbt_demangle("_ZN4flex13RuntimeStream9launchH2DEPvPKvm", true);
	char *c = sbt_demangle("plain_c", true);
	char *d = sbt_demangle("_Znot_really", false);

	(void)state;
	assert_string_equal(a, "flex::RuntimeStream::launchH2D");
	assert_string_equal(b, "flex::RuntimeStream::launchH2D(void*, void const*, unsigned long)");
	assert_string_equal(c, "plain_c");
	assert_string_equal(d, "_Znot_really");
	free(a);
	free(b);
	free(c);
	free(d);
}

static void library_names(void **state)
{
	struct probe_spec flex = { "libflex.so", "x", 0, -1 };
	struct probe_spec sen = { "libsenlib*.so", "x", 0, -1 };
	struct probe_spec path = { "/opt/x/libflex.so", "x", 0, -1 };

	(void)state;
	assert_true(probe_spec_wants_lib(&flex, "/opt/ibm/spyre/runtime/lib/libflex.so"));
	assert_true(probe_spec_wants_lib(&flex, "/usr/lib/libflex.so.1.2"));
	assert_false(probe_spec_wants_lib(&flex, "/usr/lib/libflexible.so"));
	assert_false(probe_spec_wants_lib(&flex, "/usr/lib/libflex.so-old"));
	assert_true(probe_spec_wants_lib(&sen, "/x/libsenlib.so"));
	assert_true(probe_spec_wants_lib(&sen, "/x/libsenlib_pf.so.3"));
	assert_false(probe_spec_wants_lib(&sen, "/x/libsen.so"));
	assert_true(probe_spec_wants_lib(&path, "/opt/x/libflex.so"));
	assert_false(probe_spec_wants_lib(&path, "/opt/y/libflex.so"));
}

static void probe_spec_strings(void **state)
{
	struct probe_spec s;
	char err[256];
	const char *a = "libflex.so:flex::RuntimeStream::*";
	const char *b = "/lib/x.so:ns::f(int)=copy-in";
	const char *c = "libflex.so", *d = "lib.so:f=bogus", *e = ":f", *f = "flex::Runtime::x";

	(void)state;
	assert_int_equal(probe_spec_parse(a, &s, err, sizeof(err)), 0);
	assert_string_equal(s.lib, "libflex.so");
	assert_string_equal(s.pattern, "flex::RuntimeStream::*");
	assert_int_equal(s.role, SBT_ROLE_USER);
	probe_spec_free(&s);
	assert_int_equal(probe_spec_parse(b, &s, err, sizeof(err)), 0);
	assert_string_equal(s.lib, "/lib/x.so");
	assert_string_equal(s.pattern, "ns::f(int)");
	assert_int_equal(s.role, SBT_ROLE_COPY_IN);
	probe_spec_free(&s);
	assert_int_equal(probe_spec_parse(c, &s, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "expected LIB:PATTERN"));
	assert_int_equal(probe_spec_parse(d, &s, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown role 'bogus'"));
	assert_int_equal(probe_spec_parse(e, &s, err, sizeof(err)), -1);
	/* only "::" separators: no library given */
	assert_int_equal(probe_spec_parse(f, &s, err, sizeof(err)), -1);
}

/* The built-in table, behind one user spec. */
static size_t with_builtins(struct probe_spec *specs, struct probe_spec user)
{
	specs[0] = user;
	memcpy(specs + 1, sbt_builtin_probes, sbt_n_builtin_probes * sizeof(*specs));
	return 1 + sbt_n_builtin_probes;
}

static void user_spec_refines_builtin(void **state)
{
	struct probe_spec specs[64];
	struct probe_set ps = { 0 };
	const struct probe_site *s;
	size_t n;

	(void)state;
	/* no =ROLE: the built-in role and byte count stay */
	n = with_builtins(specs,
			  (struct probe_spec){ "libflex.so", "flex::RuntimeStream::*", SBT_ROLE_USER, -1, false });
	scan(&ps, specs, n, "sim/libflex.so");
	s = site_named(&ps, "flex::RuntimeStream::synchronize");
	assert_non_null(s);
	assert_int_equal(s->role, SBT_ROLE_WAIT);
	assert_string_equal(s->pattern, "flex::RuntimeStream::*");
	s = site_named(&ps, "flex::RuntimeStream::launchH2D");
	assert_int_equal(s->role, SBT_ROLE_COPY_IN);
	assert_int_equal(s->bytes_arg, 3);
	probe_set_free(&ps);
	/* =ROLE: that role */
	n = with_builtins(specs, (struct probe_spec){ "libflex.so", "flex::RuntimeStream::synchronize", SBT_ROLE_USER,
						      -1, true });
	scan(&ps, specs, n, "sim/libflex.so");
	assert_int_equal(site_named(&ps, "flex::RuntimeStream::synchronize")->role, SBT_ROLE_USER);
	probe_set_free(&ps);
}

/* GCC splits throwing paths into "f.cold": no function of its own, its
 * returns are f's. Every probed function has its return sites. */
static void cold_parts_and_return_sites(void **state)
{
	struct probe_set ps = { 0 };

	(void)state;
	assert_int_equal(scan(&ps, sbt_builtin_probes, sbt_n_builtin_probes, "sim/cxx/libflex.so"), 2);
	for (size_t i = 0; i < ps.n; i++) {
		assert_null(ps.sites[i].refused);
		assert_true(ps.sites[i].nrets >= 1);
		assert_true(ps.sites[i].size > 0);
	}
	assert_int_equal(ps.uprobes, 2 + ps.sites[0].nrets + ps.sites[1].nrets);
	probe_set_free(&ps);
	/* the cap refuses what does not fit, with the reason */
	ps.max_uprobes = 4;
	scan(&ps, sbt_builtin_probes, sbt_n_builtin_probes, "sim/libflex.so");
	assert_true(ps.uprobes <= 4);
	for (size_t i = 0, refused = 0; i < ps.n; i++)
		if (ps.sites[i].refused) {
			assert_non_null(strstr(ps.sites[i].refused, "--max-probes"));
			assert_true(++refused <= ps.n);
		}
	assert_non_null(ps.sites[ps.n - 1].refused);
	probe_set_free(&ps);
}

/* A search's findings taken into the attacher's set (another thread read
 * them): numbered on, one library read by both only once, the cap
 * applied where the set is. */
static void adopt_found(void **state)
{
	struct probe_set dst = { 0 }, src = { 0 }, again = { 0 };
	size_t first;
	int n;

	(void)state;
	scan(&dst, sbt_builtin_probes, sbt_n_builtin_probes, "sim/cxx/libflex.so");
	first = dst.n;
	n = scan(&src, sbt_builtin_probes, sbt_n_builtin_probes, "sim/libflex.so");
	assert_true(n > 0);
	assert_int_equal(probe_set_adopt(&dst, &src), n);
	assert_int_equal(src.n, 0);
	assert_int_equal(src.nlibs, 0);
	assert_int_equal(dst.nlibs, 2);
	for (size_t i = 0; i < dst.n; i++)
		assert_int_equal(dst.sites[i].id, i);
	assert_string_equal(dst.sites[first].attach, dst.libs[1].attach);
	/* the same file read by a second search: nothing of it taken twice */
	scan(&again, sbt_builtin_probes, sbt_n_builtin_probes, "sim/libflex.so");
	assert_int_equal(probe_set_adopt(&dst, &again), 0);
	assert_int_equal(dst.nlibs, 2);
	probe_set_free(&dst);
	/* the cap is the destination's: what is past it is refused there */
	dst.max_uprobes = 4;
	scan(&src, sbt_builtin_probes, sbt_n_builtin_probes, "sim/libflex.so");
	assert_int_equal(probe_set_adopt(&dst, &src), n);
	assert_true(dst.uprobes <= 4);
	assert_non_null(dst.sites[dst.n - 1].refused);
	assert_non_null(strstr(dst.sites[dst.n - 1].refused, "--max-probes"));
	assert_int_equal(dst.sites[dst.n - 1].nrets, 0);
	probe_set_free(&dst);
}

static void elf_errors(void **state)
{
	char err[256];

	(void)state;
	assert_int_equal(elf_for_each_function("/nonexistent.so", NULL, NULL, NULL, err, sizeof(err)), -2);
	assert_non_null(strstr(err, "No such file"));
	assert_true(elf_for_each_function("/etc/hostname", NULL, NULL, NULL, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "not an ELF file"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(builtin_table_resolves_simulator),
		cmocka_unit_test(cxx_patterns),
		cmocka_unit_test(demangle_forms),
		cmocka_unit_test(library_names),
		cmocka_unit_test(probe_spec_strings),
		cmocka_unit_test(elf_errors),
		cmocka_unit_test(user_spec_refines_builtin),
		cmocka_unit_test(cold_parts_and_return_sites),
		cmocka_unit_test(adopt_found),
	};

	return cmocka_run_group_tests_name("probes", tests, NULL, NULL);
}
