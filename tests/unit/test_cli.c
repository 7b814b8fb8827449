// SPDX-License-Identifier: GPL-2.0-only
/* Option parsing of `record`, and the preflight checks behind each error. */
#include <argp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "attach/driver.h"
#include "attach/preflight.h"
#include "capture/names.h"
#include "events.h"
#include "record/cli.h"

static struct record_opts o;
static char err[512];

static int parse(const char *first, ...)
{
	char *argv[32] = { (char *)"spyre-bpftrace" };
	int argc = 1;
	va_list ap;

	va_start(ap, first);
	for (const char *a = first; a; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	cli_free_record(&o);
	return cli_parse_record(argc, argv, &o, ARGP_NO_EXIT | ARGP_NO_ERRS, err, sizeof(err));
}

static void good_command_lines(void **state)
{
	(void)state;
	assert_int_equal(parse("-p", "12", "-p", "13", "-d", "2.5", "-o", "x.sbt", "-v", NULL), 0);
	assert_int_equal(o.npids, 2);
	assert_int_equal(o.pids[1], 13);
	assert_true(o.duration == 2.5);
	assert_string_equal(o.output, "x.sbt");
	assert_int_equal(o.verbose, 1);
	assert_int_equal(o.buffer_size, SBT_DEFAULT_BUFFER);
	assert_int_equal(parse("-c", "./app --x 1", "--probe", "libflex.so:flex::*=wait", "--vfio-path", "/tmp/m/*",
			       "--irq", "33", "--buffer-size", "64M", "-q", NULL),
			 0);
	assert_string_equal(o.command, "./app --x 1");
	assert_null(o.output); /* record picks spyre-bpftrace-<command>.pftrace */
	assert_int_equal(o.nprobes, 1);
	assert_int_equal(o.probes[0].role, SBT_ROLE_WAIT);
	assert_string_equal(o.vfio_paths[0], "/tmp/m/*");
	assert_int_equal(o.irqs[0], 33);
	assert_int_equal(o.buffer_size, 64ul << 20);
	assert_true(o.quiet);
	assert_int_equal(parse("--irq", "0", "-p", "1", "--format", "json", NULL), 0);
	assert_string_equal(o.format, "json");
	assert_int_equal(o.irqs[0], 0);
}

static void expect_error(int ret, const char *msg)
{
	assert_int_not_equal(ret, 0);
	if (!strstr(err, msg))
		fail_msg("error '%s' does not say '%s'", err, msg);
	assert_null(strchr(err, '\n')); /* one line */
}

static void bad_command_lines(void **state)
{
	(void)state;
	expect_error(parse(NULL), "nothing to trace; hint: give -p PID or -c CMD");
	expect_error(parse("-p", "0", NULL), "invalid PID '0'");
	expect_error(parse("-p", "12x", NULL), "invalid PID '12x'");
	expect_error(parse("-p", "99999999999", NULL), "invalid PID");
	expect_error(parse("-p", "1", "-c", "x", NULL), "do not go together");
	expect_error(parse("-p", "1", "-d", "0", NULL), "invalid duration '0'");
	expect_error(parse("-p", "1", "-d", "nan", NULL), "invalid duration");
	expect_error(parse("-p", "1", "-o", "", NULL), "empty output");
	expect_error(parse("-p", "1", "--probe", "x", NULL), "expected LIB:PATTERN");
	expect_error(parse("-p", "1", "--probe", "l.so:f=zz", NULL), "unknown role 'zz'");
	expect_error(parse("-p", "1", "--vfio-path", "/a/*/*", NULL), "at most one '*'");
	expect_error(parse("-p", "1", "--vfio-path", "/a/?", NULL), "no '?' or '['");
	expect_error(parse("-p", "1", "--irq", "-3", NULL), "invalid IRQ '-3'");
	expect_error(parse("-p", "1", "--buffer-size", "1K", NULL), "invalid --buffer-size '1K'");
	expect_error(parse("-p", "1", "--buffer-size", "2G", NULL), "invalid --buffer-size");
	expect_error(parse("-p", "1", "stray", NULL), "unexpected argument 'stray'");
	expect_error(parse("-p", "1", "--format", "xml", NULL), "unknown --format 'xml'");
	expect_error(parse("-p", "1", "--vfio-path", "/m0", "--vfio-path", "/m1", "--vfio-path", "/m2", "--vfio-path",
			   "/m3", "--vfio-path", "/m4", "--vfio-path", "/m5", NULL),
		     "too many --vfio-path");
}

static void value_parsers(void **state)
{
	unsigned long sz;
	size_t pl, sl;
	bool star;

	(void)state;
	assert_int_equal(arg_parse_size("4096", &sz), 0);
	assert_int_equal(sz, 4096);
	assert_int_equal(arg_parse_size("16KiB", &sz), 0);
	assert_int_equal(sz, 16384);
	assert_int_equal(arg_parse_size("1g", &sz), 0);
	assert_int_equal(sz, 1ul << 30);
	assert_int_equal(arg_parse_size("-1", &sz), -1);
	assert_int_equal(arg_parse_size("0", &sz), -1);
	assert_int_equal(arg_parse_size("3X", &sz), -1);
	assert_int_equal(arg_split_glob("/dev/vfio/*", 63, &pl, &sl, &star), 0);
	assert_true(star && pl == 10 && sl == 0);
	assert_int_equal(arg_split_glob("/a/*.dev", 63, &pl, &sl, &star), 0);
	assert_true(star && pl == 3 && sl == 4);
	assert_int_equal(arg_split_glob("/dev/vfio/vfio", 63, &pl, &sl, &star), 0);
	assert_true(!star && pl == 14);
	assert_int_equal(arg_split_glob("", 63, &pl, &sl, &star), -1);
	assert_int_equal(arg_split_glob("/aaaaaaaaaa*", 5, &pl, &sl, &star), -1);
	assert_int_equal(arg_parse_count("64", 1, 1024, &sz), 0);
	assert_int_equal(sz, 64);
	assert_int_equal(arg_parse_count("0", 0, 10, &sz), 0);
	assert_int_equal(sz, 0);
	assert_int_equal(arg_parse_count("0", 1, 10, &sz), -1);
	assert_int_equal(arg_parse_count("11", 1, 10, &sz), -1);
	assert_int_equal(arg_parse_count("-1", 0, ~0ul, &sz), -1);
	assert_int_equal(arg_parse_count(" 5", 0, 10, &sz), -1);
	assert_int_equal(arg_parse_count("5x", 0, 10, &sz), -1);
	assert_int_equal(arg_parse_count("99999999999999999999999", 0, ~0ul, &sz), -1);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* --device: both forms, the Spyre default, 'all', and vendor:device
 * filters becoming the addresses of the matching cards present. */
static void device_filters(void **state)
{
	char dir[] = "/tmp/sbt-pci-XXXXXX", path[256], desc[256];
	const char *const cards[][3] = { { "0000:3a:00.0", "0x1014", "0x06a7" },
					 { "0000:3b:00.0", "0x1014", "0x06a8" },
					 { "0000:00:1f.2", "0x8086", "0x2922" } };

	(void)state;
	assert_int_equal(devfilter_bdf("0000:3a:00.0"), 0x3a00);
	assert_int_equal(devfilter_bdf("3a:01.2"), 0x3a0a);
	assert_int_equal(devfilter_bdf("0001:00:1f.7"), 0x100ff);
	assert_int_equal(devfilter_bdf("0000:3a:20.0"), SBT_BDF_NONE); /* device > 31 */
	assert_int_equal(devfilter_bdf("0000:3a:00.0x"), SBT_BDF_NONE);
	sbt_bdf_str(0x100ff, path, sizeof(path));
	assert_string_equal(path, "0001:00:1f.7");

	assert_int_equal(parse("-p", "1", NULL), 0);
	devfilter_describe(&o.devices, desc, sizeof(desc));
	assert_string_equal(desc, "1014:06a7, 1014:06a8");
	assert_int_equal(parse("-p", "1", "--device", "all", NULL), 0);
	assert_int_equal(o.devices.n, 0);
	assert_int_equal(
		parse("-p", "1", "--device", "1234:11e8", "--device", "3a:00.0", "--driver-probes", "kprobe", NULL), 0);
	assert_int_equal(o.driver_mode, DRIVER_KPROBE);
	devfilter_describe(&o.devices, desc, sizeof(desc));
	assert_string_equal(desc, "1234:11e8, 0000:3a:00.0");
	expect_error(parse("-p", "1", "--device", "12345:1", NULL), "invalid --device '12345:1'");
	expect_error(parse("-p", "1", "--device", "all", "--device", "3a:00.0", NULL), "do not go together");
	expect_error(parse("-p", "1", "--driver-probes", "x", NULL), "unknown --driver-probes");

	/* a sysfs tree with two Spyre cards and something else */
	assert_non_null(mkdtemp(dir));
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, cards[i][0]);
		assert_int_equal(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/%s/vendor", dir, cards[i][0]);
		write_file(path, cards[i][1]);
		snprintf(path, sizeof(path), "%s/%s/device", dir, cards[i][0]);
		write_file(path, cards[i][2]);
	}
	assert_int_equal(parse("-p", "1", NULL), 0);
	assert_int_equal(devfilter_expand(&o.devices, dir), 2);
	assert_true(devfilter_wants_bdf(&o.devices, 0x3a00));
	assert_true(devfilter_wants_bdf(&o.devices, 0x3b00));
	assert_false(devfilter_wants_bdf(&o.devices, 0xfa)); /* 00:1f.2 */
	for (int i = 0; i < 3; i++) {
		for (int k = 1; k < 3; k++) {
			snprintf(path, sizeof(path), "%s/%s/%s", dir, cards[i][0], k == 1 ? "vendor" : "device");
			unlink(path);
		}
		snprintf(path, sizeof(path), "%s/%s", dir, cards[i][0]);
		rmdir(path);
	}
	rmdir(dir);
}

/* a thread that says its id, then waits to be told to end */
static void *sleeper(void *arg)
{
	pid_t *tid = arg;

	__atomic_store_n(tid, gettid(), __ATOMIC_SEQ_CST);
	while (__atomic_load_n(tid, __ATOMIC_SEQ_CST))
		usleep(1000);
	return NULL;
}

static void preflight_errors(void **state)
{
	const uint64_t all = 1ull << 39 | 1ull << 38 | 1ull << 21;
	char note[160];
	pthread_t th;
	pid_t pid, tid = 0;

	(void)state;
	assert_int_equal(sbt_check_privileges(0, 0, err, sizeof(err)), 0);
	assert_int_equal(sbt_check_privileges(1000, all, err, sizeof(err)), 0);
	expect_error(sbt_check_privileges(1000, 0, err, sizeof(err)), "hint: run with sudo");
	expect_error(sbt_check_privileges(1000, 1ull << 39, err, sizeof(err)), "CAP_PERFMON");
	assert_int_equal(sbt_check_btf("/proc/self/status", err, sizeof(err)), 0);
	expect_error(sbt_check_btf("/nonexistent/btf/vmlinux", err, sizeof(err)),
		     "kernel BTF not available (/nonexistent/btf/vmlinux: No such file or directory)");
	pid = 1;
	assert_int_equal(sbt_resolve_pid("/proc", &pid, note, sizeof(note), err, sizeof(err)), 0);
	assert_int_equal(pid, 1);
	assert_string_equal(note, "");
	pid = 4194303;
	expect_error(sbt_resolve_pid("/proc", &pid, note, sizeof(note), err, sizeof(err)), "no such process: 4194303");
	pid = -5;
	expect_error(sbt_resolve_pid("/proc", &pid, note, sizeof(note), err, sizeof(err)), "no such process");
	/* kthreadd, a kernel thread */
	pid = 2;
	expect_error(sbt_resolve_pid("/proc", &pid, note, sizeof(note), err, sizeof(err)), "PID 2 is a kernel thread");
	/* a thread of ours: its process, with a note */
	pthread_create(&th, NULL, sleeper, &tid);
	while (!__atomic_load_n(&tid, __ATOMIC_SEQ_CST))
		;
	pid = tid;
	assert_int_equal(sbt_resolve_pid("/proc", &pid, note, sizeof(note), err, sizeof(err)), 0);
	assert_int_equal(pid, getpid());
	assert_non_null(strstr(note, "is a thread of process"));
	__atomic_store_n(&tid, 0, __ATOMIC_SEQ_CST);
	pthread_join(th, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(good_command_lines), cmocka_unit_test(bad_command_lines),
		cmocka_unit_test(value_parsers),      cmocka_unit_test(device_filters),
		cmocka_unit_test(preflight_errors),
	};
	int failed = cmocka_run_group_tests_name("cli", tests, NULL, NULL);

	cli_free_record(&o);
	return failed;
}
